"""Bad options, inputs and outputs of `dictembed train`: a usage error (exit 2) or one error line naming the
option, file or model (exit 1), never a traceback; no user file or finished model is changed; nothing in a
run folder is unpickled."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import PlantedPickle, cli_refuses, cli_succeeds, damaged_copy

pytestmark = pytest.mark.usefixtures("restore_log_level")


def _train(bert_path: Path, dictionary: Path, output: Path, *extra: str) -> list[str]:
    base = ["train", "--model", str(bert_path), "--dictionary", str(dictionary), "--output", str(output)]
    return [*base, "--lr-grid", "1e-3", *extra]


def _digest(folder: Path) -> str:
    """A hash of every file in `folder`, to see whether a run changed it."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()


# ------------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--limit", "-5"),
        ("--batch-size", "0"),
        ("--lr-grid", ""),
        ("--lr-grid", "fast"),
        ("--seeds", ",,"),
        ("--entry-temperature", "-1"),
    ],
)
def test_bad_numbers_and_lists_are_usage_errors(flag, value, bert_path, toy_tsv, tmp_path, capsys) -> None:
    cli_refuses(capsys, [*_train(bert_path, toy_tsv, tmp_path / "never"), flag, value], flag, code=2)
    assert not (tmp_path / "never").exists()


def test_an_option_of_another_method_is_a_usage_error(bert_path, toy_tsv, tmp_path, capsys) -> None:
    argv = _train(bert_path, toy_tsv, tmp_path / "never", "--method", "defsent", "--entries", "amp")
    cli_refuses(capsys, argv, "entries", code=2)
    assert not (tmp_path / "never").exists()


# ------------------------------------------------------------------------------------ inputs
def test_a_missing_dictionary_is_named(bert_path, tmp_path, capsys) -> None:
    cli_refuses(capsys, _train(bert_path, tmp_path / "missing.tsv", tmp_path / "never"), "missing.tsv")


def test_a_missing_model_is_named(toy_tsv, tmp_path, capsys) -> None:
    cli_refuses(capsys, _train(tmp_path / "missing-model", toy_tsv, tmp_path / "never"), "missing-model")


def test_a_corrupt_config_is_named(tmp_path, capsys) -> None:
    config = tmp_path / "dictembed.json"
    config.write_text("{oops")
    cli_refuses(capsys, ["train", "--config", str(config), "--output", str(tmp_path / "never")], "dictembed.json")


def test_a_dictionary_too_small_for_the_split_is_named(bert_path, tmp_path, capsys) -> None:
    small = tmp_path / "small.tsv"
    small.write_text("word\tdefinition\ndog\ta pet that barks\ncat\ta pet that purrs\n")
    cli_refuses(capsys, _train(bert_path, small, tmp_path / "never"), "small")


# ------------------------------------------------------------------------------------ outputs
def test_an_output_onto_a_user_file_is_refused_and_the_file_kept(bert_path, toy_tsv, tmp_path, capsys) -> None:
    thesis = tmp_path / "thesis.txt"
    thesis.write_text("years of work")
    cli_refuses(capsys, _train(bert_path, toy_tsv, thesis), "thesis.txt")
    assert thesis.read_text() == "years of work"


def test_an_output_onto_a_folder_of_user_files_is_refused(bert_path, toy_tsv, tmp_path, capsys) -> None:
    thesis = tmp_path / "mine" / "thesis.txt"
    thesis.parent.mkdir()
    thesis.write_text("years of work")
    cli_refuses(capsys, _train(bert_path, toy_tsv, thesis.parent), "mine")
    assert [p.name for p in thesis.parent.iterdir()] == ["thesis.txt"] and thesis.read_text() == "years of work"


def test_an_output_onto_a_model_needs_overwrite(bert_path, toy_tsv, served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "model")
    before = _digest(folder)
    cli_refuses(capsys, _train(bert_path, toy_tsv, folder), "--overwrite")
    assert _digest(folder) == before


# ------------------------------------------------------------------------------------ resume
def test_resume_without_a_checkpoint_trains_from_the_start(bert_path, toy_tsv, tmp_path, capsys) -> None:
    output = tmp_path / "fresh"
    cli_succeeds(capsys, _train(bert_path, toy_tsv, output, "--resume", "--limit", "6"))
    assert (output / "dictembed.json").is_file()


def test_pickles_planted_in_a_run_checkpoint_never_run(bert_path, toy_tsv, tmp_path, capsys) -> None:
    """Files a torch or accelerate checkpoint would unpickle, planted in the run folder before `--resume`."""
    from dictembed.cli import main

    output = tmp_path / "planted"
    checkpoint = tmp_path / "planted-runs" / "step1" / "lr0.001-seed0" / "checkpoint"
    (checkpoint / "optimizer").mkdir(parents=True)
    payload = PlantedPickle(tmp_path / "EXECUTED").dumps()
    for name in ("optimizer.pt", "state.pt", "checkpoint.pt", "rng_state.pth", "scheduler.pt", "optimizer/state.pkl"):
        (checkpoint / name).write_bytes(payload)
    status = main([*_train(bert_path, toy_tsv, output, "--resume", "--limit", "6"), "-q"])
    err = capsys.readouterr().err
    assert not (tmp_path / "EXECUTED").exists()
    assert status in (0, 1) and "Traceback" not in err, err[-3000:]
