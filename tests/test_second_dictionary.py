"""A second dictionary's definitions in the reverse dictionary's score: matched to the entry words, encoded as the
entry space's own definitions are, saved and mapped with the folder, refused when they do not fit, and the term
against a score computed by hand; `train --second-dictionary` saves them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from conftest import dictionary_of
from safetensors.torch import load_file, save_file
from test_headword_rerank import SENSES  # bank, lender = loaner (one result), river, vault

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.recipes.defsent_plus import second_definitions
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import SECOND_FLOOR, Ranking
from dictembed.search_space import SearchSpace
from dictembed.second_dictionary import SecondDefinitions, matched

NO_WORDS = {"query_word_weight": 0, "overlap_weight": 0}
ONLY_SECOND = {"frequency_weight": 0, "definition_weight": 0, "headword_weight": 0, **NO_WORDS}
SECOND = {  # "River" defines river (case folded); "harbour" is no entry; vault's two senses
    "River": ["a stream of water flowing to the sea"],
    "vault": ["an arched ceiling of stone", "a leap over a bar with the hands on it"],
    "harbour": ["a sheltered port"],
}


@pytest.fixture(scope="module")
def encoder(mean_encoder) -> Encoder:
    return mean_encoder


@pytest.fixture(scope="module")
def dictionary() -> Dictionary:
    return dictionary_of("first", SENSES, pos="n")


@pytest.fixture(scope="module")
def space(encoder, dictionary) -> DefinitionSpace:
    return DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")


@pytest.fixture(scope="module")
def second(encoder, space) -> SecondDefinitions:
    return second_definitions(encoder, space.words, dictionary_of("second", SECOND), "amp", None)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_a_headword_spelt_as_the_word_wins_over_one_equal_in_lower_case() -> None:
    second = dictionary_of("s", {"Bank": ["a place for money"], "bank": ["the side of a river"], "Vault": ["a jump"]})
    chosen = matched(second, ["bank", "river", "vault"])
    assert chosen.headwords == ["bank", "vault"]
    assert [e.definitions for e in chosen] == [["the side of a river"], ["a jump"]]


def test_each_entry_gets_its_second_definitions_encoded_as_its_own_are(second, space, encoder) -> None:
    assert space.words == ["bank", "lender", "loaner", "river", "vault"]
    assert second.counts.tolist() == [0, 0, 0, 1, 2] and second.definitions.dtype == np.float16
    texts = SECOND["River"] + SECOND["vault"]
    expected = _unit(encoder.with_pooling("mean").encode(texts))
    got = _unit(second.definitions.astype(np.float32))
    np.testing.assert_allclose((got * expected).sum(axis=1), 1.0, atol=2e-3)


def test_a_second_dictionary_that_defines_no_entry_word_is_refused(encoder, space) -> None:
    with pytest.raises(DictEmbedError, match="defines none of the 5 entries' words"):
        second_definitions(encoder, space.words, dictionary_of("far", {"harbour": ["a port"]}), "amp", None)


def test_the_definitions_are_saved_and_mapped_with_the_space(space, second, tmp_path) -> None:
    space.save(tmp_path)
    SecondDefinitions("gcide", second.counts, second.definitions).save(tmp_path)
    mapped = SearchSpace.open(tmp_path).second
    assert mapped is not None and mapped.counts.tolist() == second.counts.tolist()
    assert mapped.name == "gcide"  # the file records the dictionary it holds
    assert np.array_equal(mapped.definitions, second.definitions)
    plain = tmp_path / "plain"
    space.save(plain)
    assert SearchSpace.open(plain).second is None


@pytest.mark.parametrize("recorded", ['"two\\nlines"', '"' + "x" * 300 + '"', "[" * 100_000, "5", '""'])
def test_a_recorded_name_the_card_cannot_show_reads_as_second(space, second, tmp_path, recorded) -> None:
    from safetensors.numpy import save_file

    space.save(tmp_path)
    second.save(tmp_path)
    path = tmp_path / "entry_space" / "second.safetensors"
    tensors = {"counts": np.asarray(second.counts, dtype=np.int64), "definitions": np.asarray(second.definitions)}
    save_file(tensors, str(path), metadata={"dictionary": recorded})
    opened = SearchSpace.open(tmp_path).second
    assert opened is not None and opened.name == "second"


@pytest.mark.parametrize("fault", ["short counts", "negative count", "nan", "width", "unsigned", "overflow"])
def test_second_definitions_that_do_not_fit_the_space_are_refused(space, second, tmp_path, fault) -> None:
    space.save(tmp_path)
    second.save(tmp_path)
    path = tmp_path / "entry_space" / "second.safetensors"
    tensors = load_file(str(path))
    counts, vectors = tensors["counts"], tensors["definitions"]
    if fault == "short counts":
        counts = counts[:-1].contiguous()
    elif fault == "negative count":
        counts = torch.tensor([0, 0, -1, 2, 2])
    elif fault == "unsigned":
        counts = counts.to(torch.uint8)
    elif fault == "overflow":  # sums to the 3 rows, wrapping around
        counts = torch.tensor([2**63 - 1, 2**63 - 1, 3, 0, 0])
    elif fault == "nan":
        vectors = vectors.clone()
        vectors[1, 3] = float("nan")
    else:
        vectors = vectors[:, :-1].contiguous()
    save_file({"counts": counts, "definitions": vectors}, str(path))
    with pytest.raises(DictEmbedError, match=r"second\.safetensors: the second dictionary's definitions cannot"):
        SearchSpace.open(tmp_path)


def test_the_score_adds_the_best_second_definition_past_the_floor_as_computed_by_hand(
    space, second, encoder, dictionary
) -> None:
    w = 2.0
    view = dataclasses.replace(SearchSpace.of(space), second=second)
    rd = ReverseDictionary(encoder, view, dictionary, ranking=Ranking(second_dictionary_weight=w, **ONLY_SECOND))
    assert rd.score_kind == "cosine+second" and rd.reranks_by_second
    query = "a stream flowing to the sea"
    h = _unit(encoder.encode(query))
    entry = _unit(space.matrix.numpy()) @ h
    defs = _unit(second.definitions.astype(np.float32)) @ h
    gain = {3: max(defs[0] - SECOND_FLOOR, 0), 4: max(max(defs[1], defs[2]) - SECOND_FLOOR, 0)}
    expected = {
        ("bank",): entry[0],
        ("lender", "loaner"): entry[1],
        ("river",): entry[3] + w * gain[3],
        ("vault",): entry[4] + w * gain[4],
    }
    got = {tuple(r.words): r.score for r in rd.search(query, k=4)}
    assert got == pytest.approx(expected, abs=1e-3) and gain[3] > 0


def test_weight_zero_or_no_second_dictionary_ranks_as_before(space, second, encoder, dictionary) -> None:
    query = "a leap over a bar"
    with_second = dataclasses.replace(SearchSpace.of(space), second=second)
    off = ReverseDictionary(encoder, with_second, dictionary, ranking=Ranking(second_dictionary_weight=0, **NO_WORDS))
    bare = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(**NO_WORDS))
    on = ReverseDictionary(encoder, with_second, dictionary, ranking=Ranking(second_dictionary_weight=10, **NO_WORDS))
    assert "+second" not in off.score_kind and "+second" not in bare.score_kind and "+second" in on.score_kind
    assert [r.to_dict() for r in off.search(query, k=4)] == [r.to_dict() for r in bare.search(query, k=4)]
    assert on.search(query, k=1)[0].words == ["vault"]


def test_a_filtered_out_word_adds_nothing(space, encoder, dictionary) -> None:
    # lender and loaner are one result; only loaner has a second definition, and the filter keeps only lender
    query = "someone who lends money"
    own = np.asarray(encoder.encode([query]), dtype=np.float16)  # cosine 1 to the query
    second = SecondDefinitions("s", np.array([0, 0, 1, 0, 0]), own)
    view = dataclasses.replace(SearchSpace.of(space), second=second)
    rd = ReverseDictionary(encoder, view, dictionary, ranking=Ranking(second_dictionary_weight=5, **ONLY_SECOND))
    (kept,) = rd.search(query, k=5, pattern="lender")
    (other,) = rd.search(query, k=5, pattern="loaner")
    assert kept.words == ["lender"] and other.words == ["loaner"]
    assert other.score == pytest.approx(kept.score + 5 * (1 - SECOND_FLOOR), abs=1e-3)


def test_train_saves_the_second_dictionary_and_predict_reads_it(bert_path, toy_tsv, tmp_path, capsys) -> None:
    from dictembed.cli import main

    table = tmp_path / "second.tsv"
    words = [line.split("\t")[0] for line in toy_tsv.read_text().splitlines()[1:]]
    table.write_text("word\tdefinition\n" + "".join(f"{w}\tanother wording of {w}\n" for w in words[:3]))
    out = tmp_path / "out"
    argv = ["train", "--model", str(bert_path), "--dictionary", str(toy_tsv), "--output", str(out)]
    argv += ["--second-dictionary", str(table), "--cache-dir", str(tmp_path / "c"), "--lr-grid", "1e-3"]
    assert main(argv) == 0
    saved = SearchSpace.open(out).second
    assert saved is not None and int((saved.counts > 0).sum()) == len(set(words[:3]))
    record = json.loads((out / "dictembed.json").read_text())
    assert record["details"]["second_dictionary"]["entries"] == len(set(words[:3]))
    assert f"dictionary `{table.name}`" in (out / "README.md").read_text()  # the card's licences name it
    assert "+second" in ReverseDictionary.load(out).score_kind
    capsys.readouterr()
    assert main(["predict", "a word", "--model", str(out), "--second-dictionary-weight", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["export", "--model", str(out), "--output", str(tmp_path / "int8"), "--quantize", "int8"]) == 0
    exported = SearchSpace.open(tmp_path / "int8").second
    assert exported is not None and np.array_equal(exported.definitions, saved.definitions)
    other = tmp_path / "other.tsv"  # another second dictionary: the run is not reused with the first one's
    other.write_text("word\tdefinition\n" + "".join(f"{w}\tyet another wording\n" for w in words[-1:]))
    argv[argv.index(str(table))] = str(other)
    assert main([*argv, "--overwrite"]) == 0
    again = SearchSpace.open(out).second
    assert again is not None and int((again.counts > 0).sum()) == 1


def test_a_distilled_student_keeps_the_teachers_second_definitions_projected(
    served_model, bert_path, tmp_path, capsys
) -> None:
    import shutil

    from safetensors.numpy import load_file as load_numpy

    from dictembed.cli import main

    teacher = tmp_path / "teacher"
    shutil.copytree(served_model, teacher)
    words = SearchSpace.open(teacher).words
    counts = np.zeros(len(words), dtype=np.int64)
    counts[:2] = [1, 2]
    vectors = np.random.default_rng(0).standard_normal((3, 32)).astype(np.float16)
    SecondDefinitions("mine", counts, vectors).save(teacher)
    out = tmp_path / "student"
    argv = ["distil", str(teacher), "--model", str(bert_path), "--output", str(out), "--descriptions", "none"]
    argv += ["--epochs", "1", "--device", "cpu", "--precision", "fp32", "-q"]
    assert main(argv) == 0
    capsys.readouterr()
    projection = load_numpy(tmp_path / "student-runs" / "distil" / "projection.safetensors")["projection"]
    second = SearchSpace.open(out).second
    assert second is not None and second.counts.tolist() == counts.tolist()
    expected = _unit(vectors.astype(np.float32) @ projection)
    np.testing.assert_allclose(second.definitions.astype(np.float32), expected, atol=2e-3)
    # named as the teacher's file names it, its record silent: the student's card gives that dictionary's licence
    assert second.name == "mine"
    assert json.loads((out / "dictembed.json").read_text())["details"]["second_dictionary"]["name"] == "mine"
    assert "dictionary `mine`" in (out / "README.md").read_text()


def test_index_keeps_a_second_dictionary_given_by_file(bert_path, toy_tsv, tmp_path, capsys) -> None:
    from dictembed.cli import main

    table = tmp_path / "second.tsv"
    words = [line.split("\t")[0] for line in toy_tsv.read_text().splitlines()[1:]]
    table.write_text("word\tdefinition\n" + f"{words[0]}\tanother wording\n")
    base = ["index", "--model", str(bert_path), "--dictionary", str(toy_tsv)]
    assert main([*base, "--second-dictionary", str(table), "--output", str(tmp_path / "a")]) == 0
    assert main([*base, "--output", str(tmp_path / "b")]) == 0  # a table file: no GCIDE beside it
    capsys.readouterr()
    kept = SearchSpace.open(tmp_path / "a").second
    assert kept is not None and int(kept.counts.sum()) == 1
    assert SearchSpace.open(tmp_path / "b").second is None
    assert main([*base, "--second-dictionary", str(tmp_path / "missing.tsv"), "--output", str(tmp_path / "c")]) == 1
    assert "missing.tsv" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_a_centred_space_keeps_no_second_definitions(space, second) -> None:
    from dictembed.language_centring import centred_space, mean_entry

    view = dataclasses.replace(SearchSpace.of(space), second=second)
    assert centred_space(view, mean_entry(view)).second is None
