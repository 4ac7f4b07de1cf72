"""Encoder: poolings against hand-computed values, order restoration, save -> reload identity, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.pooling import pool

SENTENCES = ["a man plays the guitar .", "", "the cat sat on the mat", "rain " * 400, "short"]


def test_poolings_match_hand_computed_values() -> None:
    states = torch.tensor([[[1.0, 2.0], [3.0, -4.0], [100.0, 100.0]]])
    first = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [50.0, 50.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool("cls", (states,), mask).tolist() == [[1.0, 2.0]]
    assert pool("mean", (states,), mask).tolist() == [[2.0, -1.0]]
    assert pool("max", (states,), mask).tolist() == [[3.0, 2.0]]
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
    normalized = enc.encode(SENTENCES, normalize=True)
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

    enc = Encoder.load(str(bert_path), pooling=pooling, pooler=pooler)
    expected = enc.encode(SENTENCES)
    out = enc.save(tmp_path / "model", {"method": "test", "seed": 3})
    st = SentenceTransformer(str(out), device="cpu").encode(SENTENCES)
    np.testing.assert_array_equal(st, expected)
    again = Encoder.load(str(out))
    np.testing.assert_array_equal(again.encode(SENTENCES), expected)
    config = json.loads((out / "dictembed.json").read_text())
    assert config["seed"] == 3 and config["encoder"]["pooling"] == pooling
    assert (config["encoder"]["pooler"] is not None) == (pooler == "model")
    assert not (tmp_path / "model.partial").exists()


def test_roberta_pooler_is_lm_head_dense_with_gelu(roberta_path) -> None:
    from transformers import AutoModelForMaskedLM

    enc = Encoder.load(str(roberta_path), pooling="cls", pooler="model")
    head = AutoModelForMaskedLM.from_pretrained(str(roberta_path)).lm_head.dense
    assert enc.pooler is not None and enc.pooler.activation_name == "gelu"
    assert torch.equal(enc.pooler.linear.weight, head.weight)


def test_bad_input_errors(bert_path, tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="no-such-model"):
        Encoder.load(str(tmp_path / "no-such-model"))
    enc = Encoder.load(str(bert_path))
    with pytest.raises(DictEmbedError, match="not str"):
        enc.encode(["fine", None])  # type: ignore[list-item]
    with pytest.raises(DictEmbedError, match="list of sentences"):
        enc.encode("one string")  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="unknown pooling"):
        Encoder.load(str(bert_path), pooling="median")
    assert enc.encode([]).shape == (0, 32)
