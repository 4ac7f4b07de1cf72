"""What every recipe shares: the run configuration, data preparation, one training run with its dev
evaluation, and selection over the learning-rate x seed grid."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dictembed.dictionary import load_dictionary, seeded_sample, split_by_headword
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace
from dictembed.model_card import write_model_card
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.paths import default_model
from dictembed.record import read_record, record_path, write_record
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.training import Trainer, TrainSettings

log = logging.getLogger(__name__)


@dataclass
class RunConfig:
    """Everything that defines a training run; saved into every model's dictembed.json."""

    method: str = "defsent"
    model: str = field(default_factory=default_model)
    pooling: str = "mean"
    pooler: str = "none"  # "none" or "model" (BERT pooler; RoBERTa lm_head.dense + GELU)
    space: str = "auto"  # DefSent: auto | mlm-head | word-embeddings
    entries: str = "ac"  # DefSent+: ac | amp
    pst_steps: int = 1
    ica: str = "none"  # none | last
    arch: str = "mt"  # GR-BERT: mt (one context encoder) | sc (two context encoders)
    gloss_weight: float = 2.0  # GR-BERT lambda
    temperature: float = 0.05  # GR-BERT InfoNCE tau; also the tau of cosine entry logits
    similarity: str = "dot"  # DefSent+ entry logits: dot (the paper) | cosine (cos / temperature)
    dictionary: str = "wordnet"
    wordnet_dir: str | None = None
    split_seed: int = 0
    seeds: list[int] = field(default_factory=lambda: [0])
    lrs: list[float] = field(default_factory=lambda: [2e-5])
    batch_size: int = 16
    epochs: int = 1
    warmup_ratio: float = 0.1
    max_length: int = 128
    limit: int | None = None
    dev_limit: int | None = 2000
    select_on: str = "mrr"  # mrr (DefSent) | stsb_dev (DefSent+)
    output: str = "outputs/model"
    checkpoint_every: int = 500
    resume: bool = False
    cache_dir: str | None = None
    preset: str | None = None  # the command line's --preset these settings were resolved from (None: set directly)

    def settings(self, lr: float, seed: int) -> TrainSettings:
        return TrainSettings(
            lr=lr,
            batch_size=self.batch_size,
            epochs=self.epochs,
            warmup_ratio=self.warmup_ratio,
            seed=seed,
            checkpoint_every=self.checkpoint_every,
        )


@dataclass
class RunResult:
    """One trained encoder of the grid and its dev metrics."""

    path: Path
    lr: float
    seed: int
    dev: dict[str, float]
    throughput: float | None = None


def load_splits(config: RunConfig) -> tuple[Dictionary, dict[str, Dictionary]]:
    """The merged dictionary and its seeded 8:1:1 split by headword."""
    dictionary = load_dictionary(config.dictionary, wordnet_dir=config.wordnet_dir)
    return dictionary, split_by_headword(dictionary, seed=config.split_seed)


def dev_metrics(encoder: Encoder, space: EntrySpace, dev: Dictionary, config: RunConfig) -> dict[str, float]:
    """Reverse-dictionary MRR/top-k on dev headwords and STS-B dev Spearman x 100."""
    from dictembed.evaluation.reverse_dictionary import reverse_dictionary_metrics
    from dictembed.evaluation.sts import evaluate_stsb_dev

    ranks = ReverseDictionary(encoder, space).ranks(dev, limit=config.dev_limit)
    metrics = {k: float(v) for k, v in reverse_dictionary_metrics(ranks).items()}
    metrics["stsb_dev"] = float(evaluate_stsb_dev(encoder))
    return metrics


def finished_run(run_dir: Path, lr: float, seed: int) -> RunResult | None:
    """The saved result of a run that already finished (a rerun reuses it instead of training again)."""
    model_dir = run_dir / "model"
    if record_path(model_dir) is None:
        return None
    saved = read_record(model_dir)
    log.info("reusing finished run %s", model_dir)
    return RunResult(model_dir, lr, seed, saved["dev"], saved.get("throughput"))


def train_one(
    make_encoder: Callable[[], Encoder],
    space: EntrySpace,
    train: Dictionary,
    dev: Dictionary,
    config: RunConfig,
    lr: float,
    seed: int,
    run_dir: Path,
    extra: dict[str, Any],
) -> RunResult:
    """Train a fresh encoder against `space`, evaluate on dev, save it; reuse a finished save on rerun."""
    if (done := finished_run(run_dir, lr, seed)) is not None:
        return done
    model_dir = run_dir / "model"
    encoder = make_encoder()
    examples = seeded_sample(entry_examples(train, space), config.limit, seed)
    objective = EntryPrediction(encoder, space)
    trainer = Trainer(objective, examples, entry_collate(encoder), config.settings(lr, seed), run_dir)
    losses = trainer.fit(resume=config.resume or (run_dir / "checkpoint").exists())
    encoder = trainer.unwrapped.encoder
    dev_result = dev_metrics(encoder, space, dev, config)
    info = {
        **extra,
        "lr": lr,
        "seed": seed,
        "dev": dev_result,
        "throughput": trainer.throughput,
        "train_examples": len(examples),
        "final_loss": float(np.mean(losses[-50:])) if losses else None,
        "config": asdict(config),
    }
    encoder.save(model_dir, info)
    space.save(model_dir)
    log.info("lr=%g seed=%d dev=%s", lr, seed, dev_result)
    return RunResult(model_dir, lr, seed, dev_result, trainer.throughput)


def select(results: list[RunResult], key: str) -> tuple[RunResult, dict[str, Any]]:
    """The best learning rate by mean dev `key` over seeds, its best seed, and mean ± sd per lr."""
    by_lr: dict[float, list[RunResult]] = {}
    for r in results:
        by_lr.setdefault(r.lr, []).append(r)
    summary = {}
    for lr, runs in by_lr.items():
        summary[str(lr)] = {
            k: {
                "mean": statistics.fmean(r.dev[k] for r in runs),
                "sd": statistics.stdev(r.dev[k] for r in runs) if len(runs) > 1 else 0.0,
            }
            for k in runs[0].dev
        }
    best_lr = max(by_lr, key=lambda lr: summary[str(lr)][key]["mean"])
    best = max(by_lr[best_lr], key=lambda r: r.dev[key])
    return best, {"selected_on": key, "best_lr": best_lr, "best_seed": best.seed, "by_lr": summary}


def run_grid(
    make_encoder: Callable[[], Encoder],
    space: EntrySpace,
    splits: dict[str, Dictionary],
    config: RunConfig,
    root: Path,
    extra: dict[str, Any],
) -> tuple[RunResult, dict[str, Any]]:
    """Train every (lr, seed) pair of the config against one frozen space and select the best."""
    results = [
        train_one(
            make_encoder,
            space,
            splits["train"],
            splits["dev"],
            config,
            lr,
            seed,
            root / f"lr{lr:g}-seed{seed}",
            extra,
        )
        for lr in config.lrs
        for seed in config.seeds
    ]
    return select(results, config.select_on)


def publish(best: RunResult, summary: dict[str, Any], output: str | Path) -> Path:
    """Copy the selected model to `output` (atomically), with the grid summary added to dictembed.json."""
    import shutil

    from dictembed.encoder import replace_dir

    output = Path(output)
    staging = output.with_name(output.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(best.path, staging)
    config = read_record(staging)
    config["selection"] = summary
    write_record(staging, config)
    write_model_card(staging, config)  # with the selection and the entry space saved beside it
    replace_dir(staging, output)
    return output
