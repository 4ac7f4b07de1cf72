"""GR-BERT (Lin et al., 2022): masked language modelling regularised by matching words in context to
their glosses, in the MT (one context encoder) or SC (two context encoders) architecture.

Data: (word, example sentence, gloss) triplets of every dictionary whose senses carry examples, split by
headword 8:1:1 (train / held-out dev). The kept masked LM is saved with its head (lexical substitution
reads it) and first-last-average pooling (STS reads that).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from transformers import AutoTokenizer

from dictembed.dictionary import seeded_sample
from dictembed.dictionary.triplets import Triplet, TripletReport, build_triplets
from dictembed.encoder import Encoder, load_pretrained
from dictembed.errors import DictEmbedError
from dictembed.objectives.gloss_regularizer import GlossCollator, GlossRegularizedMLM, gloss_accuracy
from dictembed.objectives.mlm import load_masked_lm
from dictembed.recipes.common import RunConfig, RunResult, finished_run, load_splits, publish, select
from dictembed.training import Trainer

log = logging.getLogger(__name__)
GR_DICTIONARY = "oxford,chang,wordnet-examples,wordnet"
POOLING = "first_last_avg"


def load_triplets(config: RunConfig) -> tuple[dict[str, list[Triplet]], dict[str, TripletReport]]:
    """Triplets of the train and dev splits (split by headword before hard negatives are drawn)."""
    _, splits = load_splits(config)
    triplets, reports = {}, {}
    for name in ("train", "dev"):
        triplets[name], reports[name] = build_triplets(splits[name], seed=config.split_seed)
        log.info("%s split: %s", name, reports[name].summary())
    if not triplets["train"]:
        raise DictEmbedError(f"dictionary {config.dictionary!r} gave no training triplets (no example sentences?)")
    return triplets, reports


def keep_fitting(triplets: list[Triplet], collate: GlossCollator, name: str) -> tuple[list[Triplet], int]:
    """Drop (and count, with a warning) the triplets whose target lies beyond max_length tokens."""
    fits = [ok for start in range(0, len(triplets), 1024) for ok in collate.fits(triplets[start : start + 1024])]
    kept = [t for t, ok in zip(triplets, fits, strict=True) if ok]
    dropped = len(triplets) - len(kept)
    if dropped:
        log.warning(
            "%s: %d triplets skipped, their target lies beyond max_length=%d", name, dropped, collate.max_length
        )
    return kept, dropped


def sentence_encoder(objective: GlossRegularizedMLM, tokenizer: Any, config: RunConfig) -> Encoder:
    """The kept model's encoder with first-last-average pooling."""
    return Encoder(
        objective.kept.base_model,
        tokenizer,
        pooling=POOLING,
        max_length=config.max_length,
        config={"base_model": config.model},
    )


def dev_metrics(
    objective: GlossRegularizedMLM, encoder: Encoder, dev: list[Triplet], collate: GlossCollator, config: RunConfig
) -> dict[str, float]:
    """Held-out gloss-matching accuracy / loss and STS-B dev Spearman x 100 (first-last-avg)."""
    from dictembed.evaluation.sts import evaluate_stsb_dev

    metrics: dict[str, float] = {}
    if dev:
        metrics.update(gloss_accuracy(objective, dev, collate, config.batch_size))
    else:
        log.warning("no held-out triplets: gloss accuracy not measured")
    metrics["stsb_dev"] = float(evaluate_stsb_dev(encoder))
    return metrics


def gloss_setup(
    model: str, config: RunConfig, dev_triplets: list[Triplet], seed: int
) -> tuple[Any, GlossCollator, list[Triplet], GlossRegularizedMLM]:
    """Tokenizer, collator, the seeded held-out sample that fits max_length, and the objective over `model`."""
    tokenizer = load_pretrained(AutoTokenizer, model)
    collate = GlossCollator(tokenizer, config.max_length)
    dev, _ = keep_fitting(seeded_sample(dev_triplets, config.dev_limit, seed), collate, "dev")
    objective = GlossRegularizedMLM(load_masked_lm(model), config.arch, config.gloss_weight, config.temperature)
    return tokenizer, collate, dev, objective


def heldout_gloss_accuracy(model: str, config: RunConfig, seed: int = 0) -> dict[str, float]:
    """Gloss-matching accuracy / loss of any masked LM (e.g. the untrained base model) on the same held-out
    triplets and batches that `train_run` scores after training."""
    triplets, _ = load_triplets(config)
    _, collate, dev, objective = gloss_setup(model, config, triplets["dev"], seed)
    return gloss_accuracy(objective, dev, collate, config.batch_size)


def train_run(
    config: RunConfig,
    lr: float,
    seed: int,
    run_dir: Path,
    triplets: dict[str, list[Triplet]],
    extra: dict[str, Any],
) -> RunResult:
    """Train one GR-BERT model, evaluate it on the held-out split, save the kept masked LM."""
    if (done := finished_run(run_dir, lr, seed)) is not None:
        return done
    model_dir = run_dir / "model"
    tokenizer, collate, dev, objective = gloss_setup(config.model, config, triplets["dev"], seed)
    train, dropped = keep_fitting(seeded_sample(triplets["train"], config.limit, seed), collate, "train")
    trainer = Trainer(objective, train, collate, config.settings(lr, seed), run_dir)
    losses = trainer.fit(resume=config.resume or (run_dir / "checkpoint").exists())
    objective = trainer.unwrapped
    encoder = sentence_encoder(objective, tokenizer, config)
    dev_result = dev_metrics(objective, encoder, dev, collate, config)
    info = {
        **extra,
        "lr": lr,
        "seed": seed,
        "dev": dev_result,
        "throughput": getattr(trainer, "throughput", None),
        "train_examples": len(train),
        "dev_examples": len(dev),
        "skipped_too_long": dropped,
        "final_loss": float(np.mean(losses[-50:])) if losses else None,
        "config": asdict(config),
    }
    encoder.save(model_dir, info, full_model=objective.kept)
    log.info("lr=%g seed=%d dev=%s", lr, seed, dev_result)
    return RunResult(model_dir, lr, seed, dev_result, info["throughput"])


def train_gr_bert(config: RunConfig) -> Path:
    """Build triplets, train every (lr, seed) of the config, select on dev (`select_on`, else STS-B dev), save."""
    triplets, reports = load_triplets(config)
    extra = {
        "method": "gr-bert",
        "arch": config.arch,
        "gloss_weight": config.gloss_weight,
        "temperature": config.temperature,
        "data": config.dictionary,
        "triplets": {name: asdict(report) for name, report in reports.items()},
    }
    root = Path(config.output).with_name(Path(config.output).name + "-runs")
    results = [
        train_run(config, lr, seed, root / f"{config.arch}-lr{lr:g}-seed{seed}", triplets, extra)
        for lr in config.lrs
        for seed in config.seeds
    ]
    key = config.select_on if config.select_on in results[0].dev else "stsb_dev"
    best, summary = select(results, key)
    return publish(best, summary, config.output)
