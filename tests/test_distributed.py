"""Distributed entry-space builds and `--resume` after a killed DDP process: two CPU processes under
`torchrun --nproc_per_node 2` (gloo), against one process. (`accelerate launch --cpu --num_processes 2`
starts a single process on this machine, so the tests use torchrun, like tests/test_devices.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dictembed.distributed import broadcast_int, encode_across_processes, process_count
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace

LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]


def launch_env() -> dict[str, str]:
    """The launcher's environment, read when it starts (after conftest's fixtures set $TMPDIR)."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


# Run by each of the two processes: build the space with a cache, recording what this process encoded and
# every file it renamed into the cache folder (an atomic write ends with os.replace), then save its matrix.
BUILD_SCRIPT = """
import json, os, sys
from pathlib import Path
import numpy as np
import torch
torch.set_num_threads(1)
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace

model, data, cache, out = sys.argv[1:5]
rank = os.environ["RANK"]
log = Path(out) / f"log-{rank}.jsonl"
def note(**record):
    with open(log, "a") as f:
        f.write(json.dumps(record) + "\\n")
encode = Encoder.encode
def counting_encode(self, sentences, *args, **kwargs):
    note(encoded=list(sentences))
    return encode(self, sentences, *args, **kwargs)
Encoder.encode = counting_encode
replace = os.replace
def noting_replace(src, dst):
    if Path(dst).parent.resolve() == Path(cache).resolve():
        note(wrote=Path(dst).name)
    return replace(src, dst)
os.replace = noting_replace
dictionary = Dictionary(name="toy")
for word, definition in json.loads(Path(data).read_text()):
    dictionary.add(word, definition)
encoder = Encoder.load(model, pooling="mean", device="cpu")
space = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=cache, batch_size=3)
np.save(Path(out) / f"matrix-{rank}.npy", space.matrix.numpy())
"""


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from conftest import tiny_bert

    return tiny_bert(tmp_path_factory.mktemp("bert-no-dropout"), head=False, dropout=0.0)


def test_one_process_encodes_like_encode(bert: Path) -> None:
    """Outside a launcher everything is a plain `Encoder.encode`, bit for bit (quantised too)."""
    encoder = Encoder.load(str(bert), pooling="mean", device="cpu")
    sentences = ["a dog barks", "water that falls from clouds", "a man who rules a country", "bread"]
    assert process_count() == 1 and broadcast_int(7) == 7
    np.testing.assert_array_equal(encode_across_processes(encoder, sentences, 2), encoder.encode(sentences, 2))
    packed = encode_across_processes(encoder, sentences, 2, quantize="binary")
    np.testing.assert_array_equal(packed, encoder.encode(sentences, 2, quantize="binary"))


def test_two_processes_build_the_space_of_one_and_cache_it_once(bert: Path, tmp_path: Path) -> None:
    """Each process encodes one contiguous half of the definitions (accelerate's split: the first process
    takes the odd one); the gathered matrix is the same on both and equals a one-process build within
    1e-6: both encode every definition with the same weights, only in other batches (other padding and
    length-sorted groups), which changes float32 sums in the last bits at most. The cache file is renamed
    into place once, by the main process."""
    from conftest import TOY_WORDS

    pairs = [[w, d] for w, ds in TOY_WORDS.items() for d in ds] + [["dog", "a friend of people"]]  # 17: odd
    (tmp_path / "toy.json").write_text(json.dumps(pairs))
    (tmp_path / "build.py").write_text(BUILD_SCRIPT)
    out, cache = tmp_path / "out", tmp_path / "cache"
    out.mkdir()
    command = [*LAUNCH, str(tmp_path / "build.py"), str(bert), str(tmp_path / "toy.json"), str(cache), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=launch_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    from dictembed.dictionary.core import Dictionary

    dictionary = Dictionary(name="toy")
    for word, definition in pairs:
        dictionary.add(word, definition)
    encoder = Encoder.load(str(bert), pooling="mean", device="cpu")
    single = DefinitionSpace.build(encoder, dictionary, "amp", batch_size=3).matrix.numpy()
    first, second = np.load(out / "matrix-0.npy"), np.load(out / "matrix-1.npy")
    np.testing.assert_array_equal(first, second)  # every process ends with the same matrix
    np.testing.assert_allclose(first, single, rtol=0, atol=1e-6)
    assert not np.allclose(first, np.roll(single, 1, axis=0), atol=1e-3)  # the order matters: it is checked

    logs = {rank: [json.loads(line) for line in (out / f"log-{rank}.jsonl").read_text().splitlines()] for rank in "01"}
    encoded = {rank: [s for r in records for s in r.get("encoded", [])] for rank, records in logs.items()}
    definitions = [d for _, d in dictionary.pairs()]
    assert encoded["0"] == definitions[:9] and encoded["1"] == definitions[9:]  # the split: 9 + 8, in order
    written = {rank: [r["wrote"] for r in records if "wrote" in r] for rank, records in logs.items()}
    assert written["1"] == []
    assert [name for name in written["0"] if name.endswith(".safetensors")] == [next(cache.glob("*.safetensors")).name]
    assert len(list(cache.glob("*.safetensors"))) == 1 and not list(cache.glob("*.partial"))


# ------------------------------------------------------------------ resume after a killed DDP process
def _worker_pids(launcher: int) -> dict[int, int]:
    """The worker processes of a torchrun launcher: {rank: pid}, from /proc (RANK is in each one's environment)."""
    workers = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0") if ppid == launcher else []
        except (OSError, IndexError, ValueError):
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                workers[int(item[5:])] = int(entry.name)
    return workers


def _checkpoint_step(runs: Path) -> int:
    """The step of the newest complete training checkpoint under `runs` (0: none yet)."""
    steps = [json.loads(p.read_text())["step"] for p in runs.rglob("checkpoint/run.json") if p.stat().st_size]
    return max(steps, default=0)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the worker processes through /proc")
def test_resume_after_one_ddp_process_is_killed(bert: Path, tmp_path: Path) -> None:
    """Two-process DDP training with a checkpoint every 2 steps; once one is written, SIGKILL the rank-1
    worker (torchrun then stops the other and fails). `train --resume` under torchrun continues from the
    checkpoint and ends at the weights of an uninterrupted run: the one-process run with the same global
    batch, within the tolerances of tests/test_devices.py's two-process test (1e-4; attention key biases
    1e-2, as they move only by rounding noise that AdamW scales up to steps of about the learning rate)."""
    from conftest import TOY_WORDS
    from safetensors.torch import load_file

    from dictembed.cli import main

    toy = tmp_path / "toy.tsv"
    toy.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, ds in TOY_WORDS.items() for d in ds))
    flags = ["--model", str(bert), "--dictionary", str(toy), "--batch-size", "4", "--epochs", "8"]
    flags += ["--lr-grid", "1e-3", "--device", "cpu", "--precision", "fp32", "--checkpoint-every", "2"]
    flags += ["--cache-dir", str(tmp_path / "cache"), "--descriptions", "none"]
    assert main(["train", *flags, "-q", "--output", str(tmp_path / "one")]) == 0

    two = [*LAUNCH, "-m", "dictembed", "train", *flags, "--output", str(tmp_path / "two")]
    runs = tmp_path / "two-runs"
    launcher = subprocess.Popen(
        [*two, "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=launch_env()
    )
    try:
        deadline = time.monotonic() + 240
        while _checkpoint_step(runs) == 0 and launcher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        workers = _worker_pids(launcher.pid)
        assert launcher.poll() is None and 1 in workers, "the run ended before a checkpoint could be killed"
        killed_at = _checkpoint_step(runs)
        os.kill(workers[1], signal.SIGKILL)
        _, err = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode != 0, err[-2000:]
    assert not (tmp_path / "two").exists()  # nothing published by the killed run
    assert 2 <= killed_at < 32  # 16 examples / batch 4 = 4 steps an epoch, 8 epochs

    resumed = subprocess.run([*two, "--resume", "-v"], capture_output=True, text=True, env=launch_env(), timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    resumed_at = [int(m) for m in re.findall(r"resumed from .* at step (\d+)", resumed.stderr)]
    assert len(resumed_at) == 2 and resumed_at[0] == resumed_at[1] >= killed_at  # both processes, one step
    assert _checkpoint_step(runs) == 0  # a finished run discards its checkpoint
    one, two_weights = (load_file(tmp_path / name / "model.safetensors") for name in ("one", "two"))
    for name, value in one.items():
        if not name.startswith("pooler"):  # BERT's pooler: unused by mean pooling, drawn anew at each load
            tolerance = 1e-2 if name.endswith("key.bias") else 1e-4
            torch.testing.assert_close(two_weights[name], value, atol=tolerance, rtol=0, msg=name)
