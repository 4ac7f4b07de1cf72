"""SentEval transfer tasks (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC) with SentEval's logistic-regression protocol.

Frozen sentence embeddings feed a scikit-learn LogisticRegression (L2, lbfgs, multinomial for TREC); features
are used as they come, without scaling, as SentEval does. The L2 strength C is chosen as SentEval does:
- MR, CR, SUBJ, MPQA: 10-fold stratified CV (shuffled, seeded); inside each training fold C in 2^-2..2^3 is
  chosen by an inner stratified 10-fold CV, then the held-out fold is scored; the mean accuracy is reported;
- SST2: C in 2^-2..2^3 chosen on the dev split, test accuracy reported;
- TREC, MRPC: C in 2^-1..2^5 (SentEval's KFoldClassifier grid) chosen by stratified 10-fold CV on train,
  test accuracy reported (and F1 of the paraphrase class for MRPC).
MRPC features are [u, v, |u - v|, u * v] (SentEval's own mrpc.py uses [|u - v|, u * v]). Accuracies are
percentages.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from joblib import Parallel, delayed
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation._common import (
    MAX_SEED,
    SentenceEncoder,
    check_encoder,
    encode_unique,
    name_list,
    read_lines,
    resolve_data_dir,
)
from dictembed.progress import disable
from dictembed.texts import is_whole_number

logger = logging.getLogger(__name__)

SENTEVAL_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
C_GRID = tuple(2.0**t for t in range(-2, 4))  # SentEval's InnerKFold and Split classifiers
C_GRID_KFOLD = tuple(2.0**t for t in range(-1, 6))  # SentEval's KFoldClassifier (train/test tasks)
N_FOLDS = 10
MAX_ITER = 5000

# task -> (folder, positive file, negative file); label 1 for the first file, 0 for the second
BINARY_FILES = {
    "MR": ("MR", "rt-polarity.pos", "rt-polarity.neg"),
    "CR": ("CR", "custrev.pos", "custrev.neg"),
    "SUBJ": ("SUBJ", "subj.objective", "subj.subjective"),
    "MPQA": ("MPQA", "mpqa.pos", "mpqa.neg"),
}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
TREC_FILES = {"train": "train_5500.label", "test": "TREC_10.label"}
MRPC_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}


@dataclass
class LabelledSentences:
    """Sentences with integer labels; `skipped` counts empty lines left out."""

    sentences: list[str]
    labels: np.ndarray
    skipped: int = 0


@dataclass
class LabelledPairs:
    """Sentence pairs with integer labels (MRPC: 1 = paraphrase)."""

    sentences1: list[str]
    sentences2: list[str]
    labels: np.ndarray


@dataclass
class ClassifierResult:
    """Test accuracy (percent), the C chosen (one per outer fold for CV tasks) and the test predictions."""

    accuracy: float
    chosen_c: list[float] = field(default_factory=list)
    predictions: np.ndarray | None = None


def _task_dir(data_dir: str | Path | None, folder: str) -> Path:
    return resolve_data_dir(data_dir) / "senteval" / folder


def _nonempty(path: Path, encoding: str) -> tuple[list[str], int]:
    lines = [line.strip() for line in read_lines(path, encoding)]
    kept = [line for line in lines if line]
    if len(kept) < len(lines):
        logger.warning("%s: skipped %d empty line(s) of %d", path, len(lines) - len(kept), len(lines))
    return kept, len(lines) - len(kept)


def checked_labels(path: Path, labels: list[int], classes: int) -> np.ndarray:
    """`labels` as an array; a file of no labelled sentences, or of fewer than `classes` classes (a training split
    needs two, for a classifier to learn), is a DataFormatError naming it."""
    if not labels:
        raise DataFormatError(path, "no labelled sentences")
    if len(set(labels)) < classes:
        raise DataFormatError(path, f"every sentence has label {labels[0]}: a classifier needs {classes} classes")
    return np.array(labels)


def load_binary(task: str, data_dir: str | Path | None = None) -> LabelledSentences:
    """MR, CR, SUBJ or MPQA: one sentence per line in two files (latin-1, as SentEval reads them)."""
    if task not in BINARY_FILES:
        raise DictEmbedError(f"unknown binary task {task!r}; expected one of {', '.join(BINARY_FILES)}")
    folder, first, second = BINARY_FILES[task]
    positive, skipped_pos = _nonempty(_task_dir(data_dir, folder) / first, "latin-1")
    negative, skipped_neg = _nonempty(_task_dir(data_dir, folder) / second, "latin-1")
    for name, kept in ((first, positive), (second, negative)):
        if not kept:  # one class only: no classifier to train
            raise DataFormatError(_task_dir(data_dir, folder) / name, f"no sentences; {task} needs both classes")
    labels = np.array([1] * len(positive) + [0] * len(negative))
    return LabelledSentences(positive + negative, labels, skipped_pos + skipped_neg)


def load_sst2(split: str, data_dir: str | Path | None = None) -> LabelledSentences:
    """SST-2 `SST/binary/sentiment-<split>`: `sentence<TAB>label` with label 0 or 1."""
    path = _task_dir(data_dir, "SST") / "binary" / f"sentiment-{split}"
    sentences, labels = [], []
    for lineno, line in enumerate(read_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataFormatError(path, f"expected 'sentence<TAB>label', got {len(columns)} column(s)", lineno)
        if columns[1].strip() not in ("0", "1"):
            raise DataFormatError(path, f"label {columns[1].strip()!r} is not 0 or 1", lineno)
        sentences.append(columns[0].strip())
        labels.append(int(columns[1]))
    return LabelledSentences(sentences, checked_labels(path, labels, classes=1 + (split == "train")))


def load_trec(split: str, data_dir: str | Path | None = None) -> LabelledSentences:
    """TREC `COARSE:fine question` lines (ISO-8859-1); labels index TREC_CLASSES."""
    if split not in TREC_FILES:
        raise DictEmbedError(f"unknown TREC split {split!r}; expected one of {', '.join(TREC_FILES)}")
    path = _task_dir(data_dir, "TREC") / TREC_FILES[split]
    sentences, labels = [], []
    for lineno, line in enumerate(read_lines(path, "latin-1"), start=1):
        label, question = (line.split(None, 1) + ["", ""])[:2]  # a tab after the label is a space too
        coarse = label.split(":", 1)[0]
        if ":" not in label or coarse not in TREC_CLASSES or not question.strip():
            raise DataFormatError(path, f"expected 'COARSE:fine question' with COARSE in {TREC_CLASSES}", lineno)
        sentences.append(question.strip())
        labels.append(TREC_CLASSES.index(coarse))
    return LabelledSentences(sentences, checked_labels(path, labels, classes=1 + (split == "train")))


def load_mrpc(split: str, data_dir: str | Path | None = None) -> LabelledPairs:
    """MRPC `msr_paraphrase_<split>.txt`: header, then Quality, #1 ID, #2 ID, #1 String, #2 String."""
    if split not in MRPC_FILES:
        raise DictEmbedError(f"unknown MRPC split {split!r}; expected one of {', '.join(MRPC_FILES)}")
    path = _task_dir(data_dir, "MRPC") / MRPC_FILES[split]
    lines = read_lines(path, "utf-8-sig")
    if not lines or not lines[0].startswith("Quality"):
        raise DataFormatError(path, "missing the header row 'Quality<TAB>#1 ID<TAB>...'", 1)
    first, second, labels = [], [], []
    for lineno, line in enumerate(lines[1:], start=2):
        columns = line.split("\t")
        if len(columns) != 5:
            raise DataFormatError(path, f"expected 5 tab-separated columns, got {len(columns)}", lineno)
        if columns[0] not in ("0", "1"):
            raise DataFormatError(path, f"quality {columns[0]!r} is not 0 or 1", lineno)
        labels.append(int(columns[0]))
        first.append(columns[3].strip())
        second.append(columns[4].strip())
    return LabelledPairs(first, second, checked_labels(path, labels, classes=1 + (split == "train")))


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """MRPC pair features [u, v, |u - v|, u * v] (the SBERT/InferSent pair encoding this project specifies;
    SentEval's own mrpc.py uses only [|u - v|, u * v])."""
    return np.hstack([u, v, np.abs(u - v), u * v])


def _one_blas_thread() -> threadpool_limits:
    """Small lbfgs fits run several times faster on one BLAS thread than on oversubscribed ones."""
    return threadpool_limits(limits=1, user_api="blas")


def _fit(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=MAX_ITER, random_state=seed).fit(x, y)


def _fit_cv(
    x: np.ndarray, y: np.ndarray, grid: Sequence[float], folds: int, seed: int, jobs: int = 1
) -> LogisticRegressionCV:
    """LogisticRegression with C chosen by stratified k-fold accuracy (first best C on ties), refit on all;
    `jobs` processes fit the folds (the same result for any number)."""
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    model = LogisticRegressionCV(
        Cs=list(grid),
        l1_ratios=(0.0,),
        cv=cv,
        scoring="accuracy",
        max_iter=MAX_ITER,
        random_state=seed,
        use_legacy_attributes=False,
        n_jobs=jobs,
    )
    return model.fit(x, y)


def nested_cv_accuracy(
    x: np.ndarray,
    y: np.ndarray,
    seed: int = 1111,
    folds: int = N_FOLDS,
    inner_folds: int = N_FOLDS,
    grid: Sequence[float] = C_GRID,
    jobs: int = 1,
) -> ClassifierResult:
    """Mean held-out accuracy over `folds` stratified folds; C chosen by inner CV within each training fold.
    `jobs` processes run the outer folds (each on one BLAS thread; the same result for any number)."""
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    fits = Parallel(n_jobs=jobs)(
        delayed(_outer_fold)(x[train], y[train], x[test], y[test], grid, inner_folds, seed)
        for train, test in outer.split(x, y)
    )
    return ClassifierResult(float(np.mean([a for a, _ in fits]) * 100), [c for _, c in fits])


def _outer_fold(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, grid: Sequence[float], folds: int, seed: int
) -> tuple[float, float]:
    """Held-out accuracy and the chosen C of one outer fold."""
    with _one_blas_thread():
        model = _fit_cv(x, y, grid, folds, seed)
        return float(model.score(x_test, y_test)), float(model.C_)


def dev_selected_accuracy(
    train: tuple[np.ndarray, np.ndarray],
    dev: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    seed: int = 1111,
    grid: Sequence[float] = C_GRID,
) -> ClassifierResult:
    """Fit on train for each C, keep the first C with the best dev accuracy, report its test accuracy."""
    with _one_blas_thread():
        models = [_fit(*train, c, seed) for c in grid]
        best = int(np.argmax([m.score(*dev) for m in models]))
        predictions = models[best].predict(test[0])
    return ClassifierResult(float(np.mean(predictions == test[1]) * 100), [grid[best]], predictions)


def cv_selected_accuracy(
    train: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    seed: int = 1111,
    folds: int = N_FOLDS,
    grid: Sequence[float] = C_GRID_KFOLD,
    jobs: int = 1,
) -> ClassifierResult:
    """C chosen by stratified k-fold CV on train, refit on all of train, test accuracy reported."""
    with _one_blas_thread():
        model = _fit_cv(*train, grid, folds, seed, jobs)
        predictions = model.predict(test[0])
    return ClassifierResult(float(np.mean(predictions == test[1]) * 100), [float(model.C_)], predictions)


def load_task(task: str, data_dir: str | Path | None = None) -> Any:
    """A SentEval task's data as `_run_task` takes it: one labelled set (MR, CR, SUBJ, MPQA) or its splits."""
    if task in BINARY_FILES:
        return load_binary(task, data_dir)
    if task == "SST2":
        return [load_sst2(s, data_dir) for s in ("train", "dev", "test")]
    if task == "TREC":
        return [load_trec(s, data_dir) for s in ("train", "test")]
    if task == "MRPC":
        return load_mrpc("train", data_dir), load_mrpc("test", data_dir)
    raise DictEmbedError(f"unknown SentEval task {task!r}; expected one of {', '.join(SENTEVAL_TASKS)}")


def _run_task(
    model: SentenceEncoder,
    task: str,
    data: Any,
    seed: int,
    folds: int,
    inner_folds: int,
    jobs: int = 1,
) -> dict[str, float]:
    """The accuracy of `task` on its loaded `data` (`load_task`)."""
    if task in BINARY_FILES:
        (x,) = encode_unique(model, data.sentences, task=task)
        return {task: nested_cv_accuracy(x, data.labels, seed, folds, inner_folds, jobs=jobs).accuracy}
    if task == "SST2":
        xs = encode_unique(model, *(s.sentences for s in data), task=task)
        train, dev, test = ((x, s.labels) for x, s in zip(xs, data, strict=True))
        return {task: dev_selected_accuracy(train, dev, test, seed).accuracy}
    if task == "TREC":
        xs = encode_unique(model, *(s.sentences for s in data), task=task)
        train, test = ((x, s.labels) for x, s in zip(xs, data, strict=True))
        return {task: cv_selected_accuracy(train, test, seed, folds, jobs=jobs).accuracy}
    tr, te = data  # MRPC
    a, b, c, d = encode_unique(model, tr.sentences1, tr.sentences2, te.sentences1, te.sentences2, task=task)
    train, test = (pair_features(a, b), tr.labels), (pair_features(c, d), te.labels)
    result = cv_selected_accuracy(train, test, seed, folds, jobs=jobs)
    return {task: result.accuracy, "MRPC/F1": float(f1_score(te.labels, result.predictions) * 100)}


def check_protocol(seed: object, folds: object, inner_folds: object, jobs: object) -> None:
    """Refuse, in one line naming it, a `seed` that is not a whole number from 0 to 2**32 - 1 (what scikit-learn
    seeds with), `folds` or `inner_folds` under 2 (a cross-validation needs two folds), `jobs` that is not a whole
    number from 1 to the machine's cores or from -cores to -1 (joblib's: -1 is one per core, -2 all but one; more
    processes than cores only contend, and a typo's thousands would fill the machine)."""
    if not is_whole_number(seed, 0, MAX_SEED):
        raise DictEmbedError(f"seed must be a whole number from 0 to {MAX_SEED}, got {seed!r}")
    for name, value in (("folds", folds), ("inner_folds", inner_folds)):
        if not is_whole_number(value, 2):
            raise DictEmbedError(f"{name} must be a whole number >= 2 (a cross-validation's folds), got {value!r}")
    check_jobs(jobs)


def check_jobs(jobs: object) -> None:
    """`jobs` (see `check_protocol`), refused in one line unless a whole number from 1 to the cores or from -cores
    to -1."""
    cores = os.cpu_count() or 1
    if not is_whole_number(jobs, -cores, cores) or jobs == 0:
        raise DictEmbedError(
            f"jobs must be a whole number from 1 to {cores} (this machine's cores) or from -{cores} to -1 "
            f"(-1: one per core), got {jobs!r}"
        )


def evaluate_senteval(
    model: SentenceEncoder,
    tasks: list[str] | None = None,
    seed: int = 1111,
    data_dir: str | Path | None = None,
    *,
    folds: int = N_FOLDS,
    inner_folds: int = N_FOLDS,
    jobs: int = 1,
) -> dict[str, float]:
    """Accuracy (percent) on each SentEval task, `avg` over the tasks run, and "MRPC/F1" when MRPC runs.

    `folds` is the number of (outer) CV folds, `inner_folds` that of the C search inside each training fold
    of MR/CR/SUBJ/MPQA; SentEval's protocol is 10 and 10 (the defaults). SST2 selects C on its dev split.
    `jobs` processes fit the classifiers' folds (-1: one per core); the results do not depend on it.
    `tasks` may be one name ("MR"). Arguments that cannot be right are refused before anything is read
    (`check_protocol`), vectors that are not finite with an error naming the task.
    """
    check_encoder(model)
    tasks = name_list(tasks, SENTEVAL_TASKS, "SentEval task(s)")
    check_protocol(seed, folds, inner_folds, jobs)
    loaded = {task: load_task(task, data_dir) for task in tasks}  # a missing or bad file fails before any encoding
    results: dict[str, float] = {}
    for task in tqdm(tasks, desc="SentEval", unit="task", disable=disable(True)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            results.update(_run_task(model, task, loaded.pop(task), seed, folds, inner_folds, jobs))
        failures = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        for w in caught:  # let every other warning through unchanged
            if not issubclass(w.category, ConvergenceWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        if failures:
            logger.warning(
                "%s: logistic regression did not converge in %d fit(s) (max_iter=%d)", task, failures, MAX_ITER
            )
    if tasks:
        results["avg"] = float(np.mean([results[t] for t in tasks]))
    return results
