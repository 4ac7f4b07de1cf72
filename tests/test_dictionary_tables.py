"""A user's dictionary table: header names in any case, a header naming no known column, a header-like first line read
with --columns, a .txt table without --columns; a missing data package refused before any source loads; the lost-word
skips of each Wiktionary quoted in its own language."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import EN_WORDS, cli_refuses, cli_succeeds

from dictembed.dictionary import load, load_dictionary
from dictembed.dictionary.catalog import CATALOG
from dictembed.dictionary.load import check_sources
from dictembed.dictionary.sources.wiktionary import GERMAN, LOST_WORDS, load_de_wiktionary, load_fr_wiktionary
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.extras import MissingExtraError

HEADER_LIKE = "skipped 1 first line that looks like a header"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ header names
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("caps.tsv", "Word\t DEFINITION \tPos\ncat\ta feline\tn\n"),
        ("caps.csv", " word ,Definition,POS\ncat,a feline,n\n"),
        ("caps.jsonl", '{"Word": "cat", "Definition": "a feline", "POS": "n"}\n'),
    ],
)
def test_header_names_match_in_any_case_and_ignoring_spaces(tmp_path: Path, name: str, text: str) -> None:
    dictionary = load_dictionary(str(_write(tmp_path / name, text)))
    assert dictionary.pairs() == [("cat", "a feline")]
    assert dictionary["cat"].senses[0].pos == "n"


def test_two_spellings_of_one_column_are_a_repeated_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "twice.tsv", "word\tWord\tdefinition\ncat\tdog\ta feline\n")
    with pytest.raises(DataFormatError, match=r"twice\.tsv:1: column 'word' appears more than once \(word, Word\)"):
        load_dictionary(str(path))


def test_jsonl_records_may_spell_a_key_differently_but_one_record_not_twice(tmp_path: Path) -> None:
    mixed = '{"Word": "cat", "Definition": "a feline"}\n{"word": "dog", "definition ": "a canine", "POS": "n"}\n'
    dictionary = load_dictionary(str(_write(tmp_path / "mixed.jsonl", mixed)))
    assert dictionary.pairs() == [("cat", "a feline"), ("dog", "a canine")]
    assert dictionary["dog"].senses[0].pos == "n"
    twice = '{"word": "cat", "definition": "a feline"}\n{"word": "dog", "Word": "hound", "definition": "a canine"}\n'
    with pytest.raises(DataFormatError, match=r"twice\.jsonl:2: key 'word' appears more than once in one record"):
        load_dictionary(str(_write(tmp_path / "twice.jsonl", twice)))
    same = '{"word": "cat", "definition": "a feline"}\n{"word": "dog", "definition": "a canine", "word": "hound"}\n'
    with pytest.raises(DataFormatError, match=r"same\.jsonl:2: key 'word' appears more than once in one record"):
        load_dictionary(str(_write(tmp_path / "same.jsonl", same)))  # json.loads alone would keep "hound"


def test_a_header_naming_no_known_column_lists_the_names_and_offers_columns_for_a_headerless_file(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path / "other.csv", "headword,gloss\ncat,a feline\n")
    with pytest.raises(DataFormatError) as error:
        load_dictionary(str(path))
    line = str(error.value)
    assert line.startswith(f"{path}:1: column 'word' not found (columns: headword, gloss)"), line
    assert "may name word, definition, example, pos, antonym, similar (in any case)" in line
    assert "only for a file without a header line" in line and "--columns word,definition" in line
    assert "reads the first line as data); elsewhere add a header line" in line and "\n" not in line
    prose = _write(tmp_path / "prose.tsv", "\t".join(f"a long paragraph of text number {i} " * 5 for i in range(50)))
    with pytest.raises(DataFormatError) as error:
        load_dictionary(str(prose))
    assert "(columns: a long paragraph of text number 0 a lon…, " in str(error.value)
    assert ", … (50 in all))" in str(error.value) and len(str(error.value)) < 1000  # the header was printed whole


def test_a_header_with_a_known_column_is_not_sent_to_columns(tmp_path: Path) -> None:
    path = _write(tmp_path / "half.tsv", "word\tgloss\ncat\ta feline\n")
    with pytest.raises(DataFormatError, match="column 'definition' not found") as error:
        load_dictionary(str(path))
    assert "--columns" not in str(error.value) and "word, definition, example, pos" in str(error.value)


# ------------------------------------------------------------------------------------ --columns and a header line
@pytest.mark.parametrize(
    ("name", "text", "columns"),
    [
        ("a.tsv", "Word\tDefinition\ncat\ta feline\n", "word,definition"),  # the names given, in another case
        ("b.tsv", "\nword\tid\tdefinition\ncat\t7\ta feline\n", "word,-,definition"),  # a skipped column's name
        ("c.csv", "definition,word\na feline,cat\n", "definition,word"),
        ("d.tsv", "pos\tword\tdefinition\nn\tcat\ta feline\n", "pos,word,definition"),  # each a known name
        ("e.csv", "Headword,Gloss\ncat,a feline\n", "word,definition"),  # names a header commonly uses
        ("f.tsv", "headword\tid\tgloss\ncat\t7\ta feline\n", "word,-,definition"),  # and a skipped one's own
    ],
)
def test_columns_skip_a_first_line_that_looks_like_a_header(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, text: str, columns: str
) -> None:
    path = _write(tmp_path / name, text)
    with caplog.at_level(logging.WARNING):
        dictionary = load_dictionary(str(path), columns=columns)
    assert dictionary.pairs() == [("cat", "a feline")]
    expected_line = 2 if text.startswith("\n") else 1
    assert f"{HEADER_LIKE} (--columns reads every line as data) (lines {expected_line})" in caplog.text


def test_columns_keep_a_first_line_of_data(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path / "data.tsv", "word\ta unit of language\ncat\ta feline\n")  # "word" is a headword
    with caplog.at_level(logging.WARNING):
        assert load_dictionary(str(path), columns="word,definition").pairs()[0] == ("word", "a unit of language")
    assert HEADER_LIKE not in caplog.text


# ------------------------------------------------------------------------------------ a .txt table
def test_a_txt_table_without_columns_names_the_option(tmp_path: Path) -> None:
    path = _write(tmp_path / "bare.txt", "cat\ta feline\n")
    with pytest.raises(DictEmbedError, match=r"bare\.txt: a \.txt table has no header line: give columns"):
        load_dictionary(str(path))
    with pytest.raises(DictEmbedError) as error:
        check_sources(str(path))
    expected = "a .txt table has no header line: give --columns (e.g. --columns word,definition)"
    assert str(error.value) == f"{path}: {expected}"


def test_data_stats_reads_a_headerless_file_with_columns(tmp_path: Path, capsys, bert_path, restore_log_level) -> None:
    path = _write(tmp_path / "bare.txt", "".join(f"{w}\tx\t{d}\n" for w, d in EN_WORDS.items()))
    argv = ["data", "stats", "--dictionary", str(path), "--model", str(bert_path)]
    cli_refuses(capsys, argv, "bare.txt: a .txt table has no header line: give --columns (e.g. --columns word,")
    out, _ = cli_succeeds(capsys, [*argv, "--columns", "word,-,definition", "--json"])
    assert sum(row["words"] for row in json.loads(out)["splits"][:3]) == len(EN_WORDS)
    cli_refuses(capsys, [*argv, "--columns", "word,colour"], "--columns", code=2)


# ------------------------------------------------------------------------------------ a missing data package
def test_a_missing_data_package_is_refused_before_any_source_loads(tmp_path: Path, monkeypatch, capsys) -> None:
    """The first sources (a table, WordNet) are never loaded when a later one's package is missing."""
    monkeypatch.setitem(CATALOG, "fr-wiktionary", replace(CATALOG["fr-wiktionary"], package="no-such-package-here"))
    loaded: list[str] = []
    monkeypatch.setattr(load, "load_source", lambda item, *args: loaded.append(item))
    table = _write(tmp_path / "tiny.tsv", "word\tdefinition\ncat\ta feline\n")
    with pytest.raises(MissingExtraError, match=r"'fr-wiktionary' needs .* pip install \"dictembed\[fr\]\""):
        load_dictionary(f"{table},wordnet,fr-wiktionary")
    assert loaded == []
    argv = ["index", "--dictionary", f"{table},fr-wiktionary", "--output", str(tmp_path / "out")]
    cli_refuses(capsys, argv, "fr-wiktionary", 'pip install "dictembed[fr]"')
    assert loaded == [] and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ lost-word skips
def test_each_wiktionary_quotes_its_own_lost_word_gloss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    german = _write(tmp_path / "de.txt", "Hund\tHaustier\nMerkelianer\tAnhänger von ; Befürworter von Merkel\n")
    french = _write(tmp_path / "fr.txt", "chat\tPetit félin.\nfreudien\tQui découle de la pensée de .\n")
    with caplog.at_level(logging.WARNING):
        load_de_wiktionary(german)
    assert f"skipped 1 {LOST_WORDS}, e.g. 'Anhänger von ; Befürworter von Merkel' (lines 2)" in caplog.text
    assert "Synonyme" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_fr_wiktionary(french)
    assert f"skipped 1 {LOST_WORDS}, e.g. 'Qui découle de la pensée de .' (lines 2)" in caplog.text


def test_a_long_lost_word_gloss_is_quoted_around_the_lost_word() -> None:
    gloss = "Ausgangspunkt einer Strömung bei Vektorfeldern mit positiver Divergenz (das Gegenteil einer )"
    excerpt = GERMAN.lost_word_excerpt(gloss)
    assert excerpt.startswith("…") and excerpt.endswith("(das Gegenteil einer )") and len(excerpt) < 60


def test_blank_lines_before_the_header_and_columns_beside_a_jsonl_file(tmp_path: Path) -> None:
    """A blank first line was taken for the header ("column 'word' not found (columns: )"); `--columns` given for
    a headerless .tsv beside a .jsonl failed on the .jsonl once the model had loaded; a row's field count was
    compared with a header the file does not have."""
    assert load_dictionary(str(_write(tmp_path / "a.tsv", "\n \t\nword\tdefinition\ncat\ta feline\n"))).pairs() == [
        ("cat", "a feline")
    ]
    bare = _write(tmp_path / "bare.tsv", "dog\ta canine\n")
    jsonl = _write(tmp_path / "b.jsonl", '{"word": "cat", "definition": "a feline"}\n')
    both = load_dictionary(f"{bare},{jsonl}", columns="word,definition")
    assert sorted(both.pairs()) == [("cat", "a feline"), ("dog", "a canine")]
    with pytest.raises(DataFormatError, match=r"bare\.tsv:1: 2 fields where --columns names 3$"):
        load_dictionary(str(bare), columns="word,-,definition")


def test_a_utf16_file_without_its_byte_order_mark_is_named_so(tmp_path: Path) -> None:
    """Read as UTF-8 it decodes, NUL between the letters, which the error sent raw to the terminal."""
    for order in ("le", "be"):
        path = tmp_path / f"{order}.tsv"
        path.write_bytes("word\tdefinition\ncat\ta feline\n".encode(f"utf-16-{order}"))
        with pytest.raises(DataFormatError) as error:
            load_dictionary(str(path))
        assert "\x00" not in str(error.value) and f"pass --encoding utf-16-{order}" in str(error.value)
        assert load_dictionary(str(path), encoding=f"utf-16-{order}").pairs() == [("cat", "a feline")]


def test_a_named_dictionary_whose_shared_data_file_is_missing_is_refused_before_loading(tmp_path, monkeypatch) -> None:
    """It was found only once the model had loaded."""
    (tmp_path / "README.md").write_text("an empty shared data folder\n")
    monkeypatch.setenv("DICTEMBED_DATA_DIR", str(tmp_path))
    missing = tmp_path / CATALOG["chang"].data_file
    with pytest.raises(DictEmbedError, match=f"^the dictionary 'chang' reads {missing}, which is not there; point "):
        check_sources("wordnet,chang")


def test_a_file_whose_name_holds_a_comma_is_named_as_such(tmp_path) -> None:
    path = _write(tmp_path / "my,words.tsv", "word\tdefinition\ncat\ta feline\n")
    with pytest.raises(DictEmbedError, match="a file whose name holds a comma cannot be; rename it"):
        check_sources(str(path))  # it was "unknown dictionary '.../my'"


def test_a_folder_given_as_a_dictionary_is_named_a_folder(tmp_path) -> None:
    with pytest.raises(DictEmbedError, match=f"^{tmp_path}: a folder, not a dictionary; name a .tsv/.csv/.jsonl file"):
        check_sources(str(tmp_path))  # it was "unknown dictionary"
