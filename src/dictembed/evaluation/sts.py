"""Unsupervised semantic textual similarity: STS12-16, STS-B and SICK-R scored by cosine Spearman x 100.

Reads the tokenized SentEval layout under `data_dir()/sts` (see the shared data README). The paper
convention (SBERT, SimCSE, DefSent): STS12-16 use the "all" aggregation, STS-B and SICK-R their test
files, and `avg` is the mean over the seven tasks. Select models on the STS-B dev split only.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import ConstantInputWarning, spearmanr
from tqdm.auto import tqdm

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation._common import (
    SentenceEncoder,
    check_encoder,
    cosine_rows,
    encode_sentences,
    name_list,
    parse_score,
    read_lines,
    resolve_data_dir,
    unique_index,
)
from dictembed.progress import disable

logger = logging.getLogger(__name__)

STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR")
AGGREGATIONS = ("all", "mean", "wmean")

# Subsets as SentEval lists them; STS13's SMT input is withheld by its licence, so it is not listed.
STS_YEAR_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
STSB_SPLITS = ("train", "dev", "test")
SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


@dataclass
class StsSubset:
    """Sentence pairs with their gold similarity; `unscored` counts pairs dropped for an empty gold line."""

    name: str
    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    unscored: int = 0

    def __len__(self) -> int:
        return len(self.scores)


def load_sts_subset(input_path: str | Path, gold_path: str | Path, name: str) -> StsSubset:
    """One STS12-16 subset: `STS.input.*` (two tab-separated sentences) aligned with `STS.gs.*`."""
    inputs, golds = read_lines(input_path), read_lines(gold_path)
    if len(inputs) != len(golds):
        raise DataFormatError(
            gold_path, f"{len(golds)} gold lines but {len(inputs)} sentence pairs in {Path(input_path).name}"
        )
    first, second, scores, unscored = [], [], [], 0
    for lineno, (pair, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        columns = pair.split("\t")
        if len(columns) < 2:
            raise DataFormatError(input_path, f"expected 2 tab-separated sentences, got {len(columns)}", lineno)
        if not gold.strip():
            unscored += 1
            continue
        scores.append(parse_score(gold, gold_path, lineno))
        first.append(columns[0].strip())
        second.append(columns[1].strip())
    if unscored:
        logger.info("%s: dropped %d unscored pairs (empty gold lines) of %d", name, unscored, len(inputs))
    check_pairs(scores, gold_path, "scored ")
    return StsSubset(name, first, second, np.asarray(scores, dtype=np.float64), unscored)


def check_pairs(scores: list[float], path: str | Path, kind: str = "") -> None:
    """Refuse a set of fewer than two pairs, naming its file: a Spearman correlation needs two, and a NaN among
    the tasks' scores would say nothing of why."""
    if len(scores) < 2:
        raise DataFormatError(path, f"{len(scores)} {kind}sentence pair(s); a Spearman correlation needs at least 2")


def load_sts_year(task: str, data_dir: str | Path | None = None) -> list[StsSubset]:
    """The subsets of STS12..STS16 from `<data_dir>/sts/STS/<task>-en-test/`."""
    if task not in STS_YEAR_SUBSETS:
        raise DictEmbedError(f"unknown STS year {task!r}; expected one of {', '.join(STS_YEAR_SUBSETS)}")
    folder = resolve_data_dir(data_dir) / "sts" / "STS" / f"{task}-en-test"
    return [
        load_sts_subset(folder / f"STS.input.{name}.txt", folder / f"STS.gs.{name}.txt", f"{task}/{name}")
        for name in STS_YEAR_SUBSETS[task]
    ]


def load_stsb(split: str = "test", data_dir: str | Path | None = None) -> StsSubset:
    """STS-B `sts-<split>.csv`: tab-separated genre, file, year, id, score, sentence1, sentence2.

    Read by plain tab splitting (the sentences contain quotes); columns after the seventh are ignored.
    """
    if split not in STSB_SPLITS:
        raise DictEmbedError(f"unknown STS-B split {split!r}; expected one of {', '.join(STSB_SPLITS)}")
    path = resolve_data_dir(data_dir) / "sts" / "STS" / "STSBenchmark" / f"sts-{split}.csv"
    first, second, scores = [], [], []
    for lineno, line in enumerate(read_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) < 7:
            raise DataFormatError(path, f"expected 7 tab-separated columns, got {len(columns)}", lineno)
        scores.append(parse_score(columns[4], path, lineno))
        first.append(columns[5].strip())
        second.append(columns[6].strip())
    check_pairs(scores, path)
    return StsSubset(f"STSB/{split}", first, second, np.asarray(scores, dtype=np.float64))


def load_sick(split: str = "test", data_dir: str | Path | None = None) -> StsSubset:
    """SICK relatedness: header row, then pair_ID, sentence_A, sentence_B, relatedness_score, entailment."""
    if split not in SICK_FILES:
        raise DictEmbedError(f"unknown SICK split {split!r}; expected one of {', '.join(SICK_FILES)}")
    path = resolve_data_dir(data_dir) / "sts" / "SICK" / SICK_FILES[split]
    lines = read_lines(path)
    if not lines or not lines[0].startswith("pair_ID"):
        raise DataFormatError(path, "missing the header row 'pair_ID<TAB>sentence_A<TAB>...'", 1)
    first, second, scores = [], [], []
    for lineno, line in enumerate(lines[1:], start=2):
        columns = line.split("\t")
        if len(columns) != 5:
            raise DataFormatError(path, f"expected 5 tab-separated columns, got {len(columns)}", lineno)
        scores.append(parse_score(columns[3], path, lineno, what="relatedness score"))
        first.append(columns[1].strip())
        second.append(columns[2].strip())
    check_pairs(scores, path)
    return StsSubset(f"SICKR/{split}", first, second, np.asarray(scores, dtype=np.float64))


def load_sts_task(task: str, data_dir: str | Path | None = None) -> list[StsSubset]:
    """The evaluation subsets of one task of STS_TASKS (STSB and SICKR: their test split)."""
    if task == "STSB":
        return [load_stsb("test", data_dir)]
    if task == "SICKR":
        return [load_sick("test", data_dir)]
    if task in STS_YEAR_SUBSETS:
        return load_sts_year(task, data_dir)
    raise DictEmbedError(f"unknown STS task {task!r}; expected one of {', '.join(STS_TASKS)}")


@dataclass
class Whitening:
    """BERT-whitening (Su et al., 2021): x -> (x - mean) @ matrix."""

    mean: np.ndarray
    matrix: np.ndarray

    def transform(self, embeddings: np.ndarray) -> np.ndarray:
        return (embeddings - self.mean) @ self.matrix


def fit_whitening(embeddings: np.ndarray, eps: float = 1e-12) -> Whitening:
    """Fit whitening on `embeddings` [n, dim]: mu = mean, W = U diag(1/sqrt(S)) from the SVD of the covariance.

    The covariance is the unbiased one (np.cov), so `np.cov(transform(x), rowvar=False)` is the identity.
    Singular values below `eps * max` are floored there (a rank-deficient set is not fully whitened).
    """
    embeddings = np.asarray(embeddings, dtype=np.float64)
    if embeddings.ndim != 2 or embeddings.shape[0] < 2:
        raise DictEmbedError(f"whitening needs at least 2 embeddings [n, dim], got shape {embeddings.shape}")
    mean = embeddings.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(np.cov(embeddings, rowvar=False))
    s = np.maximum(s, eps * s.max()) if s.max() > 0 else np.ones_like(s)
    return Whitening(mean, u / np.sqrt(s))


def spearman100(predicted: np.ndarray, gold: np.ndarray, name: str = "") -> float:
    """Spearman correlation x 100 (scipy.stats.spearmanr); NaN where it is undefined (every predicted similarity
    equal, as constant vectors give, or every gold score), with a warning naming `name` (the task or subset)."""
    with warnings.catch_warnings():  # scipy's warning names no task: the one below does
        warnings.simplefilter("ignore", ConstantInputWarning)
        score = float(spearmanr(predicted, gold).statistic * 100)
    if np.isnan(score):
        constant = "predicted similarity" if len(np.unique(predicted)) <= 1 else "gold score"
        logger.warning("%s: the Spearman correlation is undefined (NaN): every %s is the same", name or "STS", constant)
    return score


def predict_similarities(
    model: SentenceEncoder, subsets: list[StsSubset], whitening: bool = False, task: str = ""
) -> list[np.ndarray]:
    """Cosine similarity of every pair, per subset; each distinct sentence of the task is encoded once (vectors that
    are not finite: an error naming `task`).

    With `whitening`, the whitening is fitted on the distinct sentences of these subsets (the task itself),
    as in Su et al. (2021), then applied before the cosine.
    """
    groups = [group for subset in subsets for group in (subset.sentences1, subset.sentences2)]
    unique, rows = unique_index(*groups)
    table = encode_sentences(model, unique, task)
    if whitening:
        table = fit_whitening(table).transform(table)
    return [cosine_rows(table[rows[2 * i]], table[rows[2 * i + 1]]) for i in range(len(subsets))]


def aggregate(
    predictions: list[np.ndarray], golds: list[np.ndarray], aggregation: str = "all", task: str = ""
) -> float:
    """One score for a task from its subsets' predictions and gold scores (`task`: its name, for a warning).

    "all": one Spearman over all subsets concatenated; "mean": plain mean of per-subset Spearmans;
    "wmean": per-subset Spearmans weighted by subset size.
    """
    if aggregation == "all":
        return spearman100(np.concatenate(predictions), np.concatenate(golds), task)
    per_subset = np.array([spearman100(p, g, task) for p, g in zip(predictions, golds, strict=True)])
    if aggregation == "mean":
        return float(per_subset.mean())
    if aggregation == "wmean":
        return float(np.average(per_subset, weights=[len(g) for g in golds]))
    raise DictEmbedError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")


def evaluate_sts(
    model: SentenceEncoder,
    tasks: list[str] | None = None,
    aggregation: str = "all",
    per_subset: bool = False,
    whitening: bool = False,
    data_dir: str | Path | None = None,
) -> dict[str, float]:
    """Cosine Spearman x 100 on STS12-16 (test), STS-B test and SICK-R test, plus `avg` over the tasks run.

    `aggregation` ("all", "mean" or "wmean") combines the subsets of STS12-16; `per_subset` adds keys like
    "STS12/MSRpar". With `whitening`, BERT-whitening is fitted on the sentences of each evaluated task.
    `tasks` may be one name ("STSB"). A `model` that is no encoder is refused before anything is read, vectors that
    are not finite with an error naming the task; a Spearman that is undefined (constant vectors) is NaN, warned.
    """
    check_encoder(model)
    tasks = name_list(tasks, STS_TASKS, "STS task(s)")
    if aggregation not in AGGREGATIONS:
        raise DictEmbedError(f"unknown aggregation {aggregation!r}; expected one of {', '.join(AGGREGATIONS)}")
    results: dict[str, float] = {}
    for task in tqdm(tasks, desc="STS", unit="task", disable=disable(True)):
        subsets = load_sts_task(task, data_dir)
        predictions = predict_similarities(model, subsets, whitening=whitening, task=task)
        golds = [subset.scores for subset in subsets]
        results[task] = aggregate(predictions, golds, aggregation, task)
        if per_subset and task in STS_YEAR_SUBSETS:
            for subset, predicted in zip(subsets, predictions, strict=True):
                results[subset.name] = spearman100(predicted, subset.scores, subset.name)
    if tasks:
        results["avg"] = float(np.mean([results[t] for t in tasks]))
    return results


def evaluate_stsb_dev(model: SentenceEncoder, data_dir: str | Path | None = None) -> float:
    """Cosine Spearman x 100 on the STS-B dev split: the score to select models on (never a test file)."""
    check_encoder(model)
    dev = load_stsb("dev", data_dir)
    (predicted,) = predict_similarities(model, [dev], task=dev.name)
    return spearman100(predicted, dev.scores, dev.name)
