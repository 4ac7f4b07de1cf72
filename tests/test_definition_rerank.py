"""The best single definition in the reverse dictionary's score: the definition vectors a definition space keeps
(built, cached, saved and loaded with it), `DefinitionSpace.definition_rows`, and `ReverseDictionary`'s rerank
against a score computed by hand."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch
from conftest import dictionary_of
from safetensors.torch import load_file, save_file

from dictembed import reverse_dictionary, search_index
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_index import CoarseIndex
from dictembed.search_options import Filters, Ranking

NO_WORDS = {"query_word_weight": 0, "overlap_weight": 0}  # the lexical terms off

# Entries with one to three definitions; "bank" has two far-apart senses, so its mean matches neither well.
SENSES = {
    "bank": ["sloping land beside a body of water", "a financial institution that accepts deposits"],
    "shore": ["the land along the edge of a sea or lake"],
    "lender": ["a person or company that lends money", "one who makes loans", "a creditor"],
    "river": ["a large natural stream of water"],
    "vault": ["a strongroom for keeping money and valuables"],
}


@pytest.fixture(scope="module")
def dictionary() -> Dictionary:
    return dictionary_of("rerank", SENSES, pos="n")


@pytest.fixture(scope="module")
def encoder(mean_encoder) -> Encoder:
    return mean_encoder


@pytest.fixture(scope="module")
def space(encoder, dictionary) -> DefinitionSpace:
    return DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")


def _definition_caches(folder):
    """The cached definition spaces in `folder` (not the headword vectors cached beside them)."""
    return [
        p
        for p in folder.glob("definitions-*.safetensors")
        if "headwords" not in json.loads(p.with_suffix(".json").read_text())
    ]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_a_plain_space_keeps_every_definition_vector_in_float16(space, encoder, dictionary) -> None:
    definitions = space.definitions
    assert definitions is not None and definitions.dtype == torch.float16
    vectors = encoder.with_pooling("mean").encode([d for _, d in dictionary.pairs()])
    assert definitions.shape == (8, vectors.shape[1])
    np.testing.assert_allclose(definitions.float().numpy(), vectors, rtol=2e-3, atol=2e-3)
    # the matrix is the float32 mean of the same vectors, entry by entry in the dictionary's order
    np.testing.assert_allclose(space.matrix[2].numpy(), vectors[3:6].mean(0), rtol=1e-5, atol=1e-6)


def test_definition_rows_list_each_entrys_rows_in_turn(space) -> None:
    rows, starts = space.definition_rows(np.array([2, 0, 4]))  # counts 2, 1, 3, 1, 1
    assert rows.tolist() == [3, 4, 5, 0, 1, 7] and starts.tolist() == [0, 3, 5]
    subset = space.subset(["lender", "vault"])
    assert torch.equal(subset.definitions, space.definitions[[3, 4, 5, 7]])


def test_definition_vectors_are_saved_and_loaded_with_the_space(space, tmp_path) -> None:
    space.save(tmp_path)
    loaded = load_entry_space(tmp_path)
    assert isinstance(loaded, DefinitionSpace) and torch.equal(loaded.definitions, space.definitions)


def test_an_ica_space_and_one_without_counts_keep_no_definitions(space) -> None:
    with pytest.raises(DictEmbedError, match="no counts"):
        DefinitionSpace(space.words, space.matrix, definitions=space.definitions)
    assert DefinitionSpace(space.words, space.matrix, counts=space.counts).definitions is None


def test_the_score_mixes_the_best_definition_as_computed_by_hand(space, encoder, dictionary) -> None:
    query = "a financial institution that accepts deposits"  # bank's second definition, word for word
    weight = 0.5
    ranking = Ranking(frequency_weight=0, definition_weight=weight, headword_weight=0, **NO_WORDS)
    rd = ReverseDictionary(encoder, space, dictionary, ranking=ranking)
    assert rd.reranks and rd.score_kind == "cosine+definition"
    results = rd.search(query, k=5)
    h = _unit(encoder.encode(query))
    entry_cos = _unit(space.matrix.numpy()) @ h
    definition_cos = _unit(space.definitions.float().numpy()) @ h
    best = [max(definition_cos[r] for r in range(a, b)) for a, b in ((0, 2), (2, 3), (3, 6), (6, 7), (7, 8))]
    expected = (entry_cos + weight * np.array(best)) / (1 + weight)
    order = np.argsort(-expected, kind="stable")
    assert [r.words[0] for r in results] == [space.words[i] for i in order]
    assert [r.score for r in results] == pytest.approx(expected[order].tolist(), abs=1e-4)
    assert results[0].words == ["bank"] and best[0] == pytest.approx(1.0, abs=1e-3)


def test_weight_zero_and_a_space_without_definitions_rank_by_the_entry_cosine(space, encoder, dictionary) -> None:
    query = "money lent to a customer"
    plain = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(0, 0, headword_weight=0, **NO_WORDS))
    bare = DefinitionSpace(space.words, space.matrix, "cosine", counts=space.counts)
    without = ReverseDictionary(encoder, bare, dictionary, ranking=Ranking(frequency_weight=0, **NO_WORDS))
    assert plain.score_kind == without.score_kind == "cosine" and not without.reranks
    h = _unit(encoder.encode(query))
    cosine = _unit(space.matrix.numpy()) @ h
    for rd in (plain, without):
        assert [r.score for r in rd.search(query, k=5)] == pytest.approx(sorted(cosine, reverse=True), abs=1e-5)


def test_a_shallow_rerank_reorders_only_the_best_by_the_rest_of_the_score(space, encoder, dictionary) -> None:
    query = "a place where money is kept"
    deep = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(frequency_weight=0, depth=100))
    shallow = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(frequency_weight=0, depth=2))
    dense = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(0, 0, headword_weight=0))
    assert {r.words[0] for r in shallow.search(query, k=2)} == {r.words[0] for r in dense.search(query, k=2)}
    assert [r.words for r in shallow.search(query, k=5)] == [r.words for r in deep.search(query, k=5)]  # depth k


def test_filters_apply_before_the_rerank(space, encoder, dictionary) -> None:
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(frequency_weight=0))
    results = rd.search("a financial institution that accepts deposits", k=5, filters=Filters(initial="l"))
    assert [r.words for r in results] == [["lender"]]


@pytest.mark.parametrize(
    ("options", "named"),
    [({"definition_weight": -1}, "definition_weight"), ({"frequency_weight": float("nan")}, "frequency_weight")]
    + [({"depth": 0}, "depth"), ({"headword_weight": float("inf")}, "headword_weight")],
)
def test_bad_weights_are_refused(options, named) -> None:
    with pytest.raises(DictEmbedError, match=named):
        Ranking(**options)


def test_a_cache_written_without_definition_vectors_is_rebuilt(encoder, dictionary, tmp_path, caplog) -> None:
    first = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=tmp_path)
    (path,) = _definition_caches(tmp_path)
    save_file({"matrix": load_file(str(path))["matrix"]}, str(path))  # as an older version wrote it
    sidecar = path.with_suffix(".json")
    sidecar.write_text(json.dumps({k: v for k, v in json.loads(sidecar.read_text()).items() if k != "sha256_of"}))
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        again = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=tmp_path)
    assert "without its definitions" in caplog.text
    assert torch.equal(again.matrix, first.matrix) and torch.equal(again.definitions, first.definitions)
    assert "definitions" in load_file(str(path))


def test_changed_definition_vectors_in_the_cache_are_noticed(encoder, dictionary, tmp_path, caplog) -> None:
    first = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=tmp_path)
    (path,) = _definition_caches(tmp_path)
    tensors = load_file(str(path))
    tensors["definitions"] = -tensors["definitions"]
    save_file(tensors, str(path))
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        again = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=tmp_path)
    assert "checksum differs" in caplog.text and torch.equal(again.definitions, first.definitions)


# ---------------------------------------------------------------------------- the candidate set
def test_a_frequency_floor_keeps_only_common_words(space, encoder, dictionary) -> None:
    from wordfreq import zipf_frequency

    floor = 4.0
    common = [w for w in space.words if zipf_frequency(w, "en") >= floor]
    assert 0 < len(common) < len(space.words)  # bank, river: common; lender, vault, shore: less so
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(min_frequency=floor), language="en")
    assert sorted(w for r in rd.search("money", k=10) for w in r.words) == sorted(common)
    assert all(w in common for r in rd.neighbours("bank", k=10) for w in r.words)


def test_a_frequency_floor_without_frequencies_is_an_error(space, encoder, dictionary) -> None:
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(min_frequency=3), language=None)
    with pytest.raises(DictEmbedError, match="needs word frequencies"):
        rd.search("money")


def test_predict_takes_the_ranking_options(served_model, capsys) -> None:
    from dictembed.cli import main

    for floor in ("9", "nan", "-1"):  # nan was "a number from 0 to 1000", a weight's range
        assert main(["predict", "a pet that barks", "--model", str(served_model), "--min-frequency", floor]) == 2
        assert f"'{floor}': a Zipf frequency from 0 to 8" in capsys.readouterr().err
    code = main(["predict", "a pet that barks", "--model", str(served_model), "--definition-weight", "0", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------- the two-stage search
def test_a_coarse_index_of_every_dimension_scores_exactly() -> None:
    unit = torch.nn.functional.normalize(torch.randn(50, 16, generator=torch.Generator().manual_seed(0)), dim=-1)
    queries = torch.nn.functional.normalize(torch.randn(3, 16, generator=torch.Generator().manual_seed(1)), dim=-1)
    index = CoarseIndex.of(unit, 16)
    np.testing.assert_allclose(index.scores(queries.numpy()), (queries @ unit.T).numpy(), atol=1e-5)
    np.testing.assert_allclose(index.scores(queries[:1].numpy()), (queries[:1] @ unit.T).numpy(), atol=1e-5)
    assert CoarseIndex.of(unit, 4).vectors.shape == (50, 4)


def _coarse(monkeypatch, candidates: int) -> None:
    monkeypatch.setattr(search_index, "COARSE_MIN_GROUPS", 1)
    monkeypatch.setattr(search_index, "COARSE_DIMS", 4)
    monkeypatch.setattr(reverse_dictionary, "COARSE_CANDIDATES", candidates)


def test_the_two_stage_search_equals_the_exact_one_when_it_keeps_every_group(
    space, encoder, dictionary, monkeypatch
) -> None:
    query = "money kept by a river"
    exact = ReverseDictionary(encoder, space, dictionary, language="en").search(query, k=5)
    _coarse(monkeypatch, candidates=len(space))
    rd = ReverseDictionary(encoder, space, dictionary, language="en")
    assert [r.to_dict() for r in rd.search(query, k=5)] == [r.to_dict() for r in exact]
    assert rd.index is not None and rd.index.coarse is not None


def test_the_two_stage_search_scores_its_candidates_exactly(space, encoder, dictionary, monkeypatch) -> None:
    _coarse(monkeypatch, candidates=2)
    ranking = Ranking(frequency_weight=0, definition_weight=0, headword_weight=0, **NO_WORDS)
    rd = ReverseDictionary(encoder, space, dictionary, ranking=ranking)
    query = "a strongroom for valuables"
    results = rd.search(query, k=2)
    cosine = dict(zip(space.words, _unit(space.matrix.numpy()) @ _unit(encoder.encode(query)), strict=True))
    assert len(results) == 2 and [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert [r.score for r in results] == pytest.approx([cosine[r.words[0]] for r in results], abs=1e-5)


def test_the_first_stage_keeps_a_margin_past_a_large_k(space, encoder, dictionary, monkeypatch) -> None:
    """With k past the first stage's candidates, it kept exactly k groups: the exact stage only re-sorted them (recall
    .92 of the exact top 2,000 on a 20,000-entry space). It keeps 2k; up to its size, its own number."""
    from dictembed.search_index import CoarseIndex as Index

    _coarse(monkeypatch, candidates=2)
    widths: list[int] = []
    real = search_index.top_indices

    def counted(scores, allowed, k):
        widths.append(k)
        return real(scores, allowed, k)

    monkeypatch.setattr(reverse_dictionary, "top_indices", counted)
    ranking = Ranking(frequency_weight=0, definition_weight=0, headword_weight=0, **NO_WORDS)
    rd = ReverseDictionary(encoder, space, dictionary, ranking=ranking)
    rd.search("a strongroom for valuables", k=3)
    rd.search("a strongroom for valuables", k=2)
    assert isinstance(rd.index.coarse, Index) and widths == [6, 2]  # k 3: 6; k 2: the first stage's own


def test_a_filter_allowing_no_more_groups_than_the_candidates_skips_the_first_stage(
    space, encoder, dictionary, monkeypatch
) -> None:
    query, narrow = "money kept by a river", "/^(bank|shore|river)$/"
    ranking = Ranking(definition_weight=0, headword_weight=0, **NO_WORDS)  # no rerank: the stages choose k
    exact = ReverseDictionary(encoder, space, dictionary, ranking=ranking).search(query, k=1, pattern=narrow)
    _coarse(monkeypatch, candidates=3)
    rd = ReverseDictionary(encoder, space, dictionary, ranking=ranking)
    scored: list[int] = []
    first_stage = CoarseIndex.scores
    monkeypatch.setattr(CoarseIndex, "scores", lambda index, rows: scored.append(len(rows)) or first_stage(index, rows))
    assert [r.to_dict() for r in rd.search(query, k=1, pattern=narrow)] == [r.to_dict() for r in exact]
    assert scored == [] and len(exact) == 1
    assert len(rd.search(query, k=1, pattern="/^(bank|shore|river|vault)$/")) == 1 and scored == [1]  # two stages
