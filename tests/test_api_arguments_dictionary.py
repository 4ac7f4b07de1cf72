"""`load_dictionary` and `split_by_headword`'s arguments, refused in one line naming them before anything is read
(a path is taken as the file it names); a split is always reproducible from its seed."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from dictembed.dictionary import load_dictionary, split_by_headword
from dictembed.errors import DictEmbedError


@pytest.mark.parametrize("kind", [Path, os.fspath])
def test_load_dictionary_takes_a_path(toy_tsv: Path, kind) -> None:
    dictionary = load_dictionary(kind(toy_tsv))
    assert "dog" in dictionary.headwords and len(dictionary.headwords) == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"spec": None}, r"^spec must be a comma list of dictionary names or files .*got None$"),
        ({"spec": ["wordnet"]}, r"^spec must be .*got \['wordnet'\]$"),
        ({"spec": b"wordnet"}, r"^spec must be .*got b'wordnet'$"),
        ({"spec": "x.tsv", "columns": ["word", "definition"]}, r"^columns must be .*got \['word', 'definition'\]$"),
        ({"spec": "x.tsv", "encoding": None}, r"^encoding must be the name of a text encoding, got None$"),
        ({"spec": "x.tsv", "encoding": "no-such-codec"}, r"^encoding: unknown encoding 'no-such-codec'$"),
        ({"spec": "x.txt", "columns": ""}, r"^columns: unknown column '' in ''"),
        ({"spec": "wordnet", "columns": "word,definition"}, r"^columns names the columns of a headerless .*'wordnet'"),
    ],
)
def test_load_dictionary_refuses_what_cannot_be_read(kwargs: dict, message: str) -> None:
    with pytest.raises(DictEmbedError, match=message):
        load_dictionary(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, r"^seed must be a whole number >= 0, got -1$"),
        ({"seed": "0"}, r"^seed must be .*got '0'$"),
        ({"seed": 1.5}, r"^seed must be .*got 1.5$"),
        ({"seed": None}, r"^seed must be .*got None$"),  # no seed: a split that no rerun repeats
        ({"ratios": "811"}, r"^ratios must be three finite non-negative numbers with a positive sum, got '811'$"),
        ({"ratios": (8, math.nan, 1)}, r"^ratios must be .*got \(8, nan, 1\)$"),
        ({"ratios": (math.inf, 1, 1)}, r"^ratios must be .*got \(inf, 1, 1\)$"),
        ({"ratios": (8, 1)}, r"^ratios must be .*got \(8, 1\)$"),
        ({"ratios": (True, 1, 1)}, r"^ratios must be "),
    ],
)
def test_split_by_headword_refuses_what_cannot_split(toy_dictionary, kwargs: dict, message: str) -> None:
    with pytest.raises(DictEmbedError, match=message):
        split_by_headword(toy_dictionary, **kwargs)


def test_split_by_headword_needs_a_dictionary() -> None:
    with pytest.raises(DictEmbedError, match=r"^dictionary must be a Dictionary .*got NoneType$"):
        split_by_headword(None)  # type: ignore[arg-type]


def test_split_by_headword_takes_numpy_seeds_and_lists_of_ratios(toy_dictionary) -> None:
    plain = split_by_headword(toy_dictionary, seed=3, ratios=(6, 1, 1))
    numpy = split_by_headword(toy_dictionary, seed=np.int64(3), ratios=[6, 1, 1])  # type: ignore[arg-type]
    assert {k: v.headwords for k, v in plain.items()} == {k: v.headwords for k, v in numpy.items()}
