"""Encoder: a Hugging Face backbone, a pooling and the sentence-transformers modules that follow it (Dense,
Normalize, ...): the model only. It tokenizes, pools, encodes like `SentenceTransformer.encode` through one
batching path (`embed`), and saves a sentence-transformers folder with a `dictembed.json` run record.

cls / mean / max (and every other sentence-transformers pooling mode) are sentence-transformers' own `Pooling`
module, so an `Encoder` gives the same embeddings as `SentenceTransformer(path)`; only `prompt` and
`first_last_avg`, which sentence-transformers has no module for, are this package's (`dictembed.pooling`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from sentence_transformers.sentence_transformer import modules as st_modules
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from dictembed.backends.onnx.runtime import OnnxBackbone, attach
from dictembed.backends.openvino import OpenVinoBackbone
from dictembed.backends.openvino import attach as attach_openvino
from dictembed.devices import autocast, resolve_device, resolve_precision
from dictembed.encoder_folder import save_encoder
from dictembed.errors import DictEmbedError
from dictembed.loading import declared_pooling, model_pooler, open_encoder_parts
from dictembed.model_folder import ModelFolder, identifies_encoder
from dictembed.pooling import CUSTOM_POOLINGS, ST_POOLINGS, pool, prompt_texts
from dictembed.pooling_names import check_pooling
from dictembed.progress import Progress
from dictembed.record import RunRecord
from dictembed.st_encode import (
    encode_flags,
    encode_keywords,
    encode_normalize,
    encode_output,
    prompt_text,
    similarity,
)
from dictembed.texts import (
    check_batch_size,
    check_chunk,
    check_flag,
    check_prompt,
    check_texts,
    text_input,
    text_list,
    unknown_only,
)
from dictembed.tokenization import tokenize_counting_cuts

log = logging.getLogger(__name__)
BACKENDS = ("torch", "onnx", "openvino")


class Encoder(nn.Module):
    """Backbone + pooling + modules: `forward` gives differentiable sentence vectors, `encode` arrays."""

    similarity_fn_name = "cosine"  # the folder's own (`SentenceTransformer.similarity_fn_name`) once loaded
    truncate_dim: int | None = None  # the folder's sentence-transformers truncation: not applied, kept on save
    compute_precision = "fp32"  # inference autocast: fp32 (none), bf16 or fp16; see `set_precision`
    onnx: OnnxBackbone | None = None  # ONNX Runtime run in place of `backbone` (dictembed.backends.onnx)

    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        pooling: str = "mean",
        modules: Sequence[nn.Module] = (),
        max_length: int = 256,
        normalize: bool = False,
        record: RunRecord | None = None,
        pooling_module: st_modules.Pooling | None = None,
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
    ) -> None:
        """`modules`: sentence-transformers modules after the pooling (Dense, Normalize...), a Normalize appended for
        `normalize=True`; `pooling_module`: a loaded Pooling (its settings kept); `record`: how it was made."""
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling_module = pooling_module or st_modules.Pooling(self.hidden_size, "mean")
        self.pooling = pooling
        self.post = nn.ModuleList(modules)
        if normalize and not self.normalize:
            self.post.append(st_modules.Normalize())
        self.max_length = max_length
        self.record = record or RunRecord(version=0)
        self.prompts = dict(prompts or {})
        self.default_prompt_name = default_prompt_name
        self._truncated = 0  # sentences `tokenize` cut at max_length since `reset_truncated`

    @property
    def pooling(self) -> str:
        return self._pooling

    @pooling.setter
    def pooling(self, name: str) -> None:
        check_pooling(name)
        if name == "prompt" and self.tokenizer.mask_token is None:
            raise DictEmbedError("prompt pooling needs a tokenizer with a mask token")
        if name in ST_POOLINGS and self.pooling_module.pooling_mode != name:
            self.pooling_module = st_modules.Pooling(
                self.hidden_size, name, include_prompt=self.pooling_module.include_prompt
            )
        self._pooling = name

    @property
    def config(self) -> dict[str, Any]:
        """The encoder's own settings (saved as the record's "encoder")."""
        return {
            "pooling": self.pooling,
            "modules": [type(m).__name__ for m in self.post],
            "max_length": self.max_length,
            "normalize": self.normalize,
            "dim": self.dim,
        }

    @property
    def base_model(self) -> str:
        """The model this encoder was trained from (its own name or folder when untrained)."""
        return self.record.base_model or str(getattr(self.backbone, "name_or_path", "") or "model")

    @property
    def normalize(self) -> bool:
        """Whether the output is L2-normalised (a Normalize module follows the pooling)."""
        return any(isinstance(m, st_modules.Normalize) for m in self.post)

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    @property
    def hidden_size(self) -> int:
        return int(self.backbone.config.hidden_size)

    @property
    def dim(self) -> int:
        """The dimension of the sentence vectors (after any Dense module)."""
        dim = self.hidden_size if self.pooling in CUSTOM_POOLINGS else self.pooling_module.get_embedding_dimension()
        for module in self.post:
            if hasattr(module, "get_embedding_dimension") and hasattr(module, "out_features"):  # Dense-like
                dim = cast(Any, module).get_embedding_dimension()
        return int(dim)

    def with_pooling(self, pooling: str) -> Encoder:
        """An encoder sharing this one's backbone and modules (no copy of the weights) with another pooling."""
        if pooling == self.pooling:
            return self
        encoder = Encoder(
            self.backbone,
            self.tokenizer,
            pooling=pooling,
            modules=list(self.post),
            max_length=self.max_length,
            record=self.record,
            pooling_module=copy.deepcopy(self.pooling_module),
            prompts=self.prompts,
            default_prompt_name=self.default_prompt_name,
        )
        encoder.compute_precision = self.compute_precision
        encoder.onnx = self.onnx
        return encoder

    @property
    def batch_invariant(self) -> bool:
        """Whether a sentence's vector is the same in any batch (`query_encoder.batch_invariant`: a search then
        encodes its queries in batches): in fp32, to the rounding of the last bits; not under bf16 or fp16
        autocast, where padding to a batch's longest changes the matrices' shapes and so their rounding (13 of
        120 descriptions got another top 10 in bf16 searched together than alone), nor on an int8 graph, whose
        activation scales span the batch."""
        onnx = self.onnx
        quantized = onnx is not None and isinstance(onnx, OnnxBackbone) and onnx.manifest.get("quantize") is not None
        return self.compute_precision == "fp32" and not quantized

    def set_precision(self, precision: str | None = "auto") -> Encoder:
        """Set the compute precision of inference (`autocast`): fp32, bf16, fp16, or "auto" (bf16 on a CUDA
        GPU that supports it and on a CPU where `devices.cpu_auto_precision` says so, else fp32), resolved for the
        device the encoder is on now; "auto" is fp32 on an ONNX Runtime backbone, which computes its graph's
        precision. Returns self."""
        if self.backend == "onnx" and (precision or "auto") == "auto":
            precision = "fp32"
        self.compute_precision = resolve_precision(precision, self.device)
        return self

    @property
    def backend(self) -> str:
        """What runs the backbone: "torch", "onnx" (ONNX Runtime) or "openvino" (`BACKENDS`)."""
        if self.onnx is None:
            return "torch"
        return "openvino" if isinstance(self.onnx, OpenVinoBackbone) else "onnx"

    def autocast(self) -> Any:
        """A context manager that runs the encoder's forward passes in its compute precision on its device
        (`torch.autocast`; nothing for fp32). Outputs should be cast back with `.float()`."""
        return autocast(self.device, self.compute_precision)

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' name for `dim`."""
        return self.dim

    @classmethod
    def load(
        cls,
        name_or_path: str | Path | ModelFolder,
        pooling: str | None = None,
        pooler: str | None = None,
        max_length: int | None = None,
        normalize: bool | None = None,
        device: str | torch.device | None = None,
        backend: str | None = None,
    ) -> Encoder:
        """Load a hub name or local folder: a dictembed save, a sentence-transformers folder or a plain HF model
        (`dictembed.loading.load_parts`). `pooling` overrides the saved pooling; `pooler` "model" appends the
        model's own dense pooler (`model_pooler`); `normalize` True/False adds or removes a Normalize module.
        `device` defaults to CUDA, else MPS, else the CPU. `backend` "onnx" runs the backbone with ONNX Runtime
        on the CPU (an export's graph, else one exported now; inference only), "openvino" the same graph with
        OpenVINO (fp32 graphs only; compute precision "auto"'s, bf16 on a CPU with AMX:
        `dictembed.backends.openvino`), "torch" with torch; default: "onnx" for a folder written by `dictembed
        export --format onnx`, else "torch". An export written without its fp32 weights (the default of `dictembed
        export`) is a one-line error: `OnnxQueryEncoder` runs it."""
        if backend is not None and backend not in BACKENDS:
            raise DictEmbedError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
        check_flag("normalize", normalize, none=True)
        if pooling is not None:
            check_pooling(pooling)  # before the weights load
        model_folder, record, parts, target = open_encoder_parts(name_or_path, pooler, max_length, device)
        folder, saved = model_folder.path, record.encoder
        modules = [model_pooler(parts.backbone, str(folder))] if pooler == "model" else []
        encoder = cls(
            parts.backbone,
            parts.tokenizer,
            pooling=pooling or saved.get("pooling") or declared_pooling(parts.pooling) or "mean",
            modules=modules + parts.modules,
            max_length=max_length or parts.max_length,
            normalize=bool(normalize),
            record=record,
            pooling_module=parts.pooling,
            prompts=parts.prompts,
            default_prompt_name=parts.default_prompt,
        )
        encoder.similarity_fn_name = parts.similarity_fn_name or "cosine"
        encoder.truncate_dim = parts.truncate_dim
        if normalize is False:
            encoder.post = nn.ModuleList(m for m in encoder.post if not isinstance(m, st_modules.Normalize))
        record.base_model = record.base_model or str(name_or_path)
        if backend == "openvino":
            return attach_openvino(encoder.to("cpu"), folder)
        if backend == "onnx" or (backend is None and model_folder.is_exported):
            return attach(encoder.to("cpu"), folder)
        return encoder.to(target)

    def _texts(self, sentences: Sequence[str], prompt: str | None = None) -> list[str]:
        """Validate input, prefix a prompt, and wrap sentences in the template when pooling by prompt."""
        sentences = text_list(sentences, "sentences")
        check_texts(sentences)
        check_prompt(prompt)
        if prompt:
            sentences = [prompt + s for s in sentences]
        if self.pooling != "prompt":
            return list(sentences)
        return prompt_texts(self.tokenizer, sentences, self.max_length)

    @property
    def default_prompt(self) -> str | None:
        """The text of the model's default prompt (e5's "query: "), or None when it has none."""
        return self.prompts.get(self.default_prompt_name) if self.default_prompt_name else None

    def tokenize(self, sentences: Sequence[str], prompt: str | None = None) -> dict[str, torch.Tensor]:
        """Model inputs (`tokenize_counting_cuts`, the cut sentences counted for `report_truncated`), each sentence
        after `prompt`: by default the model's `default_prompt`, so that training, entry spaces, queries and `encode`
        prefix the same text ("" for none); with a prompt that the pooling excludes, `prompt_length` says how many
        leading tokens to skip."""
        prompt = self.default_prompt if prompt is None else prompt
        encoded, cut = tokenize_counting_cuts(self.tokenizer, self._texts(sentences, prompt), self.max_length)
        self._truncated += cut
        batch = dict(encoded)
        if prompt and not self.pooling_module.include_prompt:
            batch["prompt_length"] = torch.tensor([len(self.tokenizer(prompt)["input_ids"]) - 1])
        return batch

    def count_tokens(self, sentences: Sequence[str]) -> list[int]:
        """Each sentence's tokens after the default prompt, special ones included, before the cut at max_length."""
        sentences = text_list(sentences, "sentences")
        check_texts(sentences)
        if not sentences:
            return []
        prompt = self.default_prompt or ""
        encoded = self.tokenizer(
            [prompt + s for s in sentences],
            truncation=False,
            verbose=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        return [len(ids) for ids in encoded["input_ids"]]

    def unknown_only(self, sentences: Sequence[str]) -> list[bool]:
        """Per sentence: whether the tokenizer reads it as unknown tokens only (`texts.unknown_only`)."""
        encoded = self.tokenizer(
            list(sentences), add_special_tokens=False, truncation=False, verbose=False, return_attention_mask=False
        )
        return unknown_only(encoded["input_ids"], self.tokenizer.unk_token_id)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled sentence vectors, passed through the modules after pooling, for a tokenized batch."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        prompt_length = batch.pop("prompt_length", None)
        needs_all = self.pooling == "first_last_avg"
        if self.onnx is not None and torch.is_grad_enabled():
            raise DictEmbedError("an ONNX encoder is for inference only; load the model with backend='torch' to train")
        out = (self.onnx or self.backbone)(**batch, output_hidden_states=needs_all, return_dict=True)
        if self.pooling in CUSTOM_POOLINGS:
            states = out.hidden_states if needs_all else (out.last_hidden_state,)
            mask_positions = None
            if self.pooling == "prompt":
                mask_positions = (batch["input_ids"] == self.tokenizer.mask_token_id).int().argmax(1)
            vectors = pool(self.pooling, states, batch["attention_mask"], mask_positions)
        else:
            features = {"token_embeddings": out.last_hidden_state, "attention_mask": batch["attention_mask"]}
            if prompt_length is not None:
                features["prompt_length"] = prompt_length
            vectors = self.pooling_module(features)["sentence_embedding"]
        features = {"sentence_embedding": vectors, "attention_mask": batch["attention_mask"]}
        for module in self.post:
            features = module(features)
        return features["sentence_embedding"]

    def _prompt(self, prompt: str | None, prompt_name: str | None) -> str | None:
        """The prompt text to prefix (`st_encode.prompt_text`)."""
        return prompt_text(self.prompts, self.default_prompt_name, prompt, prompt_name)

    @torch.no_grad()
    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        normalize_embeddings: bool = False,
        device: str | torch.device | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
        quantize: str = "float32",
        *,
        precision: str | None = None,
        normalize: bool | None = None,
        show_progress: bool | None = None,
        **kwargs: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """Encode like `SentenceTransformer.encode`: a list gives an (n, dim) array, one string a (dim,) vector.

        `normalize_embeddings` L2-normalises; `quantize` quantises the output (int8, uint8, binary, ubinary) with
        sentence-transformers' `quantize_embeddings`; `convert_to_tensor` returns a torch tensor,
        `convert_to_numpy=False` alone a list of one tensor per sentence. `precision` is
        sentence-transformers' name for `quantize` (deprecated here: "precision" is the compute dtype);
        `normalize=` and `show_progress=` are older names of `normalize_embeddings` and `show_progress_bar`.
        """
        quantize = encode_keywords(quantize, precision, kwargs)
        texts, single = text_input(sentences)
        normalize_embeddings = encode_normalize(normalize_embeddings, normalize)
        show, output = encode_flags(show_progress_bar, show_progress, convert_to_numpy, convert_to_tensor)
        if device is not None:
            self.to(resolve_device(device))
        prefix = self._prompt(prompt, prompt_name)
        vectors = torch.cat([torch.zeros(0, self.dim), *self.embed(texts, batch_size, prefix, show)])
        return encode_output(vectors, normalize_embeddings, quantize, output, single)

    @torch.no_grad()
    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        prompt: str | None = None,
        show_progress: bool | None = None,
        chunk: int | None = None,
    ) -> Iterator[torch.Tensor]:
        """The one batching path: the float32 CPU vectors of `texts`, `chunk` texts at a time (default: all at once),
        in input order, each after `prompt` (default: the model's `default_prompt`; "" for none). Within a chunk the
        batches are length-sorted (less padding) and the order restored; the ONNX backend runs several batches at
        once. Truncated sentences are counted and reported once."""
        batch_size = check_batch_size(batch_size)
        texts = text_list(texts, "texts")
        check_chunk(chunk)
        check_prompt(prompt)
        chunk = chunk or max(len(texts), 1)
        show = len(texts) > 10 * batch_size if show_progress is None else show_progress
        was_training = self.training
        self.eval()
        self.reset_truncated()
        try:
            batches = sum(-(-len(texts[start : start + chunk]) // batch_size) for start in range(0, len(texts), chunk))
            with Progress(
                batches, "encode", unit="batch", rate_unit="batches", show=show, leave=False, logger=log
            ) as bar:
                for start in range(0, len(texts), chunk):
                    yield self._embed_chunk(texts[start : start + chunk], batch_size, prompt, bar.update)
        finally:
            self.train(was_training)
        self.report_truncated(len(texts))

    def _embed_chunk(
        self, texts: list[str], batch_size: int, prompt: str | None, done: Callable[[int], Any]
    ) -> torch.Tensor:
        """The vectors of `texts` in order, run as length-sorted batches (longest first); `done(1)` after each."""
        order = np.argsort([-len(s) if isinstance(s, str) else 0 for s in texts], kind="stable")
        batches = [[texts[i] for i in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]
        threads = self.onnx.threads if self.onnx is not None else 1
        threads = threads if len(batches) >= threads else 1  # too few batches: one at a time, on every core
        with (
            self._grad_off(),
            self.autocast(),
            contextlib.closing(self._forward_batches(batches, prompt, threads)) as pooled,
        ):
            chunks = [torch.zeros(0, self.dim)]
            for vectors in pooled:
                chunks.append(vectors)
                done(1)
        vectors = torch.empty(len(texts), self.dim)
        vectors[torch.from_numpy(order)] = torch.cat(chunks)
        return vectors

    def _grad_off(self) -> contextlib.AbstractContextManager:
        """inference_mode (no autograd bookkeeping, a few % faster on the CPU); under autocast no_grad, since in
        inference mode autocast re-casts every weight for every batch (13 % slower in bf16 on the CPU)."""
        return torch.inference_mode() if self.compute_precision == "fp32" else torch.no_grad()

    def _forward_batches(
        self, batches: list[list[str]], prefix: str | None, threads: int
    ) -> Generator[torch.Tensor, None, None]:
        """The pooled float32 CPU vectors of each batch, in order; with `threads` > 1 (ONNX) that many run at once
        (`OnnxBackbone.run_batches`), tokenised here in order so the tokenizer and the cut count stay on one thread."""
        tokenized = (self.tokenize(batch, prefix) for batch in batches)

        def pooled(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return self(batch).float().cpu()

        if threads <= 1 or self.onnx is None:
            yield from map(pooled, tokenized)
        else:  # the grad mode, autocast and the ONNX thread choice are per thread: each worker sets all three
            yield from self.onnx.run_batches(pooled, tokenized, threads, lambda: (self._grad_off(), self.autocast()))

    def reset_truncated(self) -> None:
        """Start counting the sentences `tokenize` cuts (training tokenizes too; a report covers one call)."""
        self._truncated = 0

    def report_truncated(self, total: int) -> None:
        """Warn once, with the count, when `tokenize` cut some of `total` sentences since `reset_truncated`."""
        if self._truncated:
            cut, length = self._truncated, self.max_length
            log.warning("%d of %d sentences were longer than %d tokens and were truncated", cut, total, length)
        self.reset_truncated()

    def similarity(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The similarity of every row of `a` with every row of `b`, like `SentenceTransformer.similarity`: the
        folder's `similarity_fn_name` (cosine unless it names dot, euclidean or manhattan), of vectors or matrices
        of numbers (arrays, tensors or lists) of the same width (`st_encode.similarity`)."""
        return similarity(a, b, self.similarity_fn_name)

    def hash_weights(self, digest: Any) -> None:
        """Feed `digest` (a hashlib object) the bytes of every tensor that enters the vectors: the state dict but
        the backbone's tensors that do not identify the encoder (`model_folder.identifies_encoder`: its own pooler,
        which `pooler="model"` copies into a module after the pooling)."""
        for name, tensor in self.state_dict().items():
            backbone = name.removeprefix("backbone.")
            if backbone == name or identifies_encoder(backbone):
                digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())

    def save(
        self,
        path: str | Path,
        record: RunRecord | dict[str, Any] | None = None,
        full_model: PreTrainedModel | None = None,
        name: str | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Save atomically as a sentence-transformers folder plus `dictembed.json` (full configuration) and a
        model card (README.md). Nothing is sent over the network. A folder that holds a model is replaced whole
        (its entry space, index and every other file with it) only with `overwrite`; a file, or a non-empty folder
        that holds no model, never (a one-line error).

        `full_model` (e.g. the *ForMaskedLM whose base model is this backbone) is saved in place of the bare
        backbone, so its head travels with the folder; AutoModel and SentenceTransformer still load it. `name`
        is the model's name in its card (default: the folder's name).
        """
        return save_encoder(self, path, record, full_model, name, overwrite)
