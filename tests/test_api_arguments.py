"""The encoder's and the reverse dictionary's Python API refuse arguments they cannot honour in one line naming the
argument: a string where a list is asked (it would be read character by character), a set or a mapping (no order),
bytes, a non-bool flag ("no" counts as true), conflicting names of one option, a device the encoder's `to` cannot
take; and queries holding nothing a tokenizer reads (zero-width or control characters only)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import dictionary_of

from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.texts import is_blank

SILENT = ["\x00", "\u200b", "\ufeff", "\u00ad", " \u200b\t"]


@pytest.fixture(scope="module")
def encoder(bert_path: Path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean", device="cpu")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.encode({"a dog", "a cat"}), "sentences must be a list of str, not a set (it has no order"),
        (lambda e: e.encode({"a dog": 1}), "sentences must be a list of str, not a dict"),
        (lambda e: e.encode(b"a dog"), "sentences must be a str or a list of str, got bytes"),
        (lambda e: list(e.embed("abc")), "texts must be a list of str, not one str"),
        (lambda e: e.tokenize("abc"), "sentences must be a list of str, not one str"),
        (lambda e: e.count_tokens("abc"), "sentences must be a list of str, not one str"),
        (lambda e: e.count_tokens([None]), "sentence 0 is NoneType, not a string"),
        (lambda e: e.encode(["a"], prompt=5), "prompt must be a str or None, not int"),
        (lambda e: e.encode(["a"], normalize_embeddings="no"), "normalize_embeddings must be True or False"),
        (lambda e: e.encode(["a"], normalize=False, normalize_embeddings=True), "disagree"),
        (lambda e: e.encode(["a"], device="banana"), "unknown device 'banana'"),
        (lambda e: list(e.embed(["a", "b"], chunk=-1)), "chunk must be a whole number of at least 1 or None"),
        (lambda e: e.similarity("a", "b"), "similarity: a must be vectors of numbers, not str"),
        (lambda e: e.similarity(np.ones((2, 3)), np.ones((2, 4))), "similarity: a has 3 dimensions, b 4"),
        (lambda e: e.similarity(np.ones((2, 2, 2)), np.ones((2, 2))), "one vector or a matrix"),
        (lambda e: e.save(None), "Encoder.save: path must be a folder's path"),
    ],
)
def test_encoder_refuses_in_one_line(encoder: Encoder, call, message: str) -> None:
    with pytest.raises(DictEmbedError, match=message.replace("(", r"\(")):
        call(encoder)


def test_similarity_takes_vectors_matrices_and_lists(encoder: Encoder) -> None:
    vectors = encoder.encode(["a dog", "a cat"])
    expected = (
        torch.nn.functional.normalize(torch.tensor(vectors), dim=1)
        @ torch.nn.functional.normalize(torch.tensor(vectors), dim=1).T
    )
    torch.testing.assert_close(encoder.similarity(vectors, vectors), expected)
    torch.testing.assert_close(encoder.similarity(vectors.tolist(), torch.tensor(vectors)), expected)
    assert encoder.similarity(vectors[0], vectors).shape == (1, 2)


def test_a_flag_given_a_string_replaces_nothing(encoder: Encoder, tmp_path: Path) -> None:
    folder = encoder.save(tmp_path / "m")
    before = (folder / "model.safetensors").read_bytes()
    with pytest.raises(DictEmbedError, match="overwrite must be True or False, not 'no'"):
        encoder.save(folder, overwrite="no")  # type: ignore[arg-type]
    assert (folder / "model.safetensors").read_bytes() == before
    with pytest.raises(DictEmbedError, match="normalize must be True or False or None, not 'no'"):
        Encoder.load(str(folder), normalize="no")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def rd(encoder: Encoder) -> ReverseDictionary:
    from dictembed.entry_space import DefinitionSpace

    words = ["giraffe", "dog", "car"]
    rows = np.random.default_rng(0).normal(size=(3, encoder.dim)).astype(np.float32)
    space = DefinitionSpace(words, rows, similarity="cosine", temperature=0.05)
    dictionary = dictionary_of("toy", {w: [f"a {w}"] for w in words})
    return ReverseDictionary(encoder, space, dictionary=dictionary, name="toy", language="none")


@pytest.mark.parametrize("query", SILENT)
def test_a_query_of_invisible_characters_is_empty(rd: ReverseDictionary, query: str) -> None:
    assert is_blank(query)
    with pytest.raises(DictEmbedError, match="empty query"):
        rd.search(query)
    with pytest.raises(DictEmbedError, match=r"empty query \(query 2\)"):
        rd.search_many(["a tall animal", query])


def test_is_blank_keeps_text_in_any_script() -> None:
    assert not any(map(is_blank, ["a", "狗", "\u200bdog", "٣", "é", "\u0301a"]))


def test_search_many_refuses_unordered_queries(rd: ReverseDictionary) -> None:
    with pytest.raises(DictEmbedError, match="no order to keep"):
        rd.search_many({"a tall animal", "a pet"})
    with pytest.raises(DictEmbedError, match="search_many takes a list of descriptions, not bytes"):
        rd.search_many(b"a pet")


def test_an_unknown_prior_language_is_refused(rd: ReverseDictionary, encoder: Encoder) -> None:
    with pytest.raises(DictEmbedError, match="language 'klingon': the word-frequency prior knows auto, none, en"):
        ReverseDictionary(encoder, rd.space, name="toy", language="klingon")  # type: ignore[arg-type]


def test_load_refuses_a_number_as_device_and_an_unknown_language(served_model: Path) -> None:
    with pytest.raises(DictEmbedError, match="device: a name such as 'cpu'"):
        ReverseDictionary.load(served_model, device=0)  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="language 'xx'"):
        ReverseDictionary.load(served_model, language="xx")


def test_ranks_counts_the_definitions_it_cannot_rank(rd: ReverseDictionary, caplog: pytest.LogCaptureFixture) -> None:
    dictionary = dictionary_of("oov", {"dog": ["a pet that barks"], "qqqzzz": ["nothing"], "blorfle": ["none"]})
    with caplog.at_level(logging.WARNING, logger="dictembed.model_scores"):
        ranks = rd.ranks(dictionary)
    assert len(ranks) == 1
    assert "2 of 3 definitions skipped" in caplog.text
    with pytest.raises(DictEmbedError, match="limit: a whole number of at least 1"):
        rd.ranks(dictionary, limit=0)


def test_the_api_and_predict_take_an_invisible_query_for_an_empty_one(
    served_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi.testclient import TestClient

    from dictembed.cli import main
    from dictembed.serve import create_app

    answer = TestClient(create_app(served_model)).get("/api/reverse", params={"q": "\u200b"})
    assert answer.status_code == 422 and "the query is empty" in answer.text
    queries = tmp_path / "queries.txt"
    queries.write_text("a vehicle with wheels\n\u200b\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="dictembed.cli.predict"):
        assert main(["predict", "--model", str(served_model), "--input", str(queries), "--json"]) == 0
    assert "1 blank line(s) skipped (line 2)" in caplog.text


def test_ranking_takes_numpy_numbers_as_python_ones() -> None:
    from dictembed.search_options import Ranking

    ranking = Ranking(definition_weight=np.float32(0.5), depth=np.int64(5), min_frequency=np.float64(2))
    assert (ranking.definition_weight, ranking.depth, ranking.min_frequency) == (0.5, 5, 2.0)
    assert type(ranking.definition_weight) is float and type(ranking.depth) is int
    for bad in ({"depth": 0}, {"depth": True}, {"frequency_weight": float("nan")}, {"overlap_weight": np.inf}):
        with pytest.raises(DictEmbedError, match=next(iter(bad))):
            Ranking(**bad)


def test_neighbours_and_the_query_encoder_refuse_wrong_kinds(rd: ReverseDictionary, tmp_path: Path) -> None:
    from dictembed.backends.onnx.query import OnnxQueryEncoder

    with pytest.raises(DictEmbedError, match="scoring: a near_synonyms.SynonymScoring, not str"):
        rd.neighbours("dog", scoring="cosine")  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="threads: a whole number of at least 1 or None, not 1.5"):
        OnnxQueryEncoder.open(tmp_path, threads=1.5)  # type: ignore[arg-type]


def test_a_dictionary_named_at_load_is_checked_then(served_model: Path, tmp_path: Path) -> None:
    with pytest.raises(DictEmbedError, match="nope.tsv"):
        ReverseDictionary.load(served_model, dictionary=str(tmp_path / "nope.tsv"))
    with pytest.raises(DictEmbedError, match="dictionary: a dictionary's name or a file's path, not 5"):
        ReverseDictionary.load(served_model, dictionary=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "  ", None, 5])
def test_no_model_name_is_no_model(name: object) -> None:
    from dictembed.backends.onnx.query import OnnxQueryEncoder
    from dictembed.model_folder import ModelFolder

    with pytest.raises(DictEmbedError, match="a model folder's path, an offline model's or a Hub name, not"):
        ModelFolder.open(name)  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="a model folder's path"):
        OnnxQueryEncoder.open(name)  # type: ignore[arg-type]
    if name is not None:  # Encoder.load(None) is the default model
        with pytest.raises(DictEmbedError, match="a model folder"):
            Encoder.load(name)  # type: ignore[arg-type]


def test_encode_follows_sentence_transformers_where_it_is_lenient(
    encoder: Encoder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
        with_prompt = encoder.encode(["a dog"], prompt="x: ", prompt_name="query")
    assert "prompt_name 'query' is not used" in caplog.text
    np.testing.assert_array_equal(with_prompt, encoder.encode(["a dog"], prompt="x: "))
    assert np.linalg.norm(encoder.encode("a dog", normalize_embeddings=np.True_)) == pytest.approx(1, abs=1e-5)


def test_similarity_keeps_the_gradient_and_the_dtype(encoder: Encoder) -> None:
    a = torch.randn(2, 4, requires_grad=True)
    assert encoder.similarity(a, torch.randn(3, 4)).requires_grad
    assert encoder.similarity(np.array([[1.0, 1e-9]]), np.array([[1.0, 0.0]])).dtype == torch.float64
    assert encoder.similarity([[1, 2]], [[2, 4]]).item() == pytest.approx(1)
    mixed = encoder.similarity(np.array([[3.0, 4.0]]), np.array([[4.0, 3.0]], dtype=np.float32))  # as numpy would
    assert mixed.dtype == torch.float64 and mixed.item() == pytest.approx(24 / 25)
    whole = encoder.similarity(torch.tensor([[3, 4]]), torch.tensor([[4, 3]]))  # int64 tensors, booleans: float32
    assert whole.dtype == torch.float32 and whole.item() == pytest.approx(24 / 25)
    assert encoder.similarity(np.array([True, False]), np.array([1.0, 1.0])).item() == pytest.approx(2**-0.5)
    with pytest.raises(DictEmbedError, match="^similarity: a has rows of different lengths$"):
        encoder.similarity([[1, 2], [1]], [1, 2])


def test_encode_flags_given_a_string_are_refused(encoder: Encoder) -> None:
    """A string would count as true: a tensor for `convert_to_tensor="no"`, a bar for `show_progress_bar="x"`."""
    for flag in ("convert_to_tensor", "convert_to_numpy", "show_progress_bar", "show_progress"):
        with pytest.raises(DictEmbedError, match=f"^{flag} must be True or False"):
            encoder.encode(["a dog"], **{flag: "no"})


@pytest.mark.parametrize("text", ["\U0001fa77", "\U00031350", "\ue000"])
def test_characters_newer_than_pythons_tables_are_not_blank(text: str) -> None:
    assert not is_blank(text)
