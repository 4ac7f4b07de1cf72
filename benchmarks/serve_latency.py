"""Latency of `dictembed serve`: GET /api/reverse?q=...&k=10 from one client, then from N concurrent ones.

    python benchmarks/serve_latency.py                                   # outputs/minilm-defsent-plus
    python benchmarks/serve_latency.py outputs/OTHER --clients 8 --seconds 60 --queries 200
    python benchmarks/serve_latency.py --url http://127.0.0.1:8000       # a server already running

Starts `dictembed serve MODEL` in a subprocess on a free localhost port (so the clients do not share its
interpreter), waits for /health, sends a few unmeasured warm-up requests, then, per mode, cycles over a
fixed seeded list of definitions (default: 200 from the Oxford dictionary, a dictionary the model was not
trained on) until every query was sent once or `--seconds` ran out. Each client is a thread with its own
keep-alive `http.client` connection. Prints one JSON document: per mode the requests, errors, latency
p50/p90/p99/mean/max in ms and queries/s, with `os.getloadavg()` before and after (the figures mean
little on a busy machine).
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
from pathlib import Path
from typing import Any

import numpy as np

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
        single = run_mode(host, port, queries, 1, args.seconds, args.k)
        concurrent = run_mode(host, port, queries, args.clients, args.seconds, args.k)
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
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
