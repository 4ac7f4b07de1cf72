"""`dictembed serve`: the JSON API and the page, through FastAPI's TestClient and a real uvicorn server, on a
tiny DefSent+ model trained once on a toy dictionary with parts of speech and three synonyms."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import CAR, HEADWORDS
from hypothesis import given, settings
from hypothesis import strategies as st

from dictembed.cli import main
from dictembed.search_options import FREQUENCY_WEIGHT, HEADWORD_WEIGHT, OVERLAP_WEIGHT, QUERY_WORD_WEIGHT, Filters


@pytest.fixture(scope="session")
def model_dir(served_model) -> Path:
    return served_model


@pytest.fixture(scope="module")
def app(model_dir):
    from dictembed.serve import create_app

    return create_app(model_dir)


@pytest.fixture(scope="module")
def client(app):
    from fastapi.testclient import TestClient

    return TestClient(app)


def _reverse(client, **params) -> dict:
    response = client.get("/api/reverse", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _words(results: list[dict]) -> list[str]:
    return [word for result in results for word in result["words"]]


# ------------------------------------------------------------------------------ the API
def test_health(client) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["model"] == "toy-reverse-dictionary"
    assert health["entries"] == len(HEADWORDS) and health["results"] == len(HEADWORDS) - 2
    assert health["score_kind"] == "cosine+definition+headword+words+frequency" and health["definitions"] is True


def test_reverse_finds_the_gold_word_with_its_definitions(client) -> None:
    data = _reverse(client, q="  a domesticated animal that barks ", k=3)
    assert data["query"] == "a domesticated animal that barks" and data["model"] == "toy-reverse-dictionary"
    assert (
        data["entries"] == len(HEADWORDS) and data["score_kind"] == "cosine+definition+headword+words+frequency"
    )  # English headwords
    assert len(data["results"]) == 3 and "dog" in _words(data["results"])
    scores = [r["score"] for r in data["results"]]
    bound = 1 + 8 * FREQUENCY_WEIGHT + HEADWORD_WEIGHT + 5 * OVERLAP_WEIGHT  # the query's 5 words shared
    low = -1 - HEADWORD_WEIGHT - QUERY_WORD_WEIGHT
    assert scores == sorted(scores, reverse=True) and all(low <= s <= bound for s in scores)
    dog = next(r for r in data["results"] if "dog" in r["words"])
    assert dog["definitions"]["dog"] == ["a domesticated animal that barks", "a loyal pet that chases cats"]
    assert dog["pos"]["dog"] == ["n", "n"]


def test_identical_entries_are_one_result(client) -> None:
    results = _reverse(client, q=CAR[0], k=100)["results"]
    assert len(results) == len(HEADWORDS) - 2  # every entry, the three synonyms as one result
    car = [r for r in results if "car" in r["words"]]
    assert len(car) == 1 and car[0]["words"] == ["car", "automobile", "motor car"]
    assert car[0]["definitions"] == {word: CAR for word in ("car", "automobile", "motor car")}
    assert sorted(_words(results)) == sorted(HEADWORDS)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"pos": "v"}, {"rain", "run"}),
        ({"pos": "adjective"}, {"quick"}),
        ({"pos": "r"}, {"quickly"}),
        ({"pattern": "qu*"}, {"quick", "quickly"}),
        ({"pattern": "r"}, {"rain", "river", "run"}),  # a prefix
        ({"pattern": "/^(auto|moto)/"}, {"automobile", "motor car"}),  # a regular expression
        ({"words": "phrase"}, {"motor car", "ice cream"}),
        ({"words": "single", "pattern": "*car"}, {"car"}),  # the synonym group keeps its passing word
        ({"pos": "v", "pattern": "ru?"}, {"run"}),
    ],
)
def test_filters(client, params, expected) -> None:
    results = _reverse(client, q="something that moves fast", k=100, **params)["results"]
    assert set(_words(results)) == expected


def test_only_a_filtered_search_leaves_the_event_loop_before_the_model(client, monkeypatch) -> None:
    """A filter's entry mask is computed on a worker thread, so that it holds up no other request; a search without
    filters is queued for the model straight from the event loop (a look-up and a put), with the same results."""
    import dictembed.serve_routes as routes

    hops: list[str] = []
    real = routes.run_in_threadpool

    async def counted(fn, *args, **kwargs):
        hops.append(fn.__name__)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(routes, "run_in_threadpool", counted)
    plain = _reverse(client, q="something that moves fast", k=100)["results"]
    assert hops == [] and {"rain", "run", "quick"} <= set(_words(plain))
    filtered = _reverse(client, q="something that moves fast", k=100, pos="v")["results"]
    assert hops == ["start_search"] and set(_words(filtered)) == {"rain", "run"}
    assert _reverse(client, q="something that moves fast", k=100, words="any", script="any")["results"] == plain
    assert hops == ["start_search"]


def test_a_description_longer_than_the_window_is_answered_as_cut(client) -> None:
    """The encoder reads a description up to its window (128 tokens here); the answer says when it cut one, as the
    encode answer counts its cut sentences, filtered or not."""
    assert _reverse(client, q="something that moves fast")["truncated"] is False
    long = "a small animal that lives in the house and moves fast " * 30  # about 360 tokens, 1,620 characters
    assert _reverse(client, q=long)["truncated"] is True
    assert _reverse(client, q=long, pos="n")["truncated"] is True
    similar = _reverse(client, q="quick", mode="similar")
    assert similar["mode"] == "similar" and similar["truncated"] is False


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=60))
def test_no_text_holds_more_tokens_than_utf8_bytes_and_special_tokens(model_dir, text: str) -> None:
    """What lets the batcher skip counting the tokens of a short query (`MAX_SPECIAL_TOKENS`): a text never holds
    more tokens than its UTF-8 bytes and the special ones (the tiny BERT's word pieces, any Unicode)."""
    from dictembed.serve_scheduling import MAX_SPECIAL_TOKENS

    encoder = _served_encoder(model_dir)
    if not text.strip() or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return  # the search refuses these before any count
    assert encoder.count_tokens([text])[0] <= len(text.encode()) + MAX_SPECIAL_TOKENS


_ENCODERS: dict[Path, object] = {}


def _served_encoder(model_dir: Path):
    """The served folder's query encoder, loaded once."""
    from dictembed.reverse_dictionary import ReverseDictionary

    if model_dir not in _ENCODERS:
        _ENCODERS[model_dir] = ReverseDictionary.load(model_dir).encoder
    return _ENCODERS[model_dir]


def test_definitions_come_in_sense_order_the_filtered_part_of_speech_first(client) -> None:
    def rain(**params) -> tuple[list[str], list[str]]:
        results = _reverse(client, q="water that falls from clouds", k=100, **params)["results"]
        found = next(r for r in results if "rain" in r["words"])
        return found["definitions"]["rain"], found["pos"]["rain"]

    noun, verb = "water that falls from clouds", "to fall as drops of water from the sky"
    assert rain() == ([noun, verb], ["n", "v"])  # the dictionary's order
    assert rain(pos="verb") == ([verb, noun], ["v", "n"])


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"length": 3}, {"dog", "cat", "car", "run"}),
        ({"min_length": 7}, {"quickly", "automobile", "motor car", "ice cream"}),  # letters: spaces do not count
        ({"min_length": 4, "max_length": 5}, {"rain", "king", "bread", "river", "quick"}),
        ({"length": 8, "words": "phrase"}, {"motor car", "ice cream"}),
        ({"initial": "Q"}, {"quick", "quickly"}),  # case-insensitive
        ({"initial": "motor c"}, {"motor car"}),
        ({"initial": "c", "max_length": 3}, {"cat", "car"}),
        ({"initial": "r", "pattern": "*n"}, {"rain", "run"}),  # with the pattern
        ({"length": 5, "pos": "a"}, {"quick"}),
        ({"initial": "*"}, set()),  # taken literally, not as a glob
        ({"initial": " "}, set(HEADWORDS)),  # blank: no filter
    ],
)
def test_length_and_initial_filters(client, params, expected) -> None:
    results = _reverse(client, q="something that moves fast", k=100, **params)["results"]
    assert set(_words(results)) == expected


def test_a_query_that_is_an_entry_lists_its_neighbours_without_itself(client, model_dir) -> None:
    from dictembed.reverse_dictionary import ReverseDictionary

    data = _reverse(client, q="dog", k=100)
    assert data["mode"] == "similar" and data["entry"] == "dog" and data["score_kind"] == "cosine+senses"
    assert "dog" not in _words(data["results"]) and sorted(_words(data["results"])) == sorted(set(HEADWORDS) - {"dog"})
    expected = ReverseDictionary.load(model_dir).neighbours("dog", k=100)  # scored as tests/test_near_synonyms.py
    assert [r["words"] for r in data["results"]] == [r.words for r in expected]
    assert [r["score"] for r in data["results"]] == pytest.approx([r.score for r in expected], abs=1e-5)
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True) and len(data["results"]) == len(HEADWORDS) - 3
    assert _reverse(client, q="dog", k=3)["results"] == data["results"][:3]


def test_the_neighbours_of_a_synonym_start_with_its_group(client) -> None:
    data = _reverse(client, q=" Automobile ", k=4)  # an entry case-insensitively
    assert data["entry"] == "automobile" and data["results"][0]["words"] == ["car", "motor car"]
    assert data["results"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert "automobile" not in _words(data["results"])
    single = _reverse(client, q="car", k=2, words="single")["results"]  # filters apply to the neighbours
    assert single[0]["words"] == ["automobile"] and "motor car" not in _words(single)
    assert _words(_reverse(client, q="car", k=5, initial="m")["results"]) == ["motor car"]


def test_modes(client) -> None:
    described = _reverse(client, q="zebra", k=3)  # one word that is no entry: a description
    assert described["mode"] == "describe" and described["entry"] is None and len(described["results"]) == 3
    assert _reverse(client, q="a dog", k=3)["mode"] == "describe"
    forced = _reverse(client, q="dog", k=3, mode="describe")
    assert forced["mode"] == "describe" and forced["entry"] is None
    assert _reverse(client, q="ice cream", k=3, mode="similar")["entry"] == "ice cream"
    response = client.get("/api/reverse", params={"q": "zebra", "mode": "similar"})
    assert response.status_code == 422 and "not an entry" in response.json()["error"]


@pytest.mark.parametrize("mode", ["describe", "similar"])
def test_sorting(client, mode) -> None:
    ranked = _reverse(client, q="river", k=100, mode=mode)["results"]
    alphabet = _reverse(client, q="river", k=100, mode=mode, sort="alphabet")["results"]
    by_length = _reverse(client, q="river", k=100, mode=mode, sort="length")["results"]
    firsts = [r["words"][0] for r in alphabet]
    assert firsts == sorted(firsts) and sorted(map(str, alphabet)) == sorted(map(str, ranked))
    lengths = [len(r["words"][0].replace(" ", "")) for r in by_length]
    assert lengths == sorted(lengths) and sorted(map(str, by_length)) == sorted(map(str, ranked))


def test_the_api_is_documented(client) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    assert 'fetch("openapi.json")' in docs.text and client.head("/docs").status_code == 200
    response = client.get("/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert set(schema["paths"]) == {"/health", "/api/reverse", "/api/encode"}  # the page is no API
    reverse = schema["paths"]["/api/reverse"]
    assert set(reverse) == {"get"}  # HEAD is answered but not listed twice
    assert reverse["get"]["summary"] and reverse["get"]["description"]
    parameters = {p["name"]: p for p in reverse["get"]["parameters"]}
    names = {"q", "k", "pos", "pattern", "words", "length", "min_length", "max_length", "initial", "mode", "sort"}
    assert names <= set(parameters) and all(p.get("description") for p in parameters.values())
    ref = reverse["get"]["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
    assert set(schema["components"]["schemas"][ref.split("/")[-1]]["properties"]) == {"error"}  # not FastAPI's
    encode = schema["paths"]["/api/encode"]["post"]
    assert encode["summary"] and {"413", "415", "422"} <= set(encode["responses"])
    body = encode["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["sentences"] and body["properties"]["sentences"]["maxItems"] == 256
    assert 'href="docs"' in client.get("/").text  # the page links the API


def test_the_docs_page_needs_nothing_outside_the_server(client) -> None:
    """`/docs` works offline: no script, style, font or link of another host (FastAPI's Swagger UI came from a
    CDN), the schema read from this server's own `openapi.json`."""
    docs = client.get("/docs").text
    assert re.findall(r"(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", docs) == []  # no absolute or protocol-relative URL
    assert re.findall(r"(?i)(?:src|href)=\"([^\"]*)\"", docs) == ["data:,", "./", "openapi.json", "openapi.json"]
    page = client.get("/").text
    assert re.findall(r"(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", page) == []


def test_the_page_and_predict_default_to_the_same_mode() -> None:
    """The page's describe / similar-words switch starts on `predict --mode`'s default, describe; the API's own
    default stays auto, and the page always sends its mode."""
    from dictembed.cli import build_parser
    from dictembed.search_options import DEFAULT_MODE
    from dictembed.serve_routes import page_html

    predict = build_parser(["predict"]).parse_args(["predict", "--model", "m", "x"])
    assert predict.mode == DEFAULT_MODE == "describe"
    switch = re.findall(r'<input id="mode-(\w+)" type="radio" name="mode" value="(\w+)"( checked)?>', page_html())
    assert switch == [("describe", "describe", " checked"), ("similar", "similar", "")]
    assert 'const MODES = ["describe", "similar"]' in page_html()


MINCE = [
    ("make less severe or harsh", "v"),
    ("cut food into very small pieces", "v"),
    ("meat that has been cut into very small pieces", "n"),
]


@pytest.fixture(scope="module")
def mince(bert_path):
    """A reverse dictionary whose definition vectors are the tiny BERT's own (`DefinitionSpace.build`), so that a
    query that is one of `mince`'s definitions matches that sense exactly; `mince`'s first sense is another."""
    from dictembed.dictionary.core import Dictionary
    from dictembed.encoder import Encoder
    from dictembed.entry_space import DefinitionSpace
    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.search_options import Ranking

    dictionary = Dictionary(name="mince")
    for definition, pos in MINCE:
        dictionary.add("mince", definition, pos=pos)
    dictionary.add("chop", "cut into pieces with a knife", pos="v")
    dictionary.add("soften", "make less hard or severe", pos="v")
    encoder = Encoder.load(str(bert_path), pooling="mean")
    space = DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")
    return ReverseDictionary(encoder, space, dictionary=dictionary, name="mince", ranking=Ranking(frequency_weight=0))


def _senses(results, word: str) -> list[str]:
    return next(r.definitions[word] for r in results if word in r.words)


def test_the_sense_that_matched_comes_first(mince) -> None:
    """A result's senses start with the one whose definition vector is nearest the query, the others after it in
    dictionary order (with a pos filter: the best of that part of speech, then that part of speech first)."""
    harsh, cut, meat = (definition for definition, _ in MINCE)
    assert _senses(mince.search(cut), "mince") == [cut, harsh, meat]
    assert _senses(mince.search(meat), "mince") == [meat, harsh, cut]
    assert _senses(mince.search(harsh), "mince") == [harsh, cut, meat]
    assert _senses(mince.search(cut, pos="n"), "mince") == [meat, harsh, cut]  # only a noun sense can match
    assert _senses(mince.search(meat, pos="v"), "mince") == [cut, harsh, meat]  # the best verb sense, then verbs
    assert _senses(mince.search(cut, max_definitions=1), "mince") == [cut]
    assert mince.search(cut)[0].pos["mince"] == ["v", "v", "n"]
    for word, own in (("chop", "cut into pieces with a knife"), ("soften", "make less hard or severe")):
        # a near-synonym's sense nearest the word's own first, then dictionary order
        vectors = mince.encoder.encode([own, harsh, cut, meat], normalize_embeddings=True)
        nearest = [harsh, cut, meat][int(np.argmax(vectors[1:] @ vectors[0]))]
        assert _senses(mince.neighbours(word), "mince") == [nearest] + [d for d in (harsh, cut, meat) if d != nearest]


def test_the_api_lists_the_matched_sense_first(mince) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    client = TestClient(create_app(reverse_dictionary=mince))
    results = _reverse(client, q=MINCE[1][0])["results"]
    row = next(r for r in results if r["words"] == ["mince"])
    assert row["definitions"]["mince"] == [MINCE[1][0], MINCE[0][0], MINCE[2][0]]
    assert row["pos"]["mince"] == ["v", "v", "n"]


def test_senses_of_another_dictionary_keep_their_order(mince, bert_path) -> None:
    """Shown definitions that are not the ones the definition vectors were made from (here one sense more) keep the
    dictionary's order: no vector says which of them matched."""
    from dictembed.dictionary.core import Dictionary
    from dictembed.reverse_dictionary import ReverseDictionary

    other = Dictionary(name="other")
    for definition, pos in [*MINCE, ("walk with short quick steps", "v")]:
        other.add("mince", definition, pos=pos)
    rd = ReverseDictionary(mince.encoder, mince.space, dictionary=other, name="other", ranking=mince.ranking)
    assert _senses(rd.search(MINCE[1][0]), "mince") == [d for d, _ in MINCE] + ["walk with short quick steps"]


def test_predict_prints_the_sense_that_matched(model_dir, capsys) -> None:
    """`predict`'s table shows each result's first definition: for `rain` its verb sense, the second in the
    dictionary, when that is what the description says."""
    verb = "to fall as drops of water from the sky"
    assert main(["predict", "--model", str(model_dir), verb, "--top-k", "20"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.split()[1] == "rain")
    assert line.endswith(verb)
    assert main(["predict", "--model", str(model_dir), verb, "--top-k", "20", "--json"]) == 0
    rain = next(r for r in json.loads(capsys.readouterr().out) if r["words"] == ["rain"])
    assert rain["definitions"]["rain"] == [verb, "water that falls from clouds"] and rain["pos"]["rain"] == ["v", "n"]


def test_single_words_keep_the_group_without_its_phrase(client) -> None:
    results = _reverse(client, q=CAR[1], k=100, words="single")["results"]
    assert [r["words"] for r in results if "car" in r["words"]] == [["car", "automobile"]]
    assert not any(" " in word for word in _words(results))


def test_encode(client) -> None:
    response = client.post("/api/encode", json={"sentences": ["a dog barks", "rain falls", "bread"]})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["dim"] == 32 and np.asarray(data["embeddings"]).shape == (3, 32)
    unit = client.post("/api/encode", json={"sentences": ["a dog barks"], "normalize": True}).json()
    assert np.linalg.norm(unit["embeddings"][0]) == pytest.approx(1.0, abs=1e-5)


def test_the_page_is_served_without_external_resources(client) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'id="q"' in page and 'id="pos"' in page and 'id="pattern"' in page and 'id="words"' in page
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "http://" not in page and "https://" not in page


# ----------------------------------------------------------------------------- bad input
BAD_QUERIES = {  # /api/reverse?...: (status, part of the message)
    "q=": (422, "empty"),
    "q=%20%20%20": (422, "empty"),
    "k=5": (422, "q: Field required"),
    "q=" + "a" * 2001: (422, "2000"),  # 100,000 characters: see the real server below
    "q=%ff%fe": (400, "UTF-8"),
    **{f"q=dog&k={k}": (422, "k:") for k in ("0", "-3", "101", "1" + "0" * 20, "ten")},
    "q=dog&words=many": (422, "words:"),
    "q=dog&pos=x": (422, "pos: unknown part of speech 'x'"),
    "q=dog&pattern=/(/": (422, "pattern: invalid regular expression"),
    "q=dog&pattern=" + "x" * 101: (422, "pattern:"),
    **{
        f"q=dog&{name}={value}": (422, f"{name}:")
        for name in ("length", "min_length", "max_length")
        for value in ("0", "101", "five", "5.0", "+5", "1_0")  # a count is digits: 5.0 and 1_0 are not read
    },
    **{f"q=dog&k={k}": (422, f"k: a whole number in digits, not '{k}'") for k in ("2.0", "1_0", "")},
    "q=dog&min_length=6&max_length=4": (422, "min_length: 6 is more than max_length 4"),
    "q=dog&length=5&min_length=4": (422, "length: give an exact length or min_length/max_length, not both"),
    "q=dog&initial=" + "g" * 21: (422, "initial:"),
    "q=dog&mode=synonyms": (422, "mode:"),
    "q=zebra&mode=similar": (422, "not an entry"),
    "q=dog&sort=size": (422, "sort:"),
}
BAD_BODIES = {  # POST /api/encode with this body: (part of the message)
    b"": "body",
    b"{}": "sentences: Field required",
    b'{"sentences": []}': "sentences:",
    b'{"sentences": [1, 2]}': "sentences.0:",
    b'{"sentences": "a pet"}': "sentences:",
    json.dumps({"sentences": ["a" * 2001]}).encode(): "2000",
    json.dumps({"sentences": ["a"] * 257}).encode(): "256",
    b"{not json": "JSON",
    b"\xff\xfe": "JSON",
    b"[" * 100_000 + b"]" * 100_000: "body: Invalid JSON: recursion limit exceeded",
    b'{"sentences": ["a"], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}": "recursion limit",
    b'{"sentences": ["a"], "normalize": ' + b"7" * 5000 + b"}": "body: Invalid JSON: number out of range",
    b'{"sentences": [' + b"1" * 5000 + b"]}": "number out of range",
    '{"sentences": ["café"]}'.encode("utf-16"): "JSON",  # JSON is UTF-8
    json.dumps({"sentences": list(range(200))}).encode(): "and 195 more",  # one line, however many errors
    b'{"sentences": ["a"], "normalize": "yes"}': 'normalize: true or false, not "yes"',
    b'{"sentences": ["a"], "normalize": 1}': "normalize: true or false, not 1",
    b'{"sentences": ["a"], "sentences": ["b", "c"]}': "sentences: given more than once; give each key once",
}
BAD_REQUESTS = [
    *[("GET", f"/api/reverse?{query}", status, message) for query, (status, message) in BAD_QUERIES.items()],
    *[("POST", "/api/encode", 422, message, body) for body, message in BAD_BODIES.items()],
    ("GET", "/no/such/page", 404, "not found"),
    ("POST", "/api/reverse?q=dog", 405, "Method Not Allowed"),
    ("GET", "/api/reverse?q=dog&k=" + "9" * 5000, 422, "k:"),
]


def test_a_post_from_another_sites_page_is_refused(client) -> None:
    """A browser sends a POST without a Content-Type (`navigator.sendBeacon`) to any site unasked: another site's
    page could make a local server encode. Its `Origin` names it: 403; no Origin (curl, scripts) or this server's
    own origin is served."""
    body = b'{"sentences": ["a dog barks"]}'
    other = client.post("/api/encode", content=body, headers={"origin": "http://evil.example"})
    assert other.status_code == 403 and "http://evil.example" in other.json()["error"]
    for headers in ({}, {"origin": "http://testserver"}, {"origin": "http://testserver", "content-type": "text/json"}):
        response = client.post("/api/encode", content=body, headers=headers)
        assert response.status_code == (415 if "content-type" in headers else 200), (headers, response.text)


@pytest.mark.parametrize("request_", BAD_REQUESTS, ids=lambda r: " ".join(map(str, r[:3]))[:50])
def test_bad_input_is_a_4xx_json_error_and_the_server_keeps_serving(client, request_) -> None:
    method, path, status, message, *body = request_
    headers = {"content-type": "application/json"} if body else {}
    response = client.request(method, path, content=body[0] if body else None, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert isinstance(error, str) and error and message in error and "\n" not in error
    if status == 422 and "&" in path and "mode=similar" not in path:  # a filter's message: its name first
        assert error.split(":")[0] in path, error
    assert "dog" in _words(_reverse(client, q="a domesticated animal that barks", k=5)["results"])


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("POST", "/api/reverse?q=dog", "GET, HEAD"),
        ("DELETE", "/health", "GET, HEAD"),
        ("PUT", "/", "GET, HEAD"),
        ("GET", "/api/encode", "POST"),
        ("OPTIONS", "/api/encode", "POST"),
        ("POST", "/openapi.json", "GET, HEAD"),
    ],
)
def test_a_405_names_the_allowed_methods(client, method: str, path: str, allow: str) -> None:
    response = client.request(method, path)
    assert response.status_code == 405 and response.headers["allow"] == allow
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": f"Method Not Allowed: {path.split('?')[0]} takes {allow}"}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"content-type": "application/json", "content-encoding": "gzip"}, "Content-Encoding 'gzip' is not read"),
        ({"content-encoding": "identity, br"}, "Content-Encoding 'identity, br'"),
        ({"content-type": "text/plain"}, "Content-Type 'text/plain' is not read: send application/json"),
        ({"content-type": "application/x-www-form-urlencoded"}, "send application/json"),
    ],
)
def test_an_encoded_or_non_json_body_is_415(client, headers: dict[str, str], message: str) -> None:
    import gzip

    body = json.dumps({"sentences": ["a dog barks"]}).encode()
    encoded = gzip.compress(body) if "gzip" in headers.get("content-encoding", "") else body
    response = client.post("/api/encode", content=encoded, headers=headers)
    assert response.status_code == 415 and response.headers["content-type"] == "application/json"
    assert message in response.json()["error"] and "\n" not in response.json()["error"]
    if "content-encoding" in headers:
        assert response.headers["accept-encoding"] == "identity"
    for media in ("application/json; charset=utf-8", "application/vnd.api+json", None):  # JSON, or none said
        ok = client.post("/api/encode", content=body, headers={"content-type": media} if media else {})
        assert ok.status_code == 200 and len(ok.json()["embeddings"]) == 1


def test_an_encode_over_the_token_budget_is_413_naming_it(model_dir) -> None:
    from fastapi.testclient import TestClient

    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import EncodeBudget, create_app

    rd = ReverseDictionary.load(model_dir)
    budgeted = TestClient(create_app(reverse_dictionary=rd, budget=EncodeBudget(request=32, chunk=8)))
    assert rd.encoder.count_tokens(["a dog", "a"]) == [4, 3]  # [CLS] a dog [SEP], [CLS] a [SEP]
    ok = budgeted.post("/api/encode", json={"sentences": ["a dog"] * 8})
    assert ok.status_code == 200 and len(ok.json()["embeddings"]) == 8
    response = budgeted.post("/api/encode", json={"sentences": ["a dog"] * 8 + ["a"]})
    assert response.status_code == 413 and response.headers["content-type"] == "application/json"
    assert response.json()["error"] == (
        f"the sentences hold 35 tokens (each cut at the model's {rd.encoder.max_length}); one request encodes at "
        "most 32"
    )


def test_an_encode_in_steps_equals_one_pass_and_counts_cut_sentences(model_dir, caplog) -> None:
    """Steps of a few tokens (the sentences' order kept) give the vectors of one pass over all of them, and a
    sentence longer than the model's window is counted in `truncated` and in one warning for the request."""
    from fastapi.testclient import TestClient

    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import EncodeBudget, create_app

    rd = ReverseDictionary.load(model_dir)
    sentences = ["a dog barks", "rain", "water that falls from clouds " * 3, "bread", "pet " * 400, "a cat"]
    app = create_app(reverse_dictionary=rd, budget=EncodeBudget(chunk=12))
    steps: list[int] = []
    encode = rd.encoder.encode

    def counted(batch, **options):
        steps.append(len(batch))
        return encode(batch, **options)

    rd.encoder.encode = counted
    caplog.clear()  # what the load logged (its level depends on the tests before) is not the request's
    with caplog.at_level(logging.WARNING):
        data = TestClient(app).post("/api/encode", json={"sentences": sentences, "normalize": True}).json()
    rd.encoder.encode = encode
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "1 of 6 sentences to encode were longer than 128 tokens and were cut"
    ]
    whole = encode(sentences, normalize_embeddings=True)
    assert np.allclose(np.asarray(data["embeddings"]), whole, atol=1e-5)
    assert data["truncated"] == 1 and data["dim"] == 32 and data["model"] == rd.name
    assert len(steps) > 2 and sum(steps) == len(sentences)


def test_the_http_layer_answers_what_it_cannot_parse_with_json(app) -> None:
    """uvicorn answers a request it cannot parse before the app sees it: a 400, in JSON, and the server goes on."""
    from dictembed.serve import background_server
    from dictembed.serve_limits import MAX_REQUEST_LINE

    def raw(port: int, request: bytes) -> tuple[bytes, dict[str, str], bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
            connection.sendall(request)
            answer = b""
            while chunk := connection.recv(1 << 16):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        status, *lines = head.decode().split("\r\n")
        return status.encode(), dict(line.lower().split(": ", 1) for line in lines), body

    with background_server(app) as base:
        port = int(base.rsplit(":", 1)[1])
        for request in (
            b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  # two Host headers
            b"GET /api/reverse?q=" + b"a" * (MAX_REQUEST_LINE + 1000),  # a request line over the buffer
            b"NOT HTTP AT ALL\r\n\r\n",
        ):
            status, headers, body = raw(port, request)
            assert status == b"HTTP/1.1 400 Bad Request" and headers["content-type"] == "application/json"
            message = "invalid HTTP request: malformed, or a request line and headers over 1 MiB"
            assert json.loads(body) == {"error": message}
        health = b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        assert raw(port, health)[0].endswith(b"200 OK")


def test_a_nul_in_the_query_is_answered(client) -> None:
    assert _reverse(client, q="a\x00pet", k=3)["results"]


def test_a_real_server_answers_bad_input_with_json(app) -> None:
    from dictembed.serve import background_server

    def get(url: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    with background_server(app) as base:
        assert get(f"{base}/health")[0] == 200
        status, body = get(f"{base}/api/reverse?q=" + "a" * 100_000)
        assert status == 422 and "2000" in body["error"]
        status, body = get(f"{base}/api/reverse?q=%ff")
        assert status == 400 and "UTF-8" in body["error"]
        status, body = get(f"{base}/api/reverse?q=a+small+pet+that+purrs&k=2")
        assert status == 200 and len(body["results"]) == 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_serve_command_serves_until_interrupted(model_dir) -> None:
    port = _free_port()
    command = [sys.executable, "-m", "dictembed.cli", "serve", "--model", str(model_dir), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                    assert json.loads(response.read())["model"] == "toy-reverse-dictionary"
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-2000:]
                time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-2000:]
    assert out == "server stopped\n"  # the access log and every other log line go to stderr
    assert "GET /health" in err and f"serving {model_dir} on http://127.0.0.1:{port}" in err


def test_serve_without_the_extra_is_a_one_line_install_hint(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "fastapi", None)
    assert main(["serve", "--model", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'pip install "dictembed[serve]"' in err


def test_serve_checks_the_port(capsys) -> None:
    assert main(["serve", "--model", "m", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_the_python_serving_helpers_refuse_bad_arguments_in_one_line(tmp_path) -> None:
    """What the command line checks, `create_app`, `check_port` and `background_server` check too; a
    `create_app` that fails leaves no model thread behind."""
    import threading

    from dictembed.errors import DictEmbedError
    from dictembed.serve import background_server, check_port, create_app

    (tmp_path / "empty").mkdir()
    calls = {
        "model_path is a model folder or a list of them, not int": lambda: create_app(5),
        "reverse_dictionary is a ReverseDictionary or a list, not a list holding str": lambda: create_app(
            reverse_dictionary=["x"]
        ),
        "budget is an EncodeBudget, not int": lambda: create_app(tmp_path, budget=5),
        "centring must be True or False, not 'no'": lambda: create_app(tmp_path, centring="no"),
        "holds no saved entry space": lambda: create_app(tmp_path / "empty"),
        "a host name and a port from 0 to 65535": lambda: check_port("127.0.0.1", 70000),
        "timeout is a number of seconds above 0, not 'x'": lambda: background_server(None, timeout="x").__enter__(),
    }
    before = threading.active_count()
    for message, call in calls.items():
        with pytest.raises(DictEmbedError, match=re.escape(message)):
            call()
    assert threading.active_count() == before


def test_concurrent_queries_are_batched_with_the_answers_of_lone_ones(app, model_dir) -> None:
    """Queries that arrive while the model is busy are searched together, each getting exactly what it would
    get alone; a query with other options stays out of their batch; a bad query fails alone."""
    import threading

    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import ModelThread, QueryBatcher

    rd = ReverseDictionary.load(model_dir).prepare()
    model, release = ModelThread(), threading.Event()
    batcher = QueryBatcher(rd, model)
    queries = ["a domesticated animal that barks", "a small pet that purrs", "water falling from clouds", "x"]
    alone = {q: [r.to_dict() for r in rd.search(q, k=3)] for q in queries}
    answers: dict[str, object] = {}

    def ask(query: str, filters: Filters | None = None) -> None:
        try:
            answers[query] = [r.to_dict() for r in batcher.search(query, 3, filters)]
        except Exception as err:  # noqa: BLE001 - recorded for the assertion
            answers[query] = err

    busy = threading.Thread(target=model.call, args=(release.wait,))  # the model is busy: every request queues
    busy.start()
    threads = [threading.Thread(target=ask, args=(q,)) for q in queries]
    threads.append(threading.Thread(target=ask, args=(" ",)))  # blank: an error, for this query alone
    threads.append(threading.Thread(target=ask, args=("a feline", Filters(words="single"))))
    for t in threads:
        t.start()
    while len(batcher.pending) < len(threads):
        time.sleep(0.01)
    release.set()
    for t in [busy, *threads]:
        t.join(timeout=60)
    assert all(answers[q] == alone[q] for q in queries)
    assert isinstance(answers[" "], Exception) and "empty query" in str(answers[" "])
    assert isinstance(answers["a feline"], list)
    assert max(batcher.batches) == 5  # the five with the same options in one search_many (then retried)
    assert batcher.search("a small pet that purrs", 3) and batcher.batches[-1] == 1  # alone: at once


# ------------------------------------------------------------------------------ one request never stalls the others
CATASTROPHIC = ["/(\\w|\\w|\\w|\\w)*!/", "/(.*)*x$/", "/(a|aa)*b/"]  # exponential for a backtracking engine


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_patterns_run_in_linear_time(pattern: str) -> None:
    from dictembed.search_options import pattern_matcher

    matches = pattern_matcher(pattern)
    words = ["a" * 40, "word " * 8 + "tail", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"] * 2000
    start = time.perf_counter()
    assert not any(matches(word) for word in words)
    assert time.perf_counter() - start < 2.0  # Python's `re` needs minutes for one of these words


def test_a_pattern_re2_cannot_run_is_one_line(client) -> None:
    response = client.get("/api/reverse", params={"q": "a pet", "pattern": "/(a)\\1/"})
    assert response.status_code == 422 and "backreferences" in response.json()["error"]
    assert "\n" not in response.json()["error"] and "/(a)\\1/:" in response.json()["error"]  # as typed, one backslash
    empty = client.get("/api/reverse", params={"q": "a pet", "pattern": "//"})  # not the prefix "//"
    assert empty.status_code == 422 and empty.json()["error"].startswith("pattern: an empty regular expression //")


def test_a_catastrophic_pattern_does_not_stall_a_normal_query(app) -> None:
    import threading
    import urllib.parse

    from dictembed.serve import background_server

    def get(url: str, into: dict, key: str) -> None:
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                into[key] = (response.status, time.perf_counter() - start)
        except urllib.error.HTTPError as err:
            into[key] = (err.code, time.perf_counter() - start)

    with background_server(app) as base:
        answers: dict[str, tuple[int, float]] = {}
        attacks = [
            threading.Thread(
                target=get,
                args=(
                    f"{base}/api/reverse?" + urllib.parse.urlencode({"q": "pet", "pattern": pattern}),
                    answers,
                    pattern,
                ),
            )
            for pattern in CATASTROPHIC
        ]
        for thread in attacks:
            thread.start()
        get(f"{base}/api/reverse?q=a+small+pet+that+purrs&k=2", answers, "normal")
        get(f"{base}/health", answers, "health")
        for thread in attacks:
            thread.join(60)
    assert answers["normal"][0] == 200 and answers["normal"][1] < 1.0
    assert answers["health"][0] == 200 and answers["health"][1] < 1.0
    assert all(answers[pattern][0] == 200 for pattern in CATASTROPHIC)


# ------------------------------------------------------------------------------ bodies, HEAD, paths, ports
def test_an_over_long_body_is_413(client) -> None:
    from dictembed.serve import MAX_BODY_BYTES

    big = b'{"sentences": ["' + b"a" * (MAX_BODY_BYTES + 10) + b'"]}'
    response = client.post("/api/encode", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "error" in response.json()

    def chunks():  # no Content-Length: refused as it arrives
        yield b'{"sentences": ["'
        for _ in range(MAX_BODY_BYTES // (1 << 16) + 2):
            yield b"a" * (1 << 16)
        yield b'"]}'

    response = client.post("/api/encode", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert client.get("/health").status_code == 200  # and the server goes on


@pytest.mark.parametrize("path", ["/", "/health", "/api/reverse?q=a+pet", "/api/reverse?q=dog"])
def test_head_is_answered_wherever_get_is(client, path: str) -> None:
    response = client.head(path)
    assert response.status_code == 200 and response.content == b""


def test_no_answer_names_a_path_of_the_machine(client, model_dir) -> None:
    health = client.get("/health").json()
    served = health["dictionaries"][0]["dictionary"]
    assert health["dictionary"] == served  # the name `dictionary=` takes, no path
    assert client.get("/api/reverse", params={"q": "a pet", "dictionary": served}).status_code == 200
    assert str(model_dir.parent) not in json.dumps(health)


def test_a_dictionary_that_cannot_load_is_named_without_its_path(model_dir, tmp_path) -> None:
    from fastapi.testclient import TestClient

    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import create_app

    gone = tmp_path / "gone.tsv"
    gone.write_text("word\tdefinition\ndog\ta pet\n", encoding="utf-8")
    rd = ReverseDictionary.load(model_dir, dictionary=str(gone))  # checked here, read at the first search
    gone.unlink()
    response = TestClient(create_app(reverse_dictionary=rd)).get("/api/reverse", params={"q": "a pet", "pos": "n"})
    assert response.status_code == 422 and "gone.tsv" in response.json()["error"]
    assert str(tmp_path) not in response.text


def test_serve_on_a_port_in_use_is_one_line_before_the_model_loads(capsys, tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.perf_counter()
        assert main(["serve", "--model", str(tmp_path / "no-such-model"), "--port", str(port)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"cannot listen on 127.0.0.1:{port}" in err
    assert time.perf_counter() - start < 5  # the (missing) model was never loaded


def test_the_model_runs_on_one_thread_in_call_order() -> None:
    """Every model call of the server runs on the same thread (one OpenMP pool), one at a time, in order, and
    an error reaches its caller."""
    import threading

    from dictembed.serve import ModelThread

    model = ModelThread()
    seen: list[tuple[int, str]] = []
    callers = [
        threading.Thread(target=model.call, args=(lambda i=i: seen.append((i, threading.current_thread().name)),))
        for i in range(20)
    ]
    for caller in callers:
        caller.start()
        caller.join()
    assert [i for i, _ in seen] == list(range(20))
    assert len({name for _, name in seen}) == 1 and seen[0][1] != threading.current_thread().name
    with pytest.raises(ZeroDivisionError):
        model.call(lambda: 1 / 0)
    assert model.call(sum, [1, 2, 3]) == 6


def test_a_parameter_the_search_does_not_take_is_named(client) -> None:
    """A misspelt filter (`lenght`) would filter nothing: a 422 naming it and the parameters taken, one line."""
    response = client.get("/api/reverse", params={"q": "a pet", "lenght": "4"})
    assert response.status_code == 422
    message = response.json()["error"]
    assert (
        message.startswith("lenght: not a parameter of /api/reverse (") and "length" in message and "\n" not in message
    )
    taken = client.get("/api/reverse", params={"q": "a pet", "length": "3", "sort": "alphabet", "mode": "describe"})
    assert taken.status_code == 200


def test_an_empty_text_parameter_is_no_filter(client) -> None:
    plain = client.get("/api/reverse", params={"q": "a pet that barks", "k": 3}).json()["results"]
    empty = client.get("/api/reverse?q=a+pet+that+barks&k=3&lang=&dictionary=&pos=&pattern=&initial=&pinyin=")
    assert empty.status_code == 200 and empty.json()["results"] == plain


def test_a_parameter_given_twice_is_named_not_the_last_one_taken(client) -> None:
    for query in ("q=cat&q=dog", "q=cat&pos=n&pos=v", "q=cat&k=1&k=3"):
        response = client.get(f"/api/reverse?{query}")
        name = query.rsplit("&", 1)[1].split("=")[0]
        assert response.status_code == 422 and response.json()["error"].startswith(f"{name}: given more than once")


@pytest.mark.parametrize("value", ['"yes"', '"true"', "1", "0", "1.0", "null", '"false"', "[]", "{}"])
def test_encode_takes_normalize_as_json_true_or_false_only(client, value: str) -> None:
    """The Python API refuses a flag that is not True or False ("no" would count as true); the body's `normalize`
    is JSON true or false, or a 422 naming it."""
    response = client.post("/api/encode", content=f'{{"sentences": ["a dog barks"], "normalize": {value}}}')
    assert response.status_code == 422, response.text
    assert response.json() == {"error": f"normalize: true or false, not {value}"}


def test_encode_takes_each_key_once(client) -> None:
    """A key given twice was read as its last value (two vectors for the sentences given second); as a parameter
    given twice to /api/reverse, it is a 422 naming it, however the key is spelt."""
    for body, key in [
        ('{"sentences": ["a"], "sentences": ["b", "c"]}', "sentences"),
        ('{"sentences": ["a"], "normalize": true, "normalize": false}', "normalize"),
        ('{"normalize": false, "sentences": ["a"], "\\u006eormalize": true}', "normalize"),  # an escaped n
        ('{"sentences": ["a"], "sentences": ["a"]}', "sentences"),  # the same value twice too
    ]:
        response = client.post("/api/encode", content=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json() == {"error": f"{key}: given more than once; give each key once"}
    for flag in (True, False):  # the body as it should be
        answer = client.post("/api/encode", content=json.dumps({"sentences": ["a", "b"], "normalize": flag}))
        assert answer.status_code == 200 and len(answer.json()["embeddings"]) == 2


def test_encode_refuses_what_it_would_drop(client) -> None:
    """A misspelt `normalize` (the Python name `normalize_embeddings`) or sentences in the query string: a 422
    naming it, where they were dropped and the vectors came back unscaled."""
    for body in ({"sentences": ["a"], "normalize_embeddings": True}, {"sentences": ["a"], "normalise": True}):
        response = client.post("/api/encode", json=body)
        key = next(k for k in body if k != "sentences")
        assert response.status_code == 422 and response.json()["error"].startswith(key), response.text
    response = client.post("/api/encode?sentences=a", json={"sentences": ["a"]})
    assert response.status_code == 422 and response.json()["error"].startswith("sentences: /api/encode takes no")
