"""The one check of the texts an encoder or a search is given: strings, each valid Unicode text (a lone surrogate,
which no tokenizer takes, is refused in one line naming it); and of the batches they are encoded in."""

from __future__ import annotations

import math
import numbers
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, cast

from dictembed.errors import DictEmbedError

if TYPE_CHECKING:
    import numpy as np


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


def unknown_only(token_ids: Sequence[Sequence[int]], unknown: int | None) -> list[bool]:
    """Per tokenized text (without special tokens): whether it holds no token but the `unknown` one, or none at all
    (a tokenizer without an unknown token, byte-level, reads every text)."""
    return [not ids or (unknown is not None and all(i == unknown for i in ids)) for ids in token_ids]


def is_whole_number(value: object, low: int = 1, high: int | None = None) -> bool:
    """Whether `value` is a whole number (numpy's too, not a bool) from `low` to `high` (None: no bound): the one
    test of the counts the API takes (batch sizes, k, lengths)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return low <= int(value) and (high is None or int(value) <= high)


def is_real_number(value: object, low: float = -math.inf, high: float = math.inf, above: bool = False) -> bool:
    """Whether `value` is a finite real number (numpy's too, not a bool) from `low` (above it, where `above`) to
    `high`: the one test of the rates, ratios, weights and temperatures the API takes."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return False
    return math.isfinite(number) and (number > low if above else number >= low) and number <= high


MAX_BATCH_SIZE = 1_000_000  # texts a batch: far past any memory, and within what Python can slice by
MAX_EPOCHS = 1000  # passes over the training data: beyond it a typo (an extra 0) would train for weeks
MAX_SEED = 2**32 - 1  # numpy's legacy seeding, and scikit-learn's and the Hugging Face Trainer's through it


def check_batch_size(batch_size: object) -> int:
    """`batch_size` as an int, refused in one line unless a whole number (numpy's too) from 1 to `MAX_BATCH_SIZE`."""
    if not is_whole_number(batch_size, 1, MAX_BATCH_SIZE):
        raise DictEmbedError(f"batch_size must be a whole number from 1 to {MAX_BATCH_SIZE}, got {batch_size!r}")
    return int(cast(numbers.Integral, batch_size))


def text_list(texts: object, label: str) -> list[Any]:
    """`texts` as a list, in its order: refused in one line (naming `label`) when it is one string or bytes (a list
    of strings is asked), a set or a mapping (no order to keep), or not iterable; the caller checks each text."""
    if isinstance(texts, (str, bytes, bytearray)):
        raise DictEmbedError(f"{label} must be a list of str, not one {type(texts).__name__}")
    if isinstance(texts, (AbstractSet, Mapping)):
        raise DictEmbedError(f"{label} must be a list of str, not a {type(texts).__name__} (it has no order to keep)")
    if not isinstance(texts, Iterable):
        raise DictEmbedError(f"{label} must be a list of str, not {type(texts).__name__}")
    return list(texts)


def text_input(sentences: object) -> tuple[list[Any], bool]:
    """The texts of `encode`'s `sentences` (one string, or a list of them: `text_list`), and whether it was one."""
    if isinstance(sentences, str):
        return [sentences], True
    if isinstance(sentences, (bytes, bytearray)) or not isinstance(sentences, Iterable):
        raise DictEmbedError(f"sentences must be a str or a list of str, got {type(sentences).__name__}")
    return text_list(sentences, "sentences"), False


def check_prompt(prompt: object) -> None:
    """Refuse a prompt that is neither None (the model's default) nor a string."""
    if prompt is not None and not isinstance(prompt, str):
        raise DictEmbedError(f"prompt must be a str or None, not {type(prompt).__name__}")


def bounds_in_words(whole: bool, low: float, strict: bool, high: float | None = None) -> str:
    """A range as the one-line errors give it: "> 0", ">= 1 and <= 1000000" (whole numbers as integers)."""
    shown = (lambda v: str(int(v))) if whole else (lambda v: f"{v:g}")
    text = f"> {shown(low)}" if strict else f">= {shown(low)}"
    return text + (f" and <= {shown(high)}" if high is not None else "")


def check_flag(name: str, value: object, none: bool = False) -> None:
    """Refuse an option `name` that is not True or False (None too where `none`): "no" would count as true."""
    if not (isinstance(value, bool) or is_numpy_bool(value) or (none and value is None)):
        extra = " or None" if none else ""
        raise DictEmbedError(f"{name} must be True or False{extra}, not {value!r}")


def check_chunk(chunk: object) -> None:
    """Refuse an `embed` chunk size that is neither None (all at once) nor a whole number of at least 1."""
    if chunk is not None and not is_whole_number(chunk):
        raise DictEmbedError(f"chunk must be a whole number of at least 1 or None, got {chunk!r}")


# what a text may hold and still say nothing: controls and format characters (zero-width spaces, the BOM, soft
# hyphens), besides white space; not private-use or unassigned code points (Python's Unicode tables lag: a newer
# emoji is unassigned to them, and a tokenizer may read it)
SILENT_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing a tokenizer reads: white space and `SILENT_CATEGORIES` characters only."""
    return all(ch.isspace() or unicodedata.category(ch) in SILENT_CATEGORIES for ch in text)


def is_numpy_bool(value: object) -> bool:
    """Whether `value` is numpy's bool scalar (`np.True_`), without importing numpy."""
    return type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool")


def unique_index(*groups: Sequence[str]) -> tuple[list[str], list[np.ndarray]]:
    """The distinct sentences of `groups` (first-seen order) and, per group, each sentence's row in that list."""
    import numpy as np  # here: the command line reads this module before it sets numpy's thread settings

    index: dict[str, int] = {}
    for group in groups:
        for sentence in group:
            index.setdefault(sentence, len(index))
    rows = [np.fromiter((index[s] for s in group), dtype=np.int64, count=len(group)) for group in groups]
    return list(index), rows
