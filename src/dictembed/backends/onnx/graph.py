"""The ONNX graph of an encoder's backbone: export with torch's TorchScript-based exporter (`dynamo=False`,
dynamic batch and sequence axes), fusion of attention / LayerNorm / GELU with onnxruntime's transformer
optimizer where the architecture allows, and dynamic int8 quantisation (`quantize_dynamic`: int8 weights,
activations quantised per batch at run time). Works on any object with `backbone` and `tokenizer`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import re
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dictembed.errors import DictEmbedError
from dictembed.extras import require

log = logging.getLogger(__name__)
FP32_FILE = "model.onnx"
INT8_FILE = "model_qint8.onnx"
# model types onnxruntime's transformer optimizer knows how to fuse (attention, LayerNorm, GELU)
ORT_TOOLS = str(Path("onnxruntime", "transformers"))  # the optimizer's modules, which log at INFO (`quiet_info`)
OPTIMIZABLE = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "mpnet": "bert", "distilbert": "bert"}


@dataclass
class QuantizeSettings:
    """`quantize_dynamic` settings; the defaults are the ones measured best on MiniLM (benchmarks/onnx_int8.py).

    `reduce_range` (7-bit weights) is on so that the graph computes the same on every x86 CPU: without VNNI,
    onnxruntime's u8s8 kernels add pairs of u8 x s8 products into int16 (`vpmaddubsw`), which saturates for
    8-bit weights (2 x 255 x 128 > 32767) but never for 7-bit ones (2 x 255 x 64 < 32767)."""

    op_types: list[str] = field(default_factory=lambda: ["MatMul", "Attention"])
    per_channel: bool = True
    reduce_range: bool = True
    weight_type: str = "QInt8"  # or "QUInt8"
    exclude_last_layers: int = 0  # keep the MatMuls of the last N transformer layers in fp32
    # keep the feed-forward down-projections (the MatMuls fed by a GELU, whose inputs have outliers) in fp32:
    # all-mpnet-base-v2's vectors' cosine to fp32 0.907 -> 0.992, one query 12.8 -> 18.4 ms (fp32 30.1 ms)
    keep_ffn_output: bool = False
    # SmoothQuant's migration strength for the down-projections' inputs (`smoothing`; 0: none): all-mpnet-base-v2's
    # queries, each alone, cosine to fp32 0.899 -> 0.986 at 0.8 (557 queries), at plain int8's speed
    smooth_ffn: float = 0.0


class _Forward(nn.Module):
    """The backbone as a function of keyword tensors, returning the last hidden state (what the exporter traces)."""

    def __init__(self, backbone: nn.Module, names: list[str]) -> None:
        super().__init__()
        self.backbone = backbone
        self.names = names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.backbone(**dict(zip(self.names, inputs, strict=True)), return_dict=True).last_hidden_state


def unexportable(encoder: Any) -> str | None:
    """Why the ONNX graph of `encoder`'s backbone cannot give its vectors, or None."""
    if encoder.pooling == "first_last_avg":
        return "first_last_avg pooling needs every hidden layer; the ONNX export has the last only"
    return None


def export_backbone(encoder: Any, path: Path, opset: int = 17) -> list[str]:
    """Export `encoder.backbone` (eager attention, on the CPU) to the ONNX file `path`; returns its input names."""
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
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer's notes on the model's Python control flow (masks, padding) hold for these dynamic axes
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=r"Exporting aten::index operator", category=UserWarning)
        warnings.filterwarnings("ignore", message=r"You are using the legacy TorchScript", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=r"The feature will be removed", category=DeprecationWarning)
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

    with quiet_info():  # a line per fusion, from loggers of its own, in the middle of a command's output
        optimized = optimize_model(
            str(source),
            model_type=kind,
            num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size),
            opt_level=1,  # fusions only: the saved graph stays portable across CPUs
        )
        optimized.save_model_to_file(str(target))
        fused = optimized.get_fused_operator_statistics()  # logs them too
    return {k: int(v) for k, v in fused.items() if v}


@contextlib.contextmanager
def quiet_info() -> Iterator[None]:
    """While inside, the root logger's handlers drop the records below a warning that onnxruntime's transformer
    tools log (a line per fusion, from loggers named after their modules); every other record passes, from any
    thread."""

    def keep(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or ORT_TOOLS not in record.pathname

    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(keep)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(keep)


def quantize_int8(
    source: Path,
    target: Path,
    settings: QuantizeSettings | None = None,
    calibration: list[dict[str, Any]] | None = None,
) -> None:
    """Dynamic int8 quantisation of `source` into `target` with `settings`; `smooth_ffn` reads the channel ranges
    of the down-projections' inputs off the fp32 graph run on the `calibration` batches (feeds with an
    `attention_mask`)."""
    quantization = require("onnx", "onnxruntime.quantization")
    onnx = require("onnx", "onnx")
    settings = settings or QuantizeSettings()
    if settings.smooth_ffn:
        if not calibration:
            raise DictEmbedError("smoothing the feed-forward inputs (smooth_ffn) needs calibration batches")
        if settings.keep_ffn_output:
            raise DictEmbedError("smooth_ffn and keep_ffn_output treat the same MatMuls: choose one")
        from dictembed.backends.onnx.smoothing import input_ranges, smooth_matmul_inputs

        model = onnx.load(str(source))
        matmuls = ffn_output_matmuls(model.graph.node)
        if not matmuls:
            raise DictEmbedError(
                f"{source}: no feed-forward down-projection (a MatMul fed by a fused GELU) to smooth; smoothing needs "
                "the optimised graph of a BERT-like model (no --no-optimize)"
            )
        smooth_matmul_inputs(model, input_ranges(model, matmuls, calibration), settings.smooth_ffn)
        smoothed = target.with_name(target.stem + ".smoothed.onnx")
        try:
            onnx.save(model, str(smoothed))
            quantize_int8(smoothed, target, replace(settings, smooth_ffn=0.0))
        finally:
            smoothed.unlink(missing_ok=True)
        return
    exclude: list[str] = []
    if settings.exclude_last_layers or settings.keep_ffn_output:
        graph = onnx.load(str(source), load_external_data=False).graph
    if settings.exclude_last_layers:
        layers = sorted({int(p) for n in graph.node for p in _layer_of(n.name)})
        last = set(layers[-settings.exclude_last_layers :])
        exclude = [n.name for n in graph.node if any(int(p) in last for p in _layer_of(n.name))]
    if settings.keep_ffn_output:
        exclude += [name for name in ffn_output_matmuls(graph.node) if name not in exclude]
    with quiet_root_info():  # the quantiser logs a line per tensor to the root logger
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


def quantized_graph(
    folder: Path,
    manifest: dict[str, Any],
    settings: QuantizeSettings | None = None,
    calibration: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Quantise the fp32 graph in `folder` (`FP32_FILE`) to int8 in `INT8_FILE` (`quantize_int8` with `settings`
    and `calibration`), remove the fp32 file, and return `manifest` naming the int8 graph and its settings."""
    quantize_int8(folder / FP32_FILE, folder / INT8_FILE, settings, calibration)
    (folder / FP32_FILE).unlink()
    return {**manifest, "file": INT8_FILE, "quantize": "int8", "settings": asdict(settings or QuantizeSettings())}


def quantization_key(settings: QuantizeSettings | None = None) -> str:
    """A short hash of what makes an int8 graph's vectors besides the fp32 graph: the quantisation's `settings`
    (default: `QuantizeSettings()`) and the onnxruntime that quantises and runs it."""
    from importlib.metadata import version

    text = json.dumps(asdict(settings or QuantizeSettings()), sort_keys=True) + "|" + version("onnxruntime")
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def ffn_output_matmuls(nodes: Any) -> list[str]:
    """The names of the feed-forward down-projections among a graph's `nodes`: the MatMuls fed by a GELU."""
    gelu = {out for n in nodes if "Gelu" in n.op_type for out in n.output}
    return [n.name for n in nodes if n.op_type == "MatMul" and gelu & set(n.input)]


@contextlib.contextmanager
def quiet_root_info() -> Iterator[None]:
    """While inside, the records onnxruntime's quantiser logs straight to the root logger (a line per tensor, and
    a warning to pre-process the graph that a user of the export cannot act on) go to dictembed's debug log;
    errors stay."""

    def keep(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or record.name != "root":
            return True
        log.debug("onnxruntime quantisation: %s", record.getMessage())
        return False

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def _layer_of(name: str) -> list[str]:
    """The transformer layer index in an exported node name ("/backbone/encoder/layer.3/...": ["3"])."""
    return re.findall(r"layer[._](\d+)[/._]", name)
