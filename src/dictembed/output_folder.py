"""The `--output` of a command, checked before any work: what the command may write over, and whether it can write.

A folder command (`train`, `head learn`, `export`, `finetune stsb`) never deletes a non-empty folder that does not
hold what it writes, even with `--overwrite`, and replaces one that does only with `--overwrite`. A file command
(`encode`) replaces an existing file only with `--overwrite`. Either must be somewhere a file can be made. A run
folder a command makes and a failure leaves empty is removed again (`tidy_run_folder`).
Torch-free: the command line checks its `--output` before it loads anything.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dictembed.errors import DictEmbedError
from dictembed.io import STAGING_MARK, in_the_way, link_target, swap_paths
from dictembed.model_folder import read_record

MODEL_FILES = ("model.safetensors", "modules.json")  # either makes a folder a model
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")  # with config.json: a transformers model's weights


def is_model_folder(path: Path) -> bool:
    """Whether `path` holds a model: a sentence-transformers folder or a transformers one (`MODEL_FILES`, or a
    `config.json` beside weights); a `config.json` alone, which many programs write, does not make one."""
    if any((path / name).is_file() for name in MODEL_FILES):
        return True
    return (path / "config.json").is_file() and any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS)


def holds_run(path: Path) -> bool:
    """Whether `path` holds a model `train` wrote: a folder with a dictembed run record."""
    return read_record(path).exists


def check_not_a_file(output: str | Path, label: str = "--output") -> None:
    """Refuse an `output` folder that is a file (`label`: how the message names it)."""
    path = Path(output)
    if path.exists() and not path.is_dir():
        raise DictEmbedError(f"{label} {path} is a file; name a folder")


def check_not_the_working_folder(output: str | Path, label: str = "--output") -> None:
    """Refuse an `output` that is the working folder or holds it (`.`, `..`, `out/..`): a command replaces its output
    folder whole, and stages it and its runs under names beside it, which such a path has none of."""
    target, here = Path(os.path.abspath(output)), Path(os.path.abspath(os.curdir))
    if target == here or here.is_relative_to(target):
        raise DictEmbedError(f"{label} {output} is the current folder or holds it; name a folder to write, as out/")


def check_way(output: str | Path) -> None:
    """Refuse, before any work, a user's file or folder where the staged write of `output` would put its staging
    folder or set the old one aside (`OUTPUT.partial`, `OUTPUT.old`): refused only at the write, after the work."""
    for beside in swap_paths(link_target(output))[1:]:
        if (error := in_the_way(beside)) is not None:
            raise error


def check_writable_place(output: str | Path, label: str = "--output") -> None:
    """Refuse an `output` whose folder cannot be written: its nearest existing ancestor must be a folder in which a
    file can be made (tried: a probe file, removed at once), as the command's staged write will make one beside
    `output`; the missing folders between are made by the write itself."""
    path = Path(output).absolute()
    place = path.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise DictEmbedError(f"{label} {output}: {place} is a file, not a folder")
    try:
        handle, probe = tempfile.mkstemp(prefix=".dictembed-probe-", dir=place)
    except OSError as err:
        raise DictEmbedError(f"{label} {output}: cannot write in {place}: {err.strerror or err}") from None
    os.close(handle)
    os.unlink(probe)


def check_output_folder(
    output: str | Path,
    overwrite: bool,
    holds_ours: Callable[[Path], bool] = is_model_folder,
    what: str = "model",
    label: str = "--output",
    remedy: str = "pass --overwrite",
) -> None:
    """Refuse an `output` folder that would lose something: a file, a non-empty folder that `holds_ours` does not
    recognise (never replaced, even with `overwrite`), or one that holds `what` unless `overwrite`. A missing or
    empty folder passes. The messages name the folder by `label` and say how to replace it by `remedy` (the
    command line's by default; `Encoder.save` names its own)."""
    path = Path(output)
    check_not_the_working_folder(path, label)
    check_not_a_file(path, label)
    check_writable_place(path, label)
    check_way(path)
    if not path.is_dir() or not any(p.name != STAGING_MARK for p in path.iterdir()):  # a fresh staging folder too
        return
    if not holds_ours(path):
        raise DictEmbedError(f"{label} {path} is a non-empty folder that holds no {what}; choose another")
    if not overwrite:
        raise DictEmbedError(f"{label} {path} already holds a {what}; {remedy} to replace it")


def check_outside(output: str | Path, model: str | Path | None, label: str = "--output") -> None:
    """Refuse an `output` inside (or at) the local `model` folder a command reads (a copy would take in itself, a
    write would change the model), and a `model` inside `output` (writing `output` would replace it). A Hub name
    or an offline model's name is no folder here and passes."""
    if model is None or not Path(model).expanduser().is_dir():
        return
    source, target = Path(model).expanduser().resolve(), Path(output).expanduser().resolve()
    if target == source or target.is_relative_to(source):
        raise DictEmbedError(f"{label} {output} is inside the model folder {model}; choose a folder outside it")
    if source.is_relative_to(target):
        raise DictEmbedError(f"the model folder {model} is inside {label} {output}; choose an output beside it")


def runs_root(output: str | Path) -> Path:
    """The folder of the intermediate runs of `output`: `<output>-runs` (beside the folder a link leads to, so that
    both spellings of one output share its runs and its lock)."""
    output = link_target(output)
    return output.with_name(output.name + "-runs")


def check_run_output(output: str | Path, overwrite: bool) -> None:
    """`check_output_folder` for `train`: what it replaces is a folder with a dictembed run record; its runs folder
    (`runs_root`) must be a folder or missing."""
    check_output_folder(output, overwrite, holds_run, "dictembed model")
    runs = runs_root(output)
    if runs.exists() and not runs.is_dir():
        raise DictEmbedError(
            f"{runs} is in the way: train keeps the runs of --output {output} under that name, and it is a file; move "
            "it or choose another output"
        )


def check_output_folders(output: str | Path, names: Iterable[str], overwrite: bool) -> None:
    """`check_output_folder` for a command that writes a model folder per name inside `output` (`finetune stsb`:
    one a seed): `output` is a folder or missing, and each of its folders `names` passes the check."""
    check_not_a_file(output)
    for name in names:  # each folder is staged inside `output` (made first where missing)
        check_output_folder(Path(output) / name, overwrite)


def check_output_file(output: str | Path, overwrite: bool) -> None:
    """Refuse an `output` file that is a folder, or that exists unless `overwrite`."""
    output = Path(output)
    if output.is_dir():
        raise DictEmbedError(f"--output {output} is a folder; name a file")
    if output.exists() and not overwrite:
        raise DictEmbedError(f"--output {output} already exists; pass --overwrite to replace it")
    check_writable_place(output)


@contextmanager
def tidy_run_folder(folder: str | Path) -> Iterator[None]:
    """The folders of `folder`'s path that the block creates and leaves empty (a run that failed before writing
    anything there) are removed after it, deepest first; one holding anything stays."""
    missing = [p for p in (Path(folder), *Path(folder).parents) if not p.exists()]
    try:
        yield
    finally:
        for path in missing:
            try:
                path.rmdir()
            except OSError:  # not empty, or already gone
                break
