"""ONNX Runtime in place of an encoder's torch backbone: tokenisation, length-sorted batching, pooling and the
modules after it stay the `Encoder`'s own, so only the backbone forward differs. Inference only: a forward
with gradients enabled is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from dictembed.backends.onnx.graph import FP32_FILE, export_backbone, optimize_graph
from dictembed.backends.onnx.session import (
    BatchWorkers,
    exported_file,
    graph_feeds,
    open_session,
    physical_cores,
    query_graph,
)
from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.model_folder import is_exported

log = logging.getLogger(__name__)


class OnnxBackbone(BatchWorkers):
    """An ONNX Runtime session called like the torch backbone: keyword tensors in, `.last_hidden_state` out.

    Two sessions hold the graph: `session`, whose runs use `threads` intra-op threads (default: the physical
    cores), for direct calls and for an encode of fewer batches than threads; and `single`, one thread per
    run, which `Encoder.encode` runs on `threads` batches at once from worker threads (`run_batches`;
    a session is thread-safe). On 2 cores the second way encodes int8 26 % faster: the fine-grained
    operators (LayerNorm, GELU on a few hundred rows) spend much of a split run synchronising its threads."""

    def __init__(self, path: str | Path, threads: int | None = None, manifest: dict[str, Any] | None = None) -> None:
        """`manifest`: what the graph is (an export's `onnx/export.json`)."""
        if threads is not None and threads < 1:
            raise DictEmbedError(f"threads must be at least 1, got {threads}")
        self.threads = threads or physical_cores()
        self.manifest: dict[str, Any] = dict(manifest or {})
        self.path = Path(path)
        self.session = open_session(self.path, self.threads)
        self.single = self.session if self.threads == 1 else open_session(self.path, 1)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self._local = threading.local()

    @property
    def identity(self) -> str:
        """A short name of the graph, e.g. "onnx-int8-1a2b3c4d": the quantisation and a hash of the whole manifest
        (its settings, the fusions), so results of different graphs of the same weights are never filed together."""
        digest = hashlib.sha1(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()[:8]
        return f"onnx-{self.manifest.get('quantize') or 'fp32'}-{digest}"

    def __call__(
        self, output_hidden_states: bool = False, return_dict: bool = True, **batch: torch.Tensor
    ) -> SimpleNamespace:
        if output_hidden_states:
            raise DictEmbedError("the ONNX backend gives the last hidden state only; use backend='torch'")
        session = self.single if self.on_worker() else self.session
        (hidden,) = session.run(["last_hidden_state"], graph_feeds(self.inputs, batch))
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden), hidden_states=None)


@contextlib.contextmanager
def backbone_graph(encoder: Any, folder: str | Path, backend: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The ONNX graph of `encoder`'s backbone and its manifest, for the `backend` (its name, for the log) to open:
    the graph exported in `folder`, else its query graph where it was made from the folder's weights as they are,
    else a fp32 graph exported now into a temporary folder that is removed on exit. Moves the encoder to the CPU,
    where the graph runs."""
    if encoder.pooling == "first_last_avg":
        raise DictEmbedError("first_last_avg pooling needs every hidden layer; the ONNX export has the last only")
    if encoder.device.type != "cpu":
        log.info("the %s backend runs on the CPU", backend)
        encoder.to("cpu")
    folder = Path(folder)
    if is_exported(folder):
        yield exported_file(folder)
        return
    if (graph := query_graph(folder)) is not None:
        yield graph
        return
    require("onnx")
    with tempfile.TemporaryDirectory() as scratch:
        raw, path = Path(scratch) / "raw.onnx", Path(scratch) / FP32_FILE
        names = export_backbone(encoder, raw)
        manifest: dict[str, Any] = {"file": None, "quantize": None, "inputs": names}
        manifest["optimized"] = optimize_graph(raw, path, encoder.backbone.config)
        yield path, manifest


def attach(encoder: Any, folder: str | Path, threads: int | None = None) -> Any:
    """Run `encoder`'s backbone forward through ONNX Runtime (on the CPU, where the encoder moves): the graph
    exported in `folder`, or for a folder that is no export a fp32 graph exported now (`backbone_graph`);
    `threads`: see `OnnxBackbone`. Returns the encoder."""
    with backbone_graph(encoder, folder, "ONNX") as (path, manifest):
        encoder.onnx = OnnxBackbone(path, threads, manifest)  # the session holds the graph in memory
    return encoder.eval()
