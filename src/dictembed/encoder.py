"""Encoder: a Hugging Face backbone + pooling (+ optional pooler); loads by hub name or path, saves as
a sentence-transformers folder with a `dictembed.json` that records the full configuration."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.pooling import ACTIVATIONS, POOLINGS, PROMPT_TEMPLATE, Pooler, pool
from dictembed.record import read_record, write_record

log = logging.getLogger(__name__)
ST_POOLINGS = ("cls", "mean", "max")


def load_pretrained(loader: Any, name_or_path: str, **kwargs: Any) -> Any:
    """Call `loader.from_pretrained`, turning hub/offline/missing-file failures into a ModelLoadError."""
    try:
        return loader.from_pretrained(name_or_path, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or not Path(name_or_path).exists()
        hint = " (no network here: pass a local folder)" if offline else ""
        raise ModelLoadError(f"cannot load model {name_or_path!r}{hint}: {str(err).splitlines()[0]}") from err


def _st_pooling(path: Path) -> str | None:
    """The pooling mode a sentence-transformers folder declares, if any."""
    config = path / "1_Pooling" / "config.json"
    if not config.exists():
        return None
    data = json.loads(config.read_text())
    if "pooling_mode" in data:
        mode = data["pooling_mode"]
        return mode if isinstance(mode, str) else mode[0]
    for mode in ST_POOLINGS:
        key = "pooling_mode_cls_token" if mode == "cls" else f"pooling_mode_{mode}_tokens"
        if data.get(key):
            return mode
    return None


def _max_length(path: Path, tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel) -> int:
    """The sentence-transformers max_seq_length if declared, else the smaller of the tokenizer's limit, the
    model's position embeddings (RoBERTa-style models lose pad_token_id + 1 positions) and 512."""
    config = path / "sentence_bert_config.json"
    if config.exists():
        value = json.loads(config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    positions = getattr(backbone.config, "max_position_embeddings", 512) or 512
    if "roberta" in backbone.config.model_type:
        positions -= (backbone.config.pad_token_id or 0) + 1
    return int(min(tokenizer.model_max_length or 512, positions, 512))


class Encoder(nn.Module):
    """Backbone + pooling: `forward` gives differentiable sentence vectors, `encode` numpy arrays."""

    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        pooling: str = "mean",
        pooler: Pooler | None = None,
        max_length: int = 256,
        normalize: bool = False,
        config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise DictEmbedError(f"unknown pooling {pooling!r}; choose from {', '.join(POOLINGS)}")
        if pooling == "prompt" and tokenizer.mask_token is None:
            raise DictEmbedError("prompt pooling needs a tokenizer with a mask token")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.pooler = pooler
        self.max_length = max_length
        self.normalize = normalize
        self.config: dict[str, Any] = dict(config or {})

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        name_or_path: str,
        pooling: str | None = None,
        pooler: str | None = None,
        max_length: int | None = None,
        normalize: bool | None = None,
    ) -> Encoder:
        """Load a hub name or local folder: a dictembed save, a sentence-transformers folder or a plain HF model.

        `pooler` is None (keep what a dictembed save recorded, else none), "none", or "model": the model's own
        dense pooler (BERT: `pooler.dense` + tanh; RoBERTa: `lm_head.dense` + GELU when the model has no pooler).
        """
        path = Path(name_or_path)
        saved = read_record(path)
        tokenizer = load_pretrained(AutoTokenizer, name_or_path)
        backbone = load_pretrained(AutoModel, name_or_path)
        enc = saved.get("encoder", {})
        pooling = pooling or enc.get("pooling") or _st_pooling(path) or "mean"
        module: Pooler | None = None
        if pooler is None and enc.get("pooler"):
            module = Pooler(backbone.config.hidden_size, enc["pooler"]["activation"])
            state = _load_safetensors(path / enc["pooler"]["path"] / "model.safetensors")
            module.load_state_dict({k: v for k, v in state.items() if k.startswith("linear.")})
        elif pooler == "model":
            module = model_pooler(backbone, name_or_path)
        encoder = cls(
            backbone,
            tokenizer,
            pooling=pooling,
            pooler=module,
            max_length=max_length or enc.get("max_length") or _max_length(path, tokenizer, backbone),
            normalize=enc.get("normalize", False) if normalize is None else normalize,
            config=saved,
        )
        encoder.config.setdefault("base_model", saved.get("base_model", name_or_path))
        return encoder

    # ----------------------------------------------------------------- forward
    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    @property
    def dim(self) -> int:
        return int(self.backbone.config.hidden_size)

    def _texts(self, sentences: Sequence[str]) -> list[str]:
        """Validate input and wrap sentences in the prompt template when pooling by prompt."""
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise DictEmbedError(f"sentence {i} is {type(s).__name__}, not str")
        if self.pooling != "prompt":
            return list(sentences)
        room = self.max_length - len(self.tokenizer.tokenize(PROMPT_TEMPLATE.format(s="", mask="x"))) - 4
        texts = []
        for s in sentences:
            tokens = self.tokenizer.tokenize(s)
            if len(tokens) > room:
                s = self.tokenizer.convert_tokens_to_string(tokens[:room])
            texts.append(PROMPT_TEMPLATE.format(s=s, mask=self.tokenizer.mask_token))
        return texts

    def tokenize(self, sentences: Sequence[str]) -> dict[str, torch.Tensor]:
        """Tokenize with dynamic padding (to the longest in the batch) and truncation at max_length."""
        return dict(
            self.tokenizer(
                self._texts(sentences),
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled (and pooler-transformed) sentence vectors for a tokenized batch."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        needs_all = self.pooling == "first_last_avg"
        out = self.backbone(**batch, output_hidden_states=needs_all, return_dict=True)
        states = out.hidden_states if needs_all else (out.last_hidden_state,)
        mask_positions = None
        if self.pooling == "prompt":
            is_mask = batch["input_ids"] == self.tokenizer.mask_token_id
            mask_positions = is_mask.int().argmax(1)
        vectors = pool(self.pooling, states, batch["attention_mask"], mask_positions)
        return self.pooler(vectors) if self.pooler is not None else vectors

    @torch.no_grad()
    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 64,
        normalize: bool | None = None,
        show_progress: bool | None = None,
    ) -> np.ndarray:
        """Encode sentences to an (n, dim) float32 array; batches are length-sorted, order is restored."""
        if isinstance(sentences, str):
            raise DictEmbedError("encode takes a list of sentences, not one string")
        sentences = list(sentences)
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        was_training = self.training
        self.eval()
        order = np.argsort([-len(s) if isinstance(s, str) else 0 for s in sentences], kind="stable")
        show = len(sentences) > 10 * batch_size if show_progress is None else show_progress
        chunks = []
        for start in tqdm(range(0, len(order), batch_size), desc="encode", disable=not show, leave=False):
            chunk = [sentences[i] for i in order[start : start + batch_size]]
            chunks.append(self(self.tokenize(chunk)).float().cpu())
        vectors = torch.cat(chunks)
        if self.normalize if normalize is None else normalize:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        result = np.empty((len(sentences), vectors.size(1)), dtype=np.float32)
        result[order] = vectors.numpy()
        self.train(was_training)
        return result

    # ------------------------------------------------------------------ saving
    def save(
        self, path: str | Path, extra: dict[str, Any] | None = None, full_model: PreTrainedModel | None = None
    ) -> Path:
        """Save atomically as a sentence-transformers folder plus `dictembed.json` (full configuration).

        `full_model` (e.g. the *ForMaskedLM whose base model is this backbone) is saved in place of the bare
        backbone, so its head travels with the folder; AutoModel and SentenceTransformer still load it.
        """
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer import modules as st

        path = Path(path)
        staging = path.with_name(path.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        self.backbone.save_pretrained(staging)
        self.tokenizer.save_pretrained(staging)
        if self.pooling not in ST_POOLINGS:
            log.warning(
                "pooling %r has no sentence-transformers equivalent: the folder declares mean pooling for "
                "SentenceTransformer(path); load it with dictembed.Encoder.load(path) for %r pooling",
                self.pooling,
                self.pooling,
            )
        modules: list[nn.Module] = [
            st.Transformer(str(staging), max_seq_length=self.max_length),
            st.Pooling(self.dim, self.pooling if self.pooling in ST_POOLINGS else "mean"),
        ]
        pooler_config = None
        if self.pooler is not None:
            modules.append(
                st.Dense(
                    self.dim,
                    self.dim,
                    activation_function=ACTIVATIONS[self.pooler.activation_name](),
                    init_weight=self.pooler.linear.weight.detach().cpu().clone(),
                    init_bias=self.pooler.linear.bias.detach().cpu().clone(),
                )
            )
            pooler_config = {"activation": self.pooler.activation_name, "path": f"{len(modules) - 1}_Dense"}
        if self.normalize:
            modules.append(st.Normalize())
        SentenceTransformer(modules=modules, device="cpu").save(str(staging))
        if full_model is not None:
            full_model.save_pretrained(staging)
        config = {**self.config, **(extra or {})}
        config["encoder"] = {
            "pooling": self.pooling,
            "pooler": pooler_config,
            "max_length": self.max_length,
            "normalize": self.normalize,
        }
        write_record(staging, config)
        replace_dir(staging, path)
        self.config = config
        return path


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path))


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished staging folder onto `target`, never leaving a half-written target behind."""
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def model_pooler(backbone: PreTrainedModel, name_or_path: str) -> Pooler:
    """A copy of the model's own pooler: BERT's `pooler.dense` + tanh, or for RoBERTa-style models (whose
    pooler is untrained) the MLM head's dense layer `lm_head.dense` + GELU, as DefSent+ does."""
    from transformers import AutoModelForMaskedLM

    dense = getattr(getattr(backbone, "pooler", None), "dense", None)
    if dense is not None and "roberta" not in backbone.config.model_type:
        return Pooler.from_linear(dense, "tanh")
    mlm = load_pretrained(AutoModelForMaskedLM, name_or_path)
    head = getattr(mlm, "lm_head", None)
    if head is None or not hasattr(head, "dense"):
        raise ModelLoadError(f"model {name_or_path!r} has neither a pooler nor an lm_head.dense to build one")
    return Pooler.from_linear(head.dense, "gelu")
