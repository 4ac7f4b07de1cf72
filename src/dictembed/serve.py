"""`dictembed serve`: the reverse dictionary as a web page and a JSON API (FastAPI + uvicorn).

Endpoints (the model is loaded once, when the app is created):
- `GET /` the search page (`static/index.html`: one file, no external resources);
- `GET /health` -> {"status": "ok", "model", "entries", "results", "score_kind", "dictionary", "definitions"};
- `GET /api/reverse?q=...&k=10[&pos=n&pattern=gir*&words=single]` -> {"query", "model", "entries",
  "score_kind", "results": [{"words", "score", "definitions": {word: [...]}, "pos": {word: [...]}}]};
- `POST /api/encode` with {"sentences": [...], "normalize": false} -> {"embeddings": [[...]], "dim", "model"}.

Limits: a query or sentence holds at most 2,000 characters (longer is refused, not truncated), k lies in
1..100, one request encodes at most 256 sentences, and a request body holds at most 8 MiB. Every error is a
JSON object {"error": message}: 400 invalid UTF-8 in the query string, 404 unknown path, 405 wrong method,
413 a body over the limit, 422 a missing, empty, over-long or out-of-range parameter, a bad pattern or an
invalid JSON body; 500 only for a bug. HEAD is answered wherever GET is.

One request never stalls the others: patterns run on RE2 (linear time), and a search's filters are computed
before it takes the model, whose lock covers only the encoder pass and the product with the entry matrix.
No answer names a path of the machine: the dictionary appears by file name only.

FastAPI and uvicorn come with the `serve` extra; they are imported only when a server is made, so a
missing extra is one line naming `pip install "dictembed[serve]"`.
"""

import contextlib
import copy
import json
import logging
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import DEFAULT_K, MAX_PATTERN_CHARS, WORD_COUNTS, WordCount

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 2000
MAX_K = 100
MAX_SENTENCES = 256
MAX_REQUEST_LINE = 1 << 20  # h11's buffer: an over-long query reaches the app and gets a JSON 422
# 256 sentences of 2,000 characters, each written as a 12-byte JSON escape pair at worst (6 MB), and room to spare
MAX_BODY_BYTES = 8 << 20


def page_html() -> str:
    """The search page, from the package's static folder."""
    return resources.files("dictembed").joinpath("static").joinpath("index.html").read_text(encoding="utf-8")


def valid_utf8_query(raw: bytes) -> bool:
    """Whether a raw query string decodes, after percent-decoding, as UTF-8."""
    try:
        urllib.parse.unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def validation_message(errors: list[dict[str, Any]]) -> str:
    """FastAPI's validation errors as one line: `k: Input should be less than or equal to 100; ...`."""
    parts = []
    for error in errors:
        loc = [str(x) for x in error.get("loc", ())]
        where = ".".join(loc[1:] if len(loc) > 1 and loc[0] in ("query", "body") else loc) or "request"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


class QueryBatcher:
    """Concurrent searches share the model: each request queues its query, and whoever holds the model next
    searches every queued query with the same options in one `search_many` (one encoder pass, one product
    with the entry matrix, which is read from memory once instead of once per query). A lone request runs at
    once, without waiting for company."""

    def __init__(self, rd: ReverseDictionary, lock: threading.Lock) -> None:
        self.rd, self.model_lock = rd, lock
        self.queue_lock = threading.Lock()
        self.pending: list[dict[str, Any]] = []
        self.batches: deque[int] = deque(maxlen=1000)  # the sizes of the last batches run (tests, benchmarks)

    def search(self, query: str, **options: Any) -> list[Any]:
        item: dict[str, Any] = {"query": query, "options": options, "done": False}
        filters = {key: options[key] for key in ("pos", "pattern", "words") if key in options}
        self.rd.filter_mask(**filters)  # before the model lock: a filter over every headword holds up nobody
        with self.queue_lock:
            self.pending.append(item)
        with self.model_lock:
            if not item["done"]:  # not yet answered by another request's batch
                with self.queue_lock:
                    batch = [p for p in self.pending if p["options"] == options]
                    self.pending = [p for p in self.pending if p["options"] != options]
                self._run(batch, options)
        if "error" in item:
            raise item["error"]
        return item["results"]

    def _run(self, batch: list[dict[str, Any]], options: dict[str, Any]) -> None:
        """Answer every item of `batch`; a failing batch is retried query by query, so an error stays with the
        query that caused it."""
        self.batches.append(len(batch))
        try:
            for item, results in zip(batch, self.rd.search_many([p["query"] for p in batch], **options), strict=True):
                item["results"] = results
        except Exception:
            if len(batch) == 1:
                raise
            for item in batch:
                try:
                    item["results"] = self.rd.search(item["query"], **options)
                except Exception as err:
                    item["error"] = err
        finally:
            for item in batch:
                item["done"] = True


def create_app(
    model_path: str | Path | None = None,
    reverse_dictionary: ReverseDictionary | None = None,
    device: str | None = None,
    precision: str | None = "auto",
) -> Any:
    """The FastAPI app over one model: a saved model folder (loaded on `device`, "auto"/None: the best one,
    with the compute `precision`), or an already loaded `ReverseDictionary`."""
    # Any: imported here (an optional extra), their classes are used as annotations and bases below
    fastapi: Any = require("serve", "fastapi")
    responses = require("serve", "fastapi.responses")
    exceptions = require("serve", "fastapi.exceptions")
    starlette_exceptions = require("serve", "starlette.exceptions")
    pydantic: Any = require("serve", "pydantic")
    if reverse_dictionary is None:
        if model_path is None:
            raise DictEmbedError("create_app needs a model folder or a ReverseDictionary")
        reverse_dictionary = ReverseDictionary.load(model_path, device=device, precision=precision)
    rd = reverse_dictionary.prepare()
    lock = threading.Lock()  # one model call at a time: a CPU gains nothing from concurrent forward passes
    batcher = QueryBatcher(rd, lock)
    page = page_html()

    def error(status: int, message: str) -> Any:
        return responses.JSONResponse({"error": message}, status_code=status)

    class EncodeRequest(pydantic.BaseModel):
        sentences: Annotated[
            list[Annotated[str, pydantic.StringConstraints(max_length=MAX_QUERY_CHARS)]],
            pydantic.Field(min_length=1, max_length=MAX_SENTENCES),
        ]
        normalize: bool = False

    app = fastapi.FastAPI(title="dictembed reverse dictionary", docs_url=None, redoc_url=None)
    app.state.batcher = batcher
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    @app.exception_handler(starlette_exceptions.HTTPException)
    async def http_error(request: fastapi.Request, exc: Any) -> Any:
        detail = f"not found: {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        return error(exc.status_code, detail)

    @app.exception_handler(exceptions.RequestValidationError)
    async def invalid_request(request: fastapi.Request, exc: Any) -> Any:
        return error(422, validation_message(exc.errors()))

    @app.exception_handler(DictEmbedError)
    async def bad_input(request: fastapi.Request, exc: DictEmbedError) -> Any:
        return error(422, str(exc))

    @app.exception_handler(Exception)
    async def internal_error(request: fastapi.Request, exc: Exception) -> Any:
        log.exception("internal error on %s", request.url.path)
        return error(500, f"internal error ({type(exc).__name__})")

    @app.middleware("http")
    async def reject_invalid_utf8(request: fastapi.Request, call_next: Any) -> Any:
        if not valid_utf8_query(request.scope.get("query_string", b"")):
            return error(400, "the query string is not valid UTF-8")
        return await call_next(request)

    @app.api_route("/", methods=["GET", "HEAD"], response_class=responses.HTMLResponse)
    def index() -> Any:
        return responses.HTMLResponse(page)

    @app.api_route("/health", methods=["GET", "HEAD"])
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": rd.name,
            "entries": len(rd.space),
            "results": len(rd.groups),
            "score_kind": rd.score_kind,
            "dictionary": rd.public_dictionary,
            "definitions": rd.dictionary is not None,
        }

    @app.api_route("/api/reverse", methods=["GET", "HEAD"])
    def reverse(
        q: Annotated[str, fastapi.Query(max_length=MAX_QUERY_CHARS, description="the description")],
        k: Annotated[int, fastapi.Query(ge=1, le=MAX_K)] = DEFAULT_K,
        pos: Annotated[str | None, fastapi.Query(max_length=20)] = None,
        pattern: Annotated[str | None, fastapi.Query(max_length=MAX_PATTERN_CHARS)] = None,
        words: WordCount = WORD_COUNTS[0],
    ) -> Any:
        query = q.strip()
        if not query:
            return error(422, "q: the query is empty")
        results = batcher.search(query, k=k, pos=pos, pattern=pattern, words=words)
        return {
            "query": query,
            "model": rd.name,
            "entries": len(rd.space),
            "score_kind": rd.score_kind,
            "results": [r.to_dict() for r in results],
        }

    @app.post("/api/encode")
    def encode(body: EncodeRequest) -> dict[str, Any]:
        with lock:
            vectors = rd.encoder.encode(body.sentences, normalize_embeddings=body.normalize)
        return {"embeddings": vectors.tolist(), "dim": int(vectors.shape[1]), "model": rd.name}

    return app


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused with 413, by its Content-Length up front, or
    as it arrives when it has none (chunked), before the app has read more than the limit."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        received, started = 0, False

        async def limited_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:  # an HTTPException: FastAPI's body parsing passes it on as it is
                raise require("serve", "starlette.exceptions").HTTPException(413, self.message)
            return message

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except Exception as err:  # the limit hit outside a route's error handlers
            if getattr(err, "status_code", None) != 413 or started:
                raise
            await self._refuse(send)

    @property
    def message(self) -> str:
        return f"request body over {self.limit} bytes"

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"error": self.message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def check_port(host: str, port: int) -> None:
    """Refuse, with one line, a host and port this process cannot listen on (in use, not permitted)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as err:
            raise DictEmbedError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None


def server(app: Any, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> Any:
    """A uvicorn server for `app` (not started); its access log goes to stderr, like all logging here."""
    uvicorn = require("serve", "uvicorn")
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config,
        h11_max_incomplete_event_size=MAX_REQUEST_LINE,
    )
    return uvicorn.Server(config)


def run_server(
    model_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    device: str | None = None,
    precision: str | None = "auto",
) -> None:
    """Load the model, then serve until interrupted: Ctrl-C is the normal way to stop, not an error. A port
    that cannot be listened on is a one-line error before the model is loaded."""
    check_port(host, port)
    app = create_app(model_path, device=device, precision=precision)
    log.info("serving %s on http://%s:%d", model_path, host, port)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn shuts down gracefully, then re-raises the Ctrl-C
        server(app, host, port).run()


@contextlib.contextmanager
def background_server(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Serve `app` from a daemon thread while the block runs; yields the base URL (port 0: a free port)."""
    running = server(app, host, port, log_level="warning")
    thread = threading.Thread(target=running.run, name="dictembed-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not running.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise DictEmbedError(f"the server did not start on {host}:{port}")
        time.sleep(0.05)
    bound = running.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        running.should_exit = True
        thread.join(timeout)
