"""DefSent's vocabulary filter: keep the headwords the model's tokenizer spells as one token."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from dictembed.dictionary.builder import without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.vocab import word_token_ids

logger = logging.getLogger(__name__)


@dataclass
class FilterReport:
    """Headwords and definitions kept and dropped by `single_token_filter`."""

    kept_headwords: int = 0
    dropped_headwords: int = 0
    kept_definitions: int = 0
    dropped_definitions: int = 0

    def summary(self) -> str:
        return (
            f"single-token filter kept {self.kept_headwords} headwords "
            f"({self.kept_definitions} definitions), dropped {self.dropped_headwords} headwords "
            f"({self.dropped_definitions} definitions)"
        )


@without_gc
def single_token_filter(dictionary: Dictionary, tokenizer: Any) -> tuple[Dictionary, FilterReport]:
    """The entries whose headword is exactly one token of `tokenizer` (see `dictembed.vocab`)."""
    ids = word_token_ids(tokenizer, dictionary.headwords)
    report = FilterReport()
    kept = []
    for entry, token_id in zip(dictionary, ids, strict=True):
        if token_id is None:
            report.dropped_headwords += 1
            report.dropped_definitions += len(entry.senses)
        else:
            report.kept_headwords += 1
            report.kept_definitions += len(entry.senses)
            kept.append(entry.headword)
    logger.info("%s: %s", dictionary.name, report.summary())
    return dictionary.subset(kept), report
