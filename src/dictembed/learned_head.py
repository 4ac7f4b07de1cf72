"""A learned MLM head for a sentence encoder that ships none (all-MiniLM-L6-v2, multilingual-e5-small).

The head has the shape of the model's own masked-LM head (BERT `cls.predictions`: dense + activation +
LayerNorm, a decoder tied to the input word embeddings, an output bias; RoBERTa and MPNet `lm_head`). It is
trained with BERT's 15 % / 80-10-10 masking (`objectives.mlm.Masker`) on dictionary text, over the FROZEN
encoder: the encoder runs under `no_grad` and in eval mode, and only the head's transform and bias train.
`write_masked_lm` then writes a copy of the model folder whose weights hold the encoder, unchanged, and the
head, so the folder is a masked-LM checkpoint (`MLMHeadSpace.from_pretrained`, lexical substitution) that
sentence-transformers and `Encoder.load` still load as the same sentence encoder.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from dictembed.dictionary import seeded_sample, split_by_headword
from dictembed.dictionary.core import Dictionary
from dictembed.errors import ModelLoadError
from dictembed.io import staged_dir, with_umask
from dictembed.loading import load_pretrained
from dictembed.model_folder import ONNX_DIR, resolve_model
from dictembed.objectives.mlm import Masker, load_masked_lm, mlm_head_module
from dictembed.training import Trainer, TrainSettings

log = logging.getLogger(__name__)
# Model types whose masked-LM head is a transform, a LayerNorm and a decoder tied to the input embeddings.
SUPPORTED = ("bert", "mpnet", "roberta", "xlm-roberta")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


@dataclass
class HeadSettings(TrainSettings):
    """What a learned head is trained with: the Trainer's settings with this library's defaults (not a paper's)
    and the tokenizer's length limit."""

    lr: float = 1e-3
    batch_size: int = 32
    max_length: int = 128


def check_backbone(name_or_path: str) -> str:
    """The model type of `name_or_path`; a one-line error for a folder without a model or a type whose
    masked-LM head is not BERT's shape."""
    config = load_pretrained(AutoConfig, name_or_path)
    if config.model_type not in SUPPORTED:
        raise ModelLoadError(
            f"model {name_or_path!r} is a {config.model_type!r} model; a learned head needs a BERT-family "
            f"encoder ({', '.join(SUPPORTED)})"
        )
    return str(config.model_type)


def dictionary_texts(dictionary: Dictionary) -> list[str]:
    """Every distinct definition and example sentence of `dictionary`, in dictionary order."""
    texts = (text for entry in dictionary for sense in entry.senses for text in (sense.definition, *sense.examples))
    return list(dict.fromkeys(t.strip() for t in texts if t.strip()))


def head_texts(
    dictionary: Dictionary, limit: int | None, heldout: int, seed: int = 0, split_seed: int = 0
) -> tuple[list[str], list[str]]:
    """(training texts, held-out texts): the definitions and examples of the train split and of the dev split
    of `dictionary`'s 8:1:1 split by headword (DefSent's split at the same `split_seed`), each a seeded sample
    of `limit` and `heldout` texts."""
    splits = split_by_headword(dictionary, seed=split_seed)
    train = seeded_sample(dictionary_texts(splits["train"]), limit, seed)
    return train, seeded_sample(dictionary_texts(splits["dev"]), heldout, seed)


class HeadObjective(nn.Module):
    """MLM cross-entropy of a trainable head over a frozen encoder. Only the head's own parameters (not the
    decoder, which is the input word embeddings) take gradients; the encoder always runs in eval mode."""

    def __init__(self, mlm: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
        super().__init__()
        self.mlm = mlm
        self.masker = Masker(tokenizer)
        self.head = mlm_head_module(mlm)[1]
        embeddings = mlm.get_input_embeddings().weight
        for param in mlm.parameters():
            param.requires_grad_(False)
        for param in self.head.parameters():
            param.requires_grad_(param is not embeddings)

    @property
    def encoder(self) -> nn.Module:
        """The frozen base model."""
        return self.mlm.base_model

    def train(self, mode: bool = True) -> HeadObjective:
        super().train(mode)
        self.encoder.eval()  # frozen: no dropout
        return self

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """BERT's masking of the padded batch (here, not in the collate function: a resumed run skips batches
        without collating them, so the masks must be drawn in step order), then the loss at the masked tokens."""
        masked, labels = self.masker(batch["input_ids"], batch["attention_mask"])
        with torch.no_grad():
            hidden = self.encoder(input_ids=masked, attention_mask=batch["attention_mask"])[0]
        chosen = labels != -100
        logits = self.head(hidden[chosen])  # only the masked positions reach the vocabulary-wide decoder
        count = chosen.sum().float()
        if not chosen.any():
            return {"loss": logits.sum() * 0.0, "accuracy": logits.new_zeros(()), "masked": count}
        target = labels[chosen]
        accuracy = (logits.argmax(-1) == target).float().mean()
        return {"loss": F.cross_entropy(logits, target), "accuracy": accuracy, "masked": count}


def text_collate(tokenizer: PreTrainedTokenizerBase, max_length: int) -> Callable[[list[str]], dict[str, torch.Tensor]]:
    """Texts -> a batch padded to its longest text (the objective masks it)."""

    def collate(texts: list[str]) -> dict[str, torch.Tensor]:
        enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    return collate


@torch.no_grad()
def heldout_metrics(objective: HeadObjective, texts: list[str], collate: Callable, batch_size: int = 64) -> dict:
    """MLM loss and accuracy over the masked tokens of `texts`, with masking seeded at 0 (the same positions
    for every head)."""
    training = objective.training
    objective.eval()
    loss = correct = count = 0.0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for start in range(0, len(texts), batch_size):
            out = objective(collate(texts[start : start + batch_size]))
            n = int(out["masked"])
            loss, correct, count = loss + float(out["loss"]) * n, correct + float(out["accuracy"]) * n, count + n
    objective.train(training)
    metrics = {"mlm_loss": loss / max(count, 1), "mlm_accuracy": correct / max(count, 1), "masked_tokens": int(count)}
    log.info("held-out MLM loss %.3f, accuracy %.3f over %d masked tokens", *metrics.values())
    return metrics


def learn_head(
    model: str,
    train_texts: list[str],
    run_dir: str | Path,
    settings: HeadSettings,
    heldout: Iterable[str] = (),
    resume: bool = False,
) -> tuple[PreTrainedModel, dict[str, Any]]:
    """Train the MLM head of `model` (new when the checkpoint has none) over its frozen encoder on
    `train_texts` with the project's Trainer; the masked-LM model and a summary (held-out metrics before and
    after, when `heldout` is given). The last step's checkpoint stays in `run_dir` until
    `training.discard_checkpoints(run_dir)`, once the head is written."""
    check_backbone(model)
    mlm = load_masked_lm(model)
    tokenizer = load_pretrained(AutoTokenizer, model)
    objective = HeadObjective(mlm, tokenizer)
    collate = text_collate(tokenizer, settings.max_length)
    held = list(heldout)
    summary: dict[str, Any] = {"train_texts": len(train_texts), "heldout_texts": len(held)}
    if held:
        summary["before"] = heldout_metrics(objective, held, collate)
    identity = {"model": str(model), "texts": len(train_texts), **vars(settings)}
    trainer = Trainer(objective, train_texts, collate, settings, run_dir, identity=identity, device="cpu")
    trainer.fit(resume=resume, keep_final=True)  # the caller discards it once the head is written
    last = trainer.recent_losses[-1] if trainer.recent_losses else None  # the last step's, whichever process took it
    summary.update(steps=trainer.total_steps, final_loss=last)
    if held:
        summary["after"] = heldout_metrics(objective, held, collate)
    return mlm, summary


def masked_lm_state(backbone: PreTrainedModel, mlm: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The tensors of a masked-LM checkpoint: every tensor of `backbone` (as it loads from its folder, pooler
    included) under the base-model prefix, and the head's own tensors (not the tied decoder weight)."""
    prefix = mlm.base_model_prefix
    state = {f"{prefix}.{k}": v for k, v in backbone.state_dict().items()}
    name, head = mlm_head_module(mlm)
    embeddings = cast(torch.Tensor, mlm.get_input_embeddings().weight).data_ptr()
    seen: set[int] = {embeddings}
    for key, tensor in head.state_dict().items():
        if tensor.data_ptr() not in seen:  # a tied bias appears under two names; keep the first
            seen.add(tensor.data_ptr())
            state[f"{name}.{key}"] = tensor
    return {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}


def write_masked_lm(model: str, mlm: PreTrainedModel, output: str | Path) -> Path:
    """A copy of `model`'s folder at `output` whose weights are a masked-LM checkpoint (encoder unchanged,
    plus `mlm`'s head) and whose config names the masked-LM architecture; written in a staging folder."""
    source = resolve_model(model)
    backbone = load_pretrained(AutoModel, str(source))
    state = masked_lm_state(backbone, mlm)
    output = Path(output)
    with staged_dir(output) as staging:
        ignored = shutil.ignore_patterns(".git", ONNX_DIR, *WEIGHT_FILES)  # a query graph is of the source's weights
        shutil.copytree(source, staging, dirs_exist_ok=True, ignore=ignored)
        for shard in staging.glob("model-*-of-*.safetensors"):
            shard.unlink()
        save_file(state, str(staging / "model.safetensors"), metadata={"format": "pt"})
        config_path = staging / "config.json"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["architectures"] = [type(mlm).__name__]
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        with_umask(staging)
    return output
