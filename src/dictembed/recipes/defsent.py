"""DefSent (Tsukagoshi et al., 2021): predict the defined word through the frozen MLM head."""

from __future__ import annotations

import logging
from pathlib import Path

from dictembed.dictionary import single_token_filter
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace, MLMHeadSpace, WordEmbeddingSpace
from dictembed.errors import DictEmbedError, MissingHeadError
from dictembed.recipes.common import RunConfig, load_splits, publish, run_grid

log = logging.getLogger(__name__)


def base_encoder(config: RunConfig) -> Encoder:
    """A fresh copy of the original pre-trained model with the configured pooling."""
    return Encoder.load(config.model, pooling=config.pooling, pooler=config.pooler, max_length=config.max_length)


def word_space(config: RunConfig, encoder: Encoder, words: list[str]) -> EntrySpace:
    """The MLM head over single-token words; the word-embedding FALLBACK when asked or when there is no head."""
    if config.space == "word-embeddings":
        return WordEmbeddingSpace.from_encoder(encoder, words)
    if config.space not in ("auto", "mlm-head"):
        raise DictEmbedError(f"unknown DefSent space {config.space!r}; choose auto, mlm-head or word-embeddings")
    try:
        return MLMHeadSpace.from_pretrained(config.model, words, encoder.tokenizer)
    except MissingHeadError as err:
        if config.space == "mlm-head":
            raise
        log.warning("%s -- FALLBACK: using the frozen input word embeddings as the entry space", err)
        return WordEmbeddingSpace.from_encoder(encoder, words)


def train_defsent(config: RunConfig) -> Path:
    """Filter to single-token headwords, train over the lr x seed grid, select on dev MRR, save."""
    dictionary, splits = load_splits(config)
    encoder = base_encoder(config)
    filtered = {}
    for name, split in splits.items():
        filtered[name], report = single_token_filter(split, encoder.tokenizer)
        log.info("%s split, single-token filter: %s", name, report)
    words = [w for split in filtered.values() for w in split.headwords]
    space = word_space(config, encoder, words)
    extra = {"method": "defsent", "entry_space": space.kind, "pst_step": None, "data": config.dictionary}
    root = Path(config.output).with_name(Path(config.output).name + "-runs")
    best, summary = run_grid(lambda: base_encoder(config), space, filtered, config, root, extra)
    return publish(best, summary, config.output)
