"""`dictembed serve`: the reverse dictionary as a web page and a JSON API (FastAPI + uvicorn).

Endpoints (the model is loaded once, when the app is created):
- `GET /` the search page (`static/index.html`: one file, no external resources);
- `GET /health` -> {"status": "ok", "model", "entries", "candidates", "results", "score_kind", "dictionary",
  "definitions", "chinese", "scripts"} (`candidates`: the entries a search may list, see `--min-frequency`);
- `GET /api/reverse?q=...&k=10[&pos=n&pattern=gir*&words=single&length=5|min_length=4&max_length=6&initial=g
  &pinyin=sc&script=any|cjk|latin&mode=auto|describe|similar&sort=relevance|alphabet|length]` -> {"query", "mode",
  "entry", "model", "entries", "score_kind", "results": [{"words", "score", "definitions": {word: [...]},
  "pos": {word: [...]}}]}; in mode auto a query that is an entry lists its near-synonyms
  (`ReverseDictionary.neighbours`), else it is described;
- `POST /api/encode` with {"sentences": [...], "normalize": false} -> {"embeddings": [[...]], "dim", "model"};
- `GET /docs` (Swagger UI) and `GET /openapi.json`: the API, documented.

Limits: a query or sentence holds at most 2,000 characters (longer is refused, not truncated), k lies in
1..100, one request encodes at most 256 sentences, and a request body holds at most 8 MiB. Every error is a
JSON object {"error": message}: 400 invalid UTF-8 in the query string, 404 unknown path, 405 wrong method,
413 a body over the limit, 422 a missing, empty, over-long or out-of-range parameter, a bad pattern or an
invalid JSON body; 500 only for a bug. HEAD is answered wherever GET is.

One request never stalls the others: patterns run on RE2 (linear time), and a search's filters are computed
before it reaches the model, whose one thread runs only the encoder pass and the product with the entry matrix.
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
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

from dictembed import __version__
from dictembed.cjk import MAX_PINYIN_LETTERS, looks_chinese
from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import (
    DEFAULT_K,
    MAX_INITIAL_CHARS,
    MAX_PATTERN_CHARS,
    MAX_WORD_LENGTH,
    SCRIPTS,
    WORD_COUNTS,
    Ranking,
    Script,
    SearchMode,
    SortOrder,
    WordCount,
    length_bounds,
    word_length,
    word_script,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_QUERY_CHARS = 2000
MAX_K = 100
MAX_SENTENCES = 256
MAX_REQUEST_LINE = 1 << 20  # h11's buffer: an over-long query reaches the app and gets a JSON 422
# 256 sentences of 2,000 characters, each written as a 12-byte JSON escape pair at worst (6 MB), and room to spare
MAX_BODY_BYTES = 8 << 20
FILTER_KEYS = ("pos", "pattern", "words", "min_length", "max_length", "initial", "pinyin", "script")
API_DESCRIPTION = """Describe a word and get the words (a reverse dictionary), or give a word and get its
near-synonyms. Every error is a JSON object `{"error": message}` of one line. The search page is at `/`."""


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


def sort_results(results: list[Any], order: str) -> list[Any]:
    """`results` as ranked (`relevance`), by their first word (`alphabet`), or by its length in letters and
    then alphabetically (`length`)."""

    def first(result: Any) -> str:
        return result.words[0] if result.words else ""

    if order == "alphabet":
        return sorted(results, key=lambda r: (first(r).casefold(), first(r)))
    if order == "length":
        return sorted(results, key=lambda r: (word_length(first(r)), first(r).casefold(), first(r)))
    return results


class ModelThread:
    """The one thread that runs the server's model. PyTorch's OpenMP keeps a pool of threads for each thread
    that calls it, spinning for a while after each parallel region; model calls made from the web server's
    many worker threads raised several pools, which then fought for the cores (a search took 24 ms instead of
    17 on 2 cores). Calls run one at a time, in the order they come, as under a lock: a CPU gains nothing from
    concurrent forward passes."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dictembed-model")

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` run on the model's thread once the calls before it are done; its result or error."""
        return self._executor.submit(fn, *args, **kwargs).result()


class QueryBatcher:
    """Concurrent searches share the model: each request queues its query, and whichever of them the model's
    thread runs next searches every queued query with the same options in one `search_many` (one encoder pass,
    one product with the entry matrix, which is read from memory once instead of once per query). A lone
    request runs at once, without waiting for company."""

    def __init__(self, rd: ReverseDictionary, model: ModelThread) -> None:
        self.rd, self.model = rd, model
        self.queue_lock = threading.Lock()
        self.pending: list[dict[str, Any]] = []
        self.batches: deque[int] = deque(maxlen=1000)  # the sizes of the last batches run (tests, benchmarks)

    def search(self, query: str, **options: Any) -> list[Any]:
        item: dict[str, Any] = {"query": query, "options": options, "done": False}
        filters = {key: options[key] for key in FILTER_KEYS if key in options}
        self.rd.filter_mask(**filters)  # before the model: a filter over every headword holds up nobody
        with self.queue_lock:
            self.pending.append(item)
        self.model.call(self._answer, item, options)
        if "error" in item:
            raise item["error"]
        return item["results"]

    def _answer(self, item: dict[str, Any], options: dict[str, Any]) -> None:
        """On the model's thread: search `item` and every query queued with the same options, unless an
        earlier batch answered it."""
        if item["done"]:
            return
        with self.queue_lock:
            batch = [p for p in self.pending if p["options"] == options]
            self.pending = [p for p in self.pending if p["options"] != options]
        self._run(batch, options)

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
    ranking: Ranking | None = None,
) -> Any:
    """The FastAPI app over one model: a saved model folder (loaded on `device`, "auto"/None: the best one,
    with the compute `precision` and the score's weights `ranking`), or an already loaded `ReverseDictionary`."""
    # Any: imported here (an optional extra), their classes are used as annotations and bases below
    fastapi: Any = require("serve", "fastapi")
    responses = require("serve", "fastapi.responses")
    exceptions = require("serve", "fastapi.exceptions")
    starlette_exceptions = require("serve", "starlette.exceptions")
    pydantic: Any = require("serve", "pydantic")
    model = ModelThread()
    if reverse_dictionary is None:
        if model_path is None:
            raise DictEmbedError("create_app needs a model folder or a ReverseDictionary")
        reverse_dictionary = model.call(ReverseDictionary.load, model_path, device, precision, ranking=ranking)
    rd = model.call(reverse_dictionary.prepare)
    chinese = looks_chinese(rd.space.words[:5000])  # the page offers the pinyin filter
    scripts = Counter(map(word_script, rd.space.words))  # the page offers the script filter when there are two
    batcher = QueryBatcher(rd, model)
    page = page_html()

    def error(status: int, message: str) -> Any:
        return responses.JSONResponse({"error": message}, status_code=status)

    class EncodeRequest(pydantic.BaseModel):
        sentences: Annotated[
            list[Annotated[str, pydantic.StringConstraints(max_length=MAX_QUERY_CHARS)]],
            pydantic.Field(min_length=1, max_length=MAX_SENTENCES),
        ]
        normalize: bool = pydantic.Field(False, description="scale every embedding to unit length")

    class ApiError(pydantic.BaseModel):
        error: str = pydantic.Field(description="what was wrong, in one line")

    class ResultRow(pydantic.BaseModel):
        words: list[str] = pydantic.Field(description="the words of entries with identical vectors")
        score: float = pydantic.Field(
            description="cosine similarity, mixed with the best single definition's and plus the word-frequency "
            "prior as score_kind names them (or probability, see score_kind)"
        )
        definitions: dict[str, list[str]] = pydantic.Field(
            description="word -> its definitions, in sense order, those of the `pos` filter first"
        )
        pos: dict[str, list[str | None]] = pydantic.Field(description="word -> the part of speech of each")

    class ReverseAnswer(pydantic.BaseModel):
        query: str
        mode: str = pydantic.Field(description="describe, or similar: the near-synonyms of `entry`")
        entry: str | None = pydantic.Field(description="the entry whose neighbours are listed (mode similar)")
        model: str
        entries: int
        score_kind: str = pydantic.Field(
            description="cosine, with +definition ((cosine + w x the cosine to the entry's best single "
            "definition) / (1 + w)) and +frequency (+ weight x the word's Zipf frequency) when they are in use; or "
            "probability for a space without a matrix"
        )
        results: list[ResultRow]

    class EncodeAnswer(pydantic.BaseModel):
        embeddings: list[list[float]]
        dim: int
        model: str

    def documented(model: Any, errors: dict[int, str]) -> dict[int | str, dict[str, Any]]:
        """OpenAPI responses: `model` for 200 and `{"error"}` for each status of `errors` (documentation only)."""
        return {
            200: {"model": model},
            **{code: {"model": ApiError, "description": why} for code, why in errors.items()},
        }

    app = fastapi.FastAPI(
        title="dictembed reverse dictionary",
        version=__version__,
        description=API_DESCRIPTION,
        docs_url="/docs",
        redoc_url=None,
    )
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

    def get_and_head(path: str, **options: Any) -> Callable[[Any], Any]:
        """Route GET (documented) and HEAD (kept out of the schema: one operation a path) to one endpoint."""

        def register(endpoint: Any) -> Any:
            app.add_api_route(path, endpoint, methods=["GET"], **options)
            app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)
            return endpoint

        return register

    @get_and_head("/", response_class=responses.HTMLResponse, include_in_schema=False)
    def index() -> Any:
        return responses.HTMLResponse(page)

    @get_and_head(
        "/health",
        summary="The model served",
        description="Its name, entry count, result count after grouping, score kind and dictionary, and "
        "whether its words are Chinese (the page then offers the pinyin filter), and how many entries are "
        "written in CJK characters and in Latin letters (with both, the page offers the script filter).",
    )
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "model": rd.name,
            "entries": len(rd.space),
            "candidates": len(rd.space) if rd.candidates is None else int(rd.candidates.sum()),
            "results": len(rd.groups),
            "score_kind": rd.score_kind,
            "dictionary": rd.public_dictionary,
            "definitions": rd.dictionary is not None,
            "chinese": chinese,
            "scripts": {name: scripts[name] for name in SCRIPTS[1:]},
        }

    @get_and_head(
        "/api/reverse",
        summary="Words for a description, or words like a word",
        description=(
            "Ranks the dictionary's entries for a description (`q=a long-necked African animal`). In mode `auto` "
            "a query that is itself an entry (`q=quick`, case-insensitive) lists the entries nearest to its "
            "entry vector instead, itself left out: its near-synonyms (`mode: similar` in the answer). Entries "
            "with identical vectors are one result. Filters keep the words that pass all of them."
        ),
        responses=documented(
            ReverseAnswer,
            {
                400: "the query string is not valid UTF-8",
                422: "a missing, empty, over-long or out-of-range parameter, a bad pattern, length with "
                "min_length/max_length, min_length over max_length, or mode similar for a query that is no entry",
            },
        ),
    )
    def reverse(
        q: Annotated[
            str,
            fastapi.Query(
                max_length=MAX_QUERY_CHARS,
                description="the description, or a word (see mode)",
                examples=["a long-necked African animal"],
            ),
        ],
        k: Annotated[int, fastapi.Query(ge=1, le=MAX_K, description="how many results")] = DEFAULT_K,
        pos: Annotated[
            str | None, fastapi.Query(max_length=20, description="part of speech: n, v, a, r (or noun, verb, ...)")
        ] = None,
        pattern: Annotated[
            str | None,
            fastapi.Query(max_length=MAX_PATTERN_CHARS, description="a prefix (g), a glob (gir*) or a /regex/"),
        ] = None,
        words: Annotated[
            WordCount, fastapi.Query(description="single words, phrases (several words) or any")
        ] = WORD_COUNTS[0],
        length: Annotated[
            int | None,
            fastapi.Query(
                ge=1,
                le=MAX_WORD_LENGTH,
                description="exactly this many letters (letters and digits; spaces and hyphens do not count)",
            ),
        ] = None,
        min_length: Annotated[
            int | None, fastapi.Query(ge=1, le=MAX_WORD_LENGTH, description="at least this many letters")
        ] = None,
        max_length: Annotated[
            int | None, fastapi.Query(ge=1, le=MAX_WORD_LENGTH, description="at most this many letters")
        ] = None,
        initial: Annotated[
            str | None,
            fastapi.Query(
                max_length=MAX_INITIAL_CHARS, description="the first letter(s), case-insensitive, taken literally"
            ),
        ] = None,
        pinyin: Annotated[
            str | None,
            fastapi.Query(
                max_length=MAX_PINYIN_LETTERS,
                description="a Chinese word's syllables start with these letters in order (sc: 使出); needs "
                "dictembed[zh]",
            ),
        ] = None,
        script: Annotated[
            Script,
            fastapi.Query(
                description="cjk: only words written in CJK characters (the Chinese of a merged dictionary); latin: "
                "only words in Latin letters (its English); any"
            ),
        ] = SCRIPTS[0],
        mode: Annotated[
            SearchMode,
            fastapi.Query(
                description="auto: words like q when q is an entry, else a description; describe; similar "
                "(q must be an entry)"
            ),
        ] = "auto",
        sort: Annotated[
            SortOrder, fastapi.Query(description="relevance, alphabet (by first word) or length (then alphabet)")
        ] = "relevance",
    ) -> Any:
        query = q.strip()
        if not query:
            return error(422, "q: the query is empty")
        low, high = length_bounds(length, min_length, max_length)
        filters: dict[str, Any] = {
            "pos": pos,
            "pattern": pattern,
            "words": words,
            "min_length": low,
            "max_length": high,
            "initial": initial,
            "pinyin": pinyin,
            "script": script,
        }
        entry = rd.similar_entry(query, mode)
        if entry is None:
            results = batcher.search(query, k=k, **filters)
        else:
            rd.filter_mask(**filters)  # as for a description: before the model
            results = model.call(rd.neighbours, entry, k, **filters)
        return {
            "query": query,
            "mode": "describe" if entry is None else "similar",
            "entry": entry,
            "model": rd.name,
            "entries": len(rd.space),
            "score_kind": rd.score_kind if entry is None else "cosine",
            "results": [r.to_dict() for r in sort_results(results, sort)],
        }

    @app.post(
        "/api/encode",
        summary="Sentence embeddings",
        description=f"The model's vectors of up to {MAX_SENTENCES} sentences of at most {MAX_QUERY_CHARS} "
        "characters each; `normalize` scales them to unit length.",
        responses=documented(
            EncodeAnswer,
            {413: f"a request body over {MAX_BODY_BYTES >> 20} MiB", 422: "an invalid JSON body or sentence list"},
        ),
    )
    def encode(body: EncodeRequest) -> dict[str, Any]:
        vectors = model.call(rd.encoder.encode, body.sentences, normalize_embeddings=body.normalize)
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
    ranking: Ranking | None = None,
) -> None:
    """Load the model, then serve until interrupted: Ctrl-C is the normal way to stop, not an error. A port
    that cannot be listened on is a one-line error before the model is loaded."""
    check_port(host, port)
    app = create_app(model_path, device=device, precision=precision, ranking=ranking)
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
