"""The learned MLM head: it learns over a frozen encoder, and the folder it is written into is a masked-LM
checkpoint that DefSent and lexical substitution use as such, while it still encodes as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import TOY_WORDS, cli_refuses, cli_succeeds, tiny_bert

from dictembed.encoder import Encoder
from dictembed.learned_head import HeadSettings, learn_head, write_masked_lm
from dictembed.loading import load_masked_lm_info
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.saved_entry_space import load_entry_space

TEXTS = [d for defs in TOY_WORDS.values() for d in defs]
SENTENCES = ["a dog barks at the cat", "rain falls from the clouds"]
FAST = HeadSettings(lr=0.1, batch_size=4, epochs=8)


@pytest.fixture(scope="module")
def headless(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random BERT saved by dictembed without an MLM head (a sentence-transformers folder)."""
    plain = tiny_bert(tmp_path_factory.mktemp("headless-plain"), head=False, dropout=0.0)
    return Encoder.load(str(plain), device="cpu").save(tmp_path_factory.mktemp("headless") / "m")


@pytest.fixture(scope="module")
def learned(headless: Path, tmp_path_factory: pytest.TempPathFactory):
    """(the trained masked-LM model, its summary, the folder written with its head)."""
    root = tmp_path_factory.mktemp("learned")
    mlm, summary = learn_head(str(headless), TEXTS, root / "run", FAST, heldout=TEXTS)
    return mlm, summary, write_masked_lm(str(headless), mlm, root / "with-head")


def test_the_head_learns_over_a_frozen_encoder(headless: Path, learned) -> None:
    mlm, summary, _ = learned
    assert summary["steps"] == 32 and summary["after"]["mlm_loss"] < summary["before"]["mlm_loss"] - 0.5
    original = Encoder.load(str(headless), device="cpu").backbone.state_dict()
    trained = mlm.base_model.state_dict()
    assert set(trained) <= set(original)
    assert all(torch.equal(trained[k], original[k]) for k in trained)


def test_the_written_folder_is_a_masked_lm_that_encodes_as_before(headless: Path, learned) -> None:
    mlm, _, folder = learned
    reloaded, missing = load_masked_lm_info(str(folder))
    assert missing == [] and json.loads((folder / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    learned_head = {k: v for k, v in mlm.state_dict().items() if k.startswith("cls.")}
    assert all(torch.equal(reloaded.state_dict()[k], v) for k, v in learned_head.items())
    before = Encoder.load(str(headless), device="cpu").encode(SENTENCES)
    after = Encoder.load(str(folder), device="cpu")
    assert (after.encode(SENTENCES) == before).all()
    backbone = Encoder.load(str(headless), device="cpu").backbone.state_dict()
    assert all(torch.equal(after.backbone.state_dict()[k], v) for k, v in backbone.items())  # the pooler too
    space = MLMHeadSpace.from_pretrained(str(folder), ["dog", "cat", "car"], after.tokenizer)
    assert space.words == ["dog", "cat", "car"]


def test_defsent_uses_the_learned_head(learned, toy_tsv: Path, tmp_path: Path, capsys, restore_log_level) -> None:
    folder = learned[2]
    out = tmp_path / "defsent"
    argv = ["train", "--method", "defsent", "--model", str(folder), "--dictionary", str(toy_tsv)]
    _, err = cli_succeeds(capsys, [*argv, "--space", "mlm-head", "--lr-grid", "1e-3", "--output", str(out)])
    assert load_entry_space(out).kind == "mlm-head" and "FALLBACK" not in err


def test_lexical_substitution_scores_with_the_learned_head(learned) -> None:
    from dictembed.evaluation.lexsub import SubstituteScorer

    assert SubstituteScorer.from_pretrained(str(learned[2]), device="cpu", scoring="head").use_mlm_head


def test_the_command_learns_and_reports(headless: Path, toy_tsv: Path, tmp_path: Path, capsys, restore_log_level):
    out = tmp_path / "head"
    argv = ["head", "learn", "--model", str(headless), "--dictionary", str(toy_tsv), "--output", str(out)]
    stdout, _ = cli_succeeds(capsys, [*argv, "--lr", "0.1", "--batch-size", "4", "--epochs", "8", "--json"])
    report = json.loads(stdout)
    assert report["architecture"] == "BertForMaskedLM" and report["train_texts"] > 0
    assert report["after"]["mlm_loss"] < report["before"]["mlm_loss"]
    assert load_masked_lm_info(str(out))[1] == []
    cli_refuses(capsys, argv, str(out), "--overwrite")
    (out / "model.safetensors").write_bytes(b"stale")  # a model folder: --overwrite replaces it
    cli_succeeds(capsys, [*argv, "--overwrite", "--epochs", "1"])
    assert load_masked_lm_info(str(out))[1] == []
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    theirs = ["head", "learn", "--model", str(headless), "--dictionary", str(toy_tsv), "--output", str(mine)]
    cli_refuses(capsys, [*theirs, "--overwrite"], f"--output {mine} is a non-empty folder that holds no model")
    assert [p.name for p in mine.iterdir()] == ["thesis.txt"] and (mine / "thesis.txt").read_text() == "years of work"


def test_bad_models_are_one_line_errors(toy_tsv: Path, tmp_path: Path, capsys, restore_log_level) -> None:
    from transformers import GPT2Config, GPT2Model

    empty = tmp_path / "empty"
    empty.mkdir()
    gpt2 = tmp_path / "gpt2"
    GPT2Model(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=50)).save_pretrained(gpt2)
    for model, named in [(empty, str(empty)), (gpt2, "'gpt2'")]:
        argv = ["head", "learn", "--model", str(model), "--dictionary", str(toy_tsv), "--output", str(tmp_path / "o")]
        cli_refuses(capsys, argv, named)
    assert not (tmp_path / "o").exists()


def test_an_interrupted_head_run_resumes_to_the_same_head(headless: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from dictembed.learned_head import HeadObjective, text_collate
    from dictembed.objectives.mlm import load_masked_lm
    from dictembed.training import Trainer, TrainSettings

    def trainer(run: Path) -> Trainer:
        tokenizer = AutoTokenizer.from_pretrained(str(headless))
        objective = HeadObjective(load_masked_lm(str(headless)), tokenizer)
        collate = text_collate(tokenizer, 32)
        settings = TrainSettings(lr=0.1, batch_size=4, epochs=2, checkpoint_every=3)
        return Trainer(objective, TEXTS, collate, settings, run, identity={"test": 1}, device="cpu")

    whole = trainer(tmp_path / "whole")
    whole.fit()
    cut = trainer(tmp_path / "cut")
    cut.fit(max_steps=3)
    resumed = trainer(tmp_path / "cut")
    resumed.fit(resume=True)
    heads = [dict(t.unwrapped.head.state_dict()) for t in (whole, resumed)]
    assert all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])


def test_a_head_run_that_fails_while_writing_resumes_at_its_end(
    headless: Path, toy_tsv: Path, tmp_path: Path, capsys, monkeypatch, restore_log_level
) -> None:
    import dictembed.learned_head as learned_head
    from dictembed.training import Trainer

    out = tmp_path / "head"
    argv = ["head", "learn", "--model", str(headless), "--dictionary", str(toy_tsv), "--output", str(out)]
    argv += ["--lr", "0.1", "--batch-size", "4", "--epochs", "2"]
    writing = learned_head.write_masked_lm

    def fail_once(*args, **kwargs):
        monkeypatch.setattr(learned_head, "write_masked_lm", writing)
        raise OSError("No space left on device")

    monkeypatch.setattr(learned_head, "write_masked_lm", fail_once)
    cli_refuses(capsys, argv, "No space left")
    checkpoint = Path(f"{out}-runs") / "head" / "checkpoint"
    assert checkpoint.is_dir()
    steps: list[int] = []
    monkeypatch.setattr(Trainer, "save_checkpoint", lambda self: steps.append(self.progress.step))
    cli_succeeds(capsys, [*argv, "--resume"])
    assert steps == [] and not checkpoint.exists() and load_masked_lm_info(str(out))[1] == []
