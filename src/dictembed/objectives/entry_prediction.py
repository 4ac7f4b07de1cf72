"""DefSent / DefSent+ objective: predict the defined entry from the pooled definition embedding."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace, EntrySpace

log = logging.getLogger(__name__)
Example = tuple[str, int]
TargetExample = tuple[str, int, int]  # (definition, entry index, row of its leave-one-out target)


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


class LeaveOneOutEntryPrediction(nn.Module):
    """`EntryPrediction` whose gold logit scores the defined entry WITHOUT the definition itself:
    (mean x count - v) / (count - 1), v being the definition's vector under the encoder that built the space,
    as the leave-one-out evaluation scores a held-out definition (`evaluation.leak_free`). Every other entry is
    scored as usual, so the model cannot find the entry through its own definition's vector."""

    space: DefinitionSpace  # kept in __dict__, not registered as a submodule
    targets: torch.Tensor  # a buffer: one leave-one-out entry vector per example row

    def __init__(self, encoder: Encoder, space: DefinitionSpace, targets: torch.Tensor) -> None:
        super().__init__()
        self.encoder = encoder
        self.__dict__["space"] = space.freeze()  # as in EntryPrediction: frozen, never checkpointed or optimised
        self.register_buffer("targets", targets.float(), persistent=False)

    def forward(self, batch: tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        inputs, labels, rows = batch
        h = self.encoder(inputs)
        space = self.space.to(h.device)
        labels, target = labels.to(h.device), self.targets[rows.to(self.targets.device)].to(h.device)
        logits = space.scores(h).float()
        if space.similarity == "cosine":
            own = (F.normalize(h.float(), dim=-1) * F.normalize(target, dim=-1)).sum(-1) / space.temperature
        else:
            own = (h.float() * target).sum(-1)
        logits = logits.scatter(1, labels[:, None], own[:, None])
        loss = F.cross_entropy(logits, labels)
        return {"loss": loss, "acc": (logits.argmax(-1) == labels).float().mean()}


def leave_one_out_examples(
    dictionary: Dictionary, space: DefinitionSpace, vectors: dict[tuple[str, str], np.ndarray]
) -> tuple[list[TargetExample], torch.Tensor]:
    """(definition, entry index, target row) for each definition of `dictionary` whose entry has another
    definition, and the targets: the entry's vector without the definition (`DefinitionSpace.leave_one_out`,
    `vectors` giving each (headword, definition)'s vector under the encoder that built the space). Definitions
    of single-definition entries have no target: they are counted and logged, not trained on."""
    counts = space.check_leave_one_out()
    pairs = [(space.index.get(w), w, d) for w, d in dictionary.pairs()]
    kept = [(i, w, d) for i, w, d in pairs if i is not None and counts[i] > 1]
    single = sum(i is not None and counts[i] <= 1 for i, _, _ in pairs)
    if single or len(kept) + single < len(pairs):
        log.warning(
            "leave-one-out targets: %d definitions of single-definition entries and %d of headwords outside the "
            "space skipped; %d kept",
            single,
            len(pairs) - len(kept) - single,
            len(kept),
        )
    if not kept:
        return [], torch.zeros(0, space.matrix.shape[1])
    own = np.stack([vectors[w, d] for _, w, d in kept])
    targets = space.leave_one_out(np.array([i for i, _, _ in kept]), own)
    examples = [(d, int(i), row) for row, (i, _, d) in enumerate(kept)]
    return examples, torch.from_numpy(targets)


def leave_one_out_collate(
    encoder: Encoder,
) -> Callable[[list[TargetExample]], tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]]:
    """Collate (definition, index, target row) triples into a padded batch, the labels and the target rows."""

    def collate(items: list[TargetExample]) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        texts, labels, rows = zip(*items, strict=True)
        as_long = torch.long
        return encoder.tokenize(list(texts)), torch.tensor(labels, dtype=as_long), torch.tensor(rows, dtype=as_long)

    return collate


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


def token_lengths(encoder: Encoder, texts: list[str]) -> list[int]:
    """The token count of each text under the encoder's truncation (what `group_by_length` groups by)."""
    ids = encoder.tokenizer(texts, truncation=True, max_length=encoder.max_length)["input_ids"]
    return [len(row) for row in ids]


def entry_collate(
    encoder: Encoder,
) -> Callable[[list[Example]], tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Collate (definition, index) pairs into a dynamically padded batch and a label tensor."""

    def collate(items: list[Example]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        texts, labels = zip(*items, strict=True)
        return encoder.tokenize(list(texts)), torch.tensor(labels, dtype=torch.long)

    return collate
