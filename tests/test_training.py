"""The shared trainer and the DefSent / DefSent+ recipes on tiny random masked LMs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM

from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace, WordEmbeddingSpace
from dictembed.entry_vectors import ica_transform
from dictembed.errors import DictEmbedError
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples, token_lengths
from dictembed.recipes.config import RunConfig
from dictembed.recipes.run import train
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.saved_entry_space import load_entry_space
from dictembed.training import Trainer, TrainSettings, epoch_order, length_grouped_order, make_optimizer


def _train(encoder, space, dictionary, run_dir, epochs=25, lr=3e-3, **kw):
    examples = entry_examples(dictionary, space)
    settings = TrainSettings(lr=lr, batch_size=4, epochs=epochs, warmup_ratio=0.1, seed=0, **kw)
    trainer = Trainer(EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, run_dir)
    return trainer, trainer.fit()


def _accuracy(encoder, space, dictionary) -> float:
    ranks = ReverseDictionary(encoder, space).ranks(dictionary)
    return float(np.mean(ranks == 1))


@pytest.mark.parametrize("model", ["bert_path", "roberta_path"])
def test_defsent_learns_toy_dictionary_with_frozen_head(model, request, toy_dictionary, tmp_path) -> None:
    path = str(request.getfixturevalue(model))
    encoder = Encoder.load(path, pooling="cls")
    space = MLMHeadSpace.from_pretrained(path, toy_dictionary.headwords, encoder.tokenizer)
    assert space.words == toy_dictionary.headwords  # every toy word is one token (BERT: word, RoBERTa: Ġword)
    head_before = {k: v.clone() for k, v in space.head.state_dict().items()}
    before = _accuracy(encoder, space, toy_dictionary)
    trainer, losses = _train(encoder, space, toy_dictionary, tmp_path)
    assert np.mean(losses[-8:]) < 0.5 * np.mean(losses[:8])
    assert _accuracy(encoder, space, toy_dictionary) >= max(0.75, before + 0.3)
    # The head is bit-identical after training, and still equals the checkpoint's own head.
    original = dict(AutoModelForMaskedLM.from_pretrained(path).named_children())[space.head_name].state_dict()
    for key, value in space.head.state_dict().items():
        value = value.cpu()  # training moved the space to the model's device
        assert torch.equal(value, head_before[key]) and torch.equal(value, original[key])
    assert trainer.throughput > 0


def test_word_embedding_fallback_is_frozen(bert_path, toy_dictionary, tmp_path) -> None:
    encoder = Encoder.load(str(bert_path), pooling="mean")
    space = WordEmbeddingSpace.from_encoder(encoder, toy_dictionary.headwords)
    matrix = space.matrix.clone()
    _train(encoder, space, toy_dictionary, tmp_path, epochs=3)
    assert torch.equal(space.matrix.cpu(), matrix)
    with torch.no_grad():
        encoder.backbone.get_input_embeddings().weight.add_(1.0)
    assert torch.equal(space.matrix.cpu(), matrix)  # a frozen copy, not a view of the encoder's table
    assert not any(p.requires_grad for p in space.parameters())


def test_missing_head_falls_back_with_warning(bert_path, toy_dictionary, tmp_path, caplog) -> None:
    from dictembed.errors import MissingHeadError
    from dictembed.recipes.defsent import word_space

    headless = tmp_path / "headless"
    Encoder.load(str(bert_path)).save(headless)  # a BertModel folder: no MLM head
    encoder = Encoder.load(str(headless))
    with pytest.raises(MissingHeadError, match="no pre-trained MLM head"):
        MLMHeadSpace.from_pretrained(str(headless), toy_dictionary.headwords, encoder.tokenizer)
    with caplog.at_level(logging.WARNING):
        space = word_space(
            RunConfig.create("defsent", model=str(headless), space="auto"), encoder, toy_dictionary.headwords
        )
    assert isinstance(space, WordEmbeddingSpace) and "FALLBACK" in caplog.text
    with pytest.raises(MissingHeadError):
        word_space(
            RunConfig.create("defsent", model=str(headless), space="mlm-head"), encoder, toy_dictionary.headwords
        )


@pytest.mark.parametrize("group", [False, True], ids=["shuffled", "grouped-by-length"])
def test_kill_and_resume_gives_identical_weights(bert_path, toy_dictionary, tmp_path, group) -> None:
    def trainer_for(encoder, space, run_dir):
        examples = entry_examples(toy_dictionary, space)
        settings = TrainSettings(lr=1e-3, batch_size=4, epochs=2, seed=7, checkpoint_every=3, group_by_length=group)
        lengths = token_lengths(encoder, [text for text, _ in examples])
        return Trainer(
            EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, run_dir, lengths=lengths
        )

    def run(run_dir, stop_at=None):
        torch.manual_seed(123)  # dropout is on: resume must restore the RNG state too
        encoder = Encoder.load(str(bert_path), pooling="mean")
        space = WordEmbeddingSpace.from_encoder(Encoder.load(str(bert_path)), toy_dictionary.headwords)
        trainer = trainer_for(encoder, space, run_dir)
        trainer.fit(max_steps=stop_at)
        return trainer, encoder

    _, straight = run(tmp_path / "straight")
    killed, _ = run(tmp_path / "killed", stop_at=5)
    assert killed.progress.step == 5 and (tmp_path / "killed" / "checkpoint").exists()
    resumed_trainer = None

    def resume():
        nonlocal resumed_trainer
        torch.manual_seed(999)  # a different process state: everything must come from the checkpoint
        encoder = Encoder.load(str(bert_path), pooling="mean")
        space = WordEmbeddingSpace.from_encoder(Encoder.load(str(bert_path)), toy_dictionary.headwords)
        resumed_trainer = trainer_for(encoder, space, tmp_path / "killed")
        resumed_trainer.fit(resume=True)
        return encoder

    resumed = resume()
    assert resumed_trainer.progress.step == resumed_trainer.total_steps == 8
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_ica_shape_and_scale() -> None:
    rng = np.random.default_rng(0)
    sources = rng.laplace(size=(400, 6))
    out = ica_transform(sources @ rng.normal(size=(6, 6)))
    assert out.shape == (400, 6)
    np.testing.assert_allclose(out.std(axis=0), 100.0, rtol=0.02)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1.0)
    with pytest.raises(DictEmbedError, match="ICA needs"):
        ica_transform(rng.normal(size=(4, 6)))


def test_definition_space_averages_definitions(bert_path, toy_dictionary, tmp_path) -> None:
    encoder = Encoder.load(str(bert_path), pooling="max")
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    encoder.pooling = "mean"
    expected = encoder.encode(toy_dictionary["dog"].definitions).mean(0)
    np.testing.assert_allclose(space.matrix[space.index["dog"]].numpy(), expected, atol=1e-5)
    assert encoder.pooling == "mean" and len(list(tmp_path.glob("definitions-*.safetensors"))) == 1
    cached = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    assert torch.equal(cached.matrix, space.matrix)


def test_ica_space_transforms_the_cached_plain_space(bert_path, toy_dictionary, tmp_path, monkeypatch) -> None:
    import dictembed.entry_vectors as entry_vectors

    encoder = Encoder.load(str(bert_path), pooling="mean")
    plain = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    monkeypatch.setattr(entry_vectors, "ica_transform", lambda m: m * 2.0)  # the plain space is not re-encoded
    monkeypatch.setattr(Encoder, "encode", lambda *a, **k: pytest.fail("re-encoded the definitions"))
    doubled = DefinitionSpace.build(encoder, toy_dictionary, "amp", ica=True, cache_dir=tmp_path)
    torch.testing.assert_close(doubled.matrix, plain.matrix * 2.0)
    assert len(list(tmp_path.glob("definitions-*.safetensors"))) == 2
    assert (plain.kind, doubled.kind) == ("definitions-amp", "definitions-amp-ica")
    doubled.save(tmp_path / "model")  # the kind travels with the saved space
    assert load_entry_space(tmp_path / "model").kind == "definitions-amp-ica"


def test_cosine_entry_logits_match_hand_computed_values(tmp_path) -> None:
    space = DefinitionSpace(["a", "b"], torch.tensor([[3.0, 0.0], [1.0, 1.0]]), similarity="cosine", temperature=0.5)
    h = torch.tensor([[0.0, 2.0]])
    torch.testing.assert_close(space(h), torch.tensor([[0.0, (1 / 2**0.5) / 0.5]]))
    torch.testing.assert_close(DefinitionSpace(["a", "b"], space.matrix)(h), torch.tensor([[0.0, 2.0]]))
    space.save(tmp_path)
    reloaded = load_entry_space(tmp_path)
    assert (reloaded.similarity, reloaded.temperature) == ("cosine", 0.5)
    torch.testing.assert_close(reloaded(h), space(h))
    with pytest.raises(DictEmbedError, match="unknown entry similarity"):
        DefinitionSpace(["a"], torch.zeros(1, 2), similarity="l2")


def test_a_saved_configuration_with_removed_options_still_loads(caplog) -> None:
    """`targets` and `train_entries` (DefSent+ options of former versions) are dropped when a record is read,
    each said in a log line: a warning when the model was trained with a value other than the paper's."""
    saved = RunConfig.create("defsent-plus", entries="amp", similarity="cosine").to_dict()
    saved["options"] |= {"targets": "leave-one-out", "train_entries": "all"}
    with caplog.at_level(logging.INFO, logger="dictembed.recipes.config"):
        config = RunConfig.from_dict(saved)
    assert (config.options.entries, config.options.similarity) == ("amp", "cosine")
    assert "targets" not in config.to_dict()["options"] and "train_entries" not in config.to_dict()["options"]
    said = {r.levelname: r.getMessage() for r in caplog.records}
    assert "trained with targets='leave-one-out', an option since removed" in said["WARNING"]
    assert "train_entries='all' of a former version changed nothing; dropped" in said["INFO"]
    with pytest.raises(DictEmbedError, match="does not take targets"):  # no longer an option to train with
        RunConfig.create("defsent-plus", targets="entry")


def _toy_tsv(toy_dictionary, path):
    lines = ["word\tdefinition"] + [f"{w}\t{d}" for w, d in toy_dictionary.pairs()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_pst_step_two_trains_a_fresh_copy_of_the_original(bert_path, toy_dictionary, tmp_path, monkeypatch):
    import dictembed.recipes.defsent as defsent
    import dictembed.recipes.defsent_plus as plus

    made, built = [], []
    original = plus.base_encoder
    real_build = DefinitionSpace.build.__func__

    def spy_encoder(config):
        encoder = original(config)
        made.append({k: v.clone() for k, v in encoder.backbone.state_dict().items()})
        return encoder

    def spy_build(cls, encoder, *args, **kwargs):
        built.append({k: v.clone() for k, v in encoder.backbone.state_dict().items()})
        return real_build(cls, encoder, *args, **kwargs)

    monkeypatch.setattr(plus, "base_encoder", spy_encoder)  # the step-1 entry encoder
    monkeypatch.setattr(defsent, "base_encoder", spy_encoder)  # every trainee
    monkeypatch.setattr(DefinitionSpace, "build", classmethod(spy_build))
    config = RunConfig.create(
        "defsent-plus",
        model=str(bert_path),
        pooling="cls",
        pooler="model",
        dictionary=_toy_tsv(toy_dictionary, tmp_path / "toy.tsv"),
        pst_steps=2,
        lrs=[1e-3],
        epochs=2,
        select_on="stsb_dev",
        output=str(tmp_path / "out"),
    )
    out = train(config)
    # The checkpoint is a BertForMaskedLM: its BertModel pooler is newly initialised on each load, so compare the rest.
    pristine = {
        k: v for k, v in Encoder.load(str(bert_path)).backbone.state_dict().items() if not k.startswith("pooler")
    }
    assert len(made) == 3  # the step-1 entry encoder, then one fresh trainee per step
    for weights in made:
        assert all(torch.equal(weights[k], pristine[k]) for k in pristine)
    # Step 2's entry space was built by the trained step-1 encoder, not the original.
    assert all(torch.equal(built[0][k], pristine[k]) for k in pristine)
    assert not all(torch.equal(built[1][k], pristine[k]) for k in pristine)
    saved = json.loads((out / "dictembed.json").read_text())
    assert saved["method"] == "defsent-plus" and saved["pst_step"] == 2 and saved["entry_space"] == "definitions-ac"
    assert saved["config"]["options"]["pooling"] == "cls" and saved["seed"] == 0 and "stsb_dev" in saved["dev"]
    assert saved["entry_encoder"] == saved["selection"]["pst"][0]["path"]  # step 2's space: step 1's best model
    assert [s["step"] for s in saved["selection"]["pst"]] == [1, 2]


def test_saved_model_predicts_the_same_words(bert_path, toy_dictionary, tmp_path) -> None:
    encoder = Encoder.load(str(bert_path), pooling="mean")
    space = MLMHeadSpace.from_pretrained(str(bert_path), toy_dictionary.headwords, encoder.tokenizer)
    _train(encoder, space, toy_dictionary, tmp_path / "run", epochs=3)
    query = "an animal that barks"
    expected = ReverseDictionary(encoder, space).predict(query, top_k=5)
    encoder.save(tmp_path / "model")
    space.save(tmp_path / "model")
    assert ReverseDictionary.load(tmp_path / "model").predict(query, top_k=5) == expected


def test_defsent_recipe_saves_full_configuration(bert_path, toy_dictionary, tmp_path) -> None:
    config = RunConfig.create(
        "defsent",
        model=str(bert_path),
        pooling="max",
        space="mlm-head",
        lrs=[3e-3, 1e-4],
        seeds=[0, 1],
        dictionary=_toy_tsv(toy_dictionary, tmp_path / "toy.tsv"),
        output=str(tmp_path / "out"),
    )
    out = train(config)
    saved = json.loads((out / "dictembed.json").read_text())
    assert saved["method"] == "defsent" and saved["entry_space"] == "mlm-head" and saved["pst_step"] is None
    assert saved["config"]["options"]["pooling"] == "max" and saved["data"] == Path(config.dictionary).name
    assert saved["seed"] in (0, 1) and saved["lr"] == saved["selection"]["best_lr"]
    assert set(saved["selection"]["by_lr"]) == {"0.003", "0.0001"}
    assert isinstance(load_entry_space(out), MLMHeadSpace)


def test_length_grouped_order_is_a_seeded_permutation_of_homogeneous_batches() -> None:
    lengths = np.random.default_rng(1).integers(3, 60, size=1003).tolist()
    order = length_grouped_order(lengths, batch_size=16, seed=5, epoch=0)
    assert sorted(order) == list(range(1003))
    assert order == length_grouped_order(lengths, 16, 5, 0)  # resume replays it
    assert order != length_grouped_order(lengths, 16, 5, 1) != length_grouped_order(lengths, 16, 6, 0)

    def padded(o: list[int]) -> int:  # tokens a dynamically padded batch computes
        return sum(max(lengths[i] for i in o[k : k + 16]) * len(o[k : k + 16]) for k in range(0, len(o), 16))

    shuffled = epoch_order(1003, 5, 0)
    assert padded(order) < 0.75 * padded(shuffled)
    assert padded(order) < 1.1 * sum(lengths)
    assert len(order) % 16 == 11 and set(order[-11:]) <= set(range(1003))  # the one short batch comes last
    # batches are shuffled, not sorted from longest to shortest
    maxima = [max(lengths[i] for i in order[k : k + 16]) for k in range(0, 1003 - 11, 16)]
    assert maxima != sorted(maxima, reverse=True)


def test_group_by_length_needs_the_lengths(bert_path, toy_dictionary, tmp_path) -> None:
    encoder = Encoder.load(str(bert_path), pooling="mean")
    space = WordEmbeddingSpace.from_encoder(encoder, toy_dictionary.headwords)
    examples = entry_examples(toy_dictionary, space)
    settings = TrainSettings(batch_size=4, group_by_length=True)
    with pytest.raises(DictEmbedError, match="one length per training example"):
        Trainer(EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, tmp_path)


def test_optimizer_is_fused_adamw_with_the_same_update() -> None:
    torch.manual_seed(0)
    a = [torch.nn.Parameter(torch.randn(50, 8)) for _ in range(2)]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    fused, plain = make_optimizer(a, 1e-2, 0.01), torch.optim.AdamW(b, lr=1e-2, weight_decay=0.01)
    assert fused.defaults["fused"] is True
    for _ in range(3):
        grads = [torch.randn(50, 8) for _ in a]
        for p, q, g in zip(a, b, grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        fused.step()
        plain.step()
    for p, q in zip(a, b, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6)
