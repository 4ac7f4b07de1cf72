"""Frozen entry spaces that score a pooled sentence vector against every dictionary entry.

- `MLMHeadSpace` (`mlm_head_space`): DefSent's space, the model's own pre-trained word-prediction head over
  single-token words.
- `WordEmbeddingSpace`: the FALLBACK for a model without an MLM head (e.g. all-MiniLM-L6-v2): its frozen
  input word embeddings over single-token words. It is not the method of the DefSent paper.
- `DefinitionSpace`: DefSent+'s space, one vector per headword (multi-word too) averaged over its
  definitions' [CLS] (AC) or mean-pooled (AMP) embeddings, optionally ICA-transformed (`entry_vectors`: a
  long build is encoded in parts kept beside its cache entry, so an interrupted build resumes).

Every space is frozen: it keeps copies of its tensors, never the encoder's, and takes no gradient.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, cast

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn import functional as F

from dictembed.chunked_softmax import chunked_cross_entropy
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_logits import ENTRY_TEMPERATURE, cosine_logits, cosine_query
from dictembed.entry_vectors import ICA_SUFFIX, entry_means, space_tensors
from dictembed.errors import DictEmbedError
from dictembed.io import with_umask
from dictembed.model_folder import SPACE_DIR, SPACE_META, SPACE_TENSORS
from dictembed.search_space import SearchSpace, definition_rows
from dictembed.vocab import single_token_words

log = logging.getLogger(__name__)
# How a saved matrix space stores its matrix (`EntrySpace.save`); loading always upcasts to float32.
SAVE_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
SAVE_DTYPE: Literal["fp32", "fp16"] = "fp16"


class EntrySpace(nn.Module):
    """Scores pooled vectors [B, d] against entries -> logits [B, n_entries]. Frozen."""

    kind: str = "entry"

    def __init__(self, words: list[str]) -> None:
        super().__init__()
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def scores(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.scores(h)

    def loss(self, h: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cross-entropy of the logits toward `labels`, accuracy of their argmax): the training objective. [B, K]
        `labels` (-1 after each row's targets) are several right entries: the loss is -log of their summed
        probability, and an argmax on any of them is right."""
        logits = self.scores(h)
        if labels.ndim == 1:
            return F.cross_entropy(logits, labels), (logits.argmax(-1) == labels).float().mean()
        right = labels >= 0
        target = logits.gather(1, labels.clamp(min=0)).masked_fill(~right, float("-inf"))
        loss = (torch.logsumexp(logits, dim=1) - torch.logsumexp(target, dim=1)).mean()
        return loss, ((logits.argmax(-1)[:, None] == labels) & right).any(1).float().mean()

    def vectors(self) -> np.ndarray:
        """One vector per entry, for geometry plots."""
        raise NotImplementedError

    def freeze(self) -> EntrySpace:
        for p in self.parameters():
            p.requires_grad_(False)
        return self.eval()

    # Saving: tensors to safetensors, everything else to JSON, in `path/entry_space/`.
    def _meta(self) -> dict:
        return {"type": type(self).__name__, "kind": self.kind, "words": self.words}

    def _tensors(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _saved_tensors(self) -> dict[str, torch.Tensor]:
        """What `save` writes: the scoring tensors (`_tensors`, which the run fingerprint hashes) and any
        bookkeeping beside them (a DefinitionSpace's per-entry definition counts)."""
        return self._tensors()

    def _store(self, tensors: dict[str, torch.Tensor], dtype: str) -> str:
        """Cast `tensors` (in place) to the saved `dtype` where this space allows it; the dtype stored."""
        return "fp32"  # e.g. an MLM head: saved as it is

    def save(self, model_dir: str | Path, dtype: Literal["fp32", "fp16"] = SAVE_DTYPE) -> Path:
        """Write `model_dir/entry_space/` (tensors.safetensors, space.json). With `dtype="fp16"` a matrix space
        stores its matrix in half precision (half the file); `load_entry_space` upcasts it to float32. space.json
        records the stored dtype. The space in memory is unchanged."""
        if dtype not in SAVE_DTYPES:
            raise DictEmbedError(f"unknown entry-space dtype {dtype!r}; choose {' or '.join(SAVE_DTYPES)}")
        folder = Path(model_dir) / SPACE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().cpu().clone().contiguous() for k, v in self._saved_tensors().items()}
        stored = self._store(tensors, dtype)
        save_file(tensors, folder / SPACE_TENSORS)
        (folder / SPACE_META).write_text(json.dumps({**self._meta(), "dtype": stored}))
        with_umask(folder)  # safetensors writes 0600
        return folder


class MatrixSpace(EntrySpace):
    """Logits = h · Mᵀ for a frozen matrix M of entry vectors (the papers' dot product), or, with
    `similarity="cosine"`, cos(h, M) / temperature (an option of this library, not of the papers)."""

    matrix: torch.Tensor  # a buffer (register_buffer)

    def __init__(
        self,
        words: list[str],
        matrix: torch.Tensor | np.ndarray,
        similarity: Literal["dot", "cosine"] = "dot",
        temperature: float = ENTRY_TEMPERATURE,
        kind: str | None = None,
    ) -> None:
        super().__init__(words)
        if kind is not None:  # e.g. "definitions-amp-ica"; the class default otherwise
            self.kind = kind
        matrix = torch.tensor(host_array(matrix), dtype=torch.float32)  # a copy: a mapped matrix is read-only
        if matrix.shape[0] != len(self.words):
            raise DictEmbedError(f"{len(self.words)} entries but {matrix.shape[0]} vectors")
        if similarity not in ("dot", "cosine"):
            raise DictEmbedError(f"unknown entry similarity {similarity!r}; choose dot or cosine")
        self.similarity, self.temperature = similarity, float(temperature)
        self.register_buffer("matrix", matrix, persistent=False)
        # What the logits multiply by (the row-normalised matrix for cosine), on one device in one dtype,
        # made once per device and dtype (the space is frozen)
        self._weights: torch.Tensor | None = None

    def weights(self, h: torch.Tensor) -> torch.Tensor:
        """The matrix the logits of `h` multiply by, in the dtype the product runs in: under autocast its
        dtype (a copy made once, not a 57M-element cast per call), else h's."""
        kind = h.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else h.dtype
        cached = self._weights
        if cached is None or cached.device != h.device or cached.dtype != dtype:
            matrix = self.matrix.to(h.device)
            cached = F.normalize(matrix, dim=-1) if self.similarity == "cosine" else matrix
            self._weights = cached = cached.to(dtype)
        return cached

    def _query(self, h: torch.Tensor) -> torch.Tensor:
        return cosine_query(h, self.temperature) if self.similarity == "cosine" else h

    def scores(self, h: torch.Tensor) -> torch.Tensor:
        weights = self.weights(h)
        if self.similarity == "cosine":
            return cosine_logits(h, weights, self.temperature, unit_entries=True)
        return h.to(weights.dtype) @ weights.T

    def loss(self, h: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """As `EntrySpace.loss`; on the CPU in one pass over the entry matrix (`chunked_cross_entropy`: 82.7 ->
        97.8 training examples/s on 2 cores). A GPU keeps the fused `F.cross_entropy`, which is faster there
        (H100: 0.67 against 1.50 ms a step; benchmarks/chunked_loss.py)."""
        if h.device.type != "cpu":
            return super().loss(h, labels)
        return chunked_cross_entropy(self._query(h), self.weights(h), labels)

    def _meta(self) -> dict:
        return {**super()._meta(), "similarity": self.similarity, "temperature": self.temperature}

    def vectors(self) -> np.ndarray:
        return self.matrix.cpu().numpy()

    def _store(self, tensors: dict[str, torch.Tensor], dtype: str) -> str:
        """The matrix in `dtype`; float32 (logged) when it does not fit float16's range."""
        if dtype == "fp32":
            return "fp32"
        half = tensors["matrix"].to(SAVE_DTYPES[dtype])
        if not torch.isfinite(half).all():
            log.warning("the entry matrix exceeds the range of %s; saved in float32", dtype)
            return "fp32"
        tensors["matrix"] = half
        return dtype

    def _tensors(self) -> dict[str, torch.Tensor]:
        return {"matrix": self.matrix}


class WordEmbeddingSpace(MatrixSpace):
    """FALLBACK for models without an MLM head: the frozen input word embeddings of single-token words."""

    kind = "word-embeddings"

    @classmethod
    def from_encoder(cls, encoder: Encoder, words: list[str]) -> WordEmbeddingSpace:
        kept, ids = single_token_words(words, encoder.tokenizer)
        # transformers types the embedding layer as an nn.Module, whose attributes read as Tensor | Module
        table = cast(torch.Tensor, encoder.backbone.get_input_embeddings().weight).detach()
        return cls(kept, table[ids].cpu())


class DefinitionSpace(MatrixSpace):
    """DefSent+: each entry is the average embedding of its definitions (AC: [CLS], AMP: mean-pooling).

    `counts` (or None, for spaces saved before it was kept) is the number of definitions behind each entry,
    saved beside the matrix: with it, the mean of an entry without one of its definitions is exact
    (`leave_one_out`). `definitions` (or None: an ICA space, an older save) is the float16 vector of every
    definition, entry by entry in the dictionary's order (`counts[i]` rows for entry i), saved beside them: the
    reverse dictionary reranks its best candidates by their best single definition (`definition_rows`).
    `headwords` (or None: an ICA space, an older save) is the float16 vector of each entry's word encoded as a
    description is (`entry_vectors.headword_vectors`), which the reverse dictionary also reranks by."""

    kind = "definitions"

    def __init__(
        self,
        words: list[str],
        matrix: torch.Tensor | np.ndarray,
        similarity: Literal["dot", "cosine"] = "dot",
        temperature: float = ENTRY_TEMPERATURE,
        kind: str | None = None,
        counts: torch.Tensor | np.ndarray | None = None,
        definitions: torch.Tensor | np.ndarray | None = None,
        headwords: torch.Tensor | np.ndarray | None = None,
    ) -> None:
        super().__init__(words, matrix, similarity, temperature, kind)
        self.counts: torch.Tensor | None = None
        self.definitions: torch.Tensor | None = None
        self.headwords: torch.Tensor | None = None
        if counts is not None:
            counts = torch.tensor(host_array(counts), dtype=torch.long)  # a copy: mapped counts are read-only
            if counts.shape != (len(self.words),) or (counts < 1).any():
                raise DictEmbedError(f"{len(self.words)} entries need as many positive counts, got {counts.shape}")
            self.counts = counts
        if definitions is not None:
            expected = (int(self.counts.sum()) if self.counts is not None else -1, self.matrix.shape[1])
            no_counts = " (the space has no counts)" if self.counts is None else ""
            fit = f"the entries' counts and dimensions {expected}{no_counts}"
            self.definitions = float16_rows(definitions, expected, "definition", fit)
        if headwords is not None:
            shape = tuple(self.matrix.shape)
            self.headwords = float16_rows(headwords, shape, "headword", f"the entries {shape}")

    @property
    def entries(self) -> Literal["ac", "amp"] | None:
        """Which definitions' vectors the entries average, as its kind says: "ac" ([CLS]), "amp" (mean pooling), or
        None for a kind of neither."""
        for entries in ("ac", "amp"):
            if self.kind.startswith(f"definitions-{entries}"):
                return cast(Literal["ac", "amp"], entries)
        return None

    @property
    def is_ica(self) -> bool:
        """Whether the space is ICA-transformed (DefSent+'s entry space), which keeps no per-definition vectors."""
        return self.kind.endswith(ICA_SUFFIX)

    def _saved_tensors(self) -> dict[str, torch.Tensor]:
        kept = {"counts": self.counts, "definitions": self.definitions, "headwords": self.headwords}
        return {**self._tensors(), **{name: t for name, t in kept.items() if t is not None}}

    def definition_rows(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of `definitions` of each of `entries`, one after another, and where each entry's rows start
        among them (for `np.maximum.reduceat`). Needs the counts."""
        counts = self.check_counts()
        return definition_rows(np.cumsum(counts) - counts, counts, entries)

    def check_leave_one_out(self) -> np.ndarray:
        """The per-entry counts, or a one-line DictEmbedError when leave-one-out is impossible (ICA, no counts)."""
        if self.is_ica:
            raise DictEmbedError("leave-one-out needs a plain definition space; an ICA-transformed one has no means")
        return self.check_counts()

    def check_counts(self) -> np.ndarray:
        """The per-entry definition counts, or a one-line DictEmbedError for a space saved without them."""
        if self.counts is None:
            raise DictEmbedError(
                "this entry space was saved without its per-entry definition counts (an older save); "
                "rebuild it to use leave-one-out"
            )
        return self.counts.numpy()

    def subset(self, words: Iterable[str]) -> DefinitionSpace:
        """The entries of `words` that this space holds, in this space's order (vectors and counts shared)."""
        keep = set(words)
        rows = [i for i, word in enumerate(self.words) if word in keep]
        counts = self.counts[rows] if self.counts is not None else None
        words_kept = [self.words[i] for i in rows]
        definitions = None
        if self.definitions is not None:
            definitions = self.definitions[self.definition_rows(np.array(rows, dtype=np.int64))[0]]
        headwords = self.headwords[rows] if self.headwords is not None else None
        return DefinitionSpace(
            words_kept, self.matrix[rows], self.similarity, self.temperature, self.kind, counts, definitions, headwords
        )

    def with_headwords(self, headwords: torch.Tensor | np.ndarray) -> DefinitionSpace:
        """A copy of this space on the CPU (wherever training left it) with the vector of each entry's word
        (`entry_vectors.headword_vectors`)."""
        definitions = self.definitions.cpu() if self.definitions is not None else None
        counts = self.counts.cpu() if self.counts is not None else None
        matrix = self.matrix.detach().cpu()
        return DefinitionSpace(
            self.words, matrix, self.similarity, self.temperature, self.kind, counts, definitions, headwords
        )

    def projected(self, projection: np.ndarray) -> DefinitionSpace:
        """This space seen through `projection` (its dimension x k): every definition and headword vector
        projected and re-normalised, each entry the mean of its projected definitions (as an AMP/AC entry is
        the mean of its definitions). Needs the counts and the per-definition vectors of a plain space."""
        if self.definitions is None or self.is_ica:
            raise DictEmbedError("projecting an entry space needs its per-definition vectors (a plain, recent save)")
        counts = self.check_counts()
        if projection.ndim != 2 or projection.shape[0] != self.matrix.shape[1]:
            raise DictEmbedError(f"a projection of shape {projection.shape} does not fit {self.matrix.shape[1]}-d")
        weights = torch.as_tensor(np.asarray(projection, dtype=np.float32))

        def unit_rows(vectors: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.normalize(vectors.cpu().float() @ weights, dim=-1)

        definitions = unit_rows(self.definitions)
        matrix = entry_means(definitions.numpy(), counts)
        headwords = unit_rows(self.headwords) if self.headwords is not None else None
        return DefinitionSpace(
            self.words, matrix, self.similarity, self.temperature, self.kind, counts, definitions, headwords
        )

    def leave_one_out(self, entries: np.ndarray, vectors: np.ndarray, copies: np.ndarray | None = None) -> np.ndarray:
        """The vectors of `entries[i]` without the definition whose entry-encoder vector is `vectors[i]`, listed
        `copies[i]` times in the entry (default once): (mean * count - k * v) / (count - k). Needs the counts, a
        plain (non-ICA) space and a definition left."""
        counts_all = self.check_leave_one_out()
        entries = np.asarray(entries, dtype=np.int64)
        counts = counts_all[entries].astype(np.float64)[:, None]
        k = np.ones_like(counts) if copies is None else np.asarray(copies, dtype=np.float64).reshape(-1, 1)
        if (counts - k < 1).any():
            raise DictEmbedError("leave-one-out of an entry's only definition leaves no vector")
        means = self.matrix.cpu().numpy()[entries].astype(np.float64)
        return ((means * counts - k * np.asarray(vectors, dtype=np.float64)) / (counts - k)).astype(np.float32)

    @classmethod
    def build(
        cls,
        encoder: Encoder,
        dictionary: Dictionary,
        entries: Literal["ac", "amp"] = "ac",
        ica: bool = False,
        cache_dir: str | Path | None = None,
        batch_size: int = 128,
        similarity: Literal["dot", "cosine"] = "dot",
        temperature: float = ENTRY_TEMPERATURE,
    ) -> DefinitionSpace:
        """Encode every definition (no grad, length-sorted batches) and average per headword; a plain (non-ICA)
        space keeps every definition's vector in float16 (`definitions`).
        `similarity` / `temperature` choose the logits (see MatrixSpace); they do not change the vectors.

        With `cache_dir` (recipes pass `dictembed.cache.default_cache_dir()`, i.e. $DICTEMBED_CACHE) the tensors
        are cached there, and an interrupted build resumes (`entry_vectors.space_tensors`)."""
        if entries not in ("ac", "amp"):
            raise DictEmbedError(f"unknown entry type {entries!r}; choose ac or amp")
        kind = f"definitions-{entries}" + (ICA_SUFFIX if ica else "")
        counts = np.array([len(e.senses) for e in dictionary])
        tensors = space_tensors(encoder, dictionary, counts, entries, ica, cache_dir, batch_size)
        definitions = tensors.get("definitions")
        return cls(
            dictionary.headwords, tensors["matrix"], similarity, temperature, kind, None if ica else counts, definitions
        )


def host_array(values: torch.Tensor | np.ndarray) -> np.ndarray:
    """`values` as a numpy array in host memory: a tensor on any device (a space trained on a GPU keeps its
    matrix there) is brought to the CPU first."""
    return values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)


def float16_rows(values: torch.Tensor | np.ndarray, shape: tuple, what: str, fit: str) -> torch.Tensor | None:
    """`values` as a contiguous float16 tensor of `shape` (else a one-line error: the `what` vectors do not fit
    `fit`), or None, logged, when they exceed float16's range."""
    vectors = torch.as_tensor(host_array(values)).to(torch.float16).contiguous()
    if tuple(vectors.shape) != shape:
        raise DictEmbedError(f"{tuple(vectors.shape)} {what} vectors do not fit {fit}")
    if torch.isfinite(vectors).all():
        return vectors
    log.warning("the %s vectors exceed the range of float16; the space keeps none", what)
    return None


def matrix_space(view: SearchSpace) -> MatrixSpace:
    """The torch space of a `SearchSpace`'s arrays (copied into memory), for the model's own logits."""
    matrix = np.array(view.matrix)
    if view.type_name == "DefinitionSpace":
        definitions = None if view.definitions is None else np.array(view.definitions)
        headwords = None if view.headwords is None else np.array(view.headwords)
        return DefinitionSpace(
            view.words, matrix, view.similarity, view.temperature, view.kind, view.counts, definitions, headwords
        )
    return WordEmbeddingSpace(view.words, matrix, view.similarity, view.temperature, view.kind)
