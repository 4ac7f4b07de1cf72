"""The run record saved beside every model (`dictembed.json`): a typed, versioned `RunRecord`.

`config` is the run configuration in its JSON form. Version 2 nests the method's own options under
`config["options"]`; version 1 (models saved under the package's former name as `defsent.json`, and the earliest
saves) kept every option flat in `config`. The record imports no recipe: `recipes.config.RunConfig.of_record`
turns its config into a method's typed options. Where a record lives in a model folder is
`dictembed.model_folder`'s business (`read_record`, `write_record`).

A published model's record names no path of the machine it was trained on (`RunRecord.portable`): a local
model folder or dictionary file is recorded by its public name (`paths.public_name`), listed in `sources` with
what kind of local source it was (and a dictionary file's SHA-256), so that readers know it is no Hub name.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.paths import EMBEDDED_MODEL, default_model, public_name
from dictembed.pooling_names import ENCODER_POOLINGS, POOLINGS

RECORD_VERSION = 2

NUMBER = (int, float)
# The JSON types of each field (null is allowed for all), and of the settings under "encoder": a value of another
# type is a damaged record, refused by name rather than failing later where the value is used.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("method", "base_model", "entry_space", "entry_encoder", "data"), (str,)),
    **dict.fromkeys(("config", "run", "dev", "details", "selection", "encoder", "sources", "ranking"), (dict,)),
    **dict.fromkeys(("lr", "throughput", "final_loss"), NUMBER),
    **dict.fromkeys(("seed", "pst_step", "train_examples"), (int,)),
}
ENCODER_TYPES: dict[str, tuple[type, ...]] = {
    "pooling": (str,),
    "modules": (list,),
    "max_length": NUMBER,  # its value is checked against the model when it is loaded (`model_window.fit_max_length`)
    "normalize": (bool,),
    "dim": (int,),
}


def check_types(data: dict[str, Any]) -> None:
    """Refuse a record whose fields (or encoder settings) have the wrong JSON type, or an encoder pooling no encoder
    takes (`pooling_names.ENCODER_POOLINGS`), naming the first."""
    encoder = data.get("encoder")
    pooling = encoder.get("pooling") if isinstance(encoder, dict) else None
    if isinstance(pooling, str) and pooling not in ENCODER_POOLINGS:
        raise DictEmbedError(f"encoder.pooling is {pooling!r:.60}, no pooling; choose from {', '.join(POOLINGS)}")
    settings = {f"encoder.{k}": v for k, v in encoder.items()} if isinstance(encoder, dict) else {}
    expected = {**FIELD_TYPES, **{f"encoder.{k}": kinds for k, kinds in ENCODER_TYPES.items()}}
    for key, value in {**data, **settings}.items():
        kinds = expected.get(key)
        if kinds is None or value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # JSON true is no number
            names = " or ".join(kind.__name__ for kind in kinds)
            raise DictEmbedError(f"{key} is {type(value).__name__} {value!r:.60}, not {names}")


def version_2(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run configuration in version 2's names: version 1's one `temperature` becomes the two it was
    (`entry_temperature` of the entry logits, `gloss_temperature` of GR-BERT's InfoNCE)."""
    config = dict(config)
    if "temperature" in config:
        temperature = config.pop("temperature")
        for name in ("entry_temperature", "gloss_temperature"):
            config.setdefault(name, temperature)
    return config


@dataclass
class RunRecord:
    """What a saved model is and how it was made.

    `config` is the full resolved run configuration as JSON (None for a model that was not trained); `run` is the
    part that determines this run's weights and dev figures (with lr, seed and the entry space's fingerprint): a
    rerun reuses the saved model only when its `run` is equal. `encoder` holds the encoder's own settings.
    """

    method: str | None = None
    base_model: str | None = None
    config: dict[str, Any] | None = None
    run: dict[str, Any] = field(default_factory=dict)
    lr: float | None = None
    seed: int | None = None
    pst_step: int | None = None
    entry_space: str | None = None
    entry_encoder: str | None = None  # the model that built the entry space (base model, or a PST step's)
    data: str | None = None
    dev: dict[str, float] = field(default_factory=dict)
    throughput: float | None = None  # examples/s over the steps all processes of the run trained (`Trainer.throughput`)
    train_examples: int | None = None
    final_loss: float | None = None
    details: dict[str, Any] = field(default_factory=dict)  # method-specific counts (triplets, skips)
    selection: dict[str, Any] = field(default_factory=dict)
    encoder: dict[str, Any] = field(default_factory=dict)
    # the local sources the portable record names, by setting: {"dictionary": [{"name", "local", "sha256"}]}
    sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # the reverse dictionary's score as this folder is searched unless told otherwise (`search_options.Ranking`'s
    # settings by name; empty: its defaults)
    ranking: dict[str, Any] = field(default_factory=dict)
    version: int = RECORD_VERSION

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        """A record from its JSON form, version 1 or 2; keys it does not know go to `details`."""
        check_types(data)
        known = {f.name for f in fields(cls)}
        record = cls(**{k: v for k, v in data.items() if k in known and k != "config"})
        record.config = copy.deepcopy(data["config"]) if data.get("config") else None
        record.details.update({k: v for k, v in data.items() if k not in known})
        record.version = int(data.get("version", 1))
        return record

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        data = asdict(self)
        data["config"] = data["config"] or {}
        return data

    @classmethod
    def read(cls, path: Path) -> RunRecord:
        """The record in the file `path`; a damaged one is a one-line error naming it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:  # RecursionError: nested too deep
            raise DictEmbedError(f"{path}: corrupt run record ({err})") from None
        if not isinstance(data, dict):
            raise DictEmbedError(f"{path}: corrupt run record (a JSON object expected)")
        if not data.keys() & {f.name for f in fields(cls)}:  # e.g. {}: read as defaults, it reset the saved ranking
            raise DictEmbedError(f"{path}: bad run record (none of the fields a record holds)")
        try:
            return cls.from_dict(data)
        except DictEmbedError as err:
            raise DictEmbedError(f"{path}: bad run record ({err})") from None
        except (TypeError, ValueError, AttributeError) as err:
            raise DictEmbedError(f"{path}: corrupt run record ({type(err).__name__}: {err})") from None

    def to_json(self) -> str:
        """The record as the text of a record file (this version's)."""
        self.version = RECORD_VERSION
        return json.dumps(self.to_dict(), indent=2, default=str)

    @property
    def settings(self) -> dict[str, Any]:
        """Every setting of the run configuration by name, the method's own options beside the shared ones (both
        record versions); empty for a model that was not trained."""
        config = version_2(self.config or {})
        options = config.get("options")
        return {**{k: v for k, v in config.items() if k != "options"}, **(options if isinstance(options, dict) else {})}

    @property
    def exists(self) -> bool:
        """False for the empty record of a folder that has none."""
        return self.version > 0

    def local_source(self, setting: str, name: str | None) -> str | None:
        """What `name`, recorded for `setting` ("model", "dictionary", ...), was on the machine that trained the
        model: "folder", "file" or "embedded" (the embedded default model), or None (not a local source)."""
        for entry in self.source_entries(setting):
            if name is not None and entry["name"] == name:
                return str(entry.get("local") or "") or None
        return None

    def source_entries(self, setting: str) -> list[dict[str, Any]]:
        """The entries `sources` lists for `setting` that are well formed (a mapping with a name); a record edited by
        hand into another shape lists none."""
        entries = self.sources.get(setting) if isinstance(self.sources, dict) else None
        listed = entries if isinstance(entries, list) else []
        return [entry for entry in listed if isinstance(entry, dict) and isinstance(entry.get("name"), str)]

    def portable(self, output: str | Path | None = None) -> RunRecord:
        """A copy that names no path of this machine, for a published model: each local model folder, dictionary
        file and WordNet, cache or output folder by its public name (`paths.public_name`; the embedded default
        model by its Hub name), each listed in `sources` (a dictionary file with its SHA-256), and the paths of
        the run folders beside `output` relative to `output`'s folder (e.g. `model-runs/step1/lr2e-05-seed0/model`)."""
        record = copy.deepcopy(self)
        sources: dict[str, list[dict[str, Any]]] = {}
        anchor = Path(output).parent if output is not None else None

        def name(setting: str, value: Any) -> Any:
            if not isinstance(value, str) or not value:
                return value
            parts = []
            for part in value.split(","):
                kind = _local_kind(setting, part.strip())
                parts.append(_portable_part(part, kind, anchor))
                if kind is not None and setting not in NOT_SOURCES:
                    entry = {"name": parts[-1].strip(), "local": kind, **_fingerprint(part.strip(), kind)}
                    if entry not in sources.setdefault(setting, []):
                        sources[setting].append(entry)
            return ",".join(parts)

        for setting in ("model", "dictionary", "wordnet_dir", "cache_dir", "output"):
            if record.config is not None and setting in record.config:
                record.config[setting] = name(setting, record.config[setting])
        for options in (dict(record.config or {}).get("options"), record.run.get("options")):
            for setting in FILE_OPTIONS:
                if isinstance(options, dict) and setting in options:
                    options[setting] = name(setting, options[setting])
        record.base_model = name("model", record.base_model)
        record.entry_encoder = name("model", record.entry_encoder)
        record.data = name("dictionary", record.data)
        for setting in ("model", "dictionary", "wordnet_dir"):
            if setting in record.run:
                record.run[setting] = name(setting, record.run[setting])
        for step in record.selection.get("pst", []) if isinstance(record.selection.get("pst"), list) else []:
            if isinstance(step, dict) and "path" in step:
                step["path"] = name("model", step["path"])
        for setting, entries in sources.items():  # what an earlier `portable` listed stays (with its SHA-256)
            listed = record.sources.get(setting)
            listed = record.sources[setting] = listed if isinstance(listed, list) else []
            known = {entry.get("name") for entry in listed if isinstance(entry, dict)}
            listed += [entry for entry in entries if entry["name"] not in known]
        return record


# The settings whose value is always a path; and those of them that are no source of the model (not in `sources`).
PATH_SETTINGS = ("wordnet_dir", "cache_dir", "output")
NOT_SOURCES = ("cache_dir", "output")
FILE_OPTIONS = ("descriptions", "second_dictionary")  # a method's options that may name a file of this machine


def _local_kind(setting: str, part: str) -> str | None:
    """What a part of a setting's value is on this machine: "embedded" (the embedded default model), "folder"
    or "file", or None (a Hub name, a named dictionary, an empty part)."""
    if not part:
        return None
    path = Path(part).expanduser()
    if setting == "model":
        if not (path.is_absolute() or path.exists()):
            return None  # a Hub name
        try:
            embedded = Path(default_model()).resolve() == path.resolve()
        except Exception:  # the embedded model's package is optional here: not the embedded model
            embedded = False
        return "embedded" if embedded else "folder" if path.is_dir() else "file"
    if setting in FILE_OPTIONS:
        return "file" if path.is_file() else None  # else a name (the everyday corpus, GCIDE)
    if setting == "dictionary":
        from dictembed.dictionary.load import SOURCES  # the named dictionaries (wordnet, gcide, ...)

        return None if part.lower() in SOURCES else "file"
    return "folder" if setting in PATH_SETTINGS else None


def _portable_part(part: str, kind: str | None, anchor: Path | None) -> str:
    """One part of a setting's value as a published record keeps it: a run folder beside the output relative to
    the output's folder, the embedded model by its Hub name, any other absolute path by its file name."""
    if kind is None:
        return part
    stripped = part.strip()
    if kind == "embedded":
        return EMBEDDED_MODEL
    path = Path(stripped).expanduser()
    if anchor is not None and path.is_absolute() == anchor.is_absolute():
        try:
            relative = path.relative_to(anchor)
        except ValueError:
            relative = None
        if relative is not None and len(relative.parts) > 1 and relative.parts[0].endswith("-runs"):
            return relative.as_posix()
    return public_name(stripped)


def update_sampled(digest: Any, path: Path, samples: int = 16, block: int = 1 << 16) -> None:
    """Feed `digest` (a hashlib object) a file's size and `samples` blocks of `block` bytes spread over it, and its
    last block (b"absent" for a missing file): a check that a large file is the one it was, reading about `samples`
    x `block` bytes of it rather than all."""
    if not path.is_file():
        digest.update(b"absent")
        return
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as f:
        for at in sorted({size * i // samples for i in range(samples)} | {max(size - block, 0)}):
            f.seek(at)
            digest.update(f.read(block))


def file_sha256(path: str | Path) -> str | None:
    """The SHA-256 of a file (read in blocks of 1 MiB), or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(Path(path).expanduser(), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _fingerprint(part: str, kind: str) -> dict[str, str]:
    """{"sha256": ...} of a local file, else {}."""
    sha = file_sha256(part) if kind == "file" else None
    return {"sha256": sha} if sha else {}
