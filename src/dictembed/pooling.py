"""The two poolings sentence-transformers has no module for (the names: `pooling_names`).

cls, mean and max (and sentence-transformers' other modes) are computed by sentence-transformers' own
`Pooling` module inside the Encoder; this module computes `prompt` (PromptBERT's template, the state at
the mask token) and `first_last_avg` (BERT-whitening / SimCSE's average of the first and last layers).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from dictembed.pooling_names import CUSTOM_POOLINGS as CUSTOM_POOLINGS  # re-exported
from dictembed.pooling_names import POOLINGS as POOLINGS
from dictembed.pooling_names import ST_POOLINGS as ST_POOLINGS
from dictembed.pooling_names import STANDARD_POOLINGS as STANDARD_POOLINGS

PROMPT_TEMPLATE = 'This sentence : "{s}" means {mask} .'
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "gelu": nn.GELU, "identity": nn.Identity}


def masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the tokens where `mask` is 1."""
    mask = mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def pool(
    name: str,
    hidden_states: tuple[torch.Tensor, ...],
    attention_mask: torch.Tensor,
    mask_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool a model's hidden states (embeddings output first, last layer last) with a custom pooling.

    `first_last_avg` averages the first transformer layer's output (hidden_states[1]) and the last
    layer's, then mean-pools, as in BERT-whitening and SimCSE's `avg_first_last`.
    `prompt` takes the last layer's state at `mask_positions` (one per row).
    """
    last = hidden_states[-1]
    if name == "first_last_avg":
        return masked_mean((hidden_states[1] + last) / 2, attention_mask)
    if name == "prompt":
        if mask_positions is None:
            raise ValueError("prompt pooling needs the mask token positions")
        return last[torch.arange(last.size(0), device=last.device), mask_positions]
    raise ValueError(f"pool computes {', '.join(CUSTOM_POOLINGS)}; {name!r} is sentence-transformers' Pooling's")


def prompt_texts(tokenizer: PreTrainedTokenizerBase, sentences: Sequence[str], max_length: int) -> list[str]:
    """Sentences wrapped in the PromptBERT template, each cut so that the template's mask fits in `max_length`."""
    room = max_length - len(tokenizer.tokenize(PROMPT_TEMPLATE.format(s="", mask="x"))) - 4
    texts = []
    for s in sentences:
        tokens = tokenizer.tokenize(s)
        if len(tokens) > room:
            s = tokenizer.convert_tokens_to_string(tokens[:room])
        texts.append(PROMPT_TEMPLATE.format(s=s, mask=tokenizer.mask_token))
    return texts
