"""A user's own dictionary as a TSV, CSV or JSONL table whose columns the caller names.

Files are read with `dictembed.text_files.read_lines`: lines are split on "\\n" only, `encoding` (default UTF-8, a
byte order mark skipped) decodes them, and bytes that do not decode raise `DataFormatError` naming the file,
line and byte. TSV fields are split on tabs; a field wrapped in quotes with each inner quote doubled, as
spreadsheets and pandas write a field that holds one, loses that quoting (counted in a warning). CSV fields follow
the csv module's quoting, checked strictly.

Column names are matched in any case and ignoring surrounding spaces (a header `Word<TAB>Definition` names `word`
and `definition`). Structure errors raise `DataFormatError` naming the file and line: a missing or repeated column
(a missing one with the names a header may use, and `--columns` for a file without a header line), a row
with the wrong number of fields, a line that is not a JSON object, a CSV quoting error, and a CSV record
that runs over several lines (fields may not contain line breaks: such a record is almost always an
unterminated quote swallowing the rows after it). A file with a header but no rows raises
"FILE: no entries (only a header)"; a file whose every row is skipped raises too.

A file whose only line breaks are lone carriage returns (\\r, old Mac files) raises DataFormatError
saying so, rather than reading it as one line.

Content gaps skip the row: an empty or missing headword or definition (also one of invisible format
characters only, see `clean_text`), and a JSONL value of the wrong type (a headword, definition or pos that
is a number, list, object or boolean; an example, antonym or similar word that is not a string or a list of
strings). Such values are
never turned into text. A TSV/CSV line equal to the header (files joined end to end) is skipped too, and a
byte order mark at the start of any line dropped; so is the first line of a file read with `--columns` (no header
line) that looks like a header anyway (its cells the names given, or each a known column name). Skipped rows are
counted and logged as a warning with their line numbers. Blank lines (only whitespace, or only empty fields)
carry nothing and are ignored. Rows repeating a headword's definition become one sense with all their examples and
antonyms and similar words (an `antonym` column: the headwords of the opposite meaning, which near-synonym search
leaves out; a `similar` column: those of a close meaning, which it ranks as sharing the sense).
The optional columns of a JSONL file are the keys of all its records, so a record may hold a key that the first
one lacks.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import cast

from dictembed.dictionary.builder import MAX_LINES_REPORTED, DictionaryBuilder, lines_note, without_gc
from dictembed.dictionary.core import Dictionary, Sense
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.text_files import RepeatedKeyError, read_lines, unique_keys

log = logging.getLogger(__name__)

FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}
COLUMN_NAMES = ("word", "definition", "example", "pos", "antonym", "similar")
SKIP = "-"
# Names a header line commonly gives its columns besides COLUMN_NAMES ("headword<TAB>gloss"): a first line made of
# them only is taken for a header when --columns reads every line as data (see `_looks_like_header`).
HEADER_NAMES = frozenset(COLUMN_NAMES) | {"headword", "lemma", "term", "entry", "gloss", "meaning", "sense"}
BOM = "\ufeff"
REPEATED_HEADER = "repeated header lines"
HEADER_LIKE = "first line that looks like a header (--columns reads every line as data)"
LONE_CR = "lines end in a lone carriage return (\\r); convert the file to \\n line endings"

Row = dict[str, object]
Record = tuple[int, list[str]]
# (columns, their line, (line number, row) per data row); a row that is a string is a line skipped for that reason
# (REPEATED_HEADER, HEADER_LIKE)
Table = tuple[list[str], int, Iterator[tuple[int, Row | str]]]


def column_key(name: str) -> str:
    """A column name as matched: case and surrounding spaces ignored (a header's "Word " is `word`)."""
    return name.strip().casefold()


def find_columns(columns: list[str], name: str) -> list[str]:
    """The columns of a table that `name` names (see `column_key`), in order."""
    return [column for column in columns if column_key(column) == column_key(name)]


def _missing_hint(path: Path, columns: list[str], name: str) -> str:
    """What to do about a missing default column (one of COLUMN_NAMES): the names a header may use, and, when the
    header names none of them (a file without a header line, it may be), `--columns`, for such a file only."""
    if name not in COLUMN_NAMES:
        return ""
    if path.suffix.lower() == ".jsonl":
        return f"; the keys a record may use are {', '.join(COLUMN_NAMES)} (in any case)"
    hint = f"; the header line may name {', '.join(COLUMN_NAMES)} (in any case)"
    if not any(column_key(c) in COLUMN_NAMES for c in columns):
        hint += (
            "; only for a file without a header line, train, index and data stats take --columns, "
            "e.g. --columns word,definition (it reads the first line as data); elsewhere add a header line"
        )
    return hint


def shown_columns(columns: list[str], most: int = 8, width: int = 40) -> str:
    """A header's `columns` as an error shows them: the first `most`, each cut to `width` characters (a first line
    that is no header may be a whole paragraph)."""
    cut = [c if len(c) <= width else c[: width - 1] + "…" for c in columns[:most]]
    cut = [c if c.isprintable() else repr(c)[1:-1] for c in cut]  # NUL and escapes written out, never sent raw
    shown = ", ".join(cut) + (f", … ({len(columns)} in all)" if len(columns) > most else "")
    if any("\x00" in c for c in columns):  # UTF-16 read as UTF-8: big-endian puts the NUL first
        order = "be" if columns[0].startswith("\x00") else "le"
        shown += f"; NUL between the letters: a UTF-16 file without a byte order mark? pass --encoding utf-16-{order}"
    return shown


def _resolve_columns(path: Path, columns: list[str], wanted: list[str], line: int) -> list[str]:
    """The table's own name of each `wanted` column, matched by `column_key`; a missing or repeated one is a
    DataFormatError naming `line` (the header's)."""
    found = []
    for name in wanted:
        matches = find_columns(columns, name)
        if not matches:
            problem = (
                f"column {name!r} not found (columns: {shown_columns(columns)}){_missing_hint(path, columns, name)}"
            )
            raise DataFormatError(path, problem, line=line)
        if len(matches) > 1:
            spelled = f" ({', '.join(matches)})" if len(set(matches)) > 1 else ""
            raise DataFormatError(path, f"column {name!r} appears more than once{spelled}", line=line)
        found.append(matches[0])
    return found


def table_format(path: Path, fmt: str | None = None) -> str:
    """`fmt` if given, else the format named by the file suffix (.tsv, .csv, .jsonl)."""
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt is None or fmt not in FORMATS.values():
        raise DictEmbedError(
            f"{path}: unknown table format {fmt or path.suffix!r}; use a .tsv, .csv or .jsonl file "
            f"or name the format ({', '.join(FORMATS.values())})"
        )
    return fmt


def jsonl_text(dictionary: Dictionary) -> str:
    """`dictionary` as a JSONL table (`word`, `definition`, `pos`, and `antonym` and `similar`, lists, where a sense
    has any: one line a definition) that `load_table` reads back as the same headwords, definitions, parts of
    speech, antonyms and similar words."""

    def row(word: str, sense: Sense) -> dict[str, object]:
        found: dict[str, object] = {"word": word, "definition": sense.definition, "pos": sense.pos or ""}
        if sense.antonyms:
            found["antonym"] = list(sense.antonyms)
        if sense.similar:
            found["similar"] = list(sense.similar)
        return found

    rows = (json.dumps(row(e.headword, s), ensure_ascii=False) for e in dictionary for s in e.senses)
    return "".join(row + "\n" for row in rows)


def spreadsheet_unquoted(field: str) -> str | None:
    """The text of a TSV field quoted as spreadsheets and pandas write one that holds a quote (`"a ""striped""
    horse"`: wrapped in quotes, each inner quote doubled), else None (a field that is not quoted so)."""
    if len(field) < 2 or field[0] != '"' or field[-1] != '"':
        return None
    inner = field[1:-1]
    return inner.replace('""', '"') if '"' not in inner.replace('""', "") else None


def _tsv_records(path: Path, lines: list[str]) -> Iterator[Record]:
    """(line number, fields) of every line, split on tabs; a field quoted as a spreadsheet quotes it
    (`spreadsheet_unquoted`) is read without its quotes, and how many were is logged with their first lines."""
    unquoted: list[int] = []
    for number, line in enumerate(lines, start=1):
        fields = line.split("\t")
        for i, field in enumerate(fields):
            if field.startswith('"') and (text := spreadsheet_unquoted(field.strip())) is not None:
                fields[i] = text
                unquoted.append(number)
        yield number, fields
    if unquoted:
        quoted_lines = list(dict.fromkeys(unquoted))
        log.warning(
            '%s: %d fields quoted as spreadsheets write them ("...", "" for a quote inside) read without their '
            "quotes%s",
            path,
            len(unquoted),
            lines_note(quoted_lines[:MAX_LINES_REPORTED], len(quoted_lines)),
        )


def _csv_problem(error: csv.Error, start: int, end: int) -> str:
    """A csv module error in words, noting a record that ran past its first line."""
    text = str(error)
    if text.startswith("new-line character"):
        text = "a carriage return (\\r) inside an unquoted field"
    if end > start:
        text += f" (the record runs on to line {end}: an unterminated quote?)"
    return text


def _csv_records(path: Path, lines: list[str]) -> Iterator[Record]:
    """(line number, fields) of every CSV record; a record may not run over several lines."""
    # A byte order mark before a quoted first field (a second file appended) would keep the quotes as text.
    reader = csv.reader((line[1:] if line.startswith(BOM + '"') else line for line in lines), strict=True)
    last = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise DataFormatError(path, _csv_problem(error, last + 1, reader.line_num), line=last + 1) from None
        if reader.line_num > last + 1:
            raise DataFormatError(
                path,
                f"a quoted field runs on to line {reader.line_num} (an unterminated quote?); "
                "fields may not contain line breaks",
                line=last + 1,
            )
        last = reader.line_num
        yield last, fields


def parse_columns(spec: str) -> list[str]:
    """The column names of a headerless table, in order (`word,-,definition`): each one of COLUMN_NAMES or
    `-` (a column to skip, named `-2` for the second column...); `word` and `definition` are required."""
    names = [name.strip().lower() for name in spec.split(",")]
    unknown = [n for n in names if n not in (*COLUMN_NAMES, SKIP)]
    if unknown:
        raise DictEmbedError(f"unknown column {unknown[0]!r} in {spec!r}: use {', '.join(COLUMN_NAMES)} or - (skip)")
    repeated = [n for n, count in Counter(names).items() if count > 1 and n != SKIP]
    if repeated:
        raise DictEmbedError(f"column {repeated[0]!r} named twice in {spec!r}")
    if "word" not in names or "definition" not in names:
        raise DictEmbedError(f"the columns {spec!r} must name word and definition")
    return [f"{SKIP}{i}" if n == SKIP else n for i, n in enumerate(names, start=1)]


COLUMNS_HELP = (
    "columns of headerless .tsv/.csv/.txt dictionary files, in order: word, definition, example, pos, antonym, "
    "similar or - (skip), e.g. word,-,definition (default: the file's header line)"
)


def table_columns(spec: str) -> str:
    """`spec` if `parse_columns` takes it (an argparse `type`), else ArgumentTypeError with the reason."""
    try:
        parse_columns(spec)
    except DictEmbedError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return spec


def _looks_like_header(fields: list[str], columns: list[str]) -> bool:
    """Whether the first row of a file read with `columns` (see `parse_columns`) names columns rather than holding
    data: its cells, skipped columns aside, are the names `columns` gives, or each is one of HEADER_NAMES (in any
    case, see `column_key`)."""
    keys = [column_key(field) for field in fields]
    named = [(key, column) for key, column in zip(keys, columns, strict=True) if not column.startswith(SKIP)]
    return all(key == column for key, column in named) or all(key in HEADER_NAMES for key, _ in named)


def _delimited_table(path: Path, records: Iterator[Record], header: list[str] | None = None) -> Table:
    """The header of a TSV/CSV file, its line number, and (line number, row) for each non-blank record,
    REPEATED_HEADER for a line repeating the header (files joined end to end). With `header` given, the file has
    none: every line is a row, but a first one that looks like a header (`_looks_like_header`) is HEADER_LIKE. A
    byte order mark at the start of a line (a joined file's) is dropped."""
    has_header = header is None
    # blank lines carry nothing, before the header too
    first = (0, header) if header is not None else next((r for r in records if any(f.strip() for f in r[1])), None)
    if first is None:
        raise DataFormatError(path, "empty file (expected a header line)", line=1)
    header = [name.strip() for name in first[1]]
    names = "the header has" if has_header else "--columns names"

    def rows() -> Iterator[tuple[int, Row | str]]:
        at_start = True
        for number, fields in records:
            if not any(f.strip() for f in fields):
                continue
            if len(fields) != len(header):
                raise DataFormatError(path, f"{len(fields)} fields where {names} {len(header)}", line=number)
            fields[0] = fields[0].removeprefix(BOM)
            if has_header and [f.strip() for f in fields] == header:
                yield number, REPEATED_HEADER
            elif not has_header and at_start and _looks_like_header(fields, header):
                yield number, HEADER_LIKE
            else:
                yield number, dict(zip(header, fields, strict=True))
            at_start = False

    return header, first[0], rows()


def _json_record(path: Path, line: str, number: int) -> Row:
    """One JSONL line as an object, or DataFormatError (a key named twice too)."""
    try:
        record = json.loads(line, object_pairs_hook=unique_keys)
    except RepeatedKeyError as error:
        raise DataFormatError(
            path, f"key {error.args[0]!r} appears more than once in one record", line=number
        ) from None
    except json.JSONDecodeError as error:
        raise DataFormatError(path, f"invalid JSON: {error.msg}", line=number) from None
    except (ValueError, RecursionError) as error:  # e.g. an integer over Python's digit limit, deep nesting
        raise DataFormatError(path, f"invalid JSON: {error}", line=number) from None
    if not isinstance(record, dict):
        raise DataFormatError(path, "expected a JSON object per line", line=number)
    return record


def _jsonl_table(path: Path, lines: list[str]) -> Table:
    """The keys of a JSONL file's records (all of them, in order of first use: a key absent from the first
    record is still a column), the first record's line number, and (line number, record) per non-blank line.
    Keys are matched by `column_key` across records ("Word" in one, "word" in another: one column, spelled as
    first seen); one record naming a key twice so is a DataFormatError. A byte order mark at the start of a line
    (a joined file's) is dropped."""
    records = [
        (number, _json_record(path, line, number))
        for number, line in enumerate((line.removeprefix(BOM) for line in lines), start=1)
        if line.strip()
    ]
    if not records:
        raise DataFormatError(path, "empty file (expected one JSON object per line)", line=1)
    spelling: dict[str, str] = {}  # a key as matched (`column_key`) -> its first spelling in the file
    renames: dict[tuple[str, ...], dict[str, str]] = {}  # a record's keys -> those spelled otherwise before
    for index, (number, record) in enumerate(records):
        keys = tuple(record)  # records share a few layouts: each is matched once
        if keys not in renames:
            renames[keys] = _respelled(path, keys, spelling, number)
        if rename := renames[keys]:
            records[index] = (number, {rename.get(key, key): value for key, value in record.items()})
    return list(spelling.values()), records[0][0], iter(records)


def _respelled(path: Path, keys: tuple[str, ...], spelling: dict[str, str], line: int) -> dict[str, str]:
    """Each of a JSONL record's `keys` that an earlier record spelled otherwise (see `column_key`), to that
    spelling; `spelling` (a key as matched -> its first spelling) gains the record's new keys. Two of `keys`
    matching alike are a DataFormatError naming `line`."""
    matched = [column_key(key) for key in keys]
    if len(set(matched)) < len(matched):
        twice = next(key for key in matched if matched.count(key) > 1)
        raise DataFormatError(path, f"key {twice!r} appears more than once in one record", line=line)
    for key, match in zip(keys, matched, strict=True):
        spelling.setdefault(match, key)
    return {key: spelling[match] for key, match in zip(keys, matched, strict=True) if spelling[match] != key}


def _parses_as_json(line: str) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _check_line_ends(path: Path, lines: list[str], fmt: str) -> None:
    """DataFormatError for a file whose only line breaks are lone carriage returns (old Mac files): lines are
    split on "\\n" only, so such a file is one line whose fields would run together. A one-line JSONL record
    that holds a carriage return as JSON whitespace is fine."""
    if len(lines) == 1 and "\r" in lines[0] and not (fmt == "jsonl" and _parses_as_json(lines[0])):
        raise DataFormatError(path, LONE_CR)


def read_table(
    path: str | Path, fmt: str | None = None, encoding: str = "utf-8", header: list[str] | None = None
) -> Table:
    """A table file's columns (its header, or the keys of a JSONL file's records), the line they are on, and
    (line number, row) for every non-blank data row, a skip reason for a line that is no row (see `Table`).
    `header`: the column names of a TSV/CSV file without a header line (see `parse_columns`)."""
    path = Path(path)
    fmt = table_format(path, fmt)
    if header is not None and fmt == "jsonl":
        raise DictEmbedError(f"{path}: a JSONL file names its columns itself; column names are for TSV/CSV files")
    lines = read_lines(path, encoding)
    _check_line_ends(path, lines, fmt)
    if fmt == "jsonl":
        return _jsonl_table(path, lines)
    return _delimited_table(path, _tsv_records(path, lines) if fmt == "tsv" else _csv_records(path, lines), header)


def _is_text(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_examples(value: object) -> bool:
    return _is_text(value) or isinstance(value, list) and all(isinstance(v, str) for v in value)


def _wrong_type(row: Row, texts: Iterable[str | None], lists: Iterable[str | None]) -> str | None:
    """The reason to skip a row with a value of the wrong type (only JSONL has typed values), or None: a value of
    `texts` that is no string, or of `lists` (example, antonym, similar) that is no string or list of strings."""
    for column in texts:
        if column is not None and not _is_text(row.get(column)):
            return f"rows whose {column!r} is not a string"
    for column in lists:
        if column is not None and not _is_examples(row.get(column)):
            return f"rows whose {column!r} is not a string or a list of strings"
    return None


def _as_examples(value: object) -> list[str]:
    """A checked example, antonym or similar value (None, a string or a list of strings) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [str(value)]


def _as_label(value: object) -> str | None:
    return str(value).strip() or None if value is not None else None


def read_columns(path: str | Path, fmt: str | None = None, encoding: str = "utf-8") -> list[str]:
    """The column names of a table: its header line, or the keys of a JSONL file's records."""
    return read_table(path, fmt, encoding)[0]


@without_gc
def load_table(
    path: str | Path,
    headword: str = "word",
    definition: str = "definition",
    example: str | None = None,
    pos: str | None = None,
    fmt: str | None = None,
    name: str | None = None,
    encoding: str = "utf-8",
    header: list[str] | None = None,
    antonym: str | None = None,
    similar: str | None = None,
) -> Dictionary:
    """Read a dictionary table; `headword`, `definition`, `example`, `pos`, `antonym`, `similar` name its columns
    (keys), matched in any case and ignoring surrounding spaces (`column_key`).

    TSV/CSV files need a header line, unless `header` gives the column names (every line is then a row);
    a named JSONL key must appear in some record (others may lack it). A JSONL example, antonym or similar value
    may be a string or a list of strings; rows repeating a headword's definition unite them.
    """
    path = Path(path)
    table = read_table(path, fmt, encoding, header)
    return table_dictionary(path, table, headword, definition, example, pos, name, antonym, similar)


@without_gc
def table_dictionary(
    path: Path,
    table: Table,
    headword: str = "word",
    definition: str = "definition",
    example: str | None = None,
    pos: str | None = None,
    name: str | None = None,
    antonym: str | None = None,
    similar: str | None = None,
) -> Dictionary:
    """The dictionary in `table`, as `read_table` gave it for `path` (see `load_table`): a caller that needs
    the columns before naming them reads the file once, since a pipe or FIFO cannot be read again."""
    columns, line, rows = table
    wanted = [c for c in (headword, definition, example, pos, antonym, similar) if c is not None]
    own = dict(zip(wanted, _resolve_columns(path, columns, wanted, line), strict=True))
    headword, definition = own[headword], own[definition]
    example, pos = own.get(example or ""), own.get(pos or "")
    antonym, similar = own.get(antonym or ""), own.get(similar or "")
    builder = DictionaryBuilder(str(path), name=name or path.stem)
    for number, row in rows:
        if isinstance(row, str):
            builder.skip_row(row, number)
            continue
        wrong = _wrong_type(row, (headword, definition, pos), (example, antonym, similar))
        if wrong:
            builder.skip_row(wrong, number)
            continue
        builder.add(
            cast("str | None", row.get(headword)),  # checked by _wrong_type
            cast("str | None", row.get(definition)),
            _as_examples(row.get(example)) if example else (),
            _as_label(row.get(pos)) if pos else None,
            line=number,
            antonyms=_as_examples(row.get(antonym)) if antonym else (),
            similar=_as_examples(row.get(similar)) if similar else (),
        )
    return builder.build(empty="only a header")
