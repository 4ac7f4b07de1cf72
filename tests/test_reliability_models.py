"""Broken, hostile and unknown model folders: every one is refused with one line naming the model (and the
file), never a traceback; nothing in a model folder is executed (pickles, Python files named by `auto_map` or
`modules.json`); saving, loading and encoding a local model never use the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PlantedPickle, cli_refuses, cli_succeeds, damaged_copy, one_line_error

from dictembed.cli import main

pytestmark = pytest.mark.usefixtures("restore_log_level")


def _damaged(saved: Path, tmp_path: Path, name: str, how: str) -> Path:
    """A copy of the saved model at tmp_path/m with one file damaged (see conftest's `damage`)."""
    return damaged_copy(saved, tmp_path / "m", name, how)


def _encode_fails(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    source = tmp_path / "in.txt"
    source.write_text("a dog barks\n")
    args = ["encode", "--model", str(folder), "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main(args) == 1
    assert not (tmp_path / "v.npy").exists()
    return one_line_error(capsys)


def _encode_args(model: Path | str, tmp_path: Path) -> list[str]:
    source = tmp_path / "in.txt"
    source.write_text("a dog barks\n")
    return ["encode", "--model", str(model), "--input", str(source), "--output", str(tmp_path / "v.npy")]


# ------------------------------------------------------------------------------------ not a model
@pytest.mark.parametrize(
    "model",
    ["no-such-model", "model.txt", "empty-model", "no-such-user/no-such-model", "a/b/c d"],
    ids=["missing folder", "a file", "an empty folder", "a hub name, offline", "neither a folder nor a hub id"],
)
def test_what_is_not_a_model_is_named(model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path: Path | str = model
    if model in ("no-such-model", "model.txt", "empty-model"):
        path = tmp_path / model
        if model == "model.txt":
            path.write_text("not a model")
        elif model == "empty-model":
            path.mkdir()
    line = cli_refuses(capsys, _encode_args(path, tmp_path), model)
    assert not (tmp_path / "v.npy").exists()
    if model == "empty-model":  # a folder given is a folder: no advice to pass one, nor a tokenizer's complaint
        assert "no network" not in line and line.endswith("holds no model: it is empty")


# ------------------------------------------------------------------------------------ damaged folders
DAMAGED = [  # (file, damage (see conftest's `damage`), what the error names besides the model folder)
    ("tokenizer.json", "rm", "tokenizer"),
    ("model.safetensors", "rm", ""),
    ("config.json", "rm", ""),
    ("modules.json", "[]", "modules.json"),
    ("sentence_bert_config.json", "{oops", "sentence_bert_config.json"),
    ("tokenizer_config.json", "{oops", "tokenizer_config.json"),
    ("dictembed.json", "{oops", "dictembed.json"),
    ("config_sentence_transformers.json", "{oops", "config_sentence_transformers.json"),
]


@pytest.mark.parametrize(
    ("plain", "name", "how", "named"),
    [
        *[(False, *case) for case in DAMAGED],
        *[(True, *case) for case in DAMAGED if case[0] in ("tokenizer.json", "model.safetensors")],
    ],
    ids=lambda value: {True: "plain HF folder", False: "dictembed save"}.get(value, value or "-"),
)
def test_damaged_model_files_are_refused(
    plain: bool, name: str, how: str, named: str, saved_bert: Path, bert_path: Path, tmp_path: Path, capsys
) -> None:
    """Every file of a dictembed save (or of a plain Hugging Face folder) removed or corrupt: one error line."""
    folder = damaged_copy(bert_path if plain else saved_bert, tmp_path / "damaged-model", name, how)
    cli_refuses(capsys, _encode_args(folder, tmp_path), "damaged-model", *[named] if named else [])
    assert not (tmp_path / "v.npy").exists()


def test_a_config_of_another_shape_is_refused(saved_bert: Path, tmp_path: Path, capsys) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "resized-model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"hidden_size": 64, "intermediate_size": 128}))
    cli_refuses(capsys, _encode_args(folder, tmp_path), "resized-model")


def test_missing_tokenizer_files_are_refused(
    saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its tokenizer files a folder would load a 5-token vocabulary and encode every word as [UNK]: refused."""
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_bert, tmp_path, "tokenizer.json", "rm")
    (folder / "vocab.txt").unlink(missing_ok=True)
    with pytest.raises(ModelLoadError, match=r"the tokenizer has 5 tokens for the model's 30522; .*missing or broken"):
        Encoder.load(str(folder), device="cpu")
    assert str(folder) in _encode_fails(folder, tmp_path, capsys)


@pytest.mark.parametrize(
    ("name", "damage", "named"),
    [
        ("model.safetensors", "half", "model.safetensors is corrupt or truncated"),
        ("model.safetensors", "", "model.safetensors is corrupt or truncated"),
        ("config.json", "{oops", "config.json is corrupt or truncated"),
        ("tokenizer.json", "[1, 2", "tokenizer.json is corrupt or truncated"),
        ("1_Pooling/config.json", "{oops", "1_Pooling/config.json is corrupt or truncated"),
        ("modules.json", "{oops", "modules.json: corrupt module list"),
        ("modules.json", '{"a": 1}', "modules.json: corrupt module list"),
    ],
)
def test_corrupt_model_files_name_the_file(
    name: str, damage: str, named: str, saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_bert, tmp_path, name, damage)
    with pytest.raises(ModelLoadError, match=f"{folder}.*{named}") as caught:
        Encoder.load(str(folder), device="cpu")
    assert "\n" not in str(caught.value)
    assert named in _encode_fails(folder, tmp_path, capsys)


def test_truncated_weights_of_a_plain_model_folder(bert_path: Path, tmp_path: Path) -> None:
    import shutil

    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(Path(shutil.copytree(bert_path, tmp_path / "plain")), tmp_path, "model.safetensors", "half")
    with pytest.raises(ModelLoadError, match=r"model\.safetensors is corrupt or truncated \(Error while deserializing"):
        Encoder.load(str(folder), device="cpu")


@pytest.mark.parametrize("escape", ["../../outside", "/etc", "link"])
def test_module_paths_outside_the_folder_are_not_followed(escape: str, saved_bert: Path, tmp_path: Path) -> None:
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_bert, tmp_path, "README.md", "rm")
    if escape == "link":
        (folder / "link").symlink_to(tmp_path.parent, target_is_directory=True)
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = escape
    (folder / "modules.json").write_text(json.dumps(modules))
    refused = "link links outside the folder" if escape == "link" else f"module path '{escape}' leads outside"
    with pytest.raises(ModelLoadError, match=refused):
        Encoder.load(str(folder), device="cpu")


def test_an_absolute_module_path_is_refused_even_to_a_real_module(saved_bert: Path, tmp_path: Path, capsys) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = str(saved_bert / "1_Pooling")
    (folder / "modules.json").write_text(json.dumps(modules))
    cli_refuses(capsys, _encode_args(folder, tmp_path), "modules.json")


# ------------------------------------------------------------------------------------ nothing is executed
def test_pickled_weights_are_refused_not_run(saved_bert: Path, tmp_path: Path) -> None:
    """A planted pytorch_model.bin in place of the safetensors: refused by name, and the pickle never runs."""
    import pickle

    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    class Planted:
        def __reduce__(self) -> tuple[object, tuple[str, str]]:
            return open, (str(tmp_path / "EXECUTED"), "w")

    folder = _damaged(saved_bert, tmp_path, "model.safetensors", "rm")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Planted()))
    with pytest.raises(ModelLoadError, match=r"pytorch_model\.bin are a pickle, which dictembed never loads"):
        Encoder.load(str(folder), device="cpu")
    assert not (tmp_path / "EXECUTED").exists()


def test_pickles_beside_the_safetensors_are_never_loaded(saved_bert: Path, tmp_path: Path, capsys) -> None:
    folder = damaged_copy(saved_bert, tmp_path / "m")
    for name in ("pytorch_model.bin", "training_args.bin", "optimizer.pt"):
        (folder / name).write_bytes(PlantedPickle(tmp_path / "EXECUTED").dumps())
    cli_succeeds(capsys, _encode_args(folder, tmp_path))
    assert not (tmp_path / "EXECUTED").exists()


def _with_python_file(saved_bert: Path, tmp_path: Path) -> Path:
    """A copy of the saved model holding evil.py, whose import creates tmp_path/EXECUTED."""
    folder = damaged_copy(saved_bert, tmp_path / "m")
    marker = tmp_path / "EXECUTED"
    (folder / "evil.py").write_text(f"open({str(marker)!r}, 'w')\nfrom transformers import BertModel as Evil\n")
    return folder


def test_auto_map_to_a_python_file_is_not_followed(saved_bert: Path, tmp_path: Path, capsys) -> None:
    """config.json's auto_map needs trust_remote_code, which dictembed never passes: the model loads as a BERT."""
    folder = _with_python_file(saved_bert, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"auto_map": {"AutoModel": "evil.Evil"}}))
    cli_succeeds(capsys, _encode_args(folder, tmp_path))
    assert not (tmp_path / "EXECUTED").exists()


def test_a_module_type_naming_a_python_file_is_refused(saved_bert: Path, tmp_path: Path, capsys) -> None:
    folder = _with_python_file(saved_bert, tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([modules[0], modules[1] | {"type": "evil.Evil"}]))
    cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder))
    assert not (tmp_path / "EXECUTED").exists()


# ------------------------------------------------------------------------------------ no network
NETWORK_PROBE = r"""
import json, socket, sys, time

attempts = []


def refuse(self, address, *args, **kwargs):
    attempts.append(f"connect {address!r}")
    raise OSError("network disabled by the test")


def lookup(host, *args, **kwargs):
    attempts.append(f"getaddrinfo {host!r}")
    raise socket.gaierror("network disabled by the test")


socket.socket.connect = socket.socket.connect_ex = refuse
socket.getaddrinfo = lookup
from dictembed.encoder import Encoder

start = time.perf_counter()
Encoder.load(sys.argv[1], device="cpu").save(sys.argv[2])
vectors = Encoder.load(sys.argv[2], device="cpu").encode(["a dog barks"])
print(json.dumps({"seconds": time.perf_counter() - start, "attempts": attempts, "shape": list(vectors.shape)}))
"""


def test_save_load_and_encode_never_touch_the_network(
    bert_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a fresh process without HF_HUB_OFFLINE (conftest sets it for the tests), behind a closed proxy."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    command = [sys.executable, "-c", NETWORK_PROBE, str(bert_path), str(tmp_path / "m")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["attempts"] == []
    assert result["shape"] == [1, 32]
    assert result["seconds"] < 10


def test_a_typo_of_a_local_folder_never_asks_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the Hub was asked for a local folder's typo")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    error = cli_refuses(capsys, _encode_args("models/tinyy", tmp_path), "models/tinyy")
    assert "not found" in error


def test_a_saved_model_is_readable_as_the_umask_allows(served_model: Path, tmp_path: Path) -> None:
    """safetensors creates its files 0600; a model folder shared with other users needs the umask's mode."""
    import os

    from dictembed.encoder import Encoder
    from dictembed.saved_entry_space import load_entry_space

    previous = os.umask(0o022)
    try:
        Encoder.load(served_model, device="cpu").save(tmp_path / "copy")
        load_entry_space(served_model).save(tmp_path / "copy")
    finally:
        os.umask(previous)
    files = [p for p in (tmp_path / "copy").rglob("*") if p.is_file()]
    assert {"model.safetensors", "tensors.safetensors"} <= {p.name for p in files}
    assert {p.relative_to(tmp_path).as_posix(): oct(p.stat().st_mode & 0o777) for p in files} == {
        p.relative_to(tmp_path).as_posix(): "0o644" for p in files
    }


# ------------------------------------------------------------------------------------ checked when loaded
def _set_max_length(folder: Path, name: str, value: object) -> None:
    """Write `value` as the folder's max_length in `name`: sentence_bert_config.json's max_seq_length or
    dictembed.json's encoder.max_length."""
    data = json.loads((folder / name).read_text())
    if name == "dictembed.json":
        data["encoder"]["max_length"] = value
    else:
        data["max_seq_length"] = value
    (folder / name).write_text(json.dumps(data))


@pytest.mark.parametrize("name", ["sentence_bert_config.json", "dictembed.json"])
@pytest.mark.parametrize("value", [-5, 0, 12.5, "512", True, [128]], ids=repr)
def test_a_max_length_that_is_no_length_is_refused(
    name: str, value: object, saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Negative, zero, fractional or not a number at all: one line naming the file and the value."""
    folder = damaged_copy(saved_bert, tmp_path / "m")
    _set_max_length(folder, name, value)
    cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder / name), repr(value))
    assert not (tmp_path / "v.npy").exists()


@pytest.mark.parametrize("name", ["sentence_bert_config.json", "dictembed.json"])
@pytest.mark.parametrize("value", [10**9, 1e9, 10**30], ids=["1000000000", "1e9", "1e30"])
def test_a_max_length_past_the_positions_is_cut_to_them_with_a_warning(
    name: str, value: object, saved_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tiny BERT has 128 positions: a longer max_length would fail at the first long sentence."""
    from dictembed.encoder import Encoder

    folder = damaged_copy(saved_bert, tmp_path / "m")
    _set_max_length(folder, name, value)
    if name == "sentence_bert_config.json":  # else dictembed.json's 128 would take precedence
        _set_max_length(folder, "dictembed.json", None)
    encoder = Encoder.load(str(folder), device="cpu")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "positions" in r.getMessage()]
    assert len(warned) == 1 and str(folder / name) in warned[0] and "using 128" in warned[0], warned
    assert encoder.max_length == 128
    assert encoder.encode(["a dog barks " * 200, "a cat"]).shape == (2, 32)


def test_a_max_length_past_the_positions_encodes_long_sentences_from_the_command_line(
    saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    folder = damaged_copy(saved_bert, tmp_path / "m")
    _set_max_length(folder, "dictembed.json", 10**9)
    (tmp_path / "in.txt").write_text("a dog barks " * 200 + "\na cat\n")
    args = ["encode", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy")]
    cli_succeeds(capsys, args)
    assert np.load(tmp_path / "v.npy").shape == (2, 32)


def test_predict_refuses_a_max_length_that_is_no_length(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`predict` (and `serve`, which loads the same way) stops at load, not at the first query."""
    folder = damaged_copy(served_model, tmp_path / "m")
    _set_max_length(folder, "dictembed.json", -5)
    cli_refuses(capsys, ["predict", "--model", str(folder), "a loyal pet"], str(folder / "dictembed.json"), "-5")


def _with_added_tokens(model: Path, target: Path, count: int = 2000) -> Path:
    """A copy of `model` whose tokenizer has `count` tokens added, its embeddings left as they are."""
    from transformers import AutoTokenizer

    folder = damaged_copy(model, target)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.add_tokens([f"addedword{i}" for i in range(count)])
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("plain", [False, True], ids=["dictembed save", "plain HF folder"])
def test_token_ids_past_the_embeddings_are_refused(
    plain: bool, saved_bert: Path, bert_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2,000 tokens added without resizing the embeddings: the first sentence holding one would index past them."""
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _with_added_tokens(bert_path if plain else saved_bert, tmp_path / "grown-model")
    expected = r"the tokenizer has 32522 tokens, the model's embeddings 30522 rows: ids 30522 to 32521 have no"
    with pytest.raises(ModelLoadError, match=expected) as caught:
        Encoder.load(str(folder), device="cpu")
    assert str(folder) in str(caught.value) and "\n" not in str(caught.value)
    cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder), "32522 tokens")


def test_a_few_added_tokens_with_resized_embeddings_still_load(saved_bert: Path, tmp_path: Path) -> None:
    from transformers import AutoModel

    from dictembed.encoder import Encoder

    folder = _with_added_tokens(saved_bert, tmp_path / "m", count=3)
    model = AutoModel.from_pretrained(str(folder))
    model.resize_token_embeddings(30525)
    model.save_pretrained(str(folder))
    assert Encoder.load(str(folder), device="cpu").encode(["addedword2 barks"]).shape == (1, 32)


NESTED = {"objects": '{"a":' * 200_000, "arrays": "[" * 200_000}


@pytest.mark.parametrize("nesting", sorted(NESTED))
@pytest.mark.parametrize(
    "name",
    [
        "tokenizer.json",
        "tokenizer_config.json",
        "config.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
    ],
)
def test_json_nested_too_deep_is_named_as_corrupt(
    name: str, nesting: str, saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """200,000 levels of nesting exhaust the JSON reader's recursion: one line naming the file, no RecursionError."""
    folder = _damaged(saved_bert, tmp_path, name, NESTED[nesting])
    cli_refuses(capsys, _encode_args(folder, tmp_path), f"{folder / name} is corrupt or truncated")


@pytest.mark.parametrize("name", ["dictembed.json", "modules.json"])
def test_a_record_or_module_list_nested_too_deep_is_named(
    name: str, saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _damaged(saved_bert, tmp_path, name, NESTED["objects"])
    cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder / name), "corrupt")


@pytest.mark.parametrize("plain", [False, True], ids=["dictembed save", "plain HF folder"])
@pytest.mark.parametrize(
    "text",
    [NESTED["objects"], '{"a": 1}', "5", "[" * 900 + "]" * 900],
    ids=["nested 200,000 deep", "no tokenizer keys", "a number", "valid JSON nested 900 deep"],
)
def test_a_tokenizer_json_that_is_no_tokenizer_is_named(
    plain: bool, text: str, saved_bert: Path, bert_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Too deep for Python's JSON reader, or valid JSON that the tokenizers library cannot read as a tokenizer."""
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(bert_path if plain else saved_bert, tmp_path, "tokenizer.json", text)
    with pytest.raises(ModelLoadError, match="tokenizer.json is corrupt or truncated") as caught:
        Encoder.load(str(folder), device="cpu")
    assert str(folder / "tokenizer.json") in str(caught.value) and "\n" not in str(caught.value)
    cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder / "tokenizer.json"), "corrupt or truncated")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("encoder", [1]),
        ("encoder", "mean"),
        ("encoder.max_length", "512"),
        ("encoder.max_length", None),  # null: the folder's own max_length is used
        ("encoder.pooling", ["mean"]),
        ("encoder.normalize", "yes"),
        ("dev", [84.9]),
        ("lr", "fast"),
        ("seed", 1.5),
        ("seed", True),
        ("base_model", 5),
        ("details", "none"),
    ],
    ids=repr,
)
def test_a_record_field_of_the_wrong_type_is_named(
    key: str, value: object, saved_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dictembed.json read field by field: a wrong JSON type is one line naming the file and the field."""
    folder = damaged_copy(saved_bert, tmp_path / "m")
    record = json.loads((folder / "dictembed.json").read_text())
    if key.startswith("encoder."):
        record["encoder"][key.split(".")[1]] = value
    else:
        record[key] = value
    (folder / "dictembed.json").write_text(json.dumps(record))
    if value is None:
        cli_succeeds(capsys, _encode_args(folder, tmp_path))
        return
    error = cli_refuses(capsys, _encode_args(folder, tmp_path), str(folder / "dictembed.json"), key)
    assert "bad run record" in error


def test_a_record_of_the_wrong_types_is_refused_by_run_record_load(saved_bert: Path, tmp_path: Path) -> None:
    from dictembed.errors import DictEmbedError
    from dictembed.model_folder import read_record

    folder = damaged_copy(saved_bert, tmp_path / "m")
    record = json.loads((folder / "dictembed.json").read_text())
    (folder / "dictembed.json").write_text(json.dumps(record | {"encoder": [["max_length", 128]]}))
    with pytest.raises(DictEmbedError, match=r"dictembed\.json: bad run record \(encoder is list .*, not dict\)$"):
        read_record(folder)


def test_a_missing_entry_space_matrix_is_named_missing_not_corrupt(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was "corrupt or truncated (FileNotFoundError ...)", for a file that is simply not there."""
    from dictembed.errors import DictEmbedError
    from dictembed.saved_entry_space import load_entry_space

    folder = damaged_copy(served_model, tmp_path / "m")
    (folder / "entry_space" / "tensors.safetensors").unlink()
    missing = str(folder / "entry_space" / "tensors.safetensors")
    line = cli_refuses(capsys, ["predict", "--model", str(folder), "a pet"], missing, "missing from its model folder")
    assert "corrupt" not in line
    with pytest.raises(DictEmbedError, match="tensors.safetensors: missing from its model folder$"):
        load_entry_space(folder)
