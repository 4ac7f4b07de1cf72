"""Multilingual STS-B (stsb-multi-mt): the STS benchmark machine-translated into ten languages, plus English.

Reads `data_dir()/sts_multi/stsb-<lang>-<split>.csv` (see the shared data README): comma-separated CSV without
a header, columns sentence1, sentence2, similarity_score (0-5), one pair per line; quoted fields may hold commas.
Scored like STS-B in `evaluation.sts`: cosine Spearman x 100 per language, `avg` the mean over the languages run.
The model's own default prompt (multilingual-e5's "query: ") is prefixed by its `encode`, as for `evaluate sts`.
The translations are machine-made: compare models with each other here, not with human-made STS figures.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation._common import SentenceEncoder, parse_score, read_lines, resolve_data_dir
from dictembed.evaluation.sts import (
    StsSubset,
    check_pairs,
    evaluate_stsb_dev,
    load_stsb,
    predict_similarities,
    spearman100,
)

STS_MULTI_LANGUAGES = ("en", "de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")
STS_MULTI_SPLITS = ("dev", "test")


def check_language(language: str) -> None:
    """A DictEmbedError naming the valid codes, for a language that is not one of STS_MULTI_LANGUAGES."""
    if language not in STS_MULTI_LANGUAGES:
        raise DictEmbedError(f"unknown STS-B language {language!r}; expected one of {', '.join(STS_MULTI_LANGUAGES)}")


def sts_multi_path(language: str, split: str = "test", data_dir: str | Path | None = None) -> Path:
    """The file of one language and split; a missing one is a DictEmbedError naming it and the languages there."""
    check_language(language)
    if split not in STS_MULTI_SPLITS:
        raise DictEmbedError(f"unknown STS-B split {split!r}; expected one of {', '.join(STS_MULTI_SPLITS)}")
    folder = resolve_data_dir(data_dir) / "sts_multi"
    path = folder / f"stsb-{language}-{split}.csv"
    if not path.exists():  # a folder or an unreadable file: the reader names what it is
        present = [code for code in STS_MULTI_LANGUAGES if (folder / f"stsb-{code}-{split}.csv").is_file()]
        raise DictEmbedError(f"{path}: not found; {split} files there for: {', '.join(present) or 'no language'}")
    return path


def parse_row(line: str, path: Path, lineno: int) -> tuple[str, str, float]:
    """One CSV line: sentence1, sentence2 and a score within 0-5, or a DataFormatError naming the file and line."""
    try:
        rows = list(csv.reader([line], strict=True))
    except csv.Error as exc:
        raise DataFormatError(path, f"not a CSV row ({exc})", lineno) from None
    columns = rows[0] if rows else []
    if len(columns) != 3:
        raise DataFormatError(
            path, f"expected 3 comma-separated columns (sentence1, sentence2, score), got {len(columns)}", lineno
        )
    return columns[0].strip(), columns[1].strip(), parse_score(columns[2], path, lineno)


def load_sts_multi(language: str, split: str = "test", data_dir: str | Path | None = None) -> StsSubset:
    """The sentence pairs and gold scores of `stsb-<language>-<split>.csv`, in file order; fewer than two pairs is a
    `DataFormatError` naming the file."""
    path = sts_multi_path(language, split, data_dir)
    first, second, scores = [], [], []
    for lineno, line in enumerate(read_lines(path), start=1):
        sentence1, sentence2, score = parse_row(line, path, lineno)
        first.append(sentence1)
        second.append(sentence2)
        scores.append(score)
    check_pairs(scores, path)  # no correlation to report: an error, not a NaN among the languages' scores
    return StsSubset(f"STSB-{language}/{split}", first, second, np.asarray(scores, dtype=np.float64))


def evaluate_sts_multi(
    model: SentenceEncoder,
    languages: list[str] | None = None,
    split: str = "test",
    data_dir: str | Path | None = None,
) -> dict[str, float]:
    """Cosine Spearman x 100 per language (default: all eleven), plus `avg` over the languages asked.

    Every file is found before anything is encoded; each language's distinct sentences are encoded once.
    """
    languages = list(STS_MULTI_LANGUAGES) if languages is None else list(languages)
    paths = {language: sts_multi_path(language, split, data_dir) for language in languages}
    results: dict[str, float] = {}
    for language in paths:
        results[language] = score(model, load_sts_multi(language, split, data_dir))
    if results:
        results["avg"] = float(np.mean([results[language] for language in results]))
    return results


def score(model: SentenceEncoder, subset: StsSubset) -> float:
    """Cosine Spearman x 100 of `model` on one subset."""
    (predicted,) = predict_similarities(model, [subset], task=subset.name)
    return spearman100(predicted, subset.scores, subset.name)


def load_sts_dev(language: str = "en", data_dir: str | Path | None = None) -> StsSubset:
    """The STS-B dev pairs to select models on in `language`: STS-B's own dev split for English, else its
    translation (`stsb-<language>-dev.csv`); never a test file. A missing or malformed file is a one-line error
    naming it."""
    check_language(language)
    return load_stsb("dev", data_dir) if language == "en" else load_sts_multi(language, "dev", data_dir)


def evaluate_sts_dev(model: SentenceEncoder, language: str = "en", data_dir: str | Path | None = None) -> float:
    """The STS-B dev score (`load_sts_dev`) to select models on in `language`."""
    if language == "en":
        return evaluate_stsb_dev(model, data_dir)
    return score(model, load_sts_dev(language, data_dir))
