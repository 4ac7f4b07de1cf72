"""`predict --input` and the files `predict` and `serve` read: `--encoding` for the --input file, hints that name
only options the command has (a --dictionary table is read as UTF-8), a carriage return inside a line refused with
one line naming file:line (CRLF read), and an empty --input path."""

from __future__ import annotations

import argparse
import codecs
import json
import re
from pathlib import Path

import pytest
from conftest import cli_refuses, cli_succeeds

from dictembed.cli import build_parser
from dictembed.text_files import CARRIAGE_RETURN, UTF16_NOTE

pytestmark = pytest.mark.usefixtures("restore_log_level")

LATIN = "café au lait\n".encode("cp1252")


def options_of(command: str) -> set[str]:
    """Every option string of `dictembed COMMAND`."""
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for action in subparsers.choices[command]._actions for flag in action.option_strings}


def named_options(line: str) -> set[str]:
    """The options an error line names (`--encoding`, `--input`, ...)."""
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line))


def test_the_input_hint_names_only_options_predict_has(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(LATIN)
    line = cli_refuses(capsys, ["predict", "--model", str(served_model), "--input", str(path)], f"{path}:1:")
    assert "--encoding cp1252" in line and named_options(line) <= options_of("predict")


def test_predict_reads_its_input_in_the_encoding_given(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(b"a dog barks\n" + LATIN)
    argv = ["predict", "--model", str(served_model), "--input", str(path), "--encoding", "cp1252", "--json"]
    out, _ = cli_succeeds(capsys, argv)
    assert [(row["line"], row["query"]) for row in json.loads(out)] == [(1, "a dog barks"), (2, "café au lait")]


def test_encoding_without_input_is_a_usage_error(served_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--encoding is the --input file's: given beside a description it would be silently unused."""
    argv = ["predict", "--model", str(served_model), "a pet", "--encoding", "latin-1"]
    cli_refuses(capsys, argv, "--encoding is that of the --input file", code=2)


@pytest.mark.parametrize(
    "raw,note",
    [
        (b"word\tdefinition\ncaf\xe9\ta drink\n", ""),
        (codecs.BOM_UTF16_LE + "word\tdefinition\ncafé\ta drink\n".encode("utf-16-le"), UTF16_NOTE),
    ],
)
def test_a_dictionary_hint_names_only_options_predict_has(
    raw: bytes, note: str, served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """predict has no --encoding for its --dictionary (its --encoding is --input's): the hint says to convert."""
    table = tmp_path / "bad.tsv"
    table.write_bytes(raw)
    argv = ["predict", "--model", str(served_model), "a hot drink", "--dictionary", str(table)]
    line = cli_refuses(capsys, argv, str(table), "not valid utf-8", note)
    assert line.endswith("convert the file to UTF-8 (predict reads it as UTF-8: its --encoding is that of --input)")
    assert "pass --encoding" not in line and named_options(line) <= options_of("predict")


def test_a_dictionary_hint_names_only_options_serve_has(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve reads its --dictionary when it starts, before it listens (a server that would start fails the test)."""
    import dictembed.serve

    def no_server(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server started with a dictionary that does not decode")

    monkeypatch.setattr(dictembed.serve, "server", no_server)
    table = tmp_path / "bad.tsv"
    table.write_bytes(b"word\tdefinition\ncaf\xe9\ta drink\n")
    argv = ["serve", "--model", str(served_model), "--dictionary", str(table), "--port", "0"]
    line = cli_refuses(capsys, argv, f"{table}:2: not valid utf-8")
    assert line.endswith("convert the file to UTF-8 (serve reads it as UTF-8)")
    assert "--encoding" not in line and named_options(line) <= options_of("serve")


def test_a_lone_carriage_return_is_refused_and_crlf_read(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lone \\r (old Mac line ends) would run two descriptions together and, echoed, write over the table's line:
    refused naming the file and line, before the model loads. CRLF line ends are one description a line."""
    path = tmp_path / "cr.txt"
    path.write_bytes(b"a dog barks\na large cat\rfrozen dessert\n")
    line = cli_refuses(capsys, ["predict", "--model", str(tmp_path / "no-model"), "--input", str(path)])
    assert line.endswith(f"{path}:2: {CARRIAGE_RETURN}")
    path.write_bytes(b"a large cat\r\nfrozen dessert\r\n")
    out, _ = cli_succeeds(capsys, ["predict", "--model", str(served_model), "--input", str(path), "--json"])
    assert [row["query"] for row in json.loads(out)] == ["a large cat", "frozen dessert"]


def test_an_empty_input_path_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = cli_refuses(capsys, ["predict", "--model", str(tmp_path), "--input", ""], "--input: an empty path", code=2)
    assert "folder" not in line


def test_an_input_line_the_tokenizer_cannot_read_is_named_by_its_line(
    served_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Blank lines are skipped, so "query 3" was not line 4 of the file."""
    path = tmp_path / "q.txt"
    path.write_text("a pet that barks\n\nwater from clouds\n\U0001f431\n")
    line = cli_refuses(capsys, ["predict", "--model", str(served_model), "--input", str(path)], f"{path}:4 (")
    assert "reads none of it" in line
