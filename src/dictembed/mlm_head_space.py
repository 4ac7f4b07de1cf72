"""DefSent's entry space: the checkpoint's own frozen pre-trained word-prediction (MLM) head, scoring a pooled
vector against the single-token words of a dictionary.

The space keeps the checkpoint's transformers config to rebuild the head when it is loaded, without its private
fields (`_name_or_path`, the folder it was loaded from on the training machine): a published model names no path
of the machine it was trained on (`record.RunRecord.portable`).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PreTrainedTokenizerBase

from dictembed.entry_space import EntrySpace
from dictembed.errors import MissingHeadError
from dictembed.loading import load_masked_lm_info
from dictembed.objectives.mlm import mlm_head_module
from dictembed.vocab import single_token_words


def portable_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a transformers config dict without its private fields, at any depth: `_name_or_path` (the local
    folder or Hub name it was loaded from), `_commit_hash` and the like, which only describe where and how it was
    loaded; what builds the model (`AutoConfig.for_model`) is kept."""
    return {
        key: portable_config(value) if isinstance(value, dict) else value
        for key, value in config.items()
        if not str(key).startswith("_")
    }


class MLMHeadSpace(EntrySpace):
    """DefSent: logits of the frozen pre-trained MLM head (BERT `cls.predictions`, RoBERTa `lm_head`)."""

    kind = "mlm-head"
    token_ids: torch.Tensor  # a buffer (register_buffer)

    def __init__(
        self, words: list[str], token_ids: list[int], head: nn.Module, head_name: str, config: dict[str, Any]
    ) -> None:
        super().__init__(words)
        self.head = head
        self.head_name = head_name
        self.model_config = portable_config(config)  # what rebuilds the head, never where it was loaded from
        self.register_buffer("token_ids", torch.tensor(token_ids, dtype=torch.long), persistent=False)
        self.freeze()

    def scores(self, h: torch.Tensor) -> torch.Tensor:
        return self.head(h)[..., self.token_ids]

    @classmethod
    def from_pretrained(cls, name_or_path: str, words: list[str], tokenizer: PreTrainedTokenizerBase) -> MLMHeadSpace:
        """Copy the pre-trained head of `name_or_path`; raise if the checkpoint has none."""
        mlm, missing = load_masked_lm_info(name_or_path)
        name, head = mlm_head_module(mlm)
        if missing:
            raise MissingHeadError(
                f"model {name_or_path!r} has no pre-trained MLM head (missing {', '.join(sorted(missing)[:3])}...); "
                "use the word-embedding fallback (--space word-embeddings) or a checkpoint with a head"
            )
        kept, ids = single_token_words(words, tokenizer)
        return cls(kept, ids, copy.deepcopy(head), name, mlm.config.to_dict())

    def vectors(self) -> np.ndarray:
        """The decoder (output-embedding) rows of the entry words."""
        vocab = int(self.model_config["vocab_size"])
        decoder = next(m for m in self.head.modules() if isinstance(m, nn.Linear) and m.out_features == vocab)
        return decoder.weight.detach()[self.token_ids].cpu().numpy()

    def _meta(self) -> dict:
        return {
            **super()._meta(),
            "token_ids": self.token_ids.tolist(),
            "head_name": self.head_name,
            "model_config": self.model_config,  # made portable once, by __init__
        }

    def _tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.head.state_dict())

    @classmethod
    def from_saved(cls, meta: dict, tensors: dict[str, torch.Tensor]) -> MLMHeadSpace:
        saved = portable_config(meta["model_config"])  # a space saved before kept `_name_or_path`
        settings = dict(saved)
        config = AutoConfig.for_model(settings.pop("model_type"), **settings)
        mlm = AutoModelForMaskedLM.from_config(config)
        name, head = mlm_head_module(mlm)
        head.load_state_dict(tensors)
        return cls(meta["words"], meta["token_ids"], head, name, saved)
