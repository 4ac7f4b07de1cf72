"""Near-synonyms of an entry of a reverse dictionary: a word given instead of a description (search mode `similar`).

`EntryNeighbours` is the part of `ReverseDictionary` that finds the entry a query names (`entry_of`), decides
whether a query is searched as an entry or as a description (`similar_entry`), and lists the entry's near-synonyms
(`neighbours`) as scored by `near_synonyms.SynonymSearch`, with the filters and results of `search`.
"""

from __future__ import annotations

import threading
import unicodedata
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from dictembed.errors import DictEmbedError
from dictembed.near_synonyms import SYNONYM_DEPTH, SynonymScoring, SynonymSearch, has_entry_vectors
from dictembed.query_encoder import QueryEncoder, search_threads
from dictembed.search_options import SEARCH_MODES, Filters, check_search
from dictembed.search_space import SearchSpace, as_float32, l2_normalize

if TYPE_CHECKING:
    from dictembed.entry_senses import EntrySenses
    from dictembed.entry_space import EntrySpace
    from dictembed.reverse_dictionary import Result
    from dictembed.search_index import EntryGroups, SearchIndex, WordIndex


class SimilarWords(NamedTuple):
    """What mode similar answers: an entry's near-synonyms, and the nearest of the antonyms they leave out."""

    results: list[Result]
    opposites: list[str]


class EntryNeighbours:
    """Near-synonym search, for a class that sets the query `encoder`, the entry `space`, its `name`, every group's
    unit vector `_unit` (or None), the cache `_synonyms` and the `_lock` that guards it, and has the members declared
    below (`ReverseDictionary`)."""

    encoder: QueryEncoder
    space: SearchSpace | EntrySpace
    name: str
    _unit: np.ndarray | None
    _synonyms: SynonymSearch | None
    _lock: threading.RLock

    if TYPE_CHECKING:  # the host's

        @property
        def groups(self) -> EntryGroups: ...
        @property
        def index(self) -> SearchIndex | None: ...
        @property
        def senses(self) -> EntrySenses | None: ...
        @property
        def word_index(self) -> WordIndex: ...
        def _entry_mask(self, filters: Filters) -> np.ndarray | None: ...
        def _result(
            self,
            group: int,
            score: float,
            mask: np.ndarray | None,
            max_definitions: int | None,
            pos: str | None = None,
            cosines: dict[int, np.ndarray] | None = None,
        ) -> Result: ...
        def _sense_cosines(self, groups: np.ndarray, query: np.ndarray) -> dict[int, np.ndarray]: ...

    @property
    def has_entry_vectors(self) -> bool:
        """Whether the space has a vector per entry for `neighbours` (`near_synonyms.has_entry_vectors`)."""
        return has_entry_vectors(self.space)

    def entry_of(self, query: str) -> str | None:
        """The entry `query` names, exactly or else case-insensitively (the first such entry), or None."""
        if not isinstance(query, str):
            raise DictEmbedError(f"a word is a string, not {type(query).__name__}")
        text = unicodedata.normalize("NFC", query.strip())  # the dictionary's words are NFC (`clean_text`)
        if text in self.space.index:
            return text
        found = self.word_index.by_folded.get(text.casefold())
        return None if found is None else self.space.words[found]

    def similar_entry(self, query: str, mode: str = "auto") -> str | None:
        """The entry whose near-synonyms answer `query` in search `mode`, or None to search it as a description:
        `describe` never looks it up, `similar` needs an entry (an error otherwise), and `auto` takes the entry
        when the query is one and the space has entry vectors."""
        if mode not in SEARCH_MODES:
            raise DictEmbedError(f"unknown mode {mode!r}; choose from {', '.join(SEARCH_MODES)}")
        if mode == "describe":
            return None
        entry = self.entry_of(query)
        if mode == "similar" and entry is None:
            raise DictEmbedError(f"{query.strip()[:100]!r} is not an entry of this model; mode similar needs one")
        return entry if mode == "similar" or self.has_entry_vectors else None

    @property
    def synonym_search(self) -> SynonymSearch:
        """What `neighbours` reads (`near_synonyms.SynonymSearch`), made once."""
        groups = self.groups
        with self._lock:
            if self._synonyms is None:
                try:
                    self._synonyms = SynonymSearch.of(self.space, groups, self.index, self.senses, self._unit)
                except DictEmbedError as err:
                    raise DictEmbedError(f"{self.name}: {err}") from None
            return self._synonyms

    @property
    def synonym_score_kind(self) -> str:
        """What the default `neighbours` score is: cosine+senses (mixed with the best pair of senses), or cosine."""
        return "cosine+senses" if self.synonym_search.has_senses else "cosine"

    def neighbours(
        self,
        word: str,
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        scoring: SynonymScoring | None = None,
        **options: Any,
    ) -> list[Result]:
        """The k results nearest to the entry `word` (see `entry_of`) by `scoring` (`near_synonyms`: the cosine of the
        entry vectors mixed with that of the best pair of senses; `SynonymScoring(sense_weight=0)`: the first alone),
        best first: its near-synonyms, the word itself and the antonyms the dictionary records left out (the other
        words of its own group come first), the words it lists as similar ranked as sharing a sense. The filters are
        those of `search` (`filters=` or keywords); each result's senses begin with the one nearest a sense of `word`
        (`_entry_sense_cosines`), then come in dictionary order."""
        if scoring is not None and not isinstance(scoring, SynonymScoring):
            raise DictEmbedError(f"scoring: a near_synonyms.SynonymScoring, not {type(scoring).__name__}")
        filters = Filters.resolve(filters, options)
        check_search(k, max_definitions)
        if (entry := self.entry_of(word)) is None:
            raise DictEmbedError(f"{word.strip()[:100]!r} is not an entry of this model")
        search, entry_mask, index = self.synonym_search, self._entry_mask(filters), self.space.index[entry]
        mask = np.ones(len(self.space), dtype=bool) if entry_mask is None else entry_mask.copy()
        mask[index] = False
        opposites, close = self.opposites(index), self.related(index, "similar")
        mask[opposites] = False
        group_of = self.word_index.group_of
        group = int(group_of[index])
        filtered = entry_mask is not None or len(opposites) > 0
        allowed = self.groups.any(mask) if filtered else None  # else no pass over the groups
        alone = len(self.groups.members(group)) == 1  # unfiltered, its group drops out
        similar = np.unique(group_of[close])
        with search_threads(self.encoder):
            top, scores = search.nearest(index, group, allowed, k, scoring or SynonymScoring(), alone, similar)
            cosines = self._entry_sense_cosines(top, index) if max_definitions != 0 else None
        results = zip(top, scores, strict=True)
        return [self._result(int(g), s, mask, max_definitions, filters.pos, cosines) for g, s in results]

    def antonyms(self, word: str, k: int | None = None, filters: Filters | None = None, **options: Any) -> list[str]:
        """The antonyms the dictionary records for the entry `word` (see `entry_of`), which `neighbours` leaves out
        (`opposites`), among those that pass the filters of `search` (`filters=` or keywords): every one in the
        dictionary's order (WordNet: its senses most frequent first, each sense's direct antonym before its
        satellites), or, given `k`, the dictionary's first (*unhappy* for *happy*) and the `k` - 1 others nearest to
        `word`, scored as `neighbours` scores but every one exactly, best first (WordNet records 44 for *happy*,
        whose nearest are the opposites of its sense "marked by good fortune": *doomed*, *unlucky*); empty for a
        dictionary that records none."""
        if (entry := self.entry_of(word)) is None:
            raise DictEmbedError(f"{word.strip()[:100]!r} is not an entry of this model")
        filters = Filters.resolve(filters, options)
        if k is not None:
            check_search(k, None)
        index = self.space.index[entry]
        found = self.opposites(index)
        if len(found) and (entry_mask := self._entry_mask(filters)) is not None:
            found = found[entry_mask[found]]
        if k is None or not len(found):
            return [self.space.words[int(i)] for i in found]
        group_of = self.word_index.group_of
        allowed = np.zeros(len(self.groups), dtype=bool)
        allowed[group_of[found]] = True
        similar = np.unique(group_of[self.related(index, "similar")])  # as `neighbours` scores them
        every = SynonymScoring(depth=max(SYNONYM_DEPTH, int(np.count_nonzero(allowed))))  # all exactly: no rough pass
        with search_threads(self.encoder):
            top, _ = self.synonym_search.nearest(index, int(group_of[index]), allowed, k, every, False, similar)
        rank = {int(g): r for r, g in enumerate(top)}
        # by their group's rank, a group's in the dictionary's order
        ranked = sorted((rank[int(group_of[i])], n) for n, i in enumerate(found) if int(group_of[i]) in rank)
        return [self.space.words[int(found[n])] for n in [0, *(n for _, n in ranked if n)][:k]]

    def similar_words(
        self, word: str, k: int = 10, filters: Filters | None = None, max_definitions: int | None = 10
    ) -> SimilarWords:
        """`neighbours` of the entry `word` and `k` of the antonyms they leave out (`antonyms`), both by `filters`:
        what mode similar answers."""
        return SimilarWords(self.neighbours(word, k, filters, max_definitions), self.antonyms(word, k, filters))

    def opposites(self, entry: int) -> np.ndarray:
        """The antonyms of entry `entry` that `neighbours` leaves out: those the dictionary records but for the
        words it also lists as similar (WordNet lists *anthropoid* both ways for *human*, in two senses), in
        the dictionary's order."""
        antonyms = self.related(entry, "antonyms")
        close = self.related(entry, "similar")
        return antonyms[~np.isin(antonyms, close)] if len(close) and len(antonyms) else antonyms

    def related(self, entry: int, relation: str) -> np.ndarray:
        """The entries the dictionary records in `relation` (`antonyms` or `similar`, `entry_relations`) to entry
        `entry`; empty when it records none."""
        senses = self.senses
        found = None if senses is None else getattr(senses, relation)
        return np.zeros(0, dtype=np.int32) if found is None else found[entry]

    def _entry_sense_cosines(self, groups: np.ndarray, entry: int) -> dict[int, np.ndarray]:
        """Per entry of `groups`, the best cosine of each of its definition vectors to one of entry `entry`'s: the
        sense a near-synonym shares with the word (*fall* for *autumn*: the season, not the descent); empty for a
        space that keeps no definition vectors."""
        space = self.space
        if not isinstance(space, SearchSpace) or space.definitions is None or not len(groups):
            return {}
        rows, _ = space.definition_rows(np.array([entry]))
        if not len(rows):
            return {}
        return self._sense_cosines(groups, l2_normalize(as_float32(space.definitions[rows])))  # one product
