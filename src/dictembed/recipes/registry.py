"""The methods `--method` names, each mapped to its recipe. A new method is a recipe file plus one line here.

Each recipe carries what is known about its method: its options, presets, paper and model-card keys
(`dictembed.recipes.run.Recipe`; the paper and card keys from `recipes.papers`, which needs no recipe). A
recipe's module is imported when the recipe is first asked for (typing a run configuration asks for it), so that
this table itself imports none of the training code.
"""

from __future__ import annotations

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


@cache
def get_recipe(method: str) -> Any:
    """The recipe (an instance of a `dictembed.recipes.run.Recipe` subclass) of `method`."""
    if method not in RECIPES:
        raise DictEmbedError(f"unknown method {method!r}; choose from {', '.join(RECIPES)}")
    module, name = RECIPES[method].split(":")
    return getattr(import_module(module), name)()
