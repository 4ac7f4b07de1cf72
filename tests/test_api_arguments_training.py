"""`RunConfig`'s settings, each held to its type and the range training needs, on every path a configuration is made
by (`RunConfig.create`, a saved configuration read back, the command line's resolution), in one line naming it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dictembed.errors import DictEmbedError
from dictembed.recipes.config import RunConfig
from dictembed.recipes.resolve import ConfigError, resolve_train_config


@pytest.mark.parametrize(
    ("method", "name", "value"),
    [
        ("defsent-plus", "batch_size", 0),
        ("defsent-plus", "batch_size", -1),
        ("defsent-plus", "batch_size", "16"),
        ("defsent-plus", "batch_size", 2.5),
        ("defsent-plus", "batch_size", True),
        ("defsent-plus", "lrs", 1e-4),
        ("defsent-plus", "lrs", ["x"]),
        ("defsent-plus", "lrs", [-1.0]),
        ("defsent-plus", "lrs", [float("nan")]),
        ("defsent-plus", "lrs", []),
        ("defsent-plus", "seeds", "0,1"),
        ("defsent-plus", "seeds", [-1]),
        ("defsent-plus", "seeds", []),
        ("defsent-plus", "limit", 0),
        ("defsent-plus", "limit", -5),
        ("defsent-plus", "limit", "50"),
        ("defsent-plus", "limit", 50.5),
        ("defsent-plus", "epochs", 0),
        ("defsent-plus", "epochs", -1),
        ("defsent-plus", "warmup_ratio", 2.0),
        ("defsent-plus", "warmup_ratio", -0.5),
        ("defsent-plus", "entry_temperature", 0),
        ("defsent-plus", "entry_temperature", -1),
        ("defsent-plus", "pst_steps", 0),
        ("defsent-plus", "description_ratio", float("inf")),
        ("defsent-plus", "grad_accum", 0),
        ("defsent-plus", "checkpoint_every", 0),
        ("defsent-plus", "dev_limit", 0),
        ("defsent-plus", "headwords", 0),
        ("defsent-plus", "headwords", -3),
        ("defsent-plus", "split_seed", -1),
        ("defsent-plus", "split_seed", "0"),
        ("defsent-plus", "max_length", 0),
        ("defsent-plus", "model", None),
        ("defsent-plus", "model", ""),
        ("defsent-plus", "dictionary", 5),
        ("defsent-plus", "dictionary", ""),
        ("defsent-plus", "output", None),
        ("defsent-plus", "output", ""),
        ("defsent-plus", "group_by_length", "no"),
        ("defsent-plus", "resume", 1),
        ("defsent-plus", "overwrite", "yes"),
        ("defsent-plus", "encoding", "no-such-codec"),
        ("defsent-plus", "columns", "word"),
        ("defsent-plus", "dev_language", "xx"),
        ("gr-bert", "gloss_temperature", 0.0),
        ("gr-bert", "gloss_weight", -1.0),
    ],
)
def test_a_setting_training_cannot_use_is_refused_naming_it(method: str, name: str, value: object) -> None:
    with pytest.raises(DictEmbedError, match=rf"^{method}: {name}\b") as info:
        RunConfig.create(method, **{name: value})
    assert repr(value) in str(info.value) and "\n" not in str(info.value)


def test_a_saved_configuration_is_held_to_the_same() -> None:
    """`--config` and a record's configuration are read by `from_dict`: a hand-edited value is refused too."""
    saved = RunConfig.create("defsent-plus").to_dict()
    assert RunConfig.from_dict(saved).batch_size == 16
    with pytest.raises(DictEmbedError, match="checkpoint_every must be a whole number >= 1, got 0"):
        RunConfig.from_dict(saved | {"checkpoint_every": 0})


def test_a_saved_configuration_names_what_this_version_does_not_know(tmp_path) -> None:
    """A typo in a hand-edited `--config` file was left out silently and the run went on without it."""
    from dictembed.recipes.resolve import saved_config

    saved = RunConfig.create("defsent-plus").to_dict()
    assert RunConfig.from_dict(saved | {"lrr": [1e-3]}).lrs == saved["lrs"]  # a record is read as far as it goes
    with pytest.raises(DictEmbedError, match=r"^no setting is named 'lrr'$"):
        RunConfig.from_dict(saved | {"lrr": [1e-3]}, strict=True)
    with pytest.raises(DictEmbedError, match=r"^defsent-plus has no option 'entriez'$"):
        RunConfig.from_dict(saved | {"options": saved["options"] | {"entriez": "ac"}})
    version_1 = {"method": "defsent-plus", "entries": "amp", "temperature": 0.2}  # one tau, read as the two
    assert RunConfig.from_dict(version_1, strict=True).options.entry_temperature == 0.2
    path = tmp_path / "my-run.json"
    path.write_text(json.dumps({"config": saved | {"preset": "fast"}}))
    with pytest.raises(DictEmbedError, match=r"my-run\.json: .*the preset 'fast' is not one of paper, best$"):
        saved_config(path)


def test_a_preset_beside_a_saved_configuration_is_refused(tmp_path) -> None:
    """`train --config X --preset paper` ran X's own settings as if the preset had not been given."""
    saved = RunConfig.create("defsent-plus", lrs=[3e-4]).to_dict()
    (tmp_path / "run.json").write_text(json.dumps({"config": saved}))
    resolved = resolve_train_config(None, None, {}, output="out", saved=tmp_path / "run.json")
    assert resolved.config.preset is None and resolved.config.lrs == [3e-4]
    with pytest.raises(ConfigError, match="preset paper: the saved configuration keeps its own settings"):
        resolve_train_config(None, "paper", {}, output="out", saved=tmp_path / "run.json")
    assert resolve_train_config(None, None, {}, output="out").config.preset == "best"  # the default preset


def test_an_epoch_count_past_any_training_is_refused() -> None:
    assert RunConfig.create("defsent-plus", epochs=1000).epochs == 1000
    with pytest.raises(DictEmbedError, match="epochs must be a whole number >= 1 and <= 1000, got 10000"):
        RunConfig.create("defsent-plus", epochs=10_000)


def test_the_command_line_resolution_reports_it_as_a_usage_error() -> None:
    with pytest.raises(ConfigError, match=r"warmup_ratio must be a number >= 0 and <= 1, got 2\.0"):
        resolve_train_config("defsent-plus", "paper", {"warmup_ratio": 2.0}, output="out")


def test_the_batch_must_split_into_the_accumulated_micro_batches() -> None:
    with pytest.raises(DictEmbedError, match="batch_size 16 does not split into grad_accum=3"):
        RunConfig.create("defsent-plus", grad_accum=3)
    assert RunConfig.create("defsent-plus", grad_accum=4).grad_accum == 4


def test_documented_values_pass_and_numbers_are_kept_plain() -> None:
    config = RunConfig.create(
        "defsent-plus",
        batch_size=np.int64(8),
        lrs=(1, 2e-5),
        seeds=[np.int32(0), 3],
        headwords=None,
        limit=None,
        dev_limit=None,
        warmup_ratio=0,
        split_seed=0,
        description_ratio=0,
        descriptions="none",
    )
    assert type(config.batch_size) is int and config.batch_size == 8
    assert config.lrs == [1.0, 2e-5] and all(type(lr) is float for lr in config.lrs)
    assert config.seeds == [0, 3] and all(type(seed) is int for seed in config.seeds)
    assert (config.headwords, config.limit, config.dev_limit, config.warmup_ratio) == (None, None, None, 0.0)
    assert config.options.descriptions == ""  # "none": no corpus, as the command line reads it


def test_a_run_that_fails_before_training_leaves_no_runs_folder(bert_path, tmp_path) -> None:
    from dictembed.cli import main

    bad = tmp_path / "bad.tsv"
    bad.write_text("word\tdefinition\ndog\ta pet\ncat\n", encoding="utf-8")
    output = tmp_path / "out"
    argv = ["train", "--model", str(bert_path), "--dictionary", str(bad), "--output", str(output), "-q"]
    assert main(argv) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tsv"]  # neither out nor out-runs (its train.lock)


def test_publish_refuses_a_link_leading_outside_the_run(saved_bert, tmp_path) -> None:
    import shutil

    import pytest

    from dictembed.errors import DictEmbedError
    from dictembed.recipes.run import RunResult, publish

    run = tmp_path / "run"
    shutil.copytree(saved_bert, run)
    secret = tmp_path / "secret.txt"
    secret.write_text("not the model's", encoding="utf-8")
    (run / "notes.txt").symlink_to(secret)
    with pytest.raises(DictEmbedError, match="notes.txt: a link leading outside the run's model folder"):
        publish(RunResult(run, 1e-3, 0, {}), {}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_seeds_and_rates_as_a_range_or_an_array() -> None:
    import numpy as np

    from dictembed.recipes.config import RunConfig

    config = RunConfig.create("defsent-plus", seeds=range(2), lrs=np.array([1e-4, 2e-5]), output="out")
    assert config.seeds == [0, 1] and config.lrs == [1e-4, 2e-5]
    assert type(config.lrs[0]) is float


@pytest.mark.parametrize(("setting", "values"), [("lrs", [1e-3, 0.001]), ("seeds", [0, 0]), ("seeds", [2, 1, 2])])
def test_a_value_listed_twice_is_refused_as_the_command_line_refuses_it(setting, values) -> None:
    """The Python API trained a repeated rate or seed once and counted it twice in the selection."""
    with pytest.raises(DictEmbedError, match=f"^defsent-plus: {setting} lists .* more than once; give each value"):
        RunConfig.create("defsent-plus", **{setting: values})
    assert getattr(RunConfig.create("defsent-plus", **{setting: sorted(set(values))}), setting) == sorted(set(values))
