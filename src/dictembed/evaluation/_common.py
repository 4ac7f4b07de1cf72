"""Helpers shared by the evaluators: reading text files line by line and encoding unique sentences."""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from dictembed import text_files
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.paths import data_dir
from dictembed.texts import MAX_SEED as MAX_SEED  # where the evaluations find it
from dictembed.texts import unique_index as unique_index  # where the evaluations find it


class SentenceEncoder(Protocol):
    """Anything with `encode(list[str]) -> array [n, dim]` (our Encoder, a SentenceTransformer, a baseline); any
    array-like (a tensor too) is read with `np.asarray`."""

    def encode(self, sentences: list[str]) -> ArrayLike: ...


def resolve_data_dir(override: str | Path | None) -> Path:
    """`override` if given, else the shared data folder."""
    return Path(override) if override is not None else data_dir()


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """`dictembed.text_files.read_lines` for evaluation data, whose encoding is fixed (no --encoding hint on errors); a
    UTF-8 byte order mark read as Latin-1 is dropped too, and a carriage return inside a line (old Mac line
    endings, which would run lines together) is a DataFormatError naming it."""
    lines = text_files.read_lines(path, encoding, hint=None)
    if lines and lines[0].startswith(codecs.BOM_UTF8.decode("latin-1")) and codecs.lookup(encoding).name == "iso8859-1":
        lines[0] = lines[0][3:]
    text_files.refuse_carriage_returns(path, lines)
    return lines


MAX_SCORE = 5.0  # STS gold scores run from 0 to 5 (SICK's relatedness from 1 to 5)
PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # not float()'s "4_5", "nan" or "inf"


def parse_float(value: str, path: str | Path, line: int, what: str = "score") -> float:
    """`value`, a number written in decimal digits, or a DataFormatError naming the file and line."""
    if not PLAIN_NUMBER.fullmatch(value.strip()):
        raise DataFormatError(path, f"{what} {value!r} is not a number", line=line)
    return float(value)


def parse_score(value: str, path: str | Path, line: int, what: str = "score") -> float:
    """A gold similarity score (`parse_float`) within 0 to `MAX_SCORE`, or a DataFormatError naming the file and
    line: a score outside would move the Spearman correlation without a word."""
    score = parse_float(value, path, line, what)
    if not 0.0 <= score <= MAX_SCORE:
        raise DataFormatError(path, f"{what} {value.strip()!r} is outside 0-{MAX_SCORE:g}", line=line)
    return score


def check_encoder(model: object) -> None:
    """Refuse, in one line, a `model` that is not a `SentenceEncoder`: a name or path (a str has an `encode` too),
    None, or anything without an `encode` method."""
    if isinstance(model, str | bytes | os.PathLike):
        raise DictEmbedError(
            f"model must be a sentence encoder (an object with encode(sentences)), got the path or name {model!r}: "
            "load it first, e.g. Encoder.load(path)"
        )
    if not callable(getattr(model, "encode", None)):
        raise DictEmbedError(
            f"model must be a sentence encoder (an object with encode(sentences)), got {type(model).__name__}"
        )


def name_list(names: object, known: Sequence[str], what: str, label: str = "tasks") -> list[str]:
    """`names` (the argument `label`) as a list: all of `known` for None, one name for a str (the name a user means,
    not its letters), else each item of an iterable; refused in one line unless each is one of `known` (`what`
    they are, in the message)."""
    if names is None:
        return list(known)
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Iterable):
        raise DictEmbedError(f"{label} must be a name or a list of names, got {names!r}")
    chosen = list(names)
    if unknown := [str(n) if isinstance(n, str) else repr(n) for n in chosen if n not in known]:
        raise DictEmbedError(f"unknown {what} {', '.join(unknown)}; expected some of {', '.join(known)}")
    return chosen


def encode_sentences(model: SentenceEncoder, sentences: list[str], task: str = "") -> np.ndarray:
    """`model.encode(sentences)` as a float64 array, checked to hold one finite row per sentence; an error names
    `task` (the evaluation it is for) when given."""
    where = f"{task}: " if task else ""
    try:
        embeddings = np.asarray(model.encode(sentences), dtype=np.float64)
    except DictEmbedError:
        raise
    except Exception as exc:  # the model is the user's; name it instead of a deep stack trace
        raise DictEmbedError(f"{where}{type(model).__name__}.encode failed: {type(exc).__name__}: {exc}") from exc
    if embeddings.ndim != 2 or embeddings.shape[0] != len(sentences):
        raise DictEmbedError(
            f"{where}{type(model).__name__}.encode returned shape {embeddings.shape} for {len(sentences)} sentences; "
            "expected [n_sentences, dim]"
        )
    if not np.isfinite(embeddings).all():
        row = int(np.flatnonzero(~np.isfinite(embeddings).all(axis=1))[0])
        raise DictEmbedError(
            f"{where}{type(model).__name__}.encode returned non-finite values (NaN or inf) for sentence {row} "
            f"{sentences[row]!r}"
        )
    return embeddings


def encode_unique(model: SentenceEncoder, *groups: Sequence[str], task: str = "") -> list[np.ndarray]:
    """Encode every distinct sentence of `groups` once; return one embedding array per group, row-aligned (an
    error names `task`)."""
    unique, rows = unique_index(*groups)
    table = encode_sentences(model, unique, task) if unique else np.zeros((0, 0))
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
