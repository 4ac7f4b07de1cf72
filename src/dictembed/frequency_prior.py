"""The word-frequency terms of a search's `Ranking` over the entries of a space, each computed once: every entry's
Zipf frequency (`word_frequency.entry_frequencies`), each group's prior and the candidate set."""

from __future__ import annotations

import logging
import threading

import numpy as np

from dictembed.errors import DictEmbedError
from dictembed.paths import cache_root
from dictembed.search_index import EntryGroups
from dictembed.search_options import Ranking
from dictembed.word_frequency import entry_frequencies

log = logging.getLogger(__name__)


class FrequencyPrior:
    """What `Ranking.frequency_weight` and `Ranking.min_frequency` make of the words of a space (`name` names the
    model in messages; `language` the frequencies' language, "auto" to detect it)."""

    def __init__(
        self, words: list[str], ranking: Ranking, language: str | None, name: str, frequencies: np.ndarray | None = None
    ) -> None:
        """`frequencies`: the entries' frequencies in `language` when already known (a stored search index)."""
        self.words, self.ranking, self.language, self.name = words, ranking, language, name
        self._lock = threading.RLock()
        self._frequencies: np.ndarray | None = frequencies
        self._frequencies_done = frequencies is not None
        self._prior: np.ndarray | None = None
        self._prior_done = False
        self._candidates: np.ndarray | None = None

    @property
    def frequencies(self) -> np.ndarray | None:
        """Each entry's Zipf frequency (cached on disk), or None when there are none."""
        with self._lock:
            if not self._frequencies_done:
                self._frequencies_done = True
                self._frequencies = entry_frequencies(self.words, self.language, cache_root())
            return self._frequencies

    def group_prior(self, groups: EntryGroups, entry_mask: np.ndarray | None = None) -> np.ndarray | None:
        """Per group, the prior of its most frequent word (`Ranking.frequency_weight` x its Zipf frequency), or
        None: no prior (weight 0, no frequencies). With `entry_mask` (a search's filters), of its most frequent word
        the mask keeps (0 for a group it keeps none of): a word filtered out lends its frequency to no result."""
        if entry_mask is not None:
            whole = self.group_prior(groups)
            if whole is None or (frequencies := self.frequencies) is None:
                return whole
            kept = np.where(entry_mask, frequencies, -np.inf)[groups.order]
            best = np.maximum.reduceat(kept, groups.starts)
            return (self.ranking.frequency_weight * np.where(np.isfinite(best), best, 0)).astype(np.float32)
        with self._lock:
            if not self._prior_done:
                self._prior_done = True
                weight = self.ranking.frequency_weight
                if weight > 0 and (frequencies := self.frequencies) is not None:
                    best = np.maximum.reduceat(frequencies[groups.order], groups.starts)
                    self._prior = (weight * best).astype(np.float32)
            return self._prior

    @property
    def candidates(self) -> np.ndarray | None:
        """The entries a search may list (`Ranking.min_frequency`), or None: every entry. A floor without word
        frequencies to apply it to is a one-line error, not every entry."""
        floor = self.ranking.min_frequency
        if floor is None:
            return None
        with self._lock:
            if self._candidates is None:
                frequencies = self.frequencies
                if frequencies is None:
                    raise DictEmbedError(
                        f"{self.name}: a minimum word frequency needs word frequencies for its headwords "
                        "(English or Chinese, and wordfreq installed)"
                    )
                self._candidates = frequencies >= floor
                kept, total = int(self._candidates.sum()), len(self.words)
                log.info("%s: %s of %s entries have a Zipf frequency of at least %g", self.name, kept, total, floor)
            return self._candidates
