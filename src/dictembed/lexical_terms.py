"""The lexical terms of a reverse-dictionary score (`search_options.Ranking`): what the words of a description say
about its best candidates, besides their vectors.

- **The description's own word**: a description seldom uses the word it describes ("a long-necked African animal"
  is not *animal*), so a candidate whose word the description uses (`StemSets.used`: the share of its tokens,
  stemmed, that the description holds) is lowered by `Ranking.query_word_weight` times that share, wherever it
  ranks: all of it for *animal*, half for *bull neck*.
- **Shared words**: a candidate whose definitions use the description's words (`shared_words`, stemmed) is raised
  by `Ranking.overlap_weight` per shared word. A word counts only where it is rare among the candidates ranked
  together (in at most `COMMON_SHARE` of their definitions), so that "the", "of" or a French "de" never count and
  no stop list is needed.

Both weights were fitted on the project's description corpus, none of whose words the benchmark's test split asks
for (`experiments/lexical_weights.py`). Tokens are runs of letters (`TOKEN`), case-folded, with an English
inflection (`-s`, `-es`, `-ed`, `-ing`) and a final `e` stripped (`stem`); a script written without spaces
(Chinese, Japanese) gives whole phrases as tokens, which seldom match: the terms then change little.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from dictembed.search_space import definition_rows, ranges_fit

if TYPE_CHECKING:
    from dictembed.entry_senses import EntrySenses

TOKEN = re.compile(r"[^\W\d_]+")
SUFFIXES = ("ing", "ed", "es", "s")  # stripped once, the longest that leaves a stem of at least `MIN_STEM` letters
MIN_STEM = 3
COMMON_SHARE = 0.5  # a word found in more than this share of the candidates' definitions is common: never shared
TOKEN_CACHE = 1 << 16  # tokens whose stems are kept at hand (a few MB)


@lru_cache(maxsize=TOKEN_CACHE)
def stem(token: str) -> str:
    """`token` without one English inflection (`SUFFIXES`; not the `s` of a word in `ss`) when at least `MIN_STEM`
    letters stay, then without a final `e`, so that a word and its inflections meet: "horse", "horses" -> "hors";
    "ride", "riding" -> "rid"; "glass", "glasses" -> "glass"; "bus" -> "bus"."""
    for suffix in SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= MIN_STEM and not token.endswith("ss"):
            token = token[: -len(suffix)]
            break
    return token[:-1] if token.endswith("e") and len(token) > MIN_STEM else token


def stems(text: str) -> frozenset[str]:
    """The stems (`stem`) of the case-folded letter runs of `text`."""
    return frozenset(stem(token) for token in TOKEN.findall(text.casefold()))


def stem_hash(word: str) -> int:
    """A stem's 64-bit key (BLAKE2b, the same in every process): among a dictionary's ~10^5 stems, two keys collide
    with a probability near 10^-9."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def query_stems(text: str) -> np.ndarray:
    """The keys (`stem_hash`) of the stems of a description `text`, sorted (uint64)."""
    return np.asarray(sorted({stem_hash(word) for word in stems(text)}), dtype=np.uint64)


@dataclass
class StemSets:
    """One set of stems per item (an entry's word, or all of an entry's definitions), as keys (`stem_hash`) in one
    array: item i's are `keys[starts[i]:starts[i + 1]]`, each once. Computed once per space (a search index stores
    them), so that a search compares a description's stems with a hundred candidates' in a few array operations."""

    starts: np.ndarray  # int64 [items + 1]
    keys: np.ndarray  # uint64

    @classmethod
    def of(cls, texts: Iterable[str]) -> StemSets:
        """The stems (`stems`) of each of `texts`."""
        known: dict[str, int] = {}
        starts, keys = [0], []
        for text in texts:
            for word in stems(text):
                key = known.get(word)
                keys.append(key if key is not None else known.setdefault(word, stem_hash(word)))
            starts.append(len(keys))
        return cls(np.asarray(starts, dtype=np.int64), np.asarray(keys, dtype=np.uint64))

    @classmethod
    def of_senses(cls, senses: EntrySenses) -> StemSets:
        """The stems of all of each entry's definitions (a line break between two, so no words run together)."""
        return cls.of("\n".join(text for text, _ in senses.senses(entry)) for entry in range(len(senses)))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def check(self, items: int) -> str | None:
        """What makes the arrays unfit for `items` items (a damaged index), or None."""
        starts = self.starts
        if starts.ndim != 1 or self.keys.ndim != 1 or len(starts) != items + 1:
            return "the stem sets do not fit the entries"
        if not ranges_fit(starts, len(self.keys)):
            return "the stem sets' ranges do not fit their keys"
        return None

    def _found(self, items: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For `items`, their keys one item after another, whether each is among the sorted `query` keys, and each
        item's number of keys."""
        items = np.asarray(items, dtype=np.int64)
        begin = np.asarray(self.starts[items])
        sizes = np.asarray(self.starts[items + 1]) - begin
        rows, _ = definition_rows(begin, sizes, np.arange(len(items)))
        keys = np.asarray(self.keys[rows])
        found = np.zeros(len(keys), dtype=bool)
        if len(query) and len(keys):
            found = query[np.minimum(np.searchsorted(query, keys), len(query) - 1)] == keys
        return keys, found, sizes

    def used(self, items: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Per item, the share of its stems that a description of stem keys `query` (`query_stems`) uses (float32):
        1 for a word it uses, ½ for a two-word phrase one of whose words it uses ("bull neck" for "a long-necked
        animal"), 0 for an item of no stem."""
        _, found, sizes = self._found(items, query)
        return (per_item(found, sizes) / np.maximum(sizes, 1)).astype(np.float32)

    def shared(self, items: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Per item, the number of the description's stems (keys `query`) it holds, counting only stems held by at
        most `COMMON_SHARE` of the `items` (float32)."""
        keys, found, sizes = self._found(items, query)
        which = np.searchsorted(query, keys[found])  # the query stem of each key found
        rare = np.bincount(which, minlength=len(query)) <= COMMON_SHARE * len(sizes)
        counted = np.zeros(len(keys), dtype=bool)
        counted[found] = rare[which]
        return per_item(counted, sizes).astype(np.float32)


def per_item(flags: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The number of set `flags` of each item, whose flags lie one item after another, `sizes` of them each."""
    running = np.concatenate([[0], np.cumsum(flags, dtype=np.int64)])
    ends = np.cumsum(sizes)
    return running[ends] - running[ends - sizes]
