"""The `dictembed` command line, end to end on tiny models and real shared data."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from dictembed import __version__
from dictembed.cli import build_parser, main, train_options
from dictembed.recipes import presets

BEST_PLUS = {
    "pooling": "mean",
    "pooler": "none",
    "entries": "amp",
    "similarity": "cosine",
    "lrs": [1e-4],
    "group_by_length": True,
    "descriptions": "everyday",
    "second_dictionary": "gcide",
}
PAPER_PLUS = {
    "pooling": "cls",
    "pooler": "model",
    "entries": "ac",
    "similarity": "dot",
    "lrs": [2e-5],
    "group_by_length": False,
}


def _flat(config: dict) -> dict:
    """A saved config's settings by name: the shared ones and the method's own ("options")."""
    return {**config, **config["options"]}


@pytest.fixture(autouse=True)
def restore_log_level():
    """`main` sets the root logger's level (-v/-q); keep it from leaking into later tests."""
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


def _json_stdout(capsys) -> tuple[dict | list, str]:
    """stdout parsed as exactly one JSON document, and stderr."""
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dictembed: error: "), captured.err
    return lines[0]


def _write_tsv(path: Path, words: dict[str, list[str]]) -> Path:
    path.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, defs in words.items() for d in defs))
    return path


def _train(bert_path: Path, toy_tsv: Path, output: Path, *flags: str) -> list[str]:
    return ["train", "--model", str(bert_path), "--dictionary", str(toy_tsv), "--output", str(output), *flags]


@pytest.fixture(scope="module")
def plus_model(bert_path, toy_tsv, tmp_path_factory) -> tuple[Path, str]:
    """DefSent+ trained with no method or preset flags (so: defsent-plus, preset best), two PST steps; the
    folder and what `train --json` printed on stdout."""
    out = tmp_path_factory.mktemp("trained") / "plus"
    stdout = io.StringIO()
    flags = ["--pst-steps", "2", "--lr-grid", "1e-3", "--entry-temperature", "0.1", "--json"]
    with contextlib.redirect_stdout(stdout):
        assert main(_train(bert_path, toy_tsv, out, *flags)) == 0
    return out, stdout.getvalue()


# ---------------------------------------------------------------------------- encode
def test_encode_writes_one_row_per_line(bert_path, tmp_path, capsys) -> None:
    text = tmp_path / "in.txt"
    text.write_text("a dog barks\n\nthe river flows to the sea\n")
    assert main(["encode", "--model", str(bert_path), "--input", str(text), "--output", str(tmp_path / "x.npy")]) == 0
    assert np.load(tmp_path / "x.npy").shape == (3, 32)
    assert "wrote 3 x 32" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["v.npz", "v.npy"])
def test_encode_writes_exactly_the_output_file(name, bert_path, tmp_path, capsys) -> None:
    (tmp_path / "in.txt").write_text("a dog barks\nthe river flows\n")
    out = tmp_path / "out" / name
    assert main(["encode", "--model", str(bert_path), "--input", str(tmp_path / "in.txt"), "--output", str(out)]) == 0
    assert sorted(p.name for p in out.parent.iterdir()) == [name]
    loaded = np.load(out)
    vectors = loaded["embeddings"] if name.endswith(".npz") else loaded
    assert vectors.shape == (2, 32) and vectors.dtype == np.float32


def test_encode_rejects_other_suffixes(bert_path, tmp_path, capsys) -> None:
    (tmp_path / "in.txt").write_text("a dog barks\n")
    args = ["encode", "--model", str(bert_path), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v")]
    assert main(args) == 2
    assert ".npy or .npz" in capsys.readouterr().err
    assert not list(tmp_path.glob("v*"))


def test_encode_splits_on_newline_only(bert_path, tmp_path, capsys) -> None:
    lines = ["a dog\u2028barks", "page\x0cbreak", "next\x85line", "", "plain"]
    (tmp_path / "in.txt").write_bytes("\r\n".join(lines).encode("utf-8") + b"\r\n")
    out = tmp_path / "v.npy"
    args = ["encode", "--model", str(bert_path), "--input", str(tmp_path / "in.txt"), "--output", str(out), "--json"]
    assert main(args) == 0
    report, _ = _json_stdout(capsys)
    assert report["rows"] == len(lines) == np.load(out).shape[0]
    assert report["output"] == str(out) and report["dim"] == 32


def test_encode_quantize_and_normalize(bert_path, tmp_path, capsys) -> None:
    (tmp_path / "in.txt").write_text("a dog barks\nthe river flows\nbread\n")
    base = ["encode", "--model", str(bert_path), "--input", str(tmp_path / "in.txt"), "--batch-size", "2"]
    assert main([*base, "--output", str(tmp_path / "n.npy"), "--normalize"]) == 0
    assert np.allclose(np.linalg.norm(np.load(tmp_path / "n.npy"), axis=1), 1.0, atol=1e-5)
    capsys.readouterr()
    assert main([*base, "--output", str(tmp_path / "b.npy"), "--quantize", "ubinary", "--json"]) == 0
    report, _ = _json_stdout(capsys)
    packed = np.load(tmp_path / "b.npy")
    assert packed.shape == (3, 4) and packed.dtype == np.uint8 and report["quantize"] == "ubinary"
    (tmp_path / "one.txt").write_text("a dog barks\n")  # int8 scales to the lines' range: one has none
    one = [
        "encode",
        "--model",
        str(bert_path),
        "--input",
        str(tmp_path / "one.txt"),
        "--output",
        str(tmp_path / "o.npy"),
    ]
    assert main([*one, "--quantize", "int8"]) == 2
    assert "--quantize int8 scales to the range of the lines encoded: give two or more" in capsys.readouterr().err


def test_encode_input_errors_name_the_file(bert_path, tmp_path, capsys) -> None:
    out = str(tmp_path / "v.npy")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    for source in [tmp_path / "missing.txt", tmp_path, tmp_path / "latin1.txt"]:
        assert main(["encode", "--model", str(bert_path), "--input", str(source), "--output", out]) == 1
        assert str(source) in _one_line_error(capsys)


# -------------------------------------------------------------------------- evaluate
def test_evaluate_sts_json_has_the_seven_tasks(bert_path, capsys) -> None:
    assert main(["evaluate", "sts", "--model", str(bert_path), "--pooling", "mean", "--json"]) == 0
    result, err = _json_stdout(capsys)
    keys = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR"]
    assert list(result) == keys + ["avg"]
    assert result["avg"] == pytest.approx(np.mean([result[k] for k in keys]))
    assert "STS (Spearman x 100, all)" in err


def test_evaluate_sts_tasks(bert_path, capsys) -> None:
    assert main(["evaluate", "sts", "--model", str(bert_path), "--tasks", "STS12,STSB", "-q", "--json"]) == 0
    result, _ = _json_stdout(capsys)
    assert list(result) == ["STS12", "STSB", "avg"]
    assert main(["evaluate", "sts", "--model", str(bert_path), "--tasks", "STS12,STS99"]) == 2
    assert "STS99" in capsys.readouterr().err


def test_unknown_model_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(["evaluate", "sts", "--model", str(tmp_path / "missing-model"), "--json"]) == 1
    assert "missing-model" in _one_line_error(capsys)


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "reverse-dictionary", "--model", "{model}"],
        ["plot", "entries", "--model", "{model}", "--output", "{tmp}/fig"],
        ["predict", "--model", "{model}", "a pet"],
    ],
)
def test_plain_model_folder_is_a_one_line_runtime_error(command, bert_path, tmp_path, capsys) -> None:
    argv = [a.format(model=bert_path, tmp=tmp_path) for a in command]
    assert main(argv) == 1
    assert str(bert_path) in _one_line_error(capsys)


def test_missing_extra_is_a_one_line_install_hint(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["plot", "entries", "--model", str(tmp_path), "--output", str(tmp_path / "fig")]) == 1
    assert 'pip install "dictembed[plot]"' in _one_line_error(capsys)


# ----------------------------------------------------------------- train and a trained model
def test_train_defaults_to_defsent_plus_with_the_best_preset(plus_model, caplog) -> None:
    out, stdout = plus_model
    report = json.loads(stdout)
    assert report["output"] == str(out) and report["preset"] == "best"
    assert set(report["dev"]) >= {"mrr", "stsb_dev"}
    config = _flat(report["config"])
    assert config["method"] == "defsent-plus" and config["preset"] == "best"
    assert {k: config[k] for k in BEST_PLUS} == {**BEST_PLUS, "lrs": [1e-3]}  # explicit --lr-grid wins
    assert (config["entry_temperature"], config["pst_steps"]) == (0.1, 2)
    saved = json.loads((out / "dictembed.json").read_text())["config"]
    assert saved == report["config"]
    assert set(presets.preset_settings("defsent-plus", "best")) <= set(_flat(saved))
    space = json.loads((out / "entry_space" / "space.json").read_text())
    assert (space["similarity"], space["temperature"]) == ("cosine", 0.1)


def test_train_preset_paper_and_explicit_override(bert_path, toy_tsv, tmp_path, capsys, caplog) -> None:
    caplog.set_level(logging.INFO, logger="dictembed")
    assert main(_train(bert_path, toy_tsv, tmp_path / "paper", "--preset", "paper", "--json")) == 0
    config = _flat(_json_stdout(capsys)[0]["config"])
    assert {k: config[k] for k in PAPER_PLUS} == PAPER_PLUS and config["preset"] == "paper"
    assert "preset paper: pooling=cls pooler=model descriptions=none " in caplog.text
    assert " entries=ac similarity=dot" in caplog.text

    assert main(_train(bert_path, toy_tsv, tmp_path / "cls", "--pooling", "cls", "--lr-grid", "1e-3")) == 0
    saved = _flat(json.loads((tmp_path / "cls" / "dictembed.json").read_text())["config"])
    assert {k: saved[k] for k in BEST_PLUS} == {**BEST_PLUS, "pooling": "cls", "lrs": [1e-3]}
    assert saved["preset"] == "best"
    assert "preset best: pooling=cls pooler=none descriptions=everyday " in caplog.text
    assert " entries=amp similarity=cosine" in caplog.text
    explicit = [line.split("set explicitly: ")[1] for line in caplog.text.splitlines() if "preset best:" in line]
    assert explicit and set(explicit[-1].rstrip(")").split(", ")) == {"pooling", "lrs", "dictionary"}
    assert "saved " in capsys.readouterr().out


def test_resolve_presets() -> None:
    from dictembed.recipes import gr_bert

    options = train_options()
    assert all(set(presets.preset_settings(m, "paper")) <= set(options) for m in presets.METHODS)
    gr_paper = presets.preset_settings("gr-bert", "paper")
    assert "pooling" not in gr_paper and gr_paper["dictionary"] == gr_bert.GR_DICTIONARY  # gr-bert pools one way
    for method in presets.METHODS:
        assert presets.preset_settings(method, "best") == {
            **presets.preset_settings(method, "paper"),
            **(BEST_PLUS if method == "defsent-plus" else {}),
        }
    settings, changed = presets.resolve("defsent", "best", {"pooling": "cls", "space": None})
    assert (settings["pooling"], settings["space"], changed) == ("cls", "auto", ["pooling"])
    with pytest.raises(ValueError, match="entries"):
        presets.resolve("defsent", "best", {"entries": "amp"})


@pytest.mark.parametrize(
    ("model", "given", "warned"),
    [
        ("intfloat/multilingual-e5-small", {}, True),
        ("multilingual-e5-small", {}, True),
        ("outputs/e5-cwn-plus", {}, True),
        ("intfloat/multilingual-e5-small", {"entry_temperature": 0.05}, False),  # given: the user's choice
        ("intfloat/multilingual-e5-small", {"similarity": "dot"}, False),  # no temperature in dot logits
        ("sentence-transformers/all-mpnet-base-v2", {}, False),
        ("outputs/e50-runs", {}, False),
    ],
)
def test_an_e5_model_at_another_temperature_is_warned_about(model, given, warned, caplog) -> None:
    from dictembed.recipes.resolve import resolve_train_config

    with caplog.at_level(logging.WARNING, logger="dictembed.recipes.resolve"):
        resolved = resolve_train_config(None, "best", {"model": model, **given}, output="out")
    assert ("looks like an e5 model" in caplog.text) == warned
    assert resolved.config.options.entry_temperature == given.get("entry_temperature", 0.05)  # warned, not changed


def test_train_refuses_options_of_another_method(tmp_path, capsys) -> None:
    assert main(["train", "--method", "gr-bert", "--pooling", "cls", "--output", str(tmp_path / "x")]) == 2
    assert "--pooling: not an option of --method gr-bert" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--limit", "0"],
        ["--batch-size", "-1"],
        ["--epochs", "0"],
        ["--pst-steps", "0"],
        ["--lr-grid", ","],
        ["--lr-grid", "1e-4,x"],
        ["--lr-grid", "0"],
        ["--seeds", ""],
        ["--seeds", "1.5"],
        ["--entry-temperature", "0"],
        ["--entry-temperature", "nan"],
    ],
)
def test_train_numeric_options_are_checked_at_parse_time(flags, tmp_path, capsys) -> None:
    assert main(["train", *flags, "--output", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert f"error: argument {flags[0]}" in err and "Traceback" not in err


def test_predict_reverse_dictionary_and_plot(plus_model, tmp_path, capsys) -> None:
    from conftest import TOY_WORDS

    out, _ = plus_model
    assert main(["predict", "--model", str(out), "a pet that barks", "--top-k", "3", "--json"]) == 0
    ranked, _ = _json_stdout(capsys)
    assert len(ranked) == 3 and all(r["word"] in TOY_WORDS for r in ranked)
    assert main(["predict", "--model", str(out), "a pet", "--top-k", "0"]) == 2
    capsys.readouterr()
    assert main(["evaluate", "reverse-dictionary", "--model", str(out), "--split", "train", "--json"]) == 0
    result, _ = _json_stdout(capsys)
    assert set(result) >= {"mrr", "top1", "top3", "top10"} and 0 < result["mrr"] <= 1
    assert main(["plot", "entries", "--model", str(out), "--output", str(tmp_path / "fig"), "--json"]) == 0
    written, _ = _json_stdout(capsys)
    figures = sorted(p.name for p in (tmp_path / "fig").iterdir())
    assert figures == ["entries_pca_whitened.png", "entries_svd.png", "isotropy.json", "isotropy.png"]
    assert sorted(Path(p).name for p in written["written"]) == figures  # the isotropy metrics' JSON too
    assert set(json.loads((tmp_path / "fig" / "isotropy.json").read_text())) == {"plus step 1", "plus step 2"}
    figure_file = tmp_path / "figures.txt"
    figure_file.write_text("")
    assert main(["plot", "entries", "--model", str(out), "--output", str(figure_file)]) == 1  # before anything loads
    assert f"--output {figure_file} is a file; name a folder" in capsys.readouterr().err
    moved = tmp_path / "moved" / "plus"  # the folder without its runs folder beside it
    shutil.copytree(out, moved)
    assert main(["plot", "entries", "--model", str(moved), "--output", str(tmp_path / "fig2")]) == 1
    assert "--final-only plots the folder's own entry space" in capsys.readouterr().err
    assert main(["plot", "entries", "--model", str(moved), "--output", str(tmp_path / "fig2"), "--final-only"]) == 0
    # a user's file at a figure's name, a link out of the folder, the model folder itself, a folder name twice
    (tmp_path / "fig5").mkdir()
    mine = tmp_path / "fig5" / "isotropy.json"
    mine.write_text("USER DATA")
    again = ["plot", "entries", "--model", str(moved), "--final-only"]
    assert main([*again, "--output", str(tmp_path / "fig5")]) == 1
    assert f"--output {mine} already exists; pass --overwrite to replace it" in capsys.readouterr().err
    assert mine.read_text() == "USER DATA"
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    mine.unlink()
    mine.symlink_to(precious)
    assert main([*again, "--output", str(tmp_path / "fig5"), "--overwrite"]) == 0
    assert precious.read_text() == "mine" and not mine.is_symlink() and "plus" in json.loads(mine.read_text())
    assert main([*again, "--output", str(moved / "figures")]) == 1
    assert "is inside the model folder" in capsys.readouterr().err and not (moved / "figures").exists()
    twin = tmp_path / "other" / "plus"
    shutil.copytree(moved, twin)
    assert (
        main(["plot", "entries", "--model", str(moved), str(twin), "--final-only", "--output", str(tmp_path / "f3")])
        == 0
    )
    assert set(json.loads((tmp_path / "f3" / "isotropy.json").read_text())) == {"moved/plus", "other/plus"}
    assert main(["plot", "entries", "--model", str(moved), str(moved), "--output", str(tmp_path / "f4")]) == 1
    assert f"--model {moved} is given twice" in capsys.readouterr().err


def test_json_stdout_of_a_real_process(plus_model) -> None:
    out, _ = plus_model
    command = [
        sys.executable,
        "-m",
        "dictembed.cli",
        "-v",
        "predict",
        "--model",
        str(out),
        "a pet",
        "--top-k",
        "3",
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    tool = subprocess.run([sys.executable, "-m", "json.tool"], input=done.stdout, capture_output=True, text=True)
    assert tool.returncode == 0 and len(json.loads(done.stdout)) == 3
    assert "DEBUG" in done.stderr or "INFO" in done.stderr


# ------------------------------------------------------------------------------ data
def test_data_stats_table(capsys, bert_path) -> None:
    from dictembed.paths import data_dir

    oxford = "oxford"
    assert data_dir().exists()
    assert main(["data", "stats", "--dictionary", oxford, "--model", str(bert_path)]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "dev" in out and "test" in out


def test_data_stats_json(capsys, bert_path, toy_tsv) -> None:
    assert main(["data", "stats", "--dictionary", str(toy_tsv), "--model", str(bert_path), "-v", "--json"]) == 0
    report, err = _json_stdout(capsys)
    assert [row["split"] for row in report["splits"]] == ["train", "dev", "test"]
    assert "train" in err


# ------------------------------------------------------------------- mteb and push wiring
def _fake_module(monkeypatch, name: str, **functions) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(functions)
    monkeypatch.setitem(sys.modules, name, module)


def test_evaluate_mteb_calls_evaluate_mteb(monkeypatch, bert_path, tmp_path, capsys) -> None:
    calls = []

    def evaluate_mteb(encoder, tasks, output_folder=None):
        calls.append((encoder.encode(["a dog"]).shape, tasks, output_folder))
        return {"STSBenchmark": 81.5, "SICK-R": 70.25}

    _fake_module(monkeypatch, "dictembed.evaluation.mteb", evaluate_mteb=evaluate_mteb)
    argv = ["evaluate", "mteb", "--model", str(bert_path), "--tasks", "STSBenchmark,SICK-R"]
    assert main([*argv, "--output-folder", str(tmp_path), "--json"]) == 0
    assert _json_stdout(capsys)[0] == {"STSBenchmark": 81.5, "SICK-R": 70.25}
    assert calls == [((1, 32), ["STSBenchmark", "SICK-R"], str(tmp_path))]
    assert main(["evaluate", "mteb", "--model", str(bert_path)]) == 2  # --tasks is required


def test_push_calls_push_model_and_keeps_stdout_json(monkeypatch, tmp_path, capsys) -> None:
    from dictembed.hub import UploadPlan

    calls = []

    def push_model(model_dir, repo_id, private=False, dry_run=False, token=None, include_secrets=False):
        print("noise a library printed")  # must not reach stdout under --json
        calls.append((model_dir, repo_id, private, dry_run))
        return UploadPlan(tmp_path, ["README.md", "model.safetensors"], [])

    _fake_module(monkeypatch, "dictembed.hub", push_model=push_model)
    argv = ["push", "--model", str(tmp_path), "--repo", "user/name", "--dry-run"]
    assert main([*argv, "--json"]) == 0
    report, err = _json_stdout(capsys)
    assert report["files"] == ["README.md", "model.safetensors"] and report["dry_run"] is True
    assert report["left_out"] == []
    assert "noise a library printed" in err and "would upload 2 file(s) to user/name" in err
    assert calls == [(str(tmp_path), "user/name", False, True)]
    assert main(argv) == 0
    assert "  model.safetensors" in capsys.readouterr().out
    assert main(["push", "--model", str(tmp_path), "--repo", "not a repo"]) == 2
    for rejected in ("user/na..me", "a/b.git", "user/-x", "user/" + "a" * 120):  # ids the Hub refuses at upload
        assert main(["push", "--model", str(tmp_path), "--repo", rejected, "--dry-run"]) == 2
        assert "argument --repo: " in capsys.readouterr().err


def test_push_dry_run_lists_the_model_files(plus_model, capsys) -> None:
    out, _ = plus_model
    assert main(["push", "--model", str(out), "--repo", "user/name", "--dry-run", "--json"]) == 0
    report, _ = _json_stdout(capsys)
    assert {"dictembed.json", "modules.json"} <= set(report["files"]) and report["repo"] == "user/name"


def test_keyboard_interrupt_exits_130(monkeypatch, tmp_path, capsys) -> None:
    def push_model(*args, **kwargs):
        raise KeyboardInterrupt

    _fake_module(monkeypatch, "dictembed.hub", push_model=push_model)
    assert main(["push", "--model", str(tmp_path), "--repo", "user/name"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_a_ctrl_c_while_the_parser_imports_exits_130_without_a_traceback(monkeypatch, capsys) -> None:
    import dictembed.cli as cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as a Ctrl-C in the seconds train's recipes take to import

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["train", "--output", "x"]) == 130
    err = capsys.readouterr().err
    assert err == "dictembed: interrupted before it began\n"


# ------------------------------------------------------------------ conventions
def test_version(capsys) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"dictembed {__version__}\n"


def test_verbosity_and_json_parse_before_and_after_the_subcommand() -> None:
    parser = build_parser()
    assert parser.parse_args(["data", "stats"]).log_level == logging.INFO
    assert parser.parse_args(["data", "stats", "-q"]).log_level == logging.WARNING
    assert parser.parse_args(["data", "stats", "--verbose"]).log_level == logging.DEBUG
    assert parser.parse_args(["-v", "data", "stats"]).log_level == logging.DEBUG
    assert parser.parse_args(["-q", "evaluate", "sts"]).log_level == logging.WARNING
    assert parser.parse_args(["--json", "evaluate", "sts"]).json is True
    assert parser.parse_args(["evaluate", "sts", "--json"]).json is True
    assert parser.parse_args(["evaluate", "sts"]).json is False


def test_usage_errors_exit_2(capsys) -> None:
    assert main([]) == 2
    assert main(["encode"]) == 2  # --input and --output are required
    assert main(["evaluate", "sts", "-v", "-q"]) == 2
    assert main(["train", "--method", "skip-gram", "--output", "x"]) == 2
    assert "usage: dictembed" in capsys.readouterr().err


def _commands(parser: argparse.ArgumentParser, name: str = "dictembed"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")
    yield name, parser


def test_every_option_has_help_and_shows_its_default(capsys) -> None:
    for name, parser in _commands(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            shown = formatter._get_help_string(action) % vars(action)
            assert action.required or "default" in shown, f"{name} {action.option_strings[0]}: {shown}"
    assert main(["train", "--help"]) == 0
    assert "default: from --preset" in capsys.readouterr().out


def test_help_and_version_import_neither_torch_nor_transformers() -> None:
    code = """
import contextlib, io, json, sys
from dictembed.cli import main
out = io.StringIO()
codes = []
for argv in (["--help"], ["--version"]):
    with contextlib.redirect_stdout(out):
        try:
            codes.append(main(argv))
        except SystemExit as stop:
            codes.append(stop.code)
heavy = [name for name in ("torch", "transformers") if name in sys.modules]
print(json.dumps({"codes": codes, "heavy": heavy, "out": out.getvalue()}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["heavy"] == [] and report["codes"] == [0, 0]
    commands = "train encode export predict serve evaluate finetune data plot push cache".split()
    assert all(f"\n    {name} " in report["out"] for name in commands), report["out"]
    assert f"dictembed {__version__}" in report["out"]


def test_search_filters_take_exactly_the_offered_choices() -> None:
    from dictembed.errors import DictEmbedError
    from dictembed.search_options import POS_TAGS, WORD_COUNTS, Filters

    for words in WORD_COUNTS:
        assert Filters(words=words).words == words
    for pos in POS_TAGS:
        assert Filters(pos=pos).pos == pos
    with pytest.raises(DictEmbedError, match="word count"):
        Filters(words="several")
    with pytest.raises(DictEmbedError, match="part of speech"):
        Filters(pos="x")


def test_quiet_turns_every_progress_bar_off(bert_path) -> None:
    """`-q`: warnings and errors only on stderr, no progress bar from dictembed or the libraries under it, even
    when stderr is a terminal (where bars are drawn)."""
    from test_progress import stderr_on_terminal

    argv = [sys.executable, "-m", "dictembed", "-q", "evaluate", "sts", "--model", str(bert_path), "--tasks", "STSB"]
    code, err = stderr_on_terminal(argv, {**os.environ, "TQDM_DISABLE": ""})
    assert code == 0, err
    assert "it/s" not in err and "%|" not in err, err[-2000:]
    code, loud = stderr_on_terminal([a for a in argv if a != "-q"], {**os.environ, "TQDM_DISABLE": ""})
    assert code == 0 and "STS" in loud and "%|" in loud  # without -q the task bar is there


def test_bars_turned_off_obeys_and_restores(monkeypatch) -> None:
    from dictembed import progress
    from dictembed.progress import DISABLE_ENV, bars_turned_off, disable

    monkeypatch.setattr(progress, "terminal", lambda: True)  # stderr on a terminal, where bars are drawn
    before = os.environ.get(DISABLE_ENV)
    with bars_turned_off():
        assert disable(True) is True and disable(None) is True
    assert os.environ.get(DISABLE_ENV) == before
    if before is None:
        assert disable(True) is False and disable(False) is True and disable(None) is False


def test_bars_turned_off_silences_a_library_bar_made_after_tqdm_was_imported(capfd) -> None:
    """tqdm reads TQDM_DISABLE at its import; a bar a library draws without `disable=` (sentence-transformers'
    "Computing widget examples" under `finetune -q`) is off inside `bars_turned_off` all the same."""
    from tqdm.auto import tqdm

    from dictembed.progress import bars_turned_off

    with bars_turned_off():
        list(tqdm(range(3), desc="library bar"))
        list(tqdm(range(3), desc="asked for", disable=False))  # a bar that passes its own setting keeps it
    list(tqdm(range(3), desc="after"))
    err = capfd.readouterr().err
    assert "library bar" not in err and "asked for" in err and "after" in err, err
    first, second = bars_turned_off(), bars_turned_off()  # overlapping blocks (threads), not nested
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    list(tqdm(range(3), desc="still off"))
    second.__exit__(None, None, None)
    list(tqdm(range(3), desc="on again"))
    err = capfd.readouterr().err
    assert "still off" not in err and "on again" in err, err


def test_version_json_is_one_document_of_versions(capsys) -> None:
    """`--version --json` (either order): one JSON document, read from package metadata without importing torch."""
    for argv in (["--version", "--json"], ["--json", "--version"]):
        assert main(argv) == 0
        versions = json.loads(capsys.readouterr().out)
        assert versions["dictembed"] == __version__ and versions["python"] == sys.version.split()[0]
        assert versions["torch"] == importlib.metadata.version("torch")
    code = "import sys; from dictembed.cli import main; main(['--version', '--json']); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "False", done.stdout + done.stderr


def test_an_unknown_pooling_is_a_usage_error_naming_the_choices(capsys, tmp_path) -> None:
    """--pooling of encode and evaluate takes the names an encoder takes, refused as the command is read."""
    from dictembed.pooling_names import ENCODER_POOLINGS

    text = tmp_path / "in.txt"
    text.write_text("a dog\n", encoding="utf-8")
    for argv in (
        ["encode", "--input", str(text), "--output", str(tmp_path / "out.npy"), "--pooling", "bogus"],
        ["evaluate", "sts", "--pooling", "bogus"],
    ):
        assert main([*argv, "-q"]) == 2
        err = capsys.readouterr().err
        assert "--pooling" in err and "bogus" in err and "first_last_avg" in err and "Traceback" not in err
    parser = build_parser()
    for name in ENCODER_POOLINGS:
        assert parser.parse_args(["evaluate", "sts", "--pooling", name]).pooling == name


def test_the_environment_choices_are_checked_before_anything_loads(tmp_path) -> None:
    """A DICTEMBED_BUILD_BACKEND or DICTEMBED_CPU_PRECISION no command takes: one line naming it, exit 1, before
    torch is imported."""
    code = (
        "import sys; from dictembed.cli import main\n"
        f"status = main(['index', '--dictionary', 'wordnet', '--output', {str(tmp_path / 'out')!r}, '-q'])\n"
        "print(status, 'torch' in sys.modules)\n"
    )
    for variable, value in (("DICTEMBED_BUILD_BACKEND", "gpu"), ("DICTEMBED_CPU_PRECISION", "fp8")):
        environment = {**os.environ, variable: value}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120
        )
        assert done.stdout.split() == ["1", "False"], (done.stdout, done.stderr[-2000:])
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"{variable}='{value}'" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_commands_that_run_no_model_ignore_the_environment_choices(capsys, monkeypatch) -> None:
    """A stale DICTEMBED_BUILD_BACKEND in a shell profile does not block `cache list` or `dictionaries`."""
    monkeypatch.setenv("DICTEMBED_BUILD_BACKEND", "gpu")
    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "fp8")
    for argv in (["cache", "list"], ["dictionaries"]):
        assert main([*argv, "--json", "-q"]) == 0, capsys.readouterr().err
        json.loads(capsys.readouterr().out)


def test_descriptions_none_is_no_corpus(tmp_path) -> None:
    """`train --help` shows the default as none, and `--descriptions none` means it, in the checks made before the
    parser is built (which read no file `none`) as in the parser."""
    from dictembed.cli import train
    from dictembed.errors import DictEmbedError

    train.check_command_line(["--descriptions", "none", "--output", str(tmp_path / "out")])
    with pytest.raises(DictEmbedError, match="cannot read file"):
        train.check_command_line(["--descriptions", str(tmp_path / "missing.tsv"), "--output", str(tmp_path / "out")])
    parser = build_parser()
    assert parser.parse_args(["train", "--descriptions", "None", "--output", "x"]).descriptions == ""
    assert parser.parse_args(["train", "--descriptions", "everyday", "--output", "x"]).descriptions == "everyday"


def test_the_pooling_names_are_those_sentence_transformers_has() -> None:
    """`pooling_names.ST_POOLINGS` (torch-free, the command line's choices) follows sentence-transformers' Pooling."""
    from sentence_transformers.sentence_transformer import modules

    from dictembed.pooling_names import ST_POOLINGS

    assert set(ST_POOLINGS) == set(modules.Pooling.POOLING_MODES)


def test_a_list_option_names_an_item_given_twice_or_left_empty(capsys) -> None:
    """A seed or a rate listed twice was trained twice and counted twice in the selection's mean."""
    for value, message in (("0,0,1", "'0' is listed more than once"), ("1e-3,0.001", "'1e-3' is listed more than")):
        assert main(["train", "--seeds" if value.startswith("0") else "--lr-grid", value, "--output", "o"]) == 2
        assert message in capsys.readouterr().err
    assert main(["train", "--lr-grid", "1e-3,,2e-3", "--output", "o"]) == 2
    assert "has an empty item between its commas" in capsys.readouterr().err


def test_a_ctrl_c_after_the_result_is_written_leaves_a_success(tmp_path) -> None:
    """`distil` printed "wrote OUTPUT" and exited 130 when the Ctrl-C landed as the interpreter shut down."""
    code = (
        "import os, signal, sys\n"
        "sys.argv = ['dictembed', 'dictionaries']\n"
        "from dictembed.cli import main\n"
        "status = main()\n"
        "os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C once the result is out\n"
        "sys.exit(status)\n"
    )
    env = {**os.environ, "DICTEMBED_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "named dictionaries" in done.stdout and "Traceback" not in done.stderr


def test_an_interrupted_head_learn_says_how_to_continue(monkeypatch, bert_path, tmp_path, capsys) -> None:
    """`train` and `distil` said to run again with --resume; `head learn`, which resumes the same way, did not."""
    import dictembed.learned_head

    def learn_head(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dictembed.learned_head, "learn_head", learn_head)
    table = tmp_path / "words.tsv"
    table.write_text("word\tdefinition\n" + "".join(f"w{i}\ta thing numbered {i}\n" for i in range(20)))
    argv = ["head", "learn", "--model", str(bert_path), "--dictionary", str(table), "--output", str(tmp_path / "o")]
    assert main(argv) == 130
    assert "run head learn again with --resume to continue" in capsys.readouterr().err
