"""The base model a saved folder was trained from, as the Hugging Face Hub names it (its card's `base_model`, MTEB's
`adapted_from`): a Hub name as it is, the embedded all-MiniLM-L6-v2 and the offline models by their upstream names,
and a local folder as none."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dictembed.card_metadata import hub_name_of
from dictembed.paths import EMBEDDED_MODEL, default_model
from dictembed.record import RunRecord

EMBEDDED_BASE = EMBEDDED_MODEL  # the hub name of the embedded default model
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def _embedded_model() -> Path | None:
    """The folder of the embedded all-MiniLM-L6-v2, when its package is installed."""
    try:
        return Path(default_model()).resolve()
    except Exception:  # the package is optional for a card; any failure means "not the embedded model"
        return None


def hub_base_model(name: str | None) -> str | None:
    """The Hub name of a base model: the name itself if it is one, the embedded model's hub name, the upstream
    repository of an offline model's name (`dictembed models prepare`), else None."""
    if not name:
        return None
    path = Path(name).expanduser()
    if path.exists():
        embedded = _embedded_model()
        return EMBEDDED_BASE if embedded is not None and path.resolve() == embedded else None
    hub = hub_name_of(name)
    return hub if _HUB_NAME.match(hub) else None


def record_base_model(record: dict[str, Any]) -> str | None:
    """The base model a record (in its JSON form) names: its `base_model`, else its run configuration's `model`."""
    config = record.get("config")
    settings = RunRecord(config=config if isinstance(config, dict) else {}).settings
    base = record.get("base_model") or settings.get("model")
    return str(base) if base else None


def local_base(record: dict[str, Any], base: str | None) -> str | None:
    """What the base model was where it was trained, as the record's `sources` say ("embedded", "folder"), or
    None: a published record names a local folder by its public name, which is no Hub name."""
    sources = record.get("sources")
    entries = sources.get("model") if isinstance(sources, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and base is not None and entry.get("name") == base:
            return str(entry.get("local") or "") or None
    return None


def base_hub_name(record: dict[str, Any]) -> str | None:
    """The Hub name of a record's base model (the record in its JSON form), or None: a local folder, or none."""
    base = record_base_model(record)
    local = local_base(record, base)
    if local == "embedded":
        return EMBEDDED_BASE
    return None if local else hub_base_model(base)
