"""Reverse dictionary: rank the entries of a saved entry space for a definition (definition -> words).

Two views of one model:
- `predict` and `ranks` score every entry with the model's own logits (the training objective), one row per
  entry; the evaluation uses them (`model_scores.ModelScores`).
- `search` and `search_many` are for people. Entries whose vectors are identical (WordNet synonyms that share
  all their definitions, e.g. `transitory`, `fugacious`, `short-lived`) come back as ONE `Result` listing
  all their words. Results can be filtered by part of speech, by a pattern, by word count, by length in
  letters, by initial letters and by pinyin initials (Chinese), given as `Filters` or as the keywords that
  `predict` and the API take (`rd.search(q, length=6)`: `Filters.of`; the entry masks: `filter_masks`), and carry
  each word's definitions from the dictionary the model was trained on, the sense that matched the query first
  (`_best_sense`).
- `neighbours` lists an entry's near-synonyms, itself left out, scored by `near_synonyms`
  (`entry_neighbours.EntryNeighbours`).

The `score` of a `Result`, for the matrix spaces of DefSent+ (and the word-embedding fallback), is the cosine
similarity of the query's vector and the entry vector, mixed with the cosine to the entry's best single
definition and a word-frequency prior as `Ranking` says (`ranking_terms.RankingTerms`; `score_kind` names the
terms in use); without them it ranks exactly as the model's cosine logits (the `best` preset). A space without an
entry matrix (DefSent's MLM head) scores by the model's softmax probability instead.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dictembed.device_choices import check_precision
from dictembed.dictionary.core import Dictionary
from dictembed.entry_neighbours import EntryNeighbours
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DictEmbedError
from dictembed.filter_masks import FilterMasks
from dictembed.folder_search import check_has_space, folder_ranking, opened_space, space_index
from dictembed.frequency_prior import FrequencyPrior
from dictembed.lexical_terms import StemSets
from dictembed.model_folder import ModelDictionary, ModelFolder
from dictembed.model_scores import ModelScores
from dictembed.near_synonyms import SynonymSearch
from dictembed.query_encoder import (
    QueryEncoder,
    as_rows,
    batch_invariant,
    check_readable,
    checked_rows,
    exported_query_encoder,
    on_onnx_runtime,
    search_threads,
)
from dictembed.ranking_terms import RankingTerms
from dictembed.result_dictionary import ResultDictionary
from dictembed.search_index import EntryGroups, SearchIndex, WordIndex, top_indices
from dictembed.search_options import (
    Filters,
    Ranking,
    RankingChoice,
    SearchMode,
    check_queries,
    check_search,
    normalize_pos,
    query_list,
    ranking_over,
)
from dictembed.search_space import SearchSpace, l2_normalize
from dictembed.texts import check_batch_size, check_texts, text_list
from dictembed.word_frequency import check_language

if TYPE_CHECKING:
    import torch

    from dictembed.entry_space import EntrySpace

# A large matrix space is searched in two stages (`search_index.CoarseIndex`): every group by a projection of the
# unit entry vectors on their first principal directions, then the COARSE_CANDIDATES best exactly.
COARSE_CANDIDATES = 1000

log = logging.getLogger(__name__)


@dataclass
class Result:
    """One search result: the words of entries with identical vectors, their score and definitions.

    `definitions[word]` and `pos[word]` are parallel lists (a definition's part of speech may be None)."""

    words: list[str]
    score: float
    definitions: dict[str, list[str]] = field(default_factory=dict)
    pos: dict[str, list[str | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"words": self.words, "score": round(self.score, 6), "definitions": self.definitions, "pos": self.pos}


class ReverseDictionary(ModelScores, FilterMasks, EntryNeighbours, RankingTerms, ResultDictionary):
    """An encoder and the entry space it was trained against, with the dictionary behind it for `search`.

    A matrix space is searched in numpy (`SearchSpace`: mapped from a saved folder, or a view of a space in memory,
    with its `SearchIndex`); an MLM head's space scores with torch. `dictionary` is a loaded `Dictionary`, or what
    `load_dictionary` takes (a `ModelDictionary`, or a spec such as "wordnet" or a .tsv path), loaded once on first
    use; when it cannot be loaded, results come without definitions (logged once). The model's own scores
    (`ModelScores`), the filters' entry masks (`FilterMasks`) and near-synonyms (`EntryNeighbours`) are mixed in."""

    def __init__(
        self,
        encoder: QueryEncoder,
        space: EntrySpace | SearchSpace,
        dictionary: Dictionary | ModelDictionary | str | None = None,
        name: str | None = None,
        ranking: Ranking | None = None,
        language: str | None = "auto",
        index: SearchIndex | None = None,
    ) -> None:
        check_language(language)
        self.encoder = encoder
        self.ranking, self.language = ranking or Ranking(), language
        self._logit_space: EntrySpace | None = None
        if not isinstance(space, SearchSpace):
            self._logit_space = space.freeze()
            matrix = getattr(space, "matrix", None)
            space = SearchSpace.of(space) if matrix is not None else space  # type: ignore[arg-type]
        self.space: SearchSpace | EntrySpace = space
        self.name = name or "model"
        if isinstance(space, SearchSpace) and space.dim != encoder.dim:
            raise DictEmbedError(
                f"{self.name}: the entry vectors have {space.dim} dimensions, the encoder's {encoder.dim}; the "
                "entry space does not belong to this encoder"
            )
        stored = index.frequencies if index is not None and language == "auto" else None
        self.prior = FrequencyPrior(self.space.words, self.ranking, language, self.name, stored)
        if isinstance(dictionary, str):
            dictionary = ModelDictionary(dictionary)
        self._dictionary = dictionary if isinstance(dictionary, Dictionary) else None
        self.source = dictionary if isinstance(dictionary, ModelDictionary) else None
        self.dictionary_spec = self._dictionary.name if self._dictionary else self.source.spec if self.source else None
        self.dictionary_error: str | None = None if dictionary is not None else "the model names no dictionary"
        self._dictionary_tried = dictionary is None or self._dictionary is not None
        self._lock = threading.RLock()
        self._index = index
        self._groups: EntryGroups | None = None
        self._unit: np.ndarray | None = None  # every group's unit vector, for a space searched without a coarse stage
        self._senses: EntrySenses | None = index.senses if index is not None else None
        self._word_stems: StemSets | None = None
        self._definition_stems: StemSets | None = None
        self._masks: dict[tuple[str, str], np.ndarray] = {}
        self._word_index: WordIndex | None = None
        self._synonyms: SynonymSearch | None = None

    @classmethod
    def load(
        cls,
        path: str | Path | ModelFolder,
        device: str | torch.device | None = None,
        precision: str | None = "fp32",
        ranking: RankingChoice = None,
        language: str | None = "auto",
        dictionary: str | None = None,
    ) -> ReverseDictionary:
        """A saved model folder (or hub name), its record read once (`ModelFolder`); its dictionary
        (`ModelFolder.dictionary`: the given `dictionary`, else the folder's own definitions, else a public one its
        record names) is loaded on first use. `device` ("auto"/None: CUDA, else MPS, else CPU) and the compute
        `precision` (auto, fp32, bf16, fp16) are the encoder's (`Encoder.set_precision`); `ranking` weighs the
        score: a whole `Ranking`, or some of its settings by name set over the folder's own (its record's
        `ranking`, else the tuned defaults; `search_options.ranking_over`); `language` names the word-frequency
        prior's language (`dictembed.word_frequency`).

        A matrix space is memory-mapped with its stored `SearchIndex` (built and cached for a folder without one);
        an exported folder queries through ONNX Runtime alone (`OnnxQueryEncoder`), so torch is never imported."""
        if not isinstance(path, str | Path | ModelFolder):
            raise DictEmbedError(f"ReverseDictionary.load: a model folder or a Hub name, not {type(path).__name__}")
        if isinstance(device, (bool, int, float)):  # 0 would pass as "auto"
            raise DictEmbedError(f"device: a name such as 'cpu', 'cuda:0' or 'auto', not {device!r}")
        check_language(language)
        check_precision(precision)
        ranking_over({}, ranking)  # the settings given, checked before anything opens
        folder = ModelFolder.open(path)
        chosen = folder_ranking(folder, ranking)
        check_has_space(folder)  # first: without one (a GR-BERT folder), no dictionary helps
        source = folder.dictionary(dictionary)  # before the model: a folder naming a file elsewhere is refused
        space = opened_space(folder)  # checked before the encoder, whose load may take seconds (torch)
        encoder = exported_query_encoder(folder, device, precision)
        if encoder is None:
            from dictembed.devices import loader_device
            from dictembed.encoder import Encoder

            encoder = cast(QueryEncoder, Encoder.load(folder, device=loader_device(device)).set_precision(precision))
        index = space_index(folder, space, source)  # built only for a folder without one, once its encoder loaded
        return cls(encoder, space, dictionary=source, name=folder.name, ranking=chosen, language=language, index=index)

    # ------------------------------------------------------------------ search, for people
    @property
    def index(self) -> SearchIndex | None:
        """The search index of a matrix space (built on first use for a space in memory); None for an MLM head."""
        with self._lock:
            if self._index is None and isinstance(self.space, SearchSpace):  # the prior reads the frequencies
                self._index = SearchIndex.build(self.space, with_frequencies=False, with_stems=False)
            return self._index

    @property
    def groups(self) -> EntryGroups:
        """The entries grouped by identical vectors, computed once."""
        index = self.index
        with self._lock:
            if self._groups is None:
                if index is not None:
                    self._groups = index.groups
                    if index.coarse is None:  # scored exactly: every group's unit vector at hand
                        self._unit = index.unit(cast(SearchSpace, self.space))
                else:  # logits are not a function of one vector per entry: every entry is its own group
                    self._groups = EntryGroups.of(np.arange(len(self.space))[:, None])
            return self._groups

    @property
    def word_index(self) -> WordIndex:
        """Each entry's length, group and case-folded form (`WordIndex`), computed once."""
        groups = self.groups
        with self._lock:
            if self._word_index is None:
                self._word_index = WordIndex.of(self.space.words, groups)
            return self._word_index

    def prepare(self) -> ReverseDictionary:
        """Group the entries and load the senses now rather than on the first search; beside an encoder on ONNX
        Runtime, score the coarse stage there too (`CoarseIndex.run_on_onnx_runtime`: for a server, whose batches
        of queries it scores in half the time)."""
        _ = self.groups, self.senses, self.word_index, self.group_prior, self.candidates
        if self.reranks_by_words:
            _ = self.word_stems, self.definition_stems
        index = self.index
        if index is not None and index.coarse is not None and on_onnx_runtime(self.encoder):
            from dictembed.backends.onnx.session import physical_cores

            index.coarse.run_on_onnx_runtime(physical_cores())
        return self

    @property
    def group_prior(self) -> np.ndarray | None:
        """Per group, the word-frequency prior (`FrequencyPrior.group_prior`), or None: none, or a space scored by
        probability."""
        groups = self.groups
        return self.prior.group_prior(groups) if isinstance(self.space, SearchSpace) else None

    @property
    def candidates(self) -> np.ndarray | None:
        """The entries a search may list (`FrequencyPrior.candidates`), or None: every entry."""
        return self.prior.candidates

    def _search_prior(self, mask: np.ndarray | None) -> np.ndarray | None:
        """The word-frequency prior per group for a search whose filters keep the entries of `mask` (None: all): of
        each group's most frequent word the filters keep (`FrequencyPrior.group_prior`)."""
        prior = self.group_prior
        if prior is None or mask is None:
            return prior
        return self.prior.group_prior(self.groups, mask)

    def _group_scores(self, h: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
        """Scores [batch, n_groups] of pooled vectors: cosine (plus the word-frequency `prior`, `_search_prior`), or
        softmax probability (see `score_kind`)."""
        groups = self.groups
        if self._unit is not None:
            cosine = l2_normalize(h) @ self._unit.T
            return cosine if prior is None else cosine + prior
        return self._logits(h).softmax(-1).cpu().numpy()[:, groups.first]

    def _best_groups(
        self, h: np.ndarray, allowed: np.ndarray | None, n: int, prior: np.ndarray | None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per pooled vector of `h`: its `n` best groups among the `allowed` by `_group_scores` (with the
        word-frequency `prior`), best first (ties by group), and their scores. A `CoarseIndex` picks
        `COARSE_CANDIDATES` groups first (2n for an n past that) and only those are scored exactly: the scores
        are exact, the choice nearly so (benchmarks/coarse_search.py). Filters that allow no more groups than that
        make every allowed group a candidate, with no first stage."""
        index = self.index
        if index is None or index.coarse is None:
            for row in self._group_scores(h, prior):
                top = top_indices(row, allowed, n)
                yield top, row[top]
            return
        space, first = cast(SearchSpace, self.space), self.groups.first
        width = COARSE_CANDIDATES if n <= COARSE_CANDIDATES else 2 * n  # past the first stage's size: a margin too
        queries = l2_normalize(h)
        every = np.flatnonzero(allowed) if allowed is not None else None
        few = every is not None and len(every) <= width
        rough_rows = itertools.repeat(None, len(queries)) if few else index.coarse.scores(queries)
        for query, rough in zip(queries, rough_rows, strict=True):
            if rough is None:
                candidates = cast(np.ndarray, every)
            else:
                candidates = top_indices(rough if prior is None else rough + prior, allowed, width)
            exact = space.unit_cosines(first[candidates], index.inverse_norms[candidates], query)
            if prior is not None:
                exact = exact + prior[candidates]
            order = np.lexsort((candidates, -exact))[:n]
            yield candidates[order], exact[order]

    @staticmethod
    def _best_sense(cosine: np.ndarray | None, senses: list[tuple[str, str | None]], tag: str | None) -> int:
        """Which of an entry's `senses` (dictionary order) matched the query: the one of the best `cosine` of its
        definition vector to it (among those of part of speech `tag`, when it has any), or -1: no cosines (a space
        that keeps no definition vectors: an MLM head, ICA, an older save) or not as many as the entry has senses
        (another dictionary's definitions are shown)."""
        if cosine is None or len(cosine) != len(senses) or len(senses) < 2:
            return -1
        if tag is not None:
            kept = np.array([normalize_pos(p) == tag for _, p in senses])
            cosine = np.where(kept, cosine, -np.inf) if kept.any() else cosine
        return int(np.argmax(cosine))

    def _sense_cosines(self, groups: np.ndarray, query: np.ndarray) -> dict[int, np.ndarray]:
        """Per entry of `groups`, the cosines of its definition vectors to the pooled `query` (rows of them: the best
        of each), from one product (`SearchSpace.definition_cosines`); empty for a space that keeps none."""
        space = self.space
        if not isinstance(space, SearchSpace) or not len(groups):
            return {}
        entries, _ = self.groups.members_of(groups)
        cosines = space.definition_cosines(entries, query)
        return {} if cosines is None else dict(zip(entries.tolist(), cosines, strict=True))

    def _result(
        self,
        group: int,
        score: float,
        mask: np.ndarray | None,
        max_definitions: int | None,
        pos: str | None = None,
        cosines: dict[int, np.ndarray] | None = None,
    ) -> Result:
        """The result of one group: its words that pass `mask`, each with up to `max_definitions` senses: the one
        that matched the query first (by its entry's definition `cosines`, `_sense_cosines`, when given), then the
        others in dictionary order, those of part of speech `pos` (when given) first."""
        members = [int(i) for i in self.groups.members(group) if mask is None or mask[i]]
        result = Result([self.space.words[i] for i in members], float(score))
        senses_of = self.senses
        tag = normalize_pos(pos) or None
        if senses_of is not None:
            for i in members:
                if senses_of.holds(i):
                    senses = senses_of.senses(i)
                    order = list(range(len(senses)))
                    if tag is not None:
                        order.sort(key=lambda j: normalize_pos(senses[j][1]) != tag)  # stable
                    if (
                        cosines is not None
                        and max_definitions != 0
                        and (best := self._best_sense(cosines.get(i), senses, tag)) >= 0
                    ):
                        order.remove(best)
                        order.insert(0, best)
                    senses = [senses[j] for j in order[:max_definitions]]
                    word = self.space.words[i]
                    result.definitions[word] = [definition for definition, _ in senses]
                    result.pos[word] = [normalize_pos(p) for _, p in senses]
        return result

    def search_many(
        self,
        queries: list[str],
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        batch_size: int = 64,
        **options: Any,
    ) -> list[list[Result]]:
        """The k best results for each query (see `search`), encoding the queries in batches: one query a batch
        with an encoder whose vectors depend on their batch (`batch_invariant`), so that each query gets what it
        gets alone; searched `batch_size` at a time either way."""
        filters = Filters.resolve(filters, options)
        check_search(k, max_definitions)
        queries = query_list(queries, "search_many")
        batch_size = check_batch_size(batch_size)
        check_queries(queries)
        check_readable(self.encoder, queries)
        encode_batch = batch_size if batch_invariant(self.encoder) else 1
        out: list[list[Result]] = []
        for h in self._pooled(list(queries), batch_size, encode_batch):
            out += self.search_vectors(h, k, filters, max_definitions, queries[len(out) : len(out) + len(h)])
        return out

    def search_vectors(
        self,
        vectors: Any,
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        texts: list[str] | None = None,
        **options: Any,
    ) -> list[list[Result]]:
        """The k best results for each pooled query vector (a row of `vectors`, an array or tensor, as the encoder
        pools a description), among the words that pass `filters` (see `search`); `texts`, the descriptions the
        vectors encode, add the lexical terms of the score (`Ranking`; None: vectors alone)."""
        filters = Filters.resolve(filters, options)
        check_search(k, max_definitions)
        vectors = as_rows(vectors)
        if texts is not None:
            texts = text_list(texts, "texts")
            check_texts(texts, "text")
        if texts is not None and len(texts) != len(vectors):
            raise DictEmbedError(f"{len(texts)} texts for {len(vectors)} query vectors")
        cosine = isinstance(self.space, SearchSpace)
        vectors = checked_rows(vectors, cast(SearchSpace, self.space).dim if cosine else None, unit=cosine)
        mask = self._entry_mask(filters)
        allowed = self.groups.any(mask) if mask is not None else None
        prior = self._search_prior(mask)
        reranks, depth = self.reranks, max(k, self.ranking.depth)
        out = []
        with search_threads(self.encoder):
            for i, (vector, (top, scores)) in enumerate(
                zip(vectors, self._best_groups(vectors, allowed, depth if reranks else k, prior), strict=True)
            ):
                if reranks and len(top):
                    text = None if texts is None else texts[i]
                    top, scores = self._rerank(vector, top, scores, mask, text, prior=prior)
                cosines = self._sense_cosines(top[:k], vector) if max_definitions != 0 else None
                results = zip(top[:k], scores[:k], strict=True)
                out.append(
                    [self._result(int(g), score, mask, max_definitions, filters.pos, cosines) for g, score in results]
                )
        return out

    def search(
        self,
        query: str,
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        mode: SearchMode = "describe",
        **options: Any,
    ) -> list[Result]:
        """The k best results for a description, best first. Entries with identical vectors are one result.

        `filters` (`search_options.Filters`: part of speech, pattern, word count, length, initial letters, pinyin
        initials, script), or the same as keywords by the names `predict` and the API take (`pos`, `pattern`,
        `words`, `length`, `min_length`, `max_length`, `initial`, `pinyin`, `script`: `Filters.of`), keep the
        words that pass all of them; a result lists only its passing words, and a result with none is dropped.
        Each word carries up to `max_definitions` definitions: the sense whose definition vector is nearest the
        query first (in a space that keeps them), then the dictionary's sense order, those of the filter's part of
        speech (when given) first. `mode`, as `predict --mode` and the API take it: describe (the query is a
        description), similar (the query is an entry: its near-synonyms, `neighbours`), auto (similar where the
        query is an entry: `similar_entry`). Only filter keywords are taken, whichever way `mode` answers."""
        filters = Filters.resolve(filters, options)
        entry = self.similar_entry(query, mode)
        if entry is not None:
            return self.neighbours(entry, k, filters, max_definitions)
        return self.search_many([query], k, filters, max_definitions)[0]
