"""A model folder trusts nothing outside itself and nothing it cannot check: no weights are unpickled from it (the
root's, a module folder's, or through a config asking for them), no tokenizer is taken from elsewhere, an ONNX graph
runs only where it is known to be the one its manifest was written with, and damaged files (overlapping tensors, a
damaged search index, a temperature that is no number, NaN vectors, checkpoint files, token ids past the graph's
embeddings) are one-line errors naming the file, or, for a search index, rebuilt; never a traceback, never
silently other results."""

from __future__ import annotations

import json
import logging
import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import cli_refuses, damaged_copy

from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.model_folder import (
    ONNX_DIR,
    ONNX_MANIFEST,
    QUERY_FILE,
    QUERY_MANIFEST,
    RECORD_NAME,
    SEARCH_DIR,
    SPACE_DIR,
    SPACE_META,
    SPACE_TENSORS,
    WEIGHTS_FILE,
    ModelFolder,
    read_record,
)
from dictembed.search_index import INDEX_ARRAYS, SearchIndex, fingerprint
from dictembed.search_space import SearchSpace

pytestmark = pytest.mark.usefixtures("restore_log_level")


@pytest.fixture()
def unpickled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`torch.load` (what transformers and sentence-transformers unpickle weights with) made to fail, its calls
    recorded: a test that a pickle is never read asserts the list stays empty."""
    calls: list[str] = []

    def spy(path: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(path))
        raise RuntimeError(f"unpickled {path}")

    monkeypatch.setattr(torch, "load", spy)
    return calls


def _edit_json(path: Path, change: Callable[[Any], Any]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(change(data)), encoding="utf-8")


def _backbone_pickle(folder: Path, name: str = "pytorch_model.bin") -> Path:
    """The folder's backbone weights as a torch pickle `name` (what an old `save_pretrained` wrote)."""
    from safetensors.torch import load_file

    path = folder / name
    torch.save(load_file(str(folder / WEIGHTS_FILE)), path)
    return path


# ------------------------------------------------------------------------------------ 1: pickles
def test_a_module_folder_holding_only_a_pickle_is_refused(saved_bert: Path, tmp_path: Path, unpickled) -> None:
    """A Dense module whose weights are `3_Dense/pytorch_model.bin`: sentence-transformers would unpickle it."""
    from sentence_transformers.sentence_transformer import modules as st_modules

    folder = damaged_copy(saved_bert, tmp_path / "m")
    dense = st_modules.Dense(32, 32)
    (folder / "3_Dense").mkdir()
    dense.save(str(folder / "3_Dense"))
    (folder / "3_Dense" / WEIGHTS_FILE).unlink()
    torch.save(dense.state_dict(), folder / "3_Dense" / "pytorch_model.bin")
    module = {"path": "3_Dense", "type": f"{type(dense).__module__}.{type(dense).__name__}"}
    _edit_json(folder / "modules.json", lambda modules: [*modules, {"idx": len(modules), "name": "3", **module}])
    with pytest.raises(ModelLoadError, match=r"3_Dense/pytorch_model\.bin are a pickle, which dictembed never loads"):
        Encoder.load(folder, device="cpu")
    assert unpickled == []


def test_a_folder_whose_encoder_is_refused_builds_no_search_index_first(
    served_model: Path, tmp_path: Path, unpickled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder without its stored index whose weights are a pickle: refused before the index is built (seconds
    for a large dictionary), the search index cache left empty."""
    import dictembed.folder_search as folder_search
    import dictembed.reverse_dictionary as reverse_dictionary

    folder = damaged_copy(served_model, tmp_path / "m")
    for name in (SEARCH_DIR, QUERY_FILE, QUERY_MANIFEST):
        shutil.rmtree(folder / name) if (folder / name).is_dir() else (folder / name).unlink(missing_ok=True)
    _backbone_pickle(folder)
    (folder / WEIGHTS_FILE).unlink()
    built: list[Path] = []
    monkeypatch.setattr(folder_search, "folder_search_index", lambda f, *a: built.append(f.path))
    with pytest.raises(ModelLoadError, match=r"pytorch_model\.bin are a pickle"):
        reverse_dictionary.ReverseDictionary.load(folder, device="cpu")
    assert unpickled == [] and built == []


def test_a_stray_safetensors_file_does_not_let_the_pickle_load(saved_bert: Path, tmp_path: Path, unpickled) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _backbone_pickle(folder)
    (folder / WEIGHTS_FILE).unlink()
    (folder / "extra.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"pytorch_model\.bin are a pickle") as caught:
        Encoder.load(folder, device="cpu")
    assert "\n" not in str(caught.value) and unpickled == []


def test_a_module_config_asking_for_the_pickle_is_refused(
    saved_bert: Path, tmp_path: Path, unpickled, capsys: pytest.CaptureFixture[str]
) -> None:
    """model_args use_safetensors false makes transformers prefer pytorch_model.bin to model.safetensors."""
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _backbone_pickle(folder)
    _edit_json(folder / "sentence_bert_config.json", lambda c: c | {"model_args": {"use_safetensors": False}})
    with pytest.raises(ModelLoadError, match=r"sentence_bert_config\.json: model_args\.use_safetensors is false"):
        Encoder.load(folder, device="cpu")
    source = tmp_path / "in.txt"
    source.write_text("a dog barks\n")
    argv = ["encode", "--model", str(folder), "--input", str(source), "--output", str(tmp_path / "v.npy")]
    cli_refuses(capsys, argv, "sentence_bert_config.json", "use_safetensors")
    assert unpickled == []


def test_weights_a_config_names_as_a_pickle_are_refused(saved_bert: Path, tmp_path: Path, unpickled) -> None:
    """config.json's transformers_weights may name `adapter_model.bin`, which transformers then unpickles even with
    model.safetensors beside it."""
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _backbone_pickle(folder, "adapter_model.bin")
    _edit_json(folder / "config.json", lambda c: c | {"transformers_weights": "adapter_model.bin"})
    with pytest.raises(ModelLoadError, match=r"adapter_model\.bin are a pickle"):
        Encoder.load(folder, device="cpu")
    assert unpickled == []


def test_every_model_load_asks_transformers_for_safetensors_only(bert_path: Path, tmp_path: Path, unpickled) -> None:
    """`load_pretrained` (base models, MLM heads) of a folder whose weights are only a pickle: refused unread."""
    from transformers import AutoModel

    from dictembed.loading import load_pretrained

    folder = Path(shutil.copytree(bert_path, tmp_path / "plain"))
    _backbone_pickle(folder)
    (folder / WEIGHTS_FILE).unlink()
    with pytest.raises(ModelLoadError, match="model.safetensors"):
        load_pretrained(AutoModel, str(folder))
    assert unpickled == []


# ------------------------------------------------------------------------------------ 2: the tokenizer's files
@pytest.mark.parametrize("where", ["a folder elsewhere", "a hub name", "a tokenizer file elsewhere"])
def test_a_tokenizer_outside_the_folder_is_refused(where: str, saved_bert: Path, bert_path: Path, tmp_path) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    setting: dict[str, Any] = {
        "a folder elsewhere": {"tokenizer_name_or_path": str(bert_path)},
        "a hub name": {"tokenizer_name_or_path": "bert-base-uncased"},
        "a tokenizer file elsewhere": {"processor_kwargs": {"tokenizer_file": str(bert_path / "tokenizer.json")}},
    }[where]
    _edit_json(folder / "sentence_bert_config.json", lambda c: c | setting)
    with pytest.raises(ModelLoadError, match=r"sentence_bert_config\.json: .* leads outside the model folder"):
        Encoder.load(folder, device="cpu")


def test_a_tokenizer_inside_the_folder_loads(saved_bert: Path, tmp_path: Path) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _edit_json(folder / "sentence_bert_config.json", lambda c: c | {"tokenizer_name_or_path": str(folder)})
    assert Encoder.load(folder, device="cpu").encode(["a dog barks"]).shape == (1, 32)


def test_the_onnx_query_encoder_refuses_a_tokenizer_outside_the_folder(
    served_model: Path, bert_path: Path, tmp_path: Path
) -> None:
    pytest.importorskip("onnxruntime")
    from dictembed.backends.onnx.query import OnnxQueryEncoder

    folder = damaged_copy(served_model, tmp_path / "m")
    _edit_json(folder / "sentence_bert_config.json", lambda c: c | {"tokenizer_name_or_path": str(bert_path)})
    with pytest.raises(ModelLoadError, match="tokenizer_name_or_path .* leads outside the model folder"):
        OnnxQueryEncoder.open(folder)


# ------------------------------------------------------------------------------------ 3: ONNX graphs and manifests
@pytest.fixture(scope="module")
def exported(saved_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT exported to ONNX without its fp32 weights."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from dictembed.backends.onnx.export import export

    return export(saved_bert, tmp_path_factory.mktemp("exported") / "export")


def test_new_manifests_record_the_graphs_print(served_model: Path, exported: Path) -> None:
    for manifest in (served_model / ONNX_DIR / QUERY_MANIFEST, exported / ONNX_DIR / ONNX_MANIFEST):
        assert len(json.loads(manifest.read_text())["file_print"]) == 40


def test_a_query_graph_without_a_print_runs_unchecked_with_a_warning_until_written_anew(
    served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A query.json of an older version (no file_print) cannot show that query.onnx is the graph it was written
    with: the graph runs (the weights it names are checked), with one warning saying so and how to record it;
    `write_query_graph` writes the graph again, with its print."""
    from dictembed.backends.onnx.export import write_query_graph
    from dictembed.backends.onnx.query import OnnxQueryEncoder
    from dictembed.query_encoder import exported_query_encoder

    folder = damaged_copy(served_model, tmp_path / "m")
    manifest = folder / ONNX_DIR / QUERY_MANIFEST
    _edit_json(manifest, lambda m: {k: v for k, v in m.items() if k != "file_print"})
    with caplog.at_level(logging.WARNING):
        assert OnnxQueryEncoder.unsupported(folder) is None
        assert exported_query_encoder(ModelFolder.open(folder), "cpu", None) is not None
        assert exported_query_encoder(ModelFolder.open(folder), "cpu", None) is not None
    assert caplog.text.count("no file_print") == 1 and "runs unchecked" in caplog.text
    assert "write_query_graph" in caplog.text
    assert write_query_graph(folder) == manifest
    assert "file_print" in json.loads(manifest.read_text()) and OnnxQueryEncoder.unsupported(folder) is None


def test_a_query_graph_without_a_print_of_other_weights_gets_one_warning_not_two(
    served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A manifest naming no print and no weights said the graph "runs unchecked", then that "the weights answer
    instead": only the second is true."""
    from dictembed.query_encoder import exported_query_encoder

    folder = damaged_copy(served_model, tmp_path / "m")
    _edit_json(folder / ONNX_DIR / QUERY_MANIFEST, lambda m: {"file": m["file"]})
    with caplog.at_level(logging.WARNING):
        assert exported_query_encoder(ModelFolder.open(folder), "cpu", None) is None
    assert "the weights answer instead" in caplog.text and "runs unchecked" not in caplog.text


@pytest.mark.parametrize("text", ["garbage\n", "[]", '{"file": 3}'])
def test_a_query_graph_manifest_that_cannot_be_read_is_a_warning_not_a_silent_slow_path(
    served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    """A corrupt onnx/query.json moved predict and serve onto the torch weights (8x slower) with a debug line only."""
    from dictembed.query_encoder import exported_query_encoder

    folder = damaged_copy(served_model, tmp_path / "m")
    (folder / ONNX_DIR / QUERY_MANIFEST).write_text(text)
    with caplog.at_level(logging.WARNING):
        assert exported_query_encoder(ModelFolder.open(folder), "cpu", None) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(folder) in warnings[0] and QUERY_MANIFEST in warnings[0]
    assert "the weights answer instead" in warnings[0] and "\n" not in warnings[0]


def test_an_export_without_a_print_runs_with_a_warning(
    exported: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dictembed.backends.onnx.query import OnnxQueryEncoder

    folder = damaged_copy(exported, tmp_path / "m")
    _edit_json(folder / ONNX_DIR / ONNX_MANIFEST, lambda m: {k: v for k, v in m.items() if k != "file_print"})
    with caplog.at_level(logging.WARNING):
        assert OnnxQueryEncoder.open(folder).encode(["a dog barks"]).shape == (1, 32)
    assert "records no file_print" in caplog.text and "run unchecked" in caplog.text


def test_a_manifest_naming_a_file_outside_the_onnx_folder_is_the_error_named(exported: Path, tmp_path: Path) -> None:
    """Not the export's missing fp32 weights, which is no fault of an export."""
    from dictembed.query_encoder import exported_query_encoder

    folder = damaged_copy(exported, tmp_path / "m")
    _edit_json(folder / ONNX_DIR / ONNX_MANIFEST, lambda m: m | {"file": "../tokenizer.json"})
    named = r"export\.json: file '\.\./tokenizer\.json' is not a file name in the onnx folder"
    with pytest.raises(ModelLoadError, match=named):
        Encoder.load(folder, device="cpu")
    with pytest.raises(ModelLoadError, match=named):
        exported_query_encoder(ModelFolder.open(folder), "cpu", None)


def test_library_details_are_cut_at_a_word() -> None:
    from dictembed.backends.onnx.session import clipped

    text = "onnxruntime failed: " + " ".join(f"word{i}" for i in range(100))
    cut = clipped(text)
    assert len(cut) <= 200 and cut.endswith("…") and cut[:-1] == text[: len(cut) - 1]
    assert text.startswith(cut[:-1] + " ")  # a whole word before the ellipsis
    assert clipped("short\n detail") == "short detail" and clipped("", ValueError()) == "ValueError"


# ------------------------------------------------------------------------------------ 4: safetensors offsets
def _header(path: Path) -> tuple[int, dict[str, Any]]:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    return length, json.loads(data[8 : 8 + length])


def _write_header(path: Path, header: dict[str, Any]) -> None:
    """Rewrite the header in place, padded to its length (the data stays where it is)."""
    length, _ = _header(path)
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length
    data = bytearray(path.read_bytes())
    data[8 : 8 + length] = text.ljust(length, b" ")
    path.write_bytes(bytes(data))


def test_overlapping_tensors_are_refused_as_safetensors_refuses_them(served_model: Path, tmp_path: Path) -> None:
    """headwords made to read the matrix's bytes (and the last tensor's moved up so the data still ends where the
    file does): each tensor fits the file and its shape, but two alias the same bytes."""
    from safetensors import safe_open

    folder = damaged_copy(served_model, tmp_path / "m")
    path = folder / SPACE_DIR / SPACE_TENSORS
    _, header = _header(path)
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    assert tensors["headwords"]["data_offsets"][1] - tensors["headwords"]["data_offsets"][0] == (
        tensors["matrix"]["data_offsets"][1] - tensors["matrix"]["data_offsets"][0]
    )
    header["headwords"]["data_offsets"] = header["matrix"]["data_offsets"]
    _write_header(path, header)
    with pytest.raises(Exception):  # noqa: B017 - safetensors' own error type
        safe_open(str(path), "np")
    with pytest.raises(DictEmbedError, match=r"tensors\.safetensors: corrupt or truncated .*overlaps") as caught:
        SearchSpace.open(folder)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------------------------ 5: the stored search index
def _index_damage(name: str) -> Callable[[dict[str, np.ndarray]], None]:
    def damage(arrays: dict[str, np.ndarray]) -> None:
        if name == "order out of range":
            arrays["order"][0] = len(arrays["order"]) + 5
        elif name == "order repeating an entry":
            arrays["order"][0] = arrays["order"][1]
        elif name == "starts decreasing":
            arrays["starts"][1], arrays["starts"][2] = arrays["starts"][2], arrays["starts"][1]
        elif name == "inverse norm NaN":
            arrays["inverse_norms"][0] = np.nan
        elif name == "frequency inf":
            arrays["frequencies"][0] = np.inf
        elif name == "text not UTF-8":
            arrays["text"][0] = 0xFF

    return damage


@pytest.mark.parametrize(
    "damage",
    [
        "order out of range",
        "order repeating an entry",
        "starts decreasing",
        "inverse norm NaN",
        "frequency inf",
        "text not UTF-8",
    ],
)
def test_a_damaged_search_index_is_rebuilt(
    damage: str, served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from safetensors.numpy import load_file, save_file

    from dictembed.reverse_dictionary import ReverseDictionary

    folder = damaged_copy(served_model, tmp_path / "m")
    path = folder / SEARCH_DIR / INDEX_ARRAYS
    arrays = {name: array.copy() for name, array in load_file(str(path)).items()}
    if damage == "frequency inf" and "frequencies" not in arrays:
        pytest.skip("wordfreq is not installed: the index keeps no frequencies")
    _index_damage(damage)(arrays)
    save_file(arrays, str(path))
    source, entries = fingerprint(folder), len(SearchSpace.open(folder))
    with caplog.at_level(logging.WARNING):
        assert SearchIndex.open(folder / SEARCH_DIR, source, entries) is None
    assert "damaged search index" in caplog.text
    before = [r.to_dict() for r in ReverseDictionary.load(served_model).search("a pet that barks", 5)]
    after = [r.to_dict() for r in ReverseDictionary.load(folder).search("a pet that barks", 5)]
    assert after == before


# ------------------------------------------------------------------------------------ 6 and 8: the entry space
@pytest.mark.parametrize("temperature", ["abc", None, -1, True])
def test_a_temperature_that_is_no_positive_number_is_named(temperature: Any, served_model: Path, tmp_path) -> None:
    from dictembed.saved_entry_space import load_entry_space

    folder = damaged_copy(served_model, tmp_path / "m")
    _edit_json(folder / SPACE_DIR / SPACE_META, lambda meta: meta | {"temperature": temperature})
    for load in (SearchSpace.open, load_entry_space):
        with pytest.raises(DictEmbedError, match=r"space\.json: temperature .* is not a positive number") as caught:
            load(folder)
        assert str(folder / SPACE_DIR) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["headwords", "definitions"])
def test_nan_headword_or_definition_vectors_are_refused_by_predict(
    name: str, served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors.numpy import load_file, save_file

    folder = damaged_copy(served_model, tmp_path / "m")
    path = folder / SPACE_DIR / SPACE_TENSORS
    tensors = {key: value.copy() for key, value in load_file(str(path)).items()}
    tensors[name][1, :4] = np.nan
    save_file(tensors, str(path))
    with pytest.raises(DictEmbedError, match=f"tensors.safetensors: {name} holds NaN or infinite values"):
        SearchSpace.open(folder)
    cli_refuses(capsys, ["predict", "--model", str(folder), "a pet that barks"], "entry_space", name)


def test_all_finite_finds_every_non_finite_value() -> None:
    from dictembed.search_space import all_finite

    rng = np.random.default_rng(0)
    for dtype in (np.float16, np.float32, np.float64):
        values = rng.standard_normal((300, 7)).astype(dtype)
        assert all_finite(values) and all_finite(values[:, ::2]) and all_finite(values[:0])
        for bad in (np.nan, -np.nan, np.inf, -np.inf):
            for where in ((0, 0), (299, 6), (150, 3)):
                spoilt = values.copy()
                spoilt[where] = bad
                assert not all_finite(spoilt), (dtype, bad, where)
    assert all_finite(np.arange(5)) and not all_finite(np.array([1, np.nan], dtype=">f4"))


# ------------------------------------------------------------------------------------ 7: token ids on the ONNX path
def test_the_onnx_query_encoder_refuses_token_ids_past_the_embeddings(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime")
    from tokenizers import Tokenizer

    from dictembed.backends.onnx.query import OnnxQueryEncoder

    folder = damaged_copy(served_model, tmp_path / "m")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.add_tokens(["addedwordone", "addedwordtwo"])
    tokenizer.save(str(folder / "tokenizer.json"))
    expected = r"the tokenizer has 30524 tokens, the model's embeddings 30522 rows: ids 30522 to 30523 have no"
    with pytest.raises(ModelLoadError, match=expected):
        OnnxQueryEncoder.open(folder)
    cli_refuses(capsys, ["predict", "--model", str(folder), "addedwordone"], str(folder), "30524 tokens")


# ------------------------------------------------------------------------------------ 9: checkpoints
def _parts() -> tuple[torch.nn.Module, Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    from dictembed.checkpoint import save_checkpoint

    model, optimizer, scheduler = _parts()
    model(torch.ones(1, 4)).sum().backward()
    optimizer.step()
    scheduler.step()
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    save_checkpoint(folder, model, optimizer, scheduler, {"step": 7, "identity": {"a": 1}})
    return folder


def _rng_without_numpy(folder: Path) -> str:
    _edit_json(folder / "rng.json", lambda data: {k: v for k, v in data.items() if k != "numpy"})
    return "rng.json"


def _rng_a_list(folder: Path) -> str:
    (folder / "rng.json").write_text("[1, 2]")
    return "rng.json"


def _scheduler_a_list(folder: Path) -> str:
    (folder / "scheduler.json").write_text("[1]")
    return "scheduler.json"


def _scheduler_hiding_a_method(folder: Path) -> str:
    _edit_json(folder / "scheduler.json", lambda data: data | {"step": 1})
    return "scheduler.json"


def _torch_state_of_three_bytes(folder: Path) -> str:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "rng.safetensors"))
    save_file(tensors | {"torch": torch.zeros(3, dtype=torch.uint8)}, str(folder / "rng.safetensors"))
    return "rng.safetensors"


def _step_no_number(folder: Path) -> str:
    _edit_json(folder / "run.json", lambda data: data | {"step": "abc"})
    return "run.json"


def _optimizer_a_list(folder: Path) -> str:
    (folder / "optimizer.json").write_text("[1]")
    return "optimizer.json"


@pytest.mark.parametrize(
    "damage",
    [
        _rng_without_numpy,
        _rng_a_list,
        _scheduler_a_list,
        _scheduler_hiding_a_method,
        _torch_state_of_three_bytes,
        _step_no_number,
        _optimizer_a_list,
    ],
)
def test_a_damaged_checkpoint_file_is_named(damage: Callable[[Path], str], checkpoint: Path) -> None:
    from dictembed.checkpoint import load_checkpoint

    name = damage(checkpoint)
    model, optimizer, scheduler = _parts()
    states = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    with pytest.raises(DictEmbedError) as caught:
        load_checkpoint(checkpoint, model, optimizer, scheduler)
    assert str(caught.value).startswith(f"{checkpoint / name}: ") and "\n" not in str(caught.value)
    assert torch.equal(states[0], torch.get_rng_state()) and random.getstate() == states[2]  # nothing restored
    assert np.array_equal(states[1], np.random.get_state()[1])


def test_an_intact_checkpoint_still_resumes(checkpoint: Path) -> None:
    from dictembed.checkpoint import load_checkpoint

    model, optimizer, scheduler = _parts()
    assert load_checkpoint(checkpoint, model, optimizer, scheduler)["step"] == 7
    assert scheduler.last_epoch == 1


def test_an_fp16_runs_gradient_scaler_is_checkpointed(tmp_path: Path) -> None:
    """fp16 training's gradient scaler (its scale, lowered on every overflow, and growth tracker) was not saved: a
    resumed run restarted at the initial scale and skipped other steps than the straight run."""
    from dictembed.checkpoint import SCALER_FILE, load_checkpoint, save_checkpoint

    model, optimizer, scheduler = _parts()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    scaler.scale(torch.ones(()))  # the scale is made at the first scaled loss
    scaler.update(new_scale=1024.0)  # as after overflows
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    save_checkpoint(folder, model, optimizer, scheduler, {"step": 3}, scaler)
    fresh = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    model, optimizer, scheduler = _parts()
    assert load_checkpoint(folder, model, optimizer, scheduler, fresh)["step"] == 3
    assert fresh.state_dict() == scaler.state_dict() and fresh.get_scale() == 1024.0
    (folder / SCALER_FILE).write_text('{"scale": "big"}')
    with pytest.raises(DictEmbedError, match=f"{folder / SCALER_FILE}: corrupt checkpoint file"):
        load_checkpoint(folder, *_parts(), torch.amp.GradScaler("cpu"))
    assert load_checkpoint(folder, *_parts())["step"] == 3  # an fp32 resume reads no scaler


# ------------------------------------------------------------------------------------ 10: the record
def test_an_unknown_pooling_in_the_record_names_the_record(saved_bert: Path, tmp_path: Path) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _edit_json(folder / RECORD_NAME, lambda record: record | {"encoder": record["encoder"] | {"pooling": "bogus"}})
    with pytest.raises(DictEmbedError, match=rf"{RECORD_NAME}: bad run record \(encoder\.pooling is 'bogus'"):
        read_record(folder)
    with pytest.raises(DictEmbedError, match=RECORD_NAME):
        Encoder.load(folder, device="cpu")


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_all_finite_reads_a_mapped_tensor_from_its_file(tmp_path: Path, dtype: type) -> None:
    """A tensor mapped whole from a file is read through one chunk's buffer (its pages never all resident): a
    non-finite value anywhere, the last of several chunks included, is found; a slice of the map is read in place."""
    from safetensors.numpy import save_file

    from dictembed.search_space import FINITE_CHUNK, _mapped_file, all_finite, mapped_tensors

    values = np.random.default_rng(0).normal(size=(2 * FINITE_CHUNK + 5,)).astype(dtype)
    broken = values.copy()
    broken[-1] = np.inf
    save_file({"fine": values, "broken": broken}, str(tmp_path / "t.safetensors"))
    tensors = mapped_tensors(tmp_path / "t.safetensors")
    assert _mapped_file(tensors["fine"]) is not None and _mapped_file(tensors["fine"][:10]) is None
    assert all_finite(tensors["fine"]) and not all_finite(tensors["broken"])
    assert all_finite(tensors["broken"][:-1]) and not all_finite(tensors["broken"][-3:])


def test_all_finite_reads_the_map_when_its_file_was_replaced(tmp_path: Path) -> None:
    """The file read must be the one mapped: replaced since (an index rebuilt beside it, say), the map itself is
    checked, whatever the new file holds or however short it is."""
    import os

    from safetensors.numpy import save_file

    from dictembed.search_space import all_finite, mapped_tensors

    path = tmp_path / "t.safetensors"
    save_file({"a": np.ones(1000, np.float16)}, str(path))
    tensors = mapped_tensors(path)
    for replacement in (np.full(1000, np.nan, np.float16), np.ones(10, np.float16)):
        save_file({"a": replacement}, str(tmp_path / "new.safetensors"))
        os.replace(tmp_path / "new.safetensors", path)
        assert all_finite(tensors["a"])


def test_a_checkpoint_of_another_torch_still_resumes(checkpoint: Path) -> None:
    """A scheduler state with a key this torch lacks (an older one's `verbose`) or a null where it holds a value
    is another version's, not damage."""
    from dictembed.checkpoint import load_checkpoint

    _edit_json(checkpoint / "scheduler.json", lambda data: data | {"verbose": False, "_step_count": None})
    model, optimizer, scheduler = _parts()
    assert load_checkpoint(checkpoint, model, optimizer, scheduler)["step"] == 7
