"""Splitting a dictionary into train/dev/test by headword, reproducibly from a seed."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from dictembed.dictionary.builder import without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.merge import normalize_key
from dictembed.errors import DictEmbedError
from dictembed.texts import is_real_number, is_whole_number

SPLITS = ("train", "dev", "test")


def check_ratios(ratios: object) -> tuple[float, float, float]:
    """`ratios` as three floats, refused in one line unless three finite non-negative numbers with a positive sum."""
    values = tuple(ratios) if isinstance(ratios, tuple | list) else ()
    if len(values) != 3 or not all(is_real_number(r, 0) for r in values) or sum(values) <= 0:
        raise DictEmbedError(f"ratios must be three finite non-negative numbers with a positive sum, got {ratios!r}")
    return float(values[0]), float(values[1]), float(values[2])


def split_sizes(n: int, ratios: tuple[float, float, float]) -> tuple[int, int, int]:
    """Sizes of the three splits of `n` items, by rounding the cumulative ratios (they sum to `n`)."""
    ratios = check_ratios(ratios)
    total = sum(ratios)
    train_end = round(n * ratios[0] / total)
    dev_end = round(n * (ratios[0] + ratios[1]) / total)
    return train_end, dev_end - train_end, n - dev_end


def minimum_items(ratios: tuple[float, float, float], limit: int = 1_000_000) -> int:
    """The fewest items for which every split with a positive ratio gets at least one."""
    for n in range(1, limit):
        if all(size for size, ratio in zip(split_sizes(n, ratios), ratios, strict=True) if ratio > 0):
            return n
    return limit


def _check_sizes(name: str, n: int, ratios: tuple[float, float, float]) -> None:
    """DictEmbedError when a split with a positive ratio would be empty."""
    sizes = split_sizes(n, ratios)
    empty = [s for s, size, ratio in zip(SPLITS, sizes, ratios, strict=True) if ratio > 0 and not size]
    if empty:
        raise DictEmbedError(
            f"{name}: {n} headwords are too few to split {':'.join(f'{r:g}' for r in ratios)} by headword "
            f"(the {' and '.join(empty)} split would be empty); at least {minimum_items(ratios)} are needed"
        )


@without_gc
def split_by_headword(
    dictionary: Dictionary, seed: int = 0, ratios: tuple[float, float, float] = (8, 1, 1)
) -> dict[str, Dictionary]:
    """Split into {"train", "dev", "test"} dictionaries that share no headword.

    Headwords equal up to case and whitespace ("Bank", "bank") go to the same split. The groups are
    sorted before a seeded shuffle, so the result depends only on the headwords and the seed,
    not on the order they were added in. Too few headwords for a non-empty split (8 with 8:1:1) raise
    DictEmbedError, as do a `dictionary` that is not one, a `seed` that is not a whole number >= 0 (None too: the
    split must be reproducible) and `ratios` that are not three finite non-negative numbers.
    """
    if not isinstance(dictionary, Dictionary):
        raise DictEmbedError(f"dictionary must be a Dictionary (see load_dictionary), got {type(dictionary).__name__}")
    if not is_whole_number(seed, 0):
        raise DictEmbedError(f"seed must be a whole number >= 0, got {seed!r}")
    ratios = check_ratios(ratios)
    groups: dict[str, list[str]] = defaultdict(list)
    for headword in dictionary.headwords:
        groups[normalize_key(headword)].append(headword)
    keys = sorted(groups)
    _check_sizes(dictionary.name, len(keys), ratios)
    order = np.random.default_rng(seed).permutation(len(keys))
    n_train, n_dev, _ = split_sizes(len(keys), ratios)
    bounds = {"train": (0, n_train), "dev": (n_train, n_train + n_dev), "test": (n_train + n_dev, len(keys))}
    splits = {}
    for split, (start, end) in bounds.items():
        headwords = [h for i in order[start:end] for h in groups[keys[i]]]
        splits[split] = dictionary.subset(headwords, name=f"{dictionary.name}/{split}")
    return splits


def seeded_sample(items: list, limit: int | None, seed: int) -> list:
    """A seeded sample of `limit` items in their original order (all of them when limit is None)."""
    if limit is None or limit >= len(items):
        return items
    keep = np.random.default_rng(seed).choice(len(items), limit, replace=False)
    return [items[i] for i in sorted(keep)]
