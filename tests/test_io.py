"""`dictembed.io`: the text reader of every line-based input (split on "\\n" only, a byte order mark skipped,
undecodable bytes named by file, line and byte with the `--encoding` hint) and the `--encoding` option."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dictembed.cli import main
from dictembed.errors import DataFormatError
from dictembed.text_files import read_lines, text_encoding, undecodable

pytestmark = pytest.mark.usefixtures("restore_log_level")


def test_read_lines_splits_on_newline_only(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes("\ufeffa\u2028b\r\nc\x0cd\x85e\rf\n\n".encode())
    assert read_lines(path) == ["a\u2028b", "c\x0cd\x85e\rf", ""]


def test_read_lines_names_line_and_byte_with_the_encoding_hint(tmp_path: Path) -> None:
    path = tmp_path / "x.tsv"
    path.write_bytes(b"word\tdefinition\ncat\ta feline\ncaf\xe9\ta shop\n")
    message = r"x\.tsv:3: not valid utf-8 \(invalid continuation byte: 0xe9 0x09 at byte 4 of the line, "
    message += r"file offset 32\); "
    with pytest.raises(
        DataFormatError,
        match=message + r"convert the file to UTF-8, or pass --encoding cp1252 if it was written on Windows, "
        r"latin-1 if it is ISO Latin-1 \(train, index, encode, predict --input, evaluate, data stats\)$",
    ):
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


@pytest.mark.parametrize(
    "raw,bytes_named,line,column,offset",
    [
        (b"fine\nab\xffcd\n", "invalid start byte: 0xff", 2, 3, 7),
        (b"fine\nok\nabc\xe2\x82", "unexpected end of data: 0xe2 0x82", 3, 4, 11),
    ],
)
def test_a_bad_byte_is_named_by_value_line_and_offsets(
    raw: bytes,
    bytes_named: str,
    line: int,
    column: int,
    offset: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The byte's value, its place in the line (from 1) and its file offset (from 0), as docs/cli.md says."""
    from conftest import cli_refuses

    path = tmp_path / "in.txt"
    path.write_bytes(raw)
    where = f"{bytes_named} at byte {column} of the line, file offset {offset}"
    assert raw[offset] == int(bytes_named.split("0x")[1][:2], 16)
    with pytest.raises(
        DataFormatError, match=rf"in\.txt:{line}: not valid utf-8 \({where}\); convert the file to UTF-8"
    ):
        read_lines(path)
    argv = ["encode", "--model", str(tmp_path / "unused"), "--input", str(path), "--output", str(tmp_path / "o.npz")]
    cli_refuses(capsys, argv, f"{path}:{line}: not valid utf-8 ({where})")


@pytest.mark.parametrize(
    "raw", [b"fine\nab\xffcd\n", b"a\r\nb\r\ncaf\xe9\tshop\n", b"ok\nabc\xe2\x82", b"\xff\xfeh\x00i\x00\n\x00"]
)
def test_a_file_read_a_line_at_a_time_gets_the_same_error(raw: bytes, tmp_path: Path) -> None:
    """`undecodable`, for files too large to hold, names the same line, bytes and offsets as `read_lines`."""
    path = tmp_path / "in.txt"
    path.write_bytes(raw)
    with pytest.raises(DataFormatError) as whole:
        read_lines(path)
    found = undecodable(path)
    assert found is not None and str(found) == str(whole.value) and found.line == whole.value.line
    path.write_bytes(b"fine\ncaf\xc3\xa9\n")
    assert undecodable(path) is None and undecodable(path, "utf-16") is None


def test_a_users_folder_at_a_staging_name_is_never_removed(tmp_path: Path) -> None:
    """`staged_dir` writes beside its target under TARGET.partial and sets the old one aside as TARGET.old: a folder
    an interrupted write left there (marked) is removed, a user's folder of that name is a one-line error and stays,
    and the target is left as it was."""
    from dictembed.errors import DictEmbedError
    from dictembed.io import STAGING_MARK, staged_dir

    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("old")
    before = "old"
    for suffix in (".partial", ".old"):
        mine = tmp_path / f"model{suffix}"
        mine.mkdir()
        (mine / "precious.txt").write_text("mine")
        with pytest.raises(DictEmbedError, match=f"^{mine} is in the way: dictembed stages its output under that name"):
            with staged_dir(target) as staging:
                (staging / "weights").write_text("new")
        assert (mine / "precious.txt").read_text() == "mine" and (target / "weights").read_text() == before
        (mine / "precious.txt").unlink()
        (mine / STAGING_MARK).touch()  # now as an interrupted write leaves it: removed in passing
        with staged_dir(target) as staging:
            (staging / "weights").write_text(f"new{suffix}")
        assert not mine.exists() and (target / "weights").read_text() == f"new{suffix}"
        assert sorted(p.name for p in target.iterdir()) == ["weights"]  # no mark left in the target
        before = f"new{suffix}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_staged_write_into_a_link_replaces_the_folder_it_names_and_keeps_the_link(tmp_path: Path) -> None:
    """`train --output LINK` replaced the link with a folder, left LINK.old behind (a link the next run called in
    the way) and a staging mark inside the folder it named; one output spelt two ways had two run locks."""
    from dictembed.io import staged_dir
    from dictembed.output_folder import runs_root

    real = tmp_path / "disk" / "model"
    real.mkdir(parents=True)
    (real / "weights").write_text("old")
    link = tmp_path / "model"
    link.symlink_to(real, target_is_directory=True)
    for text in ("new", "newer"):  # twice: nothing the first write left stands in the second's way
        with staged_dir(link) as staging:
            (staging / "weights").write_text(text)
        assert link.is_symlink() and link.resolve() == real.resolve()
        assert sorted(p.name for p in real.iterdir()) == ["weights"] and (link / "weights").read_text() == text
        assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "model"]
        assert sorted(p.name for p in real.parent.iterdir()) == ["model"]
    assert runs_root(link) == runs_root(real).resolve()
