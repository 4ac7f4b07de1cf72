"""WordNet 3.0 from the Princeton database files (`data.noun`, ...), and the WordNet-examples CSV."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dictembed import paths
from dictembed.dictionary.builder import DictionaryBuilder, clean_text, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.sources.table import load_table
from dictembed.errors import DataFormatError
from dictembed.io import read_lines

DATA_FILES = ("noun", "verb", "adj", "adv")
SYNSET_TYPES = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
ADJECTIVE_MARKER = re.compile(r"\((?:a|p|ip)\)$")
# Examples start at the first double quote that follows ';', ':', ',' or 'e.g.' (or opens the gloss).
EXAMPLES_START = re.compile(r'(?:^|[;:,]|\be\.g\.)\s*(?=")')
# Examples are separated by a semicolon or comma touching a quote: `"a"; "b"`, `"a", "b"`, `"a; "b"`.
EXAMPLE_SEPARATOR = re.compile(r'"\s*[;,]\s*"|"\s*;|;\s*"')
ATTRIBUTION = re.compile(r'"\s*-+[^"]*$')
DEFINITION_TAIL = re.compile(r"[\s;:,]*(?:\be\.g\.)?[\s;:,]*$")
EXAMPLES_CSV = Path("dictionaries") / "wordnet_examples" / "WordNet_lemmas.csv"


@dataclass
class Synset:
    """One parsed data line: offset, part of speech, lemma names and gloss parts."""

    offset: str
    pos: str
    lemmas: list[str]
    definition: str
    examples: list[str]


def lemma_name(word: str) -> str:
    """A data-file word as a headword: adjective marker `(a)`/`(p)`/`(ip)` removed, `_` -> space."""
    return ADJECTIVE_MARKER.sub("", word).replace("_", " ")


def _balanced(text: str) -> bool:
    return text.count("(") <= text.count(")")


def split_gloss(gloss: str) -> tuple[str, list[str]]:
    """Split a WordNet gloss into its definition and its quoted example sentences.

    Semicolons inside the definition stay in it; a quote inside parentheses (`(e.g., "x")`) belongs
    to the definition; author attributions after an example (`"..." -Shakespeare`) are dropped.
    """
    gloss = gloss.strip()
    for match in EXAMPLES_START.finditer(gloss):
        if _balanced(gloss[: match.start()]):
            break
    else:
        return gloss.rstrip("; "), []
    definition = DEFINITION_TAIL.sub("", gloss[: match.start()])
    examples = []
    for part in EXAMPLE_SEPARATOR.split(gloss[match.end() :]):
        example = clean_text(ATTRIBUTION.sub("", part.strip()).strip('"'))
        if example:
            examples.append(example)
    return definition, examples


def parse_data_line(line: str, path: Path, number: int) -> Synset:
    """Parse `offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptrs... [frames] | gloss`."""
    head, bar, gloss = line.partition(" | ")
    fields = head.split()
    if not bar or len(fields) < 5:
        raise DataFormatError(path, "not a WordNet data line (expected '... | gloss')", line=number)
    offset, _, ss_type, w_cnt = fields[:4]
    if not offset.isdigit() or ss_type not in SYNSET_TYPES:
        raise DataFormatError(path, f"bad synset offset {offset!r} or type {ss_type!r}", line=number)
    try:
        count = int(w_cnt, 16)
    except ValueError:
        raise DataFormatError(path, f"word count {w_cnt!r} is not hexadecimal", line=number) from None
    words = fields[4 : 4 + 2 * count : 2]
    if count < 1 or len(fields) < 5 + 2 * count or not fields[4 + 2 * count].isdigit():
        raise DataFormatError(path, f"expected {count} (word, lex_id) pairs then a pointer count", line=number)
    definition, examples = split_gloss(gloss)
    return Synset(offset, SYNSET_TYPES[ss_type], [lemma_name(w) for w in words], definition, examples)


def read_synsets(path: Path, encoding: str = "utf-8") -> list[Synset]:
    """Every synset of one `data.*` file (licence header lines, starting with two spaces, skipped)."""
    return [
        parse_data_line(line, path, number)
        for number, line in enumerate(read_lines(path, encoding), start=1)
        if line.strip() and not line.startswith("  ")
    ]


@without_gc
def load_wordnet(wordnet_dir: str | Path | None = None, lowercase: bool = False, encoding: str = "utf-8") -> Dictionary:
    """WordNet 3.0 as a dictionary: one entry per lemma, one sense per synset it belongs to.

    Headwords keep the data files' spelling (`Mercury` and `mercury` are two entries) unless
    `lowercase`, which merges them (a synset listed twice under one lowercased lemma counts once).
    Satellite adjectives get pos 'a'. The folder is `wordnet_dir`, else $WNSEARCHDIR, else Debian's.
    """
    folder = paths.wordnet_dir(wordnet_dir)
    builder = DictionaryBuilder("wordnet", unite_repeats=False)
    seen: set[tuple[str, str, str]] = set()
    for name in DATA_FILES:
        path = folder / f"data.{name}"
        if not path.exists():
            raise DataFormatError(path, "WordNet data file missing")
        for synset in read_synsets(path, encoding):
            for lemma in synset.lemmas:
                headword = lemma.lower() if lowercase else lemma
                key = (headword, synset.offset, name)
                if key in seen:
                    builder.report.repeated_definitions += 1
                    continue
                seen.add(key)
                builder.add(headword, synset.definition, synset.examples, synset.pos)
    return builder.build()


def load_wordnet_examples(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """The WordNet-examples CSV (`LEMMA,DEFINITION,EXAMPLE,POS`, one row per example; 's' -> 'a')."""
    dictionary = load_table(
        path or paths.data_dir() / EXAMPLES_CSV,
        headword="LEMMA",
        definition="DEFINITION",
        example="EXAMPLE",
        pos="POS",
        fmt="csv",
        name="wordnet-examples",
        encoding=encoding,
    )
    for entry in dictionary:
        for sense in entry.senses:
            sense.pos = SYNSET_TYPES.get(sense.pos or "", sense.pos)
    return dictionary
