"""Latency of `dictembed serve`: GET /api/reverse?q=...&k=10 from one client, then from N concurrent ones, and
(`--bulk`) from one client while another encodes 256 sentences of 2,000 characters again and again.

    python benchmarks/serve_latency.py                                   # outputs/minilm-defsent-plus
    python benchmarks/serve_latency.py outputs/OTHER --clients 8 --seconds 60 --queries 200
    python benchmarks/serve_latency.py --url http://127.0.0.1:8000       # a server already running
    python benchmarks/serve_latency.py --bulk                            # and searches beside a bulk encode

Starts `dictembed serve MODEL` in a subprocess on a free localhost port (so the clients do not share its
interpreter), waits for /health, sends a few unmeasured warm-up requests, then, per mode, cycles over a
fixed seeded list of definitions (default: 200 from the Oxford dictionary, a dictionary the model was not
trained on) until every query was sent once or `--seconds` ran out. Each client is a thread with its own
keep-alive `http.client` connection. With `--bulk`, a third mode repeats the single client's queries while
one more client POSTs /api/encode in a loop: `--bulk-sentences` sentences of `--bulk-chars` characters
(definitions of the same dictionary run together), sent as one request, or in halves until the server's
token budget takes them (its 413 says so). Prints one JSON document: per mode the requests, errors, latency
p50/p90/p99/mean/max in ms and queries/s (and the bulk client's requests, sentences per request and
seconds per request), with the CPU's model name and `os.getloadavg()` before and after (the figures mean
little on a busy machine). When it started the server, each mode also reports the server's CPU: `server_cores`
(its CPU seconds over the mode's wall time) and `server_cpu_ms_per_query`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from machine import cpu

DEFAULT_MODEL = "outputs/minilm-defsent-plus"


def free_port() -> int:
    """A localhost port nobody listens on (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_queries(spec: str, n: int, seed: int = 0) -> list[str]:
    """`n` seeded definitions of the dictionary `spec` (`load_dictionary`), each one line, at most 2,000 chars."""
    from dictembed.dictionary import load_dictionary
    from dictembed.dictionary.split import seeded_sample

    definitions = [" ".join(d.split())[:2000] for _, d in load_dictionary(spec).pairs()]
    return seeded_sample([d for d in definitions if d], n, seed)


def get(connection: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    """One GET on a keep-alive connection: (status, body)."""
    connection.request("GET", path)
    response = connection.getresponse()
    return response.status, response.read()


def reverse_path(query: str, k: int) -> str:
    return "/api/reverse?" + urllib.parse.urlencode({"q": query, "k": k})


def bulk_sentences(texts: list[str], n: int, chars: int) -> list[str]:
    """`n` sentences of `chars` characters, each `texts` run together from its own starting point."""
    out = []
    for i in range(n):
        parts, length, j = [], 0, i
        while length < chars:
            parts.append(texts[j % len(texts)])
            length += len(parts[-1]) + 1
            j += 1
        out.append(" ".join(parts)[:chars])
    return out


def post_json(connection: http.client.HTTPConnection, path: str, body: Any) -> tuple[int, bytes]:
    """One POST of a JSON body on a keep-alive connection: (status, body)."""
    connection.request("POST", path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


def bulk_loop(host: str, port: int, sentences: list[str], stop: threading.Event, started: threading.Event) -> dict:
    """POST /api/encode of all `sentences` until `stop` is set, in as few requests as the server takes: a 413
    (over its token budget) halves the request. `started` is set as the first request goes out."""
    connection = http.client.HTTPConnection(host, port, timeout=600)
    per_request, seconds, errors, done = len(sentences), [], [], 0
    while not stop.is_set():
        for start in range(0, len(sentences), per_request):
            started.set()
            begin = time.perf_counter()
            try:
                status, _ = post_json(connection, "/api/encode", {"sentences": sentences[start : start + per_request]})
            except (OSError, http.client.HTTPException) as error:
                errors.append(type(error).__name__)
                connection = http.client.HTTPConnection(host, port, timeout=600)
                break
            if status == 413 and per_request > 1:
                per_request //= 2
                break
            if status != 200:
                errors.append(str(status))
                time.sleep(0.1)  # no hot loop of refusals
                break
            seconds.append(time.perf_counter() - begin)
            done += per_request
            if stop.is_set():
                break
    summary: dict[str, Any] = {"requests": len(seconds), "errors": len(errors), "sentences_per_request": per_request}
    if seconds:
        summary.update(
            p50_s=float(np.percentile(seconds, 50)),
            max_s=float(max(seconds)),
            sentences_per_s=done / sum(seconds),
        )
    if errors:
        summary["error_kinds"] = sorted(set(errors))
    return summary


def beside_bulk(
    host: str, port: int, queries: list[str], seconds: float, k: int, sentences: list[str]
) -> dict[str, Any]:
    """The single client's figures (`run_mode`) while `bulk_loop` encodes `sentences` over and over."""
    stop, started, bulk = threading.Event(), threading.Event(), {}
    thread = threading.Thread(target=lambda: bulk.update(bulk_loop(host, port, sentences, stop, started)))
    thread.start()
    started.wait(60)
    time.sleep(0.5)  # the encode is on the model
    try:
        single = run_mode(host, port, queries, 1, seconds, k)
    finally:
        stop.set()
        thread.join()
    return {**single, "bulk": bulk}


def wait_ready(host: str, port: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Poll /health until it answers 200 (the model loads first); error if the server dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"the server exited with status {process.returncode} before answering")
        try:
            connection = http.client.HTTPConnection(host, port, timeout=5)
            if get(connection, "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server did not answer /health within {timeout:.0f} s")


def cpu_seconds(pid: int) -> float | None:
    """The user and system CPU time a process has used so far (Linux's /proc/PID/stat), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def with_server_cpu(pid: int | None, mode: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`mode()`'s figures, with the server's CPU time over it (when the server is this script's child): its
    cores busy on average and its CPU milliseconds per answered query."""
    before = None if pid is None else cpu_seconds(pid)
    summary = mode()
    after = None if pid is None else cpu_seconds(pid)
    if before is not None and after is not None and summary["requests"]:
        summary.update(
            server_cores=(after - before) / summary["wall_s"],
            server_cpu_ms_per_query=(after - before) * 1000 / summary["requests"],
        )
    return summary


def run_mode(host: str, port: int, queries: list[str], clients: int, seconds: float, k: int) -> dict[str, Any]:
    """Send every query once, spread over `clients` threads, stopping at `seconds`; latency figures."""
    paths = [reverse_path(q, k) for q in queries]
    lock = threading.Lock()
    latencies: list[float] = []
    errors: list[str] = []
    position = [0]
    deadline = time.perf_counter() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection(host, port, timeout=30)
        while time.perf_counter() < deadline:
            with lock:
                if position[0] >= len(paths):
                    return
                path = paths[position[0]]
                position[0] += 1
            start = time.perf_counter()
            try:
                status, _ = get(connection, path)
            except (OSError, http.client.HTTPException) as error:
                status, connection = -1, http.client.HTTPConnection(host, port, timeout=30)
                with lock:
                    errors.append(type(error).__name__)
                continue
            elapsed = time.perf_counter() - start
            with lock:
                if status == 200:
                    latencies.append(elapsed)
                else:
                    errors.append(str(status))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ms = np.array(latencies) * 1000
    summary: dict[str, Any] = {"clients": clients, "requests": len(latencies), "errors": len(errors), "wall_s": wall}
    if len(ms):
        summary.update(
            p50_ms=float(np.percentile(ms, 50)),
            p90_ms=float(np.percentile(ms, 90)),
            p99_ms=float(np.percentile(ms, 99)),
            mean_ms=float(ms.mean()),
            max_ms=float(ms.max()),
            queries_per_s=len(ms) / wall,
        )
    if errors:
        summary["error_kinds"] = sorted(set(errors))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=DEFAULT_MODEL, help=f"model folder (default: {DEFAULT_MODEL})")
    parser.add_argument("--url", default=None, help="measure this running server instead of starting one")
    parser.add_argument("--queries", type=int, default=200, help="seeded definitions sent per mode (default: 200)")
    parser.add_argument("--dictionary", default="oxford", help="where the queries come from (default: oxford)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the query sample (default: 0)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients of the second mode (default: 8)")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long per mode (default: 60)")
    parser.add_argument("--k", type=int, default=10, help="results per query (default: 10)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured requests first (default: 5)")
    parser.add_argument("--device", default="cpu", help="the server's --device (default: cpu)")
    parser.add_argument("--startup-timeout", type=float, default=600.0, help="seconds to wait for the server")
    parser.add_argument("--bulk", action="store_true", help="a third mode: one client beside a bulk encode loop")
    parser.add_argument("--bulk-sentences", type=int, default=256, help="sentences of the bulk encode (default: 256)")
    parser.add_argument("--bulk-chars", type=int, default=2000, help="characters of each (default: 2000)")
    args = parser.parse_args()

    queries = load_queries(args.dictionary, args.queries, args.seed)
    process = None
    if args.url:
        parsed = urllib.parse.urlsplit(args.url)
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    else:
        if not Path(args.model).is_dir():
            raise SystemExit(f"{args.model}: no such model folder")
        host, port = "127.0.0.1", free_port()
        command = [sys.executable, "-m", "dictembed.cli", "serve", "-q", "--model", args.model, "--port", str(port)]
        process = subprocess.Popen([*command, "--device", args.device], stdout=subprocess.DEVNULL)
    try:
        started = time.perf_counter()
        wait_ready(host, port, args.startup_timeout, process)
        startup = time.perf_counter() - started
        connection = http.client.HTTPConnection(host, port, timeout=30)
        for query in queries[: args.warmup]:
            get(connection, reverse_path(query, args.k))
        health = json.loads(get(connection, "/health")[1])
        load_before = os.getloadavg()
        pid = None if process is None else process.pid
        single = with_server_cpu(pid, lambda: run_mode(host, port, queries, 1, args.seconds, args.k))
        concurrent = with_server_cpu(pid, lambda: run_mode(host, port, queries, args.clients, args.seconds, args.k))
        bulk = None
        if args.bulk:
            sentences = bulk_sentences(queries, args.bulk_sentences, args.bulk_chars)
            bulk = beside_bulk(host, port, queries, args.seconds, args.k, sentences)
        load_after = os.getloadavg()
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
    result = {
        "model": args.model if not args.url else health.get("model"),
        "entries": health.get("entries"),
        "results": health.get("results"),
        "queries": len(queries),
        "dictionary": args.dictionary,
        "k": args.k,
        "startup_s": None if args.url else startup,
        "single": single,
        "concurrent": concurrent,
        **({"single_beside_bulk": bulk} if bulk is not None else {}),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpu_count": os.cpu_count(),
        "cpu": cpu()["model"],
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
