"""GPU checks: run wherever CUDA is present, skipped only where it is not (CI has no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.training import Trainer, TrainSettings

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SENTENCES = ["a dog barks", "water that falls from clouds", "", "a man who rules a country " * 20]


@pytest.fixture()
def bert_without_dropout(tmp_path) -> str:
    """A tiny BERT without dropout, so a CPU and a CUDA run see the same function (their RNGs differ)."""
    from conftest import tiny_bert

    return str(tiny_bert(tmp_path / "bert", head=False, dropout=0.0))


def _losses(path: str, dictionary, device: str, run_dir, precision: str = "fp32") -> list[float]:
    encoder = Encoder.load(path, pooling="mean", device=device)
    space = DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")
    assert space.matrix.device.type == "cpu"  # built on `device`, stored as a frozen CPU copy
    settings = TrainSettings(lr=3e-3, batch_size=4, epochs=3, seed=0)
    examples = entry_examples(dictionary, space)
    objective = EntryPrediction(encoder, space)
    trainer = Trainer(
        objective, examples, entry_collate(encoder), settings, run_dir, device=device, precision=precision
    )
    assert next(trainer.unwrapped.parameters()).device.type == device
    return trainer.fit()


def test_cuda_and_cpu_give_the_same_loss_curve(bert_without_dropout, toy_dictionary, tmp_path) -> None:
    """Same seed, same batches: the losses agree to 1e-3 relative (TF32 off; only summation order differs)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    cpu = _losses(bert_without_dropout, toy_dictionary, "cpu", tmp_path / "cpu")
    cuda = _losses(bert_without_dropout, toy_dictionary, "cuda", tmp_path / "cuda")
    assert len(cpu) == len(cuda) > 5
    np.testing.assert_allclose(cuda, cpu, rtol=1e-3)
    assert np.mean(cuda[-3:]) < np.mean(cuda[:3])


def test_encoder_defaults_to_cuda_and_a_gpu_save_reloads_on_cpu(bert_path, tmp_path) -> None:
    encoder = Encoder.load(str(bert_path), pooling="cls", pooler="model")
    assert encoder.device.type == "cuda" and encoder.post[0].linear.weight.device.type == "cuda"
    on_gpu = encoder.encode(SENTENCES)
    out = encoder.save(tmp_path / "gpu-model")
    assert encoder.device.type == "cuda"  # saving leaves the live model where it was
    on_cpu = Encoder.load(str(out), device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(on_cpu, on_gpu, atol=1e-4)


def test_bf16_is_the_auto_precision_and_trains_and_encodes(bert_without_dropout, toy_dictionary, tmp_path) -> None:
    """auto is bf16 on a GPU that supports it; bf16 training follows the fp32 loss curve to 5e-2 relative and
    bf16 encoding gives float32 vectors within 5e-2 of fp32's."""
    from dictembed.devices import resolve_precision

    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    assert resolve_precision("auto", "cuda") == "bf16"
    full = _losses(bert_without_dropout, toy_dictionary, "cuda", tmp_path / "fp32")
    low = _losses(bert_without_dropout, toy_dictionary, "cuda", tmp_path / "bf16", precision="bf16")
    np.testing.assert_allclose(low, full, rtol=5e-2)
    encoder = Encoder.load(bert_without_dropout, device="cuda")
    reference = encoder.encode(SENTENCES)
    with encoder.set_precision("auto").autocast():
        vectors = encoder.encode(SENTENCES)
    assert encoder.compute_precision == "bf16" and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, reference, atol=5e-2)


def test_query_distillation_runs_on_cuda_as_on_the_cpu(monkeypatch) -> None:
    """The teacher's vectors start on the CPU and the batch's rows arrive on the GPU (the trainer moves the batch):
    the loss is the CPU's (TF32 off, so that only summation order differs)."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    from test_query_distillation import FixedVectors

    from dictembed.objectives.query_distillation import QueryDistillation

    student = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    teacher = torch.tensor([[0.0, 1.0], [0.6, 0.8], [1.0, 1.0]])
    entries = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    rows = torch.tensor([2, 0, 1])
    on_cpu = QueryDistillation(FixedVectors(student), teacher, entries, ranking_weight=0.5)(({}, rows))
    on_gpu = QueryDistillation(FixedVectors(student.cuda()), teacher, entries, ranking_weight=0.5)(({}, rows.cuda()))
    assert on_gpu["loss"].device.type == "cuda"
    assert on_gpu["loss"].item() == pytest.approx(on_cpu["loss"].item(), rel=1e-5)
    assert on_gpu["ranking"].item() == pytest.approx(on_cpu["ranking"].item(), rel=1e-5)


def test_a_space_left_on_the_gpu_by_training_still_makes_subsets(bert_path, toy_dictionary) -> None:
    """Training moves the entry space to the GPU in place (`EntryPrediction`); a subset of it is the CPU's."""
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine")
    words = space.words[:2]
    expected = space.subset(words)
    space.to("cuda")
    assert space.matrix.device.type == "cuda"
    subset = space.subset(words)
    assert subset.words == expected.words and torch.equal(subset.matrix, expected.matrix)
