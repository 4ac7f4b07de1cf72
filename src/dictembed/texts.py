"""The one check of the texts an encoder or a search is given: strings, each valid Unicode text (a lone surrogate,
which no tokenizer takes, is refused in one line naming it); and of the batches they are encoded in."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import cast

from dictembed.errors import DictEmbedError


def check_texts(texts: Sequence[object], noun: str = "sentence", first: int = 0) -> None:
    """Refuse, naming the first (`noun` and its number, counted from `first`), a text that is not a string or is not
    valid Unicode text."""
    for i, text in enumerate(texts, first):
        if not isinstance(text, str):
            raise DictEmbedError(f"{noun} {i} is {type(text).__name__}, not a string")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise DictEmbedError(f"{noun} {i} is not valid Unicode text (it holds a lone surrogate)") from None


def is_whole_number(value: object, low: int = 1, high: int | None = None) -> bool:
    """Whether `value` is a whole number (numpy's too, not a bool) from `low` to `high` (None: no bound): the one
    test of the counts the API takes (batch sizes, k, lengths)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return low <= int(value) and (high is None or int(value) <= high)


def check_batch_size(batch_size: object) -> int:
    """`batch_size` as an int, refused in one line unless a whole number (numpy's too) of at least 1."""
    if not is_whole_number(batch_size):
        raise DictEmbedError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    return int(cast(numbers.Integral, batch_size))
