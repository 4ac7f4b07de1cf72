"""The HTTP contract of `dictembed serve`: every error the server gives is one line of JSON, `{"error": message}`,
with the status the docs name (a 405 with its `Allow` header); a JSON body is read under a size limit and
refused whole when it is not the JSON an endpoint takes; the wait for the model ends when the client goes.

Imported only when a server is made: FastAPI and uvicorn come with the `serve` extra."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import urllib.parse
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match
from starlette.types import Message, Receive, Scope, Send

from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.serve_limits import BODY_STALL_SECONDS, MAX_BODY_BYTES, MAX_REQUEST_LINE
from dictembed.text_files import RepeatedKeyError, unique_keys

log = logging.getLogger("dictembed.serve")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
CLIENT_CLOSED = 499  # the status logged for a request whose client left before its answer (as nginx logs it)
LISTED_ERRORS = 5  # validation errors a message spells out; the rest are counted


class ClientGone(Exception):
    """The client closed its connection before its answer was ready; its queued work was dropped."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The server's error answer: `{"error": message}` with `status`."""
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def send_error(send: Send, status: int, message: str) -> None:
    """The error answer written straight to the ASGI `send` (by middleware, outside the app's handlers)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def valid_utf8_query(raw: bytes) -> bool:
    """Whether a raw query string decodes, after percent-decoding, as UTF-8."""
    try:
        urllib.parse.unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def validation_message(errors: Iterable[Any], listed: int = LISTED_ERRORS) -> str:
    """Validation errors (FastAPI's or pydantic's) as one line: `k: Input should be less than or equal to 100;
    ...`, the first `listed` of them spelled out and the rest counted. An error of the body as a whole (invalid
    JSON) is the `body`'s."""
    errors = list(errors)
    parts = []
    for found in errors[:listed]:
        loc = [str(x) for x in found.get("loc", ())]
        where = ".".join(loc[1:] if len(loc) > 1 and loc[0] in ("query", "body") else loc) or "body"
        message = " ".join(str(found.get("msg", "invalid")).split()).removeprefix("Value error, ")  # our validators'
        parts.append(f"{where}: {message}")
    if len(errors) > listed:
        parts.append(f"and {len(errors) - listed} more")
    return "; ".join(parts) or "invalid request"


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> list[str]:
    """The methods that the routes matching the request's path take (what a 405's `Allow` lists)."""
    methods: set[str] = set()
    for route in routes:
        if route.matches(scope)[0] is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def check_json_media(request: Request) -> None:
    """Refuse with 415 a body in an encoding (gzip, ...: only identity is read, as `Accept-Encoding` then says)
    or of a media type other than JSON (none is taken as JSON)."""
    codings = [c.strip().lower() for value in request.headers.getlist("content-encoding") for c in value.split(",")]
    if any(c not in ("", "identity") for c in codings):
        shown = ", ".join(c for c in codings if c)[:100]
        raise HTTPException(
            415, f"Content-Encoding {shown!r} is not read: send the body unencoded", {"Accept-Encoding": "identity"}
        )
    declared = request.headers.get("content-type")
    media = (declared or "application/json").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise HTTPException(415, f"Content-Type {media[:100]!r} is not read: send application/json")


def check_same_origin(request: Request) -> None:
    """Refuse with 403 a body a web page of another site sends (its `Origin` is not this server's): a browser sends
    a POST without a Content-Type (`navigator.sendBeacon`) to any site without asking it first, so another page
    could make a local server encode. Clients that are no browser send no `Origin` and pass; so does this server's
    own page. (A page whose own name its DNS turns to 127.0.0.1 sends an `Origin` that matches its `Host`: on a
    loopback address, `LoopbackHost` refuses it first.)"""
    origin = request.headers.get("origin")
    if origin is None:
        return
    host = request.headers.get("host", "")
    if origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
        raise HTTPException(403, f"a request from the web page of {origin[:100]!r} is not served: only this server's")


def repeated_key(raw: bytes) -> str | None:
    """The first key that an object of the JSON `raw` gives more than once (pydantic, as `json.loads`, would keep
    the last and drop the others unsaid; `text_files.unique_keys`), or None."""
    try:
        json.loads(raw, object_pairs_hook=unique_keys)
    except RepeatedKeyError as error:
        return error.key
    except (ValueError, RecursionError):  # not read by `json`, but by pydantic: let pydantic's error say so
        return None
    return None


def parse_json(model: type[M], raw: bytes) -> M:
    """`raw` as `model` (pydantic's JSON parse), a key given twice refused: a one-line `DictEmbedError` naming
    what is wrong."""
    try:
        parsed = model.model_validate_json(raw)
    except ValidationError as err:
        raise DictEmbedError(validation_message(err.errors(include_url=False, include_input=False))) from None
    if (key := repeated_key(raw)) is not None:
        raise DictEmbedError(f"{key[:50]}: given more than once; give each key once")
    return parsed


async def json_body(request: Request, model: type[M]) -> M:
    """The request's body as `model`: 415 for an encoded or non-JSON body, 413 over the size limit (`BodyLimit`),
    and 422 (a one-line `DictEmbedError`) for anything else that is not that JSON: invalid JSON or UTF-8, nesting
    too deep, numbers too long, a missing or invalid field, a key given twice. Parsed off the event loop, by
    pydantic (`parse_json`)."""
    check_json_media(request)
    check_same_origin(request)
    try:
        raw = await request.body()
    except ClientDisconnect:  # gone mid-upload: one info line, as for a client gone while its work waits
        raise ClientGone(request.url.path) from None
    return await run_in_threadpool(parse_json, model, raw)


async def disconnected(receive: Receive) -> None:
    """Return when the client has gone (the ASGI `http.disconnect`), reading past what is left of the body."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_done(request: Request, future: Future[T]) -> T:
    """`future`'s result, awaited off the model's thread. When the client disconnects first, the future is
    cancelled (work still queued is then skipped) and `ClientGone` raised; so is the future when the request's
    task is cancelled."""
    waiting = asyncio.wrap_future(future)
    gone = asyncio.ensure_future(disconnected(request.receive))
    try:
        await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not waiting.done():
            future.cancel()
            waiting.cancel()
    if not waiting.cancelled():
        return waiting.result()
    if gone.done() and not gone.cancelled() and (err := gone.exception()) is not None:
        raise err  # reading the rest of the body failed: its limit (413)
    raise ClientGone(request.url.path)


def install_error_contract(app: FastAPI) -> None:
    """The app's error handlers and its middleware (the body limit, the query string's UTF-8)."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        message = str(exc.detail)
        if exc.status_code == 404:
            message = f"not found: {request.url.path}"
        elif exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app.router.routes, request.scope))
            message = f"Method Not Allowed: {request.url.path} takes {headers['Allow']}"
        return error(exc.status_code, message, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, validation_message(exc.errors()))

    @app.exception_handler(DictEmbedError)
    async def bad_input(request: Request, exc: DictEmbedError) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> JSONResponse:
        log.info("%s %s: the client went away; its waiting work was dropped", request.method, request.url.path)
        return error(CLIENT_CLOSED, "the client closed the request")  # nobody reads it (nor logs it)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s", request.url.path)
        return error(500, f"internal error ({type(exc).__name__})")

    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(Utf8Query)
    app.add_middleware(LoopbackHost, state=app.state)  # the outer one: a request for another host is refused first


WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})  # listen on every address: the user chose to expose the server


def host_name(host: str) -> str:
    """The name in a `Host` header (or a host to listen on), lower-cased, without its port or an IPv6 address's
    brackets: `[::1]:8000` -> `::1`."""
    name = host.strip().lower()
    if name.startswith("["):
        return name[1:].partition("]")[0]
    return name if name.count(":") > 1 else name.partition(":")[0]  # an IPv6 address without brackets: no port


def loopback_address(address: str) -> bool:
    """Whether `address` is a loopback IP address: 127.x or ::1."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def loopback_name(name: str) -> bool:
    """Whether the host `name` (`host_name`) can only mean this machine: localhost or a loopback address; not a name
    that a DNS server answers, which another site's can turn to 127.0.0.1 (DNS rebinding)."""
    return name == "localhost" or loopback_address(name)


class LoopbackHost:
    """ASGI middleware against DNS rebinding: a server listening on a loopback address answers only requests for a
    loopback name (localhost, 127.x, [::1], with or without the port) or for the host it was told to listen on
    (`state.bound_host`, which `serve.server` sets); any other `Host` is refused with 403. A web page of another
    site whose name its DNS turns to 127.0.0.1 would otherwise reach the server as a page of its own, read its
    answers and make it encode (its `Origin` matches its `Host`). A server listening on every address (0.0.0.0,
    `::`) or on a network one was exposed by choice: any `Host` is served there. A request without a `Host` is no
    browser's, and is served."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.guarded(scope):
            host = dict(scope.get("headers") or []).get(b"host")
            if host is not None and not self.served(host.decode("latin-1")):
                await send_error(send, 403, self.refusal(host.decode("latin-1")))
                return
        await self.app(scope, receive, send)

    @property
    def bound(self) -> str | None:
        """The host the server was told to listen on (`host_name`), or None: not known (another ASGI server)."""
        bound = getattr(self.state, "bound_host", None)
        return host_name(bound) if isinstance(bound, str) else None

    def guarded(self, scope: Scope) -> bool:
        """Whether the request reached a server listening on a loopback address: the connection's own address is
        one, and the server was not told to listen on every address."""
        server = scope.get("server") or ("",)
        return isinstance(server[0], str) and loopback_address(server[0]) and self.bound not in WILDCARD_HOSTS

    def served(self, host: str) -> bool:
        """Whether a request for `host` (a `Host` header) is served."""
        name = host_name(host)
        return loopback_name(name) or name == self.bound

    def refusal(self, host: str) -> str:
        """The 403's message for a request for `host`."""
        bound = self.bound
        names = "localhost, 127.0.0.1 or [::1]" + (f" or {bound}" if bound and not loopback_name(bound) else "")
        return (
            f"a request for host {host[:100]!r} is not served: this server listens on a loopback address and answers "
            f"requests for {names} only"
        )


class Utf8Query:
    """ASGI middleware: a query string that is not UTF-8 (after percent-decoding) is refused with 400."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not valid_utf8_query(scope.get("query_string", b"")):
            await send_error(send, 400, "the query string is not valid UTF-8")
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused with 413, by its Content-Length up front, or
    as it arrives when it has none (chunked), before the app has read more than the limit; one that sends nothing
    for `stall` seconds before its end is answered 408, so that stalled uploads do not hold the server's
    connections (a client's wait for its answer, after the body, is not timed)."""

    def __init__(self, app: Any, limit: int, stall: float | None = None) -> None:
        self.app, self.limit = app, limit
        self.stall = BODY_STALL_SECONDS if stall is None else stall

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await send_error(send, 413, self.message)
            return
        received, started, body_done = 0, False, False

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # the body is in: what follows is the wait for a disconnect, never timed
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.stall)
            except TimeoutError:  # an HTTPException: the route's error handler answers it
                raise HTTPException(408, f"the request body sent nothing for {self.stall:g} s") from None
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > self.limit:
                raise HTTPException(413, self.message)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except Exception as err:  # the limit or the stall hit outside a route's error handlers
            status = getattr(err, "status_code", None)
            if status not in (408, 413) or started:
                raise
            await send_error(send, status, getattr(err, "detail", None) or self.message)

    @property
    def message(self) -> str:
        return f"request body over {self.limit} bytes"


INVALID_HTTP = f"invalid HTTP request: malformed, or a request line and headers over {MAX_REQUEST_LINE >> 20} MiB"


def json_h11_protocol() -> type:
    """uvicorn's h11 protocol, but for its own 400 (a request it cannot parse, answered before the app sees it),
    which it writes as JSON instead of text; passed to uvicorn as its `http` protocol class."""
    h11 = require("serve", "h11")
    base: Any = require("serve", "uvicorn.protocols.http.h11_impl").H11Protocol

    class JsonH11Protocol(base):
        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"error": INVALID_HTTP}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ]
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return JsonH11Protocol
