"""A description corpus: everyday descriptions of words (what people type when a word escapes them), each with
the word it describes, as further training queries of DefSent/DefSent+'s entries (`description_examples`).

The file is a TSV with the header `description<TAB>word`, optionally followed by `pos` (n, v, a, r) and `style`
(how it was written: child, situation, feeling, clue, vague, plain, long). `everyday` names the corpus shipped with
dictembed (`corpus/descriptions.tsv`, made as its README says); `everyday-long` that corpus and one longer
description of each of its words (`corpus/long_descriptions.tsv`). A line with the wrong number of fields, an
empty description or word, or a bad header is a one-line DataFormatError naming the file and line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from dictembed.errors import DataFormatError
from dictembed.text_files import read_lines

log = logging.getLogger(__name__)

EVERYDAY = "everyday"
EVERYDAY_LONG = "everyday-long"
CORPUS = Path(__file__).parent / "corpus" / "descriptions.tsv"
LONG_CORPUS = Path(__file__).parent / "corpus" / "long_descriptions.tsv"
NAMED = {EVERYDAY: (CORPUS,), EVERYDAY_LONG: (CORPUS, LONG_CORPUS)}  # the shipped corpora by name, and their files
COLUMNS = ("description", "word", "pos", "style")


@dataclass(frozen=True)
class Description:
    """One description of `word` (its part of speech and writing style when the corpus gives them)."""

    text: str
    word: str
    pos: str | None = None
    style: str | None = None


def corpus_choice(spec: str) -> str:
    """A `--descriptions` value as a run keeps it: "" for none (`none`, any case, as the help shows the default),
    else `spec` as given."""
    return "" if spec.strip().lower() in ("", "none") else spec


def corpus_paths(spec: str | Path) -> tuple[Path, ...]:
    """The files `spec` names: those of a shipped corpus (`NAMED`) or one path."""
    return NAMED.get(str(spec)) or (Path(spec).expanduser(),)


def load_descriptions(spec: str | Path) -> list[Description]:
    """Every description of the corpus `spec` (a name of `NAMED` or a TSV path), in file order."""
    return [description for path in corpus_paths(spec) for description in read_corpus(path)]


def read_corpus(path: Path) -> list[Description]:
    """Every description of one corpus file, in file order."""
    lines = read_lines(path)
    header = lines[0].split("\t") if lines else []
    if tuple(header) not in (COLUMNS[:2], COLUMNS[:3], COLUMNS):
        raise DataFormatError(path, f"the header must be {'<TAB>'.join(COLUMNS)} (pos and style optional)", 1)
    descriptions = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("\t")]
        if len(fields) != len(header) or not fields[0] or not fields[1]:
            raise DataFormatError(
                path, f"expected {len(header)} tab-separated fields, a description and a word", number
            )
        extra = fields[2:] + [""] * (4 - len(fields))
        descriptions.append(Description(fields[0], fields[1], extra[0] or None, extra[1] or None))
    if not descriptions:
        raise DataFormatError(path, "no descriptions (only a header)")
    return descriptions
