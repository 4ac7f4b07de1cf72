"""The lexical terms of the reverse dictionary's score (`lexical_terms`, `Ranking.query_word_weight`,
`Ranking.overlap_weight`): stems, the query-word test, the shared words, and `ReverseDictionary`'s scores against
the same computed by hand."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import dictionary_of

from dictembed import ranking_terms
from dictembed.cli import build_parser
from dictembed.cli.options import ranking_of
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_senses import EntrySenses
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.lexical_terms import StemSets, query_stems, stem, stem_hash, stems
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import LEXICAL_DEPTH, OVERLAP_WEIGHT, QUERY_WORD_WEIGHT, Ranking, ranking_over

SENSES = {
    "bank": ["sloping land beside a body of water", "a financial institution that accepts deposits"],
    "shore": ["the land along the edge of a sea or lake"],
    "lender": ["a person or company that lends money", "one who makes loans", "a creditor"],
    "river": ["a large natural stream of water"],
    "vault": ["a strongroom for keeping money and valuables"],
    "ice cream": ["a frozen dessert of sweetened cream"],
}
SALTED = {**os.environ, "PYTHONHASHSEED": "12345"}
OFF = {"frequency_weight": 0, "definition_weight": 0, "headword_weight": 0}  # cosine alone, before the terms


@pytest.fixture(scope="module")
def dictionary() -> Dictionary:
    return dictionary_of("lexical", SENSES, pos="n")


@pytest.fixture(scope="module")
def encoder(mean_encoder) -> Encoder:
    return mean_encoder


@pytest.fixture(scope="module")
def space(encoder, dictionary) -> DefinitionSpace:
    return DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")


def _cosines(encoder: Encoder, space: DefinitionSpace, query: str) -> dict[str, float]:
    h = encoder.encode(query)
    matrix = space.matrix.numpy()
    cosine = matrix @ h / np.linalg.norm(matrix, axis=1) / np.linalg.norm(h)
    return dict(zip(space.words, cosine.tolist(), strict=True))


def test_stems_meet_a_words_inflections() -> None:
    pairs = [("horse", "horses"), ("ride", "riding"), ("name", "named"), ("glass", "glasses"), ("box", "boxes")]
    assert all(stem(a) == stem(b) for a, b in pairs)
    assert [stem(t) for t in ("trunks", "lended", "bus", "buses", "gas", "is", "the")] == [
        "trunk",
        "lend",
        "bus",
        "bus",
        "gas",
        "is",
        "the",
    ]
    assert stems("A long-necked African animal, 2 of them!") == {"a", "long", "neck", "african", "animal", "of", "them"}
    assert stems("Horses") == stems("a horse") - {"a"} == {"hors"}


def test_stem_keys_are_the_same_in_every_process() -> None:
    # a stored index is read by other processes, whose str hashes are salted differently
    code = "from dictembed.lexical_terms import stem_hash; print(stem_hash('hors'), stem_hash('\u72ac'))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=SALTED)
    assert run.stdout.split() == [str(stem_hash("hors")), str(stem_hash("\u72ac"))]
    assert query_stems("Horses, a horse!").tolist() == sorted([stem_hash("hors"), stem_hash("a")])
    assert query_stems("42").dtype == np.uint64 and len(query_stems("42")) == 0


def test_a_word_is_used_by_the_share_of_its_tokens_the_description_holds() -> None:
    query = query_stems("the cream on top of ice")
    words = StemSets.of(["Cream", "ice cream", "creams", "ice-cream cone", "42", "bull neck"])
    used = words.used(np.arange(6), query)
    assert used.dtype == np.float32 and used.tolist() == pytest.approx([1, 1, 1, 2 / 3, 0, 0])
    assert words.used(np.array([4, 2, 3]), query).tolist() == pytest.approx([0, 1, 2 / 3])
    assert words.used(np.arange(6), query_stems("")).tolist() == [0.0] * 6
    assert words.used(np.array([5]), query_stems("a long-necked animal")).tolist() == [0.5]  # "necked" -> neck


def test_shared_words_count_only_the_rarer_ones() -> None:
    query = query_stems("the animal bark")
    definitions = StemSets.of(["the animal's bark", "the cat", "The bird, an animal"])
    # "the" is in 3 of 3 definitions and "animal" in 2 of 3 (more than half): only "bark" counts
    assert definitions.shared(np.arange(3), query).tolist() == [1.0, 0.0, 0.0]
    # among four, "animal" is in one: rare again
    assert definitions.shared(np.array([0, 1, 1, 1]), query).tolist() == [2.0, 0.0, 0.0, 0.0]
    assert definitions.shared(np.zeros(0, dtype=np.int64), query).shape == (0,)
    assert definitions.shared(np.arange(3), query_stems("")).tolist() == [0.0, 0.0, 0.0]


def test_an_entrys_definitions_are_one_stem_set_and_never_run_together() -> None:
    held = dictionary_of("runs", {"bank": ["a slope", "money"], "shore": ["land"]})
    senses = EntrySenses.of(["bank", "shore", "tree"], held)  # "tree": no sense
    sets = StemSets.of_senses(senses)
    assert len(sets) == 3 and sets.check(3) is None and sets.check(4) is not None
    assert sets.shared(np.arange(3), query_stems("slope money land")).tolist() == [2.0, 1.0, 0.0]
    assert sets.shared(np.arange(3), query_stems("slopemoney")).tolist() == [0.0, 0.0, 0.0]  # "slope\nmoney"


@pytest.mark.parametrize("name", ["query_word_weight", "overlap_weight"])
def test_bad_lexical_weights_are_refused(name) -> None:
    with pytest.raises(DictEmbedError, match=name):
        Ranking(**{name: -0.1})


def test_a_word_the_description_uses_loses_the_query_word_weight(space, encoder, dictionary) -> None:
    query = "money kept in a bank"
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**OFF, query_word_weight=0.3, overlap_weight=0))
    assert rd.score_kind == "cosine+words" and rd.reranks_by_words
    expected = {word: cosine - 0.3 * (word == "bank") for word, cosine in _cosines(encoder, space, query).items()}
    got = {r.words[0]: r.score for r in rd.search(query, k=len(SENSES))}
    assert got == pytest.approx(expected, abs=1e-5)
    assert [r.score for r in rd.search(query, k=len(SENSES))] == pytest.approx(sorted(expected.values(), reverse=True))
    # the vector alone (no text) has no lexical terms; with its text, the same as the search
    h = encoder.encode([query])
    plain = {r.words[0]: r.score for r in rd.search_vectors(h, k=len(SENSES))[0]}
    assert plain == pytest.approx(_cosines(encoder, space, query), abs=1e-5)
    assert [r.to_dict() for r in rd.search_vectors(h, k=3, texts=[query])[0]] == [
        r.to_dict() for r in rd.search(query, k=3)
    ]
    with pytest.raises(DictEmbedError, match="2 texts for 1 query vectors"):
        rd.search_vectors(h, texts=[query, query])


def test_the_query_word_weight_reaches_past_the_overlaps_depth(space, encoder, dictionary, monkeypatch) -> None:
    monkeypatch.setattr(ranking_terms, "LEXICAL_DEPTH", 1)  # the overlap reads the best result alone
    query = "a strongroom vault or a river bank"
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**OFF, query_word_weight=0.3, overlap_weight=0))
    named = {"vault", "river", "bank"}
    expected = {word: cosine - 0.3 * (word in named) for word, cosine in _cosines(encoder, space, query).items()}
    assert {r.words[0]: r.score for r in rd.search(query, k=len(SENSES))} == pytest.approx(expected, abs=1e-5)


def test_only_the_words_a_filter_keeps_count_as_used(space, encoder, dictionary) -> None:
    query = "cream made cold"  # uses half of "ice cream": half the weight
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**OFF, query_word_weight=0.3, overlap_weight=0))
    cosine = _cosines(encoder, space, query)
    expected = {word: value - 0.15 * (word == "ice cream") for word, value in cosine.items()}
    assert {r.words[0]: r.score for r in rd.search(query, k=len(SENSES))} == pytest.approx(expected, abs=1e-5)
    phrase = rd.search(query, k=1, words="phrase")
    assert [r.score for r in phrase] == pytest.approx([cosine["ice cream"] - 0.15], abs=1e-5)
    used = rd.search("ice cream made cold", k=1, words="phrase")[0]
    assert used.score == pytest.approx(_cosines(encoder, space, "ice cream made cold")["ice cream"] - 0.3, abs=1e-5)


def test_shared_words_add_the_overlap_weight_each(space, encoder, dictionary) -> None:
    query = "somebody who lends money to a company"
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**OFF, query_word_weight=0, overlap_weight=0.1))
    words = space.words
    definitions = StemSets.of("\n".join(SENSES[w]) for w in words)
    shared = definitions.shared(np.arange(len(words)), query_stems(query))
    # who, lend, money and company are in the lender's definitions ("money" in the vault's too); "a" in five of six
    assert dict(zip(words, shared.tolist(), strict=True)) == {w: 4.0 * (w == "lender") + (w == "vault") for w in words}
    expected = {w: c + 0.1 * s for (w, c), s in zip(_cosines(encoder, space, query).items(), shared, strict=True)}
    got = {r.words[0]: r.score for r in rd.search(query, k=len(SENSES))}
    assert got == pytest.approx(expected, abs=1e-5)


def test_the_default_ranking_has_the_terms_and_zero_turns_them_off(space, encoder, dictionary) -> None:
    rd = ReverseDictionary(encoder, space, dictionary)
    assert (rd.ranking.query_word_weight, rd.ranking.overlap_weight) == (QUERY_WORD_WEIGHT, OVERLAP_WEIGHT)
    assert "+words" in rd.score_kind and LEXICAL_DEPTH >= len(SENSES)
    off = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**OFF, query_word_weight=0, overlap_weight=0))
    assert off.score_kind == "cosine" and not off.reranks
    query = "a frozen cream dessert"
    assert [r.score for r in off.search(query, k=3)] == pytest.approx(
        sorted(_cosines(encoder, space, query).values(), reverse=True)[:3], abs=1e-5
    )


def test_the_command_line_sets_both_weights() -> None:
    args = build_parser().parse_args(
        ["predict", "--model", "m", "x", "--query-word-weight", "0", "--overlap-weight", "0.5"]
    )
    ranking = ranking_over({}, ranking_of(args))
    assert (ranking.query_word_weight, ranking.overlap_weight) == (0, 0.5)
    defaults = ranking_over({}, ranking_of(build_parser().parse_args(["predict", "--model", "m", "x"])))
    assert (defaults.query_word_weight, defaults.overlap_weight) == (QUERY_WORD_WEIGHT, OVERLAP_WEIGHT)
