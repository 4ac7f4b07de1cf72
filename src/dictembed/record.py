"""The run record saved beside every model (`dictembed.json`): a typed, versioned `RunRecord`.

Version 2 nests the method's own options under `config["options"]`; version 1 (this package's saves
before the run-layer rework, and models saved under its former name as `defsent.json`) kept every
option flat in `config`. `RunRecord.load` reads both. The JSON keys stay those of version 1, so a record
reads the same to a person and to the model card.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write

RECORD_NAME = "dictembed.json"
LEGACY_RECORD_NAME = "defsent.json"
RECORD_VERSION = 2


def record_path(folder: str | Path) -> Path | None:
    """The record file of a model folder (the legacy name as a fallback), or None if it has none."""
    for name in (RECORD_NAME, LEGACY_RECORD_NAME):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


@dataclass
class RunRecord:
    """What a saved model is and how it was made.

    `config` is the full resolved run configuration (`RunConfig.to_dict()`); `run` is the part of it that
    determines this run's weights and dev figures (with lr, seed and the entry space's fingerprint): a rerun
    reuses the saved model only when its `run` is equal. `encoder` holds the encoder's own settings.
    """

    method: str | None = None
    base_model: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    lr: float | None = None
    seed: int | None = None
    pst_step: int | None = None
    entry_space: str | None = None
    entry_encoder: str | None = None  # the model that built the entry space (base model, or a PST step's)
    data: str | None = None
    dev: dict[str, float] = field(default_factory=dict)
    throughput: float | None = None
    train_examples: int | None = None
    final_loss: float | None = None
    details: dict[str, Any] = field(default_factory=dict)  # method-specific counts (triplets, skips)
    selection: dict[str, Any] = field(default_factory=dict)
    encoder: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """A record from its JSON form, version 1 or 2; keys it does not know go to `details`."""
        known = {f.name for f in fields(cls)}
        record = cls(**{k: v for k, v in data.items() if k in known})
        record.details.update({k: v for k, v in data.items() if k not in known})
        record.version = int(data.get("version", 1))
        return record

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, folder: str | Path, required: bool = False) -> RunRecord:
        """The record of a model folder; an empty record when it has none (an error if `required`)."""
        path = record_path(folder)
        if path is None:
            if required:
                raise DictEmbedError(f"{folder} is not a dictembed model folder ({RECORD_NAME} missing)")
            return cls(version=0)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DictEmbedError(f"{path}: corrupt run record ({err})") from None
        if not isinstance(data, dict):
            raise DictEmbedError(f"{path}: corrupt run record (a JSON object expected)")
        return cls.from_dict(data)

    def save(self, folder: str | Path) -> Path:
        """Write the record as the folder's `dictembed.json` (atomically)."""
        self.version = RECORD_VERSION
        return atomic_write(Path(folder) / RECORD_NAME, json.dumps(self.to_dict(), indent=2, default=str))

    @property
    def exists(self) -> bool:
        """False for the empty record of a folder that has none."""
        return self.version > 0
