"""How a method's options are declared: `option(...)`, a dataclass field with its help, choices and whether it changes
a run's result, and `MethodOptions`, the base of each recipe's options dataclass. Torch-free and recipe-free, so that
a recipe declares its options without importing the configuration that collects them (`recipes.config`)."""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, ClassVar, TypeVar, cast

from dictembed.errors import DictEmbedError
from dictembed.texts import bounds_in_words, is_real_number, is_whole_number


def option(
    default: Any = MISSING,
    help: str = "",  # noqa: A002 - the argparse word
    *,
    choices: tuple[str, ...] | None = None,
    run: bool = True,
    cli: bool = True,
    positive: bool = True,
    maximum: float | None = None,
    parse: Any = None,
    default_factory: Any = MISSING,
) -> Any:
    """A dataclass field with its command-line help and choices. `run=False` marks options that do not change
    a single (lr, seed) run's weights or dev figures (the grid, the output folder, ...): a finished run is
    reused whatever they are. `cli=False` keeps an option off the command line. A number must be > 0 (a whole
    number >= 1), or >= 0 with `positive=False`, and at most `maximum` when given. `parse` converts and checks a
    command-line value (an argparse type). `check_option` holds every value to these."""
    metadata = {
        "help": help,
        "choices": choices,
        "run": run,
        "cli": cli,
        "positive": positive,
        "maximum": maximum,
        "parse": parse,
    }
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class MethodOptions:
    """Base of every method's options dataclass."""

    # options of former versions by name, each with the value under which it changed nothing: a saved
    # configuration that holds one loads without it (`RunConfig.from_dict`)
    removed: ClassVar[dict[str, Any]] = {}

    def validate(self, method: str) -> None:
        """Check every option (`check_option`), keeping each as the run keeps it."""
        check_options(self, method)


def check_options(settings: Any, owner: str, skip: tuple[str, ...] = ()) -> None:
    """`check_option` on every field of the dataclass `settings` but `skip`, each set to the value it returns."""
    for f in fields(settings):
        if f.name not in skip:
            setattr(settings, f.name, check_option(f, getattr(settings, f.name), owner))


def check_option(f: Field, value: Any, owner: str) -> Any:
    """`value` as option `f` keeps it, or a one-line DictEmbedError naming `owner: f.name` and the value: one of
    its choices; for its declared type a bool, a whole number or a finite number in its range (`option`), a
    non-empty list of them, a string (a path too) that its `parse` takes or that is not blank; None only where
    the type allows it. Numbers come back as plain ints and floats (a numpy one too)."""
    kind, name = str(f.type), f"{owner}: {f.name}"
    if value is None and kind.endswith("| None"):
        return None
    kind = kind.removesuffix(" | None")
    if choices := f.metadata.get("choices"):
        if not isinstance(value, str) or value not in choices:
            raise DictEmbedError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise DictEmbedError(f"{name} must be True or False, got {value!r}")
        return value
    bounds = (f.metadata.get("positive", True), f.metadata.get("maximum"))
    if kind in ("int", "float"):
        if (number := _number(kind, value, *bounds)) is None:
            raise DictEmbedError(f"{name} must be {_number_kind(kind, *bounds)}, got {value!r}")
        return number
    if kind in ("list[int]", "list[float]"):
        items = value.tolist() if hasattr(value, "tolist") else value  # a numpy array
        items = list(items) if isinstance(items, list | tuple | range) else ()
        checked = [_number(kind[5:-1], item, *bounds) for item in items]
        if not checked or None in checked:
            each = _number_kind(kind[5:-1], *bounds)
            raise DictEmbedError(f"{name} must be a non-empty list, each {each}, got {value!r}")
        if (repeated := next((item for i, item in enumerate(checked) if item in checked[:i]), None)) is not None:
            # one run a value: a repeat (1e-3 and 0.001) trained once and counted twice in the selection
            raise DictEmbedError(f"{name} lists {repeated!r} more than once; give each value once")
        return checked
    if kind == "str":
        return _text(f, os.fspath(value) if isinstance(value, os.PathLike) else value, name)
    return value


def _number(kind: str, value: Any, positive: bool, maximum: float | None) -> int | float | None:
    """`value` as a plain int (`kind` "int") or float in the range of an option, None when it is not one."""
    if kind == "int":
        fits = is_whole_number(value, 1 if positive else 0, None if maximum is None else int(maximum))
        return int(value) if fits else None
    fits = is_real_number(value, 0, math.inf if maximum is None else maximum, above=positive)
    return float(cast(float, value)) if fits else None


def _number_kind(kind: str, positive: bool, maximum: float | None) -> str:
    """What `_number` takes, in words: "a whole number >= 1", "a number from 0 to 1"."""
    whole = kind == "int"
    noun = "a whole number" if whole else "a number"
    return f"{noun} {bounds_in_words(whole, int(positive and whole), positive and not whole, maximum)}"


def _text(f: Field, value: Any, name: str) -> str:
    """A string option: what its `parse` makes of it (its error, one line), else any string that is not blank."""
    if not isinstance(value, str):
        raise DictEmbedError(f"{name} must be a string, got {value!r}")
    if (parse := f.metadata.get("parse")) is not None:
        try:
            return str(parse(value))
        except (ValueError, argparse.ArgumentTypeError, DictEmbedError) as err:
            raise DictEmbedError(f"{name} {value!r}: {err}") from None
    if not value.strip():
        raise DictEmbedError(f"{name} must not be empty, got {value!r}")
    return value


Options = TypeVar("Options", bound=MethodOptions)
