"""Bad dictionary files, through `load_dictionary` and `dictembed data stats`: every file is read with its rows
intact (a bad row skipped and counted with its line), or refused with one line naming the file (and the line),
never a traceback and never a silently changed row count."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import TOY_WORDS, cli_refuses, one_line_error

from dictembed.cli import main
from dictembed.dictionary import Dictionary, load_dictionary, load_oxford, load_oxford_autodict, split_by_headword
from dictembed.errors import DataFormatError, DictEmbedError

pytestmark = pytest.mark.usefixtures("restore_log_level")

PAIRS = [(word, definition) for word, definitions in TOY_WORDS.items() for definition in definitions]
FORMATS = ["tsv", "csv", "jsonl"]


def table(fmt: str, rows: list[tuple[str, str]] | None = None) -> str:
    """The toy dictionary (or `rows`) as the text of a .tsv, .csv or .jsonl file with columns word, definition."""
    rows = PAIRS if rows is None else rows
    if fmt == "jsonl":
        return "".join(json.dumps({"word": w, "definition": d}, ensure_ascii=False) + "\n" for w, d in rows)
    sep = "\t" if fmt == "tsv" else ","
    return f"word{sep}definition\n" + "".join(f"{w}{sep}{d}\n" for w, d in rows)


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def refused_by_api_and_cli(capsys, bert_path: Path, path: Path, *names: str) -> None:
    """`load_dictionary` raises a one-line DictEmbedError naming the file and `names`, and `data stats` stops
    with exit 1 and one error line naming them too."""
    with pytest.raises(DictEmbedError) as caught:
        load_dictionary(str(path))
    message = str(caught.value)
    assert "\n" not in message and path.name in message, message
    assert all(name in message for name in names), f"{message!r} does not name {names}"
    cli_refuses(capsys, ["data", "stats", "--dictionary", str(path), "--model", str(bert_path)], path.name, *names)


# ------------------------------------------------------------------------------------ bad files: refused
def _latin1(fmt: str) -> tuple[bytes, tuple[str, ...]]:
    """The toy dictionary and one Latin-1 row (its line named, with the --encoding hint)."""
    line = len(PAIRS) + (1 if fmt == "jsonl" else 2)
    return table(fmt, [*PAIRS, ("café", "a small restaurant")]).encode("latin-1"), (f":{line}:", "--encoding")


BAD_FILES = {  # (format, case): (content, what the error names besides the file)
    **{(fmt, "invalid UTF-8 bytes"): _latin1(fmt) for fmt in ["csv", "jsonl"]},  # tsv: below
    **{(fmt, "UTF-16"): (table(fmt).encode("utf-16"), (":1:", "--encoding utf-16")) for fmt in FORMATS},
    **{(fmt, "empty file"): (b"", ()) for fmt in FORMATS},
    ("jsonl", "blank lines only"): (b"\n\n", ()),  # tsv and csv with only a header: below
    ("tsv", "commas instead of tabs"): (table("csv"), ()),
    ("csv", "semicolons instead of commas"): (table("csv").replace(",", ";"), ()),
    ("txt", "unknown extension"): (table("tsv"), ()),
    **{
        (fmt, "lone CR line endings"): (table(fmt).replace("\n", "\r"), ("lone carriage return (\\r)",))
        for fmt in FORMATS
    },
}


@pytest.mark.parametrize(("fmt", "case"), list(BAD_FILES), ids=[f"{f}: {c}" for f, c in BAD_FILES])
def test_bad_files_are_refused_naming_the_file(fmt, case, bert_path, tmp_path, capsys) -> None:
    content, names = BAD_FILES[fmt, case]
    refused_by_api_and_cli(capsys, bert_path, write(tmp_path / f"d.{fmt}", content), *names)


def test_an_empty_dictionary_list_is_refused(bert_path, capsys) -> None:
    cli_refuses(capsys, ["data", "stats", "--dictionary", ",", "--model", str(bert_path)], "dictionary")


# ------------------------------------------------------------------------------------ odd but valid files
def _loaded(path: Path) -> list[tuple[str, str]]:
    return load_dictionary(str(path)).pairs()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_1_mb_definition_is_read_or_refused_by_line(fmt, tmp_path) -> None:
    """Read whole; a CSV field over the csv module's limit (131,072 characters) may instead be refused with
    one line naming the file and the line."""
    path = write(tmp_path / f"d.{fmt}", table(fmt, [*PAIRS, ("huge", "x " * 500_000)]))
    try:
        pairs = _loaded(path)
    except DataFormatError as err:
        line = len(PAIRS) + 2
        assert fmt == "csv" and f"d.csv:{line}:" in str(err) and "\n" not in str(err), err
        return
    assert len(pairs) == len(PAIRS) + 1 and pairs[-1] == ("huge", "x " * 499_999 + "x")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_nul_byte_in_a_definition_keeps_the_row(fmt, tmp_path) -> None:
    pairs = _loaded(write(tmp_path / f"d.{fmt}", table(fmt, [*PAIRS, ("nul", "a \x00 b")])))
    assert len(pairs) == len(PAIRS) + 1 and pairs[-1][0] == "nul"


def test_csv_quoted_commas_and_doubled_quotes(tmp_path) -> None:
    rows = 'word,definition\ncat,"a feline, small"\ndog,"a ""good"" dog"\n' + table("csv").split("\n", 1)[1]
    pairs = _loaded(write(tmp_path / "d.csv", rows))
    assert len(pairs) == len(PAIRS) + 2
    assert ("cat", "a feline, small") in pairs and ("dog", 'a "good" dog') in pairs


def test_a_quote_in_a_tsv_is_text(tmp_path) -> None:
    pairs = _loaded(write(tmp_path / "d.tsv", table("tsv", [*PAIRS, ("q", '"a quoted" definition "')])))
    assert len(pairs) == len(PAIRS) + 1 and pairs[-1] == ("q", '"a quoted" definition "')


def test_a_lone_cr_inside_a_one_line_jsonl_record_is_json_whitespace(tmp_path) -> None:
    path = write(tmp_path / "d.jsonl", '{"word": "cat",\r"definition": "a feline"}\n')
    assert _loaded(path) == [("cat", "a feline")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_files_joined_end_to_end(fmt, tmp_path, caplog) -> None:
    """The second file keeps its byte order mark and (TSV/CSV) its header line: neither becomes an entry."""
    first, second = PAIRS[:4], PAIRS[4:]
    raw = ("\ufeff" + table(fmt, first)).encode() + ("\ufeff" + table(fmt, second)).encode()
    with caplog.at_level(logging.WARNING):
        pairs = _loaded(write(tmp_path / f"d.{fmt}", raw))
    assert pairs == PAIRS
    assert not any("\ufeff" in word or word in ("word", "definition") for word, _ in pairs)
    if fmt != "jsonl":
        assert f"skipped 1 repeated header lines (lines {len(first) + 2})" in caplog.text


def test_a_quoted_csv_file_joined_after_another(tmp_path) -> None:
    text = 'word,definition\n"cat","a feline, small"\n'
    pairs = _loaded(write(tmp_path / "d.csv", "\ufeff" + text + "\ufeff" + text.replace("cat", "dog")))
    assert pairs == [("cat", "a feline, small"), ("dog", "a feline, small")]


def test_a_headerless_table_skips_only_a_first_line_that_looks_like_a_header(tmp_path) -> None:
    path = write(tmp_path / "d.tsv", "word\tdefinition\ncat\ta feline\nword\tdefinition\n")
    assert load_dictionary(str(path), columns="word,definition").pairs() == [
        ("cat", "a feline"),
        ("word", "definition"),  # --columns reads every line as data: only the first is taken for a header
    ]


# ------------------------------------------------------------------------------------ missing and empty
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
    assert str(path) in one_line_error(capsys)


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


# ------------------------------------------------------------------------------------ encodings and quoting
def test_latin1_dictionary_with_the_encoding_hint(
    tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.tsv"
    words = [("café", "a small restaurant"), ("naïve", "lacking experience")]
    words += [(f"w{i}", f"definition {i}") for i in range(8)]
    path.write_bytes(b"word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in words).encode("latin-1"))
    with pytest.raises(
        DataFormatError, match=r"mine\.tsv:2: not valid utf-8 .*byte 4 .*--encoding cp1252 .*latin-1 if"
    ):
        load_dictionary(str(path))
    assert load_dictionary(str(path), encoding="latin-1").headwords[:2] == ["café", "naïve"]
    stats = ["data", "stats", "--dictionary", str(path), "--model", str(bert_path)]
    assert main(stats) == 1
    assert "mine.tsv:2: not valid utf-8" in one_line_error(capsys)
    assert main([*stats, "--encoding", "latin-1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sum(row["words"] for row in report["splits"]) == 10


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
    assert "three: 3 headwords are too few" in one_line_error(capsys)
