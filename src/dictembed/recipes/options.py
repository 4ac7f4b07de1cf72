"""How a method's options are declared: `option(...)`, a dataclass field with its help, choices and whether it changes
a run's result, and `MethodOptions`, the base of each recipe's options dataclass. Torch-free and recipe-free, so that
a recipe declares its options without importing the configuration that collects them (`recipes.config`)."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from dictembed.errors import DictEmbedError


def option(
    default: Any = MISSING,
    help: str = "",  # noqa: A002 - the argparse word
    *,
    choices: tuple[str, ...] | None = None,
    run: bool = True,
    cli: bool = True,
    positive: bool = True,
    parse: Any = None,
    default_factory: Any = MISSING,
) -> Any:
    """A dataclass field with its command-line help and choices. `run=False` marks options that do not change
    a single (lr, seed) run's weights or dev figures (the grid, the output folder, ...): a finished run is
    reused whatever they are. `cli=False` keeps an option off the command line. A number must be > 0, or
    >= 0 with `positive=False`. `parse` converts and checks a command-line value (an argparse type)."""
    metadata = {"help": help, "choices": choices, "run": run, "cli": cli, "positive": positive, "parse": parse}
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
        """Check every option with choices against them."""
        for f in fields(self):
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise DictEmbedError(
                    f"{method}: {f.name} must be one of {', '.join(choices)}, got {getattr(self, f.name)!r}"
                )


Options = TypeVar("Options", bound=MethodOptions)
