"""ONNX Runtime inference backend: export an encoder's backbone to ONNX (fp32, optionally int8), and run it in
place of the torch backbone inside `Encoder` (tokenisation, length-sorted batching, pooling and the modules
after it stay the torch `Encoder`'s own, so only the backbone forward differs).

An exported folder is the encoder's ordinary save (a sentence-transformers folder with the tokenizer, Pooling,
Normalize and `dictembed.json`; safetensors weights, so `SentenceTransformer(folder)` and
`Encoder.load(folder, backend="torch")` still load it) plus `onnx/`: the ONNX graph and `onnx/export.json`,
the manifest that marks the folder as exported (`Encoder.load(folder)` then runs the ONNX graph).

The export uses torch's TorchScript-based exporter (`dynamo=False`) with dynamic batch and sequence axes,
fuses attention / LayerNorm / GELU with onnxruntime's transformer optimizer where the architecture allows,
and quantises with `onnxruntime.quantization.quantize_dynamic` (int8 weights, dynamically quantised
activations). Inference only: a forward with gradients enabled is refused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import nn

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.extras import require
from dictembed.io import replace_dir

log = logging.getLogger(__name__)

ONNX_DIR = "onnx"
MANIFEST = "export.json"
FP32_FILE = "model.onnx"
INT8_FILE = "model_qint8.onnx"
QUANTIZATIONS = ("int8",)
BACKENDS = ("torch", "onnx")
# model types onnxruntime's transformer optimizer knows how to fuse (attention, LayerNorm, GELU)
OPTIMIZABLE = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "mpnet": "bert", "distilbert": "bert"}


@dataclass
class QuantizeSettings:
    """`quantize_dynamic` settings; the defaults are the ones measured best on MiniLM (benchmarks/onnx_int8.py)."""

    op_types: list[str] = field(default_factory=lambda: ["MatMul", "Attention"])
    per_channel: bool = True
    reduce_range: bool = False
    weight_type: str = "QInt8"  # or "QUInt8"
    exclude_last_layers: int = 0  # keep the MatMuls of the last N transformer layers in fp32


def is_exported(folder: str | Path) -> bool:
    """Whether `folder` holds an ONNX export (its `onnx/export.json` manifest)."""
    return (Path(folder) / ONNX_DIR / MANIFEST).is_file()


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


# --------------------------------------------------------------------------------------------------- export
class _Forward(nn.Module):
    """The backbone as a function of keyword tensors, returning the last hidden state (what the exporter traces)."""

    def __init__(self, backbone: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.backbone = backbone
        self.names = names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.backbone(**dict(zip(self.names, inputs, strict=True)), return_dict=True).last_hidden_state


def export_backbone(encoder: Any, path: Path, opset: int = 17) -> list[str]:
    """Export `encoder.backbone` (eager attention, on the CPU) to the ONNX file `path`; returns its input names."""
    import copy

    backbone = copy.deepcopy(encoder.backbone).cpu().eval()
    if hasattr(backbone, "set_attn_implementation"):
        try:  # the eager attention exports as the MatMul/Softmax pattern onnxruntime's optimizer fuses
            backbone.set_attn_implementation("eager")
        except (ValueError, ImportError, AttributeError):
            pass
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in encoder.tokenizer.model_input_names:
        names.append("token_type_ids")
    sample = encoder.tokenizer(["an example sentence", "a second, longer example sentence"], padding=True)
    inputs = tuple(
        torch.tensor(sample[n]) if n in sample else torch.zeros_like(torch.tensor(sample["input_ids"])) for n in names
    )
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"last_hidden_state": {0: "batch", 1: "sequence"}}
    with torch.no_grad():
        torch.onnx.export(
            _Forward(backbone, names),
            inputs,
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return names


def optimize_graph(source: Path, target: Path, config: Any) -> dict[str, int]:
    """Fuse attention / LayerNorm / GELU with onnxruntime's transformer optimizer (BERT-like models); returns
    the fused operator counts, or {} (and copies `source`) where the architecture is not one it knows."""
    kind = OPTIMIZABLE.get(getattr(config, "model_type", ""))
    if kind is None:
        shutil.copyfile(source, target)
        return {}
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(
        str(source),
        model_type=kind,
        num_heads=int(config.num_attention_heads),
        hidden_size=int(config.hidden_size),
        opt_level=1,  # fusions only: the saved graph stays portable across CPUs
    )
    optimized.save_model_to_file(str(target))
    return {k: int(v) for k, v in optimized.get_fused_operator_statistics().items() if v}


def quantize_int8(source: Path, target: Path, settings: QuantizeSettings | None = None) -> None:
    """Dynamic int8 quantisation of `source` into `target` with `settings`."""
    quantization = require("onnx", "onnxruntime.quantization")
    onnx = require("onnx", "onnx")
    settings = settings or QuantizeSettings()
    exclude: list[str] = []
    if settings.exclude_last_layers:
        graph = onnx.load(str(source), load_external_data=False).graph
        layers = sorted({int(p) for n in graph.node for p in _layer_of(n.name)})
        last = set(layers[-settings.exclude_last_layers :])
        exclude = [n.name for n in graph.node if any(int(p) in last for p in _layer_of(n.name))]
    quantization.quantize_dynamic(
        str(source),
        str(target),
        op_types_to_quantize=list(settings.op_types),
        per_channel=settings.per_channel,
        reduce_range=settings.reduce_range,
        weight_type=getattr(quantization.QuantType, settings.weight_type),
        nodes_to_exclude=exclude or None,
        # the fused graph's contrib ops (Attention, SkipLayerNormalization) defeat ONNX shape inference
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )


def _layer_of(name: str) -> list[str]:
    """The transformer layer index in an exported node name ("/backbone/encoder/layer.3/...": ["3"])."""
    import re

    return re.findall(r"layer[._](\d+)[/._]", name)


def export(
    model: str | Path | Any,
    output: str | Path,
    quantize: str | None = None,
    optimize: bool = True,
    settings: QuantizeSettings | None = None,
) -> Path:
    """Write `output`: the encoder's own save plus `onnx/` (the fp32 graph, or with `quantize="int8"` the int8
    one) and its manifest. `model` is a hub name, a folder or a loaded `Encoder`."""
    require("onnx")
    require("onnx", "onnx")
    from dictembed.encoder import Encoder

    if quantize is not None and quantize not in QUANTIZATIONS:
        raise DictEmbedError(f"unknown quantization {quantize!r}; choose from {', '.join(QUANTIZATIONS)}")
    encoder = model if isinstance(model, Encoder) else Encoder.load(model, device="cpu", backend="torch")
    if encoder.onnx_backbone is not None:
        raise DictEmbedError(
            "the model is already an ONNX export; export its source model (or load it with backend='torch')"
        )
    if encoder.pooling == "first_last_avg":
        raise DictEmbedError("first_last_avg pooling needs every hidden layer; the ONNX export has the last only")
    output = Path(output)
    staging = output.with_name(output.name + ".export")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        encoder.save(staging)
        folder = staging / ONNX_DIR
        folder.mkdir()
        with tempfile.TemporaryDirectory() as scratch:
            raw = Path(scratch) / "raw.onnx"
            names = export_backbone(encoder, raw)
            fused = optimize_graph(raw, folder / FP32_FILE, encoder.backbone.config) if optimize else {}
            if not optimize:
                shutil.copyfile(raw, folder / FP32_FILE)
        file = FP32_FILE
        if quantize == "int8":
            quantize_int8(folder / FP32_FILE, folder / INT8_FILE, settings)
            (folder / FP32_FILE).unlink()
            file = INT8_FILE
        manifest = {
            "file": file,
            "quantize": quantize,
            "inputs": names,
            "optimized": fused,
            "settings": asdict(settings or QuantizeSettings()) if quantize else None,
            "onnxruntime": require("onnx", "onnxruntime").__version__,
            "torch": torch.__version__,
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        replace_dir(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output


# --------------------------------------------------------------------------------------------------- runtime
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

    def __init__(self, path: str | Path, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise DictEmbedError(f"threads must be at least 1, got {threads}")
        self.threads = threads or physical_cores()
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

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """Calls from this thread run on the single-threaded session while inside."""
        before, self._local.single = getattr(self._local, "single", False), True
        try:
            yield
        finally:
            self._local.single = before

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
        encoder.onnx_backbone = OnnxBackbone(path, threads)
    else:
        require("onnx")
        with tempfile.TemporaryDirectory() as scratch:
            raw, path = Path(scratch) / "raw.onnx", Path(scratch) / FP32_FILE
            names = export_backbone(encoder, raw)
            manifest = {"file": None, "quantize": None, "inputs": names}
            manifest["optimized"] = optimize_graph(raw, path, encoder.backbone.config)
            encoder.onnx_backbone = OnnxBackbone(path, threads)  # the session holds the graph in memory
    encoder.onnx_manifest = manifest
    return encoder.eval()


def exported_file(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The ONNX file an export's manifest names, and the manifest."""
    manifest_path = folder / ONNX_DIR / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        file = str(manifest["file"])
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ModelLoadError(f"{manifest_path} is corrupt ({type(err).__name__}: {err})") from None
    if Path(file).name != file or file in ("", ".", ".."):
        raise ModelLoadError(f"{manifest_path}: file {file!r} is not a file name in the onnx folder")
    return folder / ONNX_DIR / file, manifest
