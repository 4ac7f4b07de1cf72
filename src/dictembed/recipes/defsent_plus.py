"""DefSent+ (Liu, 2024): definition-built entry spaces and progressive separate training (PST)."""

from __future__ import annotations

import logging
from pathlib import Path

from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.recipes.common import RunConfig, load_splits, publish, run_grid
from dictembed.recipes.defsent import base_encoder

log = logging.getLogger(__name__)


def train_defsent_plus(config: RunConfig) -> Path:
    """Step k builds the entry space with the best encoder of step k-1 (the original model at k=1), then
    trains FRESH copies of the original model against it; the best by `select_on` goes on."""
    dictionary, splits = load_splits(config)
    root = Path(config.output).with_name(Path(config.output).name + "-runs")
    cache = config.cache_dir or str(root / "cache")
    entry_encoder = base_encoder(config)
    steps = []
    best = summary = None
    for step in range(1, config.pst_steps + 1):
        ica = config.ica == "last" and step == config.pst_steps
        log.info(
            "PST step %d/%d: building the %s entry space%s",
            step,
            config.pst_steps,
            config.entries,
            " with ICA" if ica else "",
        )
        space = DefinitionSpace.build(
            entry_encoder,
            dictionary,
            config.entries,
            ica=ica,
            cache_dir=cache,
            similarity=config.similarity,
            temperature=config.temperature,
        )
        extra = {
            "method": "defsent-plus",
            "entry_space": space.kind,
            "pst_step": step,
            "data": config.dictionary,
        }
        best, summary = run_grid(lambda: base_encoder(config), space, splits, config, root / f"step{step}", extra)
        steps.append({"step": step, "path": str(best.path), **summary})
        entry_encoder = Encoder.load(str(best.path))
    assert best is not None and summary is not None
    return publish(best, {**summary, "pst": steps}, config.output)
