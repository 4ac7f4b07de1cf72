"""Each entry's antonyms as entries of its space: what near-synonym search (`EntryNeighbours.neighbours`) leaves
out of a word's results, as a thesaurus lists *cold* among the opposites of *hot*, never among its synonyms.

The antonyms are those the dictionary's senses record (`Sense.antonyms`: WordNet's, direct and indirect, or a
table's `antonym` column), united over an entry's senses; a word the space does not hold is passed over. They are
kept as arrays (`starts`, `entries`) that a saved search index maps with the entries' senses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dictembed.search_space import ranges_fit

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary


@dataclass(frozen=True)
class EntryAntonyms:
    """Entry i's antonyms are the entries `entries[starts[i]:starts[i + 1]]`, in the order its senses list them."""

    starts: np.ndarray  # int64 [entries + 1]
    entries: np.ndarray  # int32 [links]

    @classmethod
    def of(cls, words: Sequence[str], dictionary: Dictionary) -> EntryAntonyms | None:
        """The antonyms of `words` that `dictionary` records and `words` hold; None when it records none."""
        if not dictionary.has_antonyms():
            return None
        index = {word: i for i, word in enumerate(words)}
        starts, found = [0], list[int]()
        for word in words:
            senses = dictionary[word].senses if word in dictionary else []
            found.extend(dict.fromkeys(index[a] for s in senses for a in s.antonyms if a in index))
            starts.append(len(found))
        return cls(np.asarray(starts, dtype=np.int64), np.asarray(found, dtype=np.int32))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, entry: int) -> np.ndarray:
        """The antonyms of entry `entry` (entry indices)."""
        return self.entries[int(self.starts[entry]) : int(self.starts[entry + 1])]

    def check(self, entries: int) -> str | None:
        """What makes the arrays unfit for a space of `entries` entries (a damaged index), or None."""
        starts, found = self.starts, self.entries
        if starts.ndim != 1 or found.ndim != 1 or starts.dtype.kind not in "iu" or found.dtype.kind not in "iu":
            return "its antonyms are not lists of entries"
        if len(starts) != entries + 1 or not ranges_fit(starts, len(found)):
            return "its antonyms do not fit the space"
        if len(found) and not 0 <= int(found.min()) <= int(found.max()) < entries:
            return "its antonyms name entries the space does not hold"
        return None
