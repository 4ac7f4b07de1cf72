"""Reverse-dictionary metrics: the rank of the gold word, then MRR and top-k accuracy.

Conventions:
- ranks are 1-based; ties are counted pessimistically (the gold entry ranks after every entry scored at
  least as high), so a constant scorer never looks good;
- a gold word absent from a prediction list has rank `inf` (reciprocal rank 0, never in any top-k);
- `mrr` is in [0, 1]; `top1`, `top3`, `top10` and `acc1`, `acc10`, `acc100` are percentages (0-100)
  (`acc1` equals `top1`; the `acc` keys are the reverse-dictionary literature's accuracy@k);
- `median_rank` is the median of the ranks (`inf` when over half the gold words are not found).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dictembed.errors import DictEmbedError

TOP_K = (1, 3, 10)
ACC_K = (1, 10, 100)


def ranks_from_scores(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """1-based rank of entry `gold[i]` among the scores of query `i` (higher is better; ties pessimistic).

    `scores` is [n_queries, n_entries]; `gold` holds one entry index per query. Returns float ranks.
    """
    scores = np.asarray(scores, dtype=np.float64)
    gold = np.asarray(gold)
    if scores.ndim != 2:
        raise DictEmbedError(f"scores must be [n_queries, n_entries], got shape {scores.shape}")
    if gold.shape != (scores.shape[0],) or not np.issubdtype(gold.dtype, np.integer):
        raise DictEmbedError(f"gold must be {scores.shape[0]} integer entry indices, got {gold.dtype} {gold.shape}")
    if gold.size and (gold.min() < 0 or gold.max() >= scores.shape[1]):
        raise DictEmbedError(f"gold indices must lie in [0, {scores.shape[1]}), got [{gold.min()}, {gold.max()}]")
    if np.isnan(scores).any():
        raise DictEmbedError("scores contain NaN; ranks would be meaningless")
    gold_scores = scores[np.arange(len(gold)), gold][:, None]
    return (scores >= gold_scores).sum(axis=1).astype(np.float64)


def ranks_from_predictions(predictions: Sequence[Sequence[str]], gold: Sequence[str]) -> np.ndarray:
    """1-based position of `gold[i]` in the ranked list `predictions[i]`, or `inf` where it is absent."""
    if len(predictions) != len(gold):
        raise DictEmbedError(f"{len(predictions)} prediction lists but {len(gold)} gold words")
    ranks = np.full(len(gold), np.inf)
    for i, (predicted, word) in enumerate(zip(predictions, gold, strict=True)):
        for position, candidate in enumerate(predicted, start=1):
            if candidate == word:
                ranks[i] = position
                break
    return ranks


def reverse_dictionary_metrics(ranks: np.ndarray) -> dict[str, float]:
    """MRR (in [0, 1]), top-1/3/10 and accuracy@1/10/100 (percentages) and the median rank, from 1-based
    ranks (`inf` = not found)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    if ranks.ndim != 1:
        raise DictEmbedError(f"ranks must be a 1-D array, got shape {ranks.shape}")
    if ranks.size == 0:
        raise DictEmbedError("no queries to score: the ranks are empty (no definition had its headword as an entry?)")
    if np.isnan(ranks).any() or (ranks < 1).any():
        raise DictEmbedError("ranks must be 1-based (>= 1) or inf")
    metrics = {"mrr": float(np.mean(1.0 / ranks))}
    for k in TOP_K:
        metrics[f"top{k}"] = float(np.mean(ranks <= k) * 100)
    metrics["median_rank"] = float(np.median(ranks))
    for k in ACC_K:
        metrics[f"acc{k}"] = float(np.mean(ranks <= k) * 100)
    return metrics
