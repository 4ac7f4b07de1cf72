"""Training presets: per method, the settings each preset stands for.

`paper` is each paper's recipe: the method's options dataclass defaults and its recipe's defaults for the
shared options. `best` is the configuration measured best on the embedded all-MiniLM-L6-v2 (docs/results.md),
each recipe's `best`, written as changes to `paper`. Explicit settings always win over the preset (`resolve`).
Keys are `RunConfig` field names or the method's own option names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from dictembed.recipes.registry import METHODS, get_recipe

PRESETS = ("paper", "best")
DEFAULT_METHOD = "defsent-plus"  # the method that measured best (docs/results.md)
DEFAULT_PRESET = "best"


def own_options(method: str) -> list[str]:
    """The option names of `method`'s own options dataclass."""
    return [f.name for f in fields(get_recipe(method).options)]


def preset_settings(method: str, preset: str) -> dict[str, Any]:
    """The settings `preset` gives `method`: its own options and its defaults of the shared ones."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    recipe = get_recipe(method)
    paper = {f.name: f.default for f in fields(recipe.options)}
    paper.update({k: list(v) if isinstance(v, list) else v for k, v in recipe.defaults.items()})
    return {**paper, **recipe.best} if preset == "best" else paper


def not_settable(method: str, given: Mapping[str, Any]) -> list[str]:
    """The given (not None) method options that belong to other methods, not to `method`."""
    others = {name for m in METHODS if m != method for name in own_options(m)}
    return [k for k, v in given.items() if v is not None and k in others - set(own_options(method))]


def resolve(method: str, preset: str, given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The preset's settings with every given (not None) setting on top, and the keys the given ones changed.

    Raises ValueError for an option of another method (see `not_settable`).
    """
    if refused := not_settable(method, given):
        raise ValueError(f"method {method} does not take the setting(s) {', '.join(refused)}")
    settings = preset_settings(method, preset)
    overridden = [k for k in settings if given.get(k) is not None and given[k] != settings[k]]
    settings.update({k: v for k, v in given.items() if v is not None})
    return settings, overridden


def describe(settings: Mapping[str, Any]) -> str:
    """`key=value` pairs on one line, e.g. "pooling=mean pooler=none lrs=[0.0001]"."""
    return " ".join(f"{k}={_show(v)}" for k, v in settings.items())


def default_help(key: str) -> str:
    """What a setting defaults to under each method and preset, for the flag's help text."""
    parts = []
    for method in METHODS:
        values = {p: preset_settings(method, p).get(key) for p in PRESETS}
        if values["paper"] is None:
            continue
        if values["paper"] == values["best"]:
            shown = _show(values["paper"])
        else:
            shown = " / ".join(f"{_show(v)} ({p})" for p, v in values.items())
        parts.append(f"{method} {shown}")
    return "default: from --preset: " + "; ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    if value == "":
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)
