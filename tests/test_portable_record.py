"""A published model names no path of the machine that trained it; what reads its record later still works.

One `dictembed train` in a subprocess, as a batch job runs it: absolute --model, --dictionary and --output, stderr
a pipe (progress lines, not bars) and $DICTEMBED_CACHE a file (named once, the run goes on without the cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TOY_WORDS

from dictembed.cli import main
from dictembed.model_card import render_model_card
from dictembed.model_folder import RECORD_NAME, read_record
from dictembed.paths import EMBEDDED_MODEL, default_model
from dictembed.record import RunRecord

pytestmark = pytest.mark.usefixtures("restore_log_level")


@pytest.fixture(scope="module")
def trained(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(the published model, the dictionary file, the run's stderr)."""
    root = tmp_path_factory.mktemp("machine")
    model = Path(os.path.abspath(bert_path))
    tsv = root / "data" / "toy.tsv"
    tsv.parent.mkdir()
    tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, defs in TOY_WORDS.items() for d in defs))
    cache_file = root / "cache-is-a-file"
    cache_file.write_text("not a folder")
    out = root / "out" / "toy-model"
    env = {**os.environ, "DICTEMBED_CACHE": str(cache_file), "DICTEMBED_PROGRESS_INTERVAL": "0", "TQDM_DISABLE": ""}
    argv = [
        "train",
        "--model",
        str(model),
        "--dictionary",
        str(tsv),
        "--output",
        str(out),
        "--lr-grid",
        "1e-3",
        "--batch-size",
        "4",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "dictembed", *argv], capture_output=True, text=True, timeout=900, env=env, cwd=root
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, tsv, done.stderr


def _text_files(folder: Path) -> dict[Path, str]:
    texts = {}
    for path in folder.rglob("*"):
        if path.is_file():
            try:
                texts[path] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue  # weights
    return texts


def test_no_saved_file_names_a_path_of_the_training_machine(trained, bert_path) -> None:
    out, tsv, _ = trained
    texts = _text_files(out)
    assert {p.name for p in texts} >= {RECORD_NAME, "README.md", "definitions.jsonl", "space.json"}
    for machine_path in (str(tsv.parent), str(out.parent), str(Path(bert_path).parent), str(Path.home())):
        leaking = [p.name for p, text in texts.items() if machine_path in text]
        assert not leaking, f"{machine_path} in {leaking}"
    record = read_record(out, required=True)
    assert record.config is not None
    assert (record.config["model"], record.config["dictionary"], record.config["output"]) == (
        Path(bert_path).name,
        "toy.tsv",
        "toy-model",
    )
    assert record.base_model == record.entry_encoder == Path(bert_path).name and record.data == "toy.tsv"
    assert record.local_source("model", record.base_model) == "folder"
    assert record.local_source("dictionary", "toy.tsv") == "file"
    import hashlib

    (entry,) = record.sources["dictionary"]
    assert entry["sha256"] == hashlib.sha256(tsv.read_bytes()).hexdigest()


def test_the_card_says_a_local_base_model_is_no_hub_model(trained, bert_path) -> None:
    out, _, _ = trained
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"`{Path(bert_path).name}`, a local folder" in card and "base_model:" not in card


def test_the_run_logged_progress_lines_and_went_on_without_a_cache_that_is_a_file(trained) -> None:
    out, _, err = trained
    assert "%|" not in err and "it/s" not in err  # no bars drawn into a pipe
    assert "train: step " in err and "encode: batch " in err  # training and dev evaluation
    warnings = [line for line in err.splitlines() if "cache-is-a-file" in line]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING") and "not a folder" in warnings[0], warnings
    assert out.is_dir()


def test_predict_and_evaluate_from_another_folder_use_the_models_own_definitions(
    trained, tmp_path, monkeypatch, capsys
) -> None:
    out, _, _ = trained
    monkeypatch.chdir(tmp_path)
    assert main(["predict", "--model", str(out), "a pet that barks", "--top-k", "3", "--json", "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(row["definitions"][row["word"]] for row in rows)
    assert rows[0]["definitions"][rows[0]["word"]][0] in {d for defs in TOY_WORDS.values() for d in defs}
    argv = ["evaluate", "reverse-dictionary", "--model", str(out), "--split", "train", "--json", "-q"]
    assert main(argv) == 0  # the record names toy.tsv only: the folder's definitions.jsonl is the dictionary
    assert 0 < json.loads(capsys.readouterr().out)["mrr"] <= 1


def test_a_rerun_of_the_published_configuration_asks_for_the_local_sources(trained, tmp_path, capsys) -> None:
    out, tsv, _ = trained
    argv = ["train", "--config", str(out), "--output", str(tmp_path / "again"), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "local folder" in err and str(tsv.parent) not in err


def test_a_rerun_finds_a_dictionary_file_of_the_same_name_and_content(
    trained, bert_path, tmp_path, monkeypatch
) -> None:
    from dictembed.recipes.resolve import ConfigError, local_settings

    out, tsv, _ = trained
    record = read_record(out, required=True)
    settings = {"model": Path(bert_path).name, "dictionary": "toy.tsv"}
    given = {"model": str(bert_path)}
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="--dictionary"):
        local_settings(record, settings, given, name=lambda s: f"--{s}")
    (tmp_path / "toy.tsv").write_bytes(tsv.read_bytes())  # a copy of the very file, here: found
    assert local_settings(record, settings, given)["dictionary"] == "toy.tsv"
    (tmp_path / "toy.tsv").write_text("word\tdefinition\nother\tanother file of the same name\n")
    with pytest.raises(ConfigError):
        local_settings(record, settings, given)


@pytest.mark.parametrize("sources", [{"dictionary": 5}, {"dictionary": [{"name": [1]}, "x"]}, [], "sources"])
def test_a_hand_edited_sources_listing_reads_as_none(sources: Any, tmp_path) -> None:
    """A `--config` record whose `sources` is not the shape dictembed writes lists no source: its dictionary is
    taken as named (a file here is used), not a TypeError traceback."""
    from dictembed.recipes.resolve import local_settings

    tsv = tmp_path / "toy.tsv"
    tsv.write_text("word\tdefinition\ndog\ta pet\n")
    record = RunRecord(method="defsent-plus", config={"dictionary": str(tsv)}, sources=sources)
    assert record.source_entries("dictionary") == [] and record.local_source("dictionary", str(tsv)) is None
    settings = {"dictionary": str(tsv)}
    assert local_settings(record, dict(settings), {})["dictionary"] == str(tsv)
    assert local_settings(record, dict(settings), {"dictionary": str(tsv)})["dictionary"] == str(tsv)


def test_the_embedded_model_is_recorded_by_its_hub_name_and_read_back_as_this_machines_copy(tmp_path) -> None:
    from dictembed.recipes.config import RunConfig
    from dictembed.recipes.resolve import local_settings

    tsv = tmp_path / "words.tsv"
    tsv.write_text("word\tdefinition\ndog\ta pet\n")
    config = RunConfig.create("defsent-plus", dictionary=str(tsv), output=str(tmp_path / "m"))
    assert config.model == default_model()
    record = RunRecord(method="defsent-plus", base_model=config.model, config=config.to_dict())
    record = record.portable(tmp_path / "m")
    assert record.base_model == record.settings["model"] == EMBEDDED_MODEL
    assert record.local_source("model", EMBEDDED_MODEL) == "embedded"
    card = render_model_card(record)
    assert f'base_model: "{EMBEDDED_MODEL}"' in card and "(the copy embedded in dictembed)" in card
    given = {"dictionary": str(tsv)}
    assert local_settings(record, record.settings, given)["model"] == default_model()


def test_a_file_a_methods_option_names_is_published_by_its_name(tmp_path) -> None:
    """`--descriptions` and `--second-dictionary` given as files of this machine: the published record names each
    by its file name and lists it in `sources` with its SHA-256; a named corpus stays as it is."""
    corpus, second = tmp_path / "private" / "descriptions.tsv", tmp_path / "private" / "second.tsv"
    corpus.parent.mkdir()
    corpus.write_text("word\tdescription\ndog\tan animal that barks\n")
    second.write_text("word\tdefinition\ndog\ta domestic canine\n")
    options = {"descriptions": str(corpus), "second_dictionary": str(second)}
    record = RunRecord(config={"model": "m", "options": dict(options)}, run={"options": dict(options)})
    portable = record.portable(tmp_path / "out")
    text = portable.to_json()
    assert str(tmp_path) not in text
    assert portable.config is not None and portable.config["options"]["descriptions"] == "descriptions.tsv"
    assert portable.run["options"]["second_dictionary"] == "second.tsv"
    assert [entry["name"] for entry in portable.sources["descriptions"]] == ["descriptions.tsv"]
    assert portable.sources["second_dictionary"][0]["local"] == "file"
    named = RunRecord(config={"options": {"descriptions": "everyday", "second_dictionary": "gcide"}}).portable()
    assert named.config == {"options": {"descriptions": "everyday", "second_dictionary": "gcide"}}


def test_a_rerun_asks_for_a_descriptions_file_it_cannot_find_here(tmp_path, monkeypatch) -> None:
    """A published record names a --descriptions file by its name: a rerun of it uses a file of that name here only
    when it is that very file (the same SHA-256), else asks for --descriptions; a given one that differs is warned
    about."""
    from dictembed.recipes.resolve import ConfigError, local_settings

    corpus = tmp_path / "private" / "descriptions.tsv"
    corpus.parent.mkdir()
    corpus.write_text("word\tdescription\ndog\tan animal that barks\n")
    record = RunRecord(config={"dictionary": "wordnet", "options": {"descriptions": str(corpus)}}).portable()
    settings = record.settings
    assert settings["descriptions"] == "descriptions.tsv"
    monkeypatch.chdir(tmp_path)
    flag = {"descriptions": "--descriptions"}.get
    with pytest.raises(ConfigError, match="descriptions descriptions.tsv is a file of the machine .* --descriptions"):
        local_settings(record, settings, {}, name=lambda s: flag(s) or s)
    (tmp_path / "descriptions.tsv").write_bytes(corpus.read_bytes())  # that very file, here: used
    assert local_settings(record, settings, {})["descriptions"] == "descriptions.tsv"
    assert local_settings(record, settings, {"descriptions": str(corpus)})["descriptions"] == "descriptions.tsv"


def test_run_folders_are_recorded_relative_to_the_outputs_folder(tmp_path) -> None:
    runs = tmp_path / "out-runs" / "step1" / "lr0.001-seed0" / "model"
    runs.mkdir(parents=True)
    record = RunRecord(entry_encoder=str(runs), selection={"pst": [{"step": 1, "path": str(runs)}]})
    portable = record.portable(tmp_path / "out")
    assert portable.entry_encoder == portable.selection["pst"][0]["path"] == "out-runs/step1/lr0.001-seed0/model"
    assert record.entry_encoder == str(runs)  # the record itself is unchanged
    assert RunRecord(base_model="bert-base-uncased").portable().base_model == "bert-base-uncased"  # a Hub name


def test_a_saved_encoder_names_no_path_of_this_machine(bert_path: Path, tmp_path: Path) -> None:
    """`Encoder.save` outside a run (an export, a user's own save) keeps the base model's name, not its path."""
    from dictembed.encoder import Encoder

    source = Path(os.path.abspath(bert_path))
    folder = Encoder.load(str(source), device="cpu").save(tmp_path / "saved")
    texts = [p.read_text(encoding="utf-8") for p in folder.rglob("*") if p.is_file() and p.suffix in {".json", ".md"}]
    assert texts and not any(str(source) in text for text in texts)
    assert read_record(folder).base_model == source.name
