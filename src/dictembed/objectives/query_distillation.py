"""Query distillation: a student encoder learns to give a text the vector a stronger teacher gives it (projected
onto the student's dimension), with a cosine loss, so that the student can query the teacher's entry space; and,
with an entry space, to rank its entries as the teacher does (the KL divergence from the teacher's softmax over
the entries' cosine logits to the student's)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from dictembed.encoder import Encoder

Example = tuple[str, int]  # a text and the row of its teacher vector


class QueryDistillation(nn.Module):
    """1 - cosine between the student's vector of each text and the teacher's (a frozen matrix of unit rows), plus
    `ranking_weight` x the KL divergence of the student's entry distribution from the teacher's over the unit
    `entries` at `temperature` (computed in fp32 whatever the autocast)."""

    targets: torch.Tensor  # kept in __dict__, not registered: frozen, never checkpointed or optimised
    entries: torch.Tensor | None

    def __init__(
        self,
        encoder: Encoder,
        targets: torch.Tensor,
        entries: torch.Tensor | None = None,
        ranking_weight: float = 0.0,
        temperature: float = 0.05,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.__dict__["targets"] = nn.functional.normalize(targets.detach().float(), dim=-1)
        unit = None if entries is None else nn.functional.normalize(entries.detach().float(), dim=-1)
        self.__dict__["entries"] = unit
        self.ranking_weight = ranking_weight if entries is not None else 0.0
        self.temperature = temperature

    def forward(self, batch: tuple[dict[str, torch.Tensor], torch.Tensor]) -> dict[str, torch.Tensor]:
        inputs, rows = batch
        h = nn.functional.normalize(self.encoder(inputs).float(), dim=-1)
        if self.targets.device != h.device:  # moved once, as the entries below; the rows come on h's device
            self.__dict__["targets"] = self.targets.to(h.device)
        wanted = self.targets[rows.to(h.device)]
        cosine = (h * wanted).sum(-1)
        out = {"loss": (1 - cosine).mean(), "cosine": cosine.mean().detach()}
        if self.ranking_weight and self.entries is not None:
            if self.entries.device != h.device:  # moved once, not every step (not a registered buffer)
                self.__dict__["entries"] = self.entries.to(h.device)
            entries = self.entries
            with torch.autocast(h.device.type, enabled=False):
                student = torch.log_softmax(h @ entries.T / self.temperature, dim=-1)
                teacher = torch.log_softmax(wanted @ entries.T / self.temperature, dim=-1)
                ranking = nn.functional.kl_div(student, teacher, log_target=True, reduction="batchmean")
            out["ranking"] = ranking.detach()
            out["loss"] = out["loss"] + self.ranking_weight * ranking
        return out


def distillation_collate(encoder: Encoder) -> Callable[[list[Example]], tuple[dict[str, torch.Tensor], torch.Tensor]]:
    """Collate (text, row) pairs into a dynamically padded batch and the rows of their teacher vectors."""

    def collate(items: list[Example]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        texts, rows = zip(*items, strict=True)
        return encoder.tokenize(list(texts)), torch.tensor(rows, dtype=torch.long)

    return collate
