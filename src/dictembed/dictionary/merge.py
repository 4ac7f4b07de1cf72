"""Merging dictionaries: one entry per headword and one sense per definition, space-blind; a headword joins another
dictionary's case variant of it, but a dictionary's own case distinctions (WordNet's *Polish* and *polish*) stay."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from dictembed.dictionary.builder import clean_text, without_gc
from dictembed.dictionary.core import Dictionary, Sense, united

logger = logging.getLogger(__name__)


def normalize_key(text: str) -> str:
    """The comparison key of a headword or definition: whitespace collapsed, case folded."""
    return clean_text(text).casefold()


@dataclass
class MergeReport:
    """Counts of a merge: entries and definitions in, entries out, duplicate definitions removed."""

    sources: int = 0
    entries_in: int = 0
    entries_out: int = 0
    definitions_in: int = 0
    duplicate_definitions: int = 0

    @property
    def definitions_out(self) -> int:
        return self.definitions_in - self.duplicate_definitions

    def summary(self) -> str:
        return (
            f"merged {self.sources} dictionaries: {self.entries_in} entries -> {self.entries_out}, "
            f"{self.definitions_in} definitions -> {self.definitions_out} "
            f"({self.duplicate_definitions} duplicate definitions removed)"
        )


def _unite(kept: Sense, duplicate: Sense) -> None:
    """Add the duplicate's new examples, antonyms and similar words (and its pos, when the kept sense has none) to
    `kept`."""
    kept.examples.extend(e for e in duplicate.examples if e not in kept.examples)
    kept.pos = kept.pos or duplicate.pos
    kept.antonyms = united(kept.antonyms, duplicate.antonyms)
    kept.similar = united(kept.similar, duplicate.similar)


@without_gc
def merge_dictionaries(dictionaries: Iterable[Dictionary], name: str | None = None) -> tuple[Dictionary, MergeReport]:
    """Merge dictionaries in order, deduplicating headwords and definitions.

    A headword joins the entry spelt as it is (whitespace-normalised: "bank " is "bank"), else the one entry an
    earlier dictionary spells in another case ("Giraffe" joins "giraffe"); the case variants one dictionary keeps
    apart ("Polish", "polish") stay apart, and a headword whose case-blind spelling matches several entries, none
    exactly, is its own. A definition repeated under one headword, case- and space-blind (`normalize_key`), keeps
    its first spelling and gains the duplicates' examples. The inputs are left unchanged.
    """
    dictionaries = list(dictionaries)
    report = MergeReport(sources=len(dictionaries))
    result = Dictionary(name=name or "+".join(d.name for d in dictionaries))
    variants: dict[str, dict[str, int]] = {}  # case-blind key -> the entries' spellings and their dictionary
    senses: dict[tuple[str, str], Sense] = {}
    for number, dictionary in enumerate(dictionaries):
        for entry in dictionary:
            report.entries_in += 1
            headword = clean_text(entry.headword)
            spellings = variants.setdefault(headword.casefold(), {})
            if headword not in spellings:
                others = [s for s, source in spellings.items() if source != number]
                if len(others) == 1 and len(spellings) == 1:
                    headword = others[0]
                else:
                    spellings[headword] = number
            for sense in entry.senses:
                report.definitions_in += 1
                key = (headword, normalize_key(sense.definition))
                if key in senses:
                    report.duplicate_definitions += 1
                    _unite(senses[key], sense)
                else:
                    senses[key] = result.add(
                        headword,
                        clean_text(sense.definition),
                        sense.examples,
                        sense.pos,
                        sense.antonyms,
                        sense.similar,
                    )
    report.entries_out = len(result)
    logger.info(report.summary())
    return result, report
