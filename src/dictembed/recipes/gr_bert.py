"""GR-BERT (Lin et al., 2022): masked language modelling regularised by matching words in context to
their glosses, in the MT (one context encoder) or SC (two context encoders) architecture.

Data: (word, example sentence, gloss) triplets of every dictionary whose senses carry examples, split by
headword 8:1:1 (train / held-out dev). The kept masked LM is saved with its head (lexical substitution
reads it) and first-last-average pooling (STS reads that; the record says so).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from torch import nn
from transformers import AutoTokenizer, PreTrainedModel

from dictembed.dictionary import seeded_sample
from dictembed.dictionary.triplets import Triplet, TripletReport, build_triplets
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.evaluation.sts_multi import evaluate_sts_dev
from dictembed.loading import load_pretrained
from dictembed.objectives.gloss_regularizer import GlossCollator, GlossRegularizedMLM, gloss_accuracy
from dictembed.objectives.mlm import load_masked_lm
from dictembed.output_folder import runs_root
from dictembed.recipes.defsent import load_splits
from dictembed.recipes.options import MethodOptions, option
from dictembed.recipes.papers import CARD_KEYS, PAPERS
from dictembed.recipes.run import Built, Recipe, RunResult, Stage
from dictembed.record import RunRecord

if TYPE_CHECKING:
    from dictembed.recipes.config import RunConfig

log = logging.getLogger(__name__)
GR_DICTIONARY = "oxford,chang,wordnet-examples,wordnet"
POOLING = "first_last_avg"


@dataclass
class GRBertOptions(MethodOptions):
    arch: str = option("mt", "one (mt) or two (sc) context encoders", choices=("mt", "sc"))
    gloss_weight: float = option(2.0, "weight (lambda) of the gloss loss", positive=False)
    gloss_temperature: float = option(0.05, "tau of the InfoNCE gloss matching")


def load_triplets(config: RunConfig) -> tuple[dict[str, list[Triplet]], dict[str, TripletReport]]:
    """Triplets of the train and dev splits (split by headword before hard negatives are drawn)."""
    splits = load_splits(config)
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


def gloss_setup(
    model: str, config: RunConfig, dev_triplets: list[Triplet], seed: int
) -> tuple[Any, GlossCollator, list[Triplet], GlossRegularizedMLM]:
    """Tokenizer, collator, the seeded held-out sample that fits max_length, and the objective over `model`."""
    tokenizer = load_pretrained(AutoTokenizer, model)
    collate = GlossCollator(tokenizer, config.max_length)
    dev, _ = keep_fitting(seeded_sample(dev_triplets, config.dev_limit, seed), collate, "dev")
    options = config.options_as(GRBertOptions)
    objective = GlossRegularizedMLM(
        load_masked_lm(model), tokenizer, options.arch, options.gloss_weight, options.gloss_temperature
    )
    return tokenizer, collate, dev, objective


def heldout_gloss_accuracy(model: str, config: RunConfig, seed: int = 0) -> dict[str, float]:
    """Gloss-matching accuracy / loss of any masked LM (e.g. the untrained base model) on the same held-out
    triplets and batches that a run scores after training."""
    triplets, _ = load_triplets(config)
    _, collate, dev, objective = gloss_setup(model, config, triplets["dev"], seed)
    return gloss_accuracy(objective, dev, collate, config.batch_size)


def gr_objective(objective: nn.Module) -> GlossRegularizedMLM:
    """The GR-BERT objective that `GRBert.build` made (a run's `Built.objective`, or the trained one unwrapped)."""
    return cast(GlossRegularizedMLM, objective)


class GRBert(Recipe):
    """Train the gloss-regularised masked LM; keep MT's context encoder or SC's enc2, pooled first-last-avg."""

    name = "gr-bert"
    options = GRBertOptions
    paper = PAPERS["gr-bert"]
    card_keys = CARD_KEYS["gr-bert"]
    # STS and lexical substitution unchanged within noise
    defaults: ClassVar[dict[str, Any]] = {"dictionary": GR_DICTIONARY, "lrs": [2e-5], "select_on": "stsb_dev"}
    select_choices = ("stsb_dev", "gloss_acc")

    def stage(self, config: RunConfig, step: int, before: Stage | None, best: RunResult | None) -> Stage:
        triplets, reports = load_triplets(config)
        data = {"triplets": triplets, "reports": {n: asdict(r) for n, r in reports.items()}}
        return Stage(
            runs_root(config.output), config.select_on, data, prefix=f"{config.options_as(GRBertOptions).arch}-"
        )

    def build(self, config: RunConfig, stage: Stage, seed: int) -> Built:
        tokenizer, collate, dev, objective = gloss_setup(config.model, config, stage.data["triplets"]["dev"], seed)
        sample = seeded_sample(stage.data["triplets"]["train"], config.limit, seed)
        train, dropped = keep_fitting(sample, collate, "train")
        if sample and not train:
            raise DictEmbedError(
                f"every one of the {len(sample):,} training triplets has its target beyond max_length="
                f"{config.max_length} tokens; raise --max-length"
            )
        details = {
            "pooling": POOLING,
            "triplets": stage.data["reports"],
            "dev_examples": len(dev),
            "skipped_too_long": dropped,
            "new_mlm_head": bool(getattr(objective.kept, "new_mlm_head", False)),  # the model card says so
        }
        return Built(objective, train, collate, {"tokenizer": tokenizer, "dev": dev}, details)

    def extract(self, config: RunConfig, built: Built, objective: nn.Module) -> Encoder:
        backbone = cast(PreTrainedModel, gr_objective(objective).kept.base_model)  # typed nn.Module in transformers
        return Encoder(backbone, built.state["tokenizer"], pooling=POOLING, max_length=config.max_length)

    def dev_metrics(self, config: RunConfig, stage: Stage, built: Built, encoder: Encoder) -> dict[str, float]:
        """Held-out gloss-matching accuracy / loss and STS-B dev Spearman x 100 (first-last-avg)."""
        metrics: dict[str, float] = {}
        if built.state["dev"]:
            objective, collate = gr_objective(built.objective), cast(GlossCollator, built.collate)
            metrics.update(gloss_accuracy(objective, built.state["dev"], collate, config.batch_size))
        else:
            log.warning("no held-out triplets: gloss accuracy not measured")
        metrics["stsb_dev"] = float(evaluate_sts_dev(encoder, config.dev_language))
        return metrics

    def save(
        self, stage: Stage, built: Built, encoder: Encoder, folder: Any, record: RunRecord, cache_dir: Path
    ) -> None:
        """The encoder with the kept masked LM's head, so lexical substitution can read it."""
        encoder.save(folder, record, full_model=gr_objective(built.objective).kept, overwrite=True)
