"""The `dictembed` command line, end to end on tiny models and real shared data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dictembed.cli import main


def _last_json(capsys) -> dict | list:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_encode_writes_one_row_per_line(bert_path, tmp_path, capsys) -> None:
    text = tmp_path / "in.txt"
    text.write_text("a dog barks\n\nthe river flows to the sea\n")
    assert main(["encode", "--model", str(bert_path), "--input", str(text), "--output", str(tmp_path / "x.npy")]) == 0
    assert np.load(tmp_path / "x.npy").shape == (3, 32)


def test_evaluate_sts_json_has_the_seven_tasks(bert_path, capsys) -> None:
    assert main(["evaluate", "sts", "--model", str(bert_path), "--pooling", "mean", "--json"]) == 0
    result = _last_json(capsys)
    keys = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR"]
    assert list(result) == keys + ["avg"]
    assert result["avg"] == pytest.approx(np.mean([result[k] for k in keys]))


def test_unknown_model_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(["evaluate", "sts", "--model", str(tmp_path / "missing-model"), "--json"]) == 2
    assert "missing-model" in capsys.readouterr().err


def test_train_predict_plot_and_reverse_dictionary(bert_path, toy_dictionary, tmp_path, capsys) -> None:
    tsv = tmp_path / "toy.tsv"
    tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in toy_dictionary.pairs()))
    out = tmp_path / "plus"
    args = [
        "train",
        "--method",
        "defsent-plus",
        "--model",
        str(bert_path),
        "--dictionary",
        str(tsv),
        "--pooling",
        "mean",
        "--entries",
        "amp",
        "--pst-steps",
        "2",
        "--lr-grid",
        "1e-3",
        "--similarity",
        "cosine",
        "--temperature",
        "0.1",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    space = json.loads((out / "entry_space" / "space.json").read_text())
    assert (space["similarity"], space["temperature"]) == ("cosine", 0.1)
    assert json.loads((out / "dictembed.json").read_text())["config"]["similarity"] == "cosine"
    assert main(["predict", "--model", str(out), "a pet that barks", "--top-k", "3", "--json"]) == 0
    ranked = _last_json(capsys)
    assert len(ranked) == 3 and all(r["word"] in toy_dictionary for r in ranked)
    assert main(["evaluate", "reverse-dictionary", "--model", str(out), "--split", "train", "--json"]) == 0
    result = _last_json(capsys)
    assert set(result) >= {"mrr", "top1", "top3", "top10"} and 0 < result["mrr"] <= 1
    assert main(["plot", "entries", "--model", str(out), "--output", str(tmp_path / "fig")]) == 0
    figures = sorted(p.name for p in (tmp_path / "fig").iterdir())
    assert figures == ["entries_pca_whitened.png", "entries_svd.png", "isotropy.json", "isotropy.png"]
    assert set(json.loads((tmp_path / "fig" / "isotropy.json").read_text())) == {"plus step 1", "plus step 2"}


def test_data_stats_table(capsys, bert_path) -> None:
    from dictembed.paths import data_dir

    oxford = "oxford"
    assert data_dir().exists()
    assert main(["data", "stats", "--dictionary", oxford, "--model", str(bert_path)]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "dev" in out and "test" in out
