"""Near-synonyms of an entry (`ReverseDictionary.neighbours`): the entries whose meaning is nearest to one of its own.

An entry's AMP vector is the mean of its definition vectors, so the vector of a word of many senses (*fall*) sits
between them and near none: the cosine of two entry vectors misses a synonym of one sense (*autumn*). The score of
a candidate entry c for the query entry e therefore mixes two cosines, as describe mode mixes its definition term
(`search_options.Ranking`):

    (cos(e's entry vector, c's entry vector) + w x max over e's senses i and c's senses j cos(d_i, d_j)) / (1 + w)

where a pair of senses whose parts of speech are known and differ counts `pos_penalty` less, and a candidate the
dictionary lists as similar to e (`Sense.similar`: WordNet's similar adjectives, *lovely* for *beautiful*) has a best
pair of at least `similar_pair`, as if it shared a sense (`SynonymScoring`); such candidates are always scored exactly.
A space without definition vectors (an MLM head, ICA, an older save) scores by the entry vectors' cosine alone, as
does `SynonymScoring(sense_weight=0)`, which scores every group exactly.

Two stages, as a description's search: every group is scored roughly, on the first `ROUGH_DIMS` principal
directions of the coarse index (`search_index.CoarseIndex`; a small space in full) and e's first `ROUGH_SENSES`
senses (a dictionary lists the most frequent first), then the `depth` best groups exactly, with all of e's senses
(where a filter allows at most `depth` groups, as an entry's antonyms, those alone exactly, without the first stage).
The rough stage reads every definition vector projected on those directions, made at the first call
(`SynonymSearch.rough_definitions`: 53 MB and about 1 s for WordNet's 206,978 definitions), or beforehand by
`SynonymSearch.prepare` (a server's start-up).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from dictembed.errors import DictEmbedError
from dictembed.search_index import EntryGroups, top_indices
from dictembed.search_options import POS_TAGS, normalize_pos
from dictembed.search_space import SearchSpace, as_float32, l2_normalize

if TYPE_CHECKING:
    from dictembed.entry_senses import EntrySenses
    from dictembed.entry_space import EntrySpace
    from dictembed.search_index import CoarseIndex, SearchIndex

# The defaults, chosen on the dev splits of experiments/near_synonyms.py (docs/results.md, "Near-synonyms")
SENSE_WEIGHT = 1.0  # w: x the cosine of the best pair of senses
POS_PENALTY = 0.2  # taken off a pair of senses of different parts of speech
SIMILAR_PAIR = 1.0  # the least best pair of a candidate the dictionary lists as similar (that of a shared sense)
SYNONYM_DEPTH = 200  # the groups of the best rough scores that are scored exactly
ROUGH_DIMS = 64  # principal directions of the rough stage
ROUGH_SENSES = 4  # the query's first senses that the rough stage pairs
CHUNK_ROWS = 16384  # definition rows projected at a time
NO_TAG = -1


@dataclass(frozen=True)
class SynonymScoring:
    """How `neighbours` scores a candidate (the module docstring): `sense_weight` w of the best pair of senses
    (0: the entry vectors' cosine alone, every group scored exactly), `pos_penalty` taken off a pair of senses of
    different parts of speech, the `depth` best groups of the rough stage scored exactly, and `similar_pair`, the
    least best pair of a candidate the dictionary lists as similar (0: none raised)."""

    sense_weight: float = SENSE_WEIGHT
    pos_penalty: float = POS_PENALTY
    depth: int = SYNONYM_DEPTH
    similar_pair: float = SIMILAR_PAIR

    def __post_init__(self) -> None:
        for name in ("sense_weight", "pos_penalty", "similar_pair"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
                raise DictEmbedError(f"{name}: a finite number >= 0, not {value!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise DictEmbedError(f"depth: a whole number >= 1, not {self.depth!r}")

    def mix(self, amp: np.ndarray, pair: np.ndarray) -> np.ndarray:
        """The scores of entry-vector cosines `amp` and best pairs of senses `pair`."""
        return mix(amp, pair, self.sense_weight)


def mix(amp: np.ndarray, pair: np.ndarray, weight: float) -> np.ndarray:
    """The score of the module docstring: (amp + weight x pair) / (1 + weight)."""
    return (amp + weight * pair) / (1 + weight)


def has_entry_vectors(space: SearchSpace | EntrySpace) -> bool:
    """Whether `space` has a vector per entry to find near-synonyms by (a matrix, or an MLM head's output rows)."""
    if isinstance(space, SearchSpace):
        return True
    from dictembed.entry_space import EntrySpace

    return type(space).vectors is not EntrySpace.vectors


def definition_tags(space: SearchSpace, senses: EntrySenses | None) -> np.ndarray | None:
    """The part of speech of each definition row of `space` (an index into `POS_TAGS`, `NO_TAG`: none), or None when
    the senses are not those the rows were made from (another dictionary's) or record no part of speech."""
    if senses is None or space.counts is None or not senses.has_pos:
        return None
    if not np.array_equal(np.diff(senses.starts), np.asarray(space.counts)):
        return None
    tag_of = [POS_TAGS.index(t) if (t := normalize_pos(name)) in POS_TAGS else NO_TAG for name in senses.pos_names]
    lookup = np.asarray([*tag_of, NO_TAG], dtype=np.int8)  # a sense without one (-1) reads the last
    return lookup[np.asarray(senses.pos)]


@dataclass
class Candidates:
    """The groups of one query's exact stage with the terms of their scores: `amp`, the entry vectors' cosine, and
    `cosine` [the candidates' definition rows, the query's senses], each candidate's rows from `starts`, `differ`
    marking the pairs whose parts of speech are known and differ (None: none known), `listed` the candidates the
    dictionary lists as similar to the query (None: none)."""

    groups: np.ndarray
    amp: np.ndarray
    cosine: np.ndarray
    starts: np.ndarray
    differ: np.ndarray | None = None
    listed: np.ndarray | None = None

    def pair(self, pos_penalty: float = 0.0, similar_pair: float = 0.0) -> np.ndarray:
        """Each candidate's best pair of senses, a pair of different parts of speech counting `pos_penalty` less, at
        least `similar_pair` for a candidate `listed`."""
        if not len(self.groups):
            return self.amp
        cosine = self.cosine if self.differ is None or pos_penalty == 0 else self.cosine - pos_penalty * self.differ
        best = np.maximum.reduceat(cosine.max(axis=1), self.starts)
        if self.listed is not None and similar_pair:
            best = np.where(self.listed, np.maximum(best, similar_pair), best)
        return best

    def best(self, scoring: SynonymScoring, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The `k` best candidates by `scoring`, best first (ties by group), and their scores."""
        scores = scoring.mix(self.amp, self.pair(scoring.pos_penalty, scoring.similar_pair))
        order = np.lexsort((self.groups, -scores))[:k]
        return self.groups[order], scores[order]


@dataclass
class SynonymSearch:
    """What `neighbours` reads of a space: its `groups`, and either each group's `unit` entry vector (a space without
    a matrix) or the matrix `space` with each group's inverse norm (`SearchIndex.inverse_norms`), its coarse index
    (None: a small space) and its definitions' parts of speech (`definition_tags`). What it derives from them is
    made once, when first needed."""

    groups: EntryGroups
    space: SearchSpace | None = None
    inverse_norms: np.ndarray | None = None
    coarse: CoarseIndex | None = None
    tags: np.ndarray | None = None
    unit: np.ndarray | None = None
    _rough: np.ndarray | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(
        cls,
        space: SearchSpace | EntrySpace,
        groups: EntryGroups,
        index: SearchIndex | None,
        senses: EntrySenses | None,
        unit: np.ndarray | None = None,
    ) -> SynonymSearch:
        """The search of `space`, grouped by `groups`: a matrix space with its `index` and entries' `senses` (None: not
        loaded), and each group's `unit` vector when already at hand; else the space's `vectors()`."""
        if not has_entry_vectors(space):
            raise DictEmbedError("the entry space has no entry vectors to find similar words")
        if not isinstance(space, SearchSpace):
            return cls(groups, unit=l2_normalize(np.asarray(space.vectors()[groups.first], dtype=np.float32)))
        index = cast("SearchIndex", index)
        return cls(groups, space, index.inverse_norms, index.coarse, definition_tags(space, senses), unit)

    @property
    def has_senses(self) -> bool:
        """Whether the space keeps the definition vectors to pair."""
        space = self.space
        return space is not None and space.definitions is not None and space.counts is not None

    def units(self, groups: np.ndarray | None = None) -> np.ndarray:
        """The unit entry vectors [groups, dim] (float32) of `groups`, or of every group (None: computed once)."""
        if groups is None:
            with self._lock:
                if self.unit is None:
                    self.unit = self._unit_rows(np.arange(len(self.groups)))
            return self.unit
        return self.unit[groups] if self.unit is not None else self._unit_rows(groups)

    def _unit_rows(self, groups: np.ndarray) -> np.ndarray:
        first, inverse = self.groups.first[groups], cast(np.ndarray, self.inverse_norms)[groups]
        return cast(SearchSpace, self.space).unit_rows(first, inverse)

    @property
    def projection(self) -> np.ndarray | None:
        """The rough stage's directions [dim, `ROUGH_DIMS`], or None: a small space, scored in full."""
        return None if self.coarse is None else self.coarse.projection[:, :ROUGH_DIMS]

    def rough_definitions(self) -> np.ndarray:
        """Every unit definition vector on the rough stage's directions [definitions, dims] (float32), made once."""
        with self._lock:
            if self._rough is None:
                definitions, projection = cast(np.ndarray, cast(SearchSpace, self.space).definitions), self.projection
                dims = definitions.shape[1] if projection is None else projection.shape[1]
                rough = np.empty((len(definitions), dims), dtype=np.float32)
                for start in range(0, len(definitions), CHUNK_ROWS):
                    rows = l2_normalize(np.asarray(definitions[start : start + CHUNK_ROWS], dtype=np.float32))
                    rough[start : start + CHUNK_ROWS] = rows if projection is None else rows @ projection
                self._rough = rough
            return self._rough

    def prepare(self, scoring: SynonymScoring | None = None) -> SynonymSearch:
        """Make now what the first `nearest` by `scoring` (default: `SynonymScoring()`) makes once: every group's
        unit vector where that scores them all, and the rough stage's definitions (`rough_definitions`). A server
        makes them at start-up, off the thread that runs its model (`serve_scheduling.prepare_synonyms`)."""
        scoring = scoring or SynonymScoring()
        senses = scoring.sense_weight != 0 and self.has_senses
        if not senses or self.projection is None:
            self.units()
        if senses:
            self.rough_definitions()
        return self

    def nearest(
        self,
        entry: int,
        group: int,
        allowed: np.ndarray | None,
        k: int,
        scoring: SynonymScoring,
        alone: bool,
        similar: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The `k` groups nearest to entry `entry` of group `group` by `scoring` among the `allowed` (None: every
        group, but its own when the entry is `alone` in it), best first, and their scores; `similar`: the groups the
        dictionary lists as similar to the entry (the entry vectors' cosine alone leaves them as they are)."""
        exclude = group if alone and allowed is None else None
        if scoring.sense_weight == 0 or not self.has_senses:
            unit = self.units()
            row = unit @ unit[group]
            top = top_indices(row, allowed, k + 1)
            top = top[top != exclude][:k]
            return top, row[top]
        depth = max(k, scoring.depth)
        found = self.candidates(entry, group, allowed, depth, exclude, scoring.sense_weight, similar)
        return found.best(scoring, k)

    def candidates(
        self,
        entry: int,
        group: int,
        allowed: np.ndarray | None,
        depth: int,
        exclude: int | None,
        weight: float,
        similar: np.ndarray | None = None,
    ) -> Candidates:
        """The `depth` groups of the best rough scores with sense weight `weight` among the `allowed`, but `exclude`,
        for entry `entry` of group `group`, and the `similar` groups among them, with the terms of their exact
        scores."""
        space = cast(SearchSpace, self.space)
        definitions = cast(np.ndarray, space.definitions)
        start = int(space.first_definitions[entry])
        end = start + int(cast(np.ndarray, space.counts)[entry])
        senses = l2_normalize(as_float32(definitions[start:end]))
        query = self.units(np.array([group]))[0]
        if allowed is not None and np.count_nonzero(allowed) <= depth:  # every one scored exactly: no rough stage
            picked = np.flatnonzero(allowed)
        else:
            rough = self._rough_scores(query, senses[:ROUGH_SENSES], weight)
            if exclude is not None:
                rough[exclude] = -np.inf
            picked = top_indices(rough, allowed, depth)
        listed = None
        if similar is not None and len(similar):
            similar = similar if allowed is None else similar[allowed[similar]]
            picked = np.union1d(picked, similar)
        picked = np.sort(picked[picked != exclude])
        if similar is not None and len(similar):
            listed = np.isin(picked, similar)
        rows, starts = space.definition_rows(self.groups.first[picked])
        cosine = l2_normalize(as_float32(definitions[rows])) @ senses.T
        differ = None
        if self.tags is not None:
            theirs, ours = self.tags[rows][:, None], self.tags[start:end][None, :]
            differ = (theirs != ours) & (theirs != NO_TAG) & (ours != NO_TAG)
        return Candidates(picked, self.units(picked) @ query, cosine, starts, differ, listed)

    def _rough_scores(self, query: np.ndarray, senses: np.ndarray, weight: float) -> np.ndarray:
        """Every group's rough score for the unit entry vector `query` and unit sense vectors `senses`."""
        space, projection = cast(SearchSpace, self.space), self.projection
        if projection is None:
            amp = self.units() @ query
        else:
            senses = senses @ projection
            amp = cast("CoarseIndex", self.coarse).vectors[:, :ROUGH_DIMS] @ (query @ projection)
        pairs = senses @ self.rough_definitions().T  # [senses, definitions]
        best = pairs.max(axis=0) if len(pairs) > 1 else pairs[0]
        return mix(amp, np.maximum.reduceat(best, space.first_definitions)[self.groups.first], weight)
