"""`dictembed encode` of a file larger than memory, to a memory-mapped `.npy`, resumable after a kill.

The input is read in chunks of `chunk_size` lines (split on "\\n" only, one trailing "\\r" and a leading
byte order mark removed, as `dictembed.text_files.read_lines` does). Each chunk is encoded and written into
`OUTPUT.partial`, a `.npy` file of the final shape opened with `numpy.lib.format.open_memmap`; then the
sidecar `OUTPUT.progress.json` is replaced atomically with the rows done. The sidecar is written only after
the rows are flushed, so it never claims a row the file does not hold. Run again with the same input and
model (same size, modification time and first bytes; same vectors for probe sentences, pooling, modules,
precision and options; the batch and chunk sizes too for an encoder whose vectors depend on their batch, as an
int8 graph's or bf16's do), it continues after the rows done; anything else starts over. When every row is written the
partial file is renamed to OUTPUT and the sidecar removed: OUTPUT only ever appears complete. A run holds
`OUTPUT.lock` while it writes; a second run into the same output refuses at once.

Only a plain file is counted first and resumed. A pipe, FIFO or device (`--input /dev/stdin`) gives its bytes
once, so it is read into memory with `dictembed.text_files.read_lines` (bounded in size and line length) and encoded
from there, without a progress file. Every line, streamed or not, is held to `dictembed.text_files.MAX_LINE_BYTES`.

Under a distributed launch (`torchrun`), every process reads each chunk and encodes a share of it
(`dictembed.distributed.encode_across_processes`); only the main process writes.

Quantisation: float32, binary and ubinary are per row and stream; int8 and uint8 calibrate their ranges
over every row, so they are not streamed (`STREAMABLE`; the command line encodes them in memory).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm.auto import tqdm

from dictembed.device_choices import is_main_process
from dictembed.devices import wait_for_everyone
from dictembed.distributed import broadcast_int, encode_across_processes
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.io import STAGING_SUFFIX, atomic_write, preallocate, writing
from dictembed.progress import disable
from dictembed.quantization import STREAMABLE, Quantization
from dictembed.query_encoder import batch_invariant
from dictembed.text_files import (
    ENCODING_HINT,
    MAX_LINE_BYTES,
    is_regular_file,
    line_too_long,
    read_lines,
    refuse_carriage_returns,
    undecodable,
)

log = logging.getLogger(__name__)

PROGRESS_SUFFIX = ".progress.json"
LOCK_SUFFIX = ".lock"
FORMAT = 1
HEAD_BYTES = 1 << 16  # the input's first bytes hashed into its identity
PROBES = ["a dog barks at the postman", "water that falls from the clouds", "x"]  # model_identity's sentences
LOG_EVERY_S = 10.0  # at most one progress line in the log per this many seconds (and one at the end)


def partial_path(output: Path) -> Path:
    """Where the rows are written before the rename to `output`."""
    return output.with_name(output.name + STAGING_SUFFIX)


def lock_path(output: Path) -> Path:
    """The lock a run writing `output` holds (`output_lock`)."""
    return output.with_name(output.name + LOCK_SUFFIX)


def progress_path(output: Path) -> Path:
    """The JSON sidecar that records the rows done."""
    return output.with_name(output.name + PROGRESS_SUFFIX)


def iter_lines(path: Path, encoding: str = "utf-8", skip: int = 0) -> Iterator[str]:
    """The lines of `path` after the first `skip`, read lazily (see the module docstring for the splitting);
    bytes that are not `encoding`, or a line longer than MAX_LINE_BYTES, raise DataFormatError naming the line."""
    number = 0
    try:
        with open(path, encoding=encoding, newline="\n") as f:
            # At most one character past the limit is read: a file without newlines never fills memory. A
            # character is at least one byte, so a line over the limit in characters is over it in bytes.
            for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), ""), start=1):
                if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
                    raise line_too_long(path, number, MAX_LINE_BYTES)
                if number <= skip:
                    continue
                if number == 1:
                    line = line.removeprefix("\ufeff")
                    if not line:  # a byte-order mark alone: an empty file, as `read_sentences` reads it
                        return
                line = line.removesuffix("\n")
                yield line.removesuffix("\r")
    except UnicodeDecodeError as err:
        message = f"not valid {err.encoding} ({err.reason}); {ENCODING_HINT}"
        raise undecodable(path, encoding) or DataFormatError(path, message, line=number + 1) from None
    except LookupError:
        raise DictEmbedError(f"{path}: unknown encoding {encoding!r}") from None
    except IsADirectoryError:
        raise DataFormatError(path, "cannot read file (it is a folder)") from None


def count_lines(path: Path, encoding: str = "utf-8") -> int:
    """How many lines `iter_lines` gives (one pass over the file, checking that it decodes)."""
    return sum(1 for _ in iter_lines(path, encoding))


def input_identity(path: Path) -> dict[str, Any]:
    """The input file as the resume check sees it: its path, size, modification time and first bytes' hash."""
    stat = path.stat()
    with open(path, "rb") as f:
        head = hashlib.sha1(f.read(HEAD_BYTES)).hexdigest()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_sha1": head}


def model_identity(encoder: Any) -> dict[str, Any]:
    """The encoder as the resume check sees it: its settings, compute precision, backend, and a hash of its
    vectors for fixed probe sentences (not of its weights: parts it never uses, such as a BERT pooler that a
    masked-LM checkpoint lacks, are drawn anew at each load). Any doubt only makes a run start over."""
    probes = encoder.encode(PROBES, batch_size=len(PROBES), show_progress_bar=False)
    return {
        "name": str(getattr(getattr(encoder, "backbone", encoder), "name_or_path", "") or ""),
        "probe_sha1": hashlib.sha1(np.ascontiguousarray(probes, dtype=np.float32).tobytes()).hexdigest(),
        **encoder.config,
        "precision": encoder.compute_precision,
        "backend": encoder.backend,
    }


def _read_progress(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _holds_array(path: Path) -> bool:
    """Whether `path` is a file that starts as a .npy file does, or is empty (an unfinished matrix of an earlier run,
    or one killed as it was created)."""
    try:
        with path.open("rb") as f:
            return path.is_file() and f.read(6) in (b"\x93NUMPY", b"")
    except OSError:
        return False


def refuse_in_the_way(path: Path, ours: Callable[[Path], bool], keeps: str) -> None:
    """Refuse, in one line, a file at `path`, where encode keeps its `keeps`, that is no file of an earlier run
    (`ours`): a user's file, which stays."""
    if path.exists() and not ours(path):
        raise DictEmbedError(
            f"{path} is in the way: encode keeps its {keeps} under that name, and it holds something else; "
            "move it or choose another --output"
        )


def refuse_foreign_partial(partial: Path) -> None:
    """`refuse_in_the_way` for the unfinished matrix (`_holds_array`)."""
    refuse_in_the_way(partial, _holds_array, "unfinished matrix")


def refuse_foreign_progress(sidecar: Path) -> None:
    """`refuse_in_the_way` for the progress file: a JSON object with a `format`, as every run of encode writes."""
    refuse_in_the_way(sidecar, lambda path: "format" in (_read_progress(path) or {}), "progress")


def _held_rows(output: Path, identity: dict[str, Any]) -> tuple[int, str | None]:
    """The rows an earlier run of the same job wrote, or 0 and why they cannot be used (None: no earlier run)."""
    refuse_foreign_progress(progress_path(output))
    partial, progress = partial_path(output), _read_progress(progress_path(output))
    if progress is None:
        refuse_foreign_partial(partial)
        return 0, "no readable progress file" if partial.exists() else None
    if {k: progress.get(k) for k in identity} != identity:
        return 0, "the input, the model or the options changed"
    done = progress.get("rows_done")
    if not isinstance(done, int) or not 0 <= done <= identity["rows"]:
        return 0, "a malformed progress file"
    try:
        held = np.load(partial, mmap_mode="r")
    except (OSError, ValueError) as err:
        return 0, f"unreadable partial file ({' '.join(str(err).split())})"
    if held.shape != (identity["rows"], progress.get("dim")) or str(held.dtype) != progress.get("dtype"):
        return 0, "the partial file does not match its progress file"
    return done, None


def _resume_point(output: Path, identity: dict[str, Any]) -> int:
    """The row to start at: after the rows an earlier run of the same job wrote, else 0, removing whatever
    an unusable earlier attempt left (and saying why)."""
    done, reason = _held_rows(output, identity)
    if done:
        log.info("resuming %s at row %d of %d", partial_path(output), done, identity["rows"])
        return done
    if reason is not None:
        log.warning("starting %s over: %s", output, reason)
    partial_path(output).unlink(missing_ok=True)
    progress_path(output).unlink(missing_ok=True)
    return 0


def _chunks(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _output_matrix(encoder: Any, partial: Path, rows: int, quantize: str, resume: bool) -> np.memmap | None:
    """The memory map rows are written into: the earlier run's `partial` when resuming, else a new one of
    `rows` rows shaped and typed like the encoder's vectors (None for no rows). Its disk space is reserved
    first (`preallocate`): a full disk is an error now, not a SIGBUS when a page of the map is first written."""
    if resume:
        preallocate(partial)
        return cast(np.memmap, np.load(partial, mmap_mode="r+"))
    if not rows:
        return None
    like = np.zeros((1, encoder.dim), dtype=np.float32)  # a row as `encoder.encode` quantises it: its width, dtype
    if quantize != "float32":
        from sentence_transformers import quantize_embeddings

        like = cast(np.ndarray, quantize_embeddings(like, precision=cast(Quantization, quantize)))
    partial.parent.mkdir(parents=True, exist_ok=True)
    matrix = np.lib.format.open_memmap(partial, mode="w+", dtype=like.dtype, shape=(rows, like.shape[1]))
    preallocate(partial)
    return matrix


def _discard_unusable(output: Path) -> None:
    """After a failed run, remove a partial file that no progress file vouches for (nothing to resume)."""
    partial = partial_path(output)
    if progress_path(output).exists() or (partial.exists() and not _holds_array(partial)):  # vouched for, or a user's
        return
    with contextlib.suppress(OSError):  # a read-only folder holds none
        partial.unlink(missing_ok=True)


def encode_to_npy(
    encoder: Any,
    input_path: str | Path,
    output: str | Path,
    *,
    encoding: str = "utf-8",
    batch_size: int = 32,
    chunk_size: int = 10_000,
    normalize: bool = False,
    quantize: str = "float32",
    show_progress: bool = True,
) -> dict[str, Any]:
    """Encode one sentence per line of `input_path` into the `.npy` file `output`, `chunk_size` lines at a
    time, resuming an interrupted run of the same job (a plain file only: a pipe or device is read once into
    memory). Returns rows, dim, dtype and the row resumed from. The caller decides whether an existing
    `output` may be replaced.

    A failure of the disk (full, read-only) is an OSError naming `output`; the partial file is removed unless
    a progress file vouches for rows in it (then a run after the disk is freed continues)."""
    input_path, output = Path(input_path), Path(output)
    if input_path.resolve() in (p.resolve() for p in (partial_path(output), progress_path(output), lock_path(output))):
        raise DictEmbedError(f"{input_path}: encode keeps {output}'s unfinished work under that name; rename the input")
    with output_lock(output) if is_main_process() else contextlib.nullcontext():
        try:
            with writing(output):
                return _encode_to_npy(
                    encoder, input_path, output, encoding, batch_size, chunk_size, normalize, quantize, show_progress
                )
        except BaseException:
            if is_main_process():
                _discard_unusable(output)
            raise


@contextlib.contextmanager
def output_lock(output: Path) -> Iterator[None]:
    """Hold `OUTPUT.lock` while encode writes `output`'s unfinished work: a second encode into the same output
    refuses at once instead of writing into the same partial file (the operating system releases a killed
    process's lock; the empty file it leaves is taken by the next run). The file goes when the run ends."""
    from filelock import FileLock, Timeout

    path = lock_path(output)
    refuse_in_the_way(path, lambda p: p.is_file() and p.stat().st_size == 0, "lock")
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise DictEmbedError(
            f"another dictembed encode is writing {output} (lock {path}); wait for it or choose another --output"
        ) from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # removed while held: no other run can be waiting on it (timeout 0)
            path.unlink(missing_ok=True)
        lock.release()


def _encode_to_npy(
    encoder: Any,
    input_path: Path,
    output: Path,
    encoding: str,
    batch_size: int,
    chunk_size: int,
    normalize: bool,
    quantize: str,
    show_progress: bool,
) -> dict[str, Any]:
    """`encode_to_npy`, its failures unhandled."""
    if quantize not in STREAMABLE:
        raise DictEmbedError(f"quantisation {quantize!r} needs every row at once; streaming takes {STREAMABLE}")
    if chunk_size < 1:
        raise DictEmbedError(f"chunk_size must be at least 1, got {chunk_size}")
    if not input_path.exists():
        raise DataFormatError(input_path, "cannot read file (not found)")
    main, cpu = is_main_process(), encoder.device.type == "cpu"
    partial, sidecar = partial_path(output), progress_path(output)
    identity: dict[str, Any] | None = None
    if is_regular_file(input_path):
        rows = count_lines(input_path, encoding)
        identity = {
            "format": FORMAT,
            "input": input_identity(input_path),
            "encoding": encoding,
            "rows": rows,
            "model": model_identity(encoder),
            "normalize": normalize,
            "quantize": quantize,
        }
        if not batch_invariant(encoder):  # its vectors depend on their batch: a resume must batch as the run did
            identity["batches"] = {"batch_size": batch_size, "chunk_size": chunk_size}
        start = broadcast_int(_resume_point(output, identity) if main else 0, cpu=cpu)
        lines = iter_lines(input_path, encoding, skip=start)
    else:  # read once, held in memory: counting it first would consume it
        held = read_lines(input_path, encoding)
        refuse_carriage_returns(input_path, held)  # as a plain file is checked before the model loads
        rows, start, lines = len(held), 0, iter(held)
        if main:  # an earlier run's progress file must not vouch for rows written from this input
            refuse_foreign_partial(partial)
            refuse_foreign_progress(sidecar)
            partial.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
    matrix = _output_matrix(encoder, partial, rows, quantize, resume=bool(start)) if main else None
    dim, dtype = (int(matrix.shape[1]), str(matrix.dtype)) if matrix is not None else (None, None)
    bar = tqdm(total=rows, initial=start, unit="rows", desc="encode", disable=disable(show_progress and main))
    done, last_log = start, time.monotonic()
    for chunk in _chunks(lines, chunk_size):
        if done + len(chunk) > rows:
            raise changed_input(input_path, f"more than the {rows:,} lines counted at the start")
        vectors = encode_across_processes(encoder, chunk, batch_size, False, normalize, quantize)
        if matrix is not None:
            matrix[done : done + len(chunk)] = vectors
            matrix.flush()  # the rows reach the file before the progress file says so
            if identity is not None:
                progress = {**identity, "dim": dim, "dtype": dtype, "rows_done": done + len(chunk)}
                atomic_write(sidecar, json.dumps(progress))
        done += len(chunk)
        bar.update(len(chunk))
        if time.monotonic() - last_log >= LOG_EVERY_S or done == rows:
            log.info("encoded %d of %d rows (%.1f%%) into %s", done, rows, 100 * done / max(rows, 1), partial)
            last_log = time.monotonic()
    bar.close()
    if done != rows:
        raise changed_input(input_path, f"{done:,} lines read of the {rows:,} counted at the start")
    if main:
        if matrix is None:  # an empty input: nothing was encoded
            empty = encoder.encode([], quantize=quantize)
            dim, dtype = int(empty.shape[1]), str(empty.dtype)
            atomic_write(partial, _npy_bytes(empty))
        del matrix  # closes the memory map before the rename
        os.replace(partial, output)
        sidecar.unlink(missing_ok=True)
    wait_for_everyone()
    return {"rows": rows, "dim": dim, "dtype": dtype, "resumed_from": start}  # dim, dtype: on the main process


def changed_input(path: Path, what: str) -> DataFormatError:
    """The error of an input file that changed while it was encoded (`what`: how); the output is not written."""
    return DataFormatError(path, f"changed while it was encoded ({what}); encode it again once it is written")


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()
