"""GR-BERT's gloss regularizer (Lin et al., 2022): MLM plus matching a word in context to its gloss.

Vectors:

* h_s, the target's contextual vector: the mean of the last-layer states of the target word's sub-tokens
  in the full (unmasked) sentence; the fast tokenizer's offset mapping maps the target's character span
  to its sub-tokens.
* e_t, the gloss vector: the gloss encoder's last-layer state at the first token ([CLS] for BERT, <s>
  for RoBERTa). The gloss encoder is a separate copy of the checkpoint's encoder, trained jointly.

Gloss matching is InfoNCE over cosine similarities / tau (tau = 0.05): each h_s against every gloss of
the batch (in-batch negatives) plus the batch's hard negatives (other glosses of the same words), which
are appended as extra columns. Columns holding the row's own gloss text again (the same sense with
another example, or another row's hard negative) are ignored rather than counted as negatives.

Architectures (the loss is MLM + lambda * InfoNCE, lambda = 2):

* MT: one context encoder (a *ForMaskedLM): MLM on the masked sentence, InfoNCE(h_s, e_t).
* SC: two context encoders from the same checkpoint. enc1 learns MLM only; enc2 learns MLM and matches
  e_t with h_s(2) - h_c(1), where h_c(1) is enc1's vector at the target positions with the target's
  sub-tokens replaced by mask tokens (the context-only vector, computed without gradient, so the gloss
  term trains enc2 and the gloss encoder). Only enc2 is kept.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from dictembed.dictionary.triplets import Triplet
from dictembed.errors import DictEmbedError
from dictembed.objectives.mlm import Masker, mlm_loss

ARCHS = ("mt", "sc")
Batch = dict[str, torch.Tensor]


def gloss_logits(
    query: torch.Tensor,
    positive: torch.Tensor,
    hard_negative: torch.Tensor | None = None,
    temperature: float = 0.05,
    ignore: torch.Tensor | None = None,
) -> torch.Tensor:
    """cos(query_i, candidate_j) / temperature: (B, B + H), candidates = positives then hard negatives.

    `ignore` (bool, same shape) marks columns to leave out (set to -inf).
    """
    candidates = positive if hard_negative is None else torch.cat([positive, hard_negative])
    logits = F.normalize(query, dim=-1) @ F.normalize(candidates, dim=-1).T / temperature
    return logits.masked_fill(ignore, float("-inf")) if ignore is not None else logits


def info_nce(
    query: torch.Tensor,
    positive: torch.Tensor,
    hard_negative: torch.Tensor | None = None,
    temperature: float = 0.05,
    ignore: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean InfoNCE loss: row i's positive is column i, every other column (and each hard negative) a
    negative."""
    logits = gloss_logits(query, positive, hard_negative, temperature, ignore)
    return F.cross_entropy(logits, torch.arange(len(query), device=query.device))


def span_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `states` (B, L, d) over the positions where `mask` (B, L) is true."""
    mask = mask.to(states.dtype).unsqueeze(-1)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class GlossCollator:
    """Triplets -> one batch: the sentence (full and target-masked; the objective draws its MLM masks), the target
    positions, the glosses, the hard-negative glosses and the columns to ignore."""

    def __init__(self, tokenizer: Tokenizer, max_length: int = 128) -> None:
        if not tokenizer.is_fast:
            raise DictEmbedError("GR-BERT needs a fast tokenizer (its offset mapping locates the target)")
        if tokenizer.mask_token_id is None:
            raise DictEmbedError("GR-BERT needs a tokenizer with a mask token")
        self.tokenizer = tokenizer
        self.max_length = max_length

    def _tokenize(self, texts: Sequence[str], **kwargs: bool) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(
                list(texts), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt", **kwargs
            )
        )

    def target_mask(self, offsets: torch.Tensor, spans: Sequence[tuple[int, int]]) -> torch.Tensor:
        """(B, L) bool: the sub-tokens whose character offsets overlap the target span."""
        span = torch.tensor(spans).unsqueeze(1)  # (B, 1, 2)
        start, end = offsets[..., 0], offsets[..., 1]
        return (end > start) & (start < span[..., 1]) & (end > span[..., 0])

    def fits(self, triplets: Sequence[Triplet]) -> list[bool]:
        """Whether each target survives truncation to max_length."""
        enc = self._tokenize([t.context for t in triplets], return_offsets_mapping=True)
        found = self.target_mask(enc["offset_mapping"], [t.span for t in triplets]).any(1)
        return found.tolist()

    def __call__(self, triplets: list[Triplet]) -> Batch:
        context = self._tokenize([t.context for t in triplets], return_offsets_mapping=True)
        target = self.target_mask(context.pop("offset_mapping"), [t.span for t in triplets])
        if not target.any(1).all():
            lost = next(t for t, ok in zip(triplets, target.any(1), strict=True) if not ok)
            raise DictEmbedError(
                f"target {lost.word!r} truncated away (max_length {self.max_length}): {lost.context!r}"
            )
        batch = {f"ctx_{k}": v for k, v in context.items()}
        batch.update(
            target=target,
            target_masked_ids=context["input_ids"].masked_fill(target, self.tokenizer.mask_token_id),
        )
        batch.update({f"gloss_{k}": v for k, v in self._tokenize([t.gloss for t in triplets]).items()})
        negatives = [t.negative for t in triplets if t.negative is not None]
        if negatives:
            batch.update({f"neg_{k}": v for k, v in self._tokenize(negatives).items()})
        columns = [t.gloss for t in triplets] + negatives
        same = torch.tensor([[c == t.gloss for c in columns] for t in triplets])
        same[:, : len(triplets)].fill_diagonal_(False)
        batch["ignore"] = same
        return batch


def _inputs(batch: Batch, prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) :]: v for k, v in batch.items() if k.startswith(prefix)}


class GlossRegularizedMLM(nn.Module):
    """The GR-BERT objective: forward(batch) -> {"loss", "mlm", "gloss", "gloss_acc"}."""

    def __init__(
        self,
        mlm: PreTrainedModel,
        tokenizer: Tokenizer,
        arch: str = "mt",
        gloss_weight: float = 2.0,
        temperature: float = 0.05,
    ) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise DictEmbedError(f"unknown GR-BERT architecture {arch!r}; choose mt or sc")
        self.masker = Masker(tokenizer)
        self.arch = arch
        self.gloss_weight = gloss_weight
        self.temperature = temperature
        self.gloss_encoder = copy.deepcopy(mlm.base_model)
        self.enc2 = mlm  # MT's one context encoder; SC's enc2 (MLM and gloss matching)
        self.enc1 = copy.deepcopy(mlm) if arch == "sc" else None  # SC's enc1 (MLM only)

    @property
    def kept(self) -> PreTrainedModel:
        """The masked LM that is saved: MT's context encoder, SC's enc2."""
        return self.enc2

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def gloss_vectors(self, batch: Batch, prefix: str) -> torch.Tensor:
        """e_t: the gloss encoder's last-layer state at the first token."""
        return self.gloss_encoder(**_inputs(batch, prefix), return_dict=True).last_hidden_state[:, 0]

    def target_vectors(self, model: PreTrainedModel, batch: Batch, input_ids: torch.Tensor) -> torch.Tensor:
        """Mean last-layer state of the target's sub-tokens, for `input_ids` in place of the sentence."""
        inputs = {**_inputs(batch, "ctx_"), "input_ids": input_ids}
        states = model.base_model(**inputs, return_dict=True).last_hidden_state
        return span_mean(states, batch["target"])

    def query(self, batch: Batch) -> torch.Tensor:
        """h_s (MT) or h_s(2) - h_c(1) (SC)."""
        h = self.target_vectors(self.enc2, batch, batch["ctx_input_ids"])
        if self.enc1 is not None:
            with torch.no_grad():
                context_only = self.target_vectors(self.enc1, batch, batch["target_masked_ids"])
            h = h - context_only
        return h

    def gloss_scores(self, batch: Batch) -> torch.Tensor:
        """(B, B + H) gloss-matching logits of the batch."""
        negatives = self.gloss_vectors(batch, "neg_") if "neg_input_ids" in batch else None
        return gloss_logits(
            self.query(batch), self.gloss_vectors(batch, "gloss_"), negatives, self.temperature, batch["ignore"]
        )

    def mlm(self, batch: Batch) -> torch.Tensor:
        """The MLM loss of the batch's sentences, masked here (BERT's 15% / 80-10-10), not as the batch is collated:
        the data loader collates a batch ahead of its step, so masks drawn there would differ between a run and
        its resume, whose generator state is the step's."""
        ids = batch["ctx_input_ids"]
        masked, labels = self.masker(ids.cpu(), batch["ctx_attention_mask"].cpu())  # the CPU generator, on any device
        inputs = {**_inputs(batch, "ctx_"), "input_ids": masked.to(ids.device)}
        models = [self.enc2] if self.enc1 is None else [self.enc1, self.enc2]
        return cast(torch.Tensor, sum(mlm_loss(m, inputs, labels.to(ids.device)) for m in models))  # never empty

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        batch = {k: v.to(self.device) for k, v in batch.items()}
        logits = self.gloss_scores(batch)
        labels = torch.arange(len(logits), device=logits.device)
        gloss = F.cross_entropy(logits, labels)
        mlm = self.mlm(batch)
        return {
            "loss": mlm + self.gloss_weight * gloss,
            "mlm": mlm,
            "gloss": gloss,
            "gloss_acc": (logits.argmax(-1) == labels).float().mean(),
        }


@torch.no_grad()
def gloss_accuracy(
    objective: GlossRegularizedMLM, triplets: Sequence[Triplet], collate: GlossCollator, batch_size: int = 32
) -> dict[str, float]:
    """Held-out gloss matching: top-1 accuracy of h_s among all glosses of its batch, and the InfoNCE loss."""
    if not triplets:
        raise DictEmbedError("no held-out triplets to measure gloss accuracy on")
    was_training = objective.training
    objective.eval()
    correct, loss = 0.0, 0.0
    for start in range(0, len(triplets), batch_size):
        batch = collate(list(triplets[start : start + batch_size]))
        logits = objective.gloss_scores({k: v.to(objective.device) for k, v in batch.items()})
        labels = torch.arange(len(logits), device=logits.device)
        correct += float((logits.argmax(-1) == labels).sum())
        loss += float(F.cross_entropy(logits, labels, reduction="sum"))
    objective.train(was_training)
    return {"gloss_acc": 100 * correct / len(triplets), "gloss_loss": loss / len(triplets)}
