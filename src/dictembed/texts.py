"""The one check of the texts an encoder or a search is given: strings, each valid Unicode text (a lone surrogate,
which no tokenizer takes, is refused in one line naming it)."""

from __future__ import annotations

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
