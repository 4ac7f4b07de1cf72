"""ONNX Runtime in place of an encoder's torch backbone: tokenisation, length-sorted batching, pooling and the
modules after it stay the `Encoder`'s own, so only the backbone forward differs. Inference only: a forward
with gradients enabled is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from dictembed.backends.onnx.graph import FP32_FILE, export_backbone, optimize_graph
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.extras import require
from dictembed.model_folder import ONNX_DIR, ONNX_MANIFEST, is_exported

log = logging.getLogger(__name__)


def physical_cores() -> int:
    """The physical cores this process may use: its CPUs divided by the hyper-threads per core, at least 1."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return logical
    per_core = 0
    for part in siblings.split(","):
        low, _, high = part.partition("-")
        per_core += int(high or low) - int(low) + 1
    return max(1, logical // max(1, per_core))


def session_options(threads: int) -> Any:
    """ORT session options: every graph optimisation, `threads` intra-op threads, idle threads asleep."""
    ort = require("onnx", "onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # Idle threads sleep instead of spinning between runs: +6 % int8 sentences/s on 2 cores (each batch's
    # tokenisation and pooling run on the Python thread in between), and no CPU burnt while idle.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


class OnnxBackbone:
    """An ONNX Runtime session called like the torch backbone: keyword tensors in, `.last_hidden_state` out.

    Two sessions hold the graph: `session`, whose runs use `threads` intra-op threads (default: the physical
    cores), for direct calls and for an encode of fewer batches than threads; and `single`, one thread per
    run, which `Encoder.encode` runs on `threads` batches at once from worker threads (inside `one_thread()`;
    a session is thread-safe). On 2 cores the second way encodes int8 26 % faster: the fine-grained
    operators (LayerNorm, GELU on a few hundred rows) spend much of a split run synchronising its threads."""

    def __init__(self, path: str | Path, threads: int | None = None, manifest: dict[str, Any] | None = None) -> None:
        """`manifest`: what the graph is (an export's `onnx/export.json`)."""
        if threads is not None and threads < 1:
            raise DictEmbedError(f"threads must be at least 1, got {threads}")
        self.threads = threads or physical_cores()
        self.manifest: dict[str, Any] = dict(manifest or {})
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"ONNX model file {self.path} is missing")
        self.session = self._session(self.threads)
        self.single = self.session if self.threads == 1 else self._session(1)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self._local = threading.local()

    def _session(self, threads: int) -> Any:
        ort = require("onnx", "onnxruntime")
        try:
            return ort.InferenceSession(
                str(self.path), sess_options=session_options(threads), providers=["CPUExecutionProvider"]
            )
        except Exception as err:  # onnxruntime raises its own exception types (Fail, InvalidProtobuf, ...)
            detail = " ".join(str(err).split())[:200] or type(err).__name__
            raise ModelLoadError(f"ONNX model file {self.path} is corrupt or unreadable ({detail})") from None

    @property
    def identity(self) -> str:
        """A short name of the graph, e.g. "onnx-int8-1a2b3c4d": the quantisation and a hash of the whole manifest
        (its settings, the fusions), so results of different graphs of the same weights are never filed together."""
        digest = hashlib.sha1(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()[:8]
        return f"onnx-{self.manifest.get('quantize') or 'fp32'}-{digest}"

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """Calls from this thread run on the single-threaded session while inside."""
        before, self._local.single = getattr(self._local, "single", False), True
        try:
            yield
        finally:
            self._local.single = before

    def run_batches(
        self,
        forward: Callable[[Any], torch.Tensor],
        batches: Iterable[Any],
        threads: int,
        contexts: Callable[[], tuple[contextlib.AbstractContextManager, ...]] = tuple,
    ) -> Iterator[torch.Tensor]:
        """`forward` of each batch, in order, up to `threads` at once on worker threads, each run on the
        single-threaded session inside `contexts()` (per-thread state such as the grad mode and autocast). The
        batches are drawn here, on the caller's thread, in order. On an error or an interrupt the batches not
        yet started are dropped, not run."""

        def run(batch: Any) -> torch.Tensor:
            with contextlib.ExitStack() as stack:
                for context in contexts():
                    stack.enter_context(context)
                stack.enter_context(self.one_thread())
                return forward(batch)

        pool = ThreadPoolExecutor(threads, thread_name_prefix="dictembed-encode")
        try:
            pending: deque[Future] = deque()
            for batch in batches:
                if len(pending) >= 2 * threads:
                    yield pending.popleft().result()
                pending.append(pool.submit(run, batch))
            while pending:
                yield pending.popleft().result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def __call__(
        self, output_hidden_states: bool = False, return_dict: bool = True, **batch: torch.Tensor
    ) -> SimpleNamespace:
        if output_hidden_states:
            raise DictEmbedError("the ONNX backend gives the last hidden state only; use backend='torch'")
        ids = batch["input_ids"]
        feeds = {}
        for name in self.inputs:
            value = batch.get(name)
            feeds[name] = np.zeros(tuple(ids.shape), np.int64) if value is None else value.numpy().astype(np.int64)
        session = self.single if getattr(self._local, "single", False) else self.session
        (hidden,) = session.run(["last_hidden_state"], feeds)
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden), hidden_states=None)


def attach(encoder: Any, folder: str | Path, threads: int | None = None) -> Any:
    """Run `encoder`'s backbone forward through ONNX Runtime (on the CPU, where the encoder moves): the graph
    exported in `folder`, or for a folder that is no export a fp32 graph exported now; `threads`: see
    `OnnxBackbone`. Returns the encoder."""
    if encoder.pooling == "first_last_avg":
        raise DictEmbedError("first_last_avg pooling needs every hidden layer; the ONNX export has the last only")
    if encoder.device.type != "cpu":
        log.info("the ONNX backend runs on the CPU (onnxruntime's CPUExecutionProvider)")
        encoder.to("cpu")
    folder = Path(folder)
    if is_exported(folder):
        path, manifest = exported_file(folder)
        encoder.onnx = OnnxBackbone(path, threads, manifest)
    else:
        require("onnx")
        with tempfile.TemporaryDirectory() as scratch:
            raw, path = Path(scratch) / "raw.onnx", Path(scratch) / FP32_FILE
            names = export_backbone(encoder, raw)
            manifest = {"file": None, "quantize": None, "inputs": names}
            manifest["optimized"] = optimize_graph(raw, path, encoder.backbone.config)
            encoder.onnx = OnnxBackbone(path, threads, manifest)  # the session holds the graph in memory
    return encoder.eval()


def exported_file(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The ONNX file an export's manifest names, and the manifest."""
    manifest_path = folder / ONNX_DIR / ONNX_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        file = str(manifest["file"])
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ModelLoadError(f"{manifest_path} is corrupt ({type(err).__name__}: {err})") from None
    if Path(file).name != file or file in ("", ".", ".."):
        raise ModelLoadError(f"{manifest_path}: file {file!r} is not a file name in the onnx folder")
    return folder / ONNX_DIR / file, manifest
