"""Push a saved model folder to the Hugging Face Hub: the files a person would publish, sent by `upload_folder`.

That is `dictembed.json`, the sentence-transformers files (`modules.json`, `1_Pooling/`, a `Dense` pooler),
the weights and tokenizer, `entry_space/` and the `README.md` model card. Left out, each named with its reason
(`UploadPlan.left_out`): hidden files and folders (`.env`, `.git/`, which also covers the Hub's own ignore
patterns), staging leftovers of an interrupted save (`*.partial`), a trained folder's query graph (`onnx/` with
`query.json`: loading from the Hub leaves `onnx/` out), links that lead outside the folder or to
nothing, what is not a plain file (a pipe, a socket), a folder that cannot be read, and files that look like
credentials (`dictembed.credentials`: `id_rsa`, `*.pem`, `credentials.json`, a private-key header), which
`include_secrets` sends. A folder whose weights would not be sent is an error. A dry run lists the same files
without touching the network.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dictembed.credentials import credential
from dictembed.errors import DictEmbedError
from dictembed.io import STAGING_SUFFIX
from dictembed.model_folder import (
    ONNX_DIR,
    ONNX_MANIFEST,
    QUERY_MANIFEST,
    RECORD_NAME,
    WEIGHTS_FILE,
    has_weights,
    manifest_graph,
    read_record,
)
from dictembed.text_files import is_regular_file

log = logging.getLogger(__name__)
REQUIRED_FILES = ("modules.json", "config.json")
SHARD_INDEX = "model.safetensors.index.json"  # weights saved in shards: the index and every shard it names


class LeftOut(NamedTuple):
    """A file or folder of the model folder that a push does not send: its relative POSIX path and why;
    `credential` when it looks like one (sent with `include_secrets`)."""

    path: str
    reason: str
    credential: bool = False


@dataclass(frozen=True)
class UploadPlan:
    """What a push of `folder` sends (`files`: sorted relative POSIX paths) and what it leaves out."""

    folder: Path
    files: list[str]
    left_out: list[LeftOut]


def check_model_folder(model_dir: str | Path) -> Path:
    """The folder, if it is a dictembed / sentence-transformers model folder; else a one-line error naming it."""
    path = Path(model_dir).expanduser()
    if not path.is_dir():
        raise DictEmbedError(f"{path} is not a folder: pass a saved model folder (dictembed train --output DIR)")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise DictEmbedError(
            f"{path} is not a dictembed/sentence-transformers model folder ({', '.join(missing)} missing)"
        )
    return path


def _link_problem(entry: Path, root: Path) -> str | None:
    """Why the link `entry` cannot be sent: it leads to nothing, around in a loop, or outside `root`."""
    target = os.readlink(entry)
    try:
        resolved = entry.resolve(strict=True)
    except FileNotFoundError:
        return f"a dangling link (to {target})"
    except (OSError, RuntimeError):  # a loop of links: RuntimeError before Python 3.13
        return f"a link that cannot be followed (to {target})"
    return None if resolved.is_relative_to(root) else f"a link leading outside the folder (to {target})"


def _file_count(folder: Path) -> str:
    """`folder`'s files, all levels, in words ("3 files"); links to folders are not followed."""
    count = sum(len(names) for _, _, names in os.walk(folder))
    return f"{count} file{'s' if count != 1 else ''}"


def _folder_left_out(folder: Path, relative: str, root: Path) -> LeftOut | None:
    """Why the sub-folder `folder` (at `relative`) is left out whole, or None when its files are looked at."""
    if folder.is_symlink():
        problem = _link_problem(folder, root)
        return LeftOut(relative, problem or "a link to a folder inside the folder (its files are sent where they lie)")
    if folder.name.startswith("."):
        return LeftOut(relative, f"a hidden folder ({_file_count(folder)})")
    if STAGING_SUFFIX in folder.name:
        return LeftOut(relative, f"a staging leftover of an interrupted save ({_file_count(folder)})")
    if relative == ONNX_DIR and (folder / QUERY_MANIFEST).is_file() and not (folder / ONNX_MANIFEST).is_file():
        return LeftOut(relative, "the query graph: a Hub download leaves onnx/ out; the folder answers on its weights")
    return None


def _file_left_out(file: Path, relative: str, root: Path, include_secrets: bool) -> LeftOut | None:
    """Why the file `file` (at `relative`) is left out, or None when it is sent. A link inside the folder is
    left out when its target is (a link named `notes.txt` to `.env`)."""
    if file.is_symlink():
        if (problem := _link_problem(file, root)) is not None:
            return LeftOut(relative, problem)
        target = file.resolve().relative_to(root).as_posix()
        if (item := _file_left_out(root / target, target, root, include_secrets)) is not None:
            return LeftOut(relative, f"a link to {target}, {item.reason}", item.credential)
    parts = Path(relative).parts
    if any(part.startswith(".") for part in parts):
        return LeftOut(relative, "a hidden file")
    if any(STAGING_SUFFIX in part for part in parts):
        return LeftOut(relative, "a staging leftover of an interrupted save")
    if not is_regular_file(file):
        return LeftOut(relative, "not a plain file (a pipe, socket or device)")
    kind = None if include_secrets else credential(file, relative)
    return None if kind is None else LeftOut(relative, f"looks like a credential: {kind}", credential=True)


def _check_weights(root: Path, files: list[str], left_out: list[LeftOut]) -> None:
    """A one-line error naming `root` and its weights file when the push would not send the weights:
    `model.safetensors`, or a shard index and every shard it names, or for a weightless ONNX export (`dictembed
    export` without --keep-weights) its manifest and the graph it names, which sentence-transformers loads with
    `backend="onnx"` and dictembed's query encoder runs."""
    missing = WEIGHTS_FILE
    if WEIGHTS_FILE not in files and SHARD_INDEX in files:
        try:
            shards = set(json.loads((root / SHARD_INDEX).read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise DictEmbedError(f"{root / SHARD_INDEX}: not a safetensors shard index ({err})") from None
        missing = next((shard for shard in sorted(map(str, shards)) if shard not in files), "")
    if WEIGHTS_FILE in files or not missing:
        return
    manifest = f"{ONNX_DIR}/{ONNX_MANIFEST}"
    weightless = not has_weights(root) and not any(item.path == WEIGHTS_FILE for item in left_out)
    if manifest in files and WEIGHTS_FILE == missing and weightless:
        try:
            graph = f"{ONNX_DIR}/{manifest_graph(root / manifest)[1]}"
        except ValueError as err:
            raise DictEmbedError(str(err)) from None
        if graph in files:
            return
        missing = graph
    why = next((item.reason for item in left_out if item.path == missing), "missing")
    raise DictEmbedError(f"{root} has no weights to push: {missing} is {why}")


def upload_plan(model_dir: str | Path, include_secrets: bool = False) -> UploadPlan:
    """The files a push of `model_dir` sends and the ones it leaves out, with why (see the module docstring);
    a folder whose weights would not be sent is a one-line DictEmbedError naming it and the weights file."""
    root = check_model_folder(model_dir).resolve()
    files: list[str] = []
    left_out: list[LeftOut] = []

    def unreadable(err: OSError) -> None:
        relative = Path(str(err.filename)).relative_to(root).as_posix()
        left_out.append(LeftOut(relative, f"a folder that cannot be read ({(err.strerror or str(err)).lower()})"))

    for here, folders, names in os.walk(root, onerror=unreadable):  # links to folders are listed, not followed
        for name in list(folders):
            relative = (Path(here) / name).relative_to(root).as_posix()
            if (item := _folder_left_out(Path(here) / name, relative, root)) is not None:
                left_out.append(item)
                folders.remove(name)
        for name in names:
            relative = (Path(here) / name).relative_to(root).as_posix()
            if (item := _file_left_out(Path(here) / name, relative, root, include_secrets)) is None:
                files.append(relative)
            else:
                left_out.append(item)
    files.sort()
    left_out.sort()
    _check_weights(root, files, left_out)
    _check_intact(root, files)
    return UploadPlan(root, files, left_out)


def _check_intact(root: Path, files: list[str]) -> None:
    """A one-line error naming the file where the weights' header or the run record a push would send does not
    read (an empty or cut `model.safetensors`, a cut `dictembed.json`): a push never publishes a folder that
    cannot load. Reads the weights' header only."""
    from safetensors import SafetensorError, safe_open

    if WEIGHTS_FILE in files:
        try:
            with safe_open(str(root / WEIGHTS_FILE), "np"):
                pass
        except (OSError, SafetensorError) as err:
            raise DictEmbedError(f"{root / WEIGHTS_FILE}: not a whole safetensors file ({err})") from None
    if RECORD_NAME in files:
        read_record(root)  # a record that does not parse is its one-line error


def push_model(
    model_dir: str | Path,
    repo_id: str,
    private: bool = False,
    dry_run: bool = False,
    token: str | None = None,
    include_secrets: bool = False,
) -> UploadPlan:
    """Upload the model folder's files (`upload_plan`) to the Hub model repo `repo_id` (created if missing);
    return the plan: the files sent and those left out. With `dry_run`, nothing is sent."""
    plan = upload_plan(model_dir, include_secrets)
    path = plan.folder
    if "README.md" not in plan.files:
        log.warning("%s has no README.md model card; the Hub page will be empty", path)
    if dry_run:
        return plan
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(
            repo_id=repo_id,
            folder_path=str(path),
            repo_type="model",
            commit_message=f"Upload {path.name} (dictembed)",
            # exactly the files listed, nothing a dry run would not show; a `[` or `*` in a name is literal
            allow_patterns=[glob.escape(name) for name in plan.files],
        )
    except Exception as err:  # any hub, HTTP (httpx) or connection failure is one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DictEmbedError(f"cannot push {path} to {repo_id!r}: {first}") from err
    log.info("pushed %d files from %s to https://huggingface.co/%s", len(plan.files), path, repo_id)
    return plan
