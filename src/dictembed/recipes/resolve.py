"""The run configuration of a training command: a saved configuration, or a preset's settings of a method,
with the settings given explicitly on top. Also the one place a run record's configuration is read back."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.model_folder import read_record
from dictembed.paths import default_model, public_name
from dictembed.recipes import presets
from dictembed.recipes.config import RunConfig
from dictembed.record import FILE_OPTIONS, RunRecord, file_sha256

log = logging.getLogger(__name__)

# Settings a saved configuration does not carry over to a rerun: where and how this run writes, and the
# device, compute precision (saved resolved: bf16 from a CPU with AMX would be emulated, slowly, on one without;
# "auto" resolves again, `--precision` still sets it) and entry-space cache, which are this machine's choice.
NOT_REUSED = ("output", "resume", "overwrite", "preset", "device", "precision", "cache_dir")
# Model names of the e5 family (intfloat/e5-*, multilingual-e5-small, a folder named after one), which were
# contrastively trained at temperature 0.01: cosine entry logits want that temperature (docs/methods.md).
E5_NAME = re.compile(r"(^|[/_.-])e5([/_.-]|$)", re.IGNORECASE)
E5_TEMPERATURE = 0.01


class ConfigError(DictEmbedError):
    """Settings that do not fit together (a usage error on the command line)."""


@dataclass
class ResolvedConfig:
    """A resolved run configuration. `settings` are the preset's settings with the given ones on top and
    `overridden` the given settings that changed the preset's; both are empty for a saved configuration."""

    config: RunConfig
    settings: dict[str, Any] = field(default_factory=dict)
    overridden: list[str] = field(default_factory=list)


def saved_record(path: str | Path) -> tuple[RunRecord, RunConfig]:
    """The run record of a model folder (`path`: the folder or its dictembed.json) and its typed configuration,
    which it must hold."""
    # a file is read itself, whatever its name (a record copied and edited as my-run.json), never its neighbour
    record = RunRecord.read(Path(path)) if Path(path).is_file() else read_record(path, required=True)
    if record.config is None:
        raise DictEmbedError(f"{path}: the model's record holds no run configuration (it was not trained here)")
    try:
        return record, RunConfig.from_dict(record.config, strict=True)
    except (DictEmbedError, TypeError, ValueError, AttributeError) as err:
        raise DictEmbedError(f"{path}: the run configuration cannot be run again: {err}") from None


def saved_config(path: str | Path) -> RunConfig:
    """The configuration saved in a model folder's run record (`path`: the folder or its dictembed.json)."""
    return saved_record(path)[1]


def local_settings(
    record: RunRecord, reused: dict[str, Any], given: Mapping[str, Any], name: Callable[[str], str] = str
) -> dict[str, Any]:
    """`reused` (a saved configuration's settings) for a rerun on this machine, where the record names local
    sources of the machine that trained it by their public names (`RunRecord.portable`): the embedded model is
    this machine's copy, a WordNet folder is this machine's own (unless given); a local model folder, dictionary
    file or file a method's option names (`--descriptions`) that is not `given` again is a ConfigError naming its
    flag (but a file of that name in the current folder with the recorded SHA-256 is used); a given file that is
    not the recorded one (its SHA-256 differs) is warned about."""
    settings = dict(reused)
    model = settings.get("model")
    if "model" not in given and record.local_source("model", model) == "embedded":
        settings["model"] = default_model()
    elif "model" not in given and record.local_source("model", model):
        raise ConfigError(
            f"the saved configuration's model {model} is a local folder of the machine it was trained on; "
            f"give its path with {name('model')}"
        )
    if "wordnet_dir" not in given and record.local_source("wordnet_dir", settings.get("wordnet_dir")):
        settings["wordnet_dir"] = None  # this machine's WordNet
    for setting in ("dictionary", *FILE_OPTIONS):
        check_local_files(record, settings, given, setting, name)
    return settings


def check_local_files(
    record: RunRecord, settings: dict[str, Any], given: Mapping[str, Any], setting: str, name: Callable[[str], str]
) -> None:
    """`local_settings` for a setting that may name files (the dictionary, a method's `FILE_OPTIONS`): a recorded
    file not given again is found only where its name, here, is that very file (the same SHA-256), else a
    ConfigError naming the flag; a given file that is not the recorded one is warned about."""
    recorded = {entry["name"]: entry.get("sha256") for entry in record.source_entries(setting)}
    label = "dictionary" if setting == "dictionary" else setting.replace("_", " ")
    if setting not in given:
        parts = str(settings.get(setting) or "").split(",")
        local = [part for part in parts if part in recorded and file_sha256(part) != recorded[part]]
        if local:
            raise ConfigError(
                f"the saved configuration's {label} {', '.join(local)} is a file of the machine it was trained "
                f"on; give its path with {name(setting)}"
            )
        return
    for part in str(given[setting] or "").split(","):
        wanted = recorded.get(public_name(part.strip()))
        if wanted and Path(part.strip()).expanduser().is_file() and file_sha256(part.strip()) != wanted:
            log.warning("%s is not the %s file the saved model was trained on (its SHA-256 differs)", part, label)


def record_config(record: RunRecord) -> dict[str, Any]:
    """The run configuration a record holds, in its JSON form (empty for a model that was not trained)."""
    config = RunConfig.of_record(record)
    return config.to_dict() if config is not None else dict(record.config or {})


def resolve_train_config(
    method: str | None,
    preset: str | None,
    given: Mapping[str, Any],
    *,
    output: str,
    saved: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    name: Callable[[str], str] = str,
) -> ResolvedConfig:
    """The configuration of a run: the `saved` one (a model folder or its dictembed.json) or the `preset`'s
    settings of `method` (None: the default method; `preset` None: the default preset), with the `given` settings
    (not None) on top. Settings that do not fit, and a `preset` beside a `saved` configuration (which keeps its
    own), are a `ConfigError`; `name` spells a setting in its message (the command line: its flag)."""
    given = {k: v for k, v in given.items() if v is not None}
    settings: dict[str, Any] = {}
    overridden: list[str] = []
    default = preset or presets.DEFAULT_PRESET
    chosen_preset: str | None = default  # a saved configuration's own, which may be None
    if saved:
        record, config = saved_record(saved)
        if preset is not None:
            raise ConfigError(
                f"{name('preset')} {preset}: the saved configuration keeps its own settings (preset "
                f"{config.preset or 'none'}); give the settings to change instead"
            )
        if method not in (None, config.method):
            raise ConfigError(f"{name('method')} {method} differs from the saved configuration's {config.method}")
        reused = local_settings(record, {k: v for k, v in config.flat().items() if k not in NOT_REUSED}, given, name)
        method, chosen_preset, chosen = config.method, config.preset, {**reused, **given}
    else:
        method = method or presets.DEFAULT_METHOD
        if refused := presets.not_settable(method, given):
            raise ConfigError(f"{', '.join(map(name, refused))}: not an option of {name('method')} {method}")
        settings, overridden = presets.resolve(method, default, given)
        chosen = settings
        warn_temperature(settings, given, name)
    try:
        config = RunConfig.create(
            method, preset=chosen_preset, output=output, resume=resume, overwrite=overwrite, **chosen
        )
    except DictEmbedError as err:
        raise ConfigError(str(err)) from None
    return ResolvedConfig(config, dict(settings), overridden)


def warn_temperature(settings: Mapping[str, Any], given: Mapping[str, Any], name: Callable[[str], str] = str) -> None:
    """Warn when an e5 model (by its name) gets cosine entry logits at a temperature it was not trained with and
    none was given: at the preset's 0.05 DefSent+ lowered e5's STS avg, at 0.01 raised it (docs/results.md)."""
    model = str(settings.get("model") or "")
    temperature = settings.get("entry_temperature")
    if settings.get("similarity") != "cosine" or "entry_temperature" in given or temperature == E5_TEMPERATURE:
        return
    if E5_NAME.search(model):
        log.warning(
            "%s looks like an e5 model, trained at temperature %g; the entry temperature is %g: pass %s %g "
            "(docs/methods.md#presets)",
            model,
            E5_TEMPERATURE,
            temperature,
            name("entry_temperature"),
            E5_TEMPERATURE,
        )
