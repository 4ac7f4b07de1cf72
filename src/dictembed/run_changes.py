"""How a run's identity (its configuration, lr, seed, stage and local files' prints) differs from a saved one, in
words: for a checkpoint that cannot be resumed (`changed_settings`) and a finished run that is trained again
(`setting_changes`). A key may hold a dot (a file name under `sources`), so a setting is a path of keys."""

from __future__ import annotations

from typing import Any


def differing_paths(
    saved: dict[str, Any], wanted: dict[str, Any], prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """The keys of two run configurations whose values differ, sorted, a nested key as its path of keys (a key
    may hold a dot: a file name under `sources`). An object one side lacks is compared key by key with nothing."""
    out: list[tuple[str, ...]] = []
    for key in sorted(set(saved) | set(wanted)):
        a, b = saved.get(key), wanted.get(key)
        lacking = (key not in saved and isinstance(b, dict) and b) or (key not in wanted and isinstance(a, dict) and a)
        if (isinstance(a, dict) and isinstance(b, dict)) or lacking:
            out += differing_paths(a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}, (*prefix, key))
        elif a != b:
            out.append((*prefix, key))
    return out


_ABSENT = object()
SOURCE_KINDS = {"dictionary": "dictionary file", "descriptions": "descriptions file", "model": "model weights file"}


def _lookup(config: dict[str, Any], path: tuple[str, ...]) -> object:
    """The value at `path` in a run configuration; `_ABSENT` where a key is missing."""
    found: object = config
    for key in path:
        found = found.get(key, _ABSENT) if isinstance(found, dict) else _ABSENT
    return found


def source_change(path: tuple[str, ...], saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """What changed of a local file a run's identity holds the SHA-256 of (`sources`, keyed "SETTING NAME": see
    `recipes.run.source_prints`), in words; None for any other setting."""
    if len(path) != 2 or path[0] != "sources":
        return None
    setting, _, name = path[1].partition(" ")
    file = f"{SOURCE_KINDS.get(setting, f'{setting} file')} {name or setting}"
    before, after = _lookup(saved, path), _lookup(now, path)
    if before is _ABSENT:
        return f"{file} is new to the run"
    if after is _ABSENT:
        return f"{file} is no longer part of the run"
    return f"the content of {file} changed: its SHA-256 differs"


def changed_settings(saved: object, now: dict[str, Any], most: int = 4) -> str:
    """The first `most` settings of a run's identity that differ from a saved checkpoint's (`differing_paths`),
    as ` (SETTING was A, now B; ...)`, a local file whose content changed as such (`source_change`); "" when the
    saved identity cannot be read so."""
    if not isinstance(saved, dict):
        return ""
    before: dict[str, Any] = saved

    def value(config: dict[str, Any], path: tuple[str, ...]) -> object:
        found = _lookup(config, path)
        return None if found is _ABSENT else found

    def shown(path: tuple[str, ...]) -> str:
        change = source_change(path, before, now)
        return change or f"{'.'.join(path)} was {value(before, path)!r}, now {value(now, path)!r}"

    paths = differing_paths(before, now)
    parts = [shown(path) for path in paths[:most]]
    return f" ({'; '.join(parts)}{'; ...' if len(paths) > most else ''})" if parts else ""


def setting_changes(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every setting of `now` that differs from `saved` (`differing_paths`) by its dotted name, a local file with
    what changed of it (`source_change`)."""
    named = []
    for path in differing_paths(saved, now):
        change = source_change(path, saved, now)
        named.append(".".join(path) + (f" ({change})" if change else ""))
    return named
