"""The run configuration of a training command: a saved configuration, or a preset's settings of a method,
with the settings given explicitly on top. Also the one place a run record's configuration is read back."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.recipes import presets
from dictembed.recipes.config import RunConfig
from dictembed.record import RunRecord

# Settings a saved configuration does not carry over to a rerun: where and how this run writes, and the
# device, which is this machine's choice.
NOT_REUSED = ("output", "resume", "overwrite", "preset", "device")


class ConfigError(DictEmbedError):
    """Settings that do not fit together (a usage error on the command line)."""


@dataclass
class ResolvedConfig:
    """A resolved run configuration. `settings` are the preset's settings with the given ones on top and
    `overridden` the given settings that changed the preset's; both are empty for a saved configuration."""

    config: RunConfig
    settings: dict[str, Any] = field(default_factory=dict)
    overridden: list[str] = field(default_factory=list)


def saved_config(path: str | Path) -> RunConfig:
    """The configuration saved in a model folder's run record (`path`: the folder or its dictembed.json)."""
    folder = Path(path).parent if Path(path).is_file() else Path(path)
    config = RunRecord.load(folder, required=True).config
    if config is None:
        raise DictEmbedError(f"{path}: the model's record holds no run configuration (it was not trained here)")
    return config


def record_config(record: RunRecord) -> dict[str, Any]:
    """The run configuration a record holds, in its JSON form (empty for a model that was not trained)."""
    return record.config.to_dict() if record.config is not None else {}


def resolve_train_config(
    method: str | None,
    preset: str,
    given: Mapping[str, Any],
    *,
    output: str,
    saved: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    name: Callable[[str], str] = str,
) -> ResolvedConfig:
    """The configuration of a run: the `saved` one (a model folder or its dictembed.json) or the `preset`'s
    settings of `method` (None: the default method), with the `given` settings (not None) on top. Settings
    that do not fit are a `ConfigError`; `name` spells a setting in its message (the command line: its flag)."""
    given = {k: v for k, v in given.items() if v is not None}
    settings: dict[str, Any] = {}
    overridden: list[str] = []
    chosen_preset: str | None = preset  # a saved configuration's own, which may be None
    if saved:
        config = saved_config(saved)
        if method not in (None, config.method):
            raise ConfigError(f"{name('method')} {method} differs from the saved configuration's {config.method}")
        reused = {k: v for k, v in config.flat().items() if k not in NOT_REUSED}
        method, chosen_preset, chosen = config.method, config.preset, {**reused, **given}
    else:
        method = method or presets.DEFAULT_METHOD
        if refused := presets.not_settable(method, given):
            raise ConfigError(f"{', '.join(map(name, refused))}: not an option of {name('method')} {method}")
        settings, overridden = presets.resolve(method, preset, given)
        chosen = settings
    try:
        config = RunConfig.create(
            method, preset=chosen_preset, output=output, resume=resume, overwrite=overwrite, **chosen
        )
    except DictEmbedError as err:
        raise ConfigError(str(err)) from None
    return ResolvedConfig(config, dict(settings), overridden)
