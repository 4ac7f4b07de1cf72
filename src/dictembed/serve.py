"""`dictembed serve`: the reverse dictionary as a web page and a JSON API (FastAPI + uvicorn).

One model folder is served, or several (`--model F1 --model F2`): each one dictionary, labelled with its name and
language (`served_dictionaries`), the first the default; one dictionary may be served by folders whose encoders
read different languages, each description searched in the one that reads it. Endpoints (the models are loaded
once, when the app is created; `serve_routes`):
- `GET /` the search page (`static/index.html`: one file, no external resources); with several dictionaries it
  has a selector of the language of the words wanted;
- `GET /health` -> {"status": "ok", "model", "entries", "candidates", "results", "score_kind", "dictionary",
  "language", "definitions", "chinese", "scripts", "dictionaries": [{"dictionary", "language", "entries",
  "model"[, "encoders"]}]} (the default dictionary's, then every served one, once; `candidates`: the entries a
  search may list, see `--min-frequency`);
- `GET /api/reverse?q=...&k=10[&lang=zh|dictionary=NAME&pos=n&pattern=gir*&words=single&length=5|min_length=4
  &max_length=6&initial=g&pinyin=sc&script=any|cjk|latin&mode=auto|describe|similar&sort=relevance|alphabet
  |length]` -> {"query", "mode", "entry", "model", "entries", "language", "dictionary", "score_kind", "results":
  [{"words", "score", "definitions": {word: [...]}, "pos": {word: [...]}, "language", "dictionary"}]} (each word's
  matched sense first); `lang` (the language of the words wanted) or `dictionary` chooses the dictionary searched
  (default: the first served; one not served is a 422 listing the served ones); with several served, a
  description in another language than the dictionary's is searched centred per language (`language_centring`;
  `--no-centring` turns it off); in mode auto (the API's default; the page always sends describe or similar) a
  query that is an entry of the dictionary lists its near-synonyms (`ReverseDictionary.neighbours`), else it is
  described;
- `POST /api/encode` with {"sentences": [...], "normalize": false} -> {"embeddings": [[...]], "dim", "model",
  "truncated"} (`normalize` JSON true or false; a key given twice is refused);
- `GET /docs` (`static/docs.html`: drawn in the browser from the schema, no external resources, so it works
  offline) and `GET /openapi.json`: the API, documented.

Limits (`serve_limits`): a query or sentence holds at most 2,000 characters (longer is refused, not truncated), k
lies in 1..100, one request encodes at most 256 sentences and 32,768 tokens, and a request body holds at most 8
MiB. Every error is a JSON object {"error": message} (`serve_http`): 400 invalid UTF-8 in the query string, or a
request uvicorn cannot parse; 403 a request for another host than localhost, 127.x or [::1] to a server on a
loopback address (DNS rebinding: `serve_http.LoopbackHost`), or a body sent by another site's page; 404 unknown
path; 405 wrong method, with `Allow`; 413 a body over the limit or sentences over the token budget; 415 an encoded
(gzip) or non-JSON body; 422 a missing, empty, over-long or out-of-range parameter, a bad pattern, or a body that
is not the JSON asked for; 500 only for a bug. HEAD is answered wherever GET is.

One request never stalls the others (`serve_scheduling`): patterns run on RE2 (linear time); a search's filters
are computed before it reaches the model, whose one thread runs only encoder passes and products with the entry
matrix; the near-synonym search's one-off build runs at start-up on a thread of its own, which only a
similar-mode search waits for; searches go before bulk encodes, which run a step of at most 128 tokens at a
time; and the work of a client that has gone is dropped. No answer names a path of the machine: the dictionary
appears by file name.

FastAPI and uvicorn come with the `serve` extra; they are imported only when a server is made, so a
missing extra is one line naming `pip install "dictembed[serve]"`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import RankingChoice
from dictembed.serve_limits import (
    MAX_BODY_BYTES,
    MAX_ENCODE_TOKENS,
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_REQUEST_LINE,
    MAX_SENTENCES,
    EncodeBudget,
)
from dictembed.serve_scheduling import BULK, SEARCH, ModelThread, QueryBatcher
from dictembed.texts import check_flag, is_real_number, is_whole_number

__all__ = [
    "BULK",
    "MAX_BODY_BYTES",
    "MAX_ENCODE_TOKENS",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "MAX_SENTENCES",
    "SEARCH",
    "EncodeBudget",
    "ModelThread",
    "QueryBatcher",
    "background_server",
    "check_port",
    "create_app",
    "run_server",
    "server",
]
log = logging.getLogger(__name__)


def listed(value: object, kind: type | tuple[type, ...], what: str) -> list[Any]:
    """`value`, one `kind` or a non-empty list of them, as a list; refused in one line saying `what` otherwise."""
    items = [value] if isinstance(value, kind) else value
    if isinstance(items, str | bytes) or not isinstance(items, Sequence) or not items:
        raise DictEmbedError(f"create_app: {what}, not {type(value).__name__}")
    if wrong := [item for item in items if not isinstance(item, kind)]:
        raise DictEmbedError(f"create_app: {what}, not a list holding {type(wrong[0]).__name__}")
    return list(items)


def create_app(
    model_path: str | Path | Sequence[str | Path] | None = None,
    reverse_dictionary: ReverseDictionary | Sequence[ReverseDictionary] | None = None,
    device: str | None = None,
    precision: str | None = "auto",
    ranking: RankingChoice = None,
    budget: EncodeBudget | None = None,
    dictionary: str | None = None,
    centring: bool = True,
) -> Any:
    """The FastAPI app over one model or several: saved model folders (loaded on `device`, "auto"/None: the best
    one, with the compute `precision`, the score's weights `ranking` and, for one folder, the user's `dictionary`
    in place of the folder's own; `served_dictionaries.open_served`), or reverse dictionaries already loaded; the
    first is the default target. `centring`: search a description in another language centred per language (with
    several served). `budget`: the tokens of one encode request and of one of its steps (default `EncodeBudget()`).
    Each folder's near-synonym search is then made on a thread of its own (`Served.build_synonyms`)."""
    require("serve", "fastapi")
    from dictembed.serve_routes import Served, api
    from dictembed.served_dictionaries import ServedDictionaries, open_served, served_of

    check_flag("centring", centring)
    if budget is not None and not isinstance(budget, EncodeBudget):
        raise DictEmbedError(f"create_app: budget is an EncodeBudget, not {type(budget).__name__}")
    if reverse_dictionary is not None:
        loaded = listed(reverse_dictionary, ReverseDictionary, "reverse_dictionary is a ReverseDictionary or a list")
    elif model_path is not None:
        paths = listed(model_path, (str, Path), "model_path is a model folder or a list of them")
    else:
        raise DictEmbedError("create_app needs a model folder or a ReverseDictionary")
    model = ModelThread()
    try:
        if reverse_dictionary is not None:
            served = [served_of(rd) for rd in loaded]
        else:
            served = model.call(open_served, paths, device, precision, ranking, dictionary)
        for one in served:
            model.call(one.rd.prepare)
        shared = Served(ServedDictionaries(served, model, centring), model, budget or EncodeBudget())
        app = api(shared)
    except BaseException:
        model.stop()  # no thread left holding a model that will never serve
        raise
    shared.build_synonyms()  # beside the model's thread: no request but a similar-mode one waits for it
    return app


def check_port(host: str, port: int) -> None:
    """Refuse, with one line, a host and port this process cannot listen on (not a port number, in use, not
    permitted)."""
    if not isinstance(host, str) or not is_whole_number(port, low=0, high=65535):
        raise DictEmbedError(f"cannot listen on {host!r}:{port!r}: a host name and a port from 0 to 65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as err:
            raise DictEmbedError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None


def server(app: Any, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> Any:
    """A uvicorn server for `app` (not started) on h11, whose own 400 for a request it cannot parse is JSON
    (`serve_http.json_h11_protocol`); its access log goes to stderr, like all logging here. The app learns `host`:
    on a loopback address it answers requests for loopback names and `host` only (`serve_http.LoopbackHost`)."""
    uvicorn = require("serve", "uvicorn")
    from dictembed.serve_http import json_h11_protocol

    state = getattr(app, "state", None)
    if state is not None:
        state.bound_host = host

    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config,
        http=json_h11_protocol(),
        h11_max_incomplete_event_size=MAX_REQUEST_LINE,
    )
    return uvicorn.Server(config)


def run_server(
    model_path: str | Path | Sequence[str | Path],
    host: str = "127.0.0.1",
    port: int = 8000,
    device: str | None = None,
    precision: str | None = "auto",
    ranking: RankingChoice = None,
    dictionary: str | None = None,
    centring: bool = True,
) -> None:
    """Load the models (`create_app`), then serve until interrupted: Ctrl-C is the normal way to stop, not an error.
    A port that cannot be listened on is a one-line error before a model is loaded."""
    check_port(host, port)
    app = create_app(
        model_path, device=device, precision=precision, ranking=ranking, dictionary=dictionary, centring=centring
    )
    shown = model_path if isinstance(model_path, str | Path) else ", ".join(map(str, model_path))
    log.info("serving %s on http://%s:%d", shown, host, port)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn shuts down gracefully, then re-raises the Ctrl-C
        server(app, host, port).run()


@contextlib.contextmanager
def background_server(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Serve `app` from a daemon thread while the block runs; yields the base URL (port 0: a free port)."""
    if not is_real_number(timeout) or not timeout > 0:
        raise DictEmbedError(f"background_server: timeout is a number of seconds above 0, not {timeout!r}")
    check_port(host, port)
    running = server(app, host, port, log_level="warning")
    thread = threading.Thread(target=running.run, name="dictembed-serve", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not running.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            running.should_exit = True  # a server still starting stops once it has
            raise DictEmbedError(f"the server did not start on {host}:{port}")
        time.sleep(0.05)
    bound = running.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        running.should_exit = True
        thread.join(timeout)
