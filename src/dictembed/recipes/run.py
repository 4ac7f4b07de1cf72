"""The one run loop every method shares, and the `Recipe` interface a method implements.

`train(config)`: for each stage of the method (one, or one per PST step), train every (lr, seed) pair,
reuse a finished run only when its saved record says it was trained with the same configuration, select
the learning rate by its mean dev metric over seeds, then publish the best run to `config.output`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from torch import nn

from dictembed.backends.onnx.export import write_query_graph
from dictembed.cache import cache_folder
from dictembed.device_choices import is_main_process
from dictembed.devices import wait_for_everyone
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace, EntrySpace
from dictembed.entry_vectors import headword_vectors, int8_build
from dictembed.errors import DictEmbedError
from dictembed.evaluation._common import mean_sd
from dictembed.evaluation.sts_multi import load_sts_dev
from dictembed.io import staged_dir
from dictembed.model_card import write_model_card
from dictembed.model_folder import links_outside, read_record, write_definitions, write_record
from dictembed.output_folder import check_outside, check_run_output, runs_root
from dictembed.recipes.options import MethodOptions
from dictembed.recipes.papers import Paper
from dictembed.record import RunRecord, file_sha256
from dictembed.run_changes import setting_changes
from dictembed.search_index import write_search_index
from dictembed.search_options import saved_ranking
from dictembed.second_dictionary import SecondDefinitions
from dictembed.training import Trainer, TrainSettings, checkpoint_dir

if TYPE_CHECKING:
    from dictembed.recipes.config import RunConfig

log = logging.getLogger(__name__)


@dataclass
class Stage:
    """What every (lr, seed) run of one grid shares."""

    root: Path  # the runs of this stage are `root/<prefix>lr<lr>-seed<seed>`
    select_on: str
    data: dict[str, Any] = field(default_factory=dict)  # the method's data: splits, triplets
    space: EntrySpace | None = None
    record: dict[str, Any] = field(default_factory=dict)  # RunRecord fields every run of the stage shares
    fingerprint: str = ""  # identifies what the stage feeds every run (the entry space), for reuse
    prefix: str = ""


@dataclass
class Built:
    """One run's trainable objective, its examples and their collate function, and what dev scoring needs."""

    objective: nn.Module
    examples: list[Any]
    collate: Callable[[list[Any]], Any]
    state: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # counts recorded in the RunRecord
    lengths: list[int] | None = None  # one per example, for batches grouped by length


@dataclass
class RunResult:
    """One trained encoder of the grid and its dev metrics."""

    path: Path
    lr: float
    seed: int
    dev: dict[str, float]
    throughput: float | None = None


class Recipe(ABC):
    """A method: its paper, its options and presets, the settings its model card shows, and how to set up,
    train and save a run. The `paper` preset is the options' defaults with `defaults`; `best` changes it."""

    name: ClassVar[str]
    paper: ClassVar[Paper]
    options: ClassVar[type[MethodOptions]]
    defaults: ClassVar[dict[str, Any]]  # the method's values of the shared options left None in RunConfig
    best: ClassVar[dict[str, Any]] = {}  # the `best` preset, as changes to the paper's settings
    card_keys: ClassVar[tuple[str, ...]] = ()  # the method's own options its model card shows
    select_choices: ClassVar[tuple[str, ...]] = ("mrr", "top1", "top3", "top10", "stsb_dev")  # dev metrics
    publishes_history: ClassVar[bool] = False  # record every stage's selection under selection["pst"]

    def steps(self, config: RunConfig) -> int:
        """How many stages (grids) the method trains in sequence."""
        return 1

    @abstractmethod
    def stage(self, config: RunConfig, step: int, before: Stage | None, best: RunResult | None) -> Stage:
        """Stage `step` (1-based), given the previous stage and its selected run."""

    @abstractmethod
    def build(self, config: RunConfig, stage: Stage, seed: int) -> Built:
        """A fresh objective and the training examples of one run."""

    @abstractmethod
    def extract(self, config: RunConfig, built: Built, objective: nn.Module) -> Encoder:
        """The sentence encoder inside the trained objective."""

    @abstractmethod
    def dev_metrics(self, config: RunConfig, stage: Stage, built: Built, encoder: Encoder) -> dict[str, float]:
        """The dev figures of a trained run (selection reads `stage.select_on` among them)."""

    def save(
        self, stage: Stage, built: Built, encoder: Encoder, folder: Path, record: RunRecord, cache_dir: Path
    ) -> None:
        """Save the trained run: the encoder with its record, the stage's entry space, the definitions of its
        dictionary and the search index (`save_model_folder`; the headword vectors' parts in `cache_dir`)."""
        dictionary = stage.data.get("dictionary")
        second = stage.data.get("second")
        save_model_folder(
            folder,
            encoder,
            record,
            stage.space,
            dictionary if isinstance(dictionary, Dictionary) else None,
            cache_dir,
            second if isinstance(second, SecondDefinitions) else None,
        )


def save_model_folder(
    folder: Path,
    encoder: Encoder,
    record: RunRecord,
    space: EntrySpace | None,
    dictionary: Dictionary | None,
    cache_dir: str | Path | None = None,
    second: SecondDefinitions | None = None,
) -> None:
    """Write a model folder: the encoder with its record, and with an entry space the space, the definitions of
    its `dictionary` beside it (so the folder serves as a reverse dictionary from anywhere) and its search index.
    A plain definition space is saved with its headword vectors, encoded by `encoder` (the query encoder) as a
    description is (`entry_vectors.headword_vectors`, their parts kept in the entry-space cache `cache_dir`,
    default: `cache.default_cache_dir()`, until saved), and with `second` a second dictionary's definitions of its
    words (`second_dictionary`). A space whose vectors were built on the int8 graph
    (`$DICTEMBED_BUILD_BACKEND=int8`) is said so in the record's details (`entry_build`)."""
    if isinstance(space, DefinitionSpace) and space.entries is not None and int8_build(encoder, space.entries):
        record.details["entry_build"] = "onnx-int8"
    if second is not None and space is not None:
        entries, definitions = int((second.counts > 0).sum()), len(second.definitions)
        record.details["second_dictionary"] = {"name": second.name, "definitions": definitions, "entries": entries}
    encoder.save(folder, record, overwrite=True)  # the run's own folder (`save_run`)
    if space is not None:
        if isinstance(space, DefinitionSpace) and space.headwords is None and not space.is_ica:
            space = space.with_headwords(headword_vectors(encoder, space.words, cache_dir=cache_dir))
        space.save(folder)
        if second is not None:
            second.save(folder)
        if dictionary is not None:
            write_definitions(folder, dictionary)
        write_search_index(folder, dictionary)


def save_run(
    recipe: Recipe, stage: Stage, built: Built, encoder: Encoder, folder: Path, record: RunRecord, cache_dir: Path
) -> None:
    """`recipe.save` into `folder`, staged beside it and renamed into place whole (`staged_dir`): a save that fails
    (a full disk) or is killed (SIGTERM, power) leaves no `folder` whose record a later run would reuse as finished,
    only a staging folder the next save clears, and the run's checkpoint, which it resumes from. A failure of the
    disk is an OSError naming `folder`."""
    with staged_dir(folder, owned=True) as staging:
        recipe.save(stage, built, encoder, staging, record, cache_dir)


def train_settings(config: RunConfig, lr: float, seed: int) -> TrainSettings:
    """The Trainer's settings of one (lr, seed) run."""
    return TrainSettings(
        lr=lr,
        batch_size=config.batch_size,
        epochs=config.epochs,
        warmup_ratio=config.warmup_ratio,
        seed=seed,
        checkpoint_every=config.checkpoint_every,
        grad_accum=config.grad_accum,
        group_by_length=config.group_by_length,
    )


def space_fingerprint(space: EntrySpace) -> str:
    """A hash of an entry space's words and tensors (what a run trained against)."""
    digest = hashlib.sha1("\n".join(space.words).encode())
    for name, tensor in sorted(space._tensors().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(-1).numpy().tobytes())
    digest.update(space.kind.encode())
    return digest.hexdigest()[:16]


def run_identity(config: RunConfig, stage: Stage, lr: float, seed: int) -> dict[str, Any]:
    """What determines one run's weights and dev figures: the run options, lr, seed, the stage, and the content
    of the local files the options name by path only (`source_prints`: a dictionary file edited, or a model
    folder's weights changed, at the same path trains anew instead of reusing or resuming a run)."""
    identity = {**config.run_identity(), "lr": lr, "seed": seed, "stage": stage.fingerprint}
    if prints := source_prints(config):
        identity["sources"] = prints
    return json.loads(json.dumps(identity))


def source_prints(config: RunConfig) -> dict[str, str]:
    """The SHA-256 of each local dictionary file and `--descriptions` file, and of a local model folder's weights, by
    name (a `--second-dictionary` file's definitions are in the stage's fingerprint)."""
    prints: dict[str, str] = {}
    files = [("dictionary", part) for part in str(config.dictionary or "").split(",")]
    files.append(("descriptions", str(getattr(config.options, "descriptions", None) or "")))
    for setting, part in files:
        if Path(part.strip()).is_file():
            prints[f"{setting} {Path(part.strip()).name}"] = _content_print(Path(part.strip()))
    model = Path(str(config.model)) if config.model else None
    if model is not None and model.is_dir():
        for weights in sorted(model.glob("*.safetensors")):
            prints[f"model {weights.name}"] = _content_print(weights)
    return prints


_prints: dict[tuple[str, int, int], str] = {}  # a file's path, size and time -> its SHA-256, hashed once


def _content_print(path: Path) -> str:
    """`file_sha256` of `path`, computed once per state of the file in this process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _prints:
        _prints[key] = file_sha256(path) or ""
    return _prints[key]


def finished_run(run_dir: Path, identity: dict[str, Any]) -> RunResult | None:
    """The saved result of a run that finished with the same configuration; None (and the reason logged)
    when there is none or it was trained differently, so the run is trained again."""
    record = read_record(run_dir / "model")
    if not record.exists:
        return None
    if checkpoint_dir(run_dir).exists():  # kept until the run is saved whole: an earlier version's save cut short
        log.warning("%s was not saved whole (its checkpoint is still there): it is not reused", run_dir / "model")
        return None
    if record.run != identity:
        changed = setting_changes(record.run, identity) if record.run else ["(no saved run configuration)"]
        log.warning("retraining %s: its saved configuration differs in %s", run_dir, ", ".join(changed))
        return None
    log.info("reusing finished run %s", run_dir / "model")
    # `train_run` saved this record (its `run` is this identity), with the run's lr and seed
    lr, seed = cast(float, record.lr), cast(int, record.seed)
    return RunResult(run_dir / "model", lr, seed, record.dev, record.throughput)


def lr_name(lr: float) -> str:
    """A learning rate as its run folder names it: `{lr:g}` (the names of runs made so far), unless that rounds it
    (beyond 6 significant digits), then its shortest exact form (`repr`): two rates of a grid never share a folder."""
    short = f"{lr:g}"
    return short if float(short) == lr else repr(float(lr))


def train_run(recipe: Recipe, config: RunConfig, stage: Stage, lr: float, seed: int) -> RunResult:
    """Train one (lr, seed) run of a stage, score it on dev and save it; reuse it when already finished."""
    run_dir = stage.root / f"{stage.prefix}lr{lr_name(lr)}-seed{seed}"
    identity = run_identity(config, stage, lr, seed)
    if (done := finished_run(run_dir, identity)) is not None:
        return done
    built = recipe.build(config, stage, seed)
    settings = train_settings(config, lr, seed)
    place = {"device": config.device, "precision": config.precision}
    if settings.group_by_length and built.lengths is None:
        log.warning("%s does not group batches by length; --group-by-length is ignored", config.method)
        settings.group_by_length = False
    trainer = Trainer(
        built.objective, built.examples, built.collate, settings, run_dir, identity, lengths=built.lengths, **place
    )
    trainer.fit(resume=config.resume, keep_final=True)  # kept until the run is saved
    encoder = recipe.extract(config, built, trainer.unwrapped)
    log.info("lr=%s seed=%d: scoring the dev sets", lr_name(lr), seed)
    dev = recipe.dev_metrics(config, stage, built, encoder)
    record = RunRecord(
        method=config.method,
        base_model=config.model,
        config=config.to_dict(),
        run=identity,
        lr=lr,
        seed=seed,
        data=config.dictionary,
        dev=dev,
        # the whole run's, however many processes trained it (`Trainer.throughput`, `Trainer.final_loss`): a resumed
        # run records the final loss an uninterrupted one does, and examples/s over all the steps its processes trained
        throughput=trainer.throughput,
        train_examples=len(built.examples),
        final_loss=trainer.final_loss,
        details=built.details,
        **stage.record,
    )
    record.ranking = saved_ranking(bool(built.details.get("descriptions")))
    if is_main_process():  # under a distributed launch every process holds the same weights
        save_run(recipe, stage, built, encoder, run_dir / "model", record, cache_folder(config.cache_dir))
    wait_for_everyone()
    trainer.discard_checkpoints()
    log.info("lr=%s seed=%d dev=%s", lr_name(lr), seed, dev)
    return RunResult(run_dir / "model", lr, seed, dev, trainer.throughput)


def select(results: list[RunResult], key: str) -> tuple[RunResult, dict[str, Any]]:
    """The best learning rate by mean dev `key` over seeds, its best seed, and mean ± sd per lr."""
    by_lr: dict[float, list[RunResult]] = {}
    for r in results:
        by_lr.setdefault(r.lr, []).append(r)
    summary = {
        str(lr): {k: dict(zip(("mean", "sd"), mean_sd([r.dev[k] for r in runs]), strict=True)) for k in runs[0].dev}
        for lr, runs in by_lr.items()
    }
    best_lr = max(by_lr, key=lambda lr: cast(float, summary[str(lr)][key]["mean"]))  # only the sd may be None
    best = max(by_lr[best_lr], key=lambda r: r.dev[key])
    return best, {"selected_on": key, "best_lr": best_lr, "best_seed": best.seed, "by_lr": summary}


def publish(best: RunResult, summary: dict[str, Any], output: str | Path) -> Path:
    """Copy the selected model to `output` (atomically), with the grid summary added to its record and card, and
    for a reverse dictionary its query graph (`write_query_graph`). The published record names no path of this
    machine (`RunRecord.portable`); the run folders keep the real ones. A link in the run's folder that leads
    outside it is refused: the copy would take in the file it names; so is an `output` that came to hold anything
    but a model while the run trained (`check_run_output`: a user's files are never replaced)."""
    if outside := links_outside(Path(best.path)):
        raise DictEmbedError(f"{outside[0]}: a link leading outside the run's model folder; remove it to publish")
    check_run_output(output, overwrite=True)  # files put there while it trained stay (the start checked --overwrite)
    with staged_dir(output) as staging:
        shutil.copytree(best.path, staging, dirs_exist_ok=True)
        record = read_record(staging, required=True)
        record.selection = summary
        record = record.portable(output)
        write_record(staging, record)
        write_model_card(staging, record, name=Path(output).name)
        write_query_graph(staging)
    return Path(output)


@contextmanager
def output_lock(output: str | Path) -> Iterator[None]:
    """Hold `<output>-runs/train.lock` for the run: a second `train` into the same output refuses at once
    (the operating system releases the lock of a killed process). A run that made the runs folder and leaves
    nothing else in it (it failed before training: a missing extra, a bad dictionary) removes the folder."""
    from filelock import FileLock, Timeout

    path = runs_root(output) / "train.lock"
    made = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise DictEmbedError(
            f"another dictembed train is writing to {output} (lock {path}); wait for it or choose another --output"
        ) from None
    try:
        yield
    finally:
        lock.release()
        if made and [p.name for p in path.parent.iterdir()] == [path.name]:
            path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another run may have begun writing there meanwhile
                path.parent.rmdir()


def check_dev_data(config: RunConfig) -> None:
    """Read the STS-B dev split that every recipe scores its runs on (`stsb_dev`) before anything loads or trains:
    a missing data folder or file fails in seconds, not after the training."""
    try:
        load_sts_dev(config.dev_language)
    except DictEmbedError as err:
        raise DictEmbedError(f"train scores each run on the STS-B dev split: {err}") from None


def train(config: RunConfig) -> Path:
    """Train `config.method` over its stages and its lr x seed grid, select and publish; returns the output."""
    check_dev_data(config)
    if not is_main_process():  # a distributed launch's other processes train; the main one guards and writes
        return _train(config)
    for written in (config.output, runs_root(config.output)):
        check_outside(written, config.model)  # a model trained into the folder it starts from, or over it
    check_run_output(config.output, config.overwrite)  # before anything is written
    with output_lock(config.output):
        check_run_output(config.output, config.overwrite)  # again: another run may have published meanwhile
        return _train(config)


def _train(config: RunConfig) -> Path:
    recipe = config.recipe
    stage = best = None
    history: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for step in range(1, recipe.steps(config) + 1):
        stage = recipe.stage(config, step, stage, best)
        results = [train_run(recipe, config, stage, lr, seed) for lr in config.lrs for seed in config.seeds]
        best, summary = select(results, stage.select_on)
        history.append({"step": step, "path": str(best.path), **summary})
    assert best is not None
    if recipe.publishes_history:
        summary = {**summary, "pst": history}
    if is_main_process():
        publish(best, summary, config.output)
    wait_for_everyone()
    return Path(config.output)
