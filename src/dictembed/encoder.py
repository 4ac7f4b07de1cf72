"""Encoder: a Hugging Face backbone, a pooling and the sentence-transformers modules that follow it (Dense,
Normalize, ...). Loads a hub name or a folder, encodes like `SentenceTransformer.encode`, and saves a
sentence-transformers folder with a `dictembed.json` that records the full configuration.

cls / mean / max (and every other sentence-transformers pooling mode) are computed by sentence-transformers'
own `Pooling` module, and every module after it is the one sentence-transformers loads, so an `Encoder`
gives the same embeddings as `SentenceTransformer(path)`. Only `prompt` and `first_last_avg` pooling,
which sentence-transformers has no module for, are this package's code (`dictembed.pooling`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import pickle
import shutil
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from torch import nn
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.io import replace_dir
from dictembed.loading import HUB_ID, load_pretrained, resolve_model
from dictembed.pooling import ACTIVATIONS, CUSTOM_POOLINGS, POOLINGS, PROMPT_TEMPLATE, ST_POOLINGS, pool
from dictembed.record import RunRecord

log = logging.getLogger(__name__)
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")


def best_device() -> torch.device:
    """CUDA when available, else Apple MPS, else the CPU (as sentence-transformers chooses)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _max_length(tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel) -> int:
    """The smaller of the tokenizer's limit, the model's position embeddings (RoBERTa-style models lose
    pad_token_id + 1 positions) and 512."""
    positions = getattr(backbone.config, "max_position_embeddings", 512) or 512
    if "roberta" in backbone.config.model_type:
        positions -= (backbone.config.pad_token_id or 0) + 1
    return int(min(tokenizer.model_max_length or 512, positions, 512))


def _st_modules() -> Any:
    from sentence_transformers.sentence_transformer import modules

    return modules


class Encoder(nn.Module):
    """Backbone + pooling + modules: `forward` gives differentiable sentence vectors, `encode` arrays."""

    similarity_fn_name = "cosine"
    compute_precision = "fp32"  # inference autocast: fp32 (none), bf16 or fp16; see `set_precision`
    onnx_backbone: Any = None  # an ONNX Runtime session run in place of `backbone` (dictembed.onnx_backend)
    onnx_manifest: dict[str, Any] | None = None  # what that ONNX graph is (the export's onnx/export.json)

    def __init__(
        self,
        backbone: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        pooling: str = "mean",
        modules: Sequence[nn.Module] = (),
        max_length: int = 256,
        normalize: bool = False,
        record: RunRecord | None = None,
        pooling_module: nn.Module | None = None,
        prompts: dict[str, str] | None = None,
        default_prompt_name: str | None = None,
    ) -> None:
        """`modules` are sentence-transformers modules applied after pooling (Dense, Normalize, LayerNorm...);
        `normalize=True` appends a Normalize module when there is none; `pooling_module` is a loaded
        sentence-transformers Pooling module (kept for its settings, e.g. include_prompt); `record` is the
        run record the model was loaded with (what it is and how it was trained)."""
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling_module = pooling_module or _st_modules().Pooling(self.hidden_size, "mean")
        self.pooling = pooling
        self.post = nn.ModuleList(modules)
        if normalize and not self.normalize:
            self.post.append(_st_modules().Normalize())
        self.max_length = max_length
        self.record = record or RunRecord(version=0)
        self.prompts = dict(prompts or {})
        self.default_prompt_name = default_prompt_name
        self._truncated = 0  # sentences `tokenize` cut at max_length since `reset_truncated`

    # ----------------------------------------------------------------- settings
    @property
    def pooling(self) -> str:
        return self._pooling

    @pooling.setter
    def pooling(self, name: str) -> None:
        if name not in POOLINGS and name not in ST_POOLINGS:
            raise DictEmbedError(f"unknown pooling {name!r}; choose from {', '.join(POOLINGS)}")
        if name == "prompt" and self.tokenizer.mask_token is None:
            raise DictEmbedError("prompt pooling needs a tokenizer with a mask token")
        if name in ST_POOLINGS and self.pooling_module.pooling_mode != name:
            self.pooling_module = _st_modules().Pooling(
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
        return any(isinstance(m, _st_modules().Normalize) for m in self.post)

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
            if hasattr(module, "get_embedding_dimension") and hasattr(module, "out_features"):
                dim = module.get_embedding_dimension()
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
        encoder.onnx_backbone, encoder.onnx_manifest = self.onnx_backbone, self.onnx_manifest
        return encoder

    def set_precision(self, precision: str | None = "auto") -> Encoder:
        """Set the compute precision of inference (`autocast`): fp32, bf16, fp16, or "auto" (bf16 on a CUDA
        GPU that supports it, else fp32), resolved for the device the encoder is on now. Returns self."""
        from dictembed.devices import resolve_precision

        self.compute_precision = resolve_precision(precision, self.device)
        return self

    def autocast(self) -> Any:
        """A context manager that runs the encoder's forward passes in its compute precision on its device
        (`torch.autocast`; nothing for fp32). Outputs should be cast back with `.float()`."""
        from dictembed.devices import autocast

        return autocast(self.device, self.compute_precision)

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' name for `dim`."""
        return self.dim

    # ----------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        name_or_path: str | Path,
        pooling: str | None = None,
        pooler: str | None = None,
        max_length: int | None = None,
        normalize: bool | None = None,
        device: str | torch.device | None = None,
        backend: str | None = None,
    ) -> Encoder:
        """Load a hub name or local folder: a dictembed save, a sentence-transformers folder or a plain HF model.

        A sentence-transformers folder is loaded by sentence-transformers itself, so its Pooling, Dense,
        Normalize and other standard modules are honoured. `pooling` overrides the saved pooling; `pooler`
        "model" appends the model's own dense pooler (BERT: `pooler.dense` + tanh; RoBERTa: `lm_head.dense` +
        GELU) as a Dense module; `normalize` True/False adds or removes a Normalize module. `device`
        defaults to CUDA, else MPS, else the CPU. `backend` "onnx" runs the backbone with ONNX Runtime on the
        CPU (an export's graph, else one exported now; inference only), "torch" with torch; default: "onnx"
        for a folder written by `dictembed export --format onnx`, else "torch".
        """
        if backend not in (None, "torch", "onnx"):
            raise DictEmbedError(f"unknown backend {backend!r}; choose from torch, onnx")
        folder = resolve_model(name_or_path)
        record = RunRecord.load(folder)
        saved = record.encoder
        modules: list[nn.Module] = []
        pooling_module = None
        prompts: dict[str, str] = {}
        default_prompt = None
        if (folder / "modules.json").is_file():
            st_model = _load_sentence_transformer(folder)
            first, *rest = list(st_model)
            tokenizer, backbone = first.tokenizer, first.auto_model
            if rest and isinstance(rest[0], _st_modules().Pooling):
                pooling_module, *rest = rest
            modules = rest
            prompts, default_prompt = dict(st_model.prompts or {}), st_model.default_prompt_name
            length = first.max_seq_length
        else:
            try:
                tokenizer = load_pretrained(AutoTokenizer, str(folder))
                backbone = load_pretrained(AutoModel, str(folder))
            except (SafetensorError, RuntimeError, pickle.UnpicklingError) as err:
                raise _load_error(folder, err) from err
            length = None
        _check_tokenizer(tokenizer, backbone, folder)
        declared = pooling_module.pooling_mode if pooling_module is not None else None
        if isinstance(declared, (list, tuple)):
            declared = None  # several concatenated modes: kept in the module, not nameable
        chosen = pooling or saved.get("pooling") or declared or "mean"
        if pooler == "model":
            modules.insert(0, model_pooler(backbone, str(folder)))
        encoder = cls(
            backbone,
            tokenizer,
            pooling=chosen,
            modules=modules,
            max_length=max_length or saved.get("max_length") or length or _max_length(tokenizer, backbone),
            normalize=bool(normalize),
            record=record,
            pooling_module=pooling_module,
            prompts=prompts,
            default_prompt_name=default_prompt,
        )
        if normalize is False:
            encoder.post = nn.ModuleList(m for m in encoder.post if not isinstance(m, _st_modules().Normalize))
        record.base_model = record.base_model or str(name_or_path)
        from dictembed.onnx_backend import attach, is_exported

        if backend == "onnx" or (backend is None and is_exported(folder)):
            return attach(encoder.to("cpu"), folder)
        return encoder.to(device or best_device())

    # ----------------------------------------------------------------- forward
    def _texts(self, sentences: Sequence[str], prompt: str | None = None) -> list[str]:
        """Validate input, prefix a prompt, and wrap sentences in the template when pooling by prompt."""
        for i, s in enumerate(sentences):
            if not isinstance(s, str):
                raise DictEmbedError(f"sentence {i} is {type(s).__name__}, not str")
        if prompt:
            sentences = [prompt + s for s in sentences]
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

    def tokenize(self, sentences: Sequence[str], prompt: str | None = None) -> dict[str, torch.Tensor]:
        """Tokenize with dynamic padding (to the longest in the batch) and truncation at max_length; with a
        prompt that the pooling excludes, `prompt_length` says how many leading tokens to skip. Sentences cut at
        max_length are added to `self._truncated` (`encode` reports them)."""
        texts = self._texts(sentences, prompt)
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        full = (encoded["attention_mask"].sum(1) >= self.max_length).nonzero().flatten().tolist()
        if full:  # only rows that fill the window can have been cut: the fast tokenizer kept their overflow
            if encoded.encodings:
                cut = sum(bool(encoded.encodings[i].overflowing) for i in full)
            else:
                ids = self.tokenizer([texts[i] for i in full], truncation=False)["input_ids"]
                cut = sum(len(row) > self.max_length for row in ids)
            self._truncated += cut
        batch = dict(encoded)
        if prompt and not self.pooling_module.include_prompt:
            batch["prompt_length"] = torch.tensor(len(self.tokenizer(prompt)["input_ids"]) - 1)
        return batch

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Pooled sentence vectors, passed through the modules after pooling, for a tokenized batch."""
        batch = {k: v.to(self.device) for k, v in batch.items()}
        prompt_length = batch.pop("prompt_length", None)
        needs_all = self.pooling == "first_last_avg"
        if self.onnx_backbone is not None and torch.is_grad_enabled():
            raise DictEmbedError("an ONNX encoder is for inference only; load the model with backend='torch' to train")
        out = (self.onnx_backbone or self.backbone)(**batch, output_hidden_states=needs_all, return_dict=True)
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
        """The prompt text to prefix: `prompt`, else the named one, else the model's default."""
        if prompt is not None:
            return prompt
        name = prompt_name or self.default_prompt_name
        if name is None:
            return None
        if name not in self.prompts:
            raise DictEmbedError(f"unknown prompt_name {name!r}; this model has {sorted(self.prompts) or 'none'}")
        return self.prompts[name]

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
        precision: str = "float32",
        *,
        normalize: bool | None = None,
        show_progress: bool | None = None,
        **kwargs: Any,
    ) -> np.ndarray | torch.Tensor:
        """Encode like `SentenceTransformer.encode`: a list gives an (n, dim) array, one string a (dim,) vector.

        Batches are length-sorted and the order restored. `normalize_embeddings` L2-normalises;
        `precision` quantises (int8, uint8, binary, ubinary) with sentence-transformers' `quantize_embeddings`;
        `convert_to_tensor` returns a torch tensor. `normalize=` and `show_progress=` are the older names.
        MTEB's DataLoader of text batches is accepted too (see the MTEB protocol block).
        """
        sentences = self._mteb_texts(sentences)
        if kwargs.get("output_value", "sentence_embedding") != "sentence_embedding":
            raise DictEmbedError("only output_value='sentence_embedding' is supported")
        if precision not in PRECISIONS:
            raise DictEmbedError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
        if batch_size < 1:
            raise DictEmbedError(f"batch_size must be at least 1, got {batch_size}")
        single = isinstance(sentences, str)
        if not single and not isinstance(sentences, Iterable):
            raise DictEmbedError(f"sentences must be a str or a list of str, got {type(sentences).__name__}")
        texts = [sentences] if single else list(sentences)
        normalize_embeddings = normalize if normalize is not None else normalize_embeddings
        show = show_progress if show_progress is not None else show_progress_bar
        if device is not None:
            self.to(device)
        prefix = self._prompt(prompt, prompt_name)
        was_training = self.training
        self.eval()
        order = np.argsort([-len(s) if isinstance(s, str) else 0 for s in texts], kind="stable")
        show = len(texts) > 10 * batch_size if show is None else show
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        threads = self.onnx_backbone.threads if self.onnx_backbone is not None else 1
        threads = threads if len(batches) >= threads else 1  # too few batches: one at a time, on every core
        chunks = [torch.zeros(0, self.dim)]
        self.reset_truncated()
        batch_texts = [[texts[i] for i in rows] for rows in batches]
        with (
            self._grad_off(),
            self.autocast(),
            contextlib.closing(self._forward_batches(batch_texts, prefix, threads)) as pooled,
        ):
            for vectors in tqdm(pooled, total=len(batches), desc="encode", disable=not show, leave=False):
                chunks.append(vectors)
        self.train(was_training)
        self.report_truncated(len(texts))
        vectors = torch.empty(len(texts), self.dim)
        vectors[torch.from_numpy(order)] = torch.cat(chunks)
        if normalize_embeddings:
            vectors = torch.nn.functional.normalize(vectors, dim=-1)
        result: np.ndarray | torch.Tensor = vectors.numpy()
        if precision != "float32":
            from sentence_transformers import quantize_embeddings

            result = quantize_embeddings(result, precision=precision)
        if convert_to_tensor or not convert_to_numpy:
            result = torch.from_numpy(np.asarray(result))
        return result[0] if single else result

    def _grad_off(self) -> contextlib.AbstractContextManager:
        """inference_mode (as sentence-transformers does): no autograd bookkeeping at all, a few % faster than
        no_grad on the CPU. Under autocast no_grad: in inference mode autocast re-casts every weight for every
        batch (its cast cache is off there), 13 % slower in bf16 on the CPU."""
        return torch.inference_mode() if self.compute_precision == "fp32" else torch.no_grad()

    def _forward_batches(self, batches: list[list[str]], prefix: str | None, threads: int) -> Iterator[torch.Tensor]:
        """The pooled float32 CPU vectors of each batch, in order. With `threads` > 1 (the ONNX backend) up to
        `threads` batches run at once on worker threads, each run single-threaded (`OnnxBackbone.single`); the
        batches are the same either way, and are tokenised here, in order, so the tokenizer and the truncation
        count stay on one thread."""
        tokenized = (self.tokenize(batch, prefix) for batch in batches)

        def pooled(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return self(batch).float().cpu()

        if threads <= 1:
            yield from map(pooled, tokenized)
            return

        def run(batch: dict[str, torch.Tensor]) -> torch.Tensor:
            with self._grad_off(), self.autocast(), self.onnx_backbone.one_thread():  # all three are per thread
                return pooled(batch)

        pool = ThreadPoolExecutor(threads, thread_name_prefix="dictembed-encode")
        try:
            pending: deque[Future] = deque()
            for batch in tokenized:
                if len(pending) >= 2 * threads:
                    yield pending.popleft().result()
                pending.append(pool.submit(run, batch))
            while pending:
                yield pending.popleft().result()
        finally:  # an error or an interrupt: the batches not yet started are dropped, not run
            pool.shutdown(wait=True, cancel_futures=True)

    def reset_truncated(self) -> None:
        """Start counting the sentences `tokenize` cuts (training tokenizes too; a report covers one call)."""
        self._truncated = 0

    def report_truncated(self, total: int) -> None:
        """Warn once, with the count, when `tokenize` cut some of `total` sentences since `reset_truncated`."""
        if self._truncated:
            log.warning(
                "%d of %d sentences were longer than %d tokens and were truncated",
                self._truncated,
                total,
                self.max_length,
            )
        self.reset_truncated()

    def similarity(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity of every row of `a` with every row of `b`, like `SentenceTransformer.similarity`."""
        from sentence_transformers.util import cos_sim

        return cos_sim(a, b)

    # ------------------------------------------------------------------ saving
    def save(
        self,
        path: str | Path,
        record: RunRecord | dict[str, Any] | None = None,
        full_model: PreTrainedModel | None = None,
    ) -> Path:
        """Save atomically as a sentence-transformers folder plus `dictembed.json` (full configuration) and a
        model card (README.md). Nothing is sent over the network.

        `full_model` (e.g. the *ForMaskedLM whose base model is this backbone) is saved in place of the bare
        backbone, so its head travels with the folder; AutoModel and SentenceTransformer still load it.
        """
        from sentence_transformers import SentenceTransformer

        st = _st_modules()
        path = Path(path)
        staging = path.with_name(path.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        self.backbone.save_pretrained(staging)
        self.tokenizer.save_pretrained(staging)
        if self.pooling in CUSTOM_POOLINGS:
            log.warning(
                "pooling %r has no sentence-transformers equivalent: the folder declares mean pooling for "
                "SentenceTransformer(path); load it with dictembed.Encoder.load(path) for %r pooling",
                self.pooling,
                self.pooling,
            )
            pooling_module = st.Pooling(self.hidden_size, "mean")
        else:
            pooling_module = copy.deepcopy(self.pooling_module)
        modules = [
            st.Transformer(str(staging), max_seq_length=self.max_length),
            pooling_module,
            *(copy.deepcopy(m).cpu() for m in self.post),
        ]
        SentenceTransformer(
            modules=modules, device="cpu", prompts=self.prompts or None, default_prompt_name=self.default_prompt_name
        ).save(str(staging), create_model_card=False)
        if full_model is not None:
            full_model.save_pretrained(staging)
        if not isinstance(record, RunRecord):
            record = RunRecord.from_dict({"base_model": self.base_model, **(record or {})})
        record.encoder = self.config
        record.base_model = record.base_model or self.base_model
        record.save(staging)
        _write_card(staging, record.to_dict())
        replace_dir(staging, path)
        self.record = record
        return path

    # ------------------------------------------------------------------ MTEB protocol
    # `mteb.evaluate(encoder, tasks)` takes an Encoder as it is (mteb's EncoderProtocol): it reads
    # `mteb_model_meta`, calls `encode` with a torch DataLoader of {"text": [...]} batches (flattened by
    # `_mteb_texts` at the top of `encode`; mteb's keyword arguments land in `**kwargs`), and scores with
    # `similarity` and `similarity_pairwise` (cosine).
    @staticmethod
    def _mteb_texts(sentences: Any) -> Any:
        """The texts of an MTEB input (a torch DataLoader of {"text": [...]} batches) as one list, in order;
        any other input is returned unchanged."""
        from torch.utils.data import DataLoader

        if not isinstance(sentences, DataLoader):
            return sentences
        texts: list[str] = []
        for batch in sentences:
            if not isinstance(batch, dict) or "text" not in batch:
                found = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
                raise DictEmbedError(f"MTEB input batches must hold texts (a 'text' field), got {found}")
            texts.extend(batch["text"])
        return texts

    def similarity_pairwise(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity of each row of `a` with the same row of `b`, like sentence-transformers'."""
        from sentence_transformers.util import pairwise_cos_sim

        return pairwise_cos_sim(a, b)

    def _mteb_name(self) -> tuple[str, str]:
        """MTEB's "org/name" and revision: a Hub snapshot's repo and commit; else the hub name (the embedded
        MiniLM's too), or "dictembed/<folder name>" for a local folder (MTEB needs an organisation part), with a
        hash of the weights as the revision, so that MTEB never files results of different weights together."""
        source = str(getattr(self.backbone, "name_or_path", "") or self.base_model)
        parts = Path(source).parts
        for i, part in enumerate(parts[:-2]):
            if part.startswith("models--") and parts[i + 1] == "snapshots":
                return part[len("models--") :].replace("--", "/", 1), parts[i + 2]
        if HUB_ID.match(source) and "/" in source and not Path(source).exists():
            return source, self._mteb_weights_hash()
        from dictembed.model_card import hub_base_model  # the embedded MiniLM folder -> its hub name

        return hub_base_model(source) or f"dictembed/{Path(source).name or 'model'}", self._mteb_weights_hash()

    def hash_weights(self, digest: Any) -> None:
        """Feed `digest` (a hashlib object) the bytes of every tensor that enters the vectors: the state dict
        but the backbone's own pooler, which never does (`pooler="model"` copies it into a module after the
        pooling) and which a checkpoint without one draws afresh at every load."""
        for name, tensor in self.state_dict().items():
            if not name.startswith("backbone.pooler."):
                digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())

    def _mteb_weights_hash(self) -> str:
        """A short hash of the weights, remembered until a tensor moves or changes in place (its _version)."""
        import hashlib

        tensors = list(self.state_dict().values())
        key = tuple((t.data_ptr(), t._version) for t in tensors)
        memo = getattr(self, "_mteb_hash_memo", None)
        if memo is not None and memo[0] == key:
            return memo[1]
        digest = hashlib.sha1()
        self.hash_weights(digest)
        self._mteb_hash_memo = (key, f"weights-{digest.hexdigest()[:12]}")
        return self._mteb_hash_memo[1]

    @property
    def mteb_model_meta(self) -> Any:
        """This model described for MTEB (an `mteb.models.ModelMeta`): name, revision, dimension, max tokens,
        parameters, cosine similarity, the method's citation; the pooling, normalisation, precision and ONNX
        backend are experiment settings (`_mteb_settings`), so MTEB keeps the results of different ones apart."""
        from dictembed.extras import require
        from dictembed.model_card import citation, hub_base_model

        model_meta = require("mteb", "mteb.models").ModelMeta
        name, revision = self._mteb_name()
        method = self.record.method
        return model_meta(
            loader=None,
            name=name,
            revision=revision,
            release_date=None,
            languages=None,
            n_parameters=sum(p.numel() for p in self.parameters()),
            memory_usage_mb=None,
            max_tokens=self.max_length,
            embed_dim=self.dim,
            license=None,
            open_weights=True,
            public_training_code=None,
            public_training_data=None,
            framework=["PyTorch", "Sentence Transformers"],
            similarity_fn_name=self.similarity_fn_name,
            use_instructions=False,
            training_datasets=None,
            adapted_from=hub_base_model(self.base_model) if method else None,
            citation=citation(method),
            experiment_kwargs=self._mteb_settings(),
        )

    def _mteb_settings(self) -> dict[str, Any]:
        """The settings that make other vectors from the same weights, for MTEB's experiment name (its result
        folders): pooling and normalisation; a precision other than fp32 and an ONNX graph (e.g. int8) too."""
        settings: dict[str, Any] = {"pooling": self.pooling, "normalize": self.normalize}
        if self.compute_precision != "fp32":
            settings["precision"] = self.compute_precision
        if self.onnx_manifest is not None:  # the quantisation and its settings, the fusions: the whole manifest
            import hashlib

            graph = hashlib.sha1(json.dumps(self.onnx_manifest, sort_keys=True).encode()).hexdigest()[:8]
            settings["backend"] = f"onnx-{self.onnx_manifest.get('quantize') or 'fp32'}-{graph}"
        return settings


def _load_sentence_transformer(folder: Path) -> Any:
    """`SentenceTransformer(folder)` on the CPU from local files only, its failures as a ModelLoadError."""
    from sentence_transformers import SentenceTransformer

    try:
        declared = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        paths = [str(module["path"]) for module in declared]
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ModelLoadError(f"{folder / 'modules.json'}: corrupt module list ({type(err).__name__}: {err})") from None
    if not paths:
        raise ModelLoadError(f"{folder / 'modules.json'}: corrupt module list (no modules)")
    root = folder.resolve()
    for path in paths:
        if not (folder / path).resolve().is_relative_to(root):
            raise ModelLoadError(f"{folder / 'modules.json'}: module path {path!r} leads outside the model folder")
    try:
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as err:
        raise _load_error(folder, err) from err
    except (SafetensorError, pickle.UnpicklingError) as err:
        raise _load_error(folder, err) from err
    first = model[0] if len(model) else None
    if not isinstance(first, _st_modules().Transformer) or first.tokenizer is None:
        raise ModelLoadError(
            f"model folder {folder}: its first module is {type(first).__name__}, not a Transformer with a tokenizer"
        )
    return model


def _load_error(folder: Path, err: BaseException) -> ModelLoadError:
    """A one-line error for a model folder that failed to load, naming the first JSON or safetensors file in it
    (or in its module folders) that does not parse, the usual cause; else the loader's own first line."""
    from safetensors import safe_open

    candidates = [*folder.glob("*.json"), *folder.glob("*/*.json"), *folder.glob("*.safetensors")]
    candidates += folder.glob("*/*.safetensors")
    for path in sorted(p for p in candidates if p.parent.name != "entry_space"):
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
            else:
                with safe_open(str(path), "pt") as weights:
                    weights.keys()
        except (OSError, ValueError, SafetensorError) as bad:
            detail = " ".join(str(bad).split()) or type(bad).__name__
            return ModelLoadError(f"cannot load model folder {folder}: {path} is corrupt or truncated ({detail})")
    lines = str(err).strip().splitlines() or [type(err).__name__]
    if isinstance(err, pickle.UnpicklingError):
        pickled = ", ".join(sorted(p.name for p in folder.glob("*.bin"))) or "a pickled weights file"
        return ModelLoadError(f"cannot load model folder {folder}: {pickled} was refused ({lines[0]})")
    return ModelLoadError(f"cannot load model folder {folder}: {lines[0]}")


def _check_tokenizer(tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel, folder: Path) -> None:
    """Refuse a tokenizer far smaller than the model's vocabulary (its files are missing or broken, and every
    word would encode as the unknown token)."""
    embeddings = backbone.get_input_embeddings()
    rows = int(getattr(embeddings, "num_embeddings", 0) or 0)
    if rows and len(tokenizer) < 0.5 * rows:
        raise ModelLoadError(
            f"model folder {folder}: the tokenizer has {len(tokenizer)} tokens for the model's {rows}; "
            "its tokenizer files (tokenizer.json, vocab.txt, ...) are missing or broken"
        )


def _write_card(folder: Path, record: dict[str, Any]) -> None:
    """The model card (README.md) from the run record."""
    from dictembed.model_card import write_model_card

    write_model_card(folder, record)


def model_pooler(backbone: PreTrainedModel, name_or_path: str) -> nn.Module:
    """A copy of the model's own pooler as a sentence-transformers Dense module: BERT's `pooler.dense` + tanh,
    or for RoBERTa-style models (whose pooler is untrained) the MLM head's `lm_head.dense` + GELU, as DefSent+
    does."""
    from transformers import AutoModelForMaskedLM

    dense = getattr(getattr(backbone, "pooler", None), "dense", None)
    activation = "tanh"
    if dense is None or "roberta" in backbone.config.model_type:
        mlm = load_pretrained(AutoModelForMaskedLM, name_or_path)
        dense = getattr(getattr(mlm, "lm_head", None), "dense", None)
        activation = "gelu"
        if dense is None:
            raise ModelLoadError(f"model {name_or_path!r} has neither a pooler nor an lm_head.dense to build one")
    return _st_modules().Dense(
        dense.in_features,
        dense.out_features,
        activation_function=ACTIVATIONS[activation](),
        init_weight=dense.weight.detach().clone(),
        init_bias=dense.bias.detach().clone(),
    )
