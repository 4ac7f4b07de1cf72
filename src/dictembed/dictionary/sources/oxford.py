"""The Oxford dictionary files of the shared data (valid split), in their three published formats.

One row per (word, example, definition): a definition repeated with different examples becomes
one sense holding all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dictembed import paths
from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.sources.table import load_table
from dictembed.errors import DataFormatError
from dictembed.text_files import read_lines

OXFORD = Path("dictionaries") / "oxford"
SIMPDEFINER_SRC = OXFORD / "simpdefiner" / "oxford.valid.src"
AUTODICT = OXFORD / "autodict" / "valid.txt"
CHANG = Path("dictionaries") / "chang" / "CHA_valid_random.csv"
SEP = " [SEP] "


@without_gc
def load_oxford(src: str | Path | None = None, tgt: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """SimpDefiner's Oxford files: `.src` lines `word [SEP] example`, `.tgt` the aligned definitions.

    `tgt` defaults to `src` with the suffix `.tgt`; unequal line counts raise DataFormatError. Lines are
    split on "\\n" only (`dictembed.text_files.read_lines`), so other line-break characters never misalign them.
    """
    src = Path(src) if src else paths.data_dir() / SIMPDEFINER_SRC
    tgt = Path(tgt) if tgt else src.with_suffix(".tgt")
    sources, targets = read_lines(src, encoding), read_lines(tgt, encoding)
    if len(sources) != len(targets):
        longer, shorter = (src, tgt) if len(sources) > len(targets) else (tgt, src)
        first = min(len(sources), len(targets)) + 1
        raise DataFormatError(
            longer,
            f"line counts differ ({len(sources)} in {src.name}, {len(targets)} in {tgt.name}): "
            f"this line has no partner in {shorter}",
            line=first,
        )
    builder = DictionaryBuilder(str(src), name="oxford")
    for number, (source, definition) in enumerate(zip(sources, targets, strict=True), start=1):
        if not source.strip() and not definition.strip():
            continue
        word, sep, example = source.partition(SEP)
        if not sep:
            word, sep, example = source.partition(SEP.strip())
        if not sep:
            raise DataFormatError(src, f"expected 'word {SEP.strip()} example', got {source[:60]!r}", line=number)
        builder.add(word, definition, [example], line=number)
    return builder.build()


def load_oxford_autodict(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """AutoDict's Oxford file: `word<TAB>example<TAB>definition` per line."""
    return load_autodict(path or paths.data_dir() / AUTODICT, encoding, name="oxford-autodict")


@without_gc
def load_autodict(
    path: str | Path, encoding: str = "utf-8", name: str | None = None, text: Callable[[str], str] | None = None
) -> Dictionary:
    """A file in AutoDict's format, `word<TAB>example<TAB>definition` per line; `text` rewrites each field
    (e.g. `cjk.join_segmented`) before the builder cleans it."""
    path = Path(path)
    builder = DictionaryBuilder(str(path), name=name or path.stem)
    for number, line in enumerate(read_lines(path, encoding), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataFormatError(path, f"expected 3 tab-separated fields, got {len(fields)}", line=number)
        word, example, definition = map(text, fields) if text is not None else fields
        builder.add(word, definition, [example], line=number)
    return builder.build()


def load_chang(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """Chang et al.'s Oxford triplets CSV, header `LEMMA,EXAMPLE,DEFINITION`."""
    return load_table(
        path or paths.data_dir() / CHANG,
        headword="LEMMA",
        definition="DEFINITION",
        example="EXAMPLE",
        fmt="csv",
        name="chang",
        encoding=encoding,
    )
