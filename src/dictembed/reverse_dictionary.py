"""Reverse dictionary: rank the entries of a saved entry space for a definition (definition -> words).

Two views of one model:
- `predict` and `ranks` score every entry with the model's own logits (the training objective), one row per
  entry; the evaluation uses them.
- `search` and `search_many` are for people. Entries whose vectors are identical (WordNet synonyms that share
  all their definitions, e.g. `transitory`, `fugacious`, `short-lived`) come back as ONE `Result` listing
  all their words. Results can be filtered by part of speech, by a pattern, by word count, by length in
  letters, by initial letters and by pinyin initials (Chinese), and carry each word's definitions from the
  dictionary the model was trained on.
- `neighbours` lists an entry's near-synonyms: the entries nearest to its own entry vector, itself left out.

The `score` of a `Result`, for the matrix spaces of DefSent+ (and the word-embedding fallback), is the cosine
similarity of the query's vector and the entry vector, mixed with the cosine to the entry's best single
definition and a word-frequency prior as `Ranking` says (`score_kind` names the terms in use); without them it
ranks exactly as the model's cosine logits (the `best` preset). A space without an entry matrix (DefSent's MLM
head) scores by the model's softmax probability instead.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch.nn import functional as F

from dictembed.devices import loader_device
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.split import seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace, EntrySpace, MatrixSpace
from dictembed.errors import DictEmbedError
from dictembed.evaluation.ranking import ranks_from_scores
from dictembed.frequency_prior import FrequencyPrior
from dictembed.model_folder import ModelDictionary, ModelFolder
from dictembed.paths import public_name
from dictembed.search_index import CoarseIndex, EntryGroups, WordIndex, top_indices
from dictembed.search_options import SEARCH_MODES, Filters, Ranking, normalize_pos, word_test

CHUNK = 1024  # queries encoded (length-sorted) and scored at a time
# A large matrix space is searched in two stages (`CoarseIndex`): every group by a projection of the unit entry
# vectors on their first COARSE_DIMS principal directions, then the COARSE_CANDIDATES best exactly.
COARSE_MIN_GROUPS = 20_000
COARSE_DIMS = 128
COARSE_CANDIDATES = 1000


# numpy's BLAS and torch's OpenMP threads each want every core: while torch's threads spin after an encoder
# pass, a multi-threaded BLAS call waits on them (a single search took 39 ms instead of 20 on 2 cores). The
# search's numpy products are small and run on one thread.
@functools.cache
def _blas() -> ThreadpoolController:
    """The thread pools of the libraries loaded (found once: a scan takes about a millisecond)."""
    return ThreadpoolController()


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


class ReverseDictionary:
    """An encoder and the entry space it was trained against, with the dictionary behind it for `search`.

    `dictionary` is a loaded `Dictionary`, or what `load_dictionary` takes (a `ModelDictionary`, or a spec such as
    "wordnet" or a .tsv path), loaded once on first use; when it cannot be loaded, results come without
    definitions (logged once)."""

    def __init__(
        self,
        encoder: Encoder,
        space: EntrySpace,
        dictionary: Dictionary | ModelDictionary | str | None = None,
        name: str | None = None,
        ranking: Ranking | None = None,
        language: str | None = "auto",
    ) -> None:
        self.encoder = encoder
        self.ranking, self.language = ranking or Ranking(), language
        self.space = space.freeze()
        if isinstance(space, MatrixSpace) and space.matrix.shape[1] != encoder.dim:
            raise DictEmbedError(
                f"{name or 'model'}: the entry vectors have {space.matrix.shape[1]} dimensions, the encoder's "
                f"{encoder.dim}; the entry space does not belong to this encoder"
            )
        self.name = name or "model"
        self.prior = FrequencyPrior(self.space.words, self.ranking, language, self.name)
        if isinstance(dictionary, str):
            dictionary = ModelDictionary(dictionary)
        self._dictionary = dictionary if isinstance(dictionary, Dictionary) else None
        self.source = dictionary if isinstance(dictionary, ModelDictionary) else None
        self.dictionary_spec = self._dictionary.name if self._dictionary else self.source.spec if self.source else None
        self.dictionary_error: str | None = None if dictionary is not None else "the model names no dictionary"
        self._dictionary_tried = dictionary is None or self._dictionary is not None
        self._lock = threading.RLock()
        self._groups: EntryGroups | None = None
        self._unit: torch.Tensor | None = None
        self._coarse: CoarseIndex | None = None
        self._unit_rows: np.ndarray | None = None
        self._masks: dict[tuple[str, str], np.ndarray] = {}
        self._word_index: WordIndex | None = None
        self._vector_unit: torch.Tensor | None = None  # `neighbours` in a space without a matrix

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
        (`dictembed.word_frequency`)."""
        folder = ModelFolder.open(path)
        source = folder.dictionary(dictionary)  # before the model: a folder naming a file elsewhere is refused
        space = EntrySpace.load(folder.path)
        encoder = Encoder.load(folder, device=loader_device(device)).set_precision(precision)
        return cls(encoder, space, dictionary=source, name=folder.name, ranking=ranking, language=language)

    # ------------------------------------------------------------------ the model's own scores
    def _pooled(self, texts: list[str], batch_size: int) -> Iterator[torch.Tensor]:
        """The pooled float32 vectors of `texts` on the encoder's device, `batch_size` rows at a time, in order
        (encoded `CHUNK` at a time as length-sorted batches; scored a batch at a time, as scores span every entry)."""
        for vectors in self.encoder.embed(texts, batch_size, show_progress=False, chunk=CHUNK):
            yield from vectors.to(self.encoder.device).split(batch_size)

    @torch.no_grad()
    def scores(self, definitions: list[str], batch_size: int = 64) -> np.ndarray:
        """Entry scores [n_definitions, n_entries] (unnormalised logits)."""
        space = self.space.to(self.encoder.device)
        out = [space(h).float().cpu().numpy() for h in self._pooled(definitions, batch_size)]
        return np.concatenate(out) if out else np.zeros((0, len(space)), dtype=np.float32)

    def predict(self, definition: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The top-k entries for one definition with their softmax probabilities."""
        logits = torch.from_numpy(self.scores([definition])[0])
        probs = logits.softmax(-1)
        top = probs.topk(min(top_k, len(probs)))
        return [(self.space.words[i], float(p)) for p, i in zip(top.values, top.indices, strict=True)]

    def ranks(self, dictionary: Dictionary, limit: int | None = None, seed: int = 0) -> np.ndarray:
        """1-based rank of the gold entry for each definition of `dictionary` whose headword is an entry."""
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
        if not isinstance(self.space, MatrixSpace):
            return "probability"
        return "cosine" + "+definition" * self.reranks + "+frequency" * (self.group_prior is not None)

    @property
    def reranks(self) -> bool:
        """Whether searches rerank by the best single definition (`Ranking`): a definition space that keeps its
        definition vectors, and a definition weight above 0."""
        space = self.space
        has = isinstance(space, DefinitionSpace) and space.definitions is not None and space.counts is not None
        return has and self.ranking.definition_weight > 0

    @property
    def groups(self) -> EntryGroups:
        """The entries grouped by identical vectors, computed once (with the normalised group matrix)."""
        with self._lock:
            if self._groups is None:
                if isinstance(self.space, MatrixSpace):
                    self._groups = EntryGroups.of(self.space.matrix.cpu().numpy())
                    first = torch.from_numpy(self._groups.first)
                    self._unit = F.normalize(self.space.matrix[first].float(), dim=-1).to(self.encoder.device)
                    if len(first) >= COARSE_MIN_GROUPS and self._unit.shape[1] > COARSE_DIMS:
                        self._coarse = CoarseIndex.of(self._unit, COARSE_DIMS)
                        self._unit_rows = self._unit.cpu().numpy()  # the second stage's rows (shared on a CPU)
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
        """Group the entries and load the dictionary now rather than on the first search."""
        _ = self.groups, self.dictionary, self.word_index, self.group_prior, self.candidates
        return self

    @property
    def group_prior(self) -> np.ndarray | None:
        """Per group, the word-frequency prior (`FrequencyPrior.group_prior`), or None: none, or a space scored by
        probability."""
        groups = self.groups
        return self.prior.group_prior(groups) if self._unit is not None else None

    @property
    def candidates(self) -> np.ndarray | None:
        """The entries a search may list (`FrequencyPrior.candidates`), or None: every entry."""
        return self.prior.candidates

    def _group_scores(self, h: torch.Tensor) -> np.ndarray:
        """Scores [batch, n_groups] of pooled vectors: cosine (plus the word-frequency prior, `group_prior`), or
        softmax probability (see `score_kind`)."""
        groups = self.groups
        if self._unit is not None:
            cosine = (F.normalize(h.float(), dim=-1) @ self._unit.T).cpu().numpy()
            prior = self.group_prior
            return cosine if prior is None else cosine + prior
        probs = self.space.to(self.encoder.device)(h).float().softmax(-1).cpu().numpy()
        return probs[:, groups.first]

    def _best_groups(
        self, h: torch.Tensor, allowed: np.ndarray | None, n: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per pooled vector of `h`: its `n` best groups among the `allowed` by `_group_scores`, best first (ties
        by group), and their scores. A `CoarseIndex` picks `COARSE_CANDIDATES` groups first and only those are
        scored exactly: the scores are exact, the choice nearly so (benchmarks/coarse_search.py)."""
        if self._coarse is None:
            for row in self._group_scores(h):
                top = top_indices(row, allowed, n)
                yield top, row[top]
            return
        unit, prior = cast(np.ndarray, self._unit_rows), self.group_prior
        queries = F.normalize(h.float(), dim=-1).cpu().numpy()
        for query, rough in zip(queries, self._coarse.scores(queries), strict=True):
            candidates = top_indices(rough if prior is None else rough + prior, allowed, max(n, COARSE_CANDIDATES))
            exact = unit[candidates] @ query  # numpy: a few hundred rows need no thread pool
            if prior is not None:
                exact = exact + prior[candidates]
            order = np.lexsort((candidates, -exact))[:n]
            yield candidates[order], exact[order]

    def _rerank(self, h: torch.Tensor, top: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The groups `top` (scored `scores` by `_group_scores`) in the order of the full `Ranking` score, which
        mixes in the cosine of the query vector `h` to each group's best single definition, and their scores.
        In numpy: small arrays, where a thread pool only adds waits on a busy machine."""
        space = cast(DefinitionSpace, self.space)
        rows, starts = space.definition_rows(self.groups.first[top])
        definitions = cast(torch.Tensor, space.definitions).numpy()[rows].astype(np.float32)
        query = h.detach().float().cpu().numpy()
        cosine = definitions @ (query / np.linalg.norm(query)) / np.linalg.norm(definitions, axis=1)
        best = np.maximum.reduceat(cosine, starts)
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
                self._masks[kind, value] = np.fromiter(
                    map(self._word_test(kind, value), self.space.words), dtype=bool, count=len(self.space)
                )
            return self._masks[kind, value]

    def _word_test(self, kind: str, value: str) -> Callable[[str], bool]:
        if kind != "pos":
            return word_test(kind, value)
        dictionary = self.dictionary
        if dictionary is None:
            raise DictEmbedError(f"cannot filter by part of speech: {self.dictionary_error}")
        if not any(sense.pos for entry in dictionary for sense in entry.senses):  # else: no results, no hint
            raise DictEmbedError(
                f"cannot filter by part of speech: the dictionary {self.public_dictionary!r} records none"
            )
        return lambda word: word in dictionary and any(normalize_pos(s.pos) == value for s in dictionary[word].senses)

    def _result(
        self, group: int, score: float, mask: np.ndarray | None, max_definitions: int | None, pos: str | None = None
    ) -> Result:
        """The result of one group: its words that pass `mask`, each with up to `max_definitions` senses in
        dictionary order, those of part of speech `pos` (when given) first."""
        members = self.groups.members(group)
        words = [self.space.words[i] for i in members if mask is None or mask[i]]
        result = Result(words, float(score))
        dictionary = self.dictionary
        tag = normalize_pos(pos) or None
        if dictionary is not None:
            for word in words:
                if word in dictionary:
                    senses = dictionary[word].senses
                    if tag is not None:
                        senses = sorted(senses, key=lambda s: normalize_pos(s.pos) != tag)  # stable
                    senses = senses[:max_definitions]
                    result.definitions[word] = [s.definition for s in senses]
                    result.pos[word] = [normalize_pos(s.pos) for s in senses]
        return result

    @torch.no_grad()
    def search_many(
        self,
        queries: list[str],
        k: int = 10,
        filters: Filters | None = None,
        max_definitions: int | None = 10,
        batch_size: int = 64,
    ) -> list[list[Result]]:
        """The k best results for each query (see `search`), encoding the queries in batches."""
        if blank := [i for i, q in enumerate(queries) if not isinstance(q, str) or not q.strip()]:
            raise DictEmbedError(f"empty query (query {blank[0] + 1}); describe the word you are looking for")
        out = []
        for h in self._pooled(list(queries), batch_size):
            out += self.search_vectors(h, k, filters, max_definitions)
        return out

    @torch.no_grad()
    def search_vectors(
        self, vectors: torch.Tensor, k: int = 10, filters: Filters | None = None, max_definitions: int | None = 10
    ) -> list[list[Result]]:
        """The k best results for each pooled query vector (a row of `vectors`, as the encoder pools a
        description), among the words that pass `filters` (see `search`)."""
        filters = filters or Filters()
        vectors = torch.as_tensor(vectors).to(self.encoder.device)
        mask = self._entry_mask(filters)
        allowed = self.groups.any(mask) if mask is not None else None
        reranks, depth = self.reranks, max(k, self.ranking.depth)
        out = []
        with _blas().limit(limits=1, user_api="blas"):
            for vector, (top, scores) in zip(
                vectors, self._best_groups(vectors, allowed, depth if reranks else k), strict=True
            ):
                if reranks and len(top):
                    top, scores = self._rerank(vector, top, scores)
                results = zip(top[:k], scores[:k], strict=True)
                out.append([self._result(int(g), score, mask, max_definitions, filters.pos) for g, score in results])
        return out

    def search(
        self, query: str, k: int = 10, filters: Filters | None = None, max_definitions: int | None = 10
    ) -> list[Result]:
        """The k best results for a description, best first. Entries with identical vectors are one result.

        `filters` (`search_options.Filters`: part of speech, pattern, word count, length, initial letters, pinyin
        initials, script) keep the words that pass all of them; a result lists only its passing words, and a
        result with none is dropped. Each word carries up to `max_definitions` definitions, in the dictionary's
        sense order, those of the filter's part of speech (when given) first."""
        return self.search_many([query], k, filters, max_definitions)[0]

    # ------------------------------------------------------------------ near-synonyms of an entry
    @property
    def has_entry_vectors(self) -> bool:
        """Whether the space has a vector per entry for `neighbours` (a matrix, or an MLM head's output rows)."""
        return isinstance(self.space, MatrixSpace) or type(self.space).vectors is not EntrySpace.vectors

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

    def _entry_unit(self) -> torch.Tensor:
        """The unit entry vector of each group: the normalised matrix, else the space's `vectors()` (computed once)."""
        groups = self.groups
        if self._unit is not None:
            return self._unit
        with self._lock:
            if self._vector_unit is None:
                if not self.has_entry_vectors:
                    raise DictEmbedError(f"{self.name}: the entry space has no entry vectors to find similar words")
                vectors = torch.from_numpy(np.ascontiguousarray(self.space.vectors()[groups.first]))
                self._vector_unit = F.normalize(vectors.float(), dim=-1).to(self.encoder.device)
            return self._vector_unit

    @torch.no_grad()
    def neighbours(
        self, word: str, k: int = 10, filters: Filters | None = None, max_definitions: int | None = 10
    ) -> list[Result]:
        """The k results nearest to the entry `word` (see `entry_of`) by the cosine of their entry vectors, best
        first: its near-synonyms, the word itself left out (the other words of its own group come first, at 1).
        The filters are those of `search`; the score is always a cosine."""
        entry = self.entry_of(word)
        if entry is None:
            raise DictEmbedError(f"{word.strip()[:100]!r} is not an entry of this model")
        filters = filters or Filters()
        entry_mask = self._entry_mask(filters)
        mask = np.ones(len(self.space), dtype=bool) if entry_mask is None else entry_mask.copy()
        index = self.space.index[entry]
        mask[index] = False
        group = int(self.word_index.group_of[index])
        unit = self._entry_unit()
        row = (unit[group] @ unit.T).float().cpu().numpy()
        if entry_mask is None:  # no pass over the groups: only the word's own group may drop out, if it is alone
            alone = len(self.groups.members(group)) == 1
            top = [g for g in top_indices(row, None, k + 1) if not (alone and g == group)][:k]
        else:
            top = list(top_indices(row, self.groups.any(mask), k))
        return [self._result(int(g), row[g], mask, max_definitions, filters.pos) for g in top]
