"""`dictembed export --format onnx`: a model folder that runs its backbone with ONNX Runtime.

An exported folder is the encoder's ordinary save (a sentence-transformers folder with the tokenizer, Pooling,
Normalize and `dictembed.json`; safetensors weights, so `SentenceTransformer(folder)` and
`Encoder.load(folder, backend="torch")` still load it) plus `onnx/`: the graph (`graph.py`) and `onnx/export.json`,
the manifest that marks the folder as exported (`Encoder.load(folder)` then runs the graph, `runtime.py`).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from dictembed.backends.onnx.graph import (
    FP32_FILE,
    INT8_FILE,
    WEIGHT_QUANTIZATIONS,
    QuantizeSettings,
    export_backbone,
    optimize_graph,
    quantize_int8,
)
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.io import replace_dir
from dictembed.model_folder import ONNX_DIR, ONNX_MANIFEST
from dictembed.record import RunRecord


def exported_record(record: RunRecord) -> RunRecord | None:
    """The record an export carries: its source model's run (method, configuration, training figures) without
    what describes the source folder alone: its dev figures and selection (of the torch weights) and its entry
    space (not copied into the export). None for a source without a record."""
    if not record.exists:
        return None
    exported = copy.deepcopy(record)
    exported.dev, exported.selection, exported.entry_space = {}, {}, None
    return exported


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
    if quantize is not None and quantize not in WEIGHT_QUANTIZATIONS:
        raise DictEmbedError(f"unknown quantization {quantize!r}; choose from {', '.join(WEIGHT_QUANTIZATIONS)}")
    encoder = model if isinstance(model, Encoder) else Encoder.load(model, device="cpu", backend="torch")
    if encoder.onnx is not None:
        raise DictEmbedError(
            "the model is already an ONNX export; export its source model (or load it with backend='torch')"
        )
    if encoder.pooling == "first_last_avg":
        raise DictEmbedError("first_last_avg pooling needs every hidden layer; the ONNX export has the last only")
    output = Path(output)
    staging = output.with_name(output.name + ".export")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        encoder.save(staging, exported_record(encoder.record), name=output.name)
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
        (folder / ONNX_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        replace_dir(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output
