"""The cross-lingual description set (tests/data/crosslingual_descriptions.tsv) and the scoring helpers of
experiments/crosslingual_reverse_dictionary.py."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from conftest import load_script

from dictembed.dictionary import load_dictionary
from dictembed.errors import DataFormatError


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_script("experiments/crosslingual_reverse_dictionary.py")


def test_the_set_has_thirty_rows_or_more_each_way_and_every_expected_word_is_an_entry(script) -> None:
    rows = script.read_crosslingual(script.DATA)
    assert len(rows["en-zh"]) >= 30 and len(rows["zh-en"]) >= 30
    for direction, spec in script.DIRECTIONS.items():
        script.check_expected(rows[direction], load_dictionary(spec).headwords, spec)  # raises on a stray word
    assert all(any("\u4e00" <= c <= "\u9fff" for c in words[0]) for _, words in rows["en-zh"])
    assert all(any("\u4e00" <= c <= "\u9fff" for c in d) for d, _ in rows["zh-en"])


def test_a_malformed_row_names_its_line(script, tmp_path) -> None:
    path = tmp_path / "x.tsv"
    path.write_text("description\texpected\tdirection\na cat\t猫\ten-zh\na dog\t狗\tfr-zh\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"x\.tsv.*3|3.*x\.tsv"):
        script.read_crosslingual(path)
    path.write_text("query\tword\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="header"):
        script.read_crosslingual(path)


def test_best_ranks_take_the_best_expected_word_with_ties_counted_against_it(script) -> None:
    words = ["a", "b", "c", "d"]
    scores = np.array([[0.9, 0.5, 0.5, 0.1], [0.2, 0.3, 0.4, 0.8]])
    pairs = [("q1", ["c"]), ("q2", ["a", "c"])]
    ranks = script.best_ranks(scores, words, pairs)
    assert ranks.tolist() == [2, 1]  # c ties with b: pessimistic; q2's best expected word is c (rank 1)
    figures = script.summary(ranks)
    assert figures["top1"] == 0.0 and figures["top10"] == 100.0
    assert figures["mrr"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert figures["median_rank"] == 1.5
