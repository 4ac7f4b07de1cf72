"""Bad input to `dictembed encode` and `Encoder.encode`: one output row per input line whatever the bytes in
the line, a clear one-line error for a file that cannot be read or written, never a traceback, never a user
file overwritten."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_refuses, cli_succeeds, one_line_error

from dictembed.cli import main
from dictembed.errors import DictEmbedError

pytestmark = pytest.mark.usefixtures("restore_log_level")


@pytest.fixture(scope="module")
def encoder(saved_bert: Path):
    from dictembed.encoder import Encoder

    return Encoder.load(str(saved_bert), device="cpu")


def _encode(saved_bert: Path, source: Path, output: Path | str | None = None, *extra: str) -> list[str]:
    output = source.with_name("v.npy") if output is None else output
    return ["encode", "--model", str(saved_bert), "--input", str(source), "--output", str(output), *extra]


# ------------------------------------------------------------------------------------ one row per line
LINES = {  # case: (file content, rows)
    "U+2028, form feed and NEL inside lines": ("a\u2028b\nc\x0cd\ne\x85f\n".encode(), 3),  # a lone CR is refused
    "NUL bytes": (b"a \x00 dog\n\x00\n", 2),
    "CRLF with a BOM, no final newline": ("\ufeffa dog\r\na cat".encode(), 2),
    "only a newline": (b"\n", 1),
}


@pytest.mark.parametrize("case", list(LINES))
def test_one_row_per_line(case, saved_bert, tmp_path, capsys) -> None:
    content, rows = LINES[case]
    source = tmp_path / "in.txt"
    source.write_bytes(content)
    cli_succeeds(capsys, _encode(saved_bert, source))
    assert np.load(tmp_path / "v.npy").shape == (rows, 32)


def test_a_1_mb_line_is_one_row_truncated_with_a_warning(saved_bert, tmp_path, capsys, caplog) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"word " * 200_000 + b"\nshort\n")
    with caplog.at_level(logging.WARNING):
        cli_succeeds(capsys, _encode(saved_bert, source))
    assert np.load(tmp_path / "v.npy").shape == (2, 32)
    assert "1 of 2 sentences were longer than" in caplog.text and "truncated" in caplog.text


def test_an_empty_file_is_an_empty_array_or_a_named_error(saved_bert, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"")
    if main(_encode(saved_bert, source)) == 0:
        assert np.load(tmp_path / "v.npy").shape[0] == 0
    else:
        assert "in.txt" in one_line_error(capsys)


# ------------------------------------------------------------------------------------ refused
def test_a_binary_file_is_refused(saved_bert, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(bytes(range(256)) * 4)
    cli_refuses(capsys, _encode(saved_bert, source), "in.txt")
    assert not (tmp_path / "v.npy").exists()


def test_an_output_that_is_a_folder_is_refused(saved_bert, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a dog\n")
    (tmp_path / "out.npy").mkdir()
    cli_refuses(capsys, _encode(saved_bert, source, tmp_path / "out.npy"), "out.npy")


def test_the_input_as_output_is_a_usage_error_and_the_input_is_kept(saved_bert, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes(b"a dog\n")
    cli_refuses(capsys, _encode(saved_bert, source, source), "--output", code=2)
    assert source.read_bytes() == b"a dog\n"


def test_batch_size_0_is_a_usage_error(saved_bert, tmp_path, capsys) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a dog\n")
    cli_refuses(capsys, _encode(saved_bert, source, None, "--batch-size", "0"), "--batch-size", code=2)


def test_latin1_encode_input(tmp_path: Path, bert_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_bytes("a café\nnaïve\n".encode("latin-1"))
    args = ["encode", "--model", str(bert_path), "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main(args) == 1
    assert "in.txt:1: not valid utf-8" in one_line_error(capsys)
    assert main([*args, "--encoding", "latin-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 2


def test_encode_never_overwrites_a_file_unless_asked(bert_path, tmp_path, capsys) -> None:
    from dictembed.cli import main

    text = tmp_path / "in.txt"
    text.write_text("a dog barks\n")
    mine = tmp_path / "results.npy"
    mine.write_bytes(b"years of work")
    args = ["encode", "--model", str(bert_path), "--input", str(text), "--output", str(mine)]
    assert main(args) == 1
    assert "already exists; pass --overwrite" in capsys.readouterr().err and mine.read_bytes() == b"years of work"
    assert main([*args, "--overwrite"]) == 0 and mine.read_bytes() != b"years of work"


# ------------------------------------------------------------------------------------ the Python API
def test_a_sentence_that_is_not_a_string_is_named_by_its_index(encoder) -> None:
    with pytest.raises(DictEmbedError, match="sentence 1") as caught:
        encoder.encode(["a dog", 3])  # type: ignore[list-item]
    assert "\n" not in str(caught.value)


def test_batch_size_0_is_a_one_line_error(encoder) -> None:
    with pytest.raises(DictEmbedError, match="batch_size") as caught:
        encoder.encode(["a"], batch_size=0)
    assert "\n" not in str(caught.value)


def test_encode_none_is_a_one_line_error(bert_path: Path) -> None:
    from dictembed.encoder import Encoder

    with pytest.raises(DictEmbedError, match="sentences must be a str or a list of str, got NoneType"):
        Encoder.load(str(bert_path), device="cpu").encode(None)  # type: ignore[arg-type]


def test_long_sentences_are_truncated_with_one_counted_warning(
    bert_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dictembed.encoder import Encoder

    encoder = Encoder.load(str(bert_path), device="cpu", max_length=16)
    sentences = ["word " * 200, "word " * 15, "word " * 14] + ["a short one"] * 117
    with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
        vectors = encoder.encode(sentences, batch_size=8)
    assert vectors.shape == (120, 32)
    warnings = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
    assert warnings == ["2 of 120 sentences were longer than 16 tokens and were truncated"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
        encoder.encode(sentences[2:])
    assert "truncated" not in caplog.text


def test_the_input_as_output_under_another_suffix_is_refused_even_with_overwrite(saved_bert, tmp_path, capsys) -> None:
    """A text input named like an output (`in.npy`) is not replaced by its own embeddings."""
    source = tmp_path / "in.npy"
    source.write_bytes(b"a\nb\n")
    cli_refuses(capsys, _encode(saved_bert, source, source, "--overwrite"), "is the --input file", code=2)
    assert source.read_bytes() == b"a\nb\n"
