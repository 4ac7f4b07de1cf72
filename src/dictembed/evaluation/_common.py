"""Helpers shared by the evaluators: reading text files line by line and encoding unique sentences."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from dictembed import io
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.paths import data_dir


class SentenceEncoder(Protocol):
    """Anything with `encode(list[str]) -> array [n, dim]` (our Encoder, a SentenceTransformer, a baseline); any
    array-like (a tensor too) is read with `np.asarray`."""

    def encode(self, sentences: list[str]) -> ArrayLike: ...


def resolve_data_dir(override: str | Path | None) -> Path:
    """`override` if given, else the shared data folder."""
    return Path(override) if override is not None else data_dir()


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """`dictembed.io.read_lines` for evaluation data, whose encoding is fixed (no --encoding hint on errors)."""
    return io.read_lines(path, encoding, hint=None)


def parse_float(value: str, path: str | Path, line: int, what: str = "score") -> float:
    """`float(value)`, or a DataFormatError naming the file and line."""
    try:
        return float(value)
    except ValueError:
        raise DataFormatError(path, f"{what} {value!r} is not a number", line=line) from None


def encode_sentences(model: SentenceEncoder, sentences: list[str]) -> np.ndarray:
    """`model.encode(sentences)` as a float64 array, checked to hold one row per sentence."""
    try:
        embeddings = np.asarray(model.encode(sentences), dtype=np.float64)
    except DictEmbedError:
        raise
    except Exception as exc:  # the model is the user's; name it instead of a deep stack trace
        raise DictEmbedError(f"{type(model).__name__}.encode failed: {type(exc).__name__}: {exc}") from exc
    if embeddings.ndim != 2 or embeddings.shape[0] != len(sentences):
        raise DictEmbedError(
            f"{type(model).__name__}.encode returned shape {embeddings.shape} for {len(sentences)} sentences; "
            "expected [n_sentences, dim]"
        )
    return embeddings


def unique_index(*groups: Sequence[str]) -> tuple[list[str], list[np.ndarray]]:
    """The distinct sentences of `groups` (first-seen order) and, per group, each sentence's row in that list."""
    index: dict[str, int] = {}
    for group in groups:
        for sentence in group:
            index.setdefault(sentence, len(index))
    rows = [np.fromiter((index[s] for s in group), dtype=np.int64, count=len(group)) for group in groups]
    return list(index), rows


def encode_unique(model: SentenceEncoder, *groups: Sequence[str]) -> list[np.ndarray]:
    """Encode every distinct sentence of `groups` once; return one embedding array per group, row-aligned."""
    unique, rows = unique_index(*groups)
    table = encode_sentences(model, unique) if unique else np.zeros((0, 0))
    return [table[r] for r in rows]


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of `a` with the same row of `b` (0 where a vector is zero)."""
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def mean_sd(scores: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof=1) of per-seed scores; the sd of a single seed is None
    (undefined, not zero): the one convention for every mean ± sd this package reports."""
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        raise DictEmbedError("no scores to summarise")
    return float(values.mean()), float(np.std(values, ddof=1)) if values.size > 1 else None
