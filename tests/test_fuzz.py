"""Property-based tests of every reader of user files: the dictionary tables (TSV, CSV, JSONL), the Oxford,
AutoDict, Chang, WordNet-examples and WordNet data files, and `encode`'s input.

The property: every input row is loaded, or counted as skipped with its line number, or the read fails with
a DictEmbedError naming the file (and line); never another exception, never a silent change of row count.

Profiles (registered in tests/conftest.py, which Hypothesis's plugin reads before test modules are imported):
"fuzz" (the default here, quick) and "long" (2,000 examples a test), selected with
`python -m pytest tests/test_fuzz.py --hypothesis-profile=long` (or HYPOTHESIS_PROFILE=long).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dictembed.cli import read_sentences
from dictembed.dictionary import Dictionary, LoadReport, clean_text, load_dictionary
from dictembed.dictionary.sources import load_chang, load_oxford, load_oxford_autodict, load_wordnet_examples
from dictembed.dictionary.sources.wordnet import read_synsets
from dictembed.errors import DataFormatError, DictEmbedError

PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("long" if settings.get_current_profile_name() == "long" else "fuzz")
FUZZ = settings(settings.get_profile(PROFILE))

ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]
# Characters that broke line-based readers: other line breaks, quotes, separators, the byte order mark.
SPECIAL = ["\u2028", "\u2029", "\x0c", "\x0b", "\x85", "\x1c", "\x1e", "\r", '"', "'", ",", ";", " ", "\ufeff", "é"]
GARBAGE = [b'"', b",", b"\t", b"\n", b"\r", b"\r\n", b" ", b"\xff", b"\xc3", b"\xe9", b"{", b"}", b"[", b"]", b":"]
GARBAGE += [b"\xef\xbb\xbf", b" [SEP] ", b"null", b"1", b'"word"', b"\xe2\x80\xa8", b"\xc2\x85", b"\x00", b"\\"]
Row = tuple[object, object, object, object]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@contextmanager
def load_reports() -> Iterator[list[LoadReport]]:
    """The LoadReports that DictionaryBuilder.build logs while the block runs."""
    reports: list[LoadReport] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if hasattr(record, "load_report"):
                reports.append(record.load_report)

    logger = logging.getLogger("dictembed.dictionary.builder")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield reports
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# ------------------------------------------------------------------------------------ generated files
def texts(codec: str, forbidden: str = "") -> st.SearchStrategy[str]:
    """Short strings of `codec`'s characters and of SPECIAL ones, without `forbidden` characters."""
    special = [c for c in SPECIAL if c not in forbidden and _encodable(c, codec)]
    alphabet = st.one_of(st.characters(codec=codec, exclude_characters=forbidden), st.sampled_from(special))
    return st.text(alphabet, max_size=12)


def _encodable(text: str, codec: str) -> bool:
    try:
        text.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


def _codec(encoding: str) -> str:
    """The character set `st.characters` draws from for a file in `encoding`."""
    return {"utf-8-sig": "utf-8", "utf-16": "utf-8"}.get(encoding, encoding)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[str, str, bool]:
    """(encoding, line ending, final line ending?)."""
    return draw(st.sampled_from(ENCODINGS)), draw(st.sampled_from(["\n", "\r\n"])), draw(st.booleans())


def join_lines(lines: list[str], ending: str, final: bool) -> str:
    return ending.join(lines) + (ending if final and lines else "")


def with_blank_lines(draw: st.DrawFn, lines: list[str]) -> list[str]:
    """`lines` with empty lines inserted after the first one (the header)."""
    for position in draw(st.lists(st.integers(1, max(1, len(lines))), max_size=3)):
        lines.insert(position, "")
    return lines


def read_encoding(encoding: str) -> str:
    """The encoding a reader is given for a file written in `encoding` (a UTF-8 BOM is skipped by default)."""
    return "utf-8" if encoding == "utf-8-sig" else encoding


# ------------------------------------------------------------------------------------ the expected result
def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _examples(value: object) -> list[str] | None:
    """An example value as a list, or None when it has the wrong type."""
    if _is_text(value):
        return [value] if value is not None else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def expected(rows: list[Row]) -> tuple[int, list[tuple[str, str, list[str]]]]:
    """What a loader must make of `rows` (headword, definition, example, pos): the number of rows skipped
    and (headword, definition, examples) of every sense in dictionary order."""
    senses: dict[tuple[str, str], list[str]] = {}
    skipped = 0
    for headword, definition, example, pos in rows:
        examples = _examples(example)
        if not (_is_text(headword) and _is_text(definition) and _is_text(pos)) or examples is None:
            skipped += 1
            continue
        key = (clean_text(headword or ""), clean_text(definition or ""))  # type: ignore[arg-type]
        if not all(key):
            skipped += 1
            continue
        sense = senses.setdefault(key, [])
        sense.extend(e for e in map(clean_text, examples) if e and e not in sense)
    by_word: dict[str, list[tuple[str, list[str]]]] = {}
    for (headword, definition), examples in senses.items():
        by_word.setdefault(headword, []).append((definition, examples))
    return skipped, [(h, d, ex) for h, items in by_word.items() for d, ex in items]


def blank(row: Row) -> bool:
    """A TSV/CSV row whose fields are all whitespace: a blank line, not a row."""
    return not any(str(f or "").strip() for f in row)


def check_load(load: Callable[[], Dictionary], rows: list[Row]) -> None:
    """`load()` keeps every sense of `rows`, counts every skip, and fails only when nothing is left."""
    skipped, senses = expected(rows)
    with load_reports() as reports:
        try:
            dictionary = load()
        except DataFormatError as error:
            assert not senses and "no entries" in str(error), error
            return
    report = reports[-1]
    assert report.rows == len(rows)
    assert sum(report.skipped.values()) == skipped
    assert report.senses + report.repeated_definitions + skipped == len(rows)
    assert [(e.headword, s.definition, s.examples) for e in dictionary for s in e.senses] == senses


# ------------------------------------------------------------------------------------ valid tables
def csv_lines(rows: list, quoting: int = csv.QUOTE_MINIMAL) -> list[str]:
    """CSV lines of rows whose fields hold no "\\n" (the writer quotes a "\\r" only with a "\\r\\n" terminator)."""
    buffer = io.StringIO()
    csv.writer(buffer, quoting=quoting, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().split("\r\n")[:-1]


@st.composite
def delimited_files(draw: st.DrawFn, fmt: str) -> tuple[bytes, str, list[Row]]:
    """A TSV or CSV file (bytes) with columns word, definition, example, pos, its encoding, and its rows."""
    encoding, ending, final = draw(layouts())
    cell = texts(_codec(encoding), forbidden="\t\n" if fmt == "tsv" else "\n")
    rows: list[Row] = draw(st.lists(st.tuples(cell, cell, cell, cell), max_size=25))
    header = ["word", "definition", "example", "pos"]
    if fmt == "tsv":
        lines = ["\t".join(row) for row in [header, *rows]]  # type: ignore[arg-type]
    else:
        quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
        lines = csv_lines([header, *rows], quoting)
    text = join_lines(with_blank_lines(draw, lines), ending, final)
    return text.encode(encoding), read_encoding(encoding), [r for r in rows if not blank(r)]


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@FUZZ
@given(data=st.data())
def test_delimited_rows_are_loaded_or_counted(fmt: str, data: st.DataObject, folder: Path) -> None:
    raw, encoding, rows = data.draw(delimited_files(fmt))
    path = folder / f"mine.{fmt}"
    path.write_bytes(raw)
    check_load(lambda: load_dictionary(str(path), encoding=encoding), rows)


json_values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.lists(st.one_of(st.none(), st.integers(), texts("utf-8")), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)


@st.composite
def jsonl_files(draw: st.DrawFn) -> tuple[bytes, str, list[Row]]:
    """A JSONL file of records with string and other (wrong) values, its encoding and its rows."""
    encoding, ending, final = draw(layouts())
    value = st.one_of(texts(_codec(encoding)), json_values)
    keys = ["word", "definition", "example", "pos"]
    first = draw(st.fixed_dictionaries(dict.fromkeys(keys, value)))
    later = draw(st.lists(st.dictionaries(st.sampled_from(keys), value), max_size=20))
    records = [first, *later]
    ascii_only = draw(st.booleans())
    lines = [json.dumps(r, ensure_ascii=ascii_only) for r in records]
    if any(not _encodable(line, encoding) for line in lines):
        lines = [json.dumps(r) for r in records]
    text = join_lines(with_blank_lines(draw, lines), ending, final)
    rows: list[Row] = [tuple(r.get(k) for k in keys) for r in records]  # type: ignore[misc]
    return text.encode(encoding), read_encoding(encoding), rows


@FUZZ
@given(file=jsonl_files())
def test_jsonl_rows_are_loaded_or_counted(file: tuple[bytes, str, list[Row]], folder: Path) -> None:
    raw, encoding, rows = file
    path = folder / "mine.jsonl"
    path.write_bytes(raw)
    check_load(lambda: load_dictionary(str(path), encoding=encoding), rows)


@st.composite
def csv_sources(draw: st.DrawFn, header: list[str]) -> tuple[bytes, list[Row]]:
    """A UTF-8 CSV file with `header` (Chang's or WordNet-examples' columns) and its rows, in the column order
    (word, definition, example, pos)."""
    cell = texts("utf-8", forbidden="\n")
    rows = draw(st.lists(st.tuples(*[cell] * len(header)), max_size=20))
    text = join_lines(csv_lines([header, *rows]), draw(st.sampled_from(["\n", "\r\n"])), final=True)
    named = [dict(zip(header, row, strict=True)) for row in rows]
    ordered = [(r["LEMMA"], r["DEFINITION"], r["EXAMPLE"], r.get("POS")) for r in named]
    return text.encode("utf-8"), [r for r in ordered if not blank(r)]


@pytest.mark.parametrize(
    ("load", "header"),
    [
        (load_chang, ["LEMMA", "EXAMPLE", "DEFINITION"]),
        (load_wordnet_examples, ["LEMMA", "DEFINITION", "EXAMPLE", "POS"]),
    ],
)
@FUZZ
@given(data=st.data())
def test_chang_and_wordnet_examples(
    load: Callable[..., Dictionary], header: list[str], data: st.DataObject, folder: Path
) -> None:
    raw, rows = data.draw(csv_sources(header))
    path = folder / "source.csv"
    path.write_bytes(raw)
    check_load(lambda: load(path), rows)


@st.composite
def oxford_files(draw: st.DrawFn) -> tuple[str, str, str, list[Row]]:
    """SimpDefiner .src/.tgt texts, the AutoDict text of the same rows, and the rows (words and definitions
    open no file with U+FEFF, which would be read as a byte order mark)."""
    word = texts("utf-8", forbidden="\t\n[").filter(lambda t: not t.startswith("\ufeff"))
    cell = texts("utf-8", forbidden="\t\n")
    rows = draw(st.lists(st.tuples(word, cell.filter(lambda t: not t.startswith("\ufeff")), cell), max_size=20))
    ending, final = draw(st.sampled_from(["\n", "\r\n"])), draw(st.booleans())
    src = join_lines([f"{w} [SEP] {e}" for w, _, e in rows], ending, final)
    tgt = join_lines([d for _, d, _ in rows], ending, True)  # without it, an empty last definition is no line
    auto = join_lines([f"{w}\t{e}\t{d}" for w, d, e in rows], ending, final)
    return src, tgt, auto, [(w, d, e, None) for w, d, e in rows]


@FUZZ
@given(files=oxford_files())
def test_oxford_and_autodict(files: tuple[str, str, str, list[Row]], folder: Path) -> None:
    src, tgt, auto, rows = files
    (folder / "d.src").write_text(src, encoding="utf-8", newline="")
    (folder / "d.tgt").write_text(tgt, encoding="utf-8", newline="")
    (folder / "valid.txt").write_text(auto, encoding="utf-8", newline="")
    check_load(lambda: load_oxford(folder / "d.src"), rows)
    check_load(lambda: load_oxford_autodict(folder / "valid.txt"), [r for r in rows if "".join(r[:3]).strip()])


# ------------------------------------------------------------------------------------ broken files
@st.composite
def unterminated_quotes(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """A CSV file whose row k has a stray opening quote: (bytes, data rows, k's line number)."""
    cell = st.text(st.sampled_from("ab ,;"), min_size=1, max_size=6).filter(str.strip)
    rows = draw(st.lists(st.tuples(cell, cell), min_size=1, max_size=10))
    lines = ["word,definition"] + [",".join(f'"{c}"' if "," in c else c for c in row) for row in rows]
    k = draw(st.integers(1, len(rows)))
    lines[k] = lines[k].replace(",", ',"', 1) if draw(st.booleans()) else '"' + lines[k]
    return "\n".join(lines).encode() + b"\n", len(rows), k + 1


@FUZZ
@given(file=unterminated_quotes())
def test_unterminated_quote_never_swallows_rows(file: tuple[bytes, int, int], folder: Path) -> None:
    raw, count, line = file
    path = folder / "quotes.csv"
    path.write_bytes(raw)
    with load_reports() as reports:
        try:
            load_dictionary(str(path))
        except DataFormatError as error:
            assert (error.path, error.line) == (str(path), line), error
            return
    assert reports[-1].rows == count


def garbage(header: bytes = b"") -> st.SearchStrategy[bytes]:
    """Bytes made of separators, quotes, line breaks, bad UTF-8 and random bytes, after `header`."""
    pieces = st.lists(st.one_of(st.sampled_from(GARBAGE), st.binary(max_size=4), st.just(b"word")), max_size=60)
    return st.one_of(st.binary(max_size=200), pieces.map(b"".join)).map(lambda b: header + b)


def assert_fails_cleanly(error: DictEmbedError, path: Path) -> None:
    """A read error names the file and, for malformed content, the line."""
    assert str(error).startswith(str(path)), error
    assert "\n" not in str(error)


def check_garbage(load: Callable[[], object], path: Path) -> None:
    """Loading never raises anything but DictEmbedError, and a loaded dictionary accounts for its rows."""
    with load_reports() as reports:
        try:
            load()
        except DictEmbedError as error:
            assert_fails_cleanly(error, path)
            return
    report = reports[-1]
    assert report.senses + report.repeated_definitions + sum(report.skipped.values()) == report.rows


@pytest.mark.parametrize(
    ("name", "header"),
    [("g.tsv", b"word\tdefinition\texample\n"), ("g.csv", b"word,definition,pos\n"), ("g.jsonl", b"")],
)
@FUZZ
@given(data=st.data(), encoding=st.sampled_from(ENCODINGS))
def test_table_garbage(name: str, header: bytes, data: st.DataObject, encoding: str, folder: Path) -> None:
    path = folder / name
    path.write_bytes(data.draw(garbage(header)))
    check_garbage(lambda: load_dictionary(str(path), encoding=encoding), path)


@FUZZ
@given(src=garbage(), tgt=garbage(), auto=garbage(), chang=garbage(b"LEMMA,EXAMPLE,DEFINITION\n"))
def test_source_garbage(src: bytes, tgt: bytes, auto: bytes, chang: bytes, folder: Path) -> None:
    for name, raw in [("o.src", src), ("o.tgt", tgt), ("a.txt", auto), ("c.csv", chang)]:
        (folder / name).write_bytes(raw)
    check_garbage(lambda: load_oxford(folder / "o.src"), folder)
    check_garbage(lambda: load_oxford_autodict(folder / "a.txt"), folder / "a.txt")
    check_garbage(lambda: load_chang(folder / "c.csv"), folder / "c.csv")
    check_garbage(lambda: load_wordnet_examples(folder / "c.csv"), folder / "c.csv")


@FUZZ
@given(raw=garbage(b"00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | "))
def test_wordnet_data_garbage(raw: bytes, folder: Path) -> None:
    path = folder / "data.noun"
    path.write_bytes(raw)
    try:
        read_synsets(path)
    except DictEmbedError as error:
        assert_fails_cleanly(error, path)


# ------------------------------------------------------------------------------------ encode's input
def line_count(raw: bytes, encoding: str) -> int:
    """Lines of a file split on b"\\n" only (a final line break ends the last line, it does not add one; a UTF-8
    byte order mark is no text)."""
    if encoding == "utf-8":
        raw = raw.removeprefix(codecs.BOM_UTF8)
    return raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)


@FUZZ
@given(raw=garbage(), encoding=st.sampled_from(["utf-8", "latin-1", "cp1252", "ascii"]))
def test_encode_input_is_one_row_per_line(raw: bytes, encoding: str, folder: Path) -> None:
    path = folder / "sentences.txt"
    path.write_bytes(raw)
    try:
        sentences = read_sentences(path, encoding)
    except DataFormatError as error:
        assert_fails_cleanly(error, path)
        offset = int(re.search(r"file offset (\d+)", str(error)).group(1))  # type: ignore[union-attr]
        assert error.line == raw.count(b"\n", 0, offset) + 1
        assert "--encoding" in str(error)
        return
    assert len(sentences) == line_count(raw, encoding)
    assert not any("\n" in s for s in sentences)


@FUZZ
@given(lines=st.lists(texts("utf-8", forbidden="\n"), max_size=20), ending=st.sampled_from(["\n", "\r\n"]))
def test_encode_input_round_trips(lines: list[str], ending: str, folder: Path) -> None:
    path = folder / "sentences.txt"
    path.write_bytes(join_lines(lines, ending, True).encode("utf-8-sig"))
    assert read_sentences(path) == [line[:-1] if ending == "\n" and line.endswith("\r") else line for line in lines]
