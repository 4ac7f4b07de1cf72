"""The terms of a reverse-dictionary search's score beyond its first cosine (`search_options.Ranking`), over a
search's best groups: the best single definition, the word itself (its headword vector), and the lexical terms of
the description's text (`lexical_terms`).

`RankingTerms` is the part of `ReverseDictionary` that reorders the best groups by the full score (`_rerank`) and
names the terms in use (`score_kind`); `best_cosines` is the per-group best cosine both vector terms take.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from dictembed.lexical_terms import StemSets, query_stems
from dictembed.search_options import LEXICAL_DEPTH, SECOND_FLOOR, Ranking
from dictembed.search_space import SearchSpace, as_float32, definition_rows, row_norms

if TYPE_CHECKING:
    from dictembed.entry_space import EntrySpace
    from dictembed.search_index import EntryGroups
    from dictembed.second_dictionary import SecondDefinitions


def best_cosines(
    vectors: np.ndarray, rows: np.ndarray, starts: np.ndarray, query: np.ndarray, keep: np.ndarray | None = None
) -> np.ndarray:
    """Per run of `rows` (each starting at an index of `starts`): the best cosine of the unit `query` to the
    `vectors` of its rows that `keep` (None: all) lets count; a zero or non-finite vector counts as none, and a run
    with none scores -1."""
    chosen = as_float32(vectors[rows])
    cosine = np.nan_to_num(chosen @ query / row_norms(chosen), nan=-np.inf)
    if keep is not None:
        cosine[~keep] = -np.inf
    best = np.fmax.reduceat(cosine, starts)
    return np.where(np.isfinite(best), best, -1.0)


class RankingTerms:
    """The `Ranking` terms of a search, for a class that sets the entry `space` and the `ranking`, and has the
    properties declared below (`ReverseDictionary`)."""

    space: SearchSpace | EntrySpace
    ranking: Ranking

    if TYPE_CHECKING:  # the host's

        @property
        def groups(self) -> EntryGroups: ...
        @property
        def group_prior(self) -> np.ndarray | None: ...
        @property
        def word_stems(self) -> StemSets: ...
        @property
        def definition_stems(self) -> StemSets | None: ...

    @property
    def score_kind(self) -> str:
        """`cosine` for spaces with an entry matrix, `+definition` when the best single definition reranks
        (`reranks`), `+headword` the word itself, `+second` a second dictionary's definitions, `+words` the lexical
        terms (`reranks_by_words`), `+frequency` with the word-frequency prior (`group_prior`); else `probability`
        (softmax of the model's logits)."""
        if not isinstance(self.space, SearchSpace):
            return "probability"
        kind = "cosine" + "+definition" * self.reranks_by_definition + "+headword" * self.reranks_by_headword
        kind += "+second" * self.reranks_by_second
        return kind + "+words" * self.reranks_by_words + "+frequency" * (self.group_prior is not None)

    @property
    def reranks(self) -> bool:
        """Whether searches rerank their best results (`Ranking`): by definition, by headword, by the
        description's words, or several."""
        return self.reranks_by_definition or self.reranks_by_headword or self.reranks_by_second or self.reranks_by_words

    @property
    def reranks_by_words(self) -> bool:
        """Whether searches of a description rerank by its words (`lexical_terms`): a matrix space, and a query-word
        or an overlap weight above 0 (the overlap counts only with the dictionary's definitions at hand)."""
        ranking = self.ranking
        return isinstance(self.space, SearchSpace) and (ranking.query_word_weight > 0 or ranking.overlap_weight > 0)

    @property
    def reranks_by_definition(self) -> bool:
        """Whether searches rerank by the best single definition: a definition space that keeps its definition
        vectors, and a definition weight above 0."""
        space = self.space
        has = isinstance(space, SearchSpace) and space.definitions is not None and space.counts is not None
        return has and self.ranking.definition_weight > 0

    @property
    def reranks_by_headword(self) -> bool:
        """Whether searches rerank by the cosine to the word itself: a space that keeps its headword vectors, and
        a headword weight above 0."""
        space = self.space
        return isinstance(space, SearchSpace) and space.headwords is not None and self.ranking.headword_weight > 0

    @property
    def reranks_by_second(self) -> bool:
        """Whether searches rerank by a second dictionary's definitions: a space that keeps them
        (`second_dictionary`), and a second-dictionary weight above 0."""
        space = self.space
        return isinstance(space, SearchSpace) and space.second is not None and self.ranking.second_dictionary_weight > 0

    def _second_term(self, top: np.ndarray, query: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Per group of `top`: the second-dictionary weight times the best cosine of the unit `query` to a second
        dictionary's definition of one of its words that the entry `mask` (None: all) keeps, less `SECOND_FLOOR`,
        floored at 0 (0 for a group none of whose words it defines)."""
        second = cast("SecondDefinitions", cast(SearchSpace, self.space).second)
        members, starts = self.groups.members_of(top)
        counts = second.counts[members]
        if mask is not None:
            counts = np.where(mask[members], counts, 0)
        best = np.full(len(members), -1.0, dtype=np.float32)
        defined = np.flatnonzero(counts)
        if len(defined):
            rows, begins = definition_rows(second.first, second.counts, members[defined])
            best[defined] = best_cosines(second.definitions, rows, begins, query)
        gain = np.maximum(np.maximum.reduceat(best, starts) - SECOND_FLOOR, 0)
        return np.float32(self.ranking.second_dictionary_weight) * gain

    def _rerank(
        self,
        h: np.ndarray,
        top: np.ndarray,
        scores: np.ndarray,
        mask: np.ndarray | None = None,
        text: str | None = None,
        *,
        prior: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The groups `top` (scored `scores` by `_group_scores`, with the word-frequency `prior` in them) in the order
        of the full `Ranking` score, which mixes in the cosine of the query vector `h` to each group's best single
        definition and adds that to the vector of its best word among those the entry `mask` (None: all) keeps, then
        the lexical terms of the description `text` (None: none; `_word_terms`), and their scores."""
        space = cast(SearchSpace, self.space)
        query = h / np.linalg.norm(h)
        combined = scores
        if self.reranks_by_definition:
            rows, starts = space.definition_rows(self.groups.first[top])
            best = best_cosines(cast(np.ndarray, space.definitions), rows, starts, query)
            prior_top = prior[top] if prior is not None else np.float32(0)
            weight = self.ranking.definition_weight
            combined = (scores - prior_top + weight * best) / (1 + weight) + prior_top
        if self.reranks_by_headword:
            groups = self.groups
            members, starts = groups.members_of(top)
            keep = mask[members] if mask is not None else None
            best = best_cosines(cast(np.ndarray, space.headwords), members, starts, query, keep)
            combined = combined + self.ranking.headword_weight * best
        if self.reranks_by_second:
            combined = combined + self._second_term(top, query, mask)
        order = np.lexsort((top, -combined))
        top, combined = top[order], combined[order]
        if text is not None and self.reranks_by_words:
            combined = combined + self._word_terms(text, top, mask)
            order = np.lexsort((top, -combined))
            top, combined = top[order], combined[order]
        return top, combined

    def _word_terms(self, text: str, top: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """Per group of `top` (best first), the lexical terms of its score for the description `text` (`Ranking`,
        `lexical_terms`): minus the query-word weight times the largest share of one of its words (among those that
        `mask`, None: all, keeps) that the description uses, and, for the `LEXICAL_DEPTH` best, plus the overlap
        weight per word it shares with the group's definitions."""
        query, ranking, groups = query_stems(text), self.ranking, self.groups
        terms = np.zeros(len(top), dtype=np.float32)
        if ranking.query_word_weight > 0:
            members, starts = groups.members_of(top)
            used = self.word_stems.used(members, query)
            if mask is not None:
                used *= mask[members]
            terms -= np.float32(ranking.query_word_weight) * np.maximum.reduceat(used, starts)
        if ranking.overlap_weight > 0 and (definitions := self.definition_stems) is not None:
            shared = definitions.shared(groups.first[top[:LEXICAL_DEPTH]], query)
            terms[: len(shared)] += np.float32(ranking.overlap_weight) * shared
        return terms
