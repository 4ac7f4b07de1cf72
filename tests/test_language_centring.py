"""Per-language centring of a cross-lingual search: the language a description's script tells, and the centred
scores, cos(query - the query language's mean entry, entry - the target's mean entry), against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.language_centring import CentredSpace, ShiftedEncoder, centred_space, query_language
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import Ranking
from dictembed.search_space import SearchSpace, l2_normalize
from dictembed.serve_scheduling import ModelThread
from dictembed.served_dictionaries import ServedDictionaries, served_of

EN = ["dog", "cat", "house", "river", "bread", "king"]
ZH = ["狗", "猫", "房子", "河", "面包", "国王", "书"]
PLAIN = Ranking(frequency_weight=0, definition_weight=0)  # the cosine alone


@pytest.mark.parametrize(
    ("text", "latin", "expected"),
    [
        ("a long-necked African animal", "en", "en"),
        ("a long-necked African animal", "fr", "fr"),  # Latin letters: the served Latin-script language
        ("一种脖子很长的非洲动物", "en", "zh"),
        ("首の長いアフリカの動物", "en", "ja"),  # Han with kana
        ("ネコ", "en", "ja"),
        ("животное с длинной шеей", "en", "ru"),
        ("一种 DNA 分子", "en", "zh"),  # most letters Han
        ("12345 !?", "en", None),
        ("κάτι", "en", None),  # a script none is told for
    ],
)
def test_the_language_of_a_description_is_told_by_its_script(text: str, latin: str, expected: str | None) -> None:
    assert query_language(text, latin) == expected


@pytest.fixture(scope="module")
def encoder(bert_path: Path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean", device="cpu")


def _rd(encoder: Encoder, words: list[str], seed: int, offset: float) -> ReverseDictionary:
    """A reverse dictionary of `words` whose entry vectors are random around a common offset (a language's
    direction), two definitions each."""
    rng = np.random.default_rng(seed)
    dictionary = Dictionary(name=f"toy-{seed}")
    for word in words:
        dictionary.add(word, f"the first meaning of {word}")
        dictionary.add(word, f"the second meaning of {word}")
    definitions = (rng.normal(size=(2 * len(words), encoder.dim)) + offset).astype(np.float32)
    matrix = (definitions[0::2] + definitions[1::2]) / 2
    space = DefinitionSpace(words, matrix, "cosine", 0.05, counts=np.full(len(words), 2), definitions=definitions)
    return ReverseDictionary(encoder, space, dictionary, ranking=PLAIN)


@pytest.fixture(scope="module")
def served(encoder: Encoder) -> ServedDictionaries:
    english, chinese = _rd(encoder, EN, 0, 1.0), _rd(encoder, ZH, 1, -2.0)
    return ServedDictionaries([served_of(english), served_of(chinese)], ModelThread())


def _mean(rd: ReverseDictionary) -> np.ndarray:
    return np.asarray(rd.space.matrix, dtype=np.float64).mean(0)


def _expected(encoder: Encoder, query: str, target: ReverseDictionary, shift: np.ndarray | None) -> dict[str, float]:
    """Each entry's cosine to the query, both centred as `language_centring` says, in numpy."""
    vector = np.asarray(encoder.encode([query]), dtype=np.float64)[0] - (0 if shift is None else shift)
    entries = np.asarray(target.space.matrix, dtype=np.float64) - _mean(target)
    cosine = l2_normalize(entries) @ (vector / np.linalg.norm(vector))
    return dict(zip(target.space.words, cosine.tolist(), strict=True))


def _scores(rd: ReverseDictionary, query: str) -> dict[str, float]:
    return {r.words[0]: r.score for r in rd.search(query, k=100)}


def test_the_dictionaries_are_labelled(served: ServedDictionaries) -> None:
    assert [(s.language, s.name) for s in served.served] == [("en", "toy-0"), ("zh", "toy-1")]


def test_a_description_in_another_language_is_searched_centred(served: ServedDictionaries, encoder: Encoder) -> None:
    en, zh = served.served
    query = "a domesticated animal that barks"
    centred = served.search_of(zh, query)
    assert centred is not zh.rd and centred is served.search_of(zh, "another English description")  # built once
    expected = _expected(encoder, query, zh.rd, _mean(en.rd))
    assert _scores(centred, query) == pytest.approx(expected, abs=1e-5)
    assert _scores(zh.rd, query) != pytest.approx(expected, abs=1e-3)  # the plain search scores otherwise
    query = "会汪汪叫的宠物"  # the other way: a Chinese description of English words
    assert _scores(served.search_of(en, query), query) == pytest.approx(_expected(encoder, query, en.rd, _mean(zh.rd)))


def test_a_query_language_not_served_centres_the_target_only(served: ServedDictionaries, encoder: Encoder) -> None:
    zh = served.served[1]
    query = "животное, которое лает"
    expected = _expected(encoder, query, zh.rd, None)
    assert _scores(served.search_of(zh, query), query) == pytest.approx(expected, abs=1e-5)


def test_no_centring_in_the_same_language_when_off_or_with_one_dictionary(
    served: ServedDictionaries, encoder: Encoder
) -> None:
    en, zh = served.served
    assert served.search_of(zh, "一只会叫的狗") is zh.rd and served.search_of(en, "a dog") is en.rd
    assert ServedDictionaries(served.served, served.model, centring=False).search_of(zh, "a dog") is zh.rd
    assert ServedDictionaries([zh], served.model).search_of(zh, "a dog") is zh.rd


def test_the_centred_space_shifts_entries_and_definitions_alike(served: ServedDictionaries) -> None:
    zh = served.served[1].rd
    space = zh.space
    assert isinstance(space, SearchSpace) and space.definitions is not None
    mean = CentredSpace(zh).mean
    centred = centred_space(space, mean)
    np.testing.assert_allclose(centred.matrix, np.asarray(space.matrix) - mean, atol=1e-6)
    shifted = np.asarray(space.definitions, dtype=np.float32) - mean
    assert centred.definitions is not None and centred.definitions.dtype == np.float16
    np.testing.assert_allclose(centred.definitions.astype(np.float32), shifted, atol=2e-2)
    np.testing.assert_allclose(centred.matrix.mean(0), 0, atol=1e-5)


def test_the_centred_search_keeps_the_senses_and_filters(served: ServedDictionaries) -> None:
    zh = served.served[1]
    centred = served.search_of(zh, "a river")
    river = next(r for r in centred.search("a river", k=100) if r.words == ["河"])
    assert sorted(river.definitions["河"]) == ["the first meaning of 河", "the second meaning of 河"]
    assert [r.words for r in centred.search("a river", k=100, length=1)] != []
    assert all(len(r.words[0]) == 2 for r in centred.search("a river", k=100, length=2))


def test_the_shifted_encoder_subtracts_its_shift(encoder: Encoder) -> None:
    shift = np.arange(encoder.dim, dtype=np.float32)
    shifted = ShiftedEncoder(encoder, shift)
    texts = ["a pet", "water from the sky"]
    np.testing.assert_allclose(shifted.encode(texts), encoder.encode(texts) - shift, atol=1e-5)
    assert shifted.dim == encoder.dim and shifted.count_tokens(texts) == encoder.count_tokens(texts)
