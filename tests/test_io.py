"""`dictembed.io`: the text reader of every line-based input (split on "\\n" only, a byte order mark skipped,
undecodable bytes named by file, line and byte with the `--encoding` hint) and the `--encoding` option."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dictembed.cli import main
from dictembed.errors import DataFormatError
from dictembed.io import read_lines, text_encoding

pytestmark = pytest.mark.usefixtures("restore_log_level")


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeffa\u2028b\r\nc\x0cd\x85e\rf\n\n".encode())
    assert read_lines(path) == ["a\u2028b", "c\x0cd\x85e\rf", ""]


def test_read_lines_names_line_and_byte_with_the_encoding_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv"
    path.write_bytes(b"word\tdefinition\ncat\ta feline\ncaf\xe9\ta shop\n")
    message = r"x\.tsv:3: not valid utf-8 \(invalid continuation byte at byte 4 of the line, file offset 32\); "
    with pytest.raises(DataFormatError, match=message + "pass --encoding latin-1 if the file is Latin-1$"):
        read_lines(path)
    assert read_lines(path, "latin-1")[2] == "café\ta shop"


def test_read_lines_latin1_fallback_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"ok\ncaf\xe9\n\xc3\xa9\n")
    with caplog.at_level(logging.WARNING):
        assert read_lines(path, fallback="latin-1") == ["ok", "café", "é"]
    assert "x.txt:2 is not UTF-8; read it as latin-1" in caplog.text


def test_unknown_encoding_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="unknown encoding"):
        text_encoding("klingon")
    with pytest.raises(ValueError, match="not a text encoding"):
        text_encoding("base64")
    assert main(["data", "stats", "--encoding", "klingon"]) == 2
    assert "--encoding" in capsys.readouterr().err
