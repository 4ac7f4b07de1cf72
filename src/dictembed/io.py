"""Files: atomic writes (write to a staging name, then rename), so a kill never leaves a half-written result."""

from __future__ import annotations

import codecs
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dictembed.errors import DataFormatError, DictEmbedError

logger = logging.getLogger(__name__)

STAGING_SUFFIX = ".partial"


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished staging folder onto `target`, never leaving a half-written target behind: the old
    target is renamed aside first and removed only once the new one is in place."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def staged_dir(target: str | Path) -> Iterator[Path]:
    """A fresh staging folder beside `target`; on success it replaces `target`, on failure it is removed."""
    target = Path(target)
    staging = target.with_name(target.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_dir(staging, target)


def atomic_write(path: str | Path, data: bytes | str, encoding: str = "utf-8") -> Path:
    """Write `data` to `path` through a temporary file renamed into place (the temporary name holds the
    process id, so two processes writing the same file never write into one temporary file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}{STAGING_SUFFIX}")
    tmp.write_bytes(data.encode(encoding) if isinstance(data, str) else data)
    os.replace(tmp, path)
    return path


# ----------------------------------------------------------------------------- reading text
# One reader for every text file (dictionaries, evaluation data, `encode` input): lines split on "\n"
# only, so U+2028, \x0c or \x85 inside a line never make extra lines; bad bytes are named by line and byte.

ENCODING_HINT = "pass --encoding latin-1 if the file is Latin-1"


def text_encoding(name: str) -> str:
    """`name` if Python knows it as a text encoding (an argparse `type`), else ValueError."""
    try:
        known = codecs.lookup(name)
    except LookupError:
        raise ValueError(f"unknown encoding {name!r}") from None
    if not getattr(known, "_is_text_encoding", True):
        raise ValueError(f"{name!r} is not a text encoding")
    return name


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a file; a missing file, a folder or an unreadable file is a one-line DataFormatError."""
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        reason = "not found"
    except IsADirectoryError:
        reason = "it is a folder"
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
    raise DataFormatError(path, f"cannot read file ({reason})")


def _decode_error(path: Path, raw: bytes, error: UnicodeDecodeError, hint: str | None) -> DataFormatError:
    """The error for bytes that do not decode: the line, the byte within it and the file offset."""
    line_start = raw.rfind(b"\n", 0, error.start) + 1
    where = f"at byte {error.start - line_start + 1} of the line, file offset {error.start}"
    message = f"not valid {error.encoding} ({error.reason} {where})" + (f"; {hint}" if hint else "")
    return DataFormatError(path, message, line=raw.count(b"\n", 0, error.start) + 1)


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


def read_lines(
    path: str | Path, encoding: str = "utf-8", *, fallback: str | None = None, hint: str | None = ENCODING_HINT
) -> list[str]:
    """The lines of a text file (see `split_lines`), a UTF-8 byte order mark skipped.

    Bytes that are not `encoding` raise DataFormatError naming the file, the line, the byte and `hint`;
    with `fallback` (an ASCII-compatible encoding) such a line is decoded with it instead, and logged.
    """
    raw = read_bytes(path)
    try:
        return split_lines(decode(path, raw, encoding, hint))
    except DataFormatError:
        if fallback is None:
            raise
        return _lines_with_fallback(Path(path), raw, encoding, fallback)
