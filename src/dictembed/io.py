"""Files written atomically (write to a staging name, then rename), so a kill never leaves a half-written result;
folders staged and swapped in whole. The reader of text inputs is `text_files`."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dictembed.errors import DictEmbedError

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


def in_the_way(path: Path) -> DictEmbedError | None:
    """The error for what lies at `path`, where a staged write puts its staging folder or a set-aside copy, that
    is not dictembed's own leftover (a folder holding `STAGING_MARK`): a user's file or folder of that name; None
    when nothing is there or only such a leftover."""
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_dir() and not path.is_symlink() and (path / STAGING_MARK).is_file():
        return None
    return DictEmbedError(
        f"{path} is in the way: dictembed stages its output under that name, and it holds something else; move it "
        "or choose another output"
    )


def clear_staging(path: Path) -> None:
    """Make way for a staging folder (or a set-aside copy) at `path`: one left by an interrupted write of dictembed
    (it holds `STAGING_MARK`) is removed; anything else there (`in_the_way`) is a one-line error and stays as it
    was."""
    if (error := in_the_way(path)) is not None:
        raise error
    if path.exists():
        shutil.rmtree(path)


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
