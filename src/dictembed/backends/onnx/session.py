"""ONNX Runtime sessions of an exported graph, without torch: the physical cores, the session options, a session
opened with a one-line error, the file an export's manifest names, and batches run in order on worker threads.
`runtime.py` (the torch `Encoder`'s backbone) and `query.py` (the torch-free query encoder) share them."""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from dictembed.errors import ModelLoadError
from dictembed.extras import require
from dictembed.model_folder import ONNX_DIR, ONNX_MANIFEST

T = TypeVar("T")
R = TypeVar("R")


def physical_cores() -> int:
    """The physical cores this process may use: its CPUs divided by the hyper-threads per core, at least 1."""
    logical = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return logical
    per_core = 0
    for part in siblings.split(","):
        low, _, high = part.partition("-")
        per_core += int(high or low) - int(low) + 1
    return max(1, logical // max(1, per_core))


def session_options(threads: int) -> Any:
    """ORT session options: every graph optimisation, `threads` intra-op threads, idle threads asleep."""
    ort = require("onnx", "onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    # Idle threads sleep instead of spinning between runs: +6 % int8 sentences/s on 2 cores (each batch's
    # tokenisation and pooling run on the Python thread in between), and no CPU burnt while idle.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def open_session(path: Path, threads: int) -> Any:
    """An ORT CPU session of the graph `path` with `threads` intra-op threads; a missing or unreadable file is a
    one-line `ModelLoadError` naming it."""
    if not path.is_file():
        raise ModelLoadError(f"ONNX model file {path} is missing")
    ort = require("onnx", "onnxruntime")
    try:
        options = session_options(threads)
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types (Fail, InvalidProtobuf, ...)
        detail = " ".join(str(err).split())[:200] or type(err).__name__
        raise ModelLoadError(f"ONNX model file {path} is corrupt or unreadable ({detail})") from None


def exported_file(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The ONNX file an export's manifest names, and the manifest."""
    manifest_path = folder / ONNX_DIR / ONNX_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        file = str(manifest["file"])
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ModelLoadError(f"{manifest_path} is corrupt ({type(err).__name__}: {err})") from None
    if Path(file).name != file or file in ("", ".", ".."):
        raise ModelLoadError(f"{manifest_path}: file {file!r} is not a file name in the onnx folder")
    return folder / ONNX_DIR / file, manifest


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """`fn` of each item, in order, up to `workers` at once on worker threads. The items are drawn here, on the
    caller's thread, in order, at most 2 x `workers` ahead of the results. On an error or an interrupt the items
    not yet started are dropped, not run."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="dictembed-encode")
    try:
        pending: deque[Future[R]] = deque()
        for item in items:
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
            pending.append(pool.submit(fn, item))
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
