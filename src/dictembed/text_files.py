"""The one reader of text inputs (dictionaries, evaluation data, `encode` and `predict` input): each input read once
and within bounds, its lines split on "\n" only, bad bytes named by file, line and byte."""

from __future__ import annotations

import codecs
import errno
import io
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

from dictembed.errors import DataFormatError, DictEmbedError

logger = logging.getLogger(__name__)

# One reader for every text file (dictionaries, evaluation data, `encode` input): lines split on "\n"
# only, so U+2028, \x0c or \x85 inside a line never make extra lines; bad bytes are named by line and byte.

ENCODING_ADVICE = (  # for a file read by a command whose --encoding is that file's
    "convert the file to UTF-8, or pass --encoding cp1252 if it was written on Windows, latin-1 if it is ISO Latin-1"
)
# every reader shows it by default: the commands that take --encoding
ENCODING_HINT = ENCODING_ADVICE + " (train, index, encode, predict --input, evaluate, data stats)"
UTF16_NOTE = "the file looks like UTF-16 (byte order mark or NUL bytes)"
UTF16_PROBE_BYTES = 200  # the first bytes of a file that `looks_like_utf16` reads
CARRIAGE_RETURN = "a carriage return (\\r) inside the line; convert the file to \\n line ends"


class RepeatedKeyError(ValueError):
    """A JSON object that names one key twice (`json.loads` would keep the last value without a word); `key`."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s `object_pairs_hook`: the object, or `RepeatedKeyError` naming the first key it names twice."""
    record = dict(pairs)
    if len(record) < len(pairs):
        keys = [key for key, _ in pairs]
        raise RepeatedKeyError(next(key for key in keys if keys.count(key) > 1))
    return record


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


class UndecodableError(DataFormatError):
    """Bytes that are not the file's encoding: `detail` names them, `hint` (if any) says what to do, and `utf16`
    tells whether the file looks like UTF-16 (`looks_like_utf16`)."""

    def __init__(self, path: str | Path, detail: str, line: int | None, hint: str | None, utf16: bool) -> None:
        self.detail, self.hint, self.utf16 = detail, hint, utf16
        super().__init__(path, detail + (f"; {hint}" if hint else ""), line=line)

    def hinted(self, hint: str) -> UndecodableError:
        """The same error with `hint` in place of its own (a command that has no --encoding for this file says
        what it can do instead), after `UTF16_NOTE` when the file looks like UTF-16."""
        hint = f"{UTF16_NOTE}; {hint}" if self.utf16 else hint
        return UndecodableError(self.path, self.detail, self.line, hint, self.utf16)


def looks_like_utf16(head: bytes) -> bool:
    """Whether a file whose first bytes are `head` looks like UTF-16: a UTF-16 byte order mark at its start, or
    NUL bytes for more than a quarter of its first `UTF16_PROBE_BYTES` bytes (an ASCII text in UTF-16)."""
    head = head[:UTF16_PROBE_BYTES]
    return head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) or head.count(0) * 4 > len(head)


def _decode_error(
    path: Path,
    raw: bytes,
    error: UnicodeDecodeError,
    hint: str | None,
    line: int = 1,
    offset: int = 0,
    head: bytes | None = None,
) -> UndecodableError:
    """The error for bytes that do not decode: the line, the bad byte's value (with the bytes before it in the
    same sequence, and for a bad continuation the byte that breaks it), its place in the line (from 1) and its
    file offset (from 0). `raw` starts the file, or is its line `line` starting at file offset `offset`, and `head`
    the file's first bytes, which alone tell whether it looks like UTF-16 (`looks_like_utf16`; default: `raw`)."""
    line_start = raw.rfind(b"\n", 0, error.start) + 1
    end = error.end + (error.reason == "invalid continuation byte")  # the lead byte, then the one that breaks it
    values = " ".join(f"0x{byte:02x}" for byte in raw[error.start : min(end, error.start + 4)])
    where = f"{values} at byte {error.start - line_start + 1} of the line, file offset {offset + error.start}"
    utf16 = looks_like_utf16(raw if head is None else head)
    if hint and utf16:
        hint = f"{UTF16_NOTE}; pass --encoding utf-16"
    detail = f"not valid {error.encoding} ({error.reason}: {where})"
    return UndecodableError(path, detail, line + raw.count(b"\n", 0, error.start), hint, utf16)


def undecodable(path: str | Path, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> DataFormatError | None:
    """The error `decode` gives for the first bytes of the file `path` that are not `encoding`, found a line at a
    time (for a file too large to hold; a line longer than MAX_LINE_BYTES before them is that error instead); None
    when it decodes, or when "\\n" is not the one byte 0x0A in `encoding` (UTF-16), so that lines cannot be told
    apart by their bytes."""
    if "\n".encode(encoding) != b"\n":
        return None
    offset = 0
    with open(path, "rb") as f:
        head = f.read(UTF16_PROBE_BYTES)  # the start of the file, not of the bad line, tells UTF-16
        f.seek(0)
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                return line_too_long(path, number, MAX_LINE_BYTES)
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as error:
                return _decode_error(Path(path), raw, error, hint, line=number, offset=offset, head=head)
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


def carriage_return_inside(path: str | Path, line: int) -> DataFormatError:
    """The error for a carriage return inside line `line` of a file of one text a line (`refuse_carriage_returns`)."""
    return DataFormatError(path, CARRIAGE_RETURN, line=line)


def refuse_carriage_returns(path: str | Path, lines: list[str]) -> None:
    """DataFormatError naming the first of the `lines` of a file of one text a line (`read_lines`: a CRLF line end
    already gone) that still holds a carriage return: old Mac line ends (a lone \\r) would run several texts
    together as one, and a terminal echoing it would write over the line."""
    for number, line in enumerate(lines, start=1):
        if "\r" in line:
            raise carriage_return_inside(path, number)


def lone_carriage_return(path: str | Path, encoding: str = "utf-8") -> DataFormatError | None:
    """The error `refuse_carriage_returns` gives for the plain file `path` read as `encoding`, found a chunk at a
    time (for a file too large to hold); None without one. Only a carriage return before "\\n" or at the very end
    ends a line; text that does not decode stops the search (the read that follows names its bytes)."""
    line, pending = 1, False  # the line the next chunk starts in; whether the last chunk ended in "\r"
    try:
        with open(path, encoding=encoding, newline="") as f:
            while chunk := f.read(READ_CHUNK_BYTES):
                if pending and not chunk.startswith("\n"):
                    return carriage_return_inside(path, line)
                at = chunk.find("\r")
                while 0 <= at < len(chunk) - 1:
                    if chunk[at + 1] != "\n":
                        return carriage_return_inside(path, line + chunk.count("\n", 0, at))
                    at = chunk.find("\r", at + 2)
                pending = chunk.endswith("\r")
                line += chunk.count("\n")
    except (UnicodeDecodeError, LookupError):
        return None
    return None


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
