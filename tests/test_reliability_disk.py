"""A full disk, a read-only place or a failing network: one error line `dictembed: error: <path>: <cause>` naming
the file, folder or repository, exit 1, never a traceback; nothing half-written is left (no partial file, no file
at the final path) and a file being replaced is kept as it was.

Every case runs with the failure injected (the write raises ENOSPC or EROFS as the system would); where this
process may mount a tmpfs, the same cases also run on a real full or read-only filesystem."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cli_refuses, cli_succeeds

import dictembed
from dictembed.io import STAGING_SUFFIX

pytestmark = pytest.mark.usefixtures("restore_log_level")

LINES = 1000  # 1000 x 32 float32 (128 kB) or int8 (32 kB): more than the small tmpfs holds


def _fail(code: int, filename: str | Path | None = None) -> OSError:
    """The OSError the system raises for `code` on `filename`."""
    return OSError(code, os.strerror(code), None if filename is None else str(filename))


def leftovers(folder: Path) -> list[str]:
    """Staging leftovers under `folder`: partial files or folders and progress files of an encode."""
    return sorted(
        p.name for p in folder.rglob("*") if STAGING_SUFFIX in p.name or p.name.endswith((".progress.json", ".old"))
    )


@pytest.fixture(scope="module")
def sentences(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "in.txt"
    path.write_text("".join(f"a dog barks at the postman number {i}\n" for i in range(LINES)))
    return path


def _encode(model: Path, source: Path, output: Path, *extra: str) -> list[str]:
    return ["encode", "--model", str(model), "--input", str(source), "--output", str(output), *extra]


# ------------------------------------------------------------------------------------ a real tmpfs
_MOUNTABLE: list[bool] = []


@pytest.fixture()
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """`tmpfs(size, read_only=False)`: a fresh tmpfs of `size` mounted in `tmp_path` (skips where this process may
    not mount one); all are unmounted after the test."""
    mounted: list[Path] = []

    def mount(size: str, read_only: bool = False) -> Path:
        if _MOUNTABLE == [False]:
            pytest.skip("cannot mount a tmpfs here")
        folder = tmp_path / f"fs{len(mounted)}"
        folder.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, check=False
            )
        except OSError as err:  # no mount program
            done = subprocess.CompletedProcess(err.filename, 1, b"", str(err).encode())
        _MOUNTABLE[:] = [done.returncode == 0]
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode(errors='replace').strip()})")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def _run_cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`dictembed ARGV -q` in a child process: a regression to a memory-mapped write on a full disk dies there of
    SIGBUS instead of taking the test run with it."""
    src = str(Path(dictembed.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "dictembed", *argv, "-q"], capture_output=True, text=True, timeout=300, env=env
    )


def _one_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    assert done.returncode == 1, f"exit {done.returncode}: {done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("dictembed: error:")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert all(name in lines[0] for name in names), lines[0]
    return lines[0]


def test_a_streamed_encode_onto_a_full_tmpfs(saved_bert, sentences, tmpfs) -> None:
    """Run in a child process: without the space reserved up front, this dies of SIGBUS."""
    folder = tmpfs("16k")
    line = _one_line(_run_cli(_encode(saved_bert, sentences, folder / "v.npy")), str(folder / "v.npy"))
    assert line.endswith("No space left on device")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("name", ["v.npz", "q.npy --quantize int8"])
def test_an_in_memory_encode_onto_a_full_tmpfs(name, saved_bert, sentences, tmpfs, capsys) -> None:
    folder = tmpfs("16k")
    file, *extra = name.split()
    line = cli_refuses(capsys, _encode(saved_bert, sentences, folder / file, *extra), str(folder / file))
    assert line.endswith("No space left on device")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("name", ["v.npy", "v.npz", "q.npy --quantize int8"])
def test_encode_onto_a_read_only_tmpfs(name, saved_bert, sentences, tmpfs, capsys) -> None:
    folder = tmpfs("1m", read_only=True)
    file, *extra = name.split()
    line = cli_refuses(capsys, _encode(saved_bert, sentences, folder / file, *extra), str(folder / file))
    assert line.endswith("Read-only file system")


def test_encoder_save_onto_a_full_tmpfs(saved_bert, tmpfs) -> None:
    from dictembed.encoder import Encoder

    folder = tmpfs("1m")
    with pytest.raises(OSError, match="No space left on device") as caught:
        Encoder.load(str(saved_bert), device="cpu").save(folder / "m")
    assert caught.value.filename == str(folder / "m")
    assert list(folder.iterdir()) == []


def test_publish_onto_a_full_tmpfs(saved_bert, tmpfs) -> None:
    from dictembed.recipes.run import RunResult, publish

    folder = tmpfs("1m")
    with pytest.raises(OSError, match="No space left on device") as caught:
        publish(RunResult(saved_bert, 1e-3, 0, {}, None), {}, folder / "out")
    assert caught.value.filename == str(folder / "out")
    assert list(folder.iterdir()) == []


# ------------------------------------------------------------------------------------ injected: encode
def _writes_then_fails(code: int) -> Callable[..., None]:
    """A numpy save that writes part of the array, then meets a full disk (`code`)."""

    def save(file: Any, *args: Any, **kwargs: Any) -> None:
        file.write(b"\x93NUMPY half of an array")
        raise _fail(code)

    return save


@pytest.mark.parametrize(
    ("name", "extra", "patched"),
    [("v.npz", [], "savez"), ("q.npy", ["--quantize", "int8"], "save"), ("q.npz", ["--quantize", "uint8"], "savez")],
)
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_an_in_memory_encode_that_meets_a_full_disk(
    name, extra, patched, code, saved_bert, sentences, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(np, patched, _writes_then_fails(code))
    output = tmp_path / name
    line = cli_refuses(capsys, _encode(saved_bert, sentences, output, *extra), str(output))
    assert line.endswith(os.strerror(code))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "extra", "patched"), [("v.npz", [], "savez"), ("q.npy", ["--quantize", "int8"], "save")]
)
def test_an_overwrite_that_meets_a_full_disk_keeps_the_old_file(
    name, extra, patched, saved_bert, sentences, tmp_path, capsys, monkeypatch
) -> None:
    output = tmp_path / name
    output.write_bytes(b"the previous embeddings")
    monkeypatch.setattr(np, patched, _writes_then_fails(errno.ENOSPC))
    cli_refuses(capsys, _encode(saved_bert, sentences, output, "--overwrite", *extra), str(output))
    assert output.read_bytes() == b"the previous embeddings" and leftovers(tmp_path) == []


def test_an_in_memory_encode_onto_a_read_only_folder(saved_bert, sentences, tmp_path, capsys, monkeypatch) -> None:
    import dictembed.io

    def read_only(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(flag in mode for flag in "wax+"):
            raise _fail(errno.EROFS, file)
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(dictembed.io, "open", read_only, raising=False)
    output = tmp_path / "v.npz"
    assert cli_refuses(capsys, _encode(saved_bert, sentences, output), str(output)).endswith("Read-only file system")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_streamed_encode_onto_a_full_disk_fails_before_encoding(
    overwrite, saved_bert, sentences, tmp_path, capsys, monkeypatch
) -> None:
    """The memory-mapped file's space is reserved up front: a full disk is one error line at once, not a SIGBUS
    when a page of the map is first written."""

    def full(fd: int, offset: int, length: int) -> None:
        raise _fail(errno.ENOSPC)

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("encoded rows before the output's space was reserved")

    output = tmp_path / "v.npy"
    if overwrite:
        output.write_bytes(b"the previous embeddings")
    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    monkeypatch.setattr("dictembed.streaming.encode_across_processes", never)
    argv = _encode(saved_bert, sentences, output, *(["--overwrite"] if overwrite else []))
    line = cli_refuses(capsys, argv, str(output))
    assert line == f"dictembed: error: {output}: No space left on device"
    assert leftovers(tmp_path) == []
    assert output.read_bytes() == b"the previous embeddings" if overwrite else not output.exists()


def test_a_streamed_encode_onto_a_read_only_folder(saved_bert, sentences, tmp_path, capsys, monkeypatch) -> None:
    def read_only(filename: Any, *args: Any, **kwargs: Any) -> None:
        raise _fail(errno.EROFS, filename)

    monkeypatch.setattr(np.lib.format, "open_memmap", read_only)
    output = tmp_path / "v.npy"
    assert cli_refuses(capsys, _encode(saved_bert, sentences, output), str(output)).endswith("Read-only file system")
    assert leftovers(tmp_path) == [] and not output.exists()


def test_a_streamed_encode_keeps_rows_a_progress_file_vouches_for(saved_bert, sentences, tmp_path, monkeypatch) -> None:
    """A full disk midway (the progress file cannot be replaced): the rows already written stay, and a run after
    the disk is freed continues after them."""
    import dictembed.streaming
    from dictembed.encoder import Encoder

    encoder = Encoder.load(str(saved_bert), device="cpu")
    output, real = tmp_path / "v.npy", dictembed.streaming.atomic_write
    calls: list[Path] = []

    def fills_up(path: Path, data: Any) -> Path:
        calls.append(path)
        if len(calls) > 1:
            raise _fail(errno.ENOSPC, Path(path).with_name(Path(path).name + f".1{STAGING_SUFFIX}"))
        return real(path, data)

    monkeypatch.setattr(dictembed.streaming, "atomic_write", fills_up)
    with pytest.raises(OSError, match="No space left") as caught:
        dictembed.streaming.encode_to_npy(encoder, sentences, output, chunk_size=400, show_progress=False)
    assert caught.value.filename == str(output)
    monkeypatch.undo()
    done = dictembed.streaming.encode_to_npy(encoder, sentences, output, chunk_size=400, show_progress=False)
    assert done["resumed_from"] == 400 and np.load(output).shape == (LINES, 32) and leftovers(tmp_path) == []


def test_overwrite_onto_a_folder_named_like_an_array_is_refused(saved_bert, sentences, tmp_path, capsys) -> None:
    folder = tmp_path / "out.npy"
    (folder / "mine.txt").parent.mkdir()
    (folder / "mine.txt").write_text("years of work")
    cli_refuses(capsys, _encode(saved_bert, sentences, folder, "--overwrite"), "out.npy", "folder")
    assert (folder / "mine.txt").read_text() == "years of work" and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------ injected: model folders
def _safetensors_full(*args: Any, **kwargs: Any) -> None:
    from safetensors import SafetensorError

    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def test_encoder_save_that_meets_a_full_disk_leaves_nothing(saved_bert, tmp_path, monkeypatch) -> None:
    import transformers.modeling_utils

    from dictembed.encoder import Encoder

    encoder = Encoder.load(str(saved_bert), device="cpu")
    kept = Path(shutil.copytree(saved_bert, tmp_path / "kept"))
    before = {p.relative_to(kept): p.read_bytes() for p in kept.rglob("*") if p.is_file()}
    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", _safetensors_full)
    for target in (tmp_path / "new", kept):
        with pytest.raises(OSError, match="No space left on device") as caught:
            encoder.save(target, overwrite=True)
        assert caught.value.filename == str(target)
    assert not (tmp_path / "new").exists() and leftovers(tmp_path) == []
    assert {p.relative_to(kept): p.read_bytes() for p in kept.rglob("*") if p.is_file()} == before


def test_a_failed_swap_puts_the_old_folder_back(tmp_path, monkeypatch) -> None:
    from dictembed.io import staged_dir

    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    real, calls = os.replace, []

    def second_fails(src: Any, dst: Any) -> None:
        calls.append(src)
        if len(calls) == 2:
            raise _fail(errno.ENOSPC, src)
        real(src, dst)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OSError) as caught, staged_dir(target) as staging:
        (staging / "weights").write_text("new")
    assert caught.value.filename == str(target)
    assert (target / "weights").read_text() == "old" and leftovers(tmp_path) == []


def test_atomic_write_that_fails_leaves_the_old_file(tmp_path, monkeypatch) -> None:
    from dictembed.io import atomic_write

    path = tmp_path / "progress.json"
    path.write_text("old")

    def full(fd: int) -> None:
        raise _fail(errno.ENOSPC)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left") as caught:
        atomic_write(path, "new")
    assert caught.value.filename == str(path)
    assert path.read_text() == "old" and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------ injected: train
def _train(bert_path: Path, dictionary: Path, output: Path, *extra: str) -> list[str]:
    base = ["train", "--model", str(bert_path), "--dictionary", str(dictionary), "--output", str(output)]
    return [*base, "--lr-grid", "1e-3", "--limit", "6", *extra]


def test_a_checkpoint_that_meets_a_full_disk(bert_path, toy_tsv, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr("dictembed.checkpoint.save_file", _safetensors_full)
    output = tmp_path / "out"
    line = cli_refuses(capsys, _train(bert_path, toy_tsv, output, "--checkpoint-every", "1"), "checkpoint")
    assert line.endswith("No space left on device")
    assert not output.exists() and leftovers(tmp_path) == []


def test_publishing_onto_a_full_disk_then_again(bert_path, toy_tsv, tmp_path, capsys, monkeypatch) -> None:
    """The copy of the selected run into --output fails (shutil.Error): no output, no staging folder; the run
    after the disk is freed publishes the finished run without --overwrite."""
    output, copytree = tmp_path / "out", shutil.copytree

    def full(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(dst).name != output.name + STAGING_SUFFIX:
            return copytree(src, dst, *args, **kwargs)
        shutil.copy2(Path(src) / "config.json", Path(dst) / "config.json")  # a part copied, then the disk is full
        why = f"[Errno 28] No space left on device: '{src}/model.safetensors' -> '{dst}/model.safetensors'"
        raise shutil.Error([(f"{src}/model.safetensors", f"{dst}/model.safetensors", why)])

    monkeypatch.setattr(shutil, "copytree", full)
    line = cli_refuses(capsys, _train(bert_path, toy_tsv, output), str(output))
    assert line == f"dictembed: error: {output}: No space left on device"
    assert not output.exists() and leftovers(tmp_path) == []
    assert [p.parent.name for p in (tmp_path / "out-runs").rglob("dictembed.json")] == ["model"]  # the run is kept
    monkeypatch.undo()
    cli_succeeds(capsys, _train(bert_path, toy_tsv, output))
    assert (output / "dictembed.json").is_file() and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------ injected: network
@pytest.mark.parametrize("kind", ["requests", "http client"])
def test_push_with_a_failing_network(kind, saved_bert, capsys, monkeypatch) -> None:
    import requests
    from huggingface_hub import HfApi

    class ConnectError(Exception):  # an HTTP client's own error (httpx's is not an OSError)
        pass

    def fail(self: Any, *args: Any, **kwargs: Any) -> None:
        if kind == "requests":
            raise requests.ConnectionError("HTTPSConnectionPool(host='huggingface.co'): Max retries exceeded")
        raise ConnectError("[Errno -3] Temporary failure in name resolution")

    for name in ("create_repo", "upload_folder", "create_commit", "upload_file"):
        monkeypatch.setattr(HfApi, name, fail)
    line = cli_refuses(capsys, ["push", "--model", str(saved_bert), "--repo", "someone/tiny"], "someone/tiny")
    assert ("Max retries" if kind == "requests" else "name resolution") in line
