"""Who gets `dictembed serve`'s model when: the one thread that runs it, searches before bulk encodes, queued
queries searched together, and a bulk encode cut into steps of bounded work. Work whose future is cancelled
before its turn (its client went away) is skipped, not computed."""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dictembed.backends.onnx import query
from dictembed.query_encoder import QueryEncoder
from dictembed.reverse_dictionary import Result, ReverseDictionary
from dictembed.search_options import DEFAULT_K, Filters

log = logging.getLogger("dictembed.serve")
T = TypeVar("T")
SEARCH = 0  # priority of searches, neighbours and every short call: first
BULK = 1  # priority of the steps of a bulk encode: when no search waits
STOP = 2  # priority of the thread's end: after every call already queued
COUNT_STEP = 16  # sentences whose tokens one step counts (2,000 characters each: about 40 ms on 2 cores)


class ModelThread:
    """The one thread that runs the server's model. PyTorch's OpenMP keeps a pool of threads for each thread
    that calls it, spinning for a while after each parallel region; model calls made from the web server's
    many worker threads raised several pools, which then fought for the cores (a search took 24 ms instead of
    17 on 2 cores). Calls run one at a time, as under a lock: a CPU gains nothing from concurrent forward
    passes. A waiting `SEARCH` call runs before any waiting `BULK` one; calls of one priority run in the order
    they came. A call whose future was cancelled while it waited is skipped (counted in `skipped`)."""

    def __init__(self) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Callable[[], None]]] = queue.PriorityQueue()
        self._order = itertools.count()
        self.skipped = 0
        self._lock = threading.Lock()  # the thread's start and end against a call queued meanwhile
        self._thread: threading.Thread | None = None
        self._ending = False  # a stop is queued
        self._start()

    def submit(self, priority: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue `fn(*args, **kwargs)` at `priority` (`SEARCH` or `BULK`); its future result."""
        future: Future[T] = Future()
        self._put(priority, future, fn, args, kwargs)
        return future

    def submit_after(
        self, ready: Future[Any], priority: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        """Queue `fn(*args, **kwargs)` at `priority` once `ready` is done (a one-off build that `fn` needs, made
        off this thread, which serves other calls meanwhile; `build_in_background`); its future result, which may
        be cancelled while it waits for either."""
        future: Future[T] = Future()
        ready.add_done_callback(lambda _: self._put(priority, future, fn, args, kwargs))  # now, when already done
        return future

    def _put(
        self, priority: int, future: Future[T], fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Queue the call that sets `future` to `fn(*args, **kwargs)`, or skips it when `future` is cancelled."""

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                self.skipped += 1
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as err:  # every error reaches its caller, and the thread goes on
                future.set_exception(err)
            else:
                future.set_result(result)

        with self._lock:
            self._queue.put((priority, next(self._order), run))
            if self._thread is None:  # ended by `stop`: an app served again starts it again
                self._start()

    @property
    def waiting(self) -> int:
        """How many calls wait for the thread (the one running not counted)."""
        return self._queue.qsize()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` run on the model's thread at `SEARCH` priority; its result or error."""
        return self.submit(SEARCH, fn, *args, **kwargs).result()

    @property
    def running(self) -> bool:
        """Whether the thread runs (from the start, and again from a call after `stop`, until `stop` ends it)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """End the thread once every call queued before has run (the app's shutdown calls this, so that a stopped
        server does not keep a thread holding its model); waits up to `timeout` seconds. A later call starts the
        thread again."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            if not self._ending:
                self._ending = True
                self._queue.put((STOP, next(self._order), _end))
        if threading.current_thread() is not thread:
            thread.join(timeout)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="dictembed-model", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            call = self._queue.get()[2]
            if call is not _end:
                call()
                continue
            with self._lock:
                if self._queue.empty():
                    self._thread, self._ending = None, False
                    return
                self._queue.put((STOP, next(self._order), _end))  # calls came after the stop: they run first


def _end() -> None:
    """The call that ends the model's thread (`ModelThread.stop`)."""


def build_in_background(build: Callable[[], object], name: str = "dictembed-build") -> Future[None]:
    """Run the one-off `build` on a daemon thread of its own, beside the model's thread, which goes on serving; its
    future, done once it has run. A build that fails is logged, and its future done all the same: whoever needs what
    it makes then makes it, or meets its error, itself."""
    future: Future[None] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            build()
        except Exception as err:
            log.warning("%s failed, and is made when first needed: %s: %s", name, type(err).__name__, err)
        finally:
            future.set_result(None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def prepare_synonyms(rd: ReverseDictionary) -> None:
    """Make what the first near-synonym search of `rd` makes once (`SynonymSearch.prepare`: for WordNet the rough
    projection of every definition, about 1 s and 53 MB); nothing for a space without entry vectors."""
    if rd.has_entry_vectors:
        rd.synonym_search.prepare()


MAX_SPECIAL_TOKENS = 4  # the most special tokens a tokenizer adds to one text ([CLS] ... [SEP], <s> ... </s>)


@dataclass(eq=False)
class QueuedQuery:
    """One queued search: its text, what it must be batched with (k and filters), its future results, and whether
    the encoder cut the text at its window (`truncated`: set before the results)."""

    text: str
    options: tuple[int, Filters]
    future: Future[list[Result]] = field(default_factory=Future)
    truncated: bool = False


class QueryBatcher:
    """Concurrent searches share the model: each request queues its query, and whichever of them the model's
    thread runs next searches every queued query with the same k and filters in one `search_many` (one encoder
    pass, one product with the entry matrix, which is read from memory once instead of once per query). A lone
    request runs at once, without waiting for company. A query whose future is cancelled before its batch
    runs is left out of it (counted in `skipped`)."""

    def __init__(self, rd: ReverseDictionary, model: ModelThread) -> None:
        self.rd, self.model = rd, model
        self.queue_lock = threading.Lock()
        self.pending: list[QueuedQuery] = []
        self.batches: deque[int] = deque(maxlen=1000)  # the sizes of the last batches run (tests, benchmarks)
        self.skipped = 0

    def submit(self, query: str, k: int = DEFAULT_K, filters: Filters | None = None) -> Future[list[Result]]:
        """Queue `query` for the model's thread; its future results (cancel it to drop the query unsearched)."""
        return self.queue(query, k, filters).future

    def queue(self, query: str, k: int = DEFAULT_K, filters: Filters | None = None) -> QueuedQuery:
        """Queue `query` for the model's thread (`submit`); the queued `QueuedQuery`. The filters' entry mask is
        computed here, before the model: a filter over every headword holds up nobody."""
        filters = filters or Filters()
        self.rd.filter_mask(filters)
        item = QueuedQuery(query, (k, filters))
        with self.queue_lock:
            self.pending.append(item)
        self.model.submit(SEARCH, self._answer, item)
        return item

    def search(self, query: str, k: int = DEFAULT_K, filters: Filters | None = None) -> list[Result]:
        """The results of `query`, searched with whatever queries wait with the same k and filters."""
        return self.submit(query, k, filters).result()

    def _answer(self, item: QueuedQuery) -> None:
        """On the model's thread: search `item` and every query queued with its options, unless an earlier batch
        took it."""
        with self.queue_lock:
            if not any(p is item for p in self.pending):
                return
            batch = [p for p in self.pending if p.options == item.options]
            self.pending = [p for p in self.pending if p.options != item.options]
        live = [p for p in batch if p.future.set_running_or_notify_cancel()]
        self.skipped += len(batch) - len(live)
        if live:
            self._run(live, *item.options)

    def _run(self, batch: list[QueuedQuery], k: int, filters: Filters) -> None:
        """Answer every query of `batch`; a failing batch is retried query by query, so an error stays with the
        query that caused it."""
        self.batches.append(len(batch))
        self._mark_truncated(batch)
        try:
            answers = self.rd.search_many([p.text for p in batch], k, filters)
        except Exception as err:
            if len(batch) == 1:
                batch[0].future.set_exception(err)
                return
            for p in batch:
                try:
                    p.future.set_result(self.rd.search(p.text, k, filters))
                except Exception as alone:
                    p.future.set_exception(alone)
            return
        for p, results in zip(batch, answers, strict=True):
            p.future.set_result(results)

    def _mark_truncated(self, batch: list[QueuedQuery]) -> None:
        """Set `truncated` on each query of `batch` longer than the encoder's window in tokens (the encoder's own
        count, on the model's thread, which owns its tokenizer); a text it cannot count is left to the search's
        own error. A text of fewer UTF-8 bytes than the window holds tokens is not counted: a token of these
        tokenizers (word pieces, sentence pieces, byte-level pieces) spans at least one byte (of the normalised
        text: the few compatibility characters NFKC spells out in many letters, e.g. U+FDFA, can be missed)."""
        window = self.rd.encoder.max_length
        prompt = len((getattr(self.rd.encoder, "default_prompt", None) or "").encode())
        longer = [p for p in batch if prompt + len(p.text.encode(errors="replace")) + MAX_SPECIAL_TOKENS > window]
        try:
            counts = self.rd.encoder.count_tokens([p.text for p in longer]) if longer else []
        except Exception:  # the search names what is wrong with the text
            return
        for p, count in zip(longer, counts, strict=True):
            p.truncated = count > window


class TokenCounter:
    """Sentences' tokens as the encoder reads them (after its default prompt, `count_tokens`), counted on the
    model's thread: that thread owns the tokenizer (a fast tokenizer refuses to serve two threads at once), and
    work beside the model's own threads stalls them. `COUNT_STEP` sentences make a step, so that counting a bulk
    encode holds up a search no longer than a step of encoding does."""

    def __init__(self, encoder: QueryEncoder) -> None:
        self.encoder = encoder
        self.window = self.encoder.max_length

    def count(self, sentences: Sequence[str]) -> list[int]:
        """Each sentence's tokens, special ones included, before the cut at the model's `window`."""
        return self.encoder.count_tokens(list(sentences))


def encode_chunks(tokens: Sequence[int], budget: int) -> list[list[int]]:
    """The sentences of a bulk encode (by index) as steps of at most `budget` tokens each (a longer sentence is a
    step alone), longest first, so that each step's sentences pad to about the same length."""
    order = sorted(range(len(tokens)), key=lambda i: -tokens[i])
    chunks: list[list[int]] = []
    used = 0
    for i in order:
        if not chunks or used + tokens[i] > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(i)
        used += tokens[i]
    return chunks


class _ThreadQuiet(logging.Filter):
    """Drops the records a thread logs while it is inside `quiet()`."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.local, "on", False)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        self.local.on = True
        try:
            yield
        finally:
            self.local.on = False


_ENCODER_QUIET = _ThreadQuiet()
# the loggers of the encoders' warning about cut sentences: `Encoder`'s (named, so that torch is not imported) and
# `OnnxQueryEncoder`'s
for _name in ("dictembed.encoder", query.__name__):
    logging.getLogger(_name).addFilter(_ENCODER_QUIET)


def encode_step(encoder: QueryEncoder, sentences: list[str], normalize: bool) -> Any:
    """One step of a bulk encode (on the model's thread): the vectors of `sentences`, with the encoder's warning
    about cut sentences held back (the request counts them once, for all its steps)."""
    with _ENCODER_QUIET.quiet():
        return encoder.encode(sentences, normalize_embeddings=normalize)
