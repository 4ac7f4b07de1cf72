"""Merging dictionaries: one entry per headword and one sense per definition, case- and space-blind."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from dictembed.dictionary.builder import clean_text, without_gc
from dictembed.dictionary.core import Dictionary, Sense

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
    """Add the duplicate's new examples (and its pos, when the kept sense has none) to `kept`."""
    kept.examples.extend(e for e in duplicate.examples if e not in kept.examples)
    kept.pos = kept.pos or duplicate.pos


@without_gc
def merge_dictionaries(dictionaries: Iterable[Dictionary], name: str | None = None) -> tuple[Dictionary, MergeReport]:
    """Merge dictionaries in order, deduplicating headwords and definitions by `normalize_key`.

    "Bank" and "bank " are one entry, spelled as first seen (whitespace-normalised); a definition
    repeated under one headword keeps its first spelling and gains the duplicates' examples.
    The inputs are left unchanged.
    """
    dictionaries = list(dictionaries)
    report = MergeReport(sources=len(dictionaries))
    result = Dictionary(name=name or "+".join(d.name for d in dictionaries))
    spelling: dict[str, str] = {}
    senses: dict[tuple[str, str], Sense] = {}
    for dictionary in dictionaries:
        for entry in dictionary:
            report.entries_in += 1
            head_key = normalize_key(entry.headword)
            headword = spelling.setdefault(head_key, clean_text(entry.headword))
            for sense in entry.senses:
                report.definitions_in += 1
                key = (head_key, normalize_key(sense.definition))
                if key in senses:
                    report.duplicate_definitions += 1
                    _unite(senses[key], sense)
                else:
                    senses[key] = result.add(headword, clean_text(sense.definition), sense.examples, sense.pos)
    report.entries_out = len(result)
    logger.info(report.summary())
    return result, report
