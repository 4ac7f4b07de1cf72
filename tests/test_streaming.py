"""`dictembed encode` to .npy in chunks through a memory map, resumable after an interruption or a kill."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dictembed.cli import main
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.streaming import PROBES, encode_to_npy, iter_lines, lock_path, partial_path, progress_path

SENTENCES = [f"sentence {i} about " + "a dog that barks " * (i % 5) for i in range(40)]


@pytest.fixture()
def encoder(bert_path: Path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean", device="cpu")


@pytest.fixture()
def text(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("\n".join(SENTENCES) + "\n")
    return path


def test_lines_are_split_like_the_in_memory_reader(tmp_path: Path) -> None:
    from dictembed.text_files import read_lines

    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffa dog\u2028barks\r\npage\x0cbreak\r\n\r\nnext\x85line\nlast\r".encode())
    expected = ["a dog\u2028barks", "page\x0cbreak", "", "next\x85line", "last"]
    assert list(iter_lines(path)) == read_lines(path) == expected
    assert list(iter_lines(path, skip=3)) == ["next\x85line", "last"]
    for text, lines in (("\ufeff", []), ("\ufeff\n", [""]), ("", []), ("\n", [""])):  # a mark alone: empty
        path.write_text(text, encoding="utf-8")
        assert list(iter_lines(path)) == read_lines(path) == lines, repr(text)
    path.write_bytes(b"fine\nstill fine\ncaf\xe9\n")
    with pytest.raises(DictEmbedError, match=r"in.txt:3: not valid utf-8"):
        list(iter_lines(path))


def test_chunks_equal_one_in_memory_encode(encoder: Encoder, text: Path, tmp_path: Path) -> None:
    """Chunked (7 lines, batches of 3) against one in-memory call (batches of 32): the same vectors within
    1e-6, since only the padding and the length-sorted groups differ (float32 sums in the last bits)."""
    out = tmp_path / "v.npy"
    report = encode_to_npy(encoder, text, out, batch_size=3, chunk_size=7, show_progress=False)
    assert report == {"rows": 40, "dim": 32, "dtype": "float32", "resumed_from": 0}
    np.testing.assert_allclose(np.load(out), encoder.encode(SENTENCES), rtol=0, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "v.npy"]  # no partial, no progress file
    binary = encode_to_npy(encoder, text, tmp_path / "b.npy", chunk_size=7, quantize="ubinary", show_progress=False)
    assert binary["dtype"] == "uint8"  # per-row quantisation streams exactly
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), encoder.encode(SENTENCES, quantize="ubinary"))
    with pytest.raises(DictEmbedError, match="needs every row"):
        encode_to_npy(encoder, text, tmp_path / "i.npy", quantize="int8")


def _interrupt_after(encoder: Encoder, monkeypatch: pytest.MonkeyPatch, calls: int) -> list[int]:
    """Make the encoder raise KeyboardInterrupt at its chunk number `calls` + 1; returns the chunk sizes."""
    sizes: list[int] = []
    encode = Encoder.encode

    def counting(self: Encoder, sentences: list[str], *args: object, **kwargs: object) -> np.ndarray:
        if list(sentences) == PROBES:  # the resume check's fingerprint of the model, not a chunk
            return encode(self, sentences, *args, **kwargs)
        if len(sizes) == calls:
            raise KeyboardInterrupt
        sizes.append(len(sentences))
        return encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", counting)
    return sizes


def test_an_interrupted_run_resumes_after_its_last_chunk(encoder, text, tmp_path, monkeypatch, caplog) -> None:
    out = tmp_path / "v.npy"
    reference = encoder.encode(SENTENCES)
    sizes = _interrupt_after(encoder, monkeypatch, calls=3)
    with pytest.raises(KeyboardInterrupt):
        encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    assert sizes == [6, 6, 6] and not out.exists()
    progress = json.loads(progress_path(out).read_text())
    assert progress["rows_done"] == 18 and progress["rows"] == 40 and progress["dim"] == 32
    held = np.load(partial_path(out), mmap_mode="r")  # a valid .npy of the final shape all along
    assert held.shape == (40, 32)
    np.testing.assert_allclose(held[:18], reference[:18], rtol=0, atol=1e-6)
    del held

    monkeypatch.undo()
    sizes = _interrupt_after(encoder, monkeypatch, calls=100)
    with caplog.at_level(logging.INFO, logger="dictembed.streaming"):
        report = encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    assert report["resumed_from"] == 18 and sizes == [6, 6, 6, 4]  # only the 22 rows left were encoded
    assert "resuming" in caplog.text and "encoded 40 of 40 rows (100.0%)" in caplog.text
    np.testing.assert_allclose(np.load(out), reference, rtol=0, atol=1e-6)
    assert not partial_path(out).exists() and not progress_path(out).exists()


def test_another_input_or_model_starts_over(encoder, text, tmp_path, monkeypatch, caplog) -> None:
    out = tmp_path / "v.npy"
    _interrupt_after(encoder, monkeypatch, calls=2)
    with pytest.raises(KeyboardInterrupt):
        encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    monkeypatch.undo()
    text.write_text("\n".join(reversed(SENTENCES)) + "\n")  # same size, other content
    with caplog.at_level(logging.WARNING):
        assert encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)["resumed_from"] == 0
    assert "starting" in caplog.text and "changed" in caplog.text
    np.testing.assert_allclose(np.load(out), encoder.encode(SENTENCES[::-1]), rtol=0, atol=1e-6)

    out.unlink()
    _interrupt_after(encoder, monkeypatch, calls=2)
    with pytest.raises(KeyboardInterrupt):
        encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    monkeypatch.undo()
    normalized = encode_to_npy(encoder, text, out, chunk_size=6, normalize=True, show_progress=False)
    assert normalized["resumed_from"] == 0  # other options: other rows
    np.testing.assert_allclose(np.linalg.norm(np.load(out), axis=1), 1.0, atol=1e-5)


def test_the_command_streams_npy_and_keeps_its_rules(bert_path, text, tmp_path, capsys) -> None:
    base = ["encode", "--model", str(bert_path), "--input", str(text), "--chunk-size", "16", "--json"]
    out = tmp_path / "out" / "v.npy"
    assert main([*base, "--output", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["rows"], report["dim"], report["resumed_from"]) == (40, 32, 0)
    assert sorted(p.name for p in out.parent.iterdir()) == ["v.npy"]
    assert main([*base, "--output", str(out)]) == 1  # never overwritten without --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert main([*base, "--output", str(tmp_path / "v.npz")]) == 0  # .npz: encoded in memory, not streamed
    np.testing.assert_allclose(np.load(tmp_path / "v.npz")["embeddings"], np.load(out), rtol=0, atol=1e-6)
    assert main([*base, "--output", str(tmp_path / "q.npy"), "--quantize", "int8"]) == 0  # calibrated: in memory
    assert np.load(tmp_path / "q.npy").dtype == np.int8
    capsys.readouterr()
    (tmp_path / "empty.txt").write_text("")
    empty = ["encode", "--model", str(bert_path), "--input", str(tmp_path / "empty.txt"), "--json"]
    assert main([*empty, "--output", str(tmp_path / "e.npy")]) == 0
    assert np.load(tmp_path / "e.npy").shape == (0, 32)


def test_a_killed_command_leaves_a_resumable_partial_file(bert_path, tmp_path, capsys) -> None:
    """SIGKILL `python -m dictembed encode` once it has saved a few chunks: no output appears, the partial
    file and its progress file are readable, and running the command again finishes from there, with the
    rows of one uninterrupted encode (within 1e-6, as above)."""
    sentences = [f"line {i} of a long file about rivers and " + "dogs " * (i % 9) for i in range(1500)]
    text = tmp_path / "big.txt"
    text.write_text("\n".join(sentences) + "\n")
    out = tmp_path / "v.npy"
    command = ["encode", "--model", str(bert_path), "--input", str(text), "--output", str(out), "--device", "cpu"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "dictembed", *command, "--chunk-size", "8", "-q"]
    child = subprocess.Popen(launch, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:
            try:
                if json.loads(progress_path(out).read_text())["rows_done"] >= 24:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        assert child.poll() is None, "the encode ended before it could be killed"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()
    assert not out.exists()
    done = json.loads(progress_path(out).read_text())["rows_done"]
    assert 24 <= done < len(sentences) and np.load(partial_path(out), mmap_mode="r").shape == (1500, 32)

    assert main([*command, "--chunk-size", "500", "--json", "-q"]) == 0  # the chunk size may change
    assert json.loads(capsys.readouterr().out)["resumed_from"] == done
    reference = Encoder.load(str(bert_path), device="cpu").encode(sentences[: done + 40])
    np.testing.assert_allclose(np.load(out)[: done + 40], reference, rtol=0, atol=1e-6)  # both sides of the kill
    assert not partial_path(out).exists() and not progress_path(out).exists()


def test_a_users_file_at_the_partial_name_is_never_overwritten(encoder, text, tmp_path, caplog) -> None:
    """OUTPUT.partial without its progress file: an unfinished matrix an earlier run began (a .npy) is started over,
    with a warning; anything else is a user's file, a one-line error, and stays."""
    out = tmp_path / "v.npy"
    partial = partial_path(out)
    partial.write_text("my notes")
    with pytest.raises(DictEmbedError, match=f"^{partial} is in the way"):
        encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    assert partial.read_text() == "my notes" and not out.exists()
    with partial.open("wb") as f:  # a matrix a killed run began, before its first progress file
        np.save(f, np.zeros((2, 32), np.float32))
    with caplog.at_level(logging.WARNING):
        assert encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)["resumed_from"] == 0
    assert "no readable progress file" in caplog.text and not partial.exists()


def test_a_users_file_at_the_progress_name_or_as_the_input_is_never_deleted(encoder, text, tmp_path) -> None:
    out = tmp_path / "v.npy"
    sidecar = progress_path(out)
    sidecar.write_text("my notes")
    with pytest.raises(DictEmbedError, match=f"^{sidecar} is in the way"):
        encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    assert sidecar.read_text() == "my notes" and not out.exists()
    sidecar.unlink()
    for named in (sidecar, partial_path(out), lock_path(out)):  # the input where encode keeps its unfinished work
        named.write_text("a dog barks\n")
        with pytest.raises(DictEmbedError, match="encode keeps .* unfinished work under that name; rename the input"):
            encode_to_npy(encoder, named, out, chunk_size=6, show_progress=False)
        assert named.read_text() == "a dog barks\n"
        named.unlink()


@pytest.mark.parametrize("change", ["cut", "grown"])
def test_an_input_that_changes_while_it_is_encoded_is_named_and_writes_nothing(
    encoder, tmp_path, monkeypatch, change
) -> None:
    """Cut short, its last rows would have stayed zeros in a complete-looking output; grown, numpy's broadcast
    error."""
    from dictembed import streaming

    source = tmp_path / "in.txt"
    lines = [f"line {i} of a file long enough that the reader has not read it all\n" for i in range(4000)]
    source.write_text("".join(lines))
    out, calls = tmp_path / "v.npy", []

    def changing(encoder, chunk, *args, **kwargs):
        if not calls:  # after the first chunk is read, the file changes under the run
            source.write_text("".join(lines[:600] if change == "cut" else lines * 2))
        calls.append(1)
        return np.zeros((len(chunk), encoder.dim), np.float32)  # the vectors do not matter here

    monkeypatch.setattr(streaming, "encode_across_processes", changing)
    with pytest.raises(DictEmbedError, match=r"in\.txt: changed while it was encoded \("):
        encode_to_npy(encoder, source, out, chunk_size=500, show_progress=False)
    assert not out.exists()


def test_a_second_encode_into_the_same_output_refuses_while_the_first_writes(encoder, text, tmp_path) -> None:
    """Two runs into one .npy wrote the same partial file and progress file (and the second's start removed the
    first's rows); the lock is held while one writes and gone when it ends, a user's file at its name stays."""
    from filelock import FileLock

    out = tmp_path / "v.npy"
    lock = lock_path(out)
    with FileLock(str(lock)):  # another process's run, as the operating system sees it
        with pytest.raises(DictEmbedError, match=f"^another dictembed encode is writing {out} \\(lock {lock}\\)"):
            encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)
    assert not out.exists() and not partial_path(out).exists()
    assert lock.exists()  # the empty file a killed run leaves: the next run takes it and removes it
    assert encode_to_npy(encoder, text, out, chunk_size=6, show_progress=False)["rows"] == len(SENTENCES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "v.npy"]
    lock.write_text("my notes")
    with pytest.raises(DictEmbedError, match=f"^{lock} is in the way"):
        encode_to_npy(encoder, text, tmp_path / "v.npy", chunk_size=6, show_progress=False)
    assert lock.read_text() == "my notes"
