"""benchmarks/serve_latency.py: the client loop and its figures, against a stub HTTP server (no model)."""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType

import conftest
import pytest


def load_script() -> ModuleType:
    return conftest.load_script("benchmarks/serve_latency.py")


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        Stub.seen.append(query.get("q", [""])[0])
        time.sleep(0.01)
        status = 500 if "bad" in query.get("q", [""])[0] else 200
        body = b'{"status": "ok"}'
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Stub.seen = []
    yield server.server_address[1]
    server.shutdown()


def test_every_query_once_with_errors_counted(stub: int) -> None:
    script = load_script()
    script.wait_ready("127.0.0.1", stub, timeout=5)
    queries = [f"a definition {i}" for i in range(30)] + ["a bad one"]
    Stub.seen = []
    result = script.run_mode("127.0.0.1", stub, queries, clients=4, seconds=30, k=10)
    assert sorted(Stub.seen) == sorted(queries)
    assert (result["clients"], result["requests"], result["errors"], result["error_kinds"]) == (4, 30, 1, ["500"])
    assert 10 <= result["p50_ms"] <= result["p90_ms"] <= result["p99_ms"] <= result["max_ms"]
    assert result["queries_per_s"] > 0


def test_time_bound_stops_early(stub: int) -> None:
    script = load_script()
    result = script.run_mode("127.0.0.1", stub, [f"q{i}" for i in range(10_000)], clients=1, seconds=0.3, k=10)
    assert 0 < result["requests"] < 10_000 and result["wall_s"] < 5


def test_free_port_and_query_path() -> None:
    script = load_script()
    assert 0 < script.free_port() < 65536
    assert script.reverse_path("a b&c", 10) == "/api/reverse?q=a+b%26c&k=10"


def test_server_cpu_is_the_process_cpu_over_the_mode() -> None:
    script = load_script()

    def busy() -> dict:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        return {"requests": 10, "wall_s": 0.3}

    result = script.with_server_cpu(os.getpid(), busy)
    assert 0.25 <= result["server_cpu_ms_per_query"] * 10 / 1000 <= 0.6  # the 0.3 s of CPU it burnt, in ms per query
    assert 0.8 <= result["server_cores"] <= 2.0
    assert "server_cores" not in script.with_server_cpu(None, lambda: {"requests": 10, "wall_s": 1.0})
    assert script.cpu_seconds(2**22 + 12345) is None  # no such process
