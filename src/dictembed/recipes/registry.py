"""The methods `--method` names, each mapped to its recipe. A new method is a recipe file plus one line here.

Each recipe carries what is known about its method: its options, presets, paper and model-card keys
(`dictembed.recipes.run.Recipe`). A recipe's module is imported when the recipe is first asked for (reading a
run record's config asks for it), so that this table itself imports none of the training code.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any

from dictembed.errors import DictEmbedError

RECIPES: dict[str, str] = {
    "defsent": "dictembed.recipes.defsent:DefSent",
    "defsent-plus": "dictembed.recipes.defsent_plus:DefSentPlus",
    "gr-bert": "dictembed.recipes.gr_bert:GRBert",
}
METHODS = tuple(RECIPES)


@dataclass(frozen=True)
class Paper:
    """A method's display name and paper; `bibtex` holds only fields checked against the ACL Anthology / arXiv."""

    name: str
    reference: str
    bibtex: str


@cache
def get_recipe(method: str) -> Any:
    """The recipe (an instance of a `dictembed.recipes.run.Recipe` subclass) of `method`."""
    if method not in RECIPES:
        raise DictEmbedError(f"unknown method {method!r}; choose from {', '.join(RECIPES)}")
    module, name = RECIPES[method].split(":")
    return getattr(import_module(module), name)()


def find_recipe(method: str | None) -> Any | None:
    """The recipe of `method`, or None for no method or one this version does not know (a foreign record)."""
    key = str(method or "").lower()
    return get_recipe(key) if key in RECIPES else None


def citation(method: str | None) -> str | None:
    """The BibTeX entry of a method's paper, or None for an unknown method."""
    recipe = find_recipe(method)
    return recipe.paper.bibtex if recipe is not None else None
