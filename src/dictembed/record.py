"""The run record saved beside every model (`dictembed.json`): one reader and one writer.

Models saved under the package's former name carry `defsent.json`; it is read when `dictembed.json`
is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError

RECORD_NAME = "dictembed.json"
LEGACY_RECORD_NAME = "defsent.json"


def record_path(folder: str | Path) -> Path | None:
    """The record file of a model folder (the legacy name as a fallback), or None if it has none."""
    for name in (RECORD_NAME, LEGACY_RECORD_NAME):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def read_record(folder: str | Path, required: bool = False) -> dict[str, Any]:
    """The saved record of a model folder; {} when there is none (an error if `required`)."""
    path = record_path(folder)
    if path is None:
        if required:
            raise DictEmbedError(f"{folder} is not a dictembed model folder ({RECORD_NAME} missing)")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DictEmbedError(f"{path}: corrupt run record ({err})") from None
    if not isinstance(data, dict):
        raise DictEmbedError(f"{path}: corrupt run record (a JSON object expected)")
    return data


def write_record(folder: str | Path, record: dict[str, Any]) -> Path:
    """Write `record` as the folder's `dictembed.json`."""
    path = Path(folder) / RECORD_NAME
    path.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
    return path
