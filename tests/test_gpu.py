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


def _losses(path: str, dictionary, device: str, run_dir) -> list[float]:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    encoder = Encoder.load(path, pooling="mean", device=device)
    space = DefinitionSpace.build(encoder, dictionary, "amp", similarity="cosine")
    assert space.matrix.device.type == "cpu"  # built on `device`, stored as a frozen CPU copy
    settings = TrainSettings(lr=3e-3, batch_size=4, epochs=3, seed=0)
    accelerator = Accelerator(cpu=device == "cpu")
    examples = entry_examples(dictionary, space)
    trainer = Trainer(EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, run_dir, accelerator)
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
