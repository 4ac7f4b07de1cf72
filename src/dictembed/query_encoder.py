"""The encoder a reverse dictionary queries with: what a search and a server need of it (`QueryEncoder`), which one
a model folder gets (`exported_query_encoder`: ONNX Runtime alone for an export, else the torch `Encoder`), its
vectors as rows for the search (`as_rows`), and the BLAS threads a search may use beside it (`search_threads`)."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, cast

import numpy as np
from threadpoolctl import ThreadpoolController

from dictembed.model_folder import ModelFolder

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


def exported_query_encoder(folder: ModelFolder, device: Any, precision: str | None) -> QueryEncoder | None:
    """The ONNX Runtime encoder of an exported folder, torch never imported (None: no export, another device or
    precision asked for, or a model the ONNX path cannot run: the torch `Encoder` then runs the folder's graph)."""
    on_cpu = str(device or "auto") in ("auto", "cpu") and (precision or "auto") in ("auto", "fp32")
    if not folder.is_exported or not on_cpu:
        return None
    try:
        from dictembed.backends.onnx.query import OnnxQueryEncoder
    except ImportError:  # onnxruntime not installed: the torch Encoder says what to install
        return None
    if (reason := OnnxQueryEncoder.unsupported(folder.path)) is not None:
        log.debug("%s: the torch encoder runs the export (%s)", folder.path, reason)
        return None
    return cast(QueryEncoder, OnnxQueryEncoder.open(folder.path))


def as_rows(vectors: Any) -> np.ndarray:
    """Pooled vectors (a torch tensor on any device, or an array) as a 2-D float32 numpy array."""
    if hasattr(vectors, "detach"):
        vectors = vectors.detach().float().cpu().numpy()
    rows = np.asarray(vectors, dtype=np.float32)
    return rows[None] if rows.ndim == 1 else rows


# numpy's BLAS and torch's OpenMP threads each want every core: while torch's threads spin after an encoder
# pass, a multi-threaded BLAS call waits on them (a single search took 39 ms instead of 20 on 2 cores), so beside
# a torch encoder the search's numpy products run on one thread. ONNX Runtime's threads sleep between runs
# (`session_options`): beside it BLAS keeps every core (the coarse stage of a search 13.2 -> 9.6 ms on 2 cores).
@functools.cache
def _blas() -> ThreadpoolController:
    """The thread pools of the libraries loaded (found once: a scan takes about a millisecond)."""
    return ThreadpoolController()


def search_threads(encoder: Any) -> contextlib.AbstractContextManager:
    """The BLAS threads a search beside `encoder` may use: one beside a torch encoder, else all."""
    if type(encoder).__module__.startswith("dictembed.backends.onnx"):
        return contextlib.nullcontext()
    return _blas().limit(limits=1, user_api="blas")
