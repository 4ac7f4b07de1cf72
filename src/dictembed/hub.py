"""Push a saved model folder to the Hugging Face Hub: the whole folder, as `upload_folder` sends it.

That is `dictembed.json`, the sentence-transformers files (`modules.json`, `1_Pooling/`, a `Dense` pooler),
the weights and tokenizer, `entry_space/` and the `README.md` model card. A dry run lists the same files
without touching the network.
"""

from __future__ import annotations

import logging
from pathlib import Path

from dictembed.errors import DictEmbedError

log = logging.getLogger(__name__)
REQUIRED_FILES = ("modules.json", "config.json")


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


def upload_files(model_dir: str | Path) -> list[str]:
    """The files a push sends, as sorted relative POSIX paths: every file of the folder but what is not the model,
    each kind left out with a warning: hidden files and folders (`.env`, `.git/`, `.cache/`), staging leftovers of
    an interrupted save (`*.partial`), and links that lead outside the folder (their targets are not the model)."""
    from huggingface_hub.utils import DEFAULT_IGNORE_PATTERNS, filter_repo_objects

    path = check_model_folder(model_dir).resolve()
    kept, left_out = [], []
    for file in sorted(p for p in path.glob("**/*") if p.is_file()):
        relative = file.relative_to(path)
        outside = not file.resolve().is_relative_to(path)
        if outside or any(part.startswith(".") or ".partial" in part for part in relative.parts):
            left_out.append(relative.as_posix())
        else:
            kept.append(relative.as_posix())
    if left_out:
        log.warning("left out of the push, not model files: %s", ", ".join(left_out))
    return sorted(filter_repo_objects(kept, ignore_patterns=DEFAULT_IGNORE_PATTERNS))


def push_model(
    model_dir: str | Path,
    repo_id: str,
    private: bool = False,
    dry_run: bool = False,
    token: str | None = None,
) -> list[str]:
    """Upload the whole model folder to the Hub model repo `repo_id` (created if missing); return the files sent.

    With `dry_run`, only list (sorted, relative POSIX paths) what would be uploaded; nothing is sent.
    """
    files = upload_files(model_dir)
    path = Path(model_dir).expanduser().resolve()
    if "README.md" not in files:
        log.warning("%s has no README.md model card; the Hub page will be empty", path)
    if dry_run:
        return files
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(
            repo_id=repo_id,
            folder_path=str(path),
            repo_type="model",
            commit_message=f"Upload {path.name} (dictembed)",
            allow_patterns=files,  # exactly the files listed, nothing a dry run would not show
        )
    except Exception as err:  # any hub, HTTP (httpx) or connection failure is one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DictEmbedError(f"cannot push {path} to {repo_id!r}: {first}") from err
    log.info("pushed %d files from %s to https://huggingface.co/%s", len(files), path, repo_id)
    return files
