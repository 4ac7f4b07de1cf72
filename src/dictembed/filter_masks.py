"""Which entries of a reverse dictionary pass a search's `Filters`: one boolean mask per entry space.

`FilterMasks` is the part of `ReverseDictionary` that turns `Filters` (part of speech, pattern, word count, length,
initial letters, pinyin initials, script) into a mask over the entries, each filter's mask computed once and cached,
and combined with the entries a search may list at all (`candidates`, the word-frequency prior's).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from dictembed.errors import DictEmbedError
from dictembed.search_options import Filters, word_test

if TYPE_CHECKING:
    from dictembed.entry_senses import EntrySenses
    from dictembed.entry_space import EntrySpace
    from dictembed.search_index import WordIndex
    from dictembed.search_space import SearchSpace

MAX_CACHED_MASKS = 256  # patterns are open-ended: keep the cache bounded


class FilterMasks:
    """Entry masks of `Filters`, for a class that sets the entry `space`, `dictionary_error`, the cache `_masks` and
    the `_lock` that guards it, and has the properties declared below (`ReverseDictionary`)."""

    space: SearchSpace | EntrySpace
    dictionary_error: str | None
    _masks: dict[tuple[str, str], np.ndarray]
    _lock: threading.RLock

    if TYPE_CHECKING:  # the host's

        @property
        def candidates(self) -> np.ndarray | None: ...
        @property
        def word_index(self) -> WordIndex: ...
        @property
        def senses(self) -> EntrySenses | None: ...
        @property
        def public_dictionary(self) -> str | None: ...

    def filter_mask(self, filters: Filters) -> None:
        """Compute (and cache) the entry masks of `filters` now: a server does it before taking the model, so that
        a pattern over every headword never holds up other queries."""
        self._entry_mask(filters)

    def _entry_mask(self, filters: Filters) -> np.ndarray | None:
        """Which entries pass `filters` and are `candidates` (None: all); each filter's mask is computed once and
        cached."""
        candidates = self.candidates
        if not filters.active:
            return candidates
        mask = np.ones(len(self.space), dtype=bool) if candidates is None else candidates.copy()
        for kind, value in (
            ("words", filters.words),
            ("pos", filters.pos),
            ("pattern", filters.pattern),
            ("pinyin", filters.pinyin),
            ("script", filters.script),
        ):
            if value is not None and value != "any":
                mask &= self._mask(kind, value)
        if filters.min_length is not None or filters.max_length is not None:
            mask &= self.word_index.of_length(filters.min_length, filters.max_length)
        if filters.initial is not None:
            mask &= self.word_index.starting_with(filters.initial)
        return mask

    def _mask(self, kind: str, value: str) -> np.ndarray:
        """The entries that pass one filter, `kind` (a field of `Filters`) being `value`; cached. Computed outside
        the lock, which every search takes: a pattern tested on every headword (seconds, for pinyin) holds up no
        other query."""
        with self._lock:
            cached = self._masks.get((kind, value))
        if cached is not None:
            return cached
        if kind == "pos":
            mask = self._pos_mask(value)
        else:
            mask = np.fromiter(map(word_test(kind, value), self.space.words), dtype=bool, count=len(self.space))
        with self._lock:
            if len(self._masks) > MAX_CACHED_MASKS:
                self._masks.clear()
            return self._masks.setdefault((kind, value), mask)

    def _pos_mask(self, tag: str) -> np.ndarray:
        """The entries with a sense of part of speech `tag` (`EntrySenses.with_pos`)."""
        senses = self.senses
        if senses is None:
            raise DictEmbedError(f"cannot filter by part of speech: {self.dictionary_error}")
        if not senses.has_pos:  # else: no results, no hint
            raise DictEmbedError(
                f"cannot filter by part of speech: the dictionary {self.public_dictionary!r} records none"
            )
        return senses.with_pos(tag)
