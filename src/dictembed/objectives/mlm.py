"""Masked language modelling, the half of GR-BERT that keeps the model a word predictor.

Masking is BERT's: 15% of the (non-special, non-padding) tokens are chosen; 80% of them become the mask
token, 10% a random token, 10% stay. It is transformers' own `DataCollatorForLanguageModeling`
(`torch_mask_tokens`), drawing from torch's global RNG so that the Trainer's checkpoints replay it.

A checkpoint without an MLM head (a sentence encoder such as all-MiniLM-L6-v2 is saved as a bare
`BertModel`) loads with `cls.predictions.*` missing: transformers then initialises the head's transform
and bias anew and ties its decoder to the input word embeddings, as it does for every BERT.
`load_masked_lm` checks the tie, ties it if the config did not, and logs a warning that the head is new.
"""

from __future__ import annotations

import logging

import torch
from torch import nn
from transformers import DataCollatorForLanguageModeling, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from dictembed.errors import ModelLoadError
from dictembed.loading import load_masked_lm_info

log = logging.getLogger(__name__)
MLM_PROBABILITY = 0.15


def head_is_tied(model: PreTrainedModel) -> bool:
    """Whether the MLM decoder shares its weight tensor with the input word embeddings."""
    output = model.get_output_embeddings()
    return output is not None and output.weight is model.get_input_embeddings().weight


def mlm_head_module(mlm: PreTrainedModel) -> tuple[str, nn.Module]:
    """The word-prediction head of a *ForMaskedLM model: its one child that is not the base model."""
    heads = [(n, m) for n, m in mlm.named_children() if n != mlm.base_model_prefix]
    if len(heads) != 1:
        raise ModelLoadError(f"cannot find the MLM head of {type(mlm).__name__} (children: {[n for n, _ in heads]})")
    return heads[0]


def load_masked_lm(name_or_path: str) -> PreTrainedModel:
    """A *ForMaskedLM; a checkpoint without an MLM head gets a new head whose decoder is tied to the
    input embeddings (a warning says so, and `new_mlm_head` on the model, which a run records)."""
    model, missing = load_masked_lm_info(name_or_path)
    setattr(model, "new_mlm_head", bool(missing))  # noqa: B010 - a plain attribute, not a module or tensor
    if missing:
        if not head_is_tied(model):
            model.get_output_embeddings().weight = model.get_input_embeddings().weight
        log.warning(
            "model %r has no MLM head (missing %s): the head is newly initialised, its decoder tied to the "
            "input word embeddings",
            name_or_path,
            ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else ""),
        )
    return model


class Masker:
    """BERT's 15% / 80-10-10 masking of a padded batch, by transformers' language-modelling collator."""

    def __init__(self, tokenizer: Tokenizer, probability: float = MLM_PROBABILITY) -> None:
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=probability)
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)))

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked input ids, labels): labels are -100 except at the chosen positions."""
        special = torch.isin(input_ids, self.special_ids) | (attention_mask == 0)
        return self.collator.torch_mask_tokens(input_ids.clone(), special_tokens_mask=special)


def mlm_loss(model: PreTrainedModel, inputs: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy at the masked positions (zero, still differentiable, when none was chosen)."""
    out = model(**inputs, return_dict=True)
    chosen = labels != -100
    if not chosen.any():
        return out.logits.sum() * 0.0
    return torch.nn.functional.cross_entropy(out.logits[chosen], labels[chosen])
