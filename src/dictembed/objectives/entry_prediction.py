"""DefSent / DefSent+ objective: predict the defined entry from the pooled definition embedding."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import nn

from dictembed.description_corpus import Description
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace

log = logging.getLogger(__name__)
# a text and its entry, or (synonym targets) every entry whose headword lists that text, its own first
Example = tuple[str, int | tuple[int, ...]]


class EntryPrediction(nn.Module):
    """Cross-entropy of the frozen entry space's logits toward the defined entry."""

    space: EntrySpace  # kept in __dict__, not registered as a submodule

    def __init__(self, encoder: Encoder, space: EntrySpace) -> None:
        super().__init__()
        self.encoder = encoder
        self.__dict__["space"] = space.freeze()  # not a submodule: frozen, never checkpointed or optimised

    def forward(self, batch: tuple[dict[str, torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
        inputs, labels = batch
        h = self.encoder(inputs)
        space: EntrySpace = self.space.to(h.device)
        loss, acc = space.loss(h, labels.to(h.device))
        return {"loss": loss, "acc": acc}


def entry_examples(dictionary: Dictionary, space: EntrySpace, synonyms: bool = False) -> list[Example]:
    """(definition, entry index) pairs for headwords the space holds; a count of the others is logged. With
    `synonyms`, a definition several headwords list (WordNet's synsets: *autumn* and *fall* share "the season when
    the leaves fall from the trees") has every one of their entries as its targets, its own first, in the same
    examples (`EntrySpace.loss` counts any of them right): the single target made the others negatives."""
    pairs: list[tuple[str, int]] = []
    missing = 0
    for headword, definition in dictionary.pairs():
        index = space.index.get(headword)
        if index is None:
            missing += 1
        else:
            pairs.append((definition, index))
    if missing:
        log.warning("%d definitions skipped: their headword is not an entry of the %s space", missing, space.kind)
    if not synonyms:
        return list(pairs)
    listing: dict[str, list[int]] = {}
    for definition, index in pairs:
        listing.setdefault(definition, []).append(index)
    shared = [(text, (index, *(i for i in listing[text] if i != index))) for text, index in pairs]
    log.info(
        "%d of %d definitions are listed by several headwords: each of their entries a target",
        sum(len(t) > 1 for _, t in shared),
        len(shared),
    )
    return [(text, targets if len(targets) > 1 else targets[0]) for text, targets in shared]


def description_examples(descriptions: list[Description], dictionary: Dictionary, space: EntrySpace) -> list[Example]:
    """(description, entry index) pairs for the descriptions whose word is a headword of `dictionary` (the training
    split: a description of a dev or test word would leak it) and an entry of the space; the others are counted and
    logged."""
    headwords = set(dictionary.headwords)
    examples: list[Example] = []
    outside = 0
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


def target_tensor(labels: list[int | tuple[int, ...]]) -> torch.Tensor:
    """The entry targets of a batch: [B] indices, or [B, K] with -1 after each row's targets when any example
    has several (`entry_examples` with synonyms)."""
    rows = [label if isinstance(label, tuple) else (label,) for label in labels]
    if all(len(row) == 1 for row in rows):
        return torch.tensor([row[0] for row in rows], dtype=torch.long)
    width = max(len(row) for row in rows)
    return torch.tensor([[*row, *([-1] * (width - len(row)))] for row in rows], dtype=torch.long)


def entry_collate(
    encoder: Encoder,
) -> Callable[[list[Example]], tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Collate (definition, index) pairs into a dynamically padded batch and a label tensor."""

    def collate(items: list[Example]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        texts, labels = zip(*items, strict=True)
        return encoder.tokenize(list(texts)), target_tensor(list(labels))

    return collate
