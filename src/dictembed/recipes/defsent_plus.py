"""DefSent+ (Liu, 2024): definition-built entry spaces and progressive separate training (PST)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from dictembed.cache import default_cache_dir
from dictembed.dictionary import split_by_headword
from dictembed.entry_space import DefinitionSpace
from dictembed.pooling import STANDARD_POOLINGS as POOLINGS
from dictembed.recipes.config import MethodOptions, RunConfig, option
from dictembed.recipes.defsent import EntryRecipe, base_encoder, config_dictionary, load_encoder
from dictembed.recipes.run import RunResult, Stage, runs_root, space_fingerprint

log = logging.getLogger(__name__)


@dataclass
class DefSentPlusOptions(MethodOptions):
    pooling: str = option("cls", "pooling of the sentence vector", choices=POOLINGS)
    pooler: str = option("model", "apply the model's own dense pooler", choices=("none", "model"))
    entries: str = option("ac", "entries: average [CLS] (ac) or mean pooling (amp)", choices=("ac", "amp"))
    similarity: str = option(
        "dot", "entry logits: dot product (the paper) or cosine / --entry-temperature", choices=("dot", "cosine")
    )
    entry_temperature: float = option(0.05, "tau of cosine entry logits")
    pst_steps: int = option(1, "progressive separate training steps", run=False)
    ica: str = option("none", "ICA-transform the last step's entry space", choices=("none", "last"), run=False)


class DefSentPlus(EntryRecipe):
    """Step k builds the entry space with the best encoder of step k-1 (the original model at k=1), then
    trains FRESH copies of the original model against it; the best by `select_on` goes on."""

    name = "defsent-plus"
    options = DefSentPlusOptions
    defaults: ClassVar[dict[str, Any]] = {
        "dictionary": "wordnet",
        "lrs": [2e-5],
        "select_on": "stsb_dev",
        "group_by_length": False,  # the paper's shuffled batches (the `best` preset groups them)
    }
    publishes_history = True

    def steps(self, config: RunConfig) -> int:
        return config.pst_steps

    def stage(self, config: RunConfig, step: int, before: Stage | None, best: RunResult | None) -> Stage:
        if before is None:
            dictionary = config_dictionary(config)
            data = {"dictionary": dictionary, "splits": split_by_headword(dictionary, seed=config.split_seed)}
        else:
            data = before.data
        entry_model = config.model if best is None else str(best.path)
        encoder = base_encoder(config) if best is None else load_encoder(config, entry_model)
        ica = config.ica == "last" and step == config.pst_steps
        log.info(
            "PST step %d/%d: building the %s entry space%s", step, config.pst_steps, config.entries, " (ICA)" * ica
        )
        space = DefinitionSpace.build(
            encoder,
            data["dictionary"],
            config.entries,
            ica=ica,
            cache_dir=config.cache_dir or str(default_cache_dir()),  # one cache for every run
            similarity=config.similarity,
            temperature=config.entry_temperature,
        )
        record = {"entry_space": space.kind, "entry_encoder": entry_model, "pst_step": step}
        root = runs_root(config.output) / f"step{step}"
        return Stage(root, config.select_on, data, space, record, space_fingerprint(space))
