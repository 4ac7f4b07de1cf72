"""`dictembed export --format onnx`: a model folder that runs its backbone with ONNX Runtime.

An exported folder is the encoder's ordinary save (a sentence-transformers folder with the tokenizer, Pooling,
Normalize and `dictembed.json`) plus `onnx/`: the graph (`graph.py`) and `onnx/export.json`, the manifest that
marks the folder as exported. The source folder's entry space, definitions and search index are copied in, so
`predict` and `serve` use the export alone. The fp32 weights (`model.safetensors`) are left out unless asked
(`keep_weights`): `OnnxQueryEncoder` (`query.py`) runs the folder without them; with them, `Encoder.load(folder)`
runs the graph too (`runtime.py`), `Encoder.load(folder, backend="torch")` the weights, and `SentenceTransformer`
loads it with either backend.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dictembed.backends.onnx.graph import (
    FP32_FILE,
    QuantizeSettings,
    export_backbone,
    optimize_graph,
    quantized_graph,
    unexportable,
)
from dictembed.backends.onnx.query import OnnxQueryEncoder
from dictembed.backends.onnx.query_layout import NoGraph, QueryLayout
from dictembed.backends.onnx.session import graph_feeds, graph_print, weights_sha256
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.extras import installed, require
from dictembed.io import STAGING_MARK, STAGING_SUFFIX, clear_way, link_target, replace_dir
from dictembed.model_card import write_model_card
from dictembed.model_folder import (
    DEFINITIONS_FILE,
    ONNX_DIR,
    ONNX_MANIFEST,
    QUERY_FILE,
    QUERY_MANIFEST,
    SEARCH_DIR,
    SPACE_DIR,
    ModelFolder,
    is_exported,
    read_record,
)
from dictembed.quantization import WEIGHT_QUANTIZATIONS
from dictembed.record import RunRecord
from dictembed.search_index import has_current_index, write_search_index
from dictembed.search_space import MATRIX_SPACES, SearchSpace

log = logging.getLogger(__name__)


def exported_record(record: RunRecord, keeps_space: bool = False) -> RunRecord | None:
    """The record an export carries: its source model's run (method, configuration, training figures) without
    what describes the source's torch weights alone (its dev figures and selection); its entry space when the
    export `keeps_space` (a copy of the source's), else not. None for a source without a record."""
    if not record.exists:
        return None
    exported = copy.deepcopy(record)
    exported.dev, exported.selection = {}, {}
    if not keeps_space:
        exported.entry_space = None
    return exported


CALIBRATION_SENTENCES = 256  # of the shipped description corpus: the channel ranges `smooth_ffn` reads
COPIED = (SPACE_DIR, DEFINITIONS_FILE, SEARCH_DIR)  # what a search reads besides the encoder, copied when present


def export(
    model: str | Path | ModelFolder | Any,
    output: str | Path,
    quantize: str | None = None,
    optimize: bool = True,
    settings: QuantizeSettings | None = None,
    keep_weights: bool = False,
) -> Path:
    """Write `output`: the encoder's own save plus `onnx/` (the fp32 graph, or with `quantize="int8"` the int8
    one) and its manifest, and the source folder's `COPIED` files (copies, never links). `model` is a hub name, a
    folder or a loaded `Encoder` (which has no folder: only the encoder is written). The fp32 weights are left out
    unless `keep_weights`, or unless `OnnxQueryEncoder` cannot run the export (then `Encoder.load` needs them)."""
    require("onnx")
    require("onnx", "onnx")
    if quantize is not None and quantize not in WEIGHT_QUANTIZATIONS:
        raise DictEmbedError(f"unknown quantization {quantize!r}; choose from {', '.join(WEIGHT_QUANTIZATIONS)}")
    copied: dict[str, Path] = {}  # name in the export -> the source folder's file or folder
    if isinstance(model, Encoder):
        encoder = model
    else:
        source = ModelFolder.open(model)
        encoder = Encoder.load(source, device="cpu", backend="torch")
        copied = {name: source.file(name) for name in COPIED if source.file(name).exists()}
    if encoder.onnx is not None:
        raise DictEmbedError(
            "the model is already an ONNX export; export its source model (or load it with backend='torch')"
        )
    if (problem := unexportable(encoder)) is not None:
        raise DictEmbedError(problem)
    output = link_target(output)  # a link to a folder: that folder is replaced, the link kept
    staging = output.with_name(output.name + ".export")
    clear_way(output, staging)  # an interrupted export's leftovers go; a user's folder of those names is an error
    try:
        encoder.save(staging, exported_record(encoder.record, SPACE_DIR in copied), name=output.name)
        (staging / STAGING_MARK).touch()
        for name, path in copied.items():
            copy_in(path, staging / name)
        if SPACE_DIR in copied and not has_current_index(staging):  # none, or an older version's: written anew
            from dictembed.dictionary import load_dictionary

            own = load_dictionary(str(staging / DEFINITIONS_FILE)) if DEFINITIONS_FILE in copied else None
            write_search_index(staging, own)
        folder = staging / ONNX_DIR
        folder.mkdir()
        manifest = write_graph(encoder, folder, optimize)
        if quantize == "int8":
            smoothing = settings is not None and settings.smooth_ffn > 0
            calibration = calibration_batches(encoder, manifest["inputs"]) if smoothing else None
            manifest = quantized_graph(folder, manifest, settings, calibration)
        manifest["file_print"] = graph_print(folder / manifest["file"])
        (folder / ONNX_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if not keep_weights:
            drop_weights(staging)
        # the card anew for what the folder now holds: its copied entry space, the graph (and the weights or not)
        write_model_card(staging, read_record(staging), name=output.name)
        replace_dir(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output


def feed_batches(encoder: Encoder, inputs: list[str], sentences: list[str], size: int = 16) -> list[dict[str, Any]]:
    """`sentences` tokenised as `encoder` does (its prompt included), `size` at a time, as the int64 numpy feeds of
    a graph's `inputs` (`graph_feeds`)."""
    batches = (sentences[start : start + size] for start in range(0, len(sentences), size))
    return [graph_feeds(inputs, encoder.tokenize(batch)) for batch in batches]


def calibration_batches(encoder: Encoder, inputs: list[str]) -> list[dict[str, Any]]:
    """The `feed_batches` of a seeded sample of `CALIBRATION_SENTENCES` descriptions of the shipped corpus, what a
    reverse dictionary is asked (an export's `inputs` hold the attention mask the ranges are read under)."""
    from dictembed.description_corpus import EVERYDAY, load_descriptions

    texts = [description.text for description in load_descriptions(EVERYDAY)]
    picked = np.random.default_rng(0).choice(len(texts), min(CALIBRATION_SENTENCES, len(texts)), replace=False)
    return feed_batches(encoder, inputs, [texts[i] for i in sorted(picked)])


def write_graph(encoder: Encoder, folder: Path, optimize: bool = True, file: str = FP32_FILE) -> dict[str, Any]:
    """Write the fp32 graph of `encoder`'s backbone into `folder` (as `file`, fused by onnxruntime's optimizer
    unless not `optimize`); returns its manifest."""
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw.onnx"
        names = export_backbone(encoder, raw)
        fused = optimize_graph(raw, folder / file, encoder.backbone.config) if optimize else {}
        if not optimize:
            shutil.copyfile(raw, folder / file)
    return {
        "file": file,
        "quantize": None,
        "inputs": names,
        "optimized": fused,
        "settings": None,
        "onnxruntime": require("onnx", "onnxruntime").__version__,
        "torch": torch.__version__,
    }


def write_query_graph(folder: str | Path, encoder: Encoder | None = None) -> Path | None:
    """Write a trained folder's query graph (its manifest's path returned): the fp32 graph of its own weights
    (`onnx/query.onnx`; `encoder`, when given, holds them already) and its manifest (`onnx/query.json`, with
    `weights_sha256`), so that `predict` and `serve` answer through ONNX Runtime without importing torch, while
    `Encoder.load` still runs the weights. A graph of the weights as they are is kept; one of other weights, or
    whose manifest (of an older version) records no `file_print`, replaced; staged in `onnx.partial/`, so an
    interrupted write leaves the folder as it was. None, nothing written, for a folder without a matrix entry space
    (no search to answer), an export, a folder `OnnxQueryEncoder` could not run, or without the onnx extra; an
    export that fails is logged, never raised."""
    folder = Path(folder)
    if SearchSpace.saved_type(folder) not in MATRIX_SPACES or is_exported(folder):
        return None
    if not installed("onnx"):
        log.debug("%s: no query graph (the onnx extra is not installed)", folder)
        return None
    manifest_path = folder / ONNX_DIR / QUERY_MANIFEST
    try:
        QueryLayout.read(ModelFolder(folder))
        if json.loads(manifest_path.read_text(encoding="utf-8")).get("file_print") is not None:
            return manifest_path  # the graph of these weights is there already, its print recorded
    except NoGraph:
        pass
    except DictEmbedError as err:
        log.info("%s: no query graph, the weights answer queries (%s)", folder, err)
        return None
    staging = folder / (ONNX_DIR + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        encoder = encoder or Encoder.load(folder, device="cpu", backend="torch")
        manifest = write_graph(encoder, staging, file=QUERY_FILE)
        manifest["weights_sha256"] = weights_sha256(folder)
        manifest["file_print"] = graph_print(staging / QUERY_FILE)
        (staging / QUERY_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        replace_dir(staging, folder / ONNX_DIR)
    except Exception as err:  # torch.onnx and onnxruntime's optimizer raise many types; the folder stays whole
        log.warning("%s: no query graph (%s: %s); the weights answer queries", folder, type(err).__name__, err)
        return None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / ONNX_DIR / QUERY_MANIFEST


def copy_in(source: Path, target: Path) -> None:
    """Copy a file or a folder's files (the content of any link, never the link)."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=False)
    else:
        shutil.copyfile(source, target)


def drop_weights(folder: Path) -> None:
    """Remove the fp32 backbone weights of an export (`model.safetensors`, or its shards and their index), unless
    `OnnxQueryEncoder` cannot run the folder: then they stay, logged with the reason."""
    reason = OnnxQueryEncoder.unsupported(folder)
    if reason is not None:
        log.warning("the fp32 weights stay in the export, for Encoder.load: %s", reason)
        return
    for path in [*folder.glob("*.safetensors"), *folder.glob("*.safetensors.index.json")]:
        path.unlink()
