"""MTEB: `mteb.evaluate` takes an Encoder through `MtebEncoder`, `evaluate_mteb` returns main scores x 100, all offline.

The task is an MTEB STS task over the first pairs of the local STS-B test file; its score must equal the
cosine Spearman x 100 computed by hand with the same encoder. mteb's caches point into tmp_path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from dictembed.backends.onnx.runtime import attach
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.evaluation.mteb import MtebEncoder
from dictembed.evaluation.sts import load_stsb

PAIRS = 40
TASK_NAME = "DictEmbedLocalSTSB"


@pytest.fixture()
def mteb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """mteb, imported with its result cache (created on import) in tmp_path."""
    monkeypatch.setenv("MTEB_CACHE", str(tmp_path / "mteb-cache"))
    return pytest.importorskip("mteb")


def local_pairs() -> tuple[list[str], list[str], list[float]]:
    stsb = load_stsb("test")
    return stsb.sentences1[:PAIRS], stsb.sentences2[:PAIRS], stsb.scores[:PAIRS].tolist()


def task_metadata(mteb: Any, name: str, path: str) -> Any:
    return mteb.TaskMetadata(
        name=name,
        type="STS",
        description="The first STS-B test pairs, read from the local shared data (a dictembed test task).",
        reference="https://ixa2.si.ehu.eus/stswiki/index.php/STSbenchmark",
        dataset={"path": path, "revision": "local"},
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="cosine_spearman",
        date=("2017-01-01", "2017-12-31"),
        domains=["News", "Written"],
        task_subtypes=[],
        license="not specified",
        annotations_creators="human-annotated",
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
    )


def local_sts_task(mteb: Any) -> Any:
    """An MTEB STS task whose `load_data` builds its dataset from the local STS-B file."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS

    class LocalSTSB(AbsTaskSTS):
        metadata = task_metadata(mteb, TASK_NAME, "local/stsb-test")
        min_score = 0
        max_score = 5

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            first, second, scores = local_pairs()
            self.dataset = DatasetDict(
                {"test": Dataset.from_dict({"sentence1": first, "sentence2": second, "score": scores})}
            )
            self.data_loaded = True

    return LocalSTSB()


def unavailable_task(mteb: Any) -> Any:
    """An STS task on a Hub dataset that is not in any local cache: mteb's own load_data must fail offline."""
    from mteb.abstasks.sts import AbsTaskSTS

    class Unavailable(AbsTaskSTS):
        metadata = task_metadata(mteb, "DictEmbedUnavailableSTS", "dictembed-tests/no-such-dataset")

    return Unavailable()


def spearman_by_hand(encoder: Encoder) -> float:
    first, second, gold = local_pairs()
    a, b = encoder.encode(first, batch_size=32), encoder.encode(second, batch_size=32)
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return 100 * float(spearmanr(gold, cosine).statistic)


@pytest.fixture()
def encoder(bert_path: Path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean")


def test_mteb_encoder_meets_the_protocol(mteb: Any, encoder: Encoder) -> None:
    model = MtebEncoder(encoder)
    assert isinstance(model, mteb.EncoderProtocol)
    meta = model.mteb_model_meta
    assert meta.name.startswith("dictembed/") and meta.revision.startswith("weights-")
    assert meta.embed_dim == encoder.dim and meta.similarity_fn_name.value == "cosine"
    assert meta.experiment_kwargs == {"pooling": "mean", "normalize": False}
    pairwise = model.similarity_pairwise(np.eye(3, 4), np.ones((3, 4)))
    assert np.allclose(np.asarray(pairwise), 0.5)


def test_precision_and_onnx_are_separate_experiments(mteb: Any, bert_path: Path) -> None:
    """bf16 and an ONNX graph make other vectors from the same weights: MTEB must file their results apart."""
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")  # one load: the same weights
    metas = [MtebEncoder(encoder).mteb_model_meta, MtebEncoder(encoder.set_precision("bf16")).mteb_model_meta]
    metas.append(MtebEncoder(attach(encoder.set_precision("fp32"), bert_path)).mteb_model_meta)
    assert metas[1].experiment_kwargs == {"pooling": "mean", "normalize": False, "precision": "bf16"}
    assert set(metas[2].experiment_kwargs) == {"pooling", "normalize", "backend"}
    assert re.fullmatch("onnx-fp32-[0-9a-f]{8}", metas[2].experiment_kwargs["backend"])
    assert len({m.experiment_name for m in metas}) == 3 and len({m.revision for m in metas}) == 1
    # the pooler (absent from this checkpoint, unused by mean pooling) never enters the vectors nor the revision
    again = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    with torch.no_grad():
        again.backbone.pooler.dense.weight.add_(1.0)
    assert not torch.equal(again.backbone.pooler.dense.weight, encoder.backbone.pooler.dense.weight)
    assert MtebEncoder(again).mteb_model_meta.revision == metas[0].revision


def test_mteb_evaluate_scores_the_adapted_encoder(mteb: Any, encoder: Encoder, tmp_path: Path) -> None:
    result = mteb.evaluate(
        MtebEncoder(encoder),
        local_sts_task(mteb),
        cache=None,
        co2_tracker=False,
        show_progress_bar=False,
        encode_kwargs={"batch_size": 32},
    )
    score = 100 * result.task_results[0].get_score()
    assert score == pytest.approx(spearman_by_hand(encoder), abs=1e-6)


def test_evaluate_mteb_main_score_x100_and_files_only_in_output(mteb: Any, encoder: Encoder, tmp_path: Path) -> None:
    from dictembed.evaluation.mteb import evaluate_mteb

    out = tmp_path / "mteb-results"
    scores = evaluate_mteb(encoder, [local_sts_task(mteb)], output_folder=out)
    assert list(scores) == [TASK_NAME]
    assert scores[TASK_NAME] == pytest.approx(spearman_by_hand(encoder), abs=1e-6)
    assert [p.name for p in out.rglob(f"{TASK_NAME}.json")] == [f"{TASK_NAME}.json"]
    assert not any(p.is_file() for p in (tmp_path / "mteb-cache").rglob("*"))  # the default cache is untouched


def test_a_rerun_reads_the_finished_tasks_back_and_other_weights_run_again(
    mteb: Any, encoder: Encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dictembed.evaluation.mteb import evaluate_mteb

    out = tmp_path / "mteb-results"
    first = evaluate_mteb(encoder, [local_sts_task(mteb)], output_folder=out)
    encoded: list[int] = []
    original = MtebEncoder.encode
    monkeypatch.setattr(MtebEncoder, "encode", lambda self, *a, **k: encoded.append(1) or original(self, *a, **k))
    again = evaluate_mteb(encoder, [local_sts_task(mteb)], output_folder=out)
    assert again[TASK_NAME] == pytest.approx(first[TASK_NAME], abs=1e-3)  # mteb's files keep 6 decimals of 0-1
    assert encoded == []  # read from the output folder
    with torch.no_grad():
        next(p for p in encoder.parameters() if p.dim() == 2).mul_(0.5)  # other weights: another revision
    again = evaluate_mteb(encoder, [local_sts_task(mteb)], output_folder=out)
    assert encoded and again[TASK_NAME] == pytest.approx(spearman_by_hand(encoder), abs=1e-6)


def test_evaluate_mteb_without_output_writes_nothing(mteb: Any, encoder: Encoder, tmp_path: Path) -> None:
    from dictembed.evaluation.mteb import evaluate_mteb

    before = sorted(tmp_path.rglob("*"))
    assert TASK_NAME in evaluate_mteb(encoder, [local_sts_task(mteb)])
    assert sorted(tmp_path.rglob("*")) == before


def test_unknown_task_name_is_one_line_error(mteb: Any, encoder: Encoder) -> None:
    from dictembed.evaluation.mteb import evaluate_mteb

    with pytest.raises(DictEmbedError, match="unknown MTEB task 'NoSuchTaskAnywhere'") as info:
        evaluate_mteb(encoder, ["NoSuchTaskAnywhere"])
    assert "\n" not in str(info.value)


def test_task_without_offline_data_is_one_line_error(mteb: Any, encoder: Encoder) -> None:
    from dictembed.evaluation.mteb import evaluate_mteb

    with pytest.raises(DictEmbedError, match="'DictEmbedUnavailableSTS': its data is not available offline") as info:
        evaluate_mteb(encoder, [unavailable_task(mteb)])
    assert "\n" not in str(info.value)
