"""A trained folder's own query graph (`write_query_graph`): `train` and `index` write the fp32 graph of the folder's
weights beside them, `predict` and `ReverseDictionary.load` answer through ONNX Runtime alone with the ranks of the
weights, `Encoder.load` still runs the weights, a graph of other weights is never run and is replaced, an
interrupted write leaves the folder as it was, and a push leaves the graph out."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import predict_in_a_process, torch_reverse_dictionary

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from dictembed import extras, query_encoder  # noqa: E402
from dictembed.backends.onnx import export as export_module  # noqa: E402
from dictembed.backends.onnx.export import export, write_query_graph  # noqa: E402
from dictembed.backends.onnx.query import OnnxQueryEncoder  # noqa: E402
from dictembed.encoder import Encoder  # noqa: E402
from dictembed.model_folder import (  # noqa: E402
    ONNX_DIR,
    ONNX_MANIFEST,
    QUERY_FILE,
    QUERY_MANIFEST,
    RECORD_NAME,
    WEIGHTS_FILE,
    ModelFolder,
)
from dictembed.reverse_dictionary import ReverseDictionary  # noqa: E402

QUERIES = ("a pet that barks", "water that falls from clouds", "something you sit on")


def _copy(served_model: Path, tmp_path: Path, name: str = "copy") -> Path:
    return Path(shutil.copytree(served_model, tmp_path / name))


def _edit_weights(folder: Path) -> None:
    """Double one embedding matrix of the folder's weights (a hand-edited folder)."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / WEIGHTS_FILE)
    name = next(n for n in sorted(tensors) if n.endswith("word_embeddings.weight"))
    tensors[name] = tensors[name] * 2
    save_file(tensors, folder / WEIGHTS_FILE)


def _fails(*args: object) -> None:
    raise RuntimeError("exporter broke")


def test_train_writes_the_graph_and_the_folder_stays_a_torch_model(served_model: Path) -> None:
    manifest = json.loads((served_model / ONNX_DIR / QUERY_MANIFEST).read_text())
    assert manifest["file"] == QUERY_FILE and (served_model / ONNX_DIR / QUERY_FILE).is_file()
    assert len(manifest["weights_sha256"]) == 64 and not (served_model / ONNX_DIR / "model.onnx").exists()
    assert not ModelFolder.open(served_model).is_exported
    assert Encoder.load(served_model, device="cpu").backend == "torch"


def test_the_graph_answers_with_the_ranks_of_the_weights(served_model: Path) -> None:
    fast, weights = ReverseDictionary.load(served_model), torch_reverse_dictionary(served_model)
    assert isinstance(fast.encoder, OnnxQueryEncoder) and not isinstance(weights.encoder, OnnxQueryEncoder)
    assert fast.score_kind == weights.score_kind
    for query in QUERIES:
        expected, found = weights.search(query, k=5), fast.search(query, k=5)
        assert [r.words for r in found] == [r.words for r in expected], query
        np.testing.assert_allclose([r.score for r in found], [r.score for r in expected], atol=1e-4)


def test_the_onnx_backend_runs_the_graph_of_these_weights(served_model: Path, tmp_path: Path) -> None:
    """`Encoder.load(folder, backend="onnx")` runs the folder's query graph instead of exporting one at load (and
    a graph of other weights never): the weights' vectors within 1e-5. OpenVINO opens its graph through the same
    `backbone_graph`."""
    sentences = list(QUERIES)
    reference = Encoder.load(served_model, device="cpu").encode(sentences)
    onnx = Encoder.load(served_model, backend="onnx")
    assert onnx.onnx is not None and onnx.onnx.manifest["file"] == QUERY_FILE
    np.testing.assert_allclose(onnx.encode(sentences), reference, atol=1e-5)
    edited = _copy(served_model, tmp_path, "edited")
    _edit_weights(edited)
    stale = Encoder.load(edited, backend="onnx")
    assert stale.onnx is not None and stale.onnx.manifest["file"] is None  # exported now, from the edited weights
    np.testing.assert_allclose(stale.encode(sentences), Encoder.load(edited, device="cpu").encode(sentences), atol=1e-5)


def test_the_weights_answer_on_a_gpu_or_in_another_precision(
    served_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(ReverseDictionary.load(served_model, device="cpu").encoder, OnnxQueryEncoder)
    assert not isinstance(ReverseDictionary.load(served_model, precision="bf16").encoder, OnnxQueryEncoder)
    monkeypatch.setattr(query_encoder, "accelerator_present", lambda: True)  # "auto" would choose the GPU
    assert isinstance(ReverseDictionary.load(served_model, device="cpu").encoder, OnnxQueryEncoder)
    assert query_encoder.exported_query_encoder(ModelFolder.open(served_model), "auto", "auto") is None


def test_predict_on_a_trained_folder_imports_no_torch(served_model: Path) -> None:
    expected = [r.words for r in torch_reverse_dictionary(served_model).search(QUERIES[0], k=3)]
    assert predict_in_a_process(served_model, QUERIES[0]) == (expected, [])


def test_a_graph_of_other_weights_is_never_run_and_is_replaced(
    served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _copy(served_model, tmp_path, "edited")
    _edit_weights(folder)
    with caplog.at_level(logging.WARNING):
        rd = ReverseDictionary.load(folder)
    assert not isinstance(rd.encoder, OnnxQueryEncoder)
    assert any("made from other weights" in r.getMessage() for r in caplog.records)
    expected = torch_reverse_dictionary(folder)
    for query in QUERIES:
        assert [r.words for r in rd.search(query, k=5)] == [r.words for r in expected.search(query, k=5)]
    assert write_query_graph(folder) == folder / ONNX_DIR / QUERY_MANIFEST
    fast = ReverseDictionary.load(folder)
    assert isinstance(fast.encoder, OnnxQueryEncoder)
    for query in QUERIES:
        assert [r.words for r in fast.search(query, k=5)] == [r.words for r in expected.search(query, k=5)]


def test_a_graph_of_these_weights_is_kept(served_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(served_model, tmp_path)
    before = (folder / ONNX_DIR / QUERY_FILE).stat().st_mtime_ns
    monkeypatch.setattr(export_module, "export_backbone", _fails)  # an export would fail: none is made
    assert write_query_graph(folder) == folder / ONNX_DIR / QUERY_MANIFEST
    assert (folder / ONNX_DIR / QUERY_FILE).stat().st_mtime_ns == before


def test_no_graph_without_a_matrix_space_without_onnx_or_for_an_export(
    served_model: Path, saved_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = shutil.copytree(saved_bert, tmp_path / "plain")
    assert write_query_graph(plain) is None and not (plain / ONNX_DIR).exists()
    exported = export(served_model, tmp_path / "exported")  # an export of a folder with a graph carries none
    assert (exported / ONNX_DIR / ONNX_MANIFEST).is_file() and not (exported / ONNX_DIR / QUERY_MANIFEST).exists()
    assert write_query_graph(exported) is None and not (exported / ONNX_DIR / QUERY_MANIFEST).exists()
    folder = _copy(served_model, tmp_path)
    shutil.rmtree(folder / ONNX_DIR)
    real = extras.importlib.util.find_spec  # what `extras.installed` asks
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda n, *a: None if n == "onnx" else real(n, *a))
    assert write_query_graph(folder) is None and not (folder / ONNX_DIR).exists()
    monkeypatch.undo()
    assert write_query_graph(folder) == folder / ONNX_DIR / QUERY_MANIFEST


def test_no_graph_for_a_folder_the_query_encoder_cannot_run(
    served_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """dictembed's own first_last_avg pooling needs every hidden layer: the weights answer, no export is tried."""
    folder = _copy(served_model, tmp_path)
    shutil.rmtree(folder / ONNX_DIR)
    record = json.loads((folder / RECORD_NAME).read_text())
    record["encoder"]["pooling"] = "first_last_avg"
    (folder / RECORD_NAME).write_text(json.dumps(record))
    monkeypatch.setattr(export_module, "export_backbone", _fails)
    with caplog.at_level(logging.INFO):
        assert write_query_graph(folder) is None
    assert not (folder / ONNX_DIR).exists() and "exporter broke" not in caplog.text
    assert "first_last_avg" in caplog.text


def test_a_failed_or_interrupted_export_leaves_the_folder_as_it_was(
    served_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _copy(served_model, tmp_path)
    shutil.rmtree(folder / ONNX_DIR)
    monkeypatch.setattr(export_module, "export_backbone", _fails)
    with caplog.at_level(logging.WARNING):
        assert write_query_graph(folder) is None
    assert not (folder / ONNX_DIR).exists() and not list(folder.glob("*.partial"))
    assert "exporter broke" in caplog.text
    assert [r.words for r in ReverseDictionary.load(folder).search(QUERIES[0], k=3)]

    stale = _copy(served_model, tmp_path, "stale")
    _edit_weights(stale)
    graph = (stale / ONNX_DIR / QUERY_FILE).read_bytes()

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(export_module, "export_backbone", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_query_graph(stale)
    assert (stale / ONNX_DIR / QUERY_FILE).read_bytes() == graph and not list(stale.glob("*.partial"))


def test_index_writes_the_graph(language_folders: dict[str, Path]) -> None:
    for path in language_folders.values():
        assert (path / ONNX_DIR / QUERY_MANIFEST).is_file()
        assert isinstance(ReverseDictionary.load(path).encoder, OnnxQueryEncoder)


def test_a_push_leaves_the_graph_out(served_model: Path) -> None:
    from dictembed.hub import upload_plan

    plan = upload_plan(served_model)
    assert not any(f.startswith(f"{ONNX_DIR}/") for f in plan.files) and WEIGHTS_FILE in plan.files
    assert [item.path for item in plan.left_out if "query graph" in item.reason] == [ONNX_DIR]
