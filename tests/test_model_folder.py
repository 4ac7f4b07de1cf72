"""The model folder as one module (`dictembed.model_folder`): its record read once, the dictionary it uses, and
nothing outside it trusted: links leading out, a record naming an outside dictionary file, weights that do not match
the config."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import cli_refuses, cli_succeeds, modules_after
from safetensors.torch import load_file, save_file

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.model_folder import (
    DEFINITIONS_FILE,
    RECORD_NAME,
    ModelFolder,
    hub_repo_root,
    links_outside,
    read_record,
    write_record,
)
from dictembed.record import RunRecord


def _copy(model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(model, tmp_path / "m"))


def _name_dictionary(folder: Path, dictionary: str) -> None:
    record = read_record(folder, required=True)
    assert record.config is not None
    record.config["dictionary"] = dictionary
    write_record(folder, record)


def test_a_record_naming_an_outside_dictionary_file_is_refused(served_model: Path, tmp_path: Path, capsys) -> None:
    from dictembed.reverse_dictionary import ReverseDictionary

    folder = _copy(served_model, tmp_path)
    secret = tmp_path / "secret.tsv"
    served = [json.loads(line)["word"] for line in (folder / DEFINITIONS_FILE).read_text().splitlines()]
    secret.write_text("word\tdefinition\n" + "".join(f"{word}\thunter2 is the password\n" for word in served))
    (folder / DEFINITIONS_FILE).unlink()
    _name_dictionary(folder, str(secret))
    with pytest.raises(
        DictEmbedError, match=r"dictembed\.json: the model names the dictionary 'secret\.tsv'.*--dictionary"
    ):
        ReverseDictionary.load(folder)
    line = cli_refuses(capsys, ["predict", "--model", str(folder), "a password"], RECORD_NAME, "--dictionary")
    assert "hunter2" not in line and str(tmp_path) not in line.split(RECORD_NAME)[1]
    out, _ = cli_succeeds(capsys, ["predict", "--model", str(folder), "a password", "--dictionary", str(secret)])
    assert "hunter2" in out  # named by the user: used


def test_a_public_dictionary_name_is_what_a_folder_may_name(served_model: Path, tmp_path: Path) -> None:
    folder = _copy(served_model, tmp_path)
    assert ModelFolder.open(folder).dictionary().spec == str(folder / DEFINITIONS_FILE)  # its own definitions first
    (folder / DEFINITIONS_FILE).unlink()
    _name_dictionary(folder, "wordnet,gcide")
    chosen = ModelFolder.open(folder).dictionary(wordnet_dir="/wn")
    assert (chosen.spec, chosen.wordnet_dir) == ("wordnet,gcide", "/wn")
    other = tmp_path / "other.tsv"
    other.write_text("word\tdefinition\ndog\ta pet\n", encoding="utf-8")
    assert ModelFolder.open(folder).dictionary(str(other)).spec == str(other)  # the user's choice wins


def test_the_record_is_read_once_from_serve_to_search(served_model: Path, monkeypatch) -> None:
    from dictembed.reverse_dictionary import ReverseDictionary

    reads: list[Path] = []
    original = RunRecord.read.__func__  # type: ignore[attr-defined]

    def counted(cls: type[RunRecord], path: Path) -> RunRecord:
        reads.append(path)
        return original(cls, path)

    monkeypatch.setattr(RunRecord, "read", classmethod(counted))
    rd = ReverseDictionary.load(served_model, device="cpu")
    assert rd.search("a domestic animal", k=2) and len(reads) == 1


@pytest.mark.parametrize("name", [DEFINITIONS_FILE, "model.safetensors", "entry_space"])
def test_links_leading_outside_the_folder_are_refused(name: str, served_model: Path, tmp_path: Path) -> None:
    from dictembed.reverse_dictionary import ReverseDictionary

    folder = _copy(served_model, tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.move(folder / name, outside)
    (folder / name).symlink_to(outside, target_is_directory=outside.is_dir())
    with pytest.raises(ModelLoadError, match=f"{name} links outside the folder"):
        ReverseDictionary.load(folder)


def test_links_inside_the_folder_and_a_hub_snapshots_blobs_are_allowed(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    snapshot = repo / "snapshots" / "0123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("../../blobs/abc"))
    (snapshot / "same.json").symlink_to(snapshot / "config.json")
    assert hub_repo_root(snapshot) == repo and links_outside(snapshot, repo) == []
    assert links_outside(snapshot) == [snapshot / "config.json", snapshot / "same.json"]  # out of the snapshot
    (snapshot / "gone").symlink_to(tmp_path / "missing")
    assert links_outside(snapshot, repo) == [snapshot / "gone"]  # a dangling link out is refused too


@pytest.mark.parametrize("layers,refused", [(1, "saved tensor\\(s\\) have no place"), (3, "asks for .* tensor\\(s\\)")])
def test_weights_that_do_not_match_the_config_are_refused(
    layers: int, refused: str, saved_bert: Path, tmp_path: Path, capsys
) -> None:
    from dictembed.encoder import Encoder

    folder = _copy(saved_bert, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    config["num_hidden_layers"] = layers
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match=refused):
        Encoder.load(str(folder), device="cpu")
    sentences = tmp_path / "in.txt"
    sentences.write_text("a dog\n")
    argv = ["encode", "--model", str(folder), "--input", str(sentences), "--output", str(tmp_path / "out.npy")]
    cli_refuses(capsys, argv, str(folder))


def test_a_missing_pooler_is_allowed(saved_bert: Path, tmp_path: Path) -> None:
    from dictembed.encoder import Encoder

    folder = _copy(saved_bert, tmp_path)
    weights = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "pooler" not in k}, folder / "model.safetensors")
    assert Encoder.load(str(folder), device="cpu").encode(["a dog"]).shape[0] == 1


def test_pickled_weights_are_refused_by_name_with_no_warning(saved_bert: Path, tmp_path: Path) -> None:
    import torch

    from dictembed.encoder import Encoder

    folder = _copy(saved_bert, tmp_path)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ModelLoadError, match="pytorch_model.bin are a"):
        warnings.simplefilter("always")
        Encoder.load(str(folder), device="cpu")
    assert [str(w.message) for w in caught] == []


def test_reading_a_record_or_a_folder_imports_no_recipe() -> None:
    imports = "import dictembed.model_folder, dictembed.record, dictembed.model_card"
    assert modules_after(imports, ("dictembed.recipes.",)) in ([], ["dictembed.recipes.papers"])


def test_serve_takes_the_same_dictionary_rule(served_model: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    folder = _copy(served_model, tmp_path)
    served = [json.loads(line)["word"] for line in (folder / DEFINITIONS_FILE).read_text().splitlines()]
    secret = tmp_path / "secret.tsv"
    secret.write_text("word\tdefinition\n" + "".join(f"{word}\thunter2 is the password\n" for word in served))
    (folder / DEFINITIONS_FILE).unlink()
    _name_dictionary(folder, str(secret))
    with pytest.raises(DictEmbedError, match="--dictionary"):
        create_app(folder, device="cpu")
    answer = TestClient(create_app(folder, device="cpu", dictionary=str(secret))).get("/api/reverse?q=a pet")
    assert answer.status_code == 200 and "hunter2" in answer.text and str(tmp_path) not in answer.text
