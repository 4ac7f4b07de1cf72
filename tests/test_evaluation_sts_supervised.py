"""Supervised STS-B fine-tuning: data reading, seeded subsampling, model loading and a tiny training run."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from dictembed.evaluation._common import mean_sd

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dictembed.errors import DataFormatError, DictEmbedError, ModelLoadError  # noqa: E402
from dictembed.evaluation import sts_supervised as sup  # noqa: E402
from dictembed.paths import default_model  # noqa: E402

STSB_ROWS = {"train": 5749, "dev": 1500, "test": 1379}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer BERT (hidden 32, no MLM head) with the uncased BERT vocabulary."""
    from conftest import tiny_bert as build

    return build(tmp_path_factory.mktemp("tiny-bert"), head=False)


def fake_data_dir(tmp_path: Path, text: str, split: str = "train") -> Path:
    """A data folder holding only STS-B `split` with `text`."""
    folder = tmp_path / "sts" / "STS" / "STSBenchmark"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"sts-{split}.csv").write_text(text, encoding="utf-8")
    return tmp_path


ROW = "main-captions\tMSRvid\t2012test\t0001\t{score}\ta plane is taking off .\tan air plane is taking off .\n"


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_load_stsb_pairs_real_files(split: str) -> None:
    pairs = sup.load_stsb_pairs(split)
    assert len(pairs) == len(pairs.sentences1) == len(pairs.sentences2) == STSB_ROWS[split]
    assert min(pairs.scores) == 0.0 and max(pairs.scores) == 1.0


def test_load_stsb_pairs_first_rows_and_limit() -> None:
    pairs = sup.load_stsb_pairs("train", limit=3)
    assert len(pairs) == 3
    assert pairs.sentences1[0] == "a plane is taking off ."
    assert pairs.sentences2[0] == "an air plane is taking off ."
    assert pairs.scores[:2] == [1.0, pytest.approx(3.8 / 5)]
    with pytest.raises(DictEmbedError, match="limit"):
        sup.load_stsb_pairs("train", limit=0)


def test_load_stsb_pairs_ignores_extra_columns(tmp_path: Path) -> None:
    row = ROW.format(score="2.5").rstrip("\n") + "\tsource\tlicence\n"
    root = fake_data_dir(tmp_path, row + ROW.format(score="5.0"), split="dev")
    pairs = sup.load_stsb_pairs("dev", data_dir=root)
    assert pairs.scores == [0.5, 1.0] and pairs.sentences2[0] == "an air plane is taking off ."


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("main-captions\tMSRvid\t2012test\t0001\t5.0\tonly one sentence\n", "7 tab-separated columns"),
        ("\n", "7 tab-separated columns"),
        (ROW.format(score="high"), "not a number"),
        (ROW.format(score="7.5"), "outside 0-5"),
        (ROW.format(score="-1"), "outside 0-5"),
        (ROW.format(score="nan"), "not a number"),  # NaN labels trained to NaN weights, without a word
    ],
)
def test_load_stsb_pairs_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    root = fake_data_dir(tmp_path, ROW.format(score="1.0") + bad_line + ROW.format(score="2.0"))
    with pytest.raises(DataFormatError, match=message) as info:
        sup.load_stsb_pairs("train", data_dir=root)
    assert info.value.line == 2 and "sts-train.csv:2" in str(info.value)


def test_load_stsb_pairs_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="sts-test.csv"):
        sup.load_stsb_pairs("test", data_dir=tmp_path)
    with pytest.raises(DataFormatError, match=r"sts-train\.csv: 0 sentence pair\(s\)"):
        sup.load_stsb_pairs("train", data_dir=fake_data_dir(tmp_path, ""))
    with pytest.raises(DictEmbedError, match="unknown STS-B split"):
        sup.load_stsb_pairs("validation")


@pytest.mark.parametrize(("ratio", "size"), [(1.0, 5749), (0.5, 2875), (0.2, 1150), (0.0001, 1)])
def test_subsample_sizes(ratio: float, size: int) -> None:
    train = sup.load_stsb_pairs("train")
    assert len(sup.subsample(train, ratio, seed=0)) == size


def test_subsample_is_seeded_and_a_subset_in_file_order() -> None:
    train = sup.load_stsb_pairs("train", limit=100)
    keyed = {(a, b): i for i, (a, b) in enumerate(zip(train.sentences1, train.sentences2, strict=True))}
    first, again, other = (sup.subsample(train, 0.3, seed) for seed in (1, 1, 2))
    assert len(first) == 30
    assert first == again and first != other
    rows = [keyed[pair] for pair in zip(first.sentences1, first.sentences2, strict=True)]
    assert rows == sorted(set(rows))
    assert first.scores == [train.scores[i] for i in rows]
    with pytest.raises(DictEmbedError, match="ratio"):
        sup.subsample(train, 1.5, seed=0)


def test_summarise_seeds_by_hand() -> None:
    # mean (80 + 82 + 87) / 3 = 83; deviations -3, -1, 4; sample variance (9 + 1 + 16) / 2 = 13
    mean, sd = mean_sd([80.0, 82.0, 87.0])
    assert mean == pytest.approx(83.0) and sd == pytest.approx(math.sqrt(13.0))
    mean, sd = mean_sd([71.5])
    assert mean == 71.5 and sd is None
    with pytest.raises(DictEmbedError):
        mean_sd([])


def test_finetune_stsb_seeds_aggregates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = {0: (80.0, 78.0), 1: (84.0, 79.0), 2: (82.0, 83.0)}  # seed -> (test, dev)
    calls = []

    def fake_finetune(model: str, ratio: float, seed: int, output_dir: Path | None, **kw: object) -> dict:
        calls.append((model, ratio, seed, output_dir, kw))
        test, dev = fake[seed]
        return {"test_spearman": test, "dev_spearman": dev, "wall_seconds": 10.0}

    monkeypatch.setattr(sup, "finetune_stsb", fake_finetune)
    result = sup.finetune_stsb_seeds("m", 0.5, [0, 1, 2], epochs=1, output_dir=tmp_path)
    assert [c[2] for c in calls] == [0, 1, 2]
    assert calls[1] == ("m", 0.5, 1, tmp_path / "seed1", {"epochs": 1})
    assert result["mean"] == pytest.approx(82.0) and result["sd"] == pytest.approx(2.0)
    assert result["dev_mean"] == pytest.approx(80.0) and result["dev_sd"] == pytest.approx(np.sqrt(7.0))
    assert result["wall_seconds"] == 30.0 and len(result["runs"]) == 3


def test_load_bi_encoder_errors(tiny_bert: Path) -> None:
    with pytest.raises(ModelLoadError, match="no-such-org/no-such-model"):
        sup.load_bi_encoder("no-such-org/no-such-model")
    with pytest.raises(DictEmbedError, match="unknown pooling 'attention'"):
        sup.load_bi_encoder(tiny_bert, pooling="attention")
    with pytest.raises(ModelLoadError, match="no config.json"):
        sup.load_bi_encoder(tiny_bert.parent)


def test_load_bi_encoder_plain_and_sentence_transformers(tiny_bert: Path) -> None:
    plain = sup.load_bi_encoder(tiny_bert, pooling="cls")
    assert plain[1].pooling_mode == "cls" and plain.get_embedding_dimension() == 32
    minilm = sup.load_bi_encoder(default_model(), pooling="max")  # its own (mean) pooling wins
    assert minilm[1].pooling_mode == "mean" and minilm.get_embedding_dimension() == 384


def test_finetune_refuses_a_gpu_the_trainer_would_not_use(tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hugging Face Trainer of a single process trains on cuda:0 whatever the device asked: cuda:1 is refused
    before anything loads, with the way to get it; cuda:0 (or cuda) is not refused."""
    import torch

    asked: list[object] = []

    def device_of(device: object) -> torch.device:
        asked.append(device)
        return torch.device(str(device))

    monkeypatch.setattr(sup, "resolve_device", device_of)
    monkeypatch.setattr(sup, "load_stsb_pairs", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("data loaded")))
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(DictEmbedError, match=r"'cuda:1'.*CUDA_VISIBLE_DEVICES=1 dictembed finetune"):
        sup.finetune_stsb(tiny_bert, device="cuda:1")
    for device in ("cuda:0", "cuda"):
        with pytest.raises(RuntimeError, match="data loaded"):  # past the check
            sup.finetune_stsb(tiny_bert, device=device, precision="fp32")
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launched process: its rank's GPU is the Trainer's too
    with pytest.raises(RuntimeError, match="data loaded"):
        sup.finetune_stsb(tiny_bert, device="cuda:1", precision="fp32")
    assert asked == ["cuda:1", "cuda:0", "cuda", "cuda:1"]


def test_finetune_tiny_bert_learns(tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    monkeypatch.chdir(scratch)
    out = tmp_path / "out"
    result = sup.finetune_stsb(tiny_bert, ratio=1.0, seed=0, epochs=2, lr=1e-3, limit=200, output_dir=out)

    assert list(scratch.iterdir()) == []  # the temporary trainer folder is gone, nothing left in the cwd
    assert result["n_train"] == 200 and result["steps"] == 2 * 13  # ceil(200 / 16) batches per epoch
    losses = [loss for _, loss in result["loss_history"]]
    assert len(losses) >= 8
    quarter = len(losses) // 4
    assert np.mean(losses[-quarter:]) < 0.8 * np.mean(losses[:quarter])  # measured: 0.20 -> 0.10

    before, trained = sup.load_bi_encoder(tiny_bert), sup.load_bi_encoder(out)
    old, new = before[0].model.embeddings, trained[0].model.embeddings
    assert not torch.equal(old.word_embeddings.weight, new.word_embeddings.weight)
    dev = sup.load_stsb_pairs("dev", limit=200)
    assert sup.evaluate_pairs(trained, dev) == pytest.approx(result["dev_spearman"], abs=1e-4)
    assert -100 <= result["test_spearman"] <= 100
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["dev_spearman"] == pytest.approx(result["dev_spearman"])
    assert saved["settings"] == sup.seed_settings(tiny_bert, 1.0, 0, 2, 16, 1e-3, "mean", 200, "fp32")


def test_finetune_ratio_uses_seeded_subset(
    tiny_bert: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from transformers.utils import logging as hf_logging

    from dictembed.progress import bars_turned_off

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # as the command line does
    try:
        with bars_turned_off(), caplog.at_level(logging.INFO):  # `finetune stsb -q`, or no terminal
            result = sup.finetune_stsb(tiny_bert, ratio=0.25, seed=3, epochs=1, batch_size=8, limit=64)
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    assert result["n_train"] == 16 and result["steps"] == 2
    out, err = capfd.readouterr()  # no bar, and no log dict printed on stdout in the bar's place
    assert out == "" and "it/s" not in err and "s/it" not in err and "%|" not in err, (out, err[-500:])
    assert "finetune: step 2/2, loss" in caplog.text  # the losses as log lines (-q: below its warning level)
    assert result["ratio"] == 0.25 and result["seed"] == 3


def test_resume_reads_back_the_seeds_finished_with_the_same_settings(monkeypatch, tmp_path: Path) -> None:
    """The real `finetune_stsb` with its training and scoring faked: a seed that trains scores 80 + seed."""
    calls: list[int] = []

    class Model:
        def save(self, path: str) -> None:
            (Path(path) / "model.safetensors").write_bytes(b"weights")

    pairs = sup.StsPairs(["a"], ["b"], [0.5])
    monkeypatch.setattr(sup, "load_stsb_pairs", lambda split, data_dir=None, limit=None: pairs)
    monkeypatch.setattr(sup, "load_bi_encoder", lambda *args: Model())
    monkeypatch.setattr(sup, "_training_args", lambda scratch, epochs, batch_size, lr, seed, device, precision: seed)
    monkeypatch.setattr(sup, "_train", lambda model, train, seed: (calls.append(seed), ([], 0))[1])
    monkeypatch.setattr(sup, "evaluate_pairs", lambda model, p, name: 80.0 + calls[-1] if name == "sts-test" else 70.0)
    settings = sup.seed_settings("m", 0.5, 0, 1, 16, 2e-5, "mean", None, "fp32")
    finished = {"settings": settings, "test_spearman": 90.0, "dev_spearman": 71.0, "wall_seconds": 5.0}
    (tmp_path / "seed0").mkdir()
    Model().save(str(tmp_path / "seed0"))  # a finished seed holds its model beside its results
    (tmp_path / "seed0" / sup.RESULTS).write_text(json.dumps(finished))
    kw = {"epochs": 1, "output_dir": tmp_path, "device": "cpu", "precision": "fp32"}
    result = sup.finetune_stsb_seeds("m", 0.5, [0, 1], resume=True, **kw)
    assert calls == [1] and [r["test_spearman"] for r in result["runs"]] == [90.0, 81.0]
    with pytest.raises(DictEmbedError, match=r"seed0 already holds a model; pass overwrite=True"):
        sup.finetune_stsb_seeds("m", 0.5, [0, 1], **kw)  # no resume: the models there are replaced only with overwrite
    rerun = sup.finetune_stsb_seeds("m", 0.5, [0, 1], overwrite=True, **kw)
    assert rerun["runs"][0]["test_spearman"] == 80.0  # no resume: trained
    calls.clear()
    with pytest.raises(DictEmbedError, match=r"seed0 holds a seed trained with other settings \(epochs\)"):
        sup.finetune_stsb_seeds("m", 0.5, [0], resume=True, **(kw | {"epochs": 2}))
    sup.finetune_stsb_seeds("m", 0.5, [0], resume=True, overwrite=True, **(kw | {"epochs": 2}))
    assert calls == [0]  # --overwrite: trained again
