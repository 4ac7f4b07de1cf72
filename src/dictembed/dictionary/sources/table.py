"""A user's own dictionary as a TSV, CSV or JSONL table whose columns the caller names.

Structure errors (a missing column, a row with the wrong number of fields, a line that is not a
JSON object) raise `DataFormatError` naming the file and line. Content gaps (an empty headword or
definition) skip the row; skipped rows are counted and logged as a warning with their line numbers.
Rows repeating a headword's definition become one sense with all their examples.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError, DictEmbedError

FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}

Row = dict[str, object]


def _check_columns(path: Path, header: list[str], wanted: list[str], line: int) -> None:
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataFormatError(path, f"column {missing[0]!r} not found (columns: {', '.join(header)})", line=line)


def table_format(path: Path, fmt: str | None = None) -> str:
    """`fmt` if given, else the format named by the file suffix (.tsv, .csv, .jsonl)."""
    fmt = fmt or FORMATS.get(path.suffix.lower())
    if fmt not in FORMATS.values():
        raise DictEmbedError(
            f"{path}: unknown table format {fmt or path.suffix!r}; use a .tsv, .csv or .jsonl file "
            f"or name the format ({', '.join(FORMATS.values())})"
        )
    return fmt


def _delimited_rows(path: Path, delimiter: str, wanted: list[str]) -> Iterator[tuple[int, Row]]:
    """(line number, row) for each non-blank record after the header line."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise DataFormatError(path, "empty file (expected a header line)", line=1) from None
        except csv.Error as error:
            raise DataFormatError(path, f"unreadable header: {error}", line=1) from None
        _check_columns(path, header, wanted, reader.line_num)
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                raise DataFormatError(path, str(error), line=reader.line_num) from None
            if not any(f.strip() for f in fields):
                continue
            if len(fields) != len(header):
                raise DataFormatError(
                    path, f"{len(fields)} fields where the header has {len(header)}", line=reader.line_num
                )
            yield reader.line_num, dict(zip(header, fields, strict=True))


def _jsonl_rows(path: Path, wanted: list[str]) -> Iterator[tuple[int, Row]]:
    """(line number, record) for each non-blank line; the first record must hold the wanted keys."""
    first = True
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(path, f"invalid JSON: {error.msg}", line=number) from None
            if not isinstance(record, dict):
                raise DataFormatError(path, "expected a JSON object per line", line=number)
            if first:
                _check_columns(path, list(record), wanted, number)
                first = False
            yield number, record


def _as_examples(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def _as_text(value: object) -> str | None:
    return None if value is None else str(value)


def _as_label(value: object) -> str | None:
    return str(value).strip() or None if value is not None else None


def read_columns(path: str | Path, fmt: str | None = None) -> list[str]:
    """The column names of a table: its header line, or the keys of a JSONL file's first record."""
    path = Path(path)
    if not path.is_file():
        raise DictEmbedError(f"{path}: dictionary file not found")
    if table_format(path, fmt) == "jsonl":
        for _, record in _jsonl_rows(path, []):
            return list(record)
        return []
    delimiter = "\t" if table_format(path, fmt) == "tsv" else ","
    with open(path, encoding="utf-8-sig", newline="") as handle:
        header = next(csv.reader(handle, delimiter=delimiter), [])
    return [name.strip() for name in header]


@without_gc
def load_table(
    path: str | Path,
    headword: str = "word",
    definition: str = "definition",
    example: str | None = None,
    pos: str | None = None,
    fmt: str | None = None,
    name: str | None = None,
) -> Dictionary:
    """Read a dictionary table; `headword`, `definition`, `example`, `pos` name its columns (keys).

    TSV/CSV files need a header line; a JSONL file's first record must hold every named key (later
    records may lack them). A JSONL example value may be a string or a list of strings.
    """
    path = Path(path)
    if not path.is_file():
        raise DictEmbedError(f"{path}: dictionary file not found")
    fmt = table_format(path, fmt)
    wanted = [c for c in (headword, definition, example, pos) if c is not None]
    if fmt == "jsonl":
        rows = _jsonl_rows(path, wanted)
    else:
        rows = _delimited_rows(path, "\t" if fmt == "tsv" else ",", wanted)
    builder = DictionaryBuilder(str(path), name=name or path.stem)
    for number, row in rows:
        builder.add(
            _as_text(row.get(headword)),
            _as_text(row.get(definition)),
            _as_examples(row.get(example)) if example else (),
            _as_label(row.get(pos)) if pos else None,
            line=number,
        )
    return builder.build()
