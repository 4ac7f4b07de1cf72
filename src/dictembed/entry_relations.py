"""Each entry's related entries in its space, as the dictionary's senses name them (`Sense.antonyms`,
`Sense.similar`: WordNet's, or a table's `antonym` and `similar` columns), united over an entry's senses; a word
the space does not hold is passed over (counted in the log). Near-synonym search (`EntryNeighbours.neighbours`)
leaves an entry's antonyms out, as a thesaurus lists *cold* among the opposites of *hot*, never among its
synonyms, and ranks its similar words as sharing a sense (*lovely*, *gorgeous* for *beautiful*, whose definitions
differ). They are kept as arrays (`starts`, `entries`) that a saved search index maps with the entries' senses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dictembed.search_space import ranges_fit

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EntryRelation:
    """Entry i's related entries are `entries[starts[i]:starts[i + 1]]`, in the order its senses list them."""

    starts: np.ndarray  # int64 [entries + 1]
    entries: np.ndarray  # int32 [links]

    @classmethod
    def of(
        cls, words: Sequence[str], dictionary: Dictionary, relation: str, index: Mapping[str, int] | None = None
    ) -> EntryRelation | None:
        """The words in `relation` (a field of `dictionary.core.RELATIONS`) to each of `words` that `dictionary`
        records and `words` hold (`index`: each word's place in `words`, when the caller has it); None when it
        records none."""
        if not dictionary.records(relation):
            return None
        index = index if index is not None else {word: i for i, word in enumerate(words)}
        starts, found, outside = [0], list[int](), set[str]()
        for word in words:
            senses = dictionary[word].senses if word in dictionary else []
            named = [w for s in senses for w in getattr(s, relation)]
            found.extend(dict.fromkeys(index[w] for w in named if w in index))
            outside.update(w for w in named if w not in index)
            starts.append(len(found))
        if outside:
            example = ", ".join(repr(w) for w in sorted(outside)[:3])
            log.info(
                "%s: %d words named as %s are no entry of the space (e.g. %s); passed over",
                dictionary.name,
                len(outside),
                relation,
                example,
            )
        return cls(np.asarray(starts, dtype=np.int64), np.asarray(found, dtype=np.int32))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, entry: int) -> np.ndarray:
        """The entries related to entry `entry` (entry indices)."""
        return self.entries[int(self.starts[entry]) : int(self.starts[entry + 1])]

    def check(self, entries: int) -> str | None:
        """What makes the arrays unfit for a space of `entries` entries (a damaged index), or None."""
        starts, found = self.starts, self.entries
        if starts.ndim != 1 or found.ndim != 1 or starts.dtype.kind not in "iu" or found.dtype.kind not in "iu":
            return "are not lists of entries"
        if len(starts) != entries + 1 or not ranges_fit(starts, len(found)):
            return "do not fit the space"
        if len(found) and not 0 <= int(found.min()) <= int(found.max()) < entries:
            return "name entries the space does not hold"
        return None
