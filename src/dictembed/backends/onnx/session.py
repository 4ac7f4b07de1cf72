"""ONNX Runtime sessions of an exported graph, without torch: the physical cores, the session options, a session
opened with a one-line error, the file an export's manifest names (or a trained folder's query graph, checked
against the weights it was made from), and batches run in order on worker threads.
`runtime.py` (the torch `Encoder`'s backbone) and `query.py` (the torch-free query encoder) share them."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dictembed.errors import ModelLoadError
from dictembed.extras import require
from dictembed.model_folder import ONNX_DIR, ONNX_MANIFEST, QUERY_MANIFEST, manifest_graph
from dictembed.record import file_sha256, update_sampled

log = logging.getLogger(__name__)

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
        raise ModelLoadError(f"ONNX model file {path} is corrupt or unreadable ({clipped(str(err), err)})") from None


def clipped(text: str, err: BaseException | None = None, limit: int = 200) -> str:
    """`text` (a library's error, of `err`) on one line for a one-line error: cut at a word boundary with "…" when
    longer than `limit` characters; the error's type name when it says nothing."""
    text = " ".join(text.split())
    if not text:
        return type(err).__name__ if err is not None else ""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


class BadExport(ModelLoadError):
    """An export whose manifest cannot be read, or whose graph is not the file its manifest names: never run, nor
    run around (the weights an export may keep are not what its folder answers with)."""


class ReplacedGraph(BadExport):
    """An export's graph is not the file its manifest was written with."""


def exported_file(folder: Path, manifest_name: str = ONNX_MANIFEST) -> tuple[Path, dict[str, Any]]:
    """The ONNX file a manifest in `onnx/` names (an export's, or a trained folder's query graph's), and the
    manifest. An export's manifest that does not parse or names no file of the onnx folder is a `BadExport`, its
    graph replaced since a `ReplacedGraph`; an export of an older version, whose manifest records no `file_print`,
    runs with one warning that its graph is not checked (as a trained folder's query graph without one does:
    `query_graph`)."""
    manifest_path = folder / ONNX_DIR / manifest_name
    error = BadExport if manifest_name == ONNX_MANIFEST else ModelLoadError
    try:
        manifest, file = manifest_graph(manifest_path)
    except ValueError as err:
        raise error(str(err)) from None
    graph = folder / ONNX_DIR / file
    if manifest_name == ONNX_MANIFEST:
        if not graph.is_file():
            raise error(f"{graph}: missing, though {manifest_path} names it")
        if graph_replaced(graph, manifest):
            raise ReplacedGraph(
                f"{graph} is not the graph {manifest_path} was written with (replaced or damaged since); export the "
                "model again"
            )
        if manifest.get("file_print") is None:
            warn_once(
                folder,
                "unchecked",
                "model folder %s: %s records no file_print (an export of an older version), so its graph %s is run "
                "unchecked: a graph replaced since would not be noticed; export the model again",
                folder,
                manifest_path.relative_to(folder),
                file,
            )
    return graph, manifest


def warn_once(folder: Path, what: str, message: str, *args: object) -> None:
    """Log `message` % `args` as a warning once per process for the folder and `what` it says."""
    key = (str(folder.resolve()), what)
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


def graph_print(graph: Path) -> str:
    """A digest of an ONNX file's size and sampled blocks (`record.update_sampled`), which its manifest records
    (`file_print`): a graph replaced since (another precision's, another model's) is never run in its place."""
    digest = hashlib.blake2b(b"onnx-graph", digest_size=20)
    update_sampled(digest, graph)
    return digest.hexdigest()


def graph_replaced(graph: Path, manifest: Mapping[str, Any]) -> bool:
    """Whether the manifest records a `file_print` that `graph` no longer has (a manifest written before it was
    recorded checks nothing: `exported_file` and `query_graph` say what becomes of its graph)."""
    named = manifest.get("file_print")
    return named is not None and named != graph_print(graph)


def graph_sources(folder: Path) -> list[Path]:
    """The files a query graph is made from: the backbone's `config.json` and its weight files, in name order."""
    return [folder / "config.json", *sorted(folder.glob("*.safetensors"))]


def weights_sha256(folder: Path) -> str:
    """The SHA-256 over the SHA-256 of each of `graph_sources` (by name): what a query graph records of the weights
    it was made from (about 0.3 s a GB of weights)."""
    digest = hashlib.sha256()
    for path in graph_sources(folder):
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


_digests: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}  # folder and its source files -> digest
_warned: set[tuple[str, str]] = set()  # folders and manifest digests warned about


def query_graph(folder: Path) -> tuple[Path, dict[str, Any]] | None:
    """A trained folder's query graph and its manifest (`exported_file`) where the manifest names the folder's
    weights as they are (`query_graph_matches`) and the graph is the file its manifest recorded (`file_print`);
    None for a folder without one, or with one of other weights or replaced since. A manifest of an older version
    records no print: its graph runs, with one warning saying it is unchecked and how to record it
    (`write_query_graph`), as an export of an older version does (`exported_file`)."""
    if not (folder / ONNX_DIR / QUERY_MANIFEST).is_file():
        return None
    try:
        graph = exported_file(folder, QUERY_MANIFEST)
    except ModelLoadError as err:  # a manifest that does not read: the weights answer, 8x slower, so say why
        warn_once(
            folder,
            "unread",
            "model folder %s: its query graph cannot be used (%s); the weights answer instead",
            folder,
            err,
        )
        return None
    where = f"{ONNX_DIR}/{graph[0].name}"
    if graph[1].get("file_print") is None:
        if not query_graph_matches(folder, graph[1]):  # of other weights: never run, whatever its print
            return None
        warn_once(
            folder,
            "no file_print",
            "model folder %s: its query graph (%s) has no file_print in %s/%s (written by an older version), so it "
            "runs unchecked: a graph replaced since would not be noticed; to record it, write the graph anew: "
            "python -c \"from dictembed.backends.onnx.export import write_query_graph; write_query_graph('%s')\"",
            folder,
            where,
            ONNX_DIR,
            QUERY_MANIFEST,
            folder,
        )
        return graph
    if graph_replaced(*graph):
        warn_once(
            folder,
            "file_print",
            "model folder %s: its query graph (%s) is not the file its manifest was written with; the weights "
            "answer instead",
            folder,
            where,
        )
        return None
    return graph if query_graph_matches(folder, graph[1]) else None


def query_graph_matches(folder: Path, manifest: dict[str, Any]) -> bool:
    """Whether a query graph's manifest names the folder's weights as they are (`weights_sha256`, computed once per
    state of the files); a graph of other weights is logged once and never run."""
    sources = [p for p in graph_sources(folder) if p.is_file()]
    files = tuple((p.name, (stat := p.stat()).st_size, stat.st_mtime_ns) for p in sources)
    if len(files) < 2:  # no weights beside it: the load that follows names what is missing
        return False
    key = (str(folder.resolve()), files)
    if key not in _digests:
        _digests[key] = weights_sha256(folder)
    named = str(manifest.get("weights_sha256"))
    if named == _digests[key]:
        return True
    warn_once(
        folder,
        named,
        "model folder %s: its query graph (%s/%s) was made from other weights; the weights answer instead",
        folder,
        ONNX_DIR,
        QUERY_MANIFEST,
    )
    return False


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int, pool: ThreadPoolExecutor | None = None
) -> Iterator[R]:
    """`fn` of each item, in order, up to `workers` at once on worker threads (those of `pool`, kept for the next
    call; None: a pool of this call's own). The items are drawn here, on the caller's thread, in order, at most
    2 x `workers` ahead of the results. On an error or an interrupt the items not yet started are dropped, not run,
    and those running are waited for."""
    own = pool is None
    runner = ThreadPoolExecutor(workers, thread_name_prefix="dictembed-encode") if pool is None else pool
    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
            pending.append(runner.submit(fn, item))
        while pending:
            yield pending.popleft().result()
    finally:
        if own:
            runner.shutdown(wait=True, cancel_futures=True)
        else:
            futures.wait([future for future in pending if not future.cancel()])


def graph_feeds(inputs: Iterable[str], batch: Mapping[str, Any]) -> dict[str, Any]:
    """A tokenised batch (torch tensors by name) as the int64 numpy feeds of a graph's `inputs`; an input the batch
    lacks (token_type_ids of a tokenizer without them) is zeros shaped as input_ids."""
    shape = tuple(batch["input_ids"].shape)
    return {
        name: np.zeros(shape, np.int64) if batch.get(name) is None else batch[name].numpy().astype(np.int64)
        for name in inputs
    }


class BatchWorkers:
    """A backbone whose `Encoder.encode` runs `threads` batches at once (`run_batches`), each on a worker thread
    that `on_worker` tells apart (its calls run on a single-threaded session, or a stream, of its own)."""

    _local: threading.local

    def on_worker(self) -> bool:
        """Whether this thread runs a batch of `run_batches`."""
        return bool(getattr(self._local, "worker", False))

    @contextlib.contextmanager
    def worker(self) -> Iterator[None]:
        """Calls from this thread run as a worker's while inside."""
        before, self._local.worker = self.on_worker(), True
        try:
            yield
        finally:
            self._local.worker = before

    def run_batches(
        self,
        forward: Callable[[Any], Any],
        batches: Iterable[Any],
        threads: int,
        contexts: Callable[[], tuple[contextlib.AbstractContextManager, ...]] = tuple,
    ) -> Iterator[Any]:
        """`forward` of each batch, in order, up to `threads` at once on worker threads, each run as a worker inside
        `contexts()` (per-thread state such as the grad mode and autocast). The batches are drawn here, on the
        caller's thread, in order. On an error or an interrupt the batches not yet started are dropped, not run."""

        def run(batch: Any) -> Any:
            with contextlib.ExitStack() as stack:
                for context in (*contexts(), self.worker()):
                    stack.enter_context(context)
                return forward(batch)

        return ordered_map(run, batches, threads)
