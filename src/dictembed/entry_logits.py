"""Cosine entry logits: cos(h, e) / τ, this library's option beside the papers' dot product h · e
(`entry_space.MatrixSpace`, `--similarity cosine`), computed in one order everywhere (training, the reverse
dictionary, the leak-free evaluation), so that a score is the same number wherever it is computed."""

from __future__ import annotations

import torch
from torch.nn import functional as F

ENTRY_TEMPERATURE = 0.05  # τ of cosine entry logits, unless a run (`--entry-temperature`) or a saved space says


def cosine_query(h: torch.Tensor, temperature: float) -> torch.Tensor:
    """The query side of `cosine_logits`: `h` scaled to unit length, then divided by `temperature`."""
    return F.normalize(h, dim=-1) / temperature


def cosine_logits(
    h: torch.Tensor, entries: torch.Tensor, temperature: float, unit_entries: bool = False
) -> torch.Tensor:
    """cos(h, entries) / temperature, [..., B, d] and [..., n, d] -> [..., B, n]: `cosine_query(h)`, cast to the
    entries' dtype, times the unit-length entry rows (`unit_entries`: they already are, as a space keeps them)."""
    if not unit_entries:
        entries = F.normalize(entries, dim=-1)
    return cosine_query(h, temperature).to(entries.dtype) @ entries.mT
