"""The evaluators' arguments, refused in one line naming them before any encoding or model loading, and what they
accept as a user means it: one task name, one post-process, a path."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.evaluation.senteval import evaluate_senteval
from dictembed.evaluation.sts import evaluate_sts, evaluate_stsb_dev
from dictembed.paths import default_model

STSB_ROW = "main-captions\tMSRvid\t2012test\t{i:04d}\t{score}\tsentence {i} one\tsentence {i} two\n"


class Vectors:
    """Word-count vectors of a sentence, `value` instead where given (NaN, or one constant); counts its calls."""

    def __init__(self, value: float | None = None) -> None:
        self.value, self.calls = value, 0

    def encode(self, sentences: list[str]) -> np.ndarray:
        self.calls += 1
        if self.value is not None:
            return np.full((len(sentences), 3), self.value)
        return np.array([[len(s), s.count("one"), s.count("two") + i % 3] for i, s in enumerate(sentences)], float)


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """STS-B test and dev with six pairs each, and MR with ten sentences a class."""
    folder = tmp_path / "sts" / "STS" / "STSBenchmark"
    folder.mkdir(parents=True)
    for split in ("test", "dev"):
        rows = "".join(STSB_ROW.format(i=i, score=i % 5) for i in range(6))
        (folder / f"sts-{split}.csv").write_text(rows, encoding="utf-8")
    mr = tmp_path / "senteval" / "MR"
    mr.mkdir(parents=True)
    (mr / "rt-polarity.pos").write_text("".join(f"good film {i}\n" for i in range(10)), encoding="latin-1")
    (mr / "rt-polarity.neg").write_text("".join(f"bad one {i}\n" for i in range(10)), encoding="latin-1")
    return tmp_path


def test_one_task_name_is_one_task(data: Path) -> None:
    assert set(evaluate_sts(Vectors(), tasks="STSB", data_dir=data)) == {"STSB", "avg"}
    result = evaluate_senteval(Vectors(), tasks="MR", data_dir=data, folds=2, inner_folds=2)
    assert set(result) == {"MR", "avg"}


def test_a_path_is_no_encoder(data: Path) -> None:
    for call in (evaluate_sts, evaluate_senteval, evaluate_stsb_dev):
        with pytest.raises(DictEmbedError, match=r"model must be a sentence encoder .*Encoder\.load"):
            call(default_model(), data_dir=data)  # type: ignore[operator]
        with pytest.raises(DictEmbedError, match=r"model must be a sentence encoder .*got NoneType"):
            call(None, data_dir=data)  # type: ignore[operator]


def test_vectors_that_are_not_finite_are_an_error_naming_the_task(data: Path) -> None:
    with pytest.raises(DictEmbedError, match=r"^STSB: Vectors\.encode returned non-finite values"):
        evaluate_sts(Vectors(np.nan), tasks=["STSB"], data_dir=data)
    with pytest.raises(DictEmbedError, match=r"^MR: Vectors\.encode returned non-finite values"):
        evaluate_senteval(Vectors(np.inf), tasks=["MR"], data_dir=data, folds=2, inner_folds=2)


def test_constant_vectors_warn_that_the_spearman_is_undefined(data: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dictembed.evaluation.sts"):
        result = evaluate_sts(Vectors(1.0), tasks=["STSB"], data_dir=data)
    assert np.isnan(result["STSB"])
    assert "STSB: the Spearman correlation is undefined (NaN): every predicted similarity is the same" in caplog.text


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("jobs", 0),
        ("jobs", 1.5),
        ("folds", 1),
        ("folds", 0),
        ("inner_folds", 1),
        ("seed", -1),
        ("seed", "1"),
        ("seed", 2**32),
    ],
)
def test_senteval_protocol_is_checked_before_encoding(data: Path, name: str, value: object) -> None:
    model = Vectors()
    with pytest.raises(DictEmbedError, match=rf"^{name} must be .*got {value!r}"):
        evaluate_senteval(model, tasks=["MR"], data_dir=data, **{name: value})  # type: ignore[arg-type]
    assert model.calls == 0


def test_senteval_jobs_keep_joblib_meanings_within_the_cores(monkeypatch) -> None:
    """`--jobs 100000` started hundreds of processes on 2 cores."""
    from dictembed.evaluation import senteval

    monkeypatch.setattr(senteval.os, "cpu_count", lambda: 4)
    for jobs in (-1, -2, -4, 1, np.int64(3), 4):  # -1: one per core; joblib's other negatives too
        senteval.check_protocol(1111, 10, 10, jobs)
    for jobs in (5, -5, 100_000):
        with pytest.raises(DictEmbedError, match=rf"^jobs must be a whole number from 1 to 4 .* got {jobs}$"):
            senteval.check_protocol(1111, 10, 10, jobs)


# ------------------------------------------------------------------------------------------ lexical substitution
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit must be a whole number >= 1 .*got 0"),
        ({"limit": -2007}, "limit must be .*got -2007"),
        ({"limit": 1.5}, "limit must be .*got 1.5"),
        ({"batch_size": 0}, "batch_size must be a whole number from 1 to 1000000, got 0"),
        ({"post": 5}, "post must be a name or a list of names"),
        ({"scoring": "softmax"}, "unknown lexsub scoring 'softmax'"),
        ({"validation_model": 3}, "validation_model must be a model folder or name .*SubstituteValidator, got int"),
    ],
)
def test_lexsub_arguments_are_refused_before_the_model_loads(
    kwargs: dict, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dictembed.evaluation import lexsub

    monkeypatch.setattr(lexsub.SubstituteScorer, "from_pretrained", None)  # loading would fail otherwise
    with pytest.raises(DictEmbedError, match=message):
        lexsub.evaluate_lexsub(default_model(), "LS07", **kwargs)


def test_lexsub_model_is_a_folder_name_or_scorer() -> None:
    from dictembed.encoder import Encoder
    from dictembed.evaluation.lexsub import evaluate_lexsub

    with pytest.raises(DictEmbedError, match=r"model must be a model folder or name .*got NoneType"):
        evaluate_lexsub(None)  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match=r"model must be a model folder or name .*got Encoder"):
        evaluate_lexsub(Encoder.load(default_model()))  # type: ignore[arg-type]
    with pytest.raises(ModelLoadError, match=r"^model folder '/no/such/model' not found$"):
        evaluate_lexsub("/no/such/model")


def test_lexsub_one_post_process_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from dictembed.evaluation import lexsub

    asked: list[bool] = []

    def rank_batch(scorer: object, batch: list, lexicon: object, emb: bool, validator: object) -> list[list[str]]:
        asked.append(emb)
        return [[] for _ in batch]

    monkeypatch.setattr(lexsub, "_rank_batch", rank_batch)
    assert lexsub._post_flags("+emb") == lexsub._post_flags(["+emb"]) == {"emb"}
    instances = lexsub.load_lexsub("LS07").instances[:2]
    lexsub.generate_substitutes(None, instances, post="+emb", batch_size=2)  # type: ignore[arg-type]
    assert asked == [True]


def test_lexsub_takes_a_path_object(monkeypatch: pytest.MonkeyPatch) -> None:
    from dictembed.evaluation import lexsub

    loaded: list[object] = []

    def from_pretrained(folder: object, **kwargs: object) -> None:
        loaded.append(folder)
        raise RuntimeError("model loaded")

    monkeypatch.setattr(lexsub.SubstituteScorer, "from_pretrained", from_pretrained)
    with pytest.raises(RuntimeError, match="model loaded"):
        lexsub.evaluate_lexsub(Path(default_model()), limit=1)
    assert loaded == [str(default_model())]


# ------------------------------------------------------------------------------------------------------------ MTEB
@pytest.mark.parametrize("tasks", [None, [], 5])
def test_mteb_tasks_must_name_some(tasks: object) -> None:
    pytest.importorskip("mteb")
    from dictembed.evaluation.mteb import evaluate_mteb

    with pytest.raises(DictEmbedError, match=r"^tasks must be an MTEB task name or task, or a non-empty list"):
        evaluate_mteb(Vectors(), tasks)  # type: ignore[arg-type]
