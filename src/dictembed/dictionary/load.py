"""`load_dictionary`: a dictionary from a comma list of source names and table files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from dictembed.dictionary.catalog import CATALOG, remember_counts
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.merge import merge_dictionaries
from dictembed.dictionary.sources import load_wordnet
from dictembed.dictionary.sources.table import (
    COLUMN_NAMES,
    FORMATS,
    find_columns,
    parse_columns,
    read_table,
    table_dictionary,
)
from dictembed.errors import DictEmbedError
from dictembed.extras import MissingExtraError, install_hint
from dictembed.paths import DATA_ENV, data_dir
from dictembed.text_files import check_readable, text_encoding


def _load_named(name: str) -> Callable[[str | Path | None], Dictionary]:
    """The catalogue's loader of `name` as a source (WordNet's takes the database folder, the others nothing)."""
    if name == "wordnet":
        return lambda wordnet_dir: load_wordnet(wordnet_dir)
    return lambda _: CATALOG[name].load_function()()


# The named dictionaries (`dictionary.catalog`), by name: each a function of the WordNet folder override.
SOURCES: dict[str, Callable[[str | Path | None], Dictionary]] = {name: _load_named(name) for name in CATALOG}


def load_user_table(path: str | Path, encoding: str = "utf-8", columns: str | None = None) -> Dictionary:
    """A table file with the default columns: `word`, `definition`, and `example`/`pos` when present (in any case).
    `columns` (e.g. "word,-,definition", see `parse_columns`) names the columns of a file without a header
    line; such a file may also be a .txt file, read as TSV; a .jsonl file names its own (`--dictionary a.tsv,b.jsonl
    --columns ...` gives the columns to a.tsv alone). The file is read once (it may be a pipe or FIFO)."""
    path = Path(path)
    header = parse_columns(columns) if columns and path.suffix.lower() != ".jsonl" else None
    fmt = FORMATS.get(path.suffix.lower(), "tsv") if header else None
    table = read_table(path, fmt, encoding, header)
    optional = {c: c if find_columns(table[0], c) else None for c in COLUMN_NAMES[2:]}
    return table_dictionary(path, table, headword="word", definition="definition", **optional)


def load_source(
    item: str, wordnet_dir: str | Path | None = None, encoding: str = "utf-8", columns: str | None = None
) -> Dictionary:
    """One source: a known name (see SOURCES) or the path of a .tsv/.csv/.jsonl table read as `encoding`
    (the named sources have their own, known encodings); `columns`: see `load_user_table`."""
    path = source_file(item, columns)
    if path is None:
        name = item.strip().lower()
        dictionary = SOURCES[name](wordnet_dir)
        remember_counts(name, dictionary, wordnet_dir)
        return dictionary
    return load_user_table(path, encoding, columns)


def source_file(item: str, columns: str | None = None, label: str = "--columns") -> Path | None:
    """The table file a source names, None for a known name (see SOURCES); anything else is a one-line error.
    A .tsv/.csv/.jsonl path is a table, and with `columns` a .txt path too (see `load_user_table`); an existing
    .txt file without them is refused naming `label`, the option that gives them."""
    if item.strip().lower() in SOURCES:
        return None
    path = Path(item.strip()).expanduser()
    suffix = path.suffix.lower()
    if suffix in FORMATS or columns and suffix == ".txt":
        return path
    if suffix == ".txt" and path.exists():
        example = f"{label} word,definition" if label.startswith("--") else f"{label}='word,definition'"
        raise DictEmbedError(f"{path}: a .txt table has no header line: give {label} (e.g. {example})")
    if path.is_dir():
        raise DictEmbedError(
            f"{path}: a folder, not a dictionary; name a {'/'.join(FORMATS)} file in it or a dictionary"
        )
    raise DictEmbedError(
        f"unknown dictionary {item.strip()!r}: use one of {', '.join(SOURCES)} "
        f"or the path of a {'/'.join(FORMATS)} file with columns {'/'.join(COLUMN_NAMES)}"
    )


def source_items(spec: str) -> list[str]:
    """The sources of a comma list; none, or a file whose name holds a comma, is a one-line error."""
    if "," in spec and Path(spec.strip()).expanduser().is_file():
        raise DictEmbedError(
            f"{spec.strip()}: a dictionary is given as a comma list, so a file whose name holds a comma cannot be; "
            "rename it (or link it under another name)"
        )
    items = [item for item in spec.split(",") if item.strip()]
    if not items:
        raise DictEmbedError(f"no dictionary named in {spec!r}: use one or more of {', '.join(SOURCES)}")
    return items


def check_installed(item: str) -> None:
    """MissingExtraError when the named source `item` needs a data package that is not installed (as `dictembed
    dictionaries` shows it), a DictEmbedError when it reads a file of the shared data folder that is not there;
    found without loading anything."""
    named = CATALOG.get(item.strip().lower())
    if named is not None and named.package is not None and named.extra is not None and not named.installed():
        raise MissingExtraError(
            f"the dictionary {named.name!r} needs the optional package {named.package}: {install_hint(named.extra)}"
        )
    if named is not None and named.data_file is not None and not (path := data_dir() / named.data_file).is_file():
        raise DictEmbedError(
            f"the dictionary {named.name!r} reads {path}, which is not there; point ${DATA_ENV} at the shared data "
            "folder that holds it"
        )


def check_sources(spec: str, columns: str | None = None, label: str = "--columns") -> None:
    """The errors `load_dictionary(spec)` gives for its names and files, without loading anything: no source, an
    unknown name, a named source whose data package is missing (`check_installed`), a table file that cannot be
    read, `columns` given for sources of which none is a .tsv, .csv or .txt file, which alone it names (a command
    checks its dictionary before it loads a model; `label` names `columns` in the message)."""
    tables = []
    for item in source_items(spec):
        if (path := source_file(item, columns, label)) is None:
            check_installed(item)
        else:
            check_readable(path)
            tables.append(path)
    if columns and not any(path.suffix.lower() != ".jsonl" for path in tables):
        raise DictEmbedError(
            f"{label} names the columns of a headerless .tsv, .csv or .txt file; {spec!r} holds none "
            "(a named dictionary or a .jsonl file names its own)"
        )


def check_arguments(spec: object, encoding: object, columns: object) -> str:
    """`load_dictionary`'s `spec` as a string (a path too), refused in one line, naming the argument, unless a
    string; an `encoding` that is no text encoding; `columns` that are not None or a spec `parse_columns` takes;
    and what `check_sources` refuses."""
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise DictEmbedError(f"spec must be a comma list of dictionary names or files (a str or path), got {spec!r}")
    if not isinstance(encoding, str):
        raise DictEmbedError(f"encoding must be the name of a text encoding, got {encoding!r}")
    try:
        text_encoding(encoding)
    except ValueError as err:
        raise DictEmbedError(f"encoding: {err}") from None
    if columns is not None:
        if not isinstance(columns, str):
            raise DictEmbedError(f"columns must be a comma list of column names (a str) or None, got {columns!r}")
        try:
            parse_columns(columns)
        except DictEmbedError as err:
            raise DictEmbedError(f"columns: {err}") from None
    check_sources(spec, columns, label="columns")
    return spec


def load_dictionary(
    spec: str | os.PathLike[str],
    wordnet_dir: str | Path | None = None,
    encoding: str = "utf-8",
    columns: str | None = None,
) -> Dictionary:
    """Load the comma-separated sources of `spec` (e.g. "wordnet,gcide,my_words.tsv", or the path of one file).

    Several sources are merged with `merge_dictionaries` (its report is logged); one is returned as
    loaded. `wordnet_dir` overrides the WordNet database folder; `encoding` is that of the table files
    (the command line's --encoding), bytes that do not decode raising DataFormatError with the file,
    line and byte; `columns` (the command line's --columns) names the columns of headerless table files.
    Arguments that cannot be right, and named sources whose data package is missing, are refused before anything
    is read (`check_arguments`).
    """
    spec = check_arguments(spec, encoding, columns)
    dictionaries = [load_source(item, wordnet_dir, encoding, columns) for item in source_items(spec)]
    if len(dictionaries) == 1:
        return dictionaries[0]
    merged, _ = merge_dictionaries(dictionaries)
    return merged
