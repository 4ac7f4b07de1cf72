"""The word itself in the reverse dictionary's score: the headword vectors a definition space keeps (built as
descriptions are encoded, cached, saved, mapped and loaded with it) and `ReverseDictionary`'s rerank against a
score computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import dictionary_of
from safetensors.torch import load_file, save_file

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.entry_vectors import headword_vectors
from dictembed.errors import DictEmbedError
from dictembed.language_centring import centred_space, mean_entry
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_options import Ranking
from dictembed.search_space import SearchSpace

NO_WORDS = {"query_word_weight": 0, "overlap_weight": 0}  # the lexical terms off

# "lender" and "loaner" share their one definition, so they are one result (a group of identical entries).
SENSES = {
    "bank": ["sloping land beside a body of water", "a financial institution that accepts deposits"],
    "lender": ["a person or company that lends money"],
    "loaner": ["a person or company that lends money"],
    "river": ["a large natural stream of water"],
    "vault": ["a strongroom for keeping money and valuables"],
}


@pytest.fixture(scope="module")
def dictionary() -> Dictionary:
    return dictionary_of("headwords", SENSES, pos="n")


@pytest.fixture(scope="module")
def encoder(mean_encoder) -> Encoder:
    return mean_encoder


@pytest.fixture(scope="module")
def space(encoder, dictionary) -> DefinitionSpace:
    built = DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")
    return built.with_headwords(headword_vectors(encoder, built.words))


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_each_headword_is_encoded_as_a_description_is(space, encoder) -> None:
    headwords = space.headwords
    assert headwords is not None and headwords.dtype == torch.float16 and headwords.shape == space.matrix.shape
    np.testing.assert_allclose(headwords.float().numpy(), encoder.encode(space.words), rtol=2e-3, atol=2e-3)
    assert torch.equal(space.subset(["river", "bank"]).headwords, headwords[[0, 3]])


def test_headword_vectors_are_saved_mapped_and_loaded_with_the_space(space, tmp_path) -> None:
    space.save(tmp_path)
    loaded = load_entry_space(tmp_path)
    assert isinstance(loaded, DefinitionSpace) and torch.equal(loaded.headwords, space.headwords)
    mapped = SearchSpace.open(tmp_path)
    assert mapped.headwords is not None and np.array_equal(mapped.headwords, space.headwords.numpy())


def test_headword_vectors_that_do_not_fit_the_entries_are_refused(space, tmp_path) -> None:
    with pytest.raises(DictEmbedError, match="headword vectors do not fit"):
        DefinitionSpace(space.words, space.matrix, headwords=space.headwords[:-1])
    space.save(tmp_path)
    path = tmp_path / "entry_space" / "tensors.safetensors"
    tensors = load_file(str(path))
    save_file({**tensors, "headwords": tensors["headwords"][:, :-1].contiguous()}, str(path))
    with pytest.raises(DictEmbedError, match=r"entry_space.*headword vectors do not fit"):
        SearchSpace.open(tmp_path)


def test_the_score_adds_the_best_words_cosine_as_computed_by_hand(space, encoder, dictionary) -> None:
    query = "someone who lends money"
    d, w = 0.5, 0.4
    rd = ReverseDictionary(
        encoder,
        space,
        dictionary,
        ranking=Ranking(frequency_weight=0, definition_weight=d, headword_weight=w, **NO_WORDS),
    )
    assert rd.score_kind == "cosine+definition+headword"
    h = _unit(encoder.encode(query))
    entry = _unit(space.matrix.numpy()) @ h
    definition = _unit(space.definitions.float().numpy()) @ h
    word = _unit(space.headwords.float().numpy()) @ h
    # entries bank, lender, loaner, river, vault: bank has definitions 0-1, lender 2, loaner 3, river 4, vault 5
    best = np.array([definition[0:2].max(), definition[2], definition[3], definition[4], definition[5]])
    expected = (entry + d * best) / (1 + d) + w * word
    expected_by_result = {
        ("bank",): expected[0],
        ("lender", "loaner"): (entry[1] + d * best[1]) / (1 + d) + w * max(word[1], word[2]),
        ("river",): expected[3],
        ("vault",): expected[4],
    }
    results = rd.search(query, k=4)
    got = {tuple(r.words): r.score for r in results}
    assert got.keys() == expected_by_result.keys()
    assert got == pytest.approx(expected_by_result, abs=1e-4)
    assert [r.score for r in results] == sorted(got.values(), reverse=True)


def test_the_headword_term_moves_the_word_named_in_the_description_up(space, encoder, dictionary) -> None:
    query = "the river"
    plain = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(0, 0, headword_weight=0, **NO_WORDS))
    by_word = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(0, 0, headword_weight=10, **NO_WORDS))
    h = _unit(encoder.encode(query))
    word = dict(zip(space.words, _unit(space.headwords.float().numpy()) @ h, strict=True))
    assert by_word.search(query, k=1)[0].words == [max(word, key=word.__getitem__)]
    assert plain.score_kind == "cosine" and by_word.score_kind == "cosine+headword"


def test_a_space_without_headword_vectors_ranks_as_before(space, encoder, dictionary) -> None:
    bare = DefinitionSpace(space.words, space.matrix, "cosine", counts=space.counts, definitions=space.definitions)
    query = "money kept safe"
    with_term = ReverseDictionary(encoder, bare, dictionary, ranking=Ranking(frequency_weight=0, **NO_WORDS))
    off = ReverseDictionary(
        encoder, space, dictionary, ranking=Ranking(frequency_weight=0, headword_weight=0, **NO_WORDS)
    )
    assert with_term.score_kind == off.score_kind == "cosine+definition"
    assert [r.to_dict() for r in with_term.search(query, k=4)] == [r.to_dict() for r in off.search(query, k=4)]


def test_a_centred_space_keeps_no_headword_vectors(space) -> None:
    view = SearchSpace.of(space)
    assert view.headwords is not None and centred_space(view, mean_entry(view)).headwords is None


def test_an_indexed_folder_keeps_the_query_encoders_headword_vectors(bert_path, tmp_path) -> None:
    from dictembed.cli import main

    table = tmp_path / "words.tsv"
    table.write_text(
        "word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, ds in SENSES.items() for d in ds), encoding="utf-8"
    )
    assert (
        main(["index", "--model", str(bert_path), "--dictionary", str(table), "--output", str(tmp_path / "out")]) == 0
    )
    saved = SearchSpace.open(tmp_path / "out")
    query_encoder = Encoder.load(str(tmp_path / "out"))
    assert saved.headwords is not None and saved.headwords.dtype == np.float16
    np.testing.assert_allclose(saved.headwords, query_encoder.encode(saved.words), rtol=2e-3, atol=2e-3)
    rd = ReverseDictionary.load(tmp_path / "out")
    assert "+headword" in rd.score_kind and rd.search("a stream of water", k=2)


def test_train_keeps_the_headword_vectors_parts_in_its_cache_dir(bert_path, toy_tsv, tmp_path, monkeypatch) -> None:
    from dictembed.cli import main
    from dictembed.recipes import run

    seen: list[object] = []
    encode = run.headword_vectors

    def spy(encoder, words, batch_size=256, cache_dir=None):
        seen.append(cache_dir)
        return encode(encoder, words, batch_size, cache_dir)

    monkeypatch.setattr(run, "headword_vectors", spy)
    argv = ["train", "--model", str(bert_path), "--dictionary", str(toy_tsv), "--output", str(tmp_path / "out")]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache"), "--lr-grid", "1e-3", "-q"]) == 0
    assert seen == [tmp_path / "cache"] and SearchSpace.open(tmp_path / "out").headwords is not None


def test_predict_takes_the_headword_weight(served_model, capsys) -> None:
    from dictembed.cli import main

    assert main(["predict", "a pet that barks", "--model", str(served_model), "--headword-weight", "-1"]) == 2
    assert "--headword-weight" in capsys.readouterr().err
    code = main(["predict", "a pet that barks", "--model", str(served_model), "--headword-weight", "0", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)


def test_a_filtered_out_word_adds_nothing_to_its_results_headword_term(space, encoder, dictionary) -> None:
    query = "lender"
    w = 10.0
    rd = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(0, 0, headword_weight=w))
    (result,) = rd.search(query, k=5, pattern="loaner")
    h = _unit(encoder.encode(query))
    entry = float(_unit(space.matrix.numpy())[2] @ h)
    word = float(_unit(space.headwords.float().numpy())[2] @ h)  # loaner's own, not lender's
    assert result.words == ["loaner"] and result.score == pytest.approx(entry + w * word, abs=1e-3)
