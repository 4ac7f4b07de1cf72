"""DefSent / DefSent+ objective: predict the defined entry from the pooled definition embedding."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from dictembed.description_corpus import Description
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace

log = logging.getLogger(__name__)
Example = tuple[str, int]


class EntryPrediction(nn.Module):
    """Cross-entropy of the frozen entry space's logits toward the defined entry; with `word_weight` > 0, plus that
    weight times `word_contrast` (each query toward its entry's word, encoded by the trained encoder)."""

    space: EntrySpace  # kept in __dict__, not registered as a submodule

    def __init__(self, encoder: Encoder, space: EntrySpace, word_weight: float = 0.0) -> None:
        super().__init__()
        self.encoder = encoder
        self.word_weight = word_weight
        self.__dict__["space"] = space.freeze()  # not a submodule: frozen, never checkpointed or optimised

    def forward(self, batch: tuple[Any, ...]) -> dict[str, torch.Tensor]:
        inputs, labels, *words = batch
        h = self.encoder(inputs)
        space: EntrySpace = self.space.to(h.device)
        labels = labels.to(h.device)
        loss, acc = space.loss(h, labels)
        if not (words and self.word_weight > 0):
            return {"loss": loss, "acc": acc}
        contrast = word_contrast(h, self.encoder(words[0]), labels)
        return {"loss": loss + self.word_weight * contrast, "acc": acc, "word_loss": contrast.detach()}


WORD_TEMPERATURE = 0.05


def word_contrast(h: torch.Tensor, g: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """In-batch InfoNCE of each query vector `h[i]` toward its entry's word's vector `g[i]` against the batch's
    other words (cosine / `WORD_TEMPERATURE`); a word that appears twice in the batch is no negative of itself."""
    logits = F.normalize(h.float(), dim=-1) @ F.normalize(g.float(), dim=-1).T / WORD_TEMPERATURE
    same = labels[:, None] == labels[None, :]
    same.fill_diagonal_(False)
    logits = logits.masked_fill(same, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(labels), device=logits.device))


def entry_examples(dictionary: Dictionary, space: EntrySpace) -> list[Example]:
    """(definition, entry index) pairs for headwords the space holds; a count of the others is logged."""
    examples, missing = [], 0
    for headword, definition in dictionary.pairs():
        index = space.index.get(headword)
        if index is None:
            missing += 1
        else:
            examples.append((definition, index))
    if missing:
        log.warning("%d definitions skipped: their headword is not an entry of the %s space", missing, space.kind)
    return examples


def description_examples(descriptions: list[Description], dictionary: Dictionary, space: EntrySpace) -> list[Example]:
    """(description, entry index) pairs for the descriptions whose word is a headword of `dictionary` (the training
    split: a description of a dev or test word would leak it) and an entry of the space; the others are counted and
    logged."""
    headwords = set(dictionary.headwords)
    examples, outside = [], 0
    for description in descriptions:
        index = space.index.get(description.word) if description.word in headwords else None
        if index is None:
            outside += 1
        else:
            examples.append((description.text, index))
    if outside:
        log.info("%d of %d descriptions skipped: their word is not a training headword", outside, len(descriptions))
    return examples


def token_lengths(encoder: Encoder, texts: list[str]) -> list[int]:
    """The token count of each text under the encoder's truncation (what `group_by_length` groups by)."""
    ids = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_length)["input_ids"]
    return [len(row) for row in ids]


def entry_collate(encoder: Encoder, words: list[str] | None = None) -> Callable[[list[Example]], tuple[Any, ...]]:
    """Collate (definition, index) pairs into a dynamically padded batch and a label tensor; with `words` (the
    entries' words), the batch of each example's entry word too."""

    def collate(items: list[Example]) -> tuple[Any, ...]:
        texts, labels = zip(*items, strict=True)
        batch = encoder.tokenize(list(texts)), torch.tensor(labels, dtype=torch.long)
        return batch if words is None else (*batch, encoder.tokenize([words[i] for i in labels]))

    return collate
