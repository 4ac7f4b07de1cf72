"""Poolings that turn token states into one sentence vector, and the optional dense pooler on top."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

PoolingName = Literal["cls", "mean", "max", "prompt", "first_last_avg"]
POOLINGS: tuple[str, ...] = ("cls", "mean", "max", "prompt", "first_last_avg")
PROMPT_TEMPLATE = 'This sentence : "{s}" means {mask} .'
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "gelu": nn.GELU, "identity": nn.Identity}


def masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the tokens where `mask` is 1."""
    mask = mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def masked_max(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Element-wise max over the tokens where `mask` is 1."""
    return states.masked_fill(mask.unsqueeze(-1) == 0, torch.finfo(states.dtype).min).max(1).values


def pool(
    name: str,
    hidden_states: tuple[torch.Tensor, ...],
    attention_mask: torch.Tensor,
    mask_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool a model's hidden states (embeddings output first, last layer last) with pooling `name`.

    `first_last_avg` averages the first transformer layer's output (hidden_states[1]) and the last
    layer's, then mean-pools, as in BERT-whitening and SimCSE's `avg_first_last`.
    `prompt` takes the last layer's state at `mask_positions` (one per row).
    """
    last = hidden_states[-1]
    if name == "cls":
        return last[:, 0]
    if name == "mean":
        return masked_mean(last, attention_mask)
    if name == "max":
        return masked_max(last, attention_mask)
    if name == "first_last_avg":
        return masked_mean((hidden_states[1] + last) / 2, attention_mask)
    if name == "prompt":
        if mask_positions is None:
            raise ValueError("prompt pooling needs the mask token positions")
        return last[torch.arange(last.size(0), device=last.device), mask_positions]
    raise ValueError(f"unknown pooling {name!r}; choose from {', '.join(POOLINGS)}")


class Pooler(nn.Module):
    """Dense layer + activation applied to the pooled vector (BERT's pooler, or RoBERTa's lm_head.dense + GELU)."""

    def __init__(self, dim: int, activation: str = "tanh") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown pooler activation {activation!r}; choose from {', '.join(ACTIVATIONS)}")
        self.activation_name = activation
        self.linear = nn.Linear(dim, dim)
        self.activation = ACTIVATIONS[activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.linear(x))

    @classmethod
    def from_linear(cls, linear: nn.Linear, activation: str) -> Pooler:
        """A pooler initialised from an existing dense layer (copied, so the source stays untouched)."""
        pooler = cls(linear.in_features, activation)
        pooler.linear.load_state_dict(linear.state_dict())
        return pooler
