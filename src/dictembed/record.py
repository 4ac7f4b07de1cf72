"""The run record saved beside every model (`dictembed.json`): a typed, versioned `RunRecord`.

`config` is a typed `RunConfig`. Version 2 nests the method's own options under `config["options"]`;
version 1 (models saved under the package's former name as `defsent.json`, and the earliest saves) kept
every option flat in `config`. `RunRecord.load` reads both.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write
from dictembed.recipes.config import RunConfig

log = logging.getLogger(__name__)

RECORD_NAME = "dictembed.json"
LEGACY_RECORD_NAME = "defsent.json"
SPACE_DIR = "entry_space"  # the saved entry space inside a model folder (dictembed.entry_space)
RECORD_VERSION = 2

NUMBER = (int, float)
# The JSON types of each field (null is allowed for all), and of the settings under "encoder": a value of another
# type is a damaged record, refused by name rather than failing later where the value is used.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("method", "base_model", "entry_space", "entry_encoder", "data"), (str,)),
    **dict.fromkeys(("run", "dev", "details", "selection", "encoder"), (dict,)),
    **dict.fromkeys(("lr", "throughput", "final_loss"), NUMBER),
    **dict.fromkeys(("seed", "pst_step", "train_examples"), (int,)),
}
ENCODER_TYPES: dict[str, tuple[type, ...]] = {
    "pooling": (str,),
    "modules": (list,),
    "max_length": NUMBER,  # its value is checked against the model when it is loaded (`loading.fit_max_length`)
    "normalize": (bool,),
    "dim": (int,),
}


def check_types(data: dict[str, Any]) -> None:
    """Refuse a record whose fields (or encoder settings) have the wrong JSON type, naming the first."""
    encoder = data.get("encoder")
    settings = {f"encoder.{k}": v for k, v in encoder.items()} if isinstance(encoder, dict) else {}
    expected = {**FIELD_TYPES, **{f"encoder.{k}": kinds for k, kinds in ENCODER_TYPES.items()}}
    for key, value in {**data, **settings}.items():
        kinds = expected.get(key)
        if kinds is None or value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # JSON true is no number
            names = " or ".join(kind.__name__ for kind in kinds)
            raise DictEmbedError(f"{key} is {type(value).__name__} {value!r:.60}, not {names}")


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

    `config` is the full resolved run configuration (None for a model that was not trained); `run` is the part that
    determines this run's weights and dev figures (with lr, seed and the entry space's fingerprint): a rerun
    reuses the saved model only when its `run` is equal. `encoder` holds the encoder's own settings.
    """

    method: str | None = None
    base_model: str | None = None
    config: RunConfig | None = None
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
        check_types(data)
        known = {f.name for f in fields(cls)}
        record = cls(**{k: v for k, v in data.items() if k in known and k != "config"})
        if data.get("config"):
            try:
                record.config = RunConfig.from_dict(data["config"])
            except (DictEmbedError, TypeError, ValueError, AttributeError) as err:  # e.g. another version's method
                log.warning("the run configuration is not one this version reads (%s); it is kept as read", err)
                record.details["config"] = data["config"]
        record.details.update({k: v for k, v in data.items() if k not in known})
        record.version = int(data.get("version", 1))
        return record

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the config's as `RunConfig.to_dict`)."""
        data = asdict(self)
        data["config"] = self.config.to_dict() if self.config is not None else data["details"].pop("config", {})
        return data

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
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:  # RecursionError: nested too deep
            raise DictEmbedError(f"{path}: corrupt run record ({err})") from None
        if not isinstance(data, dict):
            raise DictEmbedError(f"{path}: corrupt run record (a JSON object expected)")
        try:
            return cls.from_dict(data)
        except DictEmbedError as err:
            raise DictEmbedError(f"{path}: bad run record ({err})") from None
        except (TypeError, ValueError, AttributeError) as err:
            raise DictEmbedError(f"{path}: corrupt run record ({type(err).__name__}: {err})") from None

    def save(self, folder: str | Path) -> Path:
        """Write the record as the folder's `dictembed.json` (atomically)."""
        self.version = RECORD_VERSION
        return atomic_write(Path(folder) / RECORD_NAME, json.dumps(self.to_dict(), indent=2, default=str))

    @property
    def exists(self) -> bool:
        """False for the empty record of a folder that has none."""
        return self.version > 0
