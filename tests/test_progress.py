"""Progress in logs: a bar on a terminal; when stderr is a file or a pipe, a line at a steady interval (done/total,
rate, loss, time left), from one helper for training, the entry-space build and encoding."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dictembed import progress
from dictembed.encoder import Encoder
from dictembed.entry_space import WordEmbeddingSpace
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.progress import Progress, bars_turned_off, duration
from dictembed.training import Trainer, TrainSettings


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (0, 44.6, 89, 780, 5000, 7500)] == [
        "0 s",
        "45 s",
        "89 s",
        "13 min",
        "83 min",
        "2 h 05 min",
    ]
    assert duration(float("inf")) == "an unknown time"


def test_the_interval_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(progress.INTERVAL_ENV, raising=False)
    assert progress.interval() == 30
    monkeypatch.setenv(progress.INTERVAL_ENV, "2.5")
    assert progress.interval() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(progress.INTERVAL_ENV, bad)
        assert progress.interval() == 30


@pytest.mark.parametrize("on_terminal", [False, True])
def test_lines_are_logged_only_when_stderr_is_no_terminal(on_terminal, monkeypatch, caplog) -> None:
    monkeypatch.setattr(progress, "terminal", lambda: on_terminal)
    with caplog.at_level(logging.INFO, logger="dictembed.progress"):
        with Progress(4, "work", unit="item", every=0, per_unit=10, rate_unit="words") as bar:
            for _ in range(4):
                bar.set_postfix(loss="1.234")
                bar.update()
    lines = [r.getMessage() for r in caplog.records]
    if on_terminal:
        assert lines == []  # the bar shows it
    else:
        assert len(lines) == 3  # after each of the first three items; the end is the caller's to say
        assert lines[0].startswith("work: item 1/4 (25%), ") and " words/s, loss 1.234, about " in lines[0]
        assert lines[0].endswith(" left")


def test_no_lines_when_bars_are_off_or_not_wanted(monkeypatch, caplog) -> None:
    monkeypatch.setattr(progress, "terminal", lambda: False)
    with caplog.at_level(logging.INFO, logger="dictembed.progress"):
        with bars_turned_off(), Progress(3, "quiet", every=0) as bar:
            bar.update(2)
        with Progress(3, "unwanted", every=0, show=False) as bar:
            bar.update(2)
    assert caplog.records == []


def test_a_line_waits_for_the_interval(monkeypatch, caplog) -> None:
    monkeypatch.setattr(progress, "terminal", lambda: False)
    with caplog.at_level(logging.INFO, logger="dictembed.progress"):
        with Progress(100, "slow", every=3600) as bar:
            bar.update(50)
    assert caplog.records == []


def test_training_logs_progress_lines_when_stderr_is_no_terminal(
    bert_path, toy_dictionary, tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(progress, "terminal", lambda: False)
    monkeypatch.setenv(progress.INTERVAL_ENV, "0")  # a line at every step
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    space = WordEmbeddingSpace.from_encoder(encoder, toy_dictionary.headwords)
    settings = TrainSettings(lr=1e-3, batch_size=4, epochs=2, seed=0, checkpoint_every=100)
    examples = entry_examples(toy_dictionary, space)
    trainer = Trainer(
        EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, tmp_path, device="cpu"
    )
    with caplog.at_level(logging.INFO, logger="dictembed.training"):
        trainer.fit()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("train: step ")]
    assert [line.split(",")[0] for line in lines] == [f"train: step {i}/8 ({100 * i / 8:.0f}%)" for i in range(1, 8)]
    assert all(" examples/s, loss " in line and line.endswith(" left") for line in lines), lines
    assert "step 8/8 loss" in caplog.text  # the end of training, as before


def test_encoding_logs_progress_lines_when_stderr_is_no_terminal(bert_path, monkeypatch, caplog) -> None:
    """Dev evaluation and the entry-space build encode through `Encoder.embed`, whose bar is a `Progress`."""
    monkeypatch.setattr(progress, "terminal", lambda: False)
    monkeypatch.setenv(progress.INTERVAL_ENV, "0")
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    with caplog.at_level(logging.INFO, logger="dictembed.encoder"):
        encoder.encode([f"sentence number {i}" for i in range(12)], batch_size=2, show_progress_bar=True)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encode: batch ")]
    assert len(lines) == 5 and lines[0].startswith("encode: batch 1/6 (17%), ") and " batches/s" in lines[0]


def stderr_on_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `argv` with stderr on a pseudo-terminal (stdout discarded); its exit status and what it wrote there."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # bars need a width
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=env) as run:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: every end of the terminal's other side is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = run.wait(timeout=600)
    os.close(leader)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_no_bar_is_drawn_unless_stderr_is_a_terminal(monkeypatch) -> None:
    monkeypatch.delenv(progress.DISABLE_ENV, raising=False)
    monkeypatch.setattr(progress, "terminal", lambda: False)
    assert progress.disable(True) is True and progress.disable(None) is True
    monkeypatch.setattr(progress, "terminal", lambda: True)
    assert progress.disable(True) is False and progress.disable(None) is False and progress.disable(False) is True


def test_encode_draws_no_bar_into_a_log_file(bert_path: Path, tmp_path: Path) -> None:
    """`dictembed encode 2> log`: the log holds no bar (no `%|`, no carriage returns); a terminal gets the bar."""
    sentences = tmp_path / "in.txt"
    sentences.write_text("".join(f"sentence number {i}\n" for i in range(40)))
    argv = [sys.executable, "-m", "dictembed", "encode", "--model", str(bert_path), "--input", str(sentences)]
    env = {**os.environ, progress.DISABLE_ENV: ""}
    with open(tmp_path / "encode.log", "w+b") as log_file:
        done = subprocess.run([*argv, "--output", str(tmp_path / "a.npy")], stderr=log_file, env=env, timeout=600)
        log_file.seek(0)
        err = log_file.read().decode("utf-8", "replace")
    assert done.returncode == 0, err[-2000:]
    assert np.load(tmp_path / "a.npy").shape[0] == 40
    assert "%|" not in err and "\r" not in err, err[-2000:]
    code, on_terminal = stderr_on_terminal([*argv, "--output", str(tmp_path / "b.npy")], env)
    assert code == 0 and "encode: 100%|" in on_terminal, on_terminal[-2000:]
