"""`dictembed serve` against DNS rebinding: a server listening on a loopback address answers requests for loopback
names only (localhost, 127.x, [::1], or the host it was told to listen on), so that a web page of another site whose
name its DNS turns to 127.0.0.1 can neither read its answers nor make it encode. On the tiny served model, through a
real server and through the test client (whose connection address is the base URL's)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from dictembed.serve_http import host_name, loopback_name

BODY = json.dumps({"sentences": ["a dog barks"]})


@pytest.fixture(scope="module")
def rd(served_model: Path):
    from dictembed.reverse_dictionary import ReverseDictionary

    return ReverseDictionary.load(served_model).prepare()


@pytest.fixture()
def app(rd):
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    app = create_app(reverse_dictionary=rd)
    yield app
    with TestClient(app):  # its shutdown ends the app's model thread
        pass


@pytest.fixture()
def port(app) -> Iterator[int]:
    from dictembed.serve import background_server

    with background_server(app) as base:  # on 127.0.0.1, the default
        yield int(base.rsplit(":", 1)[1])


def ask(port: int, method: str, path: str, headers: dict[str, str], body: str | None = None) -> tuple[int, dict]:
    """The status and JSON answer of a request to the real server on 127.0.0.1:`port` with these `headers` (its
    `Host` as given)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        sent = {"content-type": "application/json", **headers} if body is not None else headers
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def assert_refused(status: int, answer: dict, host: str) -> None:
    assert status == 403 and set(answer) == {"error"}, answer
    message = answer["error"]
    assert message.startswith(f"a request for host {host!r} is not served: this server listens on a loopback")
    assert "\n" not in message and "localhost, 127.0.0.1 or [::1]" in message


def test_a_page_rebound_to_the_loopback_address_is_refused(port: int) -> None:
    """The repro: a page of evil.example, its name turned to 127.0.0.1, sends its own Host and a matching Origin;
    the encode, the search and the rest of the server refuse it in one line of JSON."""
    host = f"evil.example:{port}"
    forged = {"host": host, "origin": f"http://{host}"}
    assert_refused(*ask(port, "POST", "/api/encode", forged, BODY), host)
    for path in ("/api/reverse?q=a+pet+that+barks", "/health", "/"):
        assert_refused(*ask(port, "GET", path, {"host": host}), host)
    assert_refused(*ask(port, "GET", "/health", {"host": "127.0.0.1.evil.example"}), "127.0.0.1.evil.example")
    assert ask(port, "GET", "/health", {"host": f"127.0.0.1:{port}"})[0] == 200  # the server goes on


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LocalHost", "127.0.0.2", "[::1]:{port}"])
def test_loopback_names_are_served(port: int, host: str) -> None:
    """The page on localhost works as before: its searches, and an encode with its own Origin."""
    host = host.format(port=port)
    status, answer = ask(port, "GET", "/api/reverse?q=a+pet+that+barks&k=2", {"host": host})
    assert status == 200 and len(answer["results"]) == 2
    status, answer = ask(port, "POST", "/api/encode", {"host": host, "origin": f"http://{host}"}, BODY)
    assert status == 200 and len(answer["embeddings"]) == 1
    status, answer = ask(port, "POST", "/api/encode", {"host": host, "origin": "http://evil.example"}, BODY)
    assert status == 403 and "'http://evil.example'" in answer["error"]  # another site's page, as before


def test_a_request_without_a_host_is_no_browsers_and_is_served(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := connection.recv(1 << 16):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ") and json.loads(answer.partition(b"\r\n\r\n")[2])["status"] == "ok"


def _client(app, address: str = "127.0.0.1"):
    """A test client whose requests reach `app` on `address` (the connection's own address, `scope["server"]`)."""
    from fastapi.testclient import TestClient

    return TestClient(app, base_url=f"http://{address}:8000")


def test_a_server_told_to_listen_on_every_address_serves_any_host(app) -> None:
    """`--host 0.0.0.0`: the user exposed the server; a request for any host is served, even one that came over
    loopback, and a body from another site's page is refused by its Origin, as before."""
    from dictembed.serve import server

    server(app, "0.0.0.0", 0)  # made, not started: the app learns its host
    client = _client(app)
    forged = {"host": "evil.example:8000", "origin": "http://evil.example:8000"}
    assert client.get("/health", headers={"host": "evil.example:8000"}).status_code == 200
    assert client.post("/api/encode", content=BODY, headers=forged).status_code == 200
    other = client.post("/api/encode", content=BODY, headers={"host": "evil.example:8000", "origin": "http://a.b"})
    assert other.status_code == 403 and "'http://a.b'" in other.json()["error"]
    server(app, "127.0.0.1", 0)
    assert client.get("/health", headers={"host": "evil.example:8000"}).status_code == 403


def test_a_server_told_to_listen_on_a_name_of_a_loopback_address_serves_that_name(app) -> None:
    """`--host mybox`, a name of 127.0.1.1 in /etc/hosts: requests for mybox are served, for other names not."""
    from dictembed.serve import server

    server(app, "mybox", 0)
    client = _client(app, "127.0.1.1")
    assert client.get("/health", headers={"host": "MyBox:8000"}).status_code == 200
    refused = client.get("/health", headers={"host": "evil.example"})
    assert refused.status_code == 403 and "localhost, 127.0.0.1 or [::1] or mybox only" in refused.json()["error"]


def test_a_request_over_a_network_address_is_served_whatever_its_host(app) -> None:
    """A connection to a network address (a server bound to one, or to every address) is not a rebinding target:
    unchanged; so is the test client's own `testserver`."""
    assert _client(app, "192.168.1.5").get("/health", headers={"host": "evil.example"}).status_code == 200
    from fastapi.testclient import TestClient

    assert TestClient(app).get("/health").status_code == 200


@pytest.mark.parametrize(
    ("host", "name", "loopback"),
    [
        ("127.0.0.1:8000", "127.0.0.1", True),
        ("127.45.6.7", "127.45.6.7", True),
        ("LOCALHOST:80", "localhost", True),
        ("[::1]:8000", "::1", True),
        ("[::1]", "::1", True),
        ("::1", "::1", True),  # as a host to listen on, without brackets
        ("localhost.evil.example", "localhost.evil.example", False),
        ("127.0.0.1.nip.io:8000", "127.0.0.1.nip.io", False),
        ("0.0.0.0", "0.0.0.0", False),
        ("[::ffff:8.8.8.8]:80", "::ffff:8.8.8.8", False),
        ("", "", False),
    ],
)
def test_host_names(host: str, name: str, loopback: bool) -> None:
    assert host_name(host) == name and loopback_name(name) is loopback
