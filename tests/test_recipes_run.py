"""The run layer: one loop for every recipe, the typed run record, correct reuse and resume, safe checkpoints,
and an output folder that is never lost."""

from __future__ import annotations

import json
import logging
import pickle
import shutil
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TOY_WORDS

from dictembed.checkpoint import checkpoint_run
from dictembed.cli import main
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import WordEmbeddingSpace
from dictembed.errors import DictEmbedError
from dictembed.model_folder import LEGACY_RECORD_NAME, RECORD_NAME, read_record
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.recipes.config import RunConfig
from dictembed.recipes.registry import RECIPES, get_recipe
from dictembed.recipes.resolve import resolve_train_config
from dictembed.recipes.run import Recipe, train
from dictembed.training import Trainer, TrainSettings


@pytest.fixture()
def toy_tsv(toy_dictionary, tmp_path):
    path = tmp_path / "toy.tsv"
    path.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in toy_dictionary.pairs()))
    return str(path)


def _config(bert_path, toy_tsv, output, **settings) -> RunConfig:
    base = {"pooling": "mean", "pooler": "none", "entries": "amp", "similarity": "cosine", "lrs": [1e-3]}
    return RunConfig.create(
        "defsent-plus", model=str(bert_path), dictionary=toy_tsv, output=str(output), **base | settings
    )


def test_every_method_is_a_registered_recipe() -> None:
    for method in RECIPES:
        recipe = get_recipe(method)
        assert isinstance(recipe, Recipe) and recipe.name == method
        config = RunConfig.create(method)
        assert isinstance(config.options, recipe.options)


def test_options_belong_to_their_method() -> None:
    with pytest.raises(DictEmbedError, match="does not take entries"):
        RunConfig.create("defsent", entries="amp")
    with pytest.raises(DictEmbedError, match="does not take pooling"):
        RunConfig.create("gr-bert", pooling="cls")
    plus, gr = RunConfig.create("defsent-plus", entry_temperature=0.1), RunConfig.create("gr-bert")
    assert plus.options.entry_temperature == 0.1 and gr.options.gloss_temperature == 0.05  # two taus, one per method
    with pytest.raises(DictEmbedError, match="selects on"):
        RunConfig.create("gr-bert", select_on="mrr")


def test_version_1_record_and_config_still_read(tmp_path) -> None:
    legacy = {
        "method": "defsent-plus",
        "lr": 1e-4,
        "seed": 0,
        "dev": {"stsb_dev": 87.3},
        "triplets": {"train": {}},
        "config": {"method": "defsent-plus", "pooling": "mean", "entries": "amp", "temperature": 0.2, "lrs": [1e-4]},
    }
    (tmp_path / LEGACY_RECORD_NAME).write_text(json.dumps(legacy))
    record = read_record(tmp_path, required=True)
    assert record.version == 1 and record.dev == {"stsb_dev": 87.3} and "triplets" in record.details
    config = RunConfig.of_record(record)  # typed: the version-1 flat options are read into the method's options
    assert config is not None
    options = config.options
    assert (options.pooling, options.entries, options.entry_temperature, config.lrs) == ("mean", "amp", 0.2, [1e-4])
    (tmp_path / RECORD_NAME).write_text("{not json")
    with pytest.raises(DictEmbedError, match="corrupt run record"):
        read_record(tmp_path)
    (tmp_path / RECORD_NAME).write_text("{}")  # read as a record of defaults, it reset a folder's saved ranking
    with pytest.raises(DictEmbedError, match="bad run record .none of the fields a record holds"):
        read_record(tmp_path)


def test_a_finished_run_is_reused_only_under_the_same_configuration(bert_path, toy_tsv, tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO)
    out = train(_config(bert_path, toy_tsv, tmp_path / "out"))
    first = (out / "model.safetensors").read_bytes()
    caplog.clear()
    train(_config(bert_path, toy_tsv, tmp_path / "out", overwrite=True))
    assert "reusing finished run" in caplog.text and (out / "model.safetensors").read_bytes() == first
    caplog.clear()
    out = train(_config(bert_path, toy_tsv, tmp_path / "out", overwrite=True, limit=5))
    assert "retraining" in caplog.text and "differs in limit" in caplog.text
    assert read_record(out).train_examples == 5 and read_record(out).settings["limit"] == 5


def test_the_output_folder_is_never_lost(bert_path, toy_tsv, tmp_path) -> None:
    thesis = tmp_path / "mine" / "thesis.txt"
    thesis.parent.mkdir()
    thesis.write_text("years of work")
    with pytest.raises(DictEmbedError, match="holds no dictembed model"):
        train(_config(bert_path, toy_tsv, thesis.parent))
    assert thesis.read_text() == "years of work"
    out = train(_config(bert_path, toy_tsv, tmp_path / "model"))
    with pytest.raises(DictEmbedError, match="--overwrite"):
        train(_config(bert_path, toy_tsv, out))
    assert main(["train", "--model", str(bert_path), "--dictionary", toy_tsv, "--output", str(thesis.parent)]) == 1


def test_a_run_reruns_from_its_saved_configuration(bert_path, toy_tsv, tmp_path, capsys) -> None:
    out = train(_config(bert_path, toy_tsv, tmp_path / "first", seeds=[3]))
    rerun = ["train", "--config", str(out / RECORD_NAME), "--output", str(tmp_path / "again"), "--json"]
    # the published record names the local model folder and dictionary file by their names only: give them again
    assert main(rerun) == 2 and "--model" in capsys.readouterr().err
    assert main([*rerun, "--model", str(bert_path), "--dictionary", toy_tsv]) == 0
    again = read_record(tmp_path / "again", required=True)
    first = read_record(out)
    assert again.run == first.run and again.config["options"] == first.config["options"]
    # The same training, the same embeddings (the checkpoint's unused BERT pooler is drawn anew at each load).
    sentences = ["a pet that barks", "water from the sky"]
    expected = Encoder.load(str(out), device="cpu").encode(sentences)
    assert (Encoder.load(str(tmp_path / "again"), device="cpu").encode(sentences) == expected).all()


def test_a_rerun_resolves_the_precision_on_its_own_machine(bert_path, toy_tsv, tmp_path) -> None:
    """A folder trained where "auto" meant bf16 (a CPU with AMX) records bf16; a rerun of its configuration
    resolves "auto" again here instead of computing in (possibly emulated) bf16, unless told."""
    out = train(_config(bert_path, toy_tsv, tmp_path / "first", seeds=[3]))
    record = json.loads((out / RECORD_NAME).read_text())
    record["config"]["precision"] = "bf16"
    (out / RECORD_NAME).write_text(json.dumps(record))
    given = {"model": str(bert_path), "dictionary": toy_tsv}
    rerun = resolve_train_config(None, None, given, output=str(tmp_path / "again"), saved=out)
    assert rerun.config.precision == "fp32"  # the suite's CPU "auto"
    told = resolve_train_config(None, None, given | {"precision": "bf16"}, output=str(tmp_path / "b"), saved=out)
    assert told.config.precision == "bf16" and told.config.seeds == [3]


def test_a_configuration_file_of_another_name_is_read_itself_not_its_neighbour(bert_path, toy_tsv, tmp_path) -> None:
    """`train --config cfg/my-run.json` beside a folder's own dictembed.json ran the neighbour's settings."""
    from dictembed.recipes.resolve import saved_config

    out = train(_config(bert_path, toy_tsv, tmp_path / "first", seeds=[3]))
    record = json.loads((out / RECORD_NAME).read_text())
    record["config"]["seeds"] = [7]
    (out / "my-run.json").write_text(json.dumps(record))
    assert saved_config(out / "my-run.json").seeds == [7] and saved_config(out).seeds == [3]


# ------------------------------------------------------------------------------ checkpoints
def _trainer(bert_path, toy_dictionary, run_dir, identity=None) -> tuple[Trainer, Encoder]:
    torch.manual_seed(123)
    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    space = WordEmbeddingSpace.from_encoder(encoder, toy_dictionary.headwords)
    settings = TrainSettings(lr=1e-3, batch_size=4, epochs=2, seed=7, checkpoint_every=3)
    examples = entry_examples(toy_dictionary, space)
    identity = identity or {"limit": None}
    return Trainer(
        EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, run_dir, identity
    ), encoder


def test_a_diverged_run_stops_in_one_line_and_saves_nothing(bert_path, toy_dictionary, tmp_path) -> None:
    trainer, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    trainer.settings.lr = 1e30  # as `head learn --lr 1e300` asked: the weights overflow within a few steps
    for group in trainer.optimizer.param_groups:
        group["lr"] = group["initial_lr"] = 1e30
    trainer.scheduler.base_lrs = [1e30 for _ in trainer.scheduler.base_lrs]
    with pytest.raises(DictEmbedError, match=r"^training diverged: the loss is (nan|inf) at step \d+ .* lower the"):
        trainer.fit()
    assert trainer.progress.step < trainer.total_steps


def _weights(encoder: Encoder) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in encoder.state_dict().items()}


class Payload:
    """Unpickling this writes a marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_checkpoints_hold_no_pickle_and_a_planted_one_never_runs(bert_path, toy_dictionary, tmp_path) -> None:
    straight_trainer, straight = _trainer(bert_path, toy_dictionary, tmp_path / "straight")
    straight_trainer.fit()
    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.fit(max_steps=5)
    checkpoint = tmp_path / "run" / "checkpoint"
    assert {p.suffix for p in checkpoint.iterdir()} <= {".safetensors", ".json"}
    marker = tmp_path / "executed"
    for name in ("custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"):
        (checkpoint / name).write_bytes(pickle.dumps(Payload(str(marker))))
    resumed, encoder = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    resumed.fit(resume=True)
    assert not marker.exists()
    assert resumed.progress.step == 8
    for name, value in _weights(straight).items():
        assert torch.equal(value, encoder.state_dict()[name]), name


def test_a_kill_between_the_two_renames_leaves_a_resumable_checkpoint(bert_path, toy_dictionary, tmp_path) -> None:
    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.fit(max_steps=5)
    checkpoint = tmp_path / "run" / "checkpoint"
    shutil.move(checkpoint, checkpoint.with_name("checkpoint.partial"))  # killed after setting the old one aside
    resumed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    resumed._start(resume=True)
    assert resumed.progress.step == 5  # goes on from step 5, not from step 0
    assert checkpoint_run(checkpoint) is not None and not checkpoint.with_name("checkpoint.partial").exists()


def test_a_resume_after_a_kill_between_the_renames_survives_a_second_kill(
    bert_path, toy_dictionary, tmp_path, monkeypatch
) -> None:
    """The checkpoint a resume found under the staging name is moved into place first: a second kill during the
    next checkpoint's write leaves it, not nothing."""
    from dictembed import training

    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.fit(max_steps=5)
    checkpoint = tmp_path / "run" / "checkpoint"
    shutil.move(checkpoint, checkpoint.with_name("checkpoint.partial"))

    def killed_while_writing(folder: Path, *args: Any, **kwargs: Any) -> None:
        (folder / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "save_checkpoint", killed_while_writing)
    again, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        again.fit(resume=True, max_steps=6)
    monkeypatch.undo()
    survived = checkpoint_run(checkpoint)
    assert survived is not None and survived["step"] == 5  # the second kill left the step-5 checkpoint in place


def test_the_metrics_log_goes_on_from_the_checkpoint_a_run_resumes(bert_path, toy_dictionary, tmp_path) -> None:
    """The steps between the last checkpoint and a kill were logged twice after --resume; a run started over kept
    the discarded run's lines."""

    def logged_steps() -> list[int]:
        lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["step"] for line in lines]

    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.settings.log_every = 1
    killed.fit(max_steps=5)
    assert logged_steps() == [1, 2, 3, 4, 5]
    with open(tmp_path / "run" / "metrics.jsonl", "a") as log:
        log.write('{"step": 6, "lo')  # a line a kill cut short
    resumed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    resumed.settings.log_every = 1
    resumed.fit(resume=True)
    assert logged_steps() == list(range(1, resumed.progress.step + 1))
    again, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    again.settings.log_every = 1
    again.fit(max_steps=2)  # started over: a new log
    assert logged_steps() == [1, 2]


def test_resume_means_what_it_says(bert_path, toy_dictionary, tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO)
    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.fit(max_steps=5)
    fresh, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    fresh.fit(max_steps=1)  # no --resume: the checkpoint is not used
    assert fresh.progress.step == 1 and "pass --resume to continue it" in caplog.text
    other, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run", identity={"limit": 3})
    other.fit(max_steps=1)  # the checkpoint fresh left at step 1 belongs to another configuration
    other_again, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run", identity={"limit": 5})
    checkpoint = tmp_path / "run" / "checkpoint"
    kept = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    with pytest.raises(
        DictEmbedError, match=r"another configuration \(limit was 3, now 5\); resume it with the options"
    ):
        other_again.fit(resume=True, max_steps=2)  # refused, the checkpoint kept for a resume with its own options
    assert {p.name: p.read_bytes() for p in checkpoint.iterdir()} == kept
    resumed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run", identity={"limit": 3})
    resumed.fit(resume=True, max_steps=2)
    assert resumed.progress.step == 2 and "resumed from" in caplog.text
    caplog.clear()
    nothing, _ = _trainer(bert_path, toy_dictionary, tmp_path / "empty")
    nothing.fit(resume=True, max_steps=1)
    assert "--resume: no checkpoint" in caplog.text


def test_a_second_train_into_the_same_output_refuses(bert_path, toy_tsv, tmp_path) -> None:
    import subprocess
    import sys

    from dictembed.output_folder import runs_root

    lock = runs_root(tmp_path / "out") / "train.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from filelock import FileLock; h = FileLock({str(lock)!r}); h.acquire(); print(1, flush=1); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "1"  # the other process holds the lock
        with pytest.raises(DictEmbedError, match="another dictembed train is writing"):
            train(_config(bert_path, toy_tsv, tmp_path / "out"))
    finally:
        holder.communicate("\n", timeout=30)
    assert train(_config(bert_path, toy_tsv, tmp_path / "out")).is_dir()  # released with its process


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])  # Ctrl-C, and what a batch scheduler sends
def test_ctrl_c_writes_a_checkpoint_at_the_current_step(signum, bert_path, toy_dictionary, tmp_path) -> None:
    import os
    import signal

    straight_trainer, straight = _trainer(bert_path, toy_dictionary, tmp_path / "straight")
    straight_trainer.fit()
    trainer, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    collate = trainer.collate
    calls = []

    def interrupt_at_the_third_batch(items):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), getattr(signal, signum))  # in the middle of step 3
        return collate(items)

    trainer.collate = interrupt_at_the_third_batch
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    saved = json.loads((tmp_path / "run" / "checkpoint" / "run.json").read_text())
    # The step under way was finished, then saved (the loader collates one batch ahead, so step 2 or 3).
    assert saved["step"] in (2, 3)
    resumed, encoder = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    resumed.fit(resume=True)
    for name, value in _weights(straight).items():
        assert torch.equal(value, encoder.state_dict()[name]), name


def test_headwords_and_dev_language(bert_path, toy_tsv, tmp_path) -> None:
    from wordfreq import zipf_frequency

    from dictembed.evaluation.sts_multi import evaluate_sts_dev
    from dictembed.reverse_dictionary import ReverseDictionary

    rare = {"zyzzyva": "a tropical weevil", "quokka": "a small wallaby", "axolotl": "a salamander that stays young"}
    table = tmp_path / "more.tsv"
    table.write_text(open(toy_tsv).read() + "".join(f"{w}\t{d}\n" for w, d in rare.items()))
    out = train(_config(bert_path, str(table), tmp_path / "out", headwords=8, dev_language="fr"))
    record = read_record(out)
    frequent = sorted([*TOY_WORDS, *rare], key=lambda w: -zipf_frequency(w, "en"))[:8]
    assert sorted(ReverseDictionary.load(str(out)).space.words) == sorted(frequent) == sorted(TOY_WORDS)
    assert record.settings["headwords"] == 8 and record.settings["dev_language"] == "fr"
    french = evaluate_sts_dev(Encoder.load(str(out)), "fr")
    assert record.dev["stsb_dev"] == pytest.approx(french, abs=1e-3)
    assert french != pytest.approx(evaluate_sts_dev(Encoder.load(str(out)), "en"), abs=1e-3)


def test_a_failure_after_training_resumes_at_the_end_without_training_again(
    bert_path, toy_tsv, tmp_path, monkeypatch, caplog
) -> None:
    """A run that dies after its last step (scoring or saving) keeps that step's checkpoint: `--resume` loads it,
    trains nothing, and publishes the weights an uninterrupted run publishes; the checkpoint goes once saved."""
    from safetensors.torch import load_file

    import dictembed.recipes.run as run_module
    from dictembed.output_folder import runs_root

    straight = train(_config(bert_path, toy_tsv, tmp_path / "straight"))
    saving = run_module.save_model_folder

    def fail_once(*args, **kwargs):
        monkeypatch.setattr(run_module, "save_model_folder", saving)
        raise OSError("disk full")

    monkeypatch.setattr(run_module, "save_model_folder", fail_once)
    with pytest.raises(OSError, match="disk full"):
        train(_config(bert_path, toy_tsv, tmp_path / "out"))
    kept = list(runs_root(tmp_path / "out").rglob("checkpoint"))
    assert len(kept) == 1 and not (tmp_path / "out").exists()
    steps = []
    monkeypatch.setattr(Trainer, "save_checkpoint", lambda self: steps.append(self.progress.step))
    caplog.set_level(logging.INFO)
    out = train(_config(bert_path, toy_tsv, tmp_path / "out", resume=True))
    assert "resumed from" in caplog.text and steps == []  # no step trained, so none checkpointed
    assert not list(runs_root(tmp_path / "out").rglob("checkpoint"))
    ours, theirs = load_file(out / "model.safetensors"), load_file(straight / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_defsent_over_a_dictionary_without_one_token_word_is_one_line(bert_path, tmp_path, capsys) -> None:
    """DefSent trains on the headwords its tokenizer reads as one token; a dictionary of none was a ValueError
    traceback from the trainer."""
    from conftest import cli_refuses

    table = tmp_path / "made-up.tsv"
    table.write_text("word\tdefinition\n" + "".join(f"zzqxaablorp{i}\ta made up thing {i}\n" for i in range(40)))
    argv = ["train", "--method", "defsent", "--model", str(bert_path), "--dictionary", str(table)]
    cli_refuses(capsys, [*argv, "--lr-grid", "1e-3", "--output", str(tmp_path / "o")], "made-up.tsv", "single-token")


def test_a_dictionary_file_edited_at_the_same_path_trains_anew(bert_path, toy_tsv, tmp_path, caplog) -> None:
    """A finished run was reused when only the dictionary file's content changed (and the model folder's weights),
    publishing weights of the old file beside the new file's definitions."""
    table = tmp_path / "mine.tsv"
    shutil.copyfile(toy_tsv, table)
    train(_config(bert_path, str(table), tmp_path / "out", seeds=[3]))
    first = read_record(tmp_path / "out").run
    assert first["sources"][f"dictionary {table.name}"] and any(k.startswith("model ") for k in first["sources"])
    table.write_text(table.read_text() + "zebra\ta striped wild horse of Africa\n")
    with caplog.at_level(logging.WARNING):
        train(_config(bert_path, str(table), tmp_path / "out", seeds=[3], overwrite=True))
    assert "its saved configuration differs in sources." in caplog.text
    assert read_record(tmp_path / "out").run["sources"] != first["sources"]


def test_train_never_writes_into_or_over_the_model_it_starts_from(bert_path, toy_tsv, tmp_path, capsys) -> None:
    """An --output inside --model wrote the trained model and its run folders into the user's model folder; a
    --model inside --output would be replaced by the model trained from it."""
    from conftest import cli_refuses

    model = tmp_path / "mine" / "model"
    shutil.copytree(bert_path, model)
    before = sorted(p.name for p in model.iterdir())
    argv = ["train", "--model", str(model), "--dictionary", str(toy_tsv), "--lr-grid", "1e-3"]
    cli_refuses(capsys, [*argv, "--output", str(model / "sub")], "is inside the model folder", str(model))
    assert sorted(p.name for p in model.iterdir()) == before
    cli_refuses(capsys, [*argv, "--output", str(tmp_path / "mine"), "--overwrite"], "is inside --output")
    with pytest.raises(DictEmbedError, match="is inside the model folder"):
        train(_config(str(model), str(toy_tsv), model / "sub"))
    assert sorted(p.name for p in model.iterdir()) == before


def test_a_descriptions_file_edited_at_the_same_path_is_another_run(tmp_path) -> None:
    """The run identity holds the content of a file a method's option names (`--descriptions`), as of a dictionary
    file: a corpus edited at its path trains anew instead of reusing or resuming a run of the old one."""
    from dictembed.recipes.run import source_prints

    corpus = tmp_path / "descriptions.tsv"
    corpus.write_text("word\tdescription\ndog\tan animal that barks\n")
    config = RunConfig.create("defsent-plus", dictionary="wordnet", descriptions=str(corpus))
    first = source_prints(config)
    assert "descriptions descriptions.tsv" in first
    corpus.write_text("word\tdescription\ndog\ta pet that barks at night\n")
    second = source_prints(config)
    assert second["descriptions descriptions.tsv"] != first["descriptions descriptions.tsv"]
    assert {k: v for k, v in second.items() if not k.startswith("descriptions")} == {
        k: v for k, v in first.items() if not k.startswith("descriptions")
    }
    named = source_prints(RunConfig.create("defsent-plus", dictionary="wordnet", descriptions="everyday"))
    assert not any(key.startswith("descriptions") for key in named)


def test_files_put_into_the_output_while_it_trains_are_never_replaced(
    bert_path, toy_tsv, tmp_path, monkeypatch
) -> None:
    """The output was checked only before training: a folder a user made there meanwhile was replaced at publish."""
    from dictembed.recipes import run

    out, select = tmp_path / "out", run.select

    def user_writes_meanwhile(*args, **kwargs):
        out.mkdir(exist_ok=True)
        (out / "my-notes.txt").write_text("mine")
        return select(*args, **kwargs)

    monkeypatch.setattr(run, "select", user_writes_meanwhile)
    with pytest.raises(DictEmbedError, match="is a non-empty folder that holds no dictembed model; choose another"):
        train(_config(bert_path, toy_tsv, out, seeds=[3]))
    assert (out / "my-notes.txt").read_text() == "mine"


def test_synonym_targets_make_every_headword_of_a_shared_definition_right(bert_path, tmp_path, caplog) -> None:
    """A synset's gloss, listed by each of its words, had one entry right and the others as negatives."""
    dictionary = Dictionary(name="toy")
    for word, definition in [
        ("autumn", "the season when the leaves fall"),
        ("fall", "the season when the leaves fall"),
        ("fall", "descend in free fall"),
        ("dog", "a domesticated animal that barks"),
    ]:
        dictionary.add(word, definition)
    space = types.SimpleNamespace(index={"autumn": 0, "fall": 1, "dog": 2}, kind="toy")
    assert entry_examples(dictionary, space) == [  # type: ignore[arg-type]
        ("the season when the leaves fall", 0),
        ("the season when the leaves fall", 1),
        ("descend in free fall", 1),
        ("a domesticated animal that barks", 2),
    ]
    with caplog.at_level(logging.INFO):
        shared = entry_examples(dictionary, space, synonyms=True)  # type: ignore[arg-type]
    assert shared == [
        ("the season when the leaves fall", (0, 1)),
        ("the season when the leaves fall", (1, 0)),
        ("descend in free fall", 1),
        ("a domesticated animal that barks", 2),
    ]
    assert "2 of 4 definitions are listed by several headwords" in caplog.text
    _, labels = entry_collate(Encoder.load(str(bert_path), pooling="mean", device="cpu"))(shared)
    assert labels.tolist() == [[0, 1], [1, 0], [1, -1], [2, -1]]


def test_a_run_with_synonym_targets_trains_on_them_and_records_them(bert_path, tmp_path, caplog) -> None:
    rows = [(f"w{i}", f"a thing of kind {i}") for i in range(30)] + [
        (f"v{i}", f"a thing of kind {i}") for i in range(30)
    ]
    tsv = tmp_path / "synonyms.tsv"
    tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in rows))
    with caplog.at_level(logging.INFO):
        out = train(_config(bert_path, str(tsv), tmp_path / "syn", synonym_targets=True))
    record = json.loads((out / RECORD_NAME).read_text())
    assert record["config"]["options"]["synonym_targets"] is True
    assert "definitions are listed by several headwords" in caplog.text and record["final_loss"] is not None


def test_a_run_saved_in_part_is_never_reused_as_finished(bert_path, toy_tsv, tmp_path, caplog) -> None:
    """`train` killed (SIGTERM) while it saved a run left `model/` with its record but no entry space; the rerun
    reused it and published a folder `predict` could not open. A run is now saved staged and renamed whole, and a
    run folder beside a checkpoint (kept until the save ends) is not reused."""
    from dictembed.recipes.run import finished_run, save_run

    out = train(_config(bert_path, toy_tsv, tmp_path / "first"))
    run_dir = next((tmp_path / "first-runs").glob("step1/lr*"))
    identity = read_record(run_dir / "model", required=True).run
    assert finished_run(run_dir, identity) is not None
    (run_dir / "checkpoint").mkdir()  # as a save cut short leaves it: the checkpoint outlives the partial folder
    with caplog.at_level(logging.WARNING):
        assert finished_run(run_dir, identity) is None
    assert "was not saved whole (its checkpoint is still there)" in caplog.text

    def killed_save(stage, built, encoder, folder, record, cache_dir) -> None:
        (folder / "dictembed.json").write_text("{}")  # the record first, as the encoder's save writes it
        assert folder != run_dir / "model" and not (run_dir / "model").exists()  # nothing at the final name yet
        raise KeyboardInterrupt  # the save stops half-way

    shutil.rmtree(run_dir / "model")
    with pytest.raises(KeyboardInterrupt):
        save_run(types.SimpleNamespace(save=killed_save), None, None, None, run_dir / "model", None, tmp_path)  # type: ignore[arg-type]
    assert not list(run_dir.glob("model*")) and out.is_dir()


def test_a_missing_sts_dev_split_stops_train_before_anything_is_built(
    bert_path, toy_tsv, tmp_path, monkeypatch, capsys
) -> None:
    """Every recipe scores its runs on STS-B dev; without the file, train failed only after the entry space, the
    training and the headword vectors (minutes on WordNet)."""
    from conftest import cli_refuses

    empty = tmp_path / "data"
    (empty / "sts").mkdir(parents=True)
    monkeypatch.setenv("DICTEMBED_DATA_DIR", str(empty))
    missing = empty / "sts" / "STS" / "STSBenchmark" / "sts-dev.csv"
    with pytest.raises(DictEmbedError, match=f"^train scores each run on the STS-B dev split: {missing}"):
        train(_config(bert_path, toy_tsv, tmp_path / "out"))
    with pytest.raises(DictEmbedError, match="stsb-fr-dev.csv: not found"):
        train(_config(bert_path, toy_tsv, tmp_path / "out", dev_language="fr"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "out-runs").exists()
    argv = ["train", "--model", str(bert_path), "--dictionary", toy_tsv, "--output", str(tmp_path / "o")]
    cli_refuses(capsys, argv, "STS-B dev", str(missing))
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------ run bookkeeping
def _interrupt_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> None:
    """Make every `Trainer.fit` stop as Ctrl-C does after `steps` steps: a checkpoint there, then KeyboardInterrupt."""
    fit = Trainer.fit

    def interrupted(self: Trainer, resume: bool = False, max_steps: int | None = None, keep_final: bool = False):
        fit(self, resume=resume, max_steps=steps, keep_final=keep_final)
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "fit", interrupted)


def test_a_resumed_run_records_the_figures_of_an_uninterrupted_one(bert_path, toy_tsv, tmp_path, monkeypatch) -> None:
    """The final loss was the mean of the losses of the last `fit` call only: a run resumed part-way recorded
    another figure than an uninterrupted one, and a run resumed at its last step recorded no loss and no throughput."""
    import dictembed.recipes.run as run_module
    from dictembed.output_folder import runs_root

    settings = {"batch_size": 2, "epochs": 2}
    straight = read_record(train(_config(bert_path, toy_tsv, tmp_path / "straight", **settings)), required=True)
    _interrupt_after(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train(_config(bert_path, toy_tsv, tmp_path / "out", **settings))
    monkeypatch.undo()
    (checkpoint,) = runs_root(tmp_path / "out").rglob("checkpoint")
    assert json.loads((checkpoint / "run.json").read_text())["step"] == 3
    saving = run_module.save_model_folder

    def fail_once(*args, **kwargs):
        monkeypatch.setattr(run_module, "save_model_folder", saving)
        raise OSError("disk full")

    monkeypatch.setattr(run_module, "save_model_folder", fail_once)
    with pytest.raises(OSError, match="disk full"):  # resumed at step 3, trained to the end, failed to save
        train(_config(bert_path, toy_tsv, tmp_path / "out", resume=True, **settings))
    assert json.loads((checkpoint / "run.json").read_text())["step"] > 3
    out = train(_config(bert_path, toy_tsv, tmp_path / "out", resume=True, **settings))  # resumed at its last step
    resumed = read_record(out, required=True)
    assert straight.final_loss is not None and resumed.final_loss == straight.final_loss
    assert resumed.throughput is not None and resumed.throughput > 0

    def card_row(folder: Path) -> list[str]:
        return [line for line in (folder / "README.md").read_text().splitlines() if line.startswith("| final_loss |")]

    assert card_row(out) == card_row(tmp_path / "straight") and len(card_row(out)) == 1  # the card shows the same


def test_the_final_loss_is_of_the_runs_last_steps_whichever_session_trained_them(
    bert_path, toy_dictionary, tmp_path, monkeypatch
) -> None:
    from dictembed import training

    monkeypatch.setattr(training, "FINAL_LOSS_STEPS", 4)
    straight, _ = _trainer(bert_path, toy_dictionary, tmp_path / "straight")
    losses = straight.fit()
    killed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    killed.fit(max_steps=6)
    saved = json.loads((tmp_path / "run" / "checkpoint" / "run.json").read_text())
    assert saved["losses"] == losses[2:6]  # the last 4 steps' losses, in the checkpoint's JSON
    resumed, _ = _trainer(bert_path, toy_dictionary, tmp_path / "run")
    assert len(resumed.fit(resume=True)) == 2  # steps 7 and 8: the last 4 steps span both sessions
    assert len(losses) == 8 and resumed.final_loss == straight.final_loss == pytest.approx(sum(losses[-4:]) / 4)


def test_throughput_counts_the_examples_a_step_holds_not_the_batch_size(
    bert_path, toy_dictionary, tmp_path, monkeypatch
) -> None:
    """`--batch-size 10000` over a dozen examples logged and recorded steps x 10000 examples per second."""
    import itertools

    from dictembed import training

    encoder = Encoder.load(str(bert_path), pooling="mean", device="cpu")
    space = WordEmbeddingSpace.from_encoder(encoder, toy_dictionary.headwords)
    examples = entry_examples(toy_dictionary, space)
    n = len(examples)
    for batch_size, steps in ((10000, 2), (n - 1, 4)):  # one batch an epoch; a full batch and one of 1 example
        clock = itertools.count()  # one second between the trainer's readings of the clock
        monkeypatch.setattr(training, "time", types.SimpleNamespace(time=lambda ticks=clock: float(next(ticks))))
        settings = TrainSettings(lr=1e-3, batch_size=batch_size, epochs=2, seed=7, log_every=1)
        run_dir = tmp_path / f"batch{batch_size}"
        trainer = Trainer(EntryPrediction(encoder, space), examples, entry_collate(encoder), settings, run_dir)
        trainer.fit()
        assert trainer.total_steps == steps and trainer.trained_examples == 2 * n
        assert trainer.throughput == 2 * n / steps  # the examples of `steps` steps over `steps` seconds
        logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
        assert logged[-1]["step"] == steps and logged[-1]["examples_per_s"] == trainer.throughput


def test_resuming_after_the_dictionary_file_changed_says_so(bert_path, toy_tsv, tmp_path, monkeypatch) -> None:
    """The key `sources.dictionary mine.tsv` was split at its file name's dot: the error said `was None, now None`."""
    table = tmp_path / "mine.tsv"
    shutil.copyfile(toy_tsv, table)
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        train(_config(bert_path, str(table), tmp_path / "out"))
    monkeypatch.undo()
    table.write_text(table.read_text() + "zebra\ta striped wild horse of Africa\n")
    with pytest.raises(DictEmbedError, match="another configuration") as refused:
        train(_config(bert_path, str(table), tmp_path / "out", resume=True))
    assert "(the content of dictionary file mine.tsv changed: its SHA-256 differs; " in str(refused.value)
    assert "None" not in str(refused.value)


def test_changed_settings_names_files_by_their_whole_name() -> None:
    from dictembed.training import changed_settings

    saved = {"sources": {"model model.safetensors": "a", "dictionary old.tsv": "c"}, "x.y": 1, "lr": 0.1}
    now = {"sources": {"model model.safetensors": "b", "dictionary new.tsv": "d"}, "x.y": 2, "lr": 0.1}
    assert changed_settings(saved, now, most=5) == (
        " (dictionary file new.tsv is new to the run; dictionary file old.tsv is no longer part of the run; "
        "the content of model weights file model.safetensors changed: its SHA-256 differs; x.y was 1, now 2)"
    )
    assert changed_settings({"lr": 0.1}, {"lr": 0.1, "sources": {"dictionary a.tsv": "e"}}) == (
        " (dictionary file a.tsv is new to the run)"
    )


def test_learning_rates_beyond_six_digits_train_in_folders_of_their_own(bert_path, toy_tsv, tmp_path) -> None:
    """`--lr-grid 1e-3,1.0000001e-3` trained both rates in `lr0.001-seed0`: the published record's lr was the one
    trained last, selection's best_lr maybe the other."""
    from dictembed.output_folder import runs_root
    from dictembed.recipes.run import lr_name

    for lr in (1e-4, 2e-5, 5e-5, 1e-3, 4e-5, 3e-3):  # the names of the runs folders made so far stay
        assert lr_name(lr) == f"{lr:g}" == repr(lr)
    out = train(_config(bert_path, toy_tsv, tmp_path / "out", lrs=[1e-3, 1.0000001e-3]))
    folders = {p.name for p in runs_root(out).rglob("lr*-seed0")}
    assert folders == {"lr0.001-seed0", "lr0.0010000001-seed0"}
    record = read_record(out, required=True)
    assert record.lr == record.selection["best_lr"] and set(record.selection["by_lr"]) == {"0.001", "0.0010000001"}
