"""What a command may write over at its `--output` (`dictembed.output_folder`): a folder that holds anything but
what the command writes is never replaced, even with --overwrite; one that holds it only with --overwrite."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dictembed import output_folder
from dictembed.errors import DictEmbedError
from dictembed.io import STAGING_MARK
from dictembed.output_folder import check_output_file, check_output_folder, check_run_output, is_model_folder


def _folder(path: Path, *files: str) -> Path:
    path.mkdir()
    for name in files:
        (path / name).write_text("x")
    return path


def test_a_foreign_non_empty_folder_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    mine = _folder(tmp_path / "mine", "thesis.txt")
    refusal = f"^--output {re.escape(str(mine))} is a non-empty folder that holds no model; choose another$"
    for overwrite in (False, True):
        with pytest.raises(DictEmbedError, match=refusal):
            check_output_folder(mine, overwrite)
    assert [p.name for p in mine.iterdir()] == ["thesis.txt"]


def test_a_config_json_alone_is_no_model(tmp_path: Path) -> None:
    """Many programs write a config.json: without weights beside it the folder is someone else's, never replaced."""
    app = _folder(tmp_path / "app", "config.json", "precious.txt")
    assert not is_model_folder(app)
    with pytest.raises(DictEmbedError, match="is a non-empty folder that holds no model; choose another$"):
        check_output_folder(app, overwrite=True)


@pytest.mark.parametrize(
    "files", [("config.json", "pytorch_model.bin"), ("config.json", "weights.safetensors"), ("model.safetensors",)]
)
def test_a_transformers_folder_is_a_model(tmp_path: Path, files: tuple[str, ...]) -> None:
    assert is_model_folder(_folder(tmp_path / "model", *files))


@pytest.mark.parametrize("file", ["model.safetensors", "modules.json"])
def test_a_model_folder_is_replaced_only_with_overwrite(tmp_path: Path, file: str) -> None:
    model = _folder(tmp_path / "model", file, "notes.txt")
    assert is_model_folder(model)
    refusal = f"^--output {re.escape(str(model))} already holds a model; pass --overwrite to replace it$"
    with pytest.raises(DictEmbedError, match=refusal):
        check_output_folder(model, overwrite=False)
    check_output_folder(model, overwrite=True)  # passes: the command may replace it


def test_a_missing_or_empty_folder_passes_and_a_file_is_refused(tmp_path: Path) -> None:
    check_output_folder(tmp_path / "absent", overwrite=False)
    check_output_folder(_folder(tmp_path / "empty"), overwrite=False)
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(DictEmbedError, match=f"^--output {re.escape(str(file))} is a file; name a folder$"):
        check_output_folder(file, overwrite=True)


def test_a_command_names_what_it_writes(tmp_path: Path) -> None:
    """`train` replaces a folder with a dictembed record only: a bare transformers model is not one of its own."""
    model = _folder(tmp_path / "model", "config.json")
    with pytest.raises(DictEmbedError, match="holds no dictembed model; choose another"):
        check_output_folder(model, True, lambda path: (path / "dictembed.json").is_file(), "dictembed model")
    (model / "dictembed.json").write_text("{}")
    check_output_folder(model, True, lambda path: (path / "dictembed.json").is_file(), "dictembed model")


def test_an_output_file_is_replaced_only_with_overwrite(tmp_path: Path) -> None:
    check_output_file(tmp_path / "new.npy", overwrite=False)
    existing = tmp_path / "old.npy"
    existing.write_bytes(b"years of work")
    with pytest.raises(DictEmbedError, match=f"^--output {re.escape(str(existing))} already exists; pass --overwrite"):
        check_output_file(existing, overwrite=False)
    check_output_file(existing, overwrite=True)
    with pytest.raises(DictEmbedError, match=f"^--output {re.escape(str(tmp_path))} is a folder; name a file$"):
        check_output_file(tmp_path, overwrite=True)


def test_an_output_whose_folder_cannot_be_written_is_refused_before_any_work(tmp_path: Path, monkeypatch) -> None:
    """The place a staged write will make its files is tried first: a missing output under folders that do not exist
    yet is tried at the nearest one that does, which is left as it was (no probe, no folder made)."""
    deep = tmp_path / "not" / "yet" / "model"
    check_output_folder(deep, overwrite=False)
    check_output_file(tmp_path / "not" / "vectors.npy", overwrite=False)
    assert [p.name for p in tmp_path.iterdir()] == []

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(output_folder.tempfile, "mkstemp", refuse)
    with pytest.raises(
        DictEmbedError,
        match=rf"^--output {re.escape(str(deep))}: cannot write in {re.escape(str(tmp_path))}: Permission denied$",
    ):
        check_output_folder(deep, overwrite=False)
    with pytest.raises(DictEmbedError, match=r"cannot write in .*: Permission denied$"):
        check_output_file(tmp_path / "vectors.npy", overwrite=True)


def test_an_output_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DictEmbedError, match=r"notes\.txt is a file, not a folder$"):
        check_output_folder(tmp_path / "notes.txt" / "model", overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no file can be made")
@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--output", "/proc/dictembed-x"],
        ["index", "--dictionary", "wordnet", "--output", "/proc/dictembed-x"],
        ["train", "--limit", "10", "--output", "/proc/dictembed-x"],
        ["encode", "--input", "README.md", "--output", "/proc/dictembed-x.npy"],
    ],
)
def test_commands_refuse_an_unwritable_output(argv: list[str], capsys) -> None:
    """Before anything loads (test_cli_early_errors.py: an output under a file, in a fresh process)."""
    from conftest import cli_refuses

    cli_refuses(capsys, argv, "cannot write in /proc")


def test_seed_folders_are_tried_where_they_are_written(tmp_path: Path, monkeypatch) -> None:
    """`finetune stsb` stages its seedN folders inside --output: a writable --output passes under a folder that
    cannot be written."""
    from dictembed.output_folder import check_output_folders

    output = _folder(tmp_path / "runs")
    made = output_folder.tempfile.mkstemp

    def only_inside(*args, dir=None, **kwargs):
        if Path(dir) != output:
            raise PermissionError(13, "Permission denied")
        return made(*args, dir=dir, **kwargs)

    monkeypatch.setattr(output_folder.tempfile, "mkstemp", only_inside)
    check_output_folders(output, ["seed0", "seed1"], overwrite=False)
    with pytest.raises(DictEmbedError, match="cannot write in"):
        check_output_folder(tmp_path / "elsewhere", overwrite=False)


@pytest.mark.parametrize("spelling", [".", "./", "..", "sub/.."])
def test_the_working_folder_or_one_holding_it_is_no_output(spelling: str, tmp_path: Path, monkeypatch) -> None:
    """`--output .` was a ValueError traceback (a path with no name), after the training for distil and head."""
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    named = re.escape(str(Path(spelling)))
    with pytest.raises(DictEmbedError, match=f"^--output {named} is the current folder or holds it"):
        check_output_folder(spelling, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and not list(here.iterdir())


def test_a_users_file_at_a_staging_name_is_refused_before_any_work(tmp_path: Path) -> None:
    """It was found only when the finished model was published."""
    for leftover in ("out.old", "out.partial"):
        mine = tmp_path / leftover
        mine.mkdir()
        (mine / "notes.txt").write_text("mine")
        with pytest.raises(DictEmbedError, match=f"^{re.escape(str(mine))} is in the way"):
            check_output_folder(tmp_path / "out", overwrite=True)
        assert (mine / "notes.txt").read_text() == "mine"
        (mine / "notes.txt").unlink()
        (mine / STAGING_MARK).touch()  # an interrupted write's own leftover: cleared by the write, no error
        check_output_folder(tmp_path / "out", overwrite=True)
        shutil.rmtree(mine)


def test_a_file_at_the_runs_folders_name_is_refused_before_training(tmp_path: Path) -> None:
    (tmp_path / "out-runs").write_text("mine")
    with pytest.raises(DictEmbedError, match="out-runs is in the way: train keeps the runs of --output"):
        check_run_output(tmp_path / "out", overwrite=False)
    assert (tmp_path / "out-runs").read_text() == "mine"
