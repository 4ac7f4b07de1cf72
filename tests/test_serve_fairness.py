"""`dictembed serve` is fair: searches go before the steps of a bulk encode, a search waits for one step at most,
and the work of a client that has gone is never computed. On the tiny served model, through a real server."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from dictembed.search_options import Filters


@pytest.fixture()
def rd(served_model: Path):
    from dictembed.reverse_dictionary import ReverseDictionary

    return ReverseDictionary.load(served_model)


UPLOAD_HEAD = b"POST /api/encode HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def post_json(url: str, body: dict, into: dict) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        into.update(status=response.status, body=json.loads(response.read()), done=time.perf_counter())


def get_json(url: str, into: dict) -> None:
    with urllib.request.urlopen(url, timeout=120) as response:
        into.update(status=response.status, body=json.loads(response.read()), done=time.perf_counter())


def raw_request(port: int, request: bytes) -> socket.socket:
    """A connection that has sent `request` (the caller closes it: a client that goes away)."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(request)
    return connection


def test_searches_run_before_waiting_bulk_steps_and_cancelled_calls_are_skipped() -> None:
    from dictembed.serve import BULK, SEARCH, ModelThread

    model, release, order = ModelThread(), threading.Event(), []
    model.submit(SEARCH, release.wait)  # the model is busy: everything below waits
    futures = [
        model.submit(BULK, order.append, "bulk 1"),
        model.submit(BULK, order.append, "bulk 2"),
        model.submit(SEARCH, order.append, "search 1"),
        model.submit(BULK, order.append, "bulk 3"),
        model.submit(SEARCH, order.append, "search 2"),
    ]
    assert futures[1].cancel()  # its client went away
    release.set()
    model.call(lambda: None)
    wait_for(lambda: all(f.done() for f in futures))
    assert order == ["search 1", "search 2", "bulk 1", "bulk 3"] and model.skipped == 1


def test_a_stopped_model_thread_runs_what_was_queued_then_ends_and_a_later_call_starts_it() -> None:
    from dictembed.serve import BULK, SEARCH, ModelThread

    model, release, order = ModelThread(), threading.Event(), []
    model.submit(SEARCH, release.wait)
    queued = [model.submit(BULK, order.append, "bulk"), model.submit(SEARCH, order.append, "search")]
    stoppers = [threading.Thread(target=model.stop) for _ in range(2)]  # a second stop queues nothing more
    for stopper in stoppers:
        stopper.start()
    wait_for(lambda: model.waiting == 3)  # the two calls and the end, behind the running call
    late = model.submit(BULK, order.append, "late")  # queued after the stop: it runs before the end
    release.set()
    for stopper in stoppers:
        stopper.join(60)
    assert order == ["search", "bulk", "late"] and all(f.done() for f in [*queued, late])
    assert not model.running and model.waiting == 0
    assert model.call(order.append, "again") is None and model.running and order[-1] == "again"
    model.stop(60)
    assert not model.running


def test_the_app_shutdown_ends_its_model_thread_and_the_app_serves_again(rd) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    app = create_app(reverse_dictionary=rd)
    for _ in range(2):
        with TestClient(app) as client:
            assert client.get("/api/reverse", params={"q": "a pet that barks", "k": 2}).status_code == 200
            assert app.state.model.running
        assert not app.state.model.running


def test_a_cancelled_query_is_left_out_of_its_batch(rd) -> None:
    from dictembed.serve import SEARCH, ModelThread, QueryBatcher

    model, release, searched = ModelThread(), threading.Event(), []
    batcher = QueryBatcher(rd.prepare(), model)
    search_many, alone = rd.search_many, [r.words for r in rd.search("rain", 3)]

    def recorded(queries, *args, **kwargs):
        searched.append(list(queries))
        return search_many(queries, *args, **kwargs)

    rd.search_many = recorded
    model.submit(SEARCH, release.wait)
    futures = {q: batcher.submit(q, 3, Filters()) for q in ("a pet that barks", "gone 1", "gone 2", "rain")}
    assert futures["gone 1"].cancel() and futures["gone 2"].cancel()
    release.set()
    assert [r.words for r in futures["rain"].result(60)] == alone
    assert searched == [["a pet that barks", "rain"]] and batcher.skipped == 2
    assert futures["a pet that barks"].result(60)


def test_the_searches_of_clients_that_went_away_are_not_run(rd) -> None:
    from dictembed.serve import SEARCH, background_server, create_app

    app = create_app(reverse_dictionary=rd)
    batcher, model = app.state.batcher, app.state.model
    searched: list[list[str]] = []
    search_many = rd.search_many

    def recorded(queries, *args, **kwargs):
        searched.append(list(queries))
        return search_many(queries, *args, **kwargs)

    rd.search_many = recorded
    with background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        release = threading.Event()
        model.submit(SEARCH, release.wait)  # the model is busy: the searches queue
        gone = [
            raw_request(port, f"GET /api/reverse?q=a+pet+number+{i} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            for i in range(5)
        ]
        neighbours = raw_request(port, b"GET /api/reverse?q=dog HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # no batcher
        wait_for(lambda: len(batcher.pending) == 5)
        wait_for(lambda: model.waiting == 6)  # the five searches' calls and the neighbours' one
        for connection in [*gone, neighbours]:
            connection.close()
        wait_for(lambda: all(p.future.cancelled() for p in batcher.pending))
        release.set()
        with urllib.request.urlopen(f"{base}/api/reverse?q=a+small+pet+that+purrs&k=2", timeout=60) as response:
            assert response.status == 200 and len(json.loads(response.read())["results"]) == 2
    assert searched == [["a small pet that purrs"]] and batcher.skipped == 5
    assert model.skipped == 1  # the neighbours


def test_a_search_answers_within_a_step_of_a_bulk_encode(rd) -> None:
    """A bulk encode of many steps (each made slow, as a big model's would be) runs beside a search: the search
    answers in a small part of the encode's time, long before the encode ends, and the encode's answer is whole."""
    from dictembed.serve import EncodeBudget, background_server, create_app

    app = create_app(reverse_dictionary=rd, budget=EncodeBudget(chunk=64))
    encode, started, steps = rd.encoder.encode, threading.Event(), []

    def slow(batch, **options):
        started.set()
        steps.append(len(batch))
        time.sleep(0.05)
        return encode(batch, **options)

    rd.encoder.encode = slow
    sentences = [f"sentence {i}: " + "the dog barks at the cat " * 10 for i in range(80)]  # 60-odd tokens each
    encoded: dict = {}
    with background_server(app) as base:
        start = time.perf_counter()
        bulk = threading.Thread(target=post_json, args=(f"{base}/api/encode", {"sentences": sentences}, encoded))
        bulk.start()
        assert started.wait(60)
        wait_for(lambda: len(steps) >= 3)  # the encode is under way
        asked = time.perf_counter()
        with urllib.request.urlopen(f"{base}/api/reverse?q=a+small+pet+that+purrs&k=3", timeout=60) as response:
            assert response.status == 200 and len(json.loads(response.read())["results"]) == 3
        answered = time.perf_counter()
        bulk.join(120)
    total = encoded["done"] - start
    assert encoded["status"] == 200 and len(encoded["body"]["embeddings"]) == 80 and len(steps) == 80
    assert answered - asked < total / 4, (answered - asked, total)
    assert encoded["done"] > answered + 1.0  # the encode went on long after


def test_a_similar_search_waits_for_its_one_off_build_and_no_other_search_does(rd, monkeypatch) -> None:
    """The near-synonym search's one-off build (`SynonymSearch.rough_definitions`: about 1 s for WordNet) runs on a
    thread of its own from the app's start: while it runs (held here until released), a similar-mode search waits
    for it, and a description asked after that one is searched and answered meanwhile; once the build ends, the
    similar-mode search answers what it would have, without building again."""
    from dictembed.near_synonyms import SynonymSearch
    from dictembed.serve import background_server, create_app

    rough, building, release, builds = SynonymSearch.rough_definitions, threading.Event(), threading.Event(), []

    def held(search: SynonymSearch):
        if search._rough is None:  # the build, not a later read of what it made
            builds.append(threading.current_thread().name)
            building.set()
            assert release.wait(60)
        return rough(search)

    monkeypatch.setattr(SynonymSearch, "rough_definitions", held)
    similar_entry, asked = rd.similar_entry, threading.Event()

    def noted(query: str, mode: str = "auto") -> str | None:
        entry = similar_entry(query, mode)
        if entry is not None:
            asked.set()
        return entry

    rd.similar_entry = noted
    app = create_app(reverse_dictionary=rd)
    similar: dict = {}
    with background_server(app) as base:
        assert building.wait(60)
        asker = threading.Thread(target=get_json, args=(f"{base}/api/reverse?q=dog&mode=similar&k=3", similar))
        asker.start()
        assert asked.wait(60)  # the similar-mode search is in, before the description
        description: dict = {}
        get_json(f"{base}/api/reverse?q=a+small+pet+that+purrs&k=2&mode=describe", description)
        assert description["status"] == 200 and len(description["body"]["results"]) == 2
        assert not release.is_set() and not similar and asker.is_alive()  # the build still runs, and its waiter
        release.set()
        asker.join(60)
    assert similar["status"] == 200 and similar["body"]["mode"] == "similar" and similar["done"] > description["done"]
    assert len(builds) == 1 and builds[0] != "dictembed-model"  # built once, off the model's thread
    assert [r["words"] for r in similar["body"]["results"]] == [r.words for r in rd.neighbours("dog", 3)]


def steady(steps: list, quiet: float = 0.5) -> bool:
    """Whether `steps` did not grow during `quiet` seconds (no encode step ran in that time)."""
    before = len(steps)
    time.sleep(quiet)
    return len(steps) == before


def test_an_encode_whose_client_went_away_stops_between_steps(rd) -> None:
    from dictembed.serve import EncodeBudget, background_server, create_app

    app = create_app(reverse_dictionary=rd, budget=EncodeBudget(chunk=8))
    encode, steps = rd.encoder.encode, []

    def slow(batch, **options):
        steps.append(len(batch))
        time.sleep(0.05)
        return encode(batch, **options)

    rd.encoder.encode = slow
    body = json.dumps({"sentences": ["a dog barks at the cat"] * 40}).encode()  # 8 tokens each: 40 steps
    with background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        client = raw_request(port, UPLOAD_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        wait_for(lambda: len(steps) >= 2)
        client.close()
        wait_for(lambda: steady(steps))
        with urllib.request.urlopen(f"{base}/health", timeout=60) as response:
            assert response.status == 200
    assert len(steps) < 10  # it stopped within a step or two of the client's going, not after its 40


def test_the_latency_benchmark_encodes_in_halves_until_the_budget_takes_them(rd) -> None:
    """benchmarks/serve_latency.py's bulk client: sentences of the asked length, a 413 halves its requests."""
    import conftest

    from dictembed.serve import EncodeBudget, background_server, create_app
    from dictembed.serve_scheduling import TokenCounter

    script = conftest.load_script("benchmarks/serve_latency.py")
    sentences = script.bulk_sentences(["a dog barks", "rain falls from the clouds", "bread"], 8, 200)
    assert [len(s) for s in sentences] == [200] * 8 and sentences[0].startswith("a dog barks rain falls")
    tokens = TokenCounter(rd.encoder).count(sentences)
    app = create_app(reverse_dictionary=rd, budget=EncodeBudget(request=sum(tokens[:5])))  # 4 fit, 8 do not
    stop, started = threading.Event(), threading.Event()
    with background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        threading.Timer(3.0, stop.set).start()
        summary = script.bulk_loop("127.0.0.1", port, sentences, stop, started)
    assert started.is_set() and summary["errors"] == 0 and summary["sentences_per_request"] == 4
    assert summary["requests"] >= 2 and summary["sentences_per_s"] > 0


def test_an_upload_cut_off_mid_body_is_one_info_line(rd, caplog) -> None:
    """A client that closes its socket before its body is sent is a client gone, not an internal error."""
    import logging

    from dictembed.serve import background_server, create_app

    app = create_app(reverse_dictionary=rd)
    head = UPLOAD_HEAD + b"Content-Length: 100\r\n\r\n"
    with caplog.at_level(logging.INFO), background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        raw_request(port, head + b'{"sentences": ["a').close()
        wait_for(lambda: "the client went away" in caplog.text)
        with urllib.request.urlopen(f"{base}/api/reverse?q=a+small+pet&k=1", timeout=60) as response:
            assert response.status == 200
    assert "internal error" not in caplog.text and "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_an_upload_that_stalls_is_answered_408_and_others_are_served(rd, monkeypatch) -> None:
    """A body that sends nothing for the stall time gets a JSON 408 (its connection freed); a search, whose wait
    for its answer after the request is not timed, is unaffected."""
    from dictembed import serve_http
    from dictembed.serve import background_server, create_app

    monkeypatch.setattr(serve_http, "BODY_STALL_SECONDS", 0.5)
    app = create_app(reverse_dictionary=rd)
    head = UPLOAD_HEAD + b"Content-Length: 100\r\n\r\n"
    with background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        stalled = raw_request(port, head + b'{"sentences": ["a')
        received = b""
        while not received.endswith(b"}") and (chunk := stalled.recv(4096)):  # the head and body may come apart
            received += chunk
        answer = received.decode()
        stalled.close()
        with urllib.request.urlopen(f"{base}/api/reverse?q=a+small+pet&k=1", timeout=60) as response:
            assert response.status == 200
    assert answer.startswith("HTTP/1.1 408") and '"error":"the request body sent nothing for 0.5 s"' in answer
