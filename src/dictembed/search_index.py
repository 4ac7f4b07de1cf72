"""The indexes a reverse-dictionary search reads, each computed once per model: entries grouped by identical
vectors (`EntryGroups`), the k best of a score row (`top_indices`), a first search stage over a projection of the
entry vectors (`CoarseIndex`) and the words' lengths and case-folded prefixes (`WordIndex`)."""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from dictembed.search_options import word_length


@dataclass
class EntryGroups:
    """Entries grouped by identical vectors, once: group g holds `order[starts[g]:starts[g + 1]]`."""

    order: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, vectors: np.ndarray) -> EntryGroups:
        """Group the rows of `vectors` by a hash of their bytes (groups ordered by first occurrence)."""
        rows = np.ascontiguousarray(vectors)
        keys: dict[bytes, int] = {}
        group_of = np.fromiter(
            (keys.setdefault(hashlib.blake2b(row.tobytes(), digest_size=16).digest(), len(keys)) for row in rows),
            dtype=np.int64,
            count=len(rows),
        )
        order = np.argsort(group_of, kind="stable")
        return cls(order, np.searchsorted(group_of[order], np.arange(len(keys))))

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def first(self) -> np.ndarray:
        """One entry index per group (its first)."""
        return self.order[self.starts]

    def members(self, group: int) -> np.ndarray:
        end = self.starts[group + 1] if group + 1 < len(self.starts) else len(self.order)
        return self.order[self.starts[group] : end]

    def any(self, entry_mask: np.ndarray) -> np.ndarray:
        """Per group: whether any of its entries is set in `entry_mask`."""
        if not len(self.starts):
            return np.zeros(0, dtype=bool)
        return np.logical_or.reduceat(entry_mask[self.order], self.starts)


def top_indices(scores: np.ndarray, allowed: np.ndarray | None, k: int) -> np.ndarray:
    """The indices of the k highest `scores` among the `allowed`, best first (ties by index)."""
    values = scores[allowed] if allowed is not None else scores  # no copy of every score when unfiltered
    n = len(values)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    keep = np.argpartition(values, n - k)[n - k :] if k < n else np.arange(n)
    candidates = np.flatnonzero(allowed)[keep] if allowed is not None else keep
    return candidates[np.lexsort((candidates, -values[keep]))]


@dataclass
class CoarseIndex:
    """A first stage for a large space: the unit entry vectors projected on their first principal directions
    (of the uncentred second moment, which best keeps their dot products), so that scoring every group reads a
    third of the matrix; the best candidates are then scored exactly. Kept in numpy on the CPU: its BLAS runs
    this matrix-vector product about 3x faster than torch does (benchmarks/coarse_search.py)."""

    projection: np.ndarray  # [dim, dims]
    vectors: np.ndarray  # [groups, dims]

    @classmethod
    def of(cls, unit: torch.Tensor, dims: int) -> CoarseIndex:
        """The index of the rows of `unit` in `dims` dimensions."""
        moment = (unit.T.double() @ unit.double()).cpu()
        _, directions = torch.linalg.eigh(moment)  # ascending eigenvalues
        projection = directions[:, -dims:].flip(1).float().contiguous()
        return cls(projection.numpy(), (unit.float().cpu() @ projection).contiguous().numpy())

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Approximate dot products [queries, groups] of unit query vectors with every group."""
        projected = queries @ self.projection
        if len(projected) == 1:  # a matrix-vector product: the common case of one query
            return (self.vectors @ projected[0])[None]
        return projected @ self.vectors.T


@dataclass
class WordIndex:
    """What the length and initial filters and `neighbours` read of each entry, computed once: its length in
    letters (`word_length`), its group, and the case-folded words in sorted order for prefix look-ups."""

    lengths: np.ndarray  # int32, one per entry
    group_of: np.ndarray  # int64, one per entry
    folded: list[str]  # the case-folded words, sorted
    folded_order: np.ndarray  # the entry of each of `folded`
    by_folded: dict[str, int]  # a case-folded word -> its first entry

    @classmethod
    def of(cls, words: list[str], groups: EntryGroups) -> WordIndex:
        """The index of `words`, grouped by `groups`."""
        folded = [word.casefold() for word in words]
        order = np.asarray(sorted(range(len(words)), key=folded.__getitem__), dtype=np.int64)
        group_of = np.zeros(len(words), dtype=np.int64)
        sizes = np.diff(np.append(groups.starts, len(groups.order)))
        group_of[groups.order] = np.repeat(np.arange(len(groups)), sizes)
        by_folded = dict(zip(reversed(folded), range(len(words) - 1, -1, -1), strict=True))  # the first one wins
        counted = (len(word) if word.isalnum() else word_length(word) for word in words)
        lengths = np.fromiter(counted, dtype=np.int32, count=len(words))
        return cls(lengths, group_of, [folded[i] for i in order], order, by_folded)

    def of_length(self, low: int | None, high: int | None) -> np.ndarray:
        """Entry mask of the words with `low` to `high` letters (None: no bound)."""
        mask = self.lengths >= (low or 0)
        if high is not None:
            mask &= self.lengths <= high
        return mask

    def starting_with(self, prefix: str) -> np.ndarray:
        """Entry mask of the words that start with `prefix` (case-insensitive): two binary searches, no scan."""
        low = prefix.casefold()
        mask = np.zeros(len(self.lengths), dtype=bool)
        if not low:
            return ~mask
        start = bisect.bisect_left(self.folded, low)  # the matches follow one another from here
        if ord(low[-1]) < 0x10FFFF:
            end = bisect.bisect_left(self.folded, low[:-1] + chr(ord(low[-1]) + 1), start)
        else:  # no character sorts after the last one: walk the matches
            end = start
            while end < len(self.folded) and self.folded[end].startswith(low):
                end += 1
        mask[self.folded_order[start:end]] = True
        return mask
