"""Inputs that can be read only once or never end: a pipe as `encode --input /dev/stdin`, a FIFO as a
dictionary, /dev/zero as either. Each is read exactly once (one output row per input line, the counts of the
same file on disk), and a stream without end stops with one error line naming the file and the line, quickly
and in bounded memory. The line and size bounds hold at their edges, for pipes and plain files alike."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_succeeds

from dictembed import streaming, text_files
from dictembed.encoder import Encoder
from dictembed.errors import DataFormatError
from dictembed.streaming import PROBES, encode_to_npy, iter_lines, partial_path, progress_path
from dictembed.text_files import read_lines

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="pipes, FIFOs and /dev/zero as Linux has them"),
    pytest.mark.usefixtures("restore_log_level"),
]

TIMEOUT_S = 120  # a read that hangs fails the test instead of stalling the suite (importing torch takes most)
MEMORY_LIMIT = 4 << 30  # a read without bound fails with MemoryError in the child instead of filling the machine
# A byte order mark, CRLF, U+2028 inside a line, an empty line and no final newline: one row per "\n" line.
TEXT = "\ufeffa dog barks\r\nthe postman\u2028runs\n\n" + "".join(f"sentence {i} about rivers\n" for i in range(30))
TEXT += "last line"
ROWS = 34
WORDS = [f"w{i}" for i in range(30)]
TSV = "word\tdefinition\n" + "".join(f"{w}\tdefinition number {i} of a word\n" for i, w in enumerate(WORDS))


def _bounded_memory() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(hard, MEMORY_LIMIT)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def dictembed(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m dictembed ARGV -q` in a child process, in bounded memory and time."""
    return subprocess.run(
        [sys.executable, "-m", "dictembed", *argv, "-q"],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        preexec_fn=_bounded_memory,
        timeout=TIMEOUT_S,
    )


def the_one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """The child exited 1 with exactly one `dictembed: error: ...` line on stderr, no traceback; that line."""
    err = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in err, f"exit {done.returncode}: {err[-3000:]}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dictembed: error: "), err[-3000:]
    return lines[0]


def _array(path: Path) -> np.ndarray:
    return np.load(path)["embeddings"] if path.suffix == ".npz" else np.load(path)


def fill_fifo(path: Path, data: bytes) -> threading.Thread:
    """A thread that writes `data` to the FIFO `path` once a reader opens it (a daemon: a reader that never
    comes leaves it blocked without keeping the tests alive)."""

    def write() -> None:
        with open(path, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.fixture()
def pipe() -> Iterator[Callable[[bytes], str]]:
    """`pipe(data)`: the path of a pipe (/dev/fd/N) holding `data` (under the 64 KiB pipe buffer), its writing
    end closed; every pipe is closed after the test."""
    ends: list[int] = []

    def make(data: bytes) -> str:
        read, write = os.pipe()
        ends.append(read)
        os.write(write, data)
        os.close(write)
        return f"/dev/fd/{read}"

    yield make
    for end in ends:
        os.close(end)


# ------------------------------------------------------------------------------------ read once
@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_a_piped_input_is_encoded_once_one_row_per_line(suffix, saved_bert, tmp_path, capsys) -> None:
    """`--input /dev/stdin` fed by a pipe gives one row per line, the rows of the same lines from a file."""
    source = tmp_path / "in.txt"
    source.write_bytes(TEXT.encode())
    piped, filed = tmp_path / f"piped{suffix}", tmp_path / f"filed{suffix}"
    command = ["encode", "--model", str(saved_bert), "--chunk-size", "7", "--json"]
    done = dictembed(*command, "--input", "/dev/stdin", "--output", str(piped), stdin=TEXT.encode())
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out, _ = cli_succeeds(capsys, [*command, "--input", str(source), "--output", str(filed)])
    assert json.loads(done.stdout)["rows"] == json.loads(out)["rows"] == ROWS
    assert _array(piped).shape == (ROWS, 32)
    np.testing.assert_allclose(_array(piped), _array(filed), rtol=0, atol=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.txt", piped.name, filed.name])  # no partials


def test_a_piped_input_with_a_carriage_return_inside_a_line_is_refused(saved_bert, tmp_path, pipe, capsys) -> None:
    """A plain file is checked before the model loads; a pipe, read once, when it is read: one line naming it."""
    from conftest import cli_refuses

    from dictembed.text_files import CARRIAGE_RETURN

    piped = pipe(b"a dog barks\na large cat\rfrozen dessert\n")
    out = tmp_path / "x.npy"
    line = cli_refuses(capsys, ["encode", "--model", str(saved_bert), "--input", piped, "--output", str(out)])
    assert line.endswith(f"{piped}:2: {CARRIAGE_RETURN}") and not out.exists()


def test_a_fifo_dictionary_is_read_once(bert_path, tmp_path, capsys) -> None:
    """`data stats` on a FIFO finishes with the counts of the same table on disk (a second read would block)."""
    on_disk, fifo = tmp_path / "words.tsv", tmp_path / "fifo.tsv"
    on_disk.write_text(TSV)
    os.mkfifo(fifo)
    writer = fill_fifo(fifo, TSV.encode())
    done = dictembed("data", "stats", "--dictionary", str(fifo), "--model", str(bert_path), "--json")
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    writer.join(timeout=10)
    assert not writer.is_alive()
    out, _ = cli_succeeds(capsys, ["data", "stats", "--dictionary", str(on_disk), "--model", str(bert_path), "--json"])
    splits = json.loads(done.stdout)["splits"]
    assert splits == json.loads(out)["splits"] and sum(s["words"] for s in splits) == len(WORDS)


def test_a_piped_npy_encode_never_leaves_a_progress_file(bert_path, tmp_path, pipe, monkeypatch) -> None:
    """A pipe cannot be resumed: its encode removes an earlier run's progress file and writes none, so a kill
    midway never lets a later run resume onto rows from another input."""
    encoder = Encoder.load(str(bert_path), device="cpu")
    source, out = tmp_path / "in.txt", tmp_path / "v.npy"
    source.write_text("\n".join(f"file line {i}" for i in range(20)) + "\n")
    chunks: list[int] = []
    encode = Encoder.encode

    def interrupted(self: Encoder, sentences: list[str], *args: object, **kwargs: object) -> np.ndarray:
        if list(sentences) != PROBES:  # the resume check's fingerprint of the model is not a chunk
            if len(chunks) == 2:
                raise KeyboardInterrupt
            chunks.append(len(sentences))
        return encode(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Encoder, "encode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        encode_to_npy(encoder, source, out, chunk_size=5, show_progress=False)
    assert progress_path(out).exists() and partial_path(out).exists()
    chunks.clear()
    with pytest.raises(KeyboardInterrupt):
        encode_to_npy(encoder, pipe(b"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"), out, chunk_size=5, show_progress=False)
    assert not progress_path(out).exists()
    monkeypatch.undo()
    assert encode_to_npy(encoder, source, out, chunk_size=5, show_progress=False)["resumed_from"] == 0
    np.testing.assert_allclose(np.load(out), encoder.encode(read_lines(source)), rtol=0, atol=1e-6)
    report = encode_to_npy(encoder, pipe(b"one\ntwo\nthree"), tmp_path / "p.npy", chunk_size=2, show_progress=False)
    assert report == {"rows": 3, "dim": 32, "dtype": "float32", "resumed_from": 0}
    assert not progress_path(tmp_path / "p.npy").exists() and not partial_path(tmp_path / "p.npy").exists()


# ------------------------------------------------------------------------------------ never ends
@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_dev_zero_as_encode_input_is_one_error_line(suffix, saved_bert, tmp_path) -> None:
    output = tmp_path / f"v{suffix}"
    done = dictembed("encode", "--model", str(saved_bert), "--input", "/dev/zero", "--output", str(output))
    assert "/dev/zero:1: line longer than 16 MiB" in the_one_error_line(done)
    assert list(tmp_path.iterdir()) == []


def test_dev_zero_as_a_dictionary_table_is_one_error_line(bert_path, tmp_path) -> None:
    table = tmp_path / "zero.tsv"
    table.symlink_to("/dev/zero")
    done = dictembed("data", "stats", "--dictionary", str(table), "--model", str(bert_path))
    assert "zero.tsv:1: line longer than 16 MiB" in the_one_error_line(done)


def test_dev_zero_stops_within_seconds() -> None:
    start = time.monotonic()
    with pytest.raises(DataFormatError, match=r"^/dev/zero:1: line longer than 16 MiB"):
        read_lines("/dev/zero")
    assert time.monotonic() - start < 10


# ------------------------------------------------------------------------------------ the bounds at their edges
def test_a_line_at_the_limit_is_read_one_past_it_is_named(tmp_path, pipe, monkeypatch) -> None:
    """Lines are measured in bytes without their "\\n": 8 bytes pass, 9 are refused naming the line, from a
    plain file, from a pipe, and in the streamed reader."""
    monkeypatch.setattr(text_files, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(streaming, "MAX_LINE_BYTES", 8)
    path = tmp_path / "in.txt"
    fits, too_long = b"12345678\nabc\n12345678", b"ok\n\n123456789\nabc\n"
    path.write_bytes(fits)
    assert read_lines(path) == read_lines(pipe(fits)) == list(iter_lines(path)) == ["12345678", "abc", "12345678"]
    path.write_bytes(too_long)
    for source in (path, pipe(too_long)):
        with pytest.raises(DataFormatError, match=r":3: line longer than 8 bytes \(lines are split on \\n only"):
            read_lines(source)
    with pytest.raises(DataFormatError, match=r"in\.txt:3: line longer than 8 bytes"):
        list(iter_lines(path))


def test_a_pipe_over_the_size_limit_is_refused_a_file_is_not(tmp_path, pipe, monkeypatch) -> None:
    monkeypatch.setattr(text_files, "MAX_UNSIZED_BYTES", 100)
    data = b"a short line\n" * 10  # 130 bytes
    with pytest.raises(DataFormatError, match=r"^/dev/fd/\d+: more than 100 bytes from a pipe or device"):
        read_lines(pipe(data))
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    assert read_lines(path) == ["a short line"] * 10  # a plain file's size is known before it is read
    assert read_lines(pipe(data[:100])) == ["a short line"] * 7 + ["a short l"]
