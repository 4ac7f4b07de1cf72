"""ONNX Runtime in place of an encoder's torch backbone: tokenisation, length-sorted batching, pooling and the
modules after it stay the `Encoder`'s own, so only the backbone forward differs. Inference only: a forward
with gradients enabled is refused.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from dictembed.backends.onnx.graph import (
    FP32_FILE,
    export_backbone,
    optimize_graph,
    quantization_key,
    quantized_graph,
    unexportable,
)
from dictembed.backends.onnx.session import (
    BatchWorkers,
    exported_file,
    graph_feeds,
    open_session,
    physical_cores,
    query_graph,
)
from dictembed.device_choices import BUILD_BACKEND_VARIABLE as BUILD_BACKEND_VARIABLE  # re-exported
from dictembed.device_choices import build_choice as build_choice
from dictembed.errors import DictEmbedError
from dictembed.extras import installed, require
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
    if (problem := unexportable(encoder)) is not None:
        raise DictEmbedError(problem)
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
    with temporary_graph(encoder) as graph:
        yield graph


@contextlib.contextmanager
def temporary_graph(encoder: Any) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The fp32 graph of `encoder`'s backbone (on the CPU) and its manifest, exported now into a temporary folder
    that is removed on exit."""
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


# Texts a build must hold before "auto" runs it on ONNX Runtime: exporting the graph takes about 4 s for MiniLM
# (22.7M parameters), which about 3,000 texts win back on 2 cores, and about 30 s for multilingual-e5-small (118M,
# most of them its vocabulary's), whose texts also encode at half MiniLM's rate: GRAPH_BUILD_MIN texts at least,
# and GRAPH_TEXTS_PER_MILLION a million of the backbone's parameters.
GRAPH_BUILD_MIN = 10_000
GRAPH_TEXTS_PER_MILLION = 440
# Texts a batch of a build on ONNX Runtime: on 2 AVX2 cores its fp32 graph encodes WordNet definitions at 294 a
# second in batches of 32 (two one-thread runs at once), torch at 206 in batches of 128 and 230 in batches of 32.
GRAPH_BUILD_BATCH = 32


def build_backend(encoder: Any, count: int) -> str:
    """What encodes a build (an entry space, headword vectors) of `count` texts by `encoder`: "onnx", the encoder's
    fp32 graph on ONNX Runtime, which gives the weights' vectors (cosine 0.9999999) faster on the CPU; "int8", that
    graph quantised (faster still, other vectors); "openvino", that graph compiled by OpenVINO in the encoder's
    compute precision (bf16 or fp32); or "torch": the encoder as it is. `$DICTEMBED_BUILD_BACKEND`: auto (the
    default: from `graph_build_min` texts, openvino for an encoder computing in bf16 where the openvino extra is
    installed, else onnx), torch, onnx, int8 or openvino (any count). Either way the encoder as it is where the
    graph cannot stand in: on another device, in another compute precision than fp32 (openvino takes bf16 too),
    running a graph already (an export: its own), pooling `first_last_avg`, or without the onnx extra (and for
    openvino the openvino extra); logged as a warning only where the variable asked for the graph."""
    asked = choice = build_choice()
    if choice == "torch" or (choice == "auto" and count < graph_build_min(encoder)):
        return "torch"
    if choice == "auto" and encoder.compute_precision == "bf16" and installed("openvino"):
        choice = "openvino"  # bf16 on the CPU: OpenVINO's bf16 encodes 1.2-1.4x torch's (AMX, AVX512_BF16)
    reason = _torch_only(encoder, openvino=choice == "openvino")
    if reason is not None:
        says = log.debug if asked == "auto" else log.warning
        says("%s=%s: the build runs as the encoder does (%s)", BUILD_BACKEND_VARIABLE, asked, reason)
        return "torch"
    return choice if choice in ("int8", "openvino") else "onnx"


def builds_int8(encoder: Any) -> bool:
    """Whether builds by `encoder` run its int8 graph (`$DICTEMBED_BUILD_BACKEND=int8` where a graph can stand in):
    what the entry-space cache keys apart (`int8_build_key`), as those vectors are not the weights'."""
    return build_choice() == "int8" and _torch_only(encoder) is None


def int8_build_key() -> str:
    """What an int8 build's cache entry is keyed by besides the encoder: the quantisation's settings and the
    onnxruntime that quantises and runs it, so that a change of either builds anew."""
    return "int8-" + quantization_key()


def graph_build_min(encoder: Any) -> int:
    """The texts a build by `encoder` must hold before "auto" runs it on its graph: `GRAPH_BUILD_MIN`, or more for a
    larger backbone, whose export takes longer (`GRAPH_TEXTS_PER_MILLION`)."""
    millions = sum(parameter.numel() for parameter in encoder.backbone.parameters()) / 1e6
    return max(GRAPH_BUILD_MIN, round(GRAPH_TEXTS_PER_MILLION * millions))


def _torch_only(encoder: Any, openvino: bool = False) -> str | None:
    """Why a build by `encoder` cannot run its fp32 graph on ONNX Runtime (`openvino`: compiled by OpenVINO, which
    computes in bf16 too), or None."""
    if encoder.device.type != "cpu":
        return f"the encoder is on {encoder.device}"
    if encoder.compute_precision not in (("fp32", "bf16") if openvino else ("fp32",)):
        return f"it computes in {encoder.compute_precision}"
    if encoder.onnx is not None:
        return "it runs a graph already"
    if (problem := unexportable(encoder)) is not None:
        return problem
    if not installed("onnx"):
        return 'the onnx extra is not installed (pip install "dictembed[onnx]")'
    if openvino and not installed("openvino"):
        return 'the openvino extra is not installed (pip install "dictembed[openvino]")'
    return None


TWIN_AGREEMENT = 0.9999  # the least cosine of a twin's probe vectors to the weights' own
# the same for an int8 twin: dynamic int8 keeps MiniLM's vectors at 0.965 at worst over the STS-B test sentences
# (0.953 over WordNet's definitions); all-mpnet-base-v2's fall to about 0.8 (its feed-forward outliers): refused
TWIN_AGREEMENT_INT8 = 0.95
# the same for a twin compared in bf16 (OpenVINO's bf16 against torch's autocast): each rounds apart from fp32
TWIN_AGREEMENT_BF16 = 0.999


@contextlib.contextmanager
def graph_twin(
    encoder: Any,
    probe: Sequence[str] = (),
    int8: bool = False,
    opener: Callable[[Path, int, dict[str, Any]], Any] | None = None,
    least: float | None = None,
) -> Iterator[Any]:
    """A twin of `encoder` (its weights and modules shared, not copied) whose backbone forward runs its fp32 graph
    (`int8`: that graph quantised with the export's `QuantizeSettings`), exported now into a temporary folder
    (removed once the backbone holds the graph), opened by `opener(path, threads, manifest)` (default: ONNX
    Runtime's `OnnxBackbone`; OpenVINO's: `openvino.openvino_twin`) on as many threads as torch's; `encoder`
    itself is left as it was. The twin must give the encoder's vectors of the `probe` texts (cosine at least
    `least`; default `TWIN_AGREEMENT`, `TWIN_AGREEMENT_INT8` for int8). Where the export fails, or the twin
    disagrees, `encoder` itself, logged; for int8, which a user asked for and whose vectors are cached apart, a
    one-line error."""
    twin = copy.copy(encoder)  # a new attribute dict: setting `onnx` leaves the encoder's own unset
    stage = "no ONNX graph"
    try:
        with temporary_graph(encoder) as (path, manifest):
            if int8:
                manifest = quantized_graph(path.parent, manifest)
                path = path.parent / manifest["file"]
            stage = "its graph did not open"
            twin.onnx = (opener or OnnxBackbone)(path, min(physical_cores(), torch.get_num_threads()), manifest)
        if least is None:
            least = TWIN_AGREEMENT_INT8 if int8 else TWIN_AGREEMENT
        stage = "its graph did not run"
        problem = twin_disagrees(encoder, twin, list(probe), least)
    except Exception as err:  # torch.onnx, onnxruntime's optimizer and OpenVINO raise many types; torch encodes
        problem = f"{stage} ({type(err).__name__}: {err})"
    if problem is not None:
        twin.onnx = None  # its sessions go now, not after the build torch runs instead
        if int8:
            raise DictEmbedError(f"{BUILD_BACKEND_VARIABLE}=int8: {problem}; build without it (unset it, or auto)")
        log.warning("the build runs on torch: %s", problem)
        yield encoder
        return
    yield twin


def twin_disagrees(encoder: Any, twin: Any, probe: list[str], least: float = TWIN_AGREEMENT) -> str | None:
    """How `twin`'s vectors of `probe` (encoded in one batch) differ from `encoder`'s (a cosine under `least`), or
    None."""
    if not probe:
        return None
    with torch.no_grad():
        mine, theirs = encoder.encode(probe, show_progress_bar=False), twin.encode(probe, show_progress_bar=False)
    mine, theirs = torch.as_tensor(mine, dtype=torch.float32), torch.as_tensor(theirs, dtype=torch.float32)
    agreement = float(torch.nn.functional.cosine_similarity(mine, theirs, dim=1).min())
    if agreement >= least:
        return None
    return f"its ONNX graph gives other vectors than its weights (cosine {agreement:.4f} on {len(probe)} texts)"
