"""The methods `--method` names, each mapped to its recipe. A new method is a recipe file plus one line here."""

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


@cache
def get_recipe(method: str) -> Any:
    """The recipe (an instance of a `dictembed.recipes.run.Recipe` subclass) of `method`."""
    if method not in RECIPES:
        raise DictEmbedError(f"unknown method {method!r}; choose from {', '.join(RECIPES)}")
    module, name = RECIPES[method].split(":")
    return getattr(import_module(module), name)()
