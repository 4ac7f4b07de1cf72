"""One device policy, compute precision and gradient accumulation (CPU checks; tests/test_gpu.py has the CUDA ones)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from dictembed import devices
from dictembed.cli import build_parser, main
from dictembed.devices import autocast, resolve_device, resolve_precision
from dictembed.encoder import Encoder
from dictembed.entry_space import WordEmbeddingSpace
from dictembed.errors import DictEmbedError
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.recipes.config import RunConfig
from dictembed.recipes.run import train_settings
from dictembed.training import Trainer, TrainSettings

SENTENCES = ["a dog barks", "water that falls from clouds", "a man who rules a country"]


@pytest.fixture(scope="module")
def bert_without_dropout(tmp_path_factory) -> str:
    from conftest import tiny_bert

    return str(tiny_bert(tmp_path_factory.mktemp("bert-no-dropout"), head=False, dropout=0.0))


def test_device_and_precision_resolution() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else resolve_device(None).type)
    with pytest.raises(DictEmbedError, match="unknown device"):
        resolve_device("gpu0")
    for other in ("meta", "xpu", "hpu", "xla"):  # torch's names, which would fail deep inside or compute nothing
        with pytest.raises(DictEmbedError, match=f"^device '{other}': dictembed runs on cpu, cuda, mps;"):
            resolve_device(other)
    if not torch.cuda.is_available():
        with pytest.raises(DictEmbedError, match="CUDA is not available"):
            resolve_device("cuda:1")
        assert resolve_precision("auto", "auto") == "fp32"
    assert resolve_precision("auto", "cpu") == "fp32"  # the suite pins DICTEMBED_CPU_PRECISION=fp32
    assert resolve_precision("bf16", "cpu") == "bf16"
    with pytest.raises(DictEmbedError, match="unknown precision"):
        resolve_precision("fp8", "cpu")
    with autocast("cpu", "bf16"):
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and torch.is_autocast_enabled("cpu")
    with autocast("cpu", "fp32"):
        assert not torch.is_autocast_enabled("cpu")


def test_each_process_of_a_distributed_launch_takes_the_gpu_of_its_local_rank(monkeypatch) -> None:
    """Under torchrun (LOCAL_RANK) `auto` and a bare `cuda` are the local rank's GPU, so that the processes of one
    machine do not all load their models onto the first; an explicit index is kept; alone, `cuda` as it is."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert devices.best_device() == torch.device("cuda") == resolve_device("cuda")
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert devices.best_device() == torch.device("cuda", 2) == resolve_device("cuda") == resolve_device("auto")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    monkeypatch.setenv("LOCAL_RANK", "7")  # more processes than GPUs: left to the launcher's own placement
    assert devices.best_device() == torch.device("cuda")


def test_an_amx_cpu_computes_in_bf16_and_says_so_once(monkeypatch, caplog) -> None:
    monkeypatch.delenv("DICTEMBED_CPU_PRECISION")
    devices._say_bf16_on_amx.cache_clear()
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: True)
    with caplog.at_level("INFO", logger="dictembed.devices"):
        assert resolve_precision("auto", "cpu") == resolve_precision(None, "cpu") == "bf16"
        assert resolve_precision("fp32", "cpu") == "fp32"  # an explicit choice wins
    assert [r.getMessage().count("--precision fp32") for r in caplog.records] == [1]  # said once, not per call
    devices._say_bf16_on_amx.cache_clear()
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: False)
    monkeypatch.setattr(devices, "cpu_has_avx512_bf16", lambda: False)  # an AVX512_BF16 CPU would time bf16
    caplog.clear()
    with caplog.at_level("INFO", logger="dictembed.devices"):
        assert resolve_precision("auto", "cpu") == "fp32"
    assert not caplog.records


@pytest.fixture
def avx512_bf16_cpu(monkeypatch, tmp_path):
    """A CPU with AVX512_BF16 and no AMX, its kept timing in an empty cache; the process's choice forgotten before
    and after."""
    monkeypatch.delenv("DICTEMBED_CPU_PRECISION")
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: False)
    monkeypatch.setattr(devices, "cpu_has_avx512_bf16", lambda: True)
    devices._avx512_bf16_decided.cache_clear()
    yield tmp_path
    devices._avx512_bf16_decided.cache_clear()


def test_an_avx512_bf16_cpu_takes_bf16_only_where_it_measures_faster(avx512_bf16_cpu, monkeypatch, caplog) -> None:
    """Without AMX but with AVX512_BF16, `auto` times a linear layer in both precisions and takes bf16 from
    `BF16_MIN_GAIN`, timed and said once; an explicit choice wins."""
    timed: list[int] = []
    for number, (gain, expected) in enumerate(((2.4, "bf16"), (devices.BF16_MIN_GAIN, "bf16"), (1.2, "fp32"))):
        devices._avx512_bf16_decided.cache_clear()
        monkeypatch.setenv("DICTEMBED_CACHE", str(avx512_bf16_cpu / f"cache{number}"))  # nothing kept yet
        monkeypatch.setattr(devices, "bf16_gain", lambda gain=gain: timed.append(1) or gain)
        caplog.clear()
        with caplog.at_level("INFO", logger="dictembed.devices"):
            assert resolve_precision("auto", "cpu") == resolve_precision(None, "cpu") == expected
            assert resolve_precision("fp32", "cpu") == "fp32"
        assert len(timed) == 1 and len(caplog.records) == 1  # timed and said once, not per call
        message = caplog.records[0].getMessage()
        assert f"{gain:.1f}x" in message if expected == "bf16" else f"{gain:.2f}x fp32's speed" in message
        timed.clear()


def test_the_bf16_timing_is_kept_per_machine(avx512_bf16_cpu, monkeypatch, caplog) -> None:
    """A second process (a resumed run, another rank) takes the kept gain rather than timing again, so that it
    chooses alike; a damaged file is timed again; a cache that cannot be written times in process."""
    monkeypatch.setattr(devices, "bf16_gain", lambda: 2.0)
    assert resolve_precision("auto", "cpu") == "bf16"
    kept = devices.bf16_gain_file()
    assert kept.parent == avx512_bf16_cpu / "cache" and json.loads(kept.read_text())["gain"] == 2.0
    devices._avx512_bf16_decided.cache_clear()  # as a new process
    monkeypatch.setattr(devices, "bf16_gain", lambda: pytest.fail("timed again"))
    with caplog.at_level("INFO", logger="dictembed.devices"):
        assert resolve_precision("auto", "cpu") == "bf16"
    assert "timed before on this machine" in caplog.text
    kept.write_text("{not json")
    devices._avx512_bf16_decided.cache_clear()
    monkeypatch.setattr(devices, "bf16_gain", lambda: 1.1)
    assert resolve_precision("auto", "cpu") == "fp32" and json.loads(kept.read_text())["gain"] == 1.1
    blocker = avx512_bf16_cpu / "a file"
    blocker.write_text("")
    monkeypatch.setenv("DICTEMBED_CACHE", str(blocker / "cache"))  # under a file: cannot be made
    devices._avx512_bf16_decided.cache_clear()
    monkeypatch.setattr(devices, "bf16_gain", lambda: 3.0)
    with caplog.at_level("INFO", logger="dictembed.devices"):
        assert resolve_precision("auto", "cpu") == "bf16"
    assert "the bf16 timing is not kept" in caplog.text


def test_a_cpu_without_avx512_bf16_is_never_timed(avx512_bf16_cpu, monkeypatch) -> None:
    monkeypatch.setattr(devices, "cpu_has_avx512_bf16", lambda: False)
    monkeypatch.setattr(devices, "bf16_gain", lambda: pytest.fail("timed on a CPU without AVX512_BF16"))
    assert resolve_precision("auto", "cpu") == "fp32"
    assert not (avx512_bf16_cpu / "cache").exists()


def test_bf16_gain_times_a_real_layer(monkeypatch) -> None:
    """The gain is fp32's best time over bf16's: a layer made slower in bf16 reads below 1, one made slower in fp32
    above it."""
    real = torch.nn.Linear.forward

    def slower_in(dtype_slow: str):
        def forward(self, rows):
            if (torch.is_autocast_enabled("cpu")) == (dtype_slow == "bf16"):
                time.sleep(0.02)
            return real(self, rows)

        return forward

    monkeypatch.setattr(torch.nn.Linear, "forward", slower_in("bf16"))
    assert 0 < devices.bf16_gain(tokens=8, width=16, repeats=2) < 0.5
    monkeypatch.setattr(torch.nn.Linear, "forward", slower_in("fp32"))
    assert devices.bf16_gain(tokens=8, width=16, repeats=2) > 2


def test_the_cpu_precision_variable_sets_what_auto_means(monkeypatch) -> None:
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: True)
    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "fp32")
    assert resolve_precision("auto", "cpu") == "fp32"
    monkeypatch.setattr(devices, "cpu_has_amx", lambda: False)
    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "BF16")  # an AVX512_BF16 CPU without AMX, by choice
    assert resolve_precision("auto", "cpu") == "bf16"
    assert resolve_precision("fp32", "cpu") == "fp32"
    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "fp8")
    with pytest.raises(DictEmbedError, match="DICTEMBED_CPU_PRECISION='fp8': use fp32, bf16 or auto"):
        resolve_precision("auto", "cpu")


def test_run_config_records_the_resolved_precision_and_grad_accum() -> None:
    config = RunConfig.create("defsent-plus", device="cpu", grad_accum=2)
    assert config.precision == "fp32"  # "auto" on the CPU
    assert config.to_dict()["precision"] == "fp32"
    identity = config.run_identity()
    assert identity["precision"] == "fp32" and identity["grad_accum"] == 2 and "device" not in identity
    assert RunConfig.create("defsent-plus", device="cpu", precision="bf16").precision == "bf16"
    assert train_settings(config, 1e-3, 0).grad_accum == 2


def test_encoder_compute_precision_autocasts_inference(bert_without_dropout) -> None:
    encoder = Encoder.load(bert_without_dropout, pooling="mean", device="cpu")
    assert encoder.compute_precision == "fp32"
    full = encoder.encode(SENTENCES)
    assert encoder.set_precision("auto").compute_precision == "fp32"
    encoder.set_precision("bf16")
    assert encoder.with_pooling("cls").compute_precision == "bf16"
    with encoder.autocast():
        low = encoder.encode(SENTENCES)
    assert low.dtype == np.float32
    assert not np.array_equal(low, full)  # computed in bf16: close, not identical
    np.testing.assert_allclose(low, full, atol=0.1)


def _trainer(path: str, dictionary, run_dir, batch_size: int, grad_accum: int) -> tuple[Trainer, Encoder]:
    torch.manual_seed(123)
    encoder = Encoder.load(path, pooling="mean", device="cpu")
    space = WordEmbeddingSpace.from_encoder(encoder, dictionary.headwords)
    settings = TrainSettings(
        lr=1e-3, batch_size=batch_size, epochs=2, seed=7, checkpoint_every=3, grad_accum=grad_accum
    )
    examples = entry_examples(dictionary, space)
    model = EntryPrediction(encoder, space)
    trainer = Trainer(model, examples, entry_collate(encoder), settings, run_dir, {"limit": None}, device="cpu")
    return trainer, encoder


def test_gradient_accumulation_matches_the_full_batch(bert_without_dropout, toy_dictionary, tmp_path) -> None:
    """Batch 4 in two micro-batches of 2 ends at the weights of batch 4 in one pass (no dropout): within 1e-5
    (measured: 2.4e-6), the float32 rounding of summing two half-batch gradients instead of one. The attention
    key biases are the exception: softmax ignores them, so their true gradient is 0 and what they get is rounding
    noise, which Adam scales up to steps of about lr; they are only checked to stay within Adam's bound."""
    full_trainer, full = _trainer(bert_without_dropout, toy_dictionary, tmp_path / "full", 4, 1)
    full_losses = full_trainer.fit()
    accum_trainer, accum = _trainer(bert_without_dropout, toy_dictionary, tmp_path / "accum", 4, 2)
    assert accum_trainer.micro_batch == 2 and accum_trainer.total_steps == full_trainer.total_steps == 8
    accum_losses = accum_trainer.fit()
    assert accum_trainer.progress.step == 8 and len(accum_losses) == 8  # optimizer steps, not micro-batches
    np.testing.assert_allclose(accum_losses, full_losses, rtol=1e-4)
    assert np.mean(accum_losses[-2:]) < np.mean(accum_losses[:2])
    reference = full.state_dict()
    for name, value in accum.state_dict().items():
        noise_only = name.endswith("attention.self.key.bias")
        atol = 2 * 8 * 1e-3 if noise_only else 1e-5  # Adam moves a weight by at most about lr a step
        torch.testing.assert_close(value, reference[name], atol=atol, rtol=0, msg=name)
    assert accum_trainer.scheduler.last_epoch == 8  # the learning-rate schedule advanced once per optimizer step


def test_gradient_accumulation_resumes_at_an_optimizer_step(bert_without_dropout, toy_dictionary, tmp_path) -> None:
    straight_trainer, straight = _trainer(bert_without_dropout, toy_dictionary, tmp_path / "straight", 4, 2)
    straight_trainer.fit()
    killed, _ = _trainer(bert_without_dropout, toy_dictionary, tmp_path / "run", 4, 2)
    killed.fit(max_steps=5)
    resumed, encoder = _trainer(bert_without_dropout, toy_dictionary, tmp_path / "run", 4, 2)
    resumed.fit(resume=True)
    assert resumed.progress.step == 8
    reference = straight.state_dict()
    for name, value in encoder.state_dict().items():
        torch.testing.assert_close(value, reference[name], atol=1e-6, rtol=0, msg=name)


def test_a_batch_that_does_not_split_is_refused(bert_without_dropout, toy_dictionary, tmp_path) -> None:
    with pytest.raises(DictEmbedError, match="does not split"):
        _trainer(bert_without_dropout, toy_dictionary, tmp_path / "run", 4, 3)


MODEL_COMMANDS = [
    ["train", "--output", "o"],
    ["encode", "--input", "i", "--output", "o.npy"],
    ["predict", "--model", "m", "a definition"],
    ["serve", "--model", "m"],
    ["evaluate", "sts"],
    ["evaluate", "senteval"],
    ["evaluate", "reverse-dictionary", "--model", "m"],
    ["evaluate", "lexsub"],
    ["evaluate", "mteb", "--tasks", "STSBenchmark"],
    ["finetune", "stsb"],
]


@pytest.mark.parametrize("command", MODEL_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_model_command_takes_device_and_precision(command) -> None:
    parser = build_parser()
    args = parser.parse_args(command)
    assert (args.device, args.precision) == ("auto", "auto") or command[0] == "train"
    args = parser.parse_args([*command, "--device", "cuda:1", "--precision", "bf16"])
    assert (args.device, args.precision) == ("cuda:1", "bf16")
    with pytest.raises(SystemExit):
        parser.parse_args([*command, "--precision", "int8"])


def test_train_takes_grad_accum_and_records_precision(capsys) -> None:
    args = build_parser().parse_args(["train", "--output", "o", "--grad-accum", "2", "--device", "cpu"])
    assert (args.grad_accum, args.device, args.precision) == (2, "cpu", None)  # None: the preset's "auto"


def test_encode_on_the_cpu_in_bf16_and_a_missing_gpu_is_one_line(bert_path, tmp_path, capsys) -> None:
    import json

    (tmp_path / "in.txt").write_text("a dog barks\nthe river flows\n")
    base = ["encode", "--model", str(bert_path), "--input", str(tmp_path / "in.txt")]
    assert main([*base, "--output", str(tmp_path / "a.npy"), "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["device"], report["precision"], report["quantize"]) == ("cpu", "fp32", "float32")
    assert main([*base, "--output", str(tmp_path / "b.npy"), "--device", "cpu", "--precision", "bf16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["precision"] == "bf16"
    full, low = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    assert low.dtype == np.float32 and not np.array_equal(full, low) and np.allclose(full, low, atol=0.1)
    if not torch.cuda.is_available():
        assert main([*base, "--output", str(tmp_path / "c.npy"), "--device", "cuda"]) == 1
        assert "CUDA is not available" in capsys.readouterr().err


def test_two_cpu_processes_train_like_one(tmp_path) -> None:
    """`torchrun --nproc_per_node 2 -m dictembed train` (DDP over gloo, global batch 4 = 2 processes x 2)
    ends at the weights of a single-process run with batch 4, within 1e-4; only the main process writes the
    model, the log and the report. The attention key biases are compared to 1e-2: their true gradient is
    zero (softmax ignores a constant shift), so they move only by rounding noise, which AdamW scales to steps
    of up to the learning rate (1e-3) each."""
    import json
    import os
    import subprocess
    import sys

    from conftest import TOY_WORDS, tiny_bert
    from safetensors.torch import load_file

    from dictembed.cli import main

    model = tiny_bert(tmp_path / "bert", head=False, dropout=0.0)
    toy = tmp_path / "toy.tsv"
    toy.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, ds in TOY_WORDS.items() for d in ds))
    flags = ["--model", str(model), "--dictionary", str(toy), "--batch-size", "4", "--epochs", "3", "--lr-grid", "1e-3"]
    flags += ["--device", "cpu", "--precision", "fp32", "--descriptions", "none", "-q"]
    assert main(["train", *flags, "--output", str(tmp_path / "one")]) == 0
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m", "dictembed", "train"]
    done = subprocess.run(
        [*launch, *flags, "--output", str(tmp_path / "two"), "--json"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["output"].endswith("two")  # one report, from the main process
    metrics = list((tmp_path / "two-runs").rglob("metrics.jsonl"))
    assert len(metrics) == 1 and len(metrics[0].read_text().splitlines()) == 1  # written once, not twice
    one, two = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    for name, value in one.items():
        if not name.startswith("pooler"):  # BERT's pooler: unused by mean pooling, drawn anew at each load
            tolerance = 1e-2 if name.endswith("key.bias") else 1e-4
            assert torch.allclose(value, two[name], atol=tolerance), name
