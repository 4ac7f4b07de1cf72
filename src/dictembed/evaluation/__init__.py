"""Evaluation harness: unsupervised STS, SentEval transfer tasks and reverse-dictionary metrics.

Every evaluator takes any object with `encode(list[str]) -> np.ndarray` and returns a dict of floats.
"""

from dictembed.evaluation.ranking import (
    ranks_from_predictions,
    ranks_from_scores,
    reverse_dictionary_metrics,
)
from dictembed.evaluation.senteval import SENTEVAL_TASKS, evaluate_senteval
from dictembed.evaluation.sts import STS_TASKS, evaluate_sts, evaluate_stsb_dev, fit_whitening

__all__ = [
    "SENTEVAL_TASKS",
    "STS_TASKS",
    "evaluate_senteval",
    "evaluate_sts",
    "evaluate_stsb_dev",
    "fit_whitening",
    "ranks_from_predictions",
    "ranks_from_scores",
    "reverse_dictionary_metrics",
]
