"""The endpoints of `dictembed serve` and the answers they document: the page, `/health`, `/api/reverse` (over the
served dictionaries, `served_dictionaries`) and `/api/encode`, and `/docs`, the API's documentation drawn in the
browser from `/openapi.json` by a page of the package (`static/docs.html`: no external resources, unlike FastAPI's
Swagger UI from a CDN, so it works offline).
Searches and the steps of an encode go to the model's thread (`serve_scheduling`); filters, token counts and JSON
are made off it, and nothing here runs the model on the event loop's thread.

Imported only when a server is made: FastAPI comes with the `serve` extra."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, cast

import numpy as np
from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from dictembed import __version__
from dictembed.cjk import MAX_PINYIN_LETTERS, looks_chinese
from dictembed.entry_neighbours import SimilarWords
from dictembed.reverse_dictionary import Result, ReverseDictionary
from dictembed.search_options import (
    DEFAULT_K,
    MAX_INITIAL_CHARS,
    MAX_PATTERN_CHARS,
    MAX_WORD_LENGTH,
    SCRIPTS,
    WORD_COUNTS,
    Filters,
    Script,
    SearchMode,
    SortOrder,
    WordCount,
    word_length,
    word_script,
)
from dictembed.serve_http import error, install_error_contract, json_body, until_done
from dictembed.serve_limits import MAX_BODY_BYTES, MAX_K, MAX_QUERY_CHARS, MAX_SENTENCES, EncodeBudget
from dictembed.serve_scheduling import (
    BULK,
    COUNT_STEP,
    SEARCH,
    ModelThread,
    QueuedQuery,
    TokenCounter,
    build_in_background,
    encode_chunks,
    encode_step,
    prepare_synonyms,
)
from dictembed.served_dictionaries import ServedDictionaries, ServedDictionary
from dictembed.texts import is_blank

log = logging.getLogger("dictembed.serve")
SHUTDOWN_WAIT = 30.0  # seconds a shutdown waits for the model's queued calls to end
API_DESCRIPTION = """Describe a word and get the words (a reverse dictionary), or give a word and get its
near-synonyms. Every error is a JSON object `{"error": message}` of one line. The search page is at `/`."""


def written_in_digits(value: object) -> object:
    """A query parameter's count as digits alone (`5`): not `2.0`, `+5` or `1_0`, which the lax parse reads as
    numbers the Python API refuses."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError(f"a whole number in digits, not {value[:20]!r}")
    return value


Count = Annotated[int, BeforeValidator(written_in_digits)]  # k and the lengths of /api/reverse


def json_boolean(value: object) -> object:
    """A body's flag as JSON true or false: not `"yes"`, `1` or `"true"`, which the lax parse reads as booleans the
    Python API refuses."""
    if not isinstance(value, bool):
        raise ValueError(f"true or false, not {json.dumps(value, default=repr)[:20]}")
    return value


Flag = Annotated[bool, BeforeValidator(json_boolean)]  # normalize of /api/encode


class EncodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt `normalize` would be dropped, and the vectors not scaled

    sentences: Annotated[
        list[Annotated[str, StringConstraints(max_length=MAX_QUERY_CHARS)]],
        Field(min_length=1, max_length=MAX_SENTENCES),
    ]
    normalize: Flag = Field(False, description="scale every embedding to unit length (JSON true or false)")


class ApiError(BaseModel):
    error: str = Field(description="what was wrong, in one line")


class ResultRow(BaseModel):
    words: list[str] = Field(description="the words of entries with identical vectors")
    score: float = Field(
        description="cosine similarity, mixed with the best single definition's and plus the word-frequency "
        "prior as score_kind names them (or probability, see score_kind)"
    )
    definitions: dict[str, list[str]] = Field(
        description="word -> its definitions: the sense that matched the description first (its definition vector "
        "nearest the query's), then the others in sense order, those of the `pos` filter first"
    )
    pos: dict[str, list[str | None]] = Field(description="word -> the part of speech of each")
    language: str = Field(description="the language of the dictionary the words are from (und: not known)")
    dictionary: str = Field(description="the name of that dictionary")


class ReverseAnswer(BaseModel):
    query: str
    mode: str = Field(description="describe, or similar: the near-synonyms of `entry`")
    entry: str | None = Field(description="the entry whose neighbours are listed (mode similar)")
    opposites: list[str] = Field(
        description="up to k of the antonyms the dictionary records for `entry`, which its neighbours leave out: the "
        "dictionary's first, then the others nearest to it (mode similar; empty in mode describe and for a "
        "dictionary that records none)"
    )
    model: str = Field(
        description="the model folder that answered: of a dictionary served by several, the one whose encoder reads "
        "the description's language"
    )
    entries: int
    language: str = Field(description="the language of the dictionary searched (`lang`)")
    dictionary: str = Field(description="the name of the dictionary searched")
    score_kind: str = Field(
        description="cosine, with +definition ((cosine + w x the cosine to the entry's best single definition) / "
        "(1 + w)), +headword (the cosine to the word itself, encoded as a description), +second (w x its best "
        "cosine to a second dictionary's definition of the word, past 0.3), +words (the description's "
        "own words: one of them as the result's word, shared with its definitions) and +frequency (+ weight x the "
        "word's Zipf frequency) when they are in use; or probability for a "
        "space without a matrix; in mode similar cosine+senses (the entry vectors' cosine mixed with the best pair "
        "of senses', `near_synonyms`) or cosine"
    )
    truncated: bool = Field(
        description="whether the description was longer than the model's window and was cut (its end unread)"
    )
    results: list[ResultRow]


class EncodeAnswer(BaseModel):
    embeddings: list[list[float]]
    dim: int
    model: str
    truncated: int = Field(description="how many sentences were longer than the model's window, and were cut")


def documented(model: type[BaseModel], errors: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses: `model` for 200 and `{"error"}` for each status of `errors` (documentation only)."""
    return {200: {"model": model}, **{code: {"model": ApiError, "description": why} for code, why in errors.items()}}


def page_html(name: str = "index.html") -> str:
    """A page of the package's static folder: the search page, or `docs.html`."""
    return resources.files("dictembed").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def sort_results(results: list[Result], order: str) -> list[Result]:
    """`results` as ranked (`relevance`), by their first word (`alphabet`), or by its length in letters and
    then alphabetically (`length`)."""

    def first(result: Result) -> str:
        return result.words[0] if result.words else ""

    if order == "alphabet":
        return sorted(results, key=lambda r: (first(r).casefold(), first(r)))
    if order == "length":
        return sorted(results, key=lambda r: (word_length(first(r)), first(r).casefold(), first(r)))
    return results


def json_rows(vectors: np.ndarray) -> list[str]:
    """Each row of `vectors` as a JSON array (as the rest of the answer writes numbers)."""
    return [json.dumps(row, separators=(",", ":"), allow_nan=False) for row in vectors.tolist()]


@dataclass
class Served:
    """What the endpoints share: the prepared dictionaries (the default's model answers `/api/encode`), the
    model's thread and the default's batcher, the encode's token counter and budget, and the page with what the
    default offers (the pinyin filter for Chinese, the script filter for two)."""

    dictionaries: ServedDictionaries
    model: ModelThread
    budget: EncodeBudget

    def __post_init__(self) -> None:
        self.rd = self.dictionaries.default.rd
        self.batcher = self.dictionaries.batcher_of(self.rd)
        self.counter = TokenCounter(self.rd.encoder)
        self.page, self.docs = page_html(), page_html("docs.html")
        self.chinese = looks_chinese(self.rd.space.words[:5000])
        self.scripts = Counter(map(word_script, self.rd.space.words))
        self.synonyms: dict[int, Future[None]] = {}  # by id of the reverse dictionary: its near-synonyms' build

    def build_synonyms(self) -> None:
        """Start making each served folder's near-synonym search (`serve_scheduling.prepare_synonyms`) on a thread
        of its own: a similar-mode search waits for its own folder's (`start_search`), and no other request does."""
        for one in self.dictionaries.served:
            build = functools.partial(prepare_synonyms, one.rd)
            self.synonyms[id(one.rd)] = build_in_background(build, f"the near-synonym search of {one.rd.name}")

    def start_search(
        self, query: str, k: int, mode: str, target: ServedDictionary, **options: Any
    ) -> tuple[str | None, ReverseDictionary, Future[list[Result]] | Future[SimilarWords], QueuedQuery | None]:
        """Off the event loop: the entry of `target` whose neighbours answer `query` (None: a description), the
        reverse dictionary that searches (a description's: `ServedDictionaries.search_of`, perhaps centred), its
        search (an entry's: `similar_words`, its neighbours and opposites), queued for the model with the filters of
        `options` (`Filters.of`), whose entry mask is computed first, here, and a description's `QueuedQuery` (which
        says whether the encoder cut it)."""
        filters = Filters.of(**options)
        entry = target.rd.similar_entry(query, mode)
        if entry is None:
            searching = self.dictionaries.search_of(target, query)
            item = self.dictionaries.batcher_of(searching).queue(query, k, filters)
            return None, searching, item.future, item
        target.rd.filter_mask(filters)
        ready = self.synonyms.get(id(target.rd))
        similar = target.rd.similar_words
        if ready is None:  # not built beforehand: the search makes it
            return entry, target.rd, self.model.submit(SEARCH, similar, entry, k, filters), None
        return entry, target.rd, self.model.submit_after(ready, SEARCH, similar, entry, k, filters), None

    async def encode(self, request: Request, sentences: list[str], normalize: bool) -> str:
        """The JSON answer of an encode: its sentences counted in tokens (413 over the budget), then encoded a
        step of at most `budget.chunk` tokens at a time; counting and encoding run on the model's thread at `BULK`
        priority, a step at a time, so a search waits for one step at most, and the client's going ends them."""
        counts: list[int] = []
        for start in range(0, len(sentences), COUNT_STEP):
            piece = sentences[start : start + COUNT_STEP]
            counts += await until_done(request, self.model.submit(BULK, self.counter.count, piece))
        window = self.counter.window
        tokens = [min(count, window) for count in counts]
        if sum(tokens) > self.budget.request:
            raise HTTPException(
                413,
                f"the sentences hold {sum(tokens)} tokens (each cut at the model's {window}); one request encodes "
                f"at most {self.budget.request}",
            )
        rows, dim = [""] * len(sentences), 0
        for chunk in encode_chunks(tokens, self.budget.chunk):
            step = self.model.submit(BULK, encode_step, self.rd.encoder, [sentences[i] for i in chunk], normalize)
            vectors = await until_done(request, step)
            dim = int(vectors.shape[1])
            for i, row in zip(chunk, await run_in_threadpool(json_rows, vectors), strict=True):
                rows[i] = row
        cut = sum(count > window for count in counts)
        if cut:
            log.warning(
                "%d of %d sentences to encode were longer than %d tokens and were cut", cut, len(counts), window
            )
        return f'{{"embeddings":[{",".join(rows)}],"dim":{dim},"model":{json.dumps(self.rd.name)},"truncated":{cut}}}'


def api(served: Served) -> FastAPI:
    """The FastAPI app over `served`: its error contract (`serve_http`) and its endpoints."""
    rd = served.rd

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await run_in_threadpool(served.model.stop, SHUTDOWN_WAIT)  # the queued calls end, then the model's thread

    app = FastAPI(
        lifespan=lifespan,
        title="dictembed reverse dictionary",
        version=__version__,
        description=API_DESCRIPTION,
        docs_url=None,  # FastAPI's Swagger UI loads its scripts from a CDN: `/docs` is the package's own page
        redoc_url=None,
    )
    app.state.served, app.state.batcher, app.state.model = served, served.batcher, served.model
    install_error_contract(app)

    def get_and_head(path: str, **options: Any) -> Callable[[Any], Any]:
        """Route GET (documented) and HEAD (kept out of the schema: one operation a path) to one endpoint."""

        def register(endpoint: Any) -> Any:
            app.add_api_route(path, endpoint, methods=["GET"], **options)
            app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)
            return endpoint

        return register

    @get_and_head("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> Any:
        return HTMLResponse(served.page)

    @get_and_head("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> Any:
        return HTMLResponse(served.docs)

    @get_and_head(
        "/health",
        summary="The model served",
        description="The default dictionary's model name, entry count, result count after grouping, score kind, "
        "dictionary and language, whether its words are Chinese (the page then offers the pinyin filter), and how "
        "many entries are written in CJK characters and in Latin letters (with both, the page offers the script "
        "filter); and every served dictionary once with its language, entries and model (`dictionaries`; one served "
        "by several folders also lists each folder's model and the languages its encoder reads, null: any, as "
        "`encoders`).",
    )
    def health() -> dict[str, Any]:
        default = served.dictionaries.default
        return {
            "status": "ok",
            "model": rd.name,
            "entries": len(rd.space),
            "candidates": len(rd.space) if rd.candidates is None else int(rd.candidates.sum()),
            "results": len(rd.groups),
            "score_kind": rd.score_kind,
            "dictionary": default.name,  # the name `dictionary=` takes
            "language": default.language,
            "definitions": rd.has_definitions,
            "chinese": served.chinese,
            "scripts": {name: served.scripts[name] for name in SCRIPTS[1:]},
            "dictionaries": served.dictionaries.rows(),
        }

    @get_and_head(
        "/api/reverse",
        summary="Words for a description, or words like a word",
        description=(
            "Ranks the dictionary's entries for a description (`q=a long-necked African animal`). In mode `auto` "
            "a query that is itself an entry (`q=quick`, case-insensitive) lists the entries nearest to its "
            "entry vector instead, itself left out: its near-synonyms (`mode: similar` in the answer). Entries "
            "with identical vectors are one result. Filters keep the words that pass all of them. With several "
            "dictionaries served, `lang` or `dictionary` chooses the one searched (default: the first served), and "
            "a description in another language than its own is searched centred per language. A search runs "
            "before any waiting step of a bulk encode. A dictionary served by several folders is searched in the one "
            "whose encoder reads the description's language (`model` names it)."
        ),
        responses=documented(
            ReverseAnswer,
            {
                400: "the query string is not valid UTF-8",
                403: "a request for another host than a loopback name (localhost, 127.0.0.1, [::1]) to a server "
                "listening on a loopback address (DNS rebinding)",
                422: "a parameter it does not take, a missing, empty, over-long or out-of-range one, a bad pattern, "
                "length with min_length/max_length, min_length over max_length, mode similar for a query that is no "
                "entry, or a lang or dictionary not served (the message lists the served ones)",
            },
        ),
    )
    async def reverse(
        request: Request,
        q: Annotated[
            str,
            Query(
                max_length=MAX_QUERY_CHARS,
                description="the description, or a word (see mode)",
                examples=["a long-necked African animal"],
            ),
        ],
        k: Annotated[Count, Query(ge=1, le=MAX_K, description="how many results")] = DEFAULT_K,
        pos: Annotated[
            str | None, Query(max_length=20, description="part of speech: n, v, a, r (or noun, verb, ...)")
        ] = None,
        pattern: Annotated[
            str | None,
            Query(max_length=MAX_PATTERN_CHARS, description="a prefix (g), a glob (gir*) or a /regex/"),
        ] = None,
        words: Annotated[WordCount, Query(description="single words, phrases (several words) or any")] = WORD_COUNTS[0],
        length: Annotated[
            Count | None,
            Query(
                ge=1,
                le=MAX_WORD_LENGTH,
                description="exactly this many letters (letters and digits; spaces and hyphens do not count)",
            ),
        ] = None,
        min_length: Annotated[
            Count | None, Query(ge=1, le=MAX_WORD_LENGTH, description="at least this many letters")
        ] = None,
        max_length: Annotated[
            Count | None, Query(ge=1, le=MAX_WORD_LENGTH, description="at most this many letters")
        ] = None,
        initial: Annotated[
            str | None,
            Query(max_length=MAX_INITIAL_CHARS, description="the first letter(s), case-insensitive, taken literally"),
        ] = None,
        pinyin: Annotated[
            str | None,
            Query(
                max_length=MAX_PINYIN_LETTERS,
                description="a Chinese word's syllables start with these letters in order (sc: 使出); needs "
                "dictembed[zh]",
            ),
        ] = None,
        script: Annotated[
            Script,
            Query(
                description="cjk: only words written in CJK characters (the Chinese of a merged dictionary); latin: "
                "only words in Latin letters (its English); any"
            ),
        ] = SCRIPTS[0],
        mode: Annotated[
            SearchMode,
            Query(
                description="auto: words like q when q is an entry, else a description; describe; similar "
                "(q must be an entry)"
            ),
        ] = "auto",
        sort: Annotated[
            SortOrder, Query(description="relevance, alphabet (by first word) or length (then alphabet)")
        ] = "relevance",
        lang: Annotated[
            str | None,
            Query(
                max_length=20,
                description="the language of the words wanted: a served dictionary's (default: the first served)",
                examples=["zh"],
            ),
        ] = None,
        dictionary: Annotated[
            str | None, Query(max_length=200, description="the served dictionary to search, by name (see /health)")
        ] = None,
    ) -> Any:
        if unknown := sorted(set(request.query_params) - parameters):  # a misspelt filter filters nothing
            return error(422, f"{unknown[0][:50]}: not a parameter of /api/reverse ({', '.join(sorted(parameters))})")
        if twice := sorted(name for name in parameters if len(request.query_params.getlist(name)) > 1):
            return error(422, f"{twice[0]}: given more than once; give each parameter once")
        query = q.strip()
        if is_blank(query):
            return error(422, "q: the query is empty")
        target = served.dictionaries.choose(lang or None, dictionary or None)  # empty: not given, as the filters
        target = served.dictionaries.reader(target, query)
        options = {"pos": pos, "pattern": pattern, "words": words, "length": length, "min_length": min_length}
        options |= {"max_length": max_length, "initial": initial, "pinyin": pinyin, "script": script}
        if len(served.dictionaries.served) == 1 and Filters.none_asked(options):
            entry, found, search, item = served.start_search(query, k, mode, target)  # a look-up and a put: no hop
        else:  # filters' masks and a centred space's first use may take a while: off the event loop
            started = await run_in_threadpool(served.start_search, query, k, mode, target, **options)
            entry, found, search, item = started
        answer = await until_done(request, cast("Future[list[Result] | SimilarWords]", search))
        results, opposites = answer if isinstance(answer, SimilarWords) else (answer, [])
        label = {"language": target.language, "dictionary": target.name}
        return JSONResponse(  # plain JSON types already: FastAPI's encoder walk (0.3 ms an answer) is skipped
            {
                "query": query,
                "mode": "describe" if entry is None else "similar",
                "entry": entry,
                "opposites": opposites,
                "model": found.name,
                "entries": len(found.space),
                **label,
                "score_kind": found.score_kind if entry is None else found.synonym_score_kind,
                "truncated": item is not None and item.truncated,
                "results": [r.to_dict() | label for r in sort_results(results, sort)],
            }
        )

    parameters = frozenset(inspect.signature(reverse).parameters) - {"request"}
    budget = served.budget
    body_schema = {"required": True, "content": {"application/json": {"schema": EncodeRequest.model_json_schema()}}}

    @app.post(
        "/api/encode",
        summary="Sentence embeddings",
        description=f"The model's vectors of up to {MAX_SENTENCES} sentences of at most {MAX_QUERY_CHARS} "
        f"characters and at most {budget.request} tokens in all (each sentence cut at the model's window, as "
        "`truncated` counts); `normalize` scales them to unit length. The sentences are encoded a few at a time, "
        "and searches run between those steps. The body is JSON, unencoded (no Content-Encoding).",
        openapi_extra={"requestBody": body_schema},
        responses=documented(
            EncodeAnswer,
            {
                403: "a body sent by a web page of another site (its Origin is not this server's), or a request for "
                "another host than a loopback name to a server listening on a loopback address (DNS rebinding)",
                413: f"a request body over {MAX_BODY_BYTES >> 20} MiB, or sentences over {budget.request} tokens",
                415: "a body with a Content-Encoding (gzip, ...) or a Content-Type other than JSON",
                422: "a body that is not the JSON asked for (invalid, nested too deep, a number too long, a key "
                "other than sentences and normalize, a key given twice, a normalize other than true or false), an "
                "invalid sentence list, or a query parameter",
            },
        ),
    )
    async def encode(request: Request) -> Response:
        if request.query_params:  # the sentences are the body's: a parameter would be dropped
            name = next(iter(request.query_params))[:50]
            return error(422, f"{name}: /api/encode takes no query parameters; send the sentences as its JSON body")
        body = await json_body(request, EncodeRequest)
        return Response(await served.encode(request, body.sentences, body.normalize), media_type="application/json")

    return app
