"""The one check of the texts an encoder or a search is given: strings, each valid Unicode text (a lone surrogate,
which no tokenizer takes, is refused in one line naming it); and of the batches they are encoded in."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

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


def check_batch_size(batch_size: object) -> int:
    """`batch_size` as an int, refused in one line unless a whole number (numpy's too) of at least 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise DictEmbedError(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    return int(batch_size)
