"""Reverse dictionary: rank the entries of a saved entry space for a definition (definition -> words).

Two views of one model:
- `predict` and `ranks` score every entry with the model's own logits (the training objective), one row per
  entry; the evaluation uses them.
- `search` and `search_many` are for people. Entries whose vectors are identical (WordNet synonyms that share
  all their definitions, e.g. `transitory`, `fugacious`, `short-lived`) come back as ONE `Result` listing
  all their words. Results can be filtered by part of speech, by a pattern, by word count, by length in
  letters, by initial letters and by pinyin initials (Chinese), given as `Filters` or as the keywords that
  `predict` and the API take (`rd.search(q, length=6)`: `Filters.of`), and carry each word's definitions from the
  dictionary the model was trained on, the sense that matched the query first (`_best_sense`).
- `neighbours` lists an entry's near-synonyms, itself left out, scored by `near_synonyms`.

The `score` of a `Result`, for the matrix spaces of DefSent+ (and the word-embedding fallback), is the cosine
similarity of the query's vector and the entry vector, mixed with the cosine to the entry's best single
definition and a word-frequency prior as `Ranking` says (`score_kind` names the terms in use); without them it
ranks exactly as the model's cosine logits (the `best` preset). A space without an entry matrix (DefSent's MLM
head) scores by the model's softmax probability instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.split import seeded_sample
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DictEmbedError
from dictembed.frequency_prior import FrequencyPrior
from dictembed.model_folder import ModelDictionary, ModelFolder
from dictembed.near_synonyms import SynonymScoring, SynonymSearch, has_entry_vectors
from dictembed.paths import public_name
from dictembed.query_encoder import QueryEncoder, as_rows, exported_query_encoder, search_threads
from dictembed.search_index import EntryGroups, SearchIndex, WordIndex, folder_search_index, top_indices
from dictembed.search_options import SEARCH_MODES, Filters, Ranking, normalize_pos, word_test
from dictembed.search_space import MATRIX_SPACES, SearchSpace, l2_normalize

if TYPE_CHECKING:
    import torch

    from dictembed.entry_space import EntrySpace

CHUNK = 1024  # queries encoded (length-sorted) and scored at a time
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


def saved_space(folder: ModelFolder, source: ModelDictionary) -> tuple[EntrySpace | SearchSpace, SearchIndex | None]:
    """A folder's saved entry space: a matrix space memory-mapped with its `SearchIndex` (built and cached for a
    folder without one), else the torch space (an MLM head)."""
    if SearchSpace.saved_type(folder.path) in MATRIX_SPACES:
        space = SearchSpace.open(folder.path)
        return space, folder_search_index(folder, space, source)
    from dictembed.entry_space import EntrySpace

    return EntrySpace.load(folder.path), None


class ReverseDictionary:
    """An encoder and the entry space it was trained against, with the dictionary behind it for `search`.

    A matrix space is searched in numpy (`SearchSpace`: mapped from a saved folder, or a view of a space in memory,
    with its `SearchIndex`); an MLM head's space scores with torch. `dictionary` is a loaded `Dictionary`, or what
    `load_dictionary` takes (a `ModelDictionary`, or a spec such as "wordnet" or a .tsv path), loaded once on first
    use; when it cannot be loaded, results come without definitions (logged once)."""

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
        self._masks: dict[tuple[str, str], np.ndarray] = {}
        self._word_index: WordIndex | None = None
        self._synonyms: SynonymSearch | None = None

    @classmethod
    def load(
        cls,
        path: str | Path | ModelFolder,
        device: str | torch.device | None = None,
        precision: str | None = "fp32",
        ranking: Ranking | None = None,
        language: str | None = "auto",
        dictionary: str | None = None,
    ) -> ReverseDictionary:
        """A saved model folder (or hub name), its record read once (`ModelFolder`); its dictionary
        (`ModelFolder.dictionary`: the given `dictionary`, else the folder's own definitions, else a public one its
        record names) is loaded on first use. `device` ("auto"/None: CUDA, else MPS, else CPU) and the compute
        `precision` (auto, fp32, bf16, fp16) are the encoder's (`Encoder.set_precision`); `ranking` weighs the
        score (`Ranking`, default: the tuned weights) and `language` names the word-frequency prior's language
        (`dictembed.word_frequency`).

        A matrix space is memory-mapped with its stored `SearchIndex` (built and cached for a folder without one);
        an exported folder queries through ONNX Runtime alone (`OnnxQueryEncoder`), so torch is never imported."""
        folder = ModelFolder.open(path)
        source = folder.dictionary(dictionary)  # before the model: a folder naming a file elsewhere is refused
        space, index = saved_space(folder, source)
        encoder = exported_query_encoder(folder, device, precision)
        if encoder is None:
            from dictembed.devices import loader_device
            from dictembed.encoder import Encoder

            encoder = cast(QueryEncoder, Encoder.load(folder, device=loader_device(device)).set_precision(precision))
        return cls(encoder, space, dictionary=source, name=folder.name, ranking=ranking, language=language, index=index)

    # ------------------------------------------------------------------ the model's own scores
    @property
    def logit_space(self) -> EntrySpace:
        """The torch entry space whose logits are the model's own scores (made from the arrays on first use)."""
        with self._lock:
            if self._logit_space is None:
                from dictembed.entry_space import matrix_space

                self._logit_space = matrix_space(cast(SearchSpace, self.space)).freeze()
            return self._logit_space

    def _pooled(self, texts: list[str], batch_size: int) -> Iterator[np.ndarray]:
        """The pooled float32 vectors of `texts`, `batch_size` rows at a time, in order (encoded `CHUNK` at a time as
        length-sorted batches; scored a batch at a time, as scores span every entry)."""
        for vectors in self.encoder.embed(texts, batch_size, show_progress=False, chunk=CHUNK):
            rows = as_rows(vectors)
            for start in range(0, len(rows), batch_size):
                yield rows[start : start + batch_size]

    def _logits(self, h: np.ndarray) -> torch.Tensor:
        """The model's own logits [batch, n_entries] (float32, on the encoder's device) of pooled vectors `h`."""
        import torch

        device = self.encoder.device
        with torch.no_grad():
            return self.logit_space.to(device)(torch.from_numpy(h).to(device)).float()

    def scores(self, definitions: list[str], batch_size: int = 64) -> np.ndarray:
        """Entry scores [n_definitions, n_entries] (unnormalised logits)."""
        out = [self._logits(h).cpu().numpy() for h in self._pooled(definitions, batch_size)]
        return np.concatenate(out) if out else np.zeros((0, len(self.space)), dtype=np.float32)

    def predict(self, definition: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The top-k entries for one definition with their softmax probabilities."""
        logits = self.scores([definition])[0].astype(np.float64)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        top = top_indices(probs, None, min(top_k, len(probs)))
        return [(self.space.words[i], float(probs[i])) for i in top]

    def ranks(self, dictionary: Dictionary, limit: int | None = None, seed: int = 0) -> np.ndarray:
        """1-based rank of the gold entry for each definition of `dictionary` whose headword is an entry."""
        from dictembed.evaluation.ranking import ranks_from_scores

        pairs = seeded_sample([(w, d) for w, d in dictionary.pairs() if w in self.space.index], limit, seed)
        ranks = [np.zeros(0)]
        for start in range(0, len(pairs), 512):  # 512 rows of scores over every entry at a time
            chunk = pairs[start : start + 512]
            gold = np.array([self.space.index[w] for w, _ in chunk])
            ranks.append(ranks_from_scores(self.scores([d for _, d in chunk]), gold))
        return np.concatenate(ranks)

    # ------------------------------------------------------------------ search, for people
    @property
    def score_kind(self) -> str:
        """`cosine` for spaces with an entry matrix, `+definition` when the best single definition reranks
        (`reranks`), `+frequency` with the word-frequency prior (`group_prior`); else `probability` (softmax of
        the model's logits)."""
        if not isinstance(self.space, SearchSpace):
            return "probability"
        return "cosine" + "+definition" * self.reranks + "+frequency" * (self.group_prior is not None)

    @property
    def reranks(self) -> bool:
        """Whether searches rerank by the best single definition (`Ranking`): a definition space that keeps its
        definition vectors, and a definition weight above 0."""
        space = self.space
        has = isinstance(space, SearchSpace) and space.definitions is not None and space.counts is not None
        return has and self.ranking.definition_weight > 0

    @property
    def index(self) -> SearchIndex | None:
        """The search index of a matrix space (built on first use for a space in memory); None for an MLM head."""
        with self._lock:
            if self._index is None and isinstance(self.space, SearchSpace):  # the prior reads the frequencies
                self._index = SearchIndex.build(self.space, with_frequencies=False)
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
    def dictionary(self) -> Dictionary | None:
        """The model's dictionary, loaded on first use; None (and `dictionary_error` set) if it cannot be."""
        with self._lock:
            if not self._dictionary_tried:
                self._dictionary_tried = True
                try:
                    self._dictionary = cast(ModelDictionary, self.source).load()
                except Exception as err:  # best effort: results simply come without definitions
                    self.dictionary_error = f"cannot load dictionary {self.public_dictionary!r}"
                    spec = self.dictionary_spec
                    log.warning("cannot load dictionary %r: %s; results come without definitions", spec, err)
            return self._dictionary

    @property
    def senses(self) -> EntrySenses | None:
        """Each entry's senses (`EntrySenses`): from the stored index, else from the dictionary (loaded on first
        use); None when the dictionary cannot be loaded."""
        with self._lock:
            if self._senses is None and (dictionary := self.dictionary) is not None:
                self._senses = EntrySenses.of(self.space.words, dictionary)
            return self._senses

    @property
    def has_definitions(self) -> bool:
        """Whether results carry definitions."""
        return self.senses is not None

    @property
    def public_dictionary(self) -> str | None:
        """The dictionary's name as a server may show it (`paths.public_name`)."""
        return public_name(self.dictionary_spec) if self.dictionary_spec else self.dictionary_spec

    @property
    def word_index(self) -> WordIndex:
        """Each entry's length, group and case-folded form (`WordIndex`), computed once."""
        groups = self.groups
        with self._lock:
            if self._word_index is None:
                self._word_index = WordIndex.of(self.space.words, groups)
            return self._word_index

    def filter_mask(self, filters: Filters) -> None:
        """Compute (and cache) the entry masks of `filters` now: a server does it before taking the model, so that
        a pattern over every headword never holds up other queries."""
        self._entry_mask(filters)

    def prepare(self) -> ReverseDictionary:
        """Group the entries and load the senses now rather than on the first search."""
        _ = self.groups, self.senses, self.word_index, self.group_prior, self.candidates
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

    def _group_scores(self, h: np.ndarray) -> np.ndarray:
        """Scores [batch, n_groups] of pooled vectors: cosine (plus the word-frequency prior, `group_prior`), or
        softmax probability (see `score_kind`)."""
        groups = self.groups
        if self._unit is not None:
            cosine = l2_normalize(h) @ self._unit.T
            prior = self.group_prior
            return cosine if prior is None else cosine + prior
        return self._logits(h).softmax(-1).cpu().numpy()[:, groups.first]

    def _best_groups(
        self, h: np.ndarray, allowed: np.ndarray | None, n: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per pooled vector of `h`: its `n` best groups among the `allowed` by `_group_scores`, best first (ties
        by group), and their scores. A `CoarseIndex` picks `COARSE_CANDIDATES` groups first and only those are
        scored exactly: the scores are exact, the choice nearly so (benchmarks/coarse_search.py)."""
        index = self.index
        if index is None or index.coarse is None:
            for row in self._group_scores(h):
                top = top_indices(row, allowed, n)
                yield top, row[top]
            return
        space, prior, first = cast(SearchSpace, self.space), self.group_prior, self.groups.first
        queries = l2_normalize(h)
        for query, rough in zip(queries, index.coarse.scores(queries), strict=True):
            candidates = top_indices(rough if prior is None else rough + prior, allowed, max(n, COARSE_CANDIDATES))
            exact = space.unit_rows(first[candidates], index.inverse_norms[candidates]) @ query
            if prior is not None:
                exact = exact + prior[candidates]
            order = np.lexsort((candidates, -exact))[:n]
            yield candidates[order], exact[order]

    def _rerank(self, h: np.ndarray, top: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The groups `top` (scored `scores` by `_group_scores`) in the order of the full `Ranking` score, which
        mixes in the cosine of the query vector `h` to each group's best single definition, and their scores."""
        space = cast(SearchSpace, self.space)
        rows, starts = space.definition_rows(self.groups.first[top])
        definitions = np.asarray(cast(np.ndarray, space.definitions)[rows], dtype=np.float32)
        cosine = definitions @ (h / np.linalg.norm(h)) / np.linalg.norm(definitions, axis=1)
        best = np.nan_to_num(np.maximum.reduceat(cosine, starts), nan=-1.0)
        prior = self.group_prior
        prior_top = prior[top] if prior is not None else np.float32(0)
        weight = self.ranking.definition_weight
        combined = (scores - prior_top + weight * best) / (1 + weight) + prior_top
        order = np.lexsort((top, -combined))
        return top[order], combined[order]

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
        with self._lock:
            if (kind, value) not in self._masks:
                if len(self._masks) > 256:  # patterns are open-ended: keep the cache bounded
                    self._masks.clear()
                self._masks[kind, value] = (
                    self._pos_mask(value)
                    if kind == "pos"
                    else np.fromiter(map(word_test(kind, value), self.space.words), dtype=bool, count=len(self.space))
                )
            return self._masks[kind, value]

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

    def _best_sense(self, entry: int, query: np.ndarray, senses: list[tuple[str, str | None]], tag: str | None) -> int:
        """Which of entry `entry`'s `senses` (dictionary order) matched the pooled `query`: the one whose definition
        vector is nearest to it (among those of part of speech `tag`, when it has any), or -1: the space keeps no
        definition vectors (an MLM head, ICA, an older save) or not as many as the entry has senses (another
        dictionary's definitions are shown)."""
        space = self.space
        cosine = space.definition_cosines(entry, query) if isinstance(space, SearchSpace) else None
        if cosine is None or len(cosine) != len(senses) or len(senses) < 2:
            return -1
        if tag is not None:
            kept = np.array([normalize_pos(p) == tag for _, p in senses])
            cosine = np.where(kept, cosine, -np.inf) if kept.any() else cosine
        return int(np.argmax(cosine))

    def _result(
        self,
        group: int,
        score: float,
        mask: np.ndarray | None,
        max_definitions: int | None,
        pos: str | None = None,
        query: np.ndarray | None = None,
    ) -> Result:
        """The result of one group: its words that pass `mask`, each with up to `max_definitions` senses: the one
        that matched the pooled `query` first (`_best_sense`, when given), then the others in dictionary order,
        those of part of speech `pos` (when given) first."""
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
                        query is not None
                        and max_definitions != 0
                        and (best := self._best_sense(i, query, senses, tag)) >= 0
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
        """The k best results for each query (see `search`), encoding the queries in batches."""
        filters = Filters.resolve(filters, options)
        if blank := [i for i, q in enumerate(queries) if not isinstance(q, str) or not q.strip()]:
            raise DictEmbedError(f"empty query (query {blank[0] + 1}); describe the word you are looking for")
        out = []
        for h in self._pooled(list(queries), batch_size):
            out += self.search_vectors(h, k, filters, max_definitions)
        return out

    def search_vectors(
        self,
        vectors: Any,
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        **options: Any,
    ) -> list[list[Result]]:
        """The k best results for each pooled query vector (a row of `vectors`, an array or tensor, as the encoder
        pools a description), among the words that pass `filters` (see `search`)."""
        filters = Filters.resolve(filters, options)
        vectors = as_rows(vectors)
        mask = self._entry_mask(filters)
        allowed = self.groups.any(mask) if mask is not None else None
        reranks, depth = self.reranks, max(k, self.ranking.depth)
        out = []
        with search_threads(self.encoder):
            for vector, (top, scores) in zip(
                vectors, self._best_groups(vectors, allowed, depth if reranks else k), strict=True
            ):
                if reranks and len(top):
                    top, scores = self._rerank(vector, top, scores)
                results = zip(top[:k], scores[:k], strict=True)
                out.append(
                    [self._result(int(g), score, mask, max_definitions, filters.pos, vector) for g, score in results]
                )
        return out

    def search(
        self,
        query: str,
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        **options: Any,
    ) -> list[Result]:
        """The k best results for a description, best first. Entries with identical vectors are one result.

        `filters` (`search_options.Filters`: part of speech, pattern, word count, length, initial letters, pinyin
        initials, script), or the same as keywords by the names `predict` and the API take (`pos`, `pattern`,
        `words`, `length`, `min_length`, `max_length`, `initial`, `pinyin`, `script`: `Filters.of`), keep the
        words that pass all of them; a result lists only its passing words, and a result with none is dropped.
        Each word carries up to `max_definitions` definitions: the sense whose definition vector is nearest the
        query first (in a space that keeps them), then the dictionary's sense order, those of the filter's part of
        speech (when given) first."""
        return self.search_many([query], k, filters, max_definitions, **options)[0]

    # ------------------------------------------------------------------ near-synonyms of an entry
    @property
    def has_entry_vectors(self) -> bool:
        """Whether the space has a vector per entry for `neighbours` (`near_synonyms.has_entry_vectors`)."""
        return has_entry_vectors(self.space)

    def entry_of(self, query: str) -> str | None:
        """The entry `query` names, exactly or else case-insensitively (the first such entry), or None."""
        text = query.strip()
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
        best first: its near-synonyms, the word itself left out (the other words of its own group come first). The
        filters are those of `search` (`filters=` or keywords); the senses come in dictionary order."""
        filters = Filters.resolve(filters, options)
        if (entry := self.entry_of(word)) is None:
            raise DictEmbedError(f"{word.strip()[:100]!r} is not an entry of this model")
        search, entry_mask, index = self.synonym_search, self._entry_mask(filters), self.space.index[entry]
        mask = np.ones(len(self.space), dtype=bool) if entry_mask is None else entry_mask.copy()
        mask[index] = False
        group = int(self.word_index.group_of[index])
        allowed = self.groups.any(mask) if entry_mask is not None else None  # else no pass over the groups
        alone = len(self.groups.members(group)) == 1  # unfiltered, its group drops out
        with search_threads(self.encoder):
            top, scores = search.nearest(index, group, allowed, k, scoring or SynonymScoring(), alone)
        return [self._result(int(g), s, mask, max_definitions, filters.pos) for g, s in zip(top, scores, strict=True)]
