"""Encoder: poolings against hand-computed values, order restoration, save -> reload identity, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.model_folder import LEGACY_RECORD_NAME, RECORD_NAME
from dictembed.pooling import pool

SENTENCES = ["a man plays the guitar .", "", "the cat sat on the mat", "rain " * 400, "short"]


def test_poolings_match_hand_computed_values(bert_path) -> None:
    states = torch.tensor([[[1.0, 2.0], [3.0, -4.0], [100.0, 100.0]]])
    first = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [50.0, 50.0]]])
    mask = torch.tensor([[1, 1, 0]])
    enc = Encoder.load(str(bert_path), device="cpu")
    for name, expected in [("cls", [[1.0, 2.0]]), ("mean", [[2.0, -1.0]]), ("max", [[3.0, 2.0]])]:
        enc.pooling = name  # sentence-transformers' own Pooling module computes these
        features = {"token_embeddings": states, "attention_mask": mask}
        assert enc.pooling_module(features)["sentence_embedding"].tolist() == expected
    # first_last_avg: mean over unmasked tokens of (layer1 + last) / 2 -> ((0.5+2)/2, (1-2)/2)
    embeddings = torch.zeros_like(states)
    assert pool("first_last_avg", (embeddings, first, states), mask).tolist() == [[1.25, -0.5]]
    assert pool("prompt", (states,), mask, torch.tensor([1])).tolist() == [[3.0, -4.0]]


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "prompt", "first_last_avg"])
def test_encode_is_batch_and_order_invariant(bert_path, pooling: str) -> None:
    enc = Encoder.load(str(bert_path), pooling=pooling, max_length=64)
    together = enc.encode(SENTENCES, batch_size=2)
    alone = np.stack([enc.encode([s])[0] for s in SENTENCES])
    assert together.shape == (len(SENTENCES), 32)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    for normalized in (enc.encode(SENTENCES, normalize=True), enc.encode(SENTENCES, normalize_embeddings=True)):
        np.testing.assert_allclose(np.linalg.norm(normalized, axis=1), 1.0, atol=1e-5)


def test_prompt_pooling_reads_the_mask_token(bert_path) -> None:
    enc = Encoder.load(str(bert_path), pooling="prompt")
    batch = enc.tokenize(["hello world"])
    tokens = enc.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    assert tokens[1:5] == ["this", "sentence", ":", '"'] and "[MASK]" in tokens
    # A long sentence is cut so the mask token survives truncation.
    assert (enc.tokenize(["rain " * 400])["input_ids"] == enc.tokenizer.mask_token_id).sum() == 1


@pytest.mark.parametrize("pooling,pooler", [("cls", "model"), ("mean", "none"), ("max", "none")])
def test_save_reload_identical(bert_path, tmp_path, pooling: str, pooler: str) -> None:
    from sentence_transformers import SentenceTransformer

    enc = Encoder.load(str(bert_path), pooling=pooling, pooler=pooler, device="cpu")  # bit-equal to ST on the CPU
    expected = enc.encode(SENTENCES)
    out = enc.save(tmp_path / "model", {"method": "test", "seed": 3})
    st = SentenceTransformer(str(out), device="cpu").encode(SENTENCES)
    np.testing.assert_array_equal(st, expected)
    again = Encoder.load(str(out), device="cpu")
    np.testing.assert_array_equal(again.encode(SENTENCES), expected)
    config = json.loads((out / "dictembed.json").read_text())
    assert config["seed"] == 3 and config["encoder"]["pooling"] == pooling
    assert ("Dense" in config["encoder"]["modules"]) == (pooler == "model")
    assert not (tmp_path / "model.partial").exists()


def test_save_never_names_its_staging_folder(bert_path, tmp_path, caplog) -> None:
    """At INFO (the CLI's level) a save logs nothing that names the temporary folder it writes into, and the
    library's own level is left as it was."""
    import logging

    enc = Encoder.load(str(bert_path), device="cpu")
    with caplog.at_level(logging.INFO):
        enc.save(tmp_path / "model")
    assert ".partial" not in caplog.text
    assert logging.getLogger("sentence_transformers").level == logging.NOTSET


def test_save_never_loses_what_it_was_not_asked_to_replace(saved_bert, tmp_path) -> None:
    """`Encoder.save` refuses a file and a non-empty folder that holds no model (both left as they were), and a model
    folder (its reverse dictionary's files too) unless `overwrite=True`, which replaces the folder whole."""
    import shutil

    enc = Encoder.load(str(saved_bert), device="cpu")
    note = tmp_path / "notes.txt"
    note.write_text("mine")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    model = Path(shutil.copytree(saved_bert, tmp_path / "model"))
    (model / "entry_space").mkdir()
    (model / "entry_space" / "space.json").write_text("{}")
    for target, message in [
        (note, "is a file; name a folder"),
        (mine, "is a non-empty folder that holds no model; choose another"),
        (model, "already holds a model; pass overwrite=True to replace it"),
    ]:
        with pytest.raises(DictEmbedError, match=message) as caught:
            enc.save(target)
        assert str(caught.value) == f"Encoder.save: {target} {message}"
    assert note.read_text() == "mine" and (mine / "keep.txt").read_text() == "mine"
    assert (model / "entry_space" / "space.json").read_text() == "{}"
    with pytest.raises(DictEmbedError, match="holds no model"):
        enc.save(mine, overwrite=True)  # never, even when asked
    assert enc.save(model, overwrite=True) == model and not (model / "entry_space").exists()
    np.testing.assert_array_equal(Encoder.load(str(model), device="cpu").encode(SENTENCES), enc.encode(SENTENCES))
    assert enc.save(tmp_path / "empty") and enc.save(tmp_path / "new" / "nested")  # missing or empty: saved


def test_roberta_pooler_is_lm_head_dense_with_gelu(roberta_path) -> None:
    from transformers import AutoModelForMaskedLM

    enc = Encoder.load(str(roberta_path), pooling="cls", pooler="model", device="cpu")
    head = AutoModelForMaskedLM.from_pretrained(str(roberta_path)).lm_head.dense
    dense = enc.post[0]
    assert isinstance(dense.activation_function, torch.nn.GELU)
    assert torch.equal(dense.linear.weight, head.weight)


def test_bad_input_errors(bert_path, tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="no-such-model"):
        Encoder.load(str(tmp_path / "no-such-model"))
    enc = Encoder.load(str(bert_path))
    with pytest.raises(DictEmbedError, match="^sentence 1 is NoneType, not a string$"):
        enc.encode(["fine", None])  # type: ignore[list-item]
    with pytest.raises(DictEmbedError, match=r"^sentence 0 is not valid Unicode text \(it holds a lone surrogate\)$"):
        enc.encode(["a \ud800 dog"])
    with pytest.raises(DictEmbedError, match="^encode: unknown keyword argument\\(s\\) 'normalise_embeddings'$"):
        enc.encode(["fine"], normalise_embeddings=True)
    with pytest.raises(DictEmbedError, match=r"^encode: truncate_dim \(sentence-transformers' options\) not"):
        enc.encode(["fine"], truncate_dim=8)
    assert enc.encode(["fine"], truncate_dim=None, output_value="sentence_embedding").shape == (1, 32)
    with pytest.raises(DictEmbedError, match="unknown quantize"):
        enc.encode(["fine"], quantize="int4")
    with pytest.raises(DictEmbedError, match="unknown pooling 'median'; choose from .*, weightedmean, lasttoken$"):
        Encoder.load(str(bert_path), pooling="median")
    with pytest.raises(DictEmbedError, match="unknown pooling"):  # before anything loads: no folder is opened
        Encoder.load("/no/such/folder", pooling="median")
    assert Encoder.load(str(bert_path), pooling="weightedmean").pooling == "weightedmean"  # a name it listed
    assert enc.encode([]).shape == (0, 32)
    for size in (
        "query",
        0,
        2.5,
        True,
        10**20,
    ):  # a prompt name where sentence-transformers takes one, a zero, not whole, huge
        with pytest.raises(DictEmbedError, match="^batch_size must be a whole number from 1 to 1000000, got "):
            enc.encode(["fine"], size)
    assert enc.encode(["fine", "good"], np.int64(1)).shape == (2, 32)  # numpy's whole numbers are whole numbers
    for quantize in ("int8", "uint8"):  # scaled to the sentences encoded together: one has no range
        with pytest.raises(DictEmbedError, match=f"^quantize='{quantize}' scales each dimension .* at least two"):
            enc.encode("fine", quantize=quantize)
        with pytest.raises(DictEmbedError, match=f"^quantize='{quantize}' .* the 3 given have one vector"):
            enc.encode(["fine"] * 3, quantize=quantize)  # every row fell into one bucket, all zeros for uint8
        assert len(np.unique(enc.encode(["fine", "fine", "good"], quantize=quantize), axis=0)) == 2
    assert enc.encode("fine", quantize="binary").shape == (4,)


def test_encode_matches_sentence_transformers_signature(bert_path) -> None:
    from sentence_transformers import quantize_embeddings

    enc = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    matrix = enc.encode(SENTENCES)
    one = enc.encode(SENTENCES[0])
    assert one.shape == (32,)
    np.testing.assert_allclose(one, matrix[0], atol=1e-6)
    tensor = enc.encode(SENTENCES, convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and torch.allclose(tensor, torch.from_numpy(matrix), atol=1e-6)
    binary = enc.encode(SENTENCES, quantize="ubinary")
    np.testing.assert_array_equal(binary, quantize_embeddings(matrix, precision="ubinary"))
    assert enc.encode(SENTENCES, quantize="int8").dtype == np.int8
    with pytest.warns(DeprecationWarning, match="quantize"):  # sentence-transformers' name for the same option
        np.testing.assert_array_equal(enc.encode(SENTENCES, precision="ubinary"), binary)
    similarity = enc.similarity(matrix, matrix)
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    np.testing.assert_allclose(similarity.numpy(), unit @ unit.T, atol=1e-5)
    assert enc.encode([]).shape == (0, 32)
    # A prompt is a prefix of every sentence.
    np.testing.assert_allclose(enc.encode(["x"], prompt="query: "), enc.encode(["query: x"]), atol=1e-6)


def test_the_default_prompt_prefixes_training_entries_and_queries_alike(bert_path, toy_dictionary) -> None:
    from dictembed.cache import cache_key
    from dictembed.objectives.entry_prediction import entry_collate

    enc = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    plain_key = cache_key(enc, toy_dictionary, "amp", False)
    enc.prompts, enc.default_prompt_name = {"query": "query: ", "passage": "passage: "}, "query"  # as e5's folder
    assert enc.default_prompt == "query: "
    prefixed = enc.tokenize(["query: a dog"], prompt="")
    for batch in (enc.tokenize(["a dog"]), entry_collate(enc)([("a dog", 0)])[0]):  # encode; training examples
        assert torch.equal(batch["input_ids"], prefixed["input_ids"])
    np.testing.assert_allclose(torch.cat(list(enc.embed(["a dog"]))).numpy(), enc.encode(["a dog"]), atol=1e-6)
    np.testing.assert_allclose(enc.encode(["a dog"]), enc.encode(["query: a dog"], prompt=""), atol=1e-6)
    passage = enc.encode(["a dog"], prompt_name="passage")
    np.testing.assert_allclose(passage, enc.encode(["passage: a dog"], prompt=""), atol=1e-6)
    assert cache_key(enc, toy_dictionary, "amp", False) != plain_key  # a space built after another prefix


def _st_folder_with_dense_and_normalize(bert_path, folder):
    """A sentence-transformers folder Transformer -> Pooling(mean) -> Dense(32 -> 8) -> Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st

    torch.manual_seed(1)
    transformer = st.Transformer(str(bert_path), max_seq_length=64)
    model = SentenceTransformer(
        modules=[transformer, st.Pooling(32, "mean"), st.Dense(32, 8), st.Normalize()], device="cpu"
    )
    model.save(str(folder), create_model_card=False)
    return SentenceTransformer(str(folder), device="cpu")


def test_sentence_transformers_folder_is_loaded_faithfully(bert_path, tmp_path) -> None:
    reference = _st_folder_with_dense_and_normalize(bert_path, tmp_path / "st")
    enc = Encoder.load(str(tmp_path / "st"), device="cpu")
    expected = reference.encode(SENTENCES)
    got = enc.encode(SENTENCES)
    assert got.shape == (len(SENTENCES), 8) and enc.dim == 8 and enc.normalize
    assert np.abs(got - expected).max() <= 1e-6
    # A short training run keeps the Dense layer trainable and saves a folder that reloads identically.
    before = enc.post[0].linear.weight.detach().clone()
    optimizer = torch.optim.SGD(enc.parameters(), lr=0.5)
    loss = -enc(enc.tokenize(["a dog barks", "a cat purrs"]))[:, 0].sum()
    loss.backward()
    optimizer.step()
    assert not torch.equal(before, enc.post[0].linear.weight)
    out = enc.save(tmp_path / "trained")
    trained = enc.encode(SENTENCES)
    again = Encoder.load(str(out), device="cpu").encode(SENTENCES)
    assert np.abs(again - trained).max() <= 1e-6
    from sentence_transformers import SentenceTransformer

    assert np.abs(SentenceTransformer(str(out), device="cpu").encode(SENTENCES) - trained).max() <= 1e-6


def test_legacy_defsent_json_still_loads(bert_path, tmp_path) -> None:
    enc = Encoder.load(str(bert_path), pooling="max", device="cpu")
    out = enc.save(tmp_path / "old", {"method": "defsent-plus", "seed": 7})
    (out / RECORD_NAME).rename(out / LEGACY_RECORD_NAME)
    again = Encoder.load(str(out), device="cpu")
    assert again.pooling == "max" and again.record.seed == 7
    np.testing.assert_array_equal(again.encode(SENTENCES), enc.encode(SENTENCES))


def test_hub_name_loads_the_snapshot_like_a_folder(bert_path, tmp_path, monkeypatch) -> None:
    """A hub name resolves to its cached snapshot (offline): dictembed.json and the Dense pooler are read."""
    enc = Encoder.load(str(bert_path), pooling="cls", pooler="model", device="cpu")
    saved = enc.save(tmp_path / "model", {"method": "defsent-plus", "seed": 5})
    cache = tmp_path / "hub"
    repo = cache / "models--someone--tiny-dictembed"
    revision = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    import shutil

    shutil.copytree(saved, repo / "snapshots" / revision)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    loaded = Encoder.load("someone/tiny-dictembed", device="cpu")
    assert loaded.pooling == "cls" and loaded.record.seed == 5
    np.testing.assert_array_equal(loaded.encode(SENTENCES), enc.encode(SENTENCES))
    with pytest.raises(ModelLoadError, match="someone/absent"):
        Encoder.load("someone/absent", device="cpu")


def test_weights_missing_from_a_checkpoint_start_the_same_in_every_load(bert_path) -> None:
    """A masked-LM checkpoint has no pooler: the encoder's pooler starts from the same values in every load
    (and process), whatever the random state, so reruns and resumed runs save identical bytes."""
    import torch

    from dictembed.encoder import Encoder

    torch.manual_seed(1)
    first = Encoder.load(str(bert_path), device="cpu").backbone.pooler.dense.weight.detach().clone()
    torch.manual_seed(2)
    second = Encoder.load(str(bert_path), device="cpu").backbone.pooler.dense.weight
    assert torch.equal(first, second)
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    Encoder.load(str(bert_path), device="cpu")
    assert torch.equal(torch.rand(4), expected)  # the caller's random state is left as it was


def test_the_weights_hash_leaves_out_the_backbones_own_pooler_alone(bert_path) -> None:
    """No vector passes through the backbone's pooler, so it is no part of the encoder's identity; every other tensor
    is, the copy of the pooler after the pooling (`pooler="model"`) included."""
    import hashlib

    def hashed(encoder: Encoder) -> str:
        digest = hashlib.sha256()
        encoder.hash_weights(digest)
        return digest.hexdigest()

    encoder = Encoder.load(str(bert_path), device="cpu", pooler="model")
    before = hashed(encoder)
    with torch.no_grad():
        encoder.backbone.pooler.dense.weight.add_(1.0)
        assert hashed(encoder) == before
        encoder.post[0].linear.weight.add_(1.0)
        after_post = hashed(encoder)
        assert after_post != before
        encoder.backbone.embeddings.word_embeddings.weight[0, 0] += 1.0
        assert hashed(encoder) != after_post


def test_load_refuses_bad_arguments_in_one_line(bert_path) -> None:
    for kwargs, message in [
        ({"device": "bogus"}, "bogus"),
        ({"pooler": "bogus"}, "unknown pooler 'bogus'; choose from model, none"),
        ({"max_length": -1}, "max_length: a whole number of at least 1 or None"),
        ({"max_length": "x"}, "max_length: a whole number of at least 1 or None"),
        ({"max_length": 100000}, "max_length 100000 is more than the 128 positions of model"),
    ]:
        with pytest.raises(DictEmbedError, match=message) as caught:
            Encoder.load(str(bert_path), **kwargs)
        assert "\n" not in str(caught.value)
    with pytest.raises(DictEmbedError, match="Encoder.load: a model folder or a Hub name, not NoneType"):
        Encoder.load(None)  # type: ignore[arg-type]
    assert Encoder.load(str(bert_path), max_length=16, pooler="none").max_length == 16


def test_a_roberta_max_length_is_checked_against_the_positions_it_holds(roberta_path) -> None:
    """RoBERTa-style models declare pad_token_id + 1 positions more than a sentence may use: a max_length between the
    two was accepted, then an IndexError traceback on a long sentence."""
    from dictembed.model_window import position_limit

    declared = Encoder.load(str(roberta_path)).backbone.config.max_position_embeddings
    usable = position_limit(Encoder.load(str(roberta_path)).backbone)
    assert usable is not None and usable < declared
    with pytest.raises(DictEmbedError, match=f"max_length {declared} is more than the {usable} positions of model"):
        Encoder.load(str(roberta_path), max_length=declared)
    assert Encoder.load(str(roberta_path), max_length=usable).encode(["word " * 500]).shape[0] == 1


def _sentence_transformer(bert_path: Path, folder: Path, *modules_after: object) -> Path:
    """The tiny BERT saved by sentence-transformers with `modules_after` the Transformer."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Transformer

    SentenceTransformer(modules=[Transformer(str(bert_path)), *modules_after], device="cpu").save(str(folder))
    return folder


def test_a_pooling_the_encoder_cannot_run_is_refused_in_one_line(bert_path, tmp_path) -> None:
    """A module between the Transformer and its Pooling was a KeyError traceback at the first encode; a Pooling of
    several modes was silently replaced by mean pooling (another vector, of another width)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, WeightedLayerPooling

    dim = Encoder.load(str(bert_path)).dim
    layers = int(json.loads((Path(bert_path) / "config.json").read_text())["num_hidden_layers"])
    weighted = _sentence_transformer(
        bert_path,
        tmp_path / "weighted",
        WeightedLayerPooling(dim, num_hidden_layers=layers, layer_start=1),
        Pooling(dim),
    )
    both = _sentence_transformer(bert_path, tmp_path / "both", Pooling(dim, ("mean", "max")))
    assert SentenceTransformer(str(both), device="cpu").encode(["a dog"]).shape == (1, 2 * dim)  # what it means
    for folder, message in ((weighted, "a WeightedLayerPooling module sits between"), (both, "joins several modes")):
        with pytest.raises(ModelLoadError, match=message) as caught:
            Encoder.load(str(folder))
        assert str(folder) in str(caught.value) and "\n" not in str(caught.value)
    plain = _sentence_transformer(bert_path, tmp_path / "plain", Pooling(dim, "max"))
    assert Encoder.load(str(plain)).pooling == "max"


def test_a_folders_similarity_function_and_truncation_are_kept(bert_path, tmp_path, caplog) -> None:
    """A sentence-transformers folder saved with `similarity_fn_name="dot"` and `truncate_dim`: `Encoder.similarity`
    scores as `SentenceTransformer.similarity` does, the truncation (which `Encoder` does not apply) is named at
    load, and both are in the folder `Encoder.save` writes (they were dropped)."""
    import logging

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    dim = Encoder.load(str(bert_path)).dim
    folder = _sentence_transformer(bert_path, tmp_path / "dot", Pooling(dim, "mean"))
    theirs = SentenceTransformer(str(folder), device="cpu", similarity_fn_name="dot", truncate_dim=dim // 2)
    theirs.save(str(folder))
    with caplog.at_level(logging.WARNING, logger="dictembed.loading"):
        ours = Encoder.load(str(folder))
    assert f"cuts its vectors to {dim // 2} dimensions" in caplog.text
    vectors = ours.encode(["a dog barks", "rain falls"])
    assert ours.similarity_fn_name == "dot"
    expected = torch.as_tensor(vectors) @ torch.as_tensor(vectors).T
    torch.testing.assert_close(ours.similarity(vectors, vectors), expected)
    saved = SentenceTransformer(str(ours.save(tmp_path / "again")), device="cpu")
    assert saved.similarity_fn_name == "dot" and saved.truncate_dim == dim // 2
    assert Encoder.load(str(bert_path)).similarity_fn_name == "cosine"


def test_encode_returns_what_sentence_transformers_flags_choose(bert_path) -> None:
    """`convert_to_numpy=False` without `convert_to_tensor` is a list of one tensor per sentence in
    sentence-transformers (it was one stacked tensor here); one string gives one tensor."""
    encoder = Encoder.load(str(bert_path))
    sentences = ["a dog barks", "rain falls"]
    array = encoder.encode(sentences)
    rows = encoder.encode(sentences, convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 2 and all(isinstance(r, torch.Tensor) for r in rows)
    np.testing.assert_allclose(torch.stack(rows).numpy(), array, atol=1e-6)
    stacked = encoder.encode(sentences, convert_to_numpy=False, convert_to_tensor=True)
    assert isinstance(stacked, torch.Tensor) and stacked.shape == array.shape
    one = encoder.encode("a dog barks", convert_to_numpy=False)
    assert isinstance(one, torch.Tensor) and one.shape == array.shape[1:]
