"""The filters of a search by one set of names (`search_options.Filters.of`): `ReverseDictionary.search` and its kin
take them as keywords, as `predict` takes them as options and `/api/reverse` as parameters; a misspelt one is one
line naming it, not a TypeError. On a tiny space of random vectors with the tiny BERT as encoder."""

from __future__ import annotations

import numpy as np
import pytest

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import FILTER_OPTIONS, Filters, Ranking

SENSES = {
    "giraffe": ("tallest living quadruped with a very long neck", "n"),
    "girl": ("a young woman", "n"),
    "gird": ("prepare oneself for something difficult", "v"),
    "ice cream": ("frozen dessert made of cream and sugar", "n"),
    "run": ("move fast by using one's feet", "v"),
    "quickly": ("with rapid movements", "r"),
    "rapid": ("done or happening in a short time", "a"),
}
QUERY = "an animal with a long neck"


@pytest.fixture(scope="module")
def rd(bert_path) -> ReverseDictionary:
    dictionary = Dictionary(name="filters")
    for word, (definition, pos) in SENSES.items():
        dictionary.add(word, definition, pos=pos)
    rows = np.random.default_rng(0).normal(size=(len(SENSES), 32)).astype(np.float32)
    space = DefinitionSpace(list(SENSES), rows, similarity="cosine", temperature=0.05)
    encoder = Encoder.load(str(bert_path), pooling="mean")
    return ReverseDictionary(encoder, space, dictionary=dictionary, name="toy", ranking=Ranking(frequency_weight=0))


def _words(results) -> list[str]:
    return [word for result in results for word in result.words]


# ------------------------------------------------------------------ Filters.of: one mapping of the names
def test_filters_of_maps_every_option_name() -> None:
    assert Filters.of() == Filters()
    assert Filters.of(length=6) == Filters(min_length=6, max_length=6)
    assert Filters.of(min_length=3, max_length=None) == Filters(min_length=3)
    options = {"pos": "noun", "pattern": "gi*", "words": "single", "initial": "G", "pinyin": None, "script": "latin"}
    assert Filters.of(**options, max_length=7) == Filters("n", "gi*", "single", None, 7, "G", None, "latin")
    assert Filters.of(words=None, script=None) == Filters()  # None: the option's default


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lenght": 6}, "unknown filter 'lenght'; the filters are pos, pattern, words, length, min_length"),
        ({"part_of_speech": "n", "size": 3}, "unknown filters 'part_of_speech', 'size'; the filters are pos,"),
        ({"length": 5, "min_length": 4}, "length: give an exact length or min_length/max_length, not both"),
        ({"length": 0}, "length: a whole number of letters from 1 to 100, not 0"),
        ({"length": "5"}, "length: a whole number of letters from 1 to 100, not '5'"),
        ({"pos": 5}, "pos: a string, not 5"),
        ({"pos": "x"}, "unknown part of speech 'x'"),
        ({"words": "many"}, "unknown word count 'many'"),
        ({"min_length": 5, "max_length": 4}, "min_length: 5 is more than max_length 4"),
    ],
)
def test_filters_of_refuses_in_one_line(options, message) -> None:
    with pytest.raises(DictEmbedError) as caught:
        Filters.of(**options)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_command_line_and_the_api_use_the_same_names(rd) -> None:
    """`FILTER_OPTIONS` are `predict`'s option names (dashes for underscores) and `/api/reverse`'s parameters."""
    from fastapi.testclient import TestClient

    from dictembed.cli import build_parser
    from dictembed.serve import create_app

    predict = vars(build_parser(["predict"]).parse_args(["predict", "--model", "m", "x"]))
    assert set(FILTER_OPTIONS) <= set(predict)
    schema = TestClient(create_app(reverse_dictionary=rd)).get("/openapi.json").json()
    parameters = {p["name"] for p in schema["paths"]["/api/reverse"]["get"]["parameters"]}
    assert parameters - {"q", "k", "mode", "sort", "lang", "dictionary"} == set(FILTER_OPTIONS)


# ------------------------------------------------------------------ the Python API takes them as keywords
def test_search_takes_every_filter_as_a_keyword(rd) -> None:
    for options in (
        {"length": 4},
        {"min_length": 5, "max_length": 7},
        {"pos": "n"},
        {"pattern": "gi*"},
        {"initial": "r"},
        {"words": "phrase"},
        {"script": "latin", "max_length": 3},
        {"pos": "verb", "initial": "g"},
    ):
        by_keyword = rd.search(QUERY, k=10, **options)
        assert [r.to_dict() for r in by_keyword] == [r.to_dict() for r in rd.search(QUERY, 10, Filters.of(**options))]
    assert sorted(_words(rd.search(QUERY, length=4))) == ["gird", "girl"]
    assert _words(rd.search(QUERY, words="phrase")) == ["ice cream"]
    assert sorted(_words(rd.search(QUERY, pos="v"))) == ["gird", "run"]
    assert sorted(_words(rd.search(QUERY, min_length=5, max_length=7))) == ["giraffe", "quickly", "rapid"]


def test_search_many_search_vectors_and_neighbours_take_them_too(rd) -> None:
    many = rd.search_many([QUERY, "a young person"], 5, initial="g", max_length=4)
    assert [sorted(_words(results)) for results in many] == [["gird", "girl"], ["gird", "girl"]]
    vector = rd.encoder.encode([QUERY])
    assert sorted(_words(rd.search_vectors(vector, 5, pattern="/^g/")[0])) == ["giraffe", "gird", "girl"]
    assert sorted(_words(rd.neighbours("girl", 10, initial="gi"))) == ["giraffe", "gird"]
    assert _words(rd.neighbours("girl", 10, words="phrase")) == ["ice cream"]


def test_a_query_vector_ranks_alike_at_any_scale(rd) -> None:
    """Cosines ignore a vector's length: float32 squares of 1e-25 or 1e37 underflow or overflow, and ranked every
    entry alike before."""
    vector = rd.encoder.encode([QUERY])
    expected = [r.to_dict() for r in rd.search_vectors(vector, 5)[0]]
    for scale in (1e-25, 1e-6, 1e6, 1e37):
        scaled = rd.search_vectors(vector * np.float32(scale), 5)[0]
        assert [r.words for r in scaled] == [r["words"] for r in expected]
        np.testing.assert_allclose([r.score for r in scaled], [r["score"] for r in expected], atol=1e-6)


def test_a_misspelt_filter_is_one_line_naming_it(rd) -> None:
    for call in (
        lambda: rd.search(QUERY, lenght=6),
        lambda: rd.search_many([QUERY], 5, lenght=6),
        lambda: rd.neighbours("girl", lenght=6),
    ):
        with pytest.raises(DictEmbedError, match=r"^unknown filter 'lenght'; the filters are pos, pattern, .*script$"):
            call()


def test_filters_and_keywords_at_once_are_refused(rd) -> None:
    with pytest.raises(DictEmbedError, match=r"give filters=Filters\(...\) or filter keywords \(length\), not both"):
        rd.search(QUERY, filters=Filters(pos="n"), length=4)
    with pytest.raises(DictEmbedError, match="filters: a Filters, not dict"):
        rd.search(QUERY, 10, {"pos": "n"})  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="length: give an exact length or min_length/max_length, not both"):
        rd.search(QUERY, length=4, max_length=6)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda rd: rd.search(QUERY, k=-1), "k: a whole number of at least 1, not -1"),
        (lambda rd: rd.search(QUERY, k="5"), "k: a whole number of at least 1, not '5'"),
        (lambda rd: rd.search(QUERY, k=True), "k: a whole number of at least 1, not True"),
        (lambda rd: rd.search(QUERY, k=1.5), "k: a whole number of at least 1, not 1.5"),
        (lambda rd: rd.search_many([QUERY], k=0), "k: a whole number of at least 1, not 0"),
        (lambda rd: rd.neighbours("girl", k="3"), "k: a whole number of at least 1, not '3'"),
        (lambda rd: rd.search(QUERY, max_definitions=-1), "max_definitions: a whole number of at least 0 or None"),
        (lambda rd: rd.search(QUERY, max_definitions=2.5), "max_definitions: a whole number of at least 0 or None"),
        (lambda rd: rd.search(5), "query 1 is int, not a string"),
        (lambda rd: rd.search(b"a cat"), "query 1 is bytes, not a string"),
        (lambda rd: rd.search("a \ud800 cat"), r"query 1 is not valid Unicode text \(it holds a lone surrogate\)"),
        (lambda rd: rd.search_many([QUERY, " "]), r"empty query \(query 2\)"),
        (lambda rd: rd.search_many(QUERY), "search_many takes a list of descriptions, not one string"),
        (lambda rd: rd.search_vectors(np.zeros((1, 7), np.float32)), r"query vectors of shape \(1, 7\)"),
        (lambda rd: rd.search_vectors(np.full((1, 32), np.nan, np.float32)), "NaN or infinite"),
        (lambda rd: rd.search_vectors(np.zeros((2, 32), np.float32)), "query vector 0 is all zeros"),
        (lambda rd: rd.search_vectors("abc"), "query vectors: an array or tensor of numbers, not str"),
        (lambda rd: rd.search_vectors([[1.0, 2.0], [1.0]]), "query vectors: an array or tensor of numbers, one row"),
        (lambda rd: rd.search_vectors(np.ones(32), texts=[5]), "text 0 is int, not a string"),
        (lambda rd: rd.search_vectors(np.ones(32), texts="a"), "texts must be a list of str, not one str"),
        (lambda rd: rd.neighbours(None), "a word is a string, not NoneType"),
        (lambda rd: rd.ranks("wordnet"), r"ranks: a Dictionary \(dictembed.dictionary.load_dictionary\), not str"),
        (lambda rd: rd.predict(""), r"empty query \(query 1\)"),
        (lambda rd: rd.predict(QUERY, top_k="5"), "top_k: a whole number of at least 1, not '5'"),
        (lambda rd: Filters(pos=5), "pos: a string, not 5"),
        (lambda rd: Filters(pattern=5), "pattern: a string, not 5"),
        (lambda rd: Filters(initial=["g"]), r"initial: a string, not \['g'\]"),
    ],
)
def test_bad_arguments_are_one_line_errors(rd, call, message) -> None:
    with pytest.raises(DictEmbedError, match=message) as caught:
        call(rd)
    assert "\n" not in str(caught.value)


def test_search_many_takes_any_iterable_of_descriptions(rd) -> None:
    listed = rd.search_many([QUERY, "a young person"], 3)
    assert rd.search_many(q for q in (QUERY, "a young person")) != [] and [
        [r.words for r in results] for results in rd.search_many((q for q in (QUERY, "a young person")), 3)
    ] == [[r.words for r in results] for results in listed]
    assert [r.words for r in rd.search(QUERY, k=3, max_definitions=0)] == [r.words for r in listed[0]]


def test_search_many_gives_each_query_its_own_results_under_bf16(rd) -> None:
    """bf16 autocast rounds a sentence's vector by its batch's shapes: there `search_many` encodes one query a batch,
    as on an int8 graph, so each query gets what `search` gives it alone."""
    encoder = rd.encoder
    assert encoder.batch_invariant
    queries = [QUERY, "a young person who has not yet grown into a woman at all", "fast"]
    try:
        encoder.set_precision("bf16")
        assert not encoder.batch_invariant
        for query, results in zip(queries, rd.search_many(queries, 5), strict=True):
            alone = rd.search(query, 5)
            assert [r.words for r in results] == [r.words for r in alone]
            np.testing.assert_allclose([r.score for r in results], [r.score for r in alone], rtol=0, atol=1e-6)
    finally:
        encoder.set_precision("fp32")


def test_load_refuses_a_missing_path_or_a_ranking_of_another_type(tmp_path) -> None:
    with pytest.raises(DictEmbedError, match="ReverseDictionary.load: a model folder or a Hub name, not NoneType"):
        ReverseDictionary.load(None)  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="ranking: a search_options.Ranking or a dict of its settings, not list"):
        ReverseDictionary.load(tmp_path, ranking=[0.5])  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="ranking: no setting 'headword'; choose from frequency_weight, "):
        ReverseDictionary.load(tmp_path, ranking={"headword": 0.5})
    with pytest.raises(DictEmbedError, match="headword_weight: a number from 0 to 1000, not -1"):
        ReverseDictionary.load(tmp_path, ranking={"headword_weight": -1})
    with pytest.raises(DictEmbedError, match="definition_weight: a number from 0 to 1000, not 1e"):
        ReverseDictionary.load(tmp_path, ranking={"definition_weight": 1e308})


@pytest.mark.parametrize(
    "options",
    [
        {},
        dict.fromkeys(FILTER_OPTIONS),
        {"words": "any", "script": "any", "pos": None},
        {"words": "single"},
        {"script": "latin"},
        {"length": 5},
        {"pos": "n"},
        {"initial": "g", "words": "any"},
        {"pattern": "gir*"},
        {"max_length": 7},
    ],
)
def test_none_asked_is_whether_the_filters_let_every_entry_through(options: dict) -> None:
    """The server's fast path for unfiltered searches asks `Filters.none_asked`: it must agree with `Filters.of`."""
    assert Filters.none_asked(options) == (Filters.of(**options) == Filters())
    assert Filters.none_asked(options) == all(value in (None, "any") for value in options.values())


def test_a_glob_range_written_backwards_is_named() -> None:
    """`[z-a]` matches nothing in a glob: a one-line error naming the range, not an empty answer."""
    from dictembed.search_options import pattern_matcher

    with pytest.raises(DictEmbedError, match=r"^pattern \[z-a\]\*: the range z-a is empty; write it a-z$"):
        Filters(pattern="[z-a]*")
    assert pattern_matcher("[a-z]ir*")("giraffe") and not pattern_matcher("[!g]ir*")("giraffe")


def test_a_decomposed_word_finds_its_composed_entry(bert_path) -> None:
    """The dictionary keeps its words in NFC (`clean_text`): a query, a pattern and an initial typed decomposed
    (e + combining acute, as macOS file names and some keyboards give it) find them too."""
    import unicodedata

    composed = unicodedata.normalize("NFC", "école")
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    dictionary = Dictionary(name="nfc")
    dictionary.add(composed, "a place where children learn", pos="n")
    dictionary.add("eclipse", "the moon hiding the sun", pos="n")
    dictionary.add("dog", "a pet that barks", pos="n")
    rows = np.random.default_rng(0).normal(size=(3, 32)).astype(np.float32)
    space = DefinitionSpace([composed, "eclipse", "dog"], rows, similarity="cosine", temperature=0.05)
    encoder = Encoder.load(str(bert_path), pooling="mean")
    rd = ReverseDictionary(encoder, space, dictionary=dictionary, name="nfc", ranking=Ranking(frequency_weight=0))
    assert rd.entry_of(decomposed) == composed
    assert _words(rd.search("a place", pattern=decomposed[:2] + "*")) == [composed]
    assert _words(rd.search("a place", initial=decomposed[:2])) == [composed]


def test_a_filter_mask_is_computed_without_the_lock_every_search_takes(rd, monkeypatch) -> None:
    """While one query tests a new pattern on every headword, another query can take the model's lock."""
    import threading

    from dictembed import filter_masks

    free: list[bool] = []
    plain = filter_masks.word_test

    def probe() -> None:
        taken = rd._lock.acquire(timeout=5)
        free.append(taken)
        if taken:
            rd._lock.release()

    def watched(kind: str, value: str):
        test = plain(kind, value)

        def each(word: str) -> bool:
            other = threading.Thread(target=probe)
            other.start()
            other.join()
            return test(word)

        return each

    monkeypatch.setattr(filter_masks, "word_test", watched)
    found = _words(rd.search(QUERY, k=10, pattern="gir?"))  # a pattern no other test computed
    assert sorted(found) == ["gird", "girl"]
    assert len(free) == len(SENSES) and all(free)  # each headword's test ran while another thread took the lock
