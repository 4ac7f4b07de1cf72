"""A trained reverse dictionary's entry space damaged, and bad `dictembed predict` queries: one error line
naming the file or option (exit 1, or 2 for a usage error), never a traceback; nothing in `entry_space/` is
unpickled; a long query is truncated with a warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from conftest import HEADWORDS, PlantedPickle, cli_refuses, cli_succeeds, damage, damaged_copy

from dictembed.errors import DictEmbedError

pytestmark = pytest.mark.usefixtures("restore_log_level")


def _predict(model: Path, *extra: str) -> list[str]:
    return ["predict", "--model", str(model), *extra]


# ------------------------------------------------------------------------------------ the entry space
@pytest.mark.parametrize(
    ("name", "how", "message"),
    [
        ("space.json", "{oops", r"entry_space/space\.json: corrupt entry space \(JSONDecodeError"),
        ("space.json", '{"words": []}', r"entry_space/space\.json: corrupt entry space \(KeyError"),
        ("tensors.safetensors", "half", r"entry_space/tensors\.safetensors: corrupt or truncated"),
        ("space.json", '{"type": "DefinitionSpace", "words": ["a"]}', r"entry_space: .*load \(1 entries but 2"),
    ],
)
def test_corrupt_entry_space_names_the_file(name: str, how: str, message: str, tmp_path: Path) -> None:
    import torch

    from dictembed.entry_space import DefinitionSpace
    from dictembed.saved_entry_space import load_entry_space

    DefinitionSpace(["a", "b"], torch.ones(2, 4)).save(tmp_path)
    damage(tmp_path / "entry_space" / name, how)
    with pytest.raises(DictEmbedError, match=message):
        load_entry_space(tmp_path)


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("space.json", "{oops"),
        ("space.json", '{"words": []}'),
        ("tensors.safetensors", "half"),
        ("tensors.safetensors", "rm"),
    ],
)
def test_a_damaged_entry_space_is_named_by_predict(name, how, served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m", f"entry_space/{name}", how)
    cli_refuses(capsys, _predict(folder, "a pet that barks"), name)


def test_fewer_words_than_vectors_is_named_by_predict(served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m")
    meta = json.loads((folder / "entry_space/space.json").read_text())
    (folder / "entry_space/space.json").write_text(json.dumps(meta | {"words": meta["words"][:-1]}))
    cli_refuses(capsys, _predict(folder, "a pet that barks"), "entry_space")


def _rewrite_space(folder: Path, change) -> None:
    """Load a copy's saved tensors and space.json, let `change` alter them, write them back."""
    from safetensors.torch import load_file, save_file

    space = folder / "entry_space"
    tensors = load_file(str(space / "tensors.safetensors"))
    meta = json.loads((space / "space.json").read_text())
    change(tensors, meta)
    save_file(tensors, str(space / "tensors.safetensors"))
    (space / "space.json").write_text(json.dumps(meta))


def _nan_rows(t: dict, meta: dict) -> None:
    t["matrix"][:3] = float("nan")


def _all_inf(t: dict, meta: dict) -> None:
    t["matrix"][:] = float("inf")


def _int8_as_fp16(t: dict, meta: dict) -> None:
    t["matrix"] = t["matrix"].float().mul(100).to(__import__("torch").int8)
    meta["dtype"] = "fp16"


def _integer_words(t: dict, meta: dict) -> None:
    meta["words"] = [7, *meta["words"][1:]]


def _null_words(t: dict, meta: dict) -> None:
    meta["words"] = [None, *meta["words"][1:]]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_nan_rows, "NaN or infinite"),
        (_all_inf, "NaN or infinite"),
        (_int8_as_fp16, "int8 matrix, space.json says fp16"),
        (_integer_words, "non-empty string"),
        (_null_words, "non-empty string"),
    ],
    ids=["NaN rows", "all inf", "int8 labelled fp16", "integer word", "null word"],
)
def test_entry_vectors_are_checked_when_loaded(change, named, served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m")
    _rewrite_space(folder, change)
    error = cli_refuses(capsys, _predict(folder, "a pet that barks"), "entry_space")
    assert named in error


def test_an_entry_space_of_another_width_is_refused(served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m")
    names = ("matrix", "definitions", "headwords")  # as an entry space of another encoder
    _rewrite_space(folder, lambda t, meta: t.update({name: t[name][:, :-2].contiguous() for name in names}))
    error = cli_refuses(capsys, _predict(folder, "a pet that barks"), "dimensions")
    assert "does not belong to this encoder" in error


def test_definition_vectors_that_do_not_fit_the_entries_are_refused(served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m")
    _rewrite_space(folder, lambda t, meta: t.update(definitions=t["definitions"][1:].contiguous()))
    error = cli_refuses(capsys, _predict(folder, "a pet that barks"), "entry_space")
    assert "definition vectors do not fit" in error


def test_a_model_without_an_entry_space_is_named(saved_bert, capsys) -> None:
    cli_refuses(capsys, _predict(saved_bert, "a pet that barks"), "entry_space")


def test_a_pickle_planted_in_the_entry_space_is_never_loaded(served_model, tmp_path, capsys) -> None:
    folder = damaged_copy(served_model, tmp_path / "m")
    (folder / "entry_space/tensors.pt").write_bytes(PlantedPickle(tmp_path / "EXECUTED").dumps())
    cli_succeeds(capsys, _predict(folder, "a pet that barks"))
    assert not (tmp_path / "EXECUTED").exists()


# ------------------------------------------------------------------------------------ queries
def test_a_100000_character_query_is_answered_with_a_truncation_warning(served_model, capsys, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        out, _ = cli_succeeds(capsys, _predict(served_model, "water " * 16_667, "--json"))
    assert json.loads(out) and "truncated" in caplog.text


def test_top_k_beyond_the_entries_lists_every_entry(served_model, capsys) -> None:
    out, _ = cli_succeeds(capsys, _predict(served_model, "a pet", "--top-k", "100000", "--json"))
    results = json.loads(out)
    assert len(results) <= len(HEADWORDS)
    assert sorted(word for result in results for word in result["words"]) == sorted(HEADWORDS)


@pytest.mark.parametrize(
    ("extra", "named"),
    [(["--top-k", "0"], "--top-k"), (["--pattern", "/[/"], "/[/"), (["--pos", "x"], "'x'")],
)
def test_bad_options_are_one_line_usage_errors(extra, named, served_model, capsys) -> None:
    cli_refuses(capsys, _predict(served_model, "a pet", *extra), named, code=2)


def test_an_input_file_with_invalid_utf8_is_named(served_model, tmp_path, capsys) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_bytes(b"a pet\n\n\xff\xfe bad\n")
    cli_refuses(capsys, _predict(served_model, "--input", str(queries)), "queries.txt")
