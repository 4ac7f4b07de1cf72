"""`dictembed.text_files` for the user's text inputs: the UTF-16 diagnosis made from the start of the file only,
the hint of a command without --encoding (`UndecodableError.hinted`), carriage returns inside a line of `encode`'s
--input refused with one line naming file:line (CRLF still read), and an empty --input path."""

from __future__ import annotations

import codecs
import random
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_refuses, cli_succeeds

from dictembed import text_files
from dictembed.errors import DataFormatError
from dictembed.text_files import (
    CARRIAGE_RETURN,
    ENCODING_HINT,
    UTF16_NOTE,
    UndecodableError,
    lone_carriage_return,
    read_lines,
    refuse_carriage_returns,
    undecodable,
)

pytestmark = pytest.mark.usefixtures("restore_log_level")

ORDINARY = b"a large cat\n\xff\xfe bad\n"  # a bad byte pair that is a UTF-16 mark, but not at the file's start


def test_a_bad_byte_after_the_first_line_is_not_blamed_on_utf16(tmp_path: Path) -> None:
    """`undecodable` (a file read a line at a time) looked for UTF-16 in the bad line, not at the file's start."""
    path = tmp_path / "badutf.txt"
    path.write_bytes(ORDINARY)
    found = undecodable(path)
    with pytest.raises(UndecodableError) as whole:
        read_lines(path)
    assert found is not None and str(found) == str(whole.value)
    assert str(found).endswith(
        f"badutf.txt:2: not valid utf-8 (invalid start byte: 0xff at byte 1 of the line, "
        f"file offset 12); {ENCODING_HINT}"
    )
    assert "UTF-16" not in str(found) and not whole.value.utf16


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-16-le"])
def test_a_file_that_starts_like_utf16_is_named_so(encoding: str, tmp_path: Path) -> None:
    """A UTF-16 byte order mark (utf-16), or NUL bytes (-be, -le: no mark), at the start of the file: both readers
    say UTF-16."""
    path = tmp_path / "wide.txt"
    path.write_bytes("one\ntwo\ncafé\n".encode(encoding))
    found = undecodable(path)
    with pytest.raises(UndecodableError) as whole:
        read_lines(path)
    assert found is not None and str(found) == str(whole.value)
    assert str(found).endswith(f"; {UTF16_NOTE}; pass --encoding utf-16") and found.utf16


def test_a_command_without_encoding_gives_its_own_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv"
    path.write_bytes(b"word\tdefinition\ncaf\xe9\ta shop\n")
    with pytest.raises(UndecodableError) as caught:
        read_lines(path)
    hinted = caught.value.hinted("convert it")
    assert str(hinted) == f"{path}:2: {caught.value.detail}; convert it" and hinted.line == 2
    assert "--encoding" not in str(hinted)
    path.write_bytes(codecs.BOM_UTF16_LE + "word\tdefinition\n".encode("utf-16-le"))
    with pytest.raises(UndecodableError) as caught:
        read_lines(path)
    assert str(caught.value.hinted("convert it")).endswith(f"; {UTF16_NOTE}; convert it")


@pytest.mark.parametrize(
    "raw,line",
    [
        (b"a\r\nb\r\n", None),  # CRLF
        (b"a\nb\r", None),  # a final \r ends the last line
        (b"a\rb\n", 1),  # old Mac line ends
        (b"a\nb\nc\r\r\n", 3),  # one \r kept before the CRLF
        (b"a\r\n\rb", 2),
    ],
)
def test_a_carriage_return_inside_a_line_is_named(raw: bytes, line: int | None, tmp_path: Path) -> None:
    """Held in memory (`refuse_carriage_returns`) or found a chunk at a time (`lone_carriage_return`): the same
    line, CRLF line ends read."""
    path = tmp_path / "in.txt"
    path.write_bytes(raw)
    found = lone_carriage_return(path)
    if line is None:
        assert found is None
        refuse_carriage_returns(path, read_lines(path))
        return
    with pytest.raises(DataFormatError) as whole:
        refuse_carriage_returns(path, read_lines(path))
    assert found is not None and str(found) == str(whole.value) == f"{path}:{line}: {CARRIAGE_RETURN}"


def test_chunk_boundaries_do_not_hide_or_invent_a_carriage_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 3-character chunks, a CRLF or a lone \\r falls across every boundary: the chunked search agrees with
    the lines held in memory."""
    monkeypatch.setattr(text_files, "READ_CHUNK_BYTES", 3)
    rng = random.Random(0)
    path = tmp_path / "in.txt"
    for _ in range(300):
        text = "".join(rng.choice(["a", "é", "\n", "\r\n", "\r"]) for _ in range(rng.randint(0, 12)))
        path.write_bytes(text.encode("utf-8"))
        try:
            refuse_carriage_returns(path, read_lines(path))
            expected = None
        except DataFormatError as error:
            expected = str(error)
        found = lone_carriage_return(path)
        assert (None if found is None else str(found)) == expected, repr(text)


def test_a_file_that_does_not_decode_is_left_to_the_reader(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"caf\xe9\rau lait\n")
    assert lone_carriage_return(path) is None  # the read names the byte
    assert str(lone_carriage_return(path, "latin-1")) == f"{path}:1: {CARRIAGE_RETURN}"
    path.write_bytes("a\rb\n".encode("utf-16"))
    assert str(lone_carriage_return(path, "utf-16")) == f"{path}:1: {CARRIAGE_RETURN}"


# ----------------------------------------------------------------------------- encode --input
@pytest.mark.parametrize("output", ["x.npy", "x.npz"])  # read chunk by chunk after the model loads, or at once
def test_encode_blames_an_ordinary_bad_byte_on_the_encoding(
    output: str, bert_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "badutf.txt"
    path.write_bytes(ORDINARY)
    argv = ["encode", "--model", str(bert_path), "--input", str(path), "--output", str(tmp_path / output)]
    line = cli_refuses(capsys, argv, f"{path}:2: not valid utf-8", "pass --encoding cp1252")
    assert "UTF-16" not in line
    assert not (tmp_path / output).exists()


@pytest.mark.parametrize("output", ["x.npy", "x.npz"])
def test_encode_refuses_a_lone_carriage_return_and_reads_crlf(
    output: str, bert_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One row a line: a lone \\r (old Mac line ends) would make one row of two lines; refused before the model
    loads, naming the file and line. CRLF line ends are read."""
    path = tmp_path / "cr.txt"
    path.write_bytes(b"a dog barks\na large cat\rfrozen dessert\n")
    out = tmp_path / output
    argv = ["encode", "--model", str(tmp_path / "no-model"), "--input", str(path), "--output", str(out)]
    assert cli_refuses(capsys, argv).endswith(f"{path}:2: {CARRIAGE_RETURN}")
    path.write_bytes(b"a dog barks\r\na large cat\r\nfrozen dessert\r\n")
    cli_succeeds(capsys, ["encode", "--model", str(bert_path), "--input", str(path), "--output", str(out)])
    loaded = np.load(out)
    assert (loaded["embeddings"] if output.endswith(".npz") else loaded).shape == (3, 32)


def test_encode_refuses_an_empty_input_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["encode", "--model", str(tmp_path), "--input", "", "--output", str(tmp_path / "x.npy")]
    line = cli_refuses(capsys, argv, "--input: an empty path", code=2)
    assert "folder" not in line
