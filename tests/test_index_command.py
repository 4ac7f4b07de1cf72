"""`dictembed index`: a servable model folder of an untrained encoder over a dictionary, which `ReverseDictionary.load`
and `serve` open, built as `train`'s best preset builds its entry space (mean pooling, AMP entries, cosine logits)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import EN_WORDS, ZH_WORDS, cli_refuses, cli_succeeds

from dictembed.errors import DictEmbedError
from dictembed.model_folder import CARD_FILE, DEFINITIONS_FILE, SEARCH_DIR, SPACE_DIR, read_record


def test_the_folder_holds_the_model_its_entry_space_definitions_index_record_and_card(language_folders) -> None:
    folder = language_folders["en"]
    for part in ("model.safetensors", "modules.json", DEFINITIONS_FILE, CARD_FILE):
        assert (folder / part).is_file(), part
    assert (folder / SPACE_DIR / "space.json").is_file() and (folder / SEARCH_DIR / "index.json").is_file()
    record = read_record(folder, required=True)
    assert record.data == "en.tsv" and record.entry_space == "definitions-amp" and record.config is None
    assert str(folder.parent) not in (folder / "dictembed.json").read_text()  # no path of this machine
    space = json.loads((folder / SPACE_DIR / "space.json").read_text())
    assert space["words"] == list(EN_WORDS) and space["similarity"] == "cosine"
    card = (folder / CARD_FILE).read_text()
    assert "en.tsv" in card and "definitions-amp" in card and f"| entries | {len(EN_WORDS)} |" in card
    assert "the encoder built over the dictionary (not trained against)" in card


def test_the_entries_are_the_mean_pooled_definitions(language_folders, bert_path) -> None:
    """AMP: each entry vector is the mean of its definitions' mean-pooled vectors (one definition each here)."""
    from dictembed.encoder import Encoder
    from dictembed.search_space import SearchSpace

    space = SearchSpace.open(language_folders["zh"])
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    expected = encoder.encode(list(ZH_WORDS.values()))
    np.testing.assert_allclose(np.asarray(space.matrix, dtype=np.float32), expected, rtol=1e-3, atol=1e-3)  # fp16


def test_load_and_serve_open_the_folder(language_folders) -> None:
    from fastapi.testclient import TestClient

    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import create_app

    rd = ReverseDictionary.load(language_folders["zh"], device="cpu")
    results = rd.search("water that falls from clouds", k=len(ZH_WORDS))
    assert sorted(w for r in results for w in r.words) == sorted(ZH_WORDS)
    rain = next(r for r in results if "雨" in r.words)
    assert rain.definitions["雨"] == [ZH_WORDS["雨"]]
    client = TestClient(create_app(language_folders["zh"], device="cpu"))
    health = client.get("/health").json()
    assert health["entries"] == len(ZH_WORDS) and health["model"] == "zh-folder" and health["language"] == "zh"
    assert health["dictionaries"] == [{"dictionary": "zh.tsv", "language": "zh", "entries": 8, "model": "zh-folder"}]


def test_the_cli_replaces_a_folder_only_with_overwrite(language_folders, bert_path, tmp_path, capsys) -> None:
    tsv = tmp_path / "few.tsv"
    tsv.write_text("word\tdefinition\ndog\ta domesticated animal that barks\ncat\ta feline animal kept at home\n")
    out = tmp_path / "few"
    argv = ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(out)]
    stdout, _ = cli_succeeds(capsys, [*argv, "--json"])
    report = json.loads(stdout)
    assert report["entries"] == 2 and report["definitions"] == 2 and report["dictionary"] == "few.tsv"
    cli_refuses(capsys, argv, str(out), "--overwrite")
    tsv.write_text("word\tdefinition\nbread\tfood made of baked flour\n")
    cli_succeeds(capsys, [*argv, "--overwrite"])
    assert json.loads((out / SPACE_DIR / "space.json").read_text())["words"] == ["bread"]


def test_a_latin1_table_is_read_with_encoding(bert_path, tmp_path, capsys) -> None:
    """A Latin-1 table is refused in UTF-8 (naming its line and the way out), and read with --encoding latin-1; the
    folder keeps its definitions in UTF-8."""
    tsv = tmp_path / "latin.tsv"
    tsv.write_bytes("word\tdefinition\ncafé\ta small restaurant\ndog\ta domesticated animal\n".encode("latin-1"))
    out = tmp_path / "latin"
    argv = ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(out)]
    cli_refuses(
        capsys,
        argv,
        f"{tsv}:2: not valid utf-8",
        "--encoding cp1252 if it was written on Windows, latin-1 if it is ISO Latin-1",
    )
    cli_succeeds(capsys, [*argv, "--encoding", "latin-1"])
    assert "café" in (out / DEFINITIONS_FILE).read_text(encoding="utf-8")
    assert json.loads((out / SPACE_DIR / "space.json").read_text())["words"] == ["café", "dog"]


def test_a_folder_that_lost_its_definitions_names_its_dictionary_not_wordnets(bert_path, tmp_path, capsys) -> None:
    """Without its `definitions.jsonl` an index folder named no dictionary, and results came with WordNet's
    definitions and parts of speech in place of the user's."""
    from dictembed.reverse_dictionary import ReverseDictionary

    tsv = tmp_path / "mine.tsv"
    tsv.write_text("word\tdefinition\ngiraffe\ta tall animal with a long neck\ncat\ta small furry pet\n")
    out = tmp_path / "mine"
    cli_succeeds(capsys, ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(out)])
    (out / DEFINITIONS_FILE).unlink()
    with pytest.raises(DictEmbedError, match="names the dictionary 'mine.tsv', which is not in the model folder"):
        ReverseDictionary.load(out).search("a tall animal")
    results = ReverseDictionary.load(out, dictionary=str(tsv)).search("a tall animal", k=2)
    assert {r.words[0]: r.definitions[r.words[0]] for r in results}["giraffe"] == ["a tall animal with a long neck"]


def test_a_dictionary_given_in_place_of_the_folders_is_counted_against_its_entries(
    bert_path, tmp_path, capsys, caplog
) -> None:
    """`predict --dictionary other.tsv` over a folder of other words showed every result without a definition, and
    said nothing."""
    import logging

    from dictembed.reverse_dictionary import ReverseDictionary

    tsv, other = tmp_path / "mine.tsv", tmp_path / "other.tsv"
    tsv.write_text("word\tdefinition\ngiraffe\ta tall animal with a long neck\ncat\ta small furry pet\n")
    other.write_text("word\tdefinition\ncat\ta feline\nbread\tfood made of baked flour\n")
    out = tmp_path / "mine"
    cli_succeeds(capsys, ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(out)])
    with caplog.at_level(logging.WARNING):
        ReverseDictionary.load(out).search("a tall animal")
        assert "no definition in" not in caplog.text  # its own definitions: every entry
        results = ReverseDictionary.load(out, dictionary=str(other)).search("a tall animal", k=2)
    assert f"1 of 2 entries have no definition in {other}" in caplog.text
    assert {r.words[0]: r.definitions.get(r.words[0]) for r in results}["cat"] == ["a feline"]


@pytest.mark.parametrize(
    ("dictionary", "named"),
    [("missing.tsv", "missing.tsv"), ("no-such-dictionary", "no-such-dictionary")],
)
def test_a_dictionary_that_is_not_there_is_one_line_before_loading(
    tmp_path: Path, capsys, dictionary: str, named: str
) -> None:
    where = str(tmp_path / dictionary) if dictionary.endswith(".tsv") else dictionary
    cli_refuses(capsys, ["index", "--dictionary", where, "--output", str(tmp_path / "out")], named)
    assert not (tmp_path / "out").exists()


def test_a_folder_holding_something_else_is_never_replaced(tmp_path: Path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    tsv = tmp_path / "one.tsv"
    tsv.write_text("word\tdefinition\ndog\ta domesticated animal that barks\n")
    argv = ["index", "--dictionary", str(tsv), "--output", str(tmp_path / "out"), "--overwrite"]
    cli_refuses(capsys, argv, "holds no model")
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_a_folder_built_in_int8_says_so_in_its_record(bert_path, tmp_path, monkeypatch) -> None:
    """DICTEMBED_BUILD_BACKEND=int8: the entry space and headword vectors come from the int8 graph, and the record
    says so (`entry_build`); a folder built as usual says nothing."""
    from dictembed.cli import main

    tsv = tmp_path / "en.tsv"
    tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in EN_WORDS.items()), encoding="utf-8")
    monkeypatch.setenv("DICTEMBED_BUILD_BACKEND", "int8")
    folder = tmp_path / "int8"
    assert main(["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(folder), "-q"]) == 0
    assert read_record(folder, required=True).details["entry_build"] == "onnx-int8"
    monkeypatch.delenv("DICTEMBED_BUILD_BACKEND")
    plain = tmp_path / "plain"
    assert main(["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(plain), "-q"]) == 0
    assert "entry_build" not in read_record(plain, required=True).details


def test_a_headerless_table_is_indexed_with_columns_and_refused_without(bert_path, tmp_path, capsys) -> None:
    """A table without a header line: refused with the option that reads it named; with --columns, its entries."""
    tsv = tmp_path / "bare.tsv"
    tsv.write_text("".join(f"{w}\t{d}\n" for w, d in EN_WORDS.items()), encoding="utf-8")
    argv = ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(tmp_path / "out")]
    line = cli_refuses(capsys, argv, str(tsv), "column 'word' not found", "--columns word,definition")
    assert ":1:" in line or "line 1" in line, line
    cli_succeeds(capsys, [*argv, "--columns", "word,definition"])
    space = json.loads((tmp_path / "out" / SPACE_DIR / "space.json").read_text())
    assert space["words"] == list(EN_WORDS)
    cli_refuses(capsys, [*argv, "--columns", "word,colour"], "--columns", code=2)  # refused as the command is read
    text = tmp_path / "bare.txt"  # a .txt table is one only with --columns
    text.write_text(tsv.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "from-txt"
    txt_argv = ["index", "--model", str(bert_path), "--dictionary", str(text), "--output", str(out)]
    cli_succeeds(capsys, [*txt_argv, "--columns", "word,definition"])
    assert json.loads((out / SPACE_DIR / "space.json").read_text())["words"] == list(EN_WORDS)


def test_columns_without_a_table_file_are_refused(tmp_path, capsys) -> None:
    """--columns names a headerless table's columns: with only a named dictionary it would be ignored, so it is an
    error before anything loads."""
    argv = ["index", "--dictionary", "wordnet", "--columns", "word,definition", "--output", str(tmp_path / "o")]
    cli_refuses(capsys, argv, "--columns", "'wordnet' holds none")
    assert not (tmp_path / "o").exists()
