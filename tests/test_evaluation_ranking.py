"""Ranks from scores and predictions, and the reverse-dictionary metrics (dictembed.evaluation.ranking), by hand."""

import math

import numpy as np
import pytest

from dictembed.errors import DictEmbedError
from dictembed.evaluation.ranking import (
    ranks_from_predictions,
    ranks_from_scores,
    reverse_dictionary_metrics,
)


def test_ranks_from_scores_counts_ties_pessimistically():
    scores = np.array(
        [
            [0.9, 0.1, 0.5, 0.3],  # gold 0 is best -> 1
            [0.2, 0.8, 0.8, 0.1],  # gold 2 ties with entry 1 -> 2
            [0.4, 0.4, 0.4, 0.4],  # everything tied -> 4
            [0.5, 0.7, 0.6, 0.1],  # gold 3 is worst -> 4
        ]
    )
    ranks = ranks_from_scores(scores, np.array([0, 2, 1, 3]))
    np.testing.assert_array_equal(ranks, [1, 2, 4, 4])


def test_ranks_from_scores_rejects_bad_gold():
    with pytest.raises(DictEmbedError, match="gold indices"):
        ranks_from_scores(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(DictEmbedError, match="integer"):
        ranks_from_scores(np.zeros((2, 3)), np.array([0.0, 1.0]))


def test_ranks_from_predictions_absent_gold_is_inf():
    predictions = [["cat", "dog", "cow"], ["dog", "cat"], ["ant"], []]
    ranks = ranks_from_predictions(predictions, ["cat", "cat", "bee", "owl"])
    np.testing.assert_array_equal(ranks, [1, 2, np.inf, np.inf])


def test_metrics_hand_computed():
    # reciprocal ranks 1, 1/2, 1/4, 1/20, 0 -> MRR = 1.8 / 5 = 0.36
    metrics = reverse_dictionary_metrics(np.array([1, 2, 4, 20, np.inf]))
    assert metrics["mrr"] == pytest.approx(0.36)
    assert metrics["top1"] == pytest.approx(20.0)
    assert metrics["top3"] == pytest.approx(40.0)
    assert metrics["top10"] == pytest.approx(60.0)
    assert set(metrics) == {"mrr", "top1", "top3", "top10", "median_rank", "acc1", "acc10", "acc100"}


def test_metrics_reject_zero_based_ranks():
    with pytest.raises(DictEmbedError, match="1-based"):
        reverse_dictionary_metrics(np.array([0, 1, 2]))


def test_median_rank_and_accuracy_at_k_hand_computed() -> None:
    ranks = np.array([1, 2, 4, 20, 150, np.inf])
    metrics = reverse_dictionary_metrics(ranks)
    assert metrics["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1 / 20 + 1 / 150) / 6)
    assert metrics["median_rank"] == pytest.approx(12.0)  # (4 + 20) / 2
    assert metrics["acc1"] == pytest.approx(100 / 6)
    assert metrics["acc10"] == pytest.approx(300 / 6)
    assert metrics["acc100"] == pytest.approx(400 / 6)
    assert metrics["top1"] == metrics["acc1"] and metrics["top3"] == pytest.approx(200 / 6)
    assert reverse_dictionary_metrics(np.array([3.0, np.inf, np.inf]))["median_rank"] == math.inf
