"""Files: atomic writes (write to a staging name, then rename), so a kill never leaves a half-written result;
the one reader of text inputs, which reads each input once and within bounds."""

from __future__ import annotations

import codecs
import errno
import io
import json
import logging
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from dictembed.errors import DataFormatError, DictEmbedError

logger = logging.getLogger(__name__)

STAGING_SUFFIX = ".partial"


def file_mode() -> int:
    """The mode of an ordinary new file: 0o666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def with_umask(root: Path) -> None:
    """Give every file under `root` (or `root` itself) the mode of an ordinary new file: some writers (safetensors)
    create theirs 0600, which other users of a shared model folder then cannot read."""
    mode = file_mode()
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    for path in files:
        if stat.S_IMODE(path.stat().st_mode) != mode:
            path.chmod(mode)


def _fsync_dir(folder: Path) -> None:
    """Flush `folder`'s entries (a rename into it) to disk; a filesystem that cannot is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# The number of an OS error as a message gives it: a `shutil.Error`'s ("[Errno 28] ...") and one that a
# library reports in its own exception, as safetensors' Rust core does ("... (os error 28)").
_ERRNO_IN_COPY = re.compile(r"\[Errno (\d+)\]")
_ERRNO_IN_RUST = re.compile(r"\(os error (\d+)\)")
# numpy's `tofile` (under `np.save` to a file) reports a write cut short, as on a full disk, without a number.
_SHORT_WRITE = re.compile(r"(\d+) requested and (\d+) written")


def _is_staging(filename: str | bytes | int) -> bool:
    """Whether `filename` is a staging name (`NAME.partial`, `NAME.<pid>.partial`) or lies in a staging folder."""
    return isinstance(filename, str) and any(part.endswith(STAGING_SUFFIX) for part in Path(filename).parts)


def as_os_error(err: BaseException, path: str | Path | None = None) -> OSError | None:
    """`err` as an OSError naming `path` (when `err` names no file, or names a staging file of it), or None
    when it is not a failure of the disk: an OSError itself, a `shutil.Error` of a copy (its first failed
    file), or a library's exception whose message carries an OS error number (safetensors' SafetensorError)."""
    if isinstance(err, shutil.Error) and err.args and isinstance(err.args[0], list) and err.args[0]:
        _src, dst, why = err.args[0][0]
        found = _ERRNO_IN_COPY.search(str(why))
        number = int(found.group(1)) if found else errno.EIO
        return OSError(number, os.strerror(number), str(path if path is not None else dst))
    if isinstance(err, OSError):
        if path is None or (err.filename is not None and not _is_staging(err.filename)):
            return err
        if err.errno is None:  # no cause but the message: a short write says what it most likely is
            short = _SHORT_WRITE.search(str(err))
            cause = f"only {short[2]} of {short[1]} bytes written (is the disk full?)" if short else str(err)
            return OSError(None, cause, str(path))
        return OSError(err.errno, err.strerror or os.strerror(err.errno), str(path))
    found = None if isinstance(err, DictEmbedError) else _ERRNO_IN_RUST.search(str(err))
    if found is None:
        return None
    number = int(found.group(1))
    return OSError(number, os.strerror(number), None if path is None else str(path))


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Re-raise a failure of the disk while writing `path` (a full disk, a read-only filesystem) as an OSError
    naming `path` (`as_os_error`), so the command line reports it in one line; other errors pass unchanged."""
    try:
        yield
    except Exception as err:
        converted = as_os_error(err, path)
        if converted is None or converted is err:
            raise
        raise converted from err


STAGING_MARK = ".dictembed-staging"  # in each folder staged or set aside here: only those are removed in passing


def clear_staging(path: Path) -> None:
    """Make way for a staging folder (or a set-aside copy) at `path`: one left by an interrupted write of dictembed
    (it holds `STAGING_MARK`) is removed; anything else there, a user's file or folder that happens to have the
    name, is a one-line error and stays as it was."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_dir() and not path.is_symlink() and (path / STAGING_MARK).is_file():
        shutil.rmtree(path)
        return
    raise DictEmbedError(
        f"{path} is in the way: dictembed stages its output under that name, and it holds something else; move it "
        "or choose another output"
    )


def link_target(path: str | Path) -> Path:
    """The folder a link at `path` leads to (links followed to the end), else `path`: a staged write into a linked
    output replaces the folder the link names and keeps the link, as writing through it would."""
    path = Path(path)
    return path.resolve() if path.is_symlink() else path


def set_aside_path(target: Path) -> Path:
    """Where `replace_dir` sets the old `target` aside until the new one is in place."""
    return target.with_name(target.name + ".old")


def swap_paths(target: Path) -> tuple[Path, Path, Path]:
    """The folders a staged swap of `target` (`staged_dir`, `replace_dir`) may leave after a kill, newest first:
    `target` itself, its finished staging folder, the previous `target` set aside."""
    return target, target.with_name(target.name + STAGING_SUFFIX), set_aside_path(target)


def clear_way(target: Path, staging: Path, owned: bool = False) -> None:
    """Before the work of a staged write of `target`: remove what an interrupted one left at `staging` and at the
    set-aside name (`clear_staging`; `owned`: `target`'s folder is dictembed's own, so any leftover goes, marked or
    not, as an older version left them); a user's file or folder there is a one-line error and stays."""
    for leftover in (set_aside_path(target), staging):
        if owned and leftover.is_dir() and not leftover.is_symlink():
            (leftover / STAGING_MARK).touch()
        clear_staging(leftover)


def settle_swap(found: Path, target: Path) -> Path:
    """Finish a staged swap of `target` that a kill interrupted between its two renames: move `found` (the complete
    folder it left under another name, `swap_paths`) onto a missing `target`, so that the next staged write of
    `target`, which clears those names first, never removes the only complete copy. Returns where it now is."""
    if found == target or target.exists() or target.is_symlink():
        return found
    os.replace(found, target)
    (target / STAGING_MARK).unlink(missing_ok=True)
    _fsync_dir(target.parent)
    return target


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished staging folder onto `target`, never leaving a half-written target behind: the old
    target is renamed aside first (marked as set aside) and removed only once the new one is in place (put back
    if the new one cannot be moved in). Its files get the user's umask (`with_umask`). A file or folder of the
    user's at the set-aside name (`TARGET.old`) is never removed (`clear_staging`)."""
    with_umask(staging)
    old = set_aside_path(target)
    clear_staging(old)
    had_old = target.exists()
    if had_old:
        mark = target / STAGING_MARK
        mark.touch()
        try:
            os.replace(target, old)
        except BaseException:
            mark.unlink(missing_ok=True)
            raise
    try:
        os.replace(staging, target)
    except BaseException:
        if had_old:
            os.replace(old, target)
            (target / STAGING_MARK).unlink(missing_ok=True)
        raise
    (target / STAGING_MARK).unlink(missing_ok=True)
    _fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_dir(target: str | Path, owned: bool = False) -> Iterator[Path]:
    """A fresh staging folder beside `target` (a link: beside the folder it leads to, `link_target`); on success it
    replaces that folder, on failure it is removed (and `target` left as it was). A full disk or read-only
    filesystem is an OSError naming `target` (`writing`). `owned`: `target`'s folder is dictembed's own (a run's
    checkpoint), so what an interrupted write of any version left beside it is removed, marked or not."""
    target, staging, _ = swap_paths(link_target(target))
    with writing(target):
        clear_way(target, staging, owned)
        staging.mkdir(parents=True)
        (staging / STAGING_MARK).touch()
        try:
            yield staging
            replace_dir(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


def _partial_name(path: Path) -> Path:
    """The temporary name `path` is written under, in its folder: it holds the process id, so two processes
    writing the same file never write into one temporary file."""
    return path.with_name(f"{path.name}.{os.getpid()}{STAGING_SUFFIX}")


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temporary file in the same folder, flushed to disk and renamed
    onto `path` when the block ends; on any failure it is removed and `path` left as it was. A full disk or
    read-only filesystem is an OSError naming `path`."""
    path = Path(path)
    tmp = _partial_name(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(tmp, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    _fsync_dir(path.parent)


def atomic_write(path: str | Path, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write `data` to `path` through a temporary file renamed into place (`atomic_file`)."""
    path = Path(path)
    with atomic_file(path) as f:
        f.write(data.encode(encoding) if isinstance(data, str) else data)
    return path


def preallocate(path: str | Path) -> None:
    """Reserve the disk blocks of the whole file `path` (a sparse file, as a memory map's is made), so that a
    full disk is an OSError naming `path` now rather than a SIGBUS when a page of the map is first written.
    Where the system cannot reserve space ahead (no `posix_fallocate`, or a filesystem without it) nothing
    is done."""
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is None:
        return
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size:
            allocate(fd, 0, size)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return
        raise OSError(err.errno, err.strerror, str(path)) from None
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- reading text
# One reader for every text file (dictionaries, evaluation data, `encode` input): lines split on "\n"
# only, so U+2028, \x0c or \x85 inside a line never make extra lines; bad bytes are named by line and byte.

ENCODING_HINT = (  # every reader shows it: only these commands take --encoding
    "convert the file to UTF-8, or pass --encoding cp1252 if it was written on Windows, latin-1 if it is "
    "ISO Latin-1 (train, index, encode, evaluate, data stats)"
)


def text_encoding(name: str) -> str:
    """`name` if Python knows it as a text encoding (an argparse `type`), else ValueError."""
    try:
        known = codecs.lookup(name)
    except LookupError:
        raise ValueError(f"unknown encoding {name!r}") from None
    if not getattr(known, "_is_text_encoding", True):
        raise ValueError(f"{name!r} is not a text encoding")
    return name


# A pipe, FIFO or device can be read only once and may never end (/dev/zero): it is read in chunks, up to
# MAX_UNSIZED_BYTES, and a line running past MAX_LINE_BYTES stops the read. A plain file's size is known
# before it is read, so it is read whole, its lines held to the same bound. 16 MiB is far above any real
# sentence or definition (encoders truncate to a few hundred tokens) yet reached in milliseconds on a stream
# without newlines; past 2 GiB, text held in memory costs several times that once decoded and split, and
# `dictembed encode` streams a plain file of any size instead.
MAX_LINE_BYTES = 16 << 20
MAX_UNSIZED_BYTES = 2 << 30
READ_CHUNK_BYTES = 1 << 20


def _size(n: int) -> str:
    """`n` bytes in words: 2 GiB, 16 MiB, 100 bytes."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n:,} bytes"


def is_regular_file(path: str | Path) -> bool:
    """Whether `path` (links followed) is a plain file: not a pipe, FIFO, socket or device, whose bytes may be
    readable only once or never end. A path that cannot be examined is not (its read says why)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def line_too_long(path: str | Path, line: int, limit: int) -> DataFormatError:
    """The error for a line longer than `limit` bytes."""
    message = f"line longer than {_size(limit)} (lines are split on \\n only; is this a text file?)"
    return DataFormatError(path, message, line=line)


def _long_line(raw: bytes, limit: int) -> int | None:
    """The offset at which the first line longer than `limit` bytes starts, or None: such a line is a window
    of `limit` + 1 bytes without a newline."""
    start = 0
    while len(raw) - start > limit:
        newline = raw.rfind(b"\n", start, start + limit + 1)
        if newline < 0:
            return start
        start = newline + 1
    return None


def _read_unsized(path: Path, max_line: int | None) -> bytes:
    """The bytes of a pipe, FIFO or device, read once, in chunks: more than MAX_UNSIZED_BYTES, or (with
    `max_line`) a line that runs past `max_line` bytes, is a DataFormatError as soon as it is seen."""
    buffer = io.BytesIO()
    newlines = since_newline = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(READ_CHUNK_BYTES):
            if buffer.tell() + len(chunk) > MAX_UNSIZED_BYTES:
                raise DataFormatError(
                    path, f"more than {_size(MAX_UNSIZED_BYTES)} from a pipe or device; save it to a file first"
                )
            last = chunk.rfind(b"\n")
            newlines += chunk.count(b"\n")
            since_newline = since_newline + len(chunk) if last < 0 else len(chunk) - last - 1
            if max_line is not None and since_newline > max_line:
                raise line_too_long(path, newlines + 1, max_line)
            buffer.write(chunk)
    return buffer.getvalue()


def unreadable(path: str | Path, error: OSError) -> DataFormatError:
    """The one-line error for a file that cannot be read: missing, a folder, no permission..."""
    if isinstance(error, FileNotFoundError):
        reason = "not found"
    elif isinstance(error, IsADirectoryError):
        reason = "it is a folder"
    else:
        reason = (error.strerror or str(error)).lower()
    return DataFormatError(path, f"cannot read file ({reason})")


def check_readable(path: str | Path) -> None:
    """Raise the error `read_bytes` would give for a file that cannot be read, without reading it: a plain file is
    opened and closed, a pipe or FIFO is not opened (its bytes can be read only once)."""
    path = Path(path)
    try:
        if is_regular_file(path):
            with open(path, "rb"):
                pass
        elif path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        else:
            os.stat(path)  # a missing file, or a folder on the way that cannot be entered
    except OSError as error:
        raise unreadable(path, error) from None


def read_bytes(path: str | Path, max_line: int | None = None) -> bytes:
    """The bytes of a file, read once; a missing file, a folder or an unreadable file is a one-line
    DataFormatError (`unreadable`). A pipe, FIFO or device is read up to MAX_UNSIZED_BYTES; with `max_line`, a
    line longer than that many bytes is a DataFormatError naming it."""
    path = Path(path)
    try:
        raw = path.read_bytes() if is_regular_file(path) else _read_unsized(path, max_line)
    except OSError as error:
        raise unreadable(path, error) from None
    if max_line is not None and (start := _long_line(raw, max_line)) is not None:
        raise line_too_long(path, raw.count(b"\n", 0, start) + 1, max_line)
    return raw


def _decode_error(
    path: Path, raw: bytes, error: UnicodeDecodeError, hint: str | None, line: int = 1, offset: int = 0
) -> DataFormatError:
    """The error for bytes that do not decode: the line, the bad byte's value (with the bytes before it in the
    same sequence, and for a bad continuation the byte that breaks it), its place in the line (from 1) and its
    file offset (from 0). `raw` starts the file, or is its line `line` starting at file offset `offset`."""
    line_start = raw.rfind(b"\n", 0, error.start) + 1
    end = error.end + (error.reason == "invalid continuation byte")  # the lead byte, then the one that breaks it
    values = " ".join(f"0x{byte:02x}" for byte in raw[error.start : min(end, error.start + 4)])
    where = f"{values} at byte {error.start - line_start + 1} of the line, file offset {offset + error.start}"
    if hint and (raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) or raw[:200].count(0) * 4 > len(raw[:200])):
        hint = "the file looks like UTF-16 (byte order mark or NUL bytes); pass --encoding utf-16"
    message = f"not valid {error.encoding} ({error.reason}: {where})" + (f"; {hint}" if hint else "")
    return DataFormatError(path, message, line=line + raw.count(b"\n", 0, error.start))


def undecodable(path: str | Path, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> DataFormatError | None:
    """The error `decode` gives for the first bytes of the file `path` that are not `encoding`, found a line at a
    time (for a file too large to hold; a line longer than MAX_LINE_BYTES before them is that error instead); None
    when it decodes, or when "\\n" is not the one byte 0x0A in `encoding` (UTF-16), so that lines cannot be told
    apart by their bytes."""
    if "\n".encode(encoding) != b"\n":
        return None
    offset = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                return line_too_long(path, number, MAX_LINE_BYTES)
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as error:
                return _decode_error(Path(path), raw, error, hint, line=number, offset=offset)
            offset += len(raw)
    return None


def decode(path: str | Path, raw: bytes, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> str:
    """`raw` decoded, without a leading byte order mark; bad bytes raise DataFormatError naming the line."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        raise _decode_error(Path(path), raw, error, hint) from None
    except LookupError:
        raise DictEmbedError(f"{path}: unknown encoding {encoding!r}") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | Path, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> str:
    """The text of a file (see `decode`); a missing file or a folder is a one-line DataFormatError."""
    return decode(path, read_bytes(path), encoding, hint)


def read_json(path: str | Path, encoding: str = "utf-8") -> Any:
    """The JSON document of a file; invalid JSON is a DataFormatError naming the file and line."""
    try:
        return json.loads(read_text(path, encoding))
    except json.JSONDecodeError as error:
        raise DataFormatError(path, f"invalid JSON: {error.msg}", line=error.lineno) from None


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n" only, one trailing "\\r" removed from each; no empty last line for a final "\\n"."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" not in text:
        return lines
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _lines_with_fallback(path: Path, raw: bytes, encoding: str, fallback: str) -> list[str]:
    """Each line decoded on its own; a line that is not `encoding` is decoded as `fallback` and logged."""
    lines = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode(encoding))
        except UnicodeDecodeError:
            logger.warning("%s:%d is not %s; read it as %s", path, number, encoding.upper(), fallback)
            lines.append(chunk.decode(fallback))
    return split_lines("\n".join(lines).removeprefix("\ufeff"))


def _newline_is_byte(encoding: str) -> bool:
    """Whether "\\n" in `encoding` holds the byte 0x0A (UTF-8, Latin-1, UTF-16...; not EBCDIC), so that lines
    can be measured in bytes before decoding; an unknown encoding is reported by `decode`."""
    try:
        return b"\n" in "\n".encode(encoding)
    except LookupError:
        return True


def read_lines(
    path: str | Path, encoding: str = "utf-8", *, fallback: str | None = None, hint: str | None = ENCODING_HINT
) -> list[str]:
    """The lines of a text file (see `split_lines`), a UTF-8 byte order mark skipped.

    The file is read once (`read_bytes`), so a pipe or FIFO gives all its lines; a line longer than
    MAX_LINE_BYTES raises DataFormatError naming it. Bytes that are not `encoding` raise DataFormatError naming
    the file, the line, the byte and `hint`; with `fallback` (an ASCII-compatible encoding) such a line is
    decoded with it instead, and logged.
    """
    raw = read_bytes(path, MAX_LINE_BYTES if _newline_is_byte(encoding) else None)
    try:
        return split_lines(decode(path, raw, encoding, hint))
    except DataFormatError:
        if fallback is None:
            raise
        return _lines_with_fallback(Path(path), raw, encoding, fallback)
