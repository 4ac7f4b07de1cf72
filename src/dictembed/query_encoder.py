"""The encoder a reverse dictionary queries with: what a search and a server need of it (`QueryEncoder`), which one
a model folder gets (`exported_query_encoder`: ONNX Runtime alone for an export or a folder with its query graph,
else the torch `Encoder`), its
vectors as rows for the search (`as_rows`), and the BLAS threads a search may use beside it (`search_threads`)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
from threadpoolctl import ThreadpoolController

from dictembed.errors import DictEmbedError
from dictembed.model_folder import ONNX_DIR, QUERY_MANIFEST, ModelFolder

log = logging.getLogger(__name__)


class QueryEncoder(Protocol):
    """What a search and a server need of an encoder: `Encoder` (torch) and `OnnxQueryEncoder` (ONNX Runtime alone)
    are both one."""

    max_length: int

    @property
    def dim(self) -> int: ...

    @property
    def device(self) -> Any: ...

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        prompt: str | None = None,
        show_progress: bool | None = None,
        chunk: int | None = None,
    ) -> Iterator[Any]: ...

    def encode(self, sentences: list[str], batch_size: int = 32, *, normalize_embeddings: bool = False) -> Any: ...

    def count_tokens(self, sentences: Sequence[str]) -> list[int]: ...

    def unknown_only(self, sentences: Sequence[str]) -> list[bool]: ...


def batch_invariant(encoder: Any) -> bool:
    """Whether `encoder` gives a sentence the same vector in any batch (`OnnxQueryEncoder.batch_invariant`: not an
    int8 graph); a torch `Encoder` masks the padding and does."""
    return bool(getattr(encoder, "batch_invariant", True))


def accelerator_present() -> bool:
    """Whether this machine shows a GPU that device "auto" would choose (an NVIDIA or AMD device file, Apple
    silicon), found without importing torch."""
    nvidia = Path("/dev/nvidiactl").exists() and os.environ.get("CUDA_VISIBLE_DEVICES") not in ("", "-1")
    return nvidia or Path("/dev/kfd").exists() or (sys.platform == "darwin" and platform.machine() == "arm64")


def exported_query_encoder(folder: ModelFolder, device: Any, precision: str | None) -> QueryEncoder | None:
    """The ONNX Runtime encoder of an exported folder (on the CPU, or device "auto"), or of a trained folder's query
    graph (on the CPU, or "auto" where no GPU shows), torch never imported. None: neither, another device or a
    precision other than auto or fp32 asked for, or a model the ONNX path cannot run: the torch `Encoder` then runs
    the folder's graph or weights."""
    device = str(device or "auto")
    if (precision or "auto") not in ("auto", "fp32") or device not in ("auto", "cpu"):
        return None
    graph = folder.has(ONNX_DIR, QUERY_MANIFEST) and (device == "cpu" or not accelerator_present())
    if not (folder.is_exported or graph):
        return None
    try:
        from dictembed.backends.onnx.query import OnnxQueryEncoder
    except ImportError:  # onnxruntime not installed: the torch Encoder says what to install
        return None
    if (reason := OnnxQueryEncoder.unsupported(folder)) is not None:  # a graph not trusted was warned of
        log.debug("%s: the torch encoder runs the folder (%s)", folder.path, reason)
        return None
    encoder = OnnxQueryEncoder.open(folder)
    log.debug("%s: queries encoded by ONNX Runtime (%s)", folder.path, encoder.layout.graph.relative_to(folder.path))
    return cast(QueryEncoder, encoder)


class UnreadableQueryError(DictEmbedError):
    """A query the encoder's tokenizer reads as unknown tokens only (`check_readable`): the `index` (from 0) of the
    first among the queries searched, its `text`, and the `name` the message gives it ("query N")."""

    def __init__(self, index: int, text: str, name: str | None = None) -> None:
        self.index, self.text = index, text
        shown = text if len(text) <= 40 else text[:40] + "..."
        super().__init__(
            f"{name or f'query {index + 1}'} ({shown!r}): the model's tokenizer reads none of it (only unknown "
            "tokens); describe the word in words"
        )

    def named(self, name: str) -> UnreadableQueryError:
        """The same error naming the query `name` (its place in a file: `FILE:LINE`)."""
        return UnreadableQueryError(self.index, self.text, name)


def check_readable(encoder: QueryEncoder, queries: Sequence[str]) -> None:
    """Refuse the first query that the encoder's tokenizer reads as unknown tokens only (an emoji, a word longer than
    its word pieces go), `UnreadableQueryError`: its vector would say nothing of it, yet rank words confidently."""
    reads = getattr(encoder, "unknown_only", None)  # an encoder of the caller's own may not tell
    if reads is not None and (unread := [i for i, unknown in enumerate(reads(queries)) if unknown]):
        raise UnreadableQueryError(unread[0], queries[unread[0]])


def as_rows(vectors: Any) -> np.ndarray:
    """Pooled vectors (a torch tensor on any device, or an array) as a 2-D float32 numpy array."""
    if hasattr(vectors, "detach"):
        vectors = vectors.detach().float().cpu().numpy()
    if isinstance(vectors, str | bytes):
        raise DictEmbedError(f"query vectors: an array or tensor of numbers, not {type(vectors).__name__}")
    try:
        rows = np.asarray(vectors, dtype=np.float32)
    except (ValueError, TypeError):  # text, None, rows of different lengths
        raise DictEmbedError("query vectors: an array or tensor of numbers, one row a vector") from None
    return rows[None] if rows.ndim == 1 else rows


def checked_rows(rows: np.ndarray, dim: int | None, unit: bool) -> np.ndarray:
    """Query `rows` (`as_rows`) refused in one line unless a matrix of finite vectors of `dim` dimensions (None: any);
    with `unit` (a space searched by cosine, where the direction alone counts) each scaled to unit length in
    float64, whose squares neither under- nor overflow as float32's do at 1e-25 or 1e37, a row of zeros refused."""
    dim = rows.shape[-1] if dim is None else dim
    if rows.ndim != 2 or rows.shape[1] != dim:
        raise DictEmbedError(f"query vectors of shape {rows.shape}; the entry space has {dim} dimensions")
    if not np.isfinite(rows).all():
        raise DictEmbedError("a query vector holds NaN or infinite values")
    if not unit:
        return rows
    norms = np.linalg.norm(rows.astype(np.float64), axis=1, keepdims=True)
    if (zero := np.flatnonzero(norms[:, 0] == 0)).size:
        raise DictEmbedError(f"query vector {int(zero[0])} is all zeros: it points nowhere")
    return (rows / norms).astype(np.float32)


# numpy's BLAS and torch's OpenMP threads each want every core: while torch's threads spin after an encoder
# pass, a multi-threaded BLAS call waits on them (a single search took 39 ms instead of 20 on 2 cores), so beside
# a torch encoder the search's numpy products run on one thread. ONNX Runtime's threads sleep between runs
# (`session_options`): beside it BLAS keeps every core (the coarse stage of a search 13.2 -> 9.6 ms on 2 cores).
@functools.cache
def _blas() -> ThreadpoolController:
    """The thread pools of the libraries loaded (found once: a scan takes about a millisecond)."""
    return ThreadpoolController()


def on_onnx_runtime(encoder: Any) -> bool:
    """Whether `encoder` runs on ONNX Runtime (whose threads sleep between runs), not torch."""
    return type(encoder).__module__.startswith("dictembed.backends.onnx")


def search_threads(encoder: Any) -> contextlib.AbstractContextManager:
    """The BLAS threads a search beside `encoder` may use: one beside a torch encoder, else all."""
    if on_onnx_runtime(encoder):
        return contextlib.nullcontext()
    return _blas().limit(limits=1, user_api="blas")
