"""OpenVINO in place of an encoder's torch backbone: the ONNX graph the ONNX backend runs (an export's, or a fp32
graph exported now), compiled for the CPU by OpenVINO. Tokenisation, length-sorted batching, pooling and the
modules after it stay the `Encoder`'s own. With the bf16 precision hint on a CPU with AMX it is the fastest CPU
path measured (all-MiniLM-L6-v2, 2 cores, batch 32: 3.3x sentence-transformers fp32; f32 hint 1.2x; ONNX
Runtime int8 2.5x). Inference only: `Encoder.forward` refuses a forward with gradients enabled.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from dictembed.backends.onnx.runtime import TWIN_AGREEMENT_BF16, backbone_graph, graph_twin
from dictembed.backends.onnx.session import BatchWorkers, graph_feeds, physical_cores
from dictembed.devices import resolve_precision
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.extras import require

log = logging.getLogger(__name__)

_CORE: Any = None
_CORE_LOCK = threading.Lock()


def openvino_core() -> Any:
    """The process's one `openvino.Core`, created at first use and never released. OpenVINO's CPU plugin swaps
    in its own alternate signal stack for the thread that compiles and puts back the one it found when its Core
    goes: two Cores released in the order they came leave that thread's alternate stack pointing at unmapped
    memory, and the next signal it takes (Ctrl-C, SIGTERM) kills the process with a segmentation fault. One
    Core that stays keeps one alternate stack that stays."""
    global _CORE
    with _CORE_LOCK:
        if _CORE is None:
            _CORE = require("openvino").Core()
        return _CORE


def precision_hint(precision: str | None) -> str:
    """OpenVINO's INFERENCE_PRECISION_HINT for a compute precision: "bf16" where `precision` resolves to bf16 on
    the CPU ("auto": a CPU with AMX, one with AVX512_BF16 that `devices.bf16_gain` finds fast, or
    DICTEMBED_CPU_PRECISION=bf16), else "f32"."""
    return "bf16" if resolve_precision(precision, "cpu") == "bf16" else "f32"


class OpenVinoBackbone(BatchWorkers):
    """An OpenVINO model (`network`, an `openvino.Model`) called like the torch backbone: keyword tensors in,
    `.last_hidden_state` out. A forward under bf16 autocast (`Encoder.autocast` of an encoder whose compute
    precision is bf16) runs the network compiled with INFERENCE_PRECISION_HINT bf16, any other with f32; each
    is compiled once, on first use (`compiled`). A direct call runs on every inference thread (PERFORMANCE_HINT
    LATENCY); `Encoder.encode` runs `threads` (= `inference_threads`) batches at once through `run_batches`, each
    on one thread, in a model compiled with as many streams (THROUGHPUT), an infer request per worker thread. On 2
    cores the streams encode int8 19 % faster than a split run (MiniLM, batch 32), as with ONNX Runtime's
    single-threaded sessions."""

    def __init__(
        self, network: Any, inference_threads: int | None = None, manifest: dict[str, Any] | None = None
    ) -> None:
        """`manifest`: what the graph is (an export's `onnx/export.json`); "backend": "openvino" is added, so that
        caches and MTEB results keep its vectors apart from ONNX Runtime's of the same graph."""
        if inference_threads is not None and inference_threads < 1:
            raise DictEmbedError(f"threads must be at least 1, got {inference_threads}")
        self.network = network
        self.inference_threads = inference_threads or physical_cores()
        self._local = threading.local()  # per worker thread: whether it runs a stream, and its infer requests
        self.manifest: dict[str, Any] = {**(manifest or {}), "backend": "openvino"}
        self.inputs = [port.get_any_name() for port in network.inputs]
        self.models: dict[str, Any] = {}  # precision hint -> compiled model (direct calls)
        self.stream_models: dict[str, Any] = {}  # precision hint -> compiled model with streams (`run_batches`)
        self._lock = threading.Lock()  # a compiled model's call reuses one infer request: one call at a time

    @property
    def threads(self) -> int:
        """The batches `Encoder.encode` runs at once: one a stream, as many as the inference threads."""
        return self.inference_threads

    @property
    def identity(self) -> str:
        """A short name of the graph, e.g. "openvino-fp32-1a2b3c4d": the quantisation and a hash of the manifest."""
        digest = hashlib.sha1(json.dumps(self.manifest, sort_keys=True).encode()).hexdigest()[:8]
        return f"openvino-{self.manifest.get('quantize') or 'fp32'}-{digest}"

    def compiled(self, hint: str, streams: bool = False) -> Any:
        """The network compiled for the CPU with INFERENCE_PRECISION_HINT `hint` ("f32" or "bf16"): for direct
        calls, or with `streams` one stream of one thread per inference thread."""
        models = self.stream_models if streams else self.models
        with self._lock:
            if hint not in models:
                config: dict[str, Any] = {
                    "INFERENCE_PRECISION_HINT": hint,
                    "INFERENCE_NUM_THREADS": self.inference_threads,
                    "PERFORMANCE_HINT": "LATENCY",
                }
                if streams:
                    config |= {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": self.inference_threads}
                model = openvino_core().compile_model(self.network, "CPU", config)
                ran = str(model.get_property("INFERENCE_PRECISION_HINT").get_type_name())
                if ran != hint and hint not in self.models and hint not in self.stream_models:
                    log.warning("OpenVINO runs %s, not the %s asked, on this CPU (no native %s)", ran, hint, hint)
                models[hint] = model
            return models[hint]

    def _stream_request(self, hint: str) -> Any:
        """This worker thread's infer request of the streams model of `hint`."""
        requests: dict[str, Any] = self._local.__dict__.setdefault("requests", {})
        if hint not in requests:
            requests[hint] = self.compiled(hint, streams=True).create_infer_request()
        return requests[hint]

    def __call__(
        self, output_hidden_states: bool = False, return_dict: bool = True, **batch: torch.Tensor
    ) -> SimpleNamespace:
        if output_hidden_states:
            raise DictEmbedError("the OpenVINO backend gives the last hidden state only; use backend='torch'")
        bf16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        hint = "bf16" if bf16 else "f32"
        feeds = graph_feeds(self.inputs, batch)
        if self.on_worker():
            request = self._stream_request(hint)
            request.infer(feeds)
            hidden = np.array(request.get_tensor("last_hidden_state").data)  # a copy: the request reuses its buffer
        else:
            model = self.compiled(hint)
            with self._lock:
                hidden = np.asarray(model(feeds)["last_hidden_state"])
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden), hidden_states=None)


def read_graph(path: Path, manifest: dict[str, Any], folder: str | Path) -> Any:
    """The ONNX graph `path` (of the model `folder`, described by `manifest`) as an `openvino.Model`; a missing
    file or one OpenVINO cannot convert (an onnxruntime int8 export's QAttention) is a one-line `ModelLoadError`."""
    core = openvino_core()
    if not path.is_file():
        raise ModelLoadError(f"ONNX model file {path} is missing")
    try:
        return core.read_model(str(path))
    except Exception as err:  # OpenVINO raises RuntimeError and its own types, with a multi-line report
        lines = [line.strip(" -") for line in str(err).splitlines() if line.strip(" -")]
        reason = lines[-1][:200] if lines else type(err).__name__
        if manifest.get("quantize"):
            raise ModelLoadError(
                f"model folder {folder} is an onnxruntime {manifest['quantize']} export, which OpenVINO cannot read "
                f"({reason}): load it with backend='onnx', or its source model with backend='openvino'"
            ) from None
        raise ModelLoadError(f"OpenVINO cannot read the ONNX model file {path} ({reason})") from None


def attach(encoder: Any, folder: str | Path, precision: str | None = None, threads: int | None = None) -> Any:
    """Run `encoder`'s backbone forward through OpenVINO on the CPU (where the encoder moves): the ONNX graph
    exported in `folder`, or for a folder that is no export a fp32 graph exported now (`backbone_graph`). The
    encoder's compute precision is set to bf16 where `precision_hint(precision)` is bf16, else fp32; the model of
    the hint a forward asks for is compiled at its first forward (so a `set_precision` after the load compiles
    one model, not two; see `OpenVinoBackbone`); `threads`:
    OpenVINO's inference threads (default: the physical cores). Returns the encoder."""
    require("openvino")
    with backbone_graph(encoder, folder, "OpenVINO") as (path, manifest):
        network = read_graph(path, manifest, folder)  # in memory: a graph exported now is removed on exit
    backbone = OpenVinoBackbone(network, threads, manifest)
    hint = precision_hint(precision)
    encoder.onnx = backbone
    encoder.compute_precision = "bf16" if hint == "bf16" else "fp32"
    return encoder.eval()


def openvino_twin(encoder: Any, probe: Sequence[str] = ()) -> contextlib.AbstractContextManager[Any]:
    """`runtime.graph_twin` with the graph compiled by OpenVINO: a twin of `encoder` that runs its fp32 graph under
    the encoder's autocast in bf16 (`OpenVinoBackbone`), else in fp32, checked on the `probe` texts against the
    encoder's vectors in its own compute precision (cosine at least `TWIN_AGREEMENT_BF16`: two bf16 roundings
    apart); `encoder` itself where the graph fails or disagrees ($DICTEMBED_BUILD_BACKEND=openvino:
    `runtime.build_backend`)."""

    def opened(path: Path, threads: int, manifest: dict[str, Any]) -> OpenVinoBackbone:
        return OpenVinoBackbone(read_graph(path, manifest, path.parent), threads, manifest)

    return graph_twin(encoder, probe, opener=opened, least=TWIN_AGREEMENT_BF16)


CALIBRATION_BATCH = 16  # calibration sentences a feed


def nncf_int8(encoder: Any, calibration: Sequence[str]) -> Any:
    """`encoder` (loaded with backend="openvino", fp32) with its network quantised to int8 by nncf (transformer
    preset: MatMuls in int8, activation ranges from `calibration`, a few hundred sentences like those it will
    encode); vectors within about 0.99 mean cosine of fp32 on MiniLM and mpnet, 3.5x and 5.4x
    sentence-transformers fp32 on 2 AMX cores (docs/results.md, int8 backends). The encoder's backbone is replaced;
    its identity names the quantisation and the calibration, so caches keep the vectors apart. Returns the encoder."""
    backbone = encoder.onnx
    if not isinstance(backbone, OpenVinoBackbone):
        raise DictEmbedError("nncf_int8 needs an encoder loaded with backend='openvino'")
    if backbone.manifest.get("quantize"):
        raise DictEmbedError(f"the OpenVINO network is already quantised ({backbone.manifest['quantize']})")
    sentences = [s for s in calibration if isinstance(s, str) and s.strip()]
    if not sentences:
        raise DictEmbedError("nncf_int8 needs calibration sentences (a few hundred of the text to encode)")
    nncf = require("openvino", "nncf")
    feeds = [
        graph_feeds(backbone.inputs, encoder.tokenize(sentences[start : start + CALIBRATION_BATCH]))
        for start in range(0, len(sentences), CALIBRATION_BATCH)
    ]
    network = nncf.quantize(
        backbone.network, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds)
    )
    digest = hashlib.sha1("\n".join(sentences).encode()).hexdigest()[:12]
    manifest = {**backbone.manifest, "quantize": "int8-nncf", "calibration": f"{len(sentences)}:{digest}"}
    encoder.onnx = OpenVinoBackbone(network, backbone.inference_threads, manifest)
    return encoder
