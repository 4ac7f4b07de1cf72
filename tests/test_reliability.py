"""Bad input that used to be lost, executed or silently wrong: each case reproduced, now a counted skip or a
one-line error naming the file and line. Also: saving, loading and encoding a local model never use the network."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dictembed.cli import main
from dictembed.dictionary import Dictionary, load_dictionary, load_oxford, load_oxford_autodict, split_by_headword
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.io import read_lines, text_encoding


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("dictembed: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


# ------------------------------------------------------------------------------------ the reader
def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeffa\u2028b\r\nc\x0cd\x85e\rf\n\n".encode())
    assert read_lines(path) == ["a\u2028b", "c\x0cd\x85e\rf", ""]


def test_read_lines_names_line_and_byte_with_the_encoding_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv"
    path.write_bytes(b"word\tdefinition\ncat\ta feline\ncaf\xe9\ta shop\n")
    message = r"x\.tsv:3: not valid utf-8 \(invalid continuation byte at byte 4 of the line, file offset 32\); "
    with pytest.raises(DataFormatError, match=message + "pass --encoding latin-1 if the file is Latin-1$"):
        read_lines(path)
    assert read_lines(path, "latin-1")[2] == "café\ta shop"


def test_read_lines_latin1_fallback_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\ncaf\xe9\n\xc3\xa9\n")
    with caplog.at_level(logging.WARNING):
        assert read_lines(path, fallback="latin-1") == ["ok", "café", "é"]
    assert "x.txt:2 is not UTF-8; read it as latin-1" in caplog.text


def test_unknown_encoding_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="unknown encoding"):
        text_encoding("klingon")
    with pytest.raises(ValueError, match="not a text encoding"):
        text_encoding("base64")
    assert main(["data", "stats", "--encoding", "klingon"]) == 2
    assert "--encoding" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["folder", "missing"])
def test_folder_or_missing_dictionary(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.tsv"
    if kind == "folder":
        path.mkdir()
    reason = "it is a folder" if kind == "folder" else "not found"
    with pytest.raises(DictEmbedError, match=rf"mine\.tsv: cannot read file \({reason}\)$"):
        load_dictionary(str(path))
    with pytest.raises(DictEmbedError, match=reason):
        load_oxford(path)
    with pytest.raises(DictEmbedError, match=reason):
        load_oxford_autodict(path)
    assert main(["data", "stats", "--dictionary", str(path)]) == 1
    assert str(path) in _one_line_error(capsys)


# ------------------------------------------------------------------------------------ dictionary tables
def test_unterminated_csv_quote_is_an_error_not_one_long_definition(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text('word,definition\ncat,"a feline\ndog,a canine\nbird,a flier\n')
    with pytest.raises(DataFormatError, match=r"mine\.csv:2: unexpected end of data \(the record runs on to line 4"):
        load_dictionary(str(path))
    path.write_text('word,definition\ncat,"a feline\ndog,a canine"\nbird,a flier\n')  # closed a line later
    with pytest.raises(DataFormatError, match=r"mine\.csv:2: a quoted field runs on to line 3 \(an unterminated"):
        load_dictionary(str(path))
    path.write_text('word,definition\ncat,"a feline" (small)\n')
    with pytest.raises(DataFormatError, match=r"mine\.csv:2: ',' expected after '\"'"):
        load_dictionary(str(path))
    path.write_text('word,definition\ncat,"a feline, small"\n')
    assert load_dictionary(str(path)).pairs() == [("cat", "a feline, small")]


def test_jsonl_values_that_are_not_strings_are_skipped_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = [
        {"word": "cat", "definition": "a feline", "example": ["my cat"], "pos": "n"},
        {"word": 1984, "definition": "a novel"},
        {"word": "dog", "definition": ["a", "canine"]},
        {"word": "eel", "definition": {"text": "a fish"}},
        {"word": "fox", "definition": "a canid", "example": ["a fox", 2]},
        {"word": "gnu", "definition": None},
        {"word": "hen", "definition": True},
        {"word": "cat", "definition": "a pet", "example": None, "pos": 1},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    with caplog.at_level(logging.WARNING):
        dictionary = load_dictionary(str(path))
    assert dictionary.pairs() == [("cat", "a feline")]
    assert "8 rows -> 1 headwords" in caplog.text
    assert "skipped 1 rows whose 'word' is not a string (lines 2)" in caplog.text
    assert "skipped 3 rows whose 'definition' is not a string (lines 3, 4, 7)" in caplog.text
    assert "skipped 1 rows whose 'example' is not a string or a list of strings (lines 5)" in caplog.text
    assert "skipped 1 rows with an empty definition (lines 6)" in caplog.text
    assert "skipped 1 rows whose 'pos' is not a string (lines 8)" in caplog.text
    assert "1984" not in " ".join(dictionary.headwords)


def test_latin1_dictionary_with_the_encoding_hint(
    tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.tsv"
    words = [("café", "a small restaurant"), ("naïve", "lacking experience")]
    words += [(f"w{i}", f"definition {i}") for i in range(8)]
    path.write_bytes(b"word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in words).encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"mine\.tsv:2: not valid utf-8 .*byte 4 of the line.*--encoding latin-1"):
        load_dictionary(str(path))
    assert load_dictionary(str(path), encoding="latin-1").headwords[:2] == ["café", "naïve"]
    stats = ["data", "stats", "--dictionary", str(path), "--model", str(bert_path)]
    assert main(stats) == 1
    assert "mine.tsv:2: not valid utf-8" in _one_line_error(capsys)
    assert main([*stats, "--encoding", "latin-1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sum(row["words"] for row in report["splits"]) == 10


def test_latin1_encode_input(tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes("a café\nnaïve\n".encode("latin-1"))
    args = ["encode", "--model", str(bert_path), "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main(args) == 1
    assert "in.txt:1: not valid utf-8" in _one_line_error(capsys)
    assert main([*args, "--encoding", "latin-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 2


@pytest.mark.parametrize(("name", "text"), [("mine.tsv", "word\tdefinition\n\n"), ("mine.csv", "word,definition\n")])
def test_header_only_file(
    name: str, text: str, tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataFormatError, match=rf"{name}: no entries \(only a header\)$"):
        load_dictionary(str(path))
    assert main(["data", "stats", "--dictionary", str(path), "--model", str(bert_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().endswith("no entries (only a header)")


def test_every_row_skipped_is_an_error_that_lists_the_skips(tmp_path: Path) -> None:
    path = tmp_path / "mine.tsv"
    path.write_text("word\tdefinition\ncat\t \n\ta dog\n")
    message = r"mine\.tsv: no entries \(all 2 rows were skipped: skipped 1 rows with an empty definition \(lines 2\)"
    with pytest.raises(DataFormatError, match=message):
        load_dictionary(str(path))


def test_oxford_lines_stay_aligned_across_other_line_breaks(tmp_path: Path) -> None:
    src, tgt = tmp_path / "d.src", tmp_path / "d.tgt"
    src.write_text("cat [SEP] the cat\u2028sat\ndog [SEP] a dog\n", encoding="utf-8")
    tgt.write_text("a small\x0cfeline\na canine\n", encoding="utf-8")
    assert load_oxford(src).pairs() == [("cat", "a small feline"), ("dog", "a canine")]


# ------------------------------------------------------------------------------------ the split
def test_too_small_dictionary_for_the_split(tmp_path: Path, toy_dictionary: Dictionary) -> None:
    small = toy_dictionary.subset(toy_dictionary.headwords[:7], name="small")
    with pytest.raises(DictEmbedError, match=r"^small: 7 headwords are too few .*dev split would be empty.*least 8"):
        split_by_headword(small)
    with pytest.raises(DictEmbedError, match=r"0 headwords .*dev and test split"):
        split_by_headword(Dictionary(name="empty"))
    sizes = {name: len(split) for name, split in split_by_headword(toy_dictionary).items()}
    assert sizes == {"train": 6, "dev": 1, "test": 1}
    assert len(split_by_headword(small, ratios=(1, 0, 0))["train"]) == 7


def test_too_small_dictionary_in_data_stats(
    tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "three.tsv"
    path.write_text("word\tdefinition\ncat\ta feline\ndog\ta canine\neel\ta fish\n")
    assert main(["data", "stats", "--dictionary", str(path), "--model", str(bert_path)]) == 1
    assert "three: 3 headwords are too few" in _one_line_error(capsys)


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
    """In a fresh process without HF_HUB_OFFLINE (this session's conftest sets it), behind a closed proxy."""
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


# ------------------------------------------------------------------------------------ model folders
@pytest.fixture(scope="module")
def saved_model(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model saved by dictembed (a sentence-transformers folder), to be copied and damaged."""
    from dictembed.encoder import Encoder

    return Encoder.load(str(bert_path), device="cpu").save(tmp_path_factory.mktemp("saved") / "m")


def _damage(target: Path, damage: str) -> None:
    """Remove the file ("rm"), truncate it to half ("half") or overwrite it with the text `damage`."""
    if damage == "rm":
        target.unlink()
    elif damage == "half":
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    else:
        target.write_text(damage)


def _damaged(saved: Path, tmp_path: Path, name: str, damage: str) -> Path:
    """A copy of the saved model with one file damaged (see `_damage`)."""
    import shutil

    folder = Path(shutil.copytree(saved, tmp_path / "m"))
    _damage(folder / name, damage)
    return folder


def _encode_fails(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    source = tmp_path / "in.txt"
    source.write_text("a dog barks\n")
    args = ["encode", "--model", str(folder), "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main(args) == 1
    assert not (tmp_path / "v.npy").exists()
    return _one_line_error(capsys)


def test_missing_tokenizer_files_are_refused(
    saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its tokenizer files a folder used to load a 5-token vocabulary and encode every word as [UNK]."""
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_model, tmp_path, "tokenizer.json", "rm")
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
    name: str, damage: str, named: str, saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_model, tmp_path, name, damage)
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
def test_module_paths_outside_the_folder_are_not_followed(escape: str, saved_model: Path, tmp_path: Path) -> None:
    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    folder = _damaged(saved_model, tmp_path, "README.md", "rm")
    if escape == "link":
        (folder / "link").symlink_to(tmp_path.parent, target_is_directory=True)
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = escape
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelLoadError, match=f"modules.json: module path '{escape}' leads outside the model folder"):
        Encoder.load(str(folder), device="cpu")


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("space.json", "{oops", r"entry_space/space\.json: corrupt entry space \(JSONDecodeError"),
        ("space.json", '{"words": []}', r"entry_space/space\.json: corrupt entry space \(KeyError"),
        ("tensors.safetensors", "half", r"entry_space/tensors\.safetensors: corrupt or truncated"),
        ("space.json", '{"type": "DefinitionSpace", "words": ["a"]}', r"entry_space: .*load \(1 entries but 2"),
    ],
)
def test_corrupt_entry_space_names_the_file(name: str, damage: str, message: str, tmp_path: Path) -> None:
    import torch

    from dictembed.entry_space import DefinitionSpace, EntrySpace

    DefinitionSpace(["a", "b"], torch.ones(2, 4)).save(tmp_path)
    _damage(tmp_path / "entry_space" / name, damage)
    with pytest.raises(DictEmbedError, match=message):
        EntrySpace.load(tmp_path)


# ------------------------------------------------------------------------------------ long input
def test_long_sentences_are_truncated_with_one_counted_warning(
    bert_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dictembed.encoder import Encoder

    encoder = Encoder.load(str(bert_path), device="cpu", max_length=16)
    sentences = ["word " * 200, "word " * 15, "word " * 14] + ["a short one"] * 117
    with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
        vectors = encoder.encode(sentences, batch_size=8)
    assert vectors.shape == (120, 32)
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert warnings == ["2 of 120 sentences were longer than 16 tokens and were truncated"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
        encoder.encode(sentences[2:])
    assert "truncated" not in caplog.text


def test_pickled_weights_are_refused_not_run(saved_model: Path, tmp_path: Path) -> None:
    """A planted pytorch_model.bin in place of the safetensors: refused by name, and the pickle never runs."""
    import pickle

    from dictembed.encoder import Encoder
    from dictembed.errors import ModelLoadError

    class Planted:
        def __reduce__(self) -> tuple[object, tuple[str, str]]:
            return open, (str(tmp_path / "EXECUTED"), "w")

    folder = _damaged(saved_model, tmp_path, "model.safetensors", "rm")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Planted()))
    with pytest.raises(ModelLoadError, match=r"pytorch_model\.bin was refused"):
        Encoder.load(str(folder), device="cpu")
    assert not (tmp_path / "EXECUTED").exists()


def test_encode_none_is_a_one_line_error(bert_path: Path) -> None:
    from dictembed.encoder import Encoder

    with pytest.raises(DictEmbedError, match="sentences must be a str or a list of str, got NoneType"):
        Encoder.load(str(bert_path), device="cpu").encode(None)  # type: ignore[arg-type]


def test_encode_never_overwrites_a_file_unless_asked(bert_path, tmp_path, capsys) -> None:
    from dictembed.cli import main

    text = tmp_path / "in.txt"
    text.write_text("a dog barks\n")
    mine = tmp_path / "results.npy"
    mine.write_bytes(b"years of work")
    args = ["encode", "--model", str(bert_path), "--input", str(text), "--output", str(mine)]
    assert main(args) == 1
    assert "already exists; pass --overwrite" in capsys.readouterr().err and mine.read_bytes() == b"years of work"
    assert main([*args, "--overwrite"]) == 0 and mine.read_bytes() != b"years of work"
