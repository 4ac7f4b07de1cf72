"""MTEB evaluation, offline: run `mteb.evaluate` on an Encoder (or any model mteb accepts) and return each
task's main score x 100.

`MtebEncoder` adapts an `Encoder` to mteb's encoder protocol (`mteb_model_meta`, `encode` on mteb's
DataLoaders, `similarity` / `similarity_pairwise`); `evaluate_mteb` wraps an Encoder in it. Task data comes
from the local Hugging Face `datasets` cache or from a task's own `load_data`; a task whose data is not there
is one `DictEmbedError` naming it, never a network call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import pairwise_cos_sim
from torch.utils.data import DataLoader

from dictembed.base_model import base_hub_name, hub_base_model
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.model_folder import HUB_ID
from dictembed.recipes.papers import citation
from dictembed.texts import check_batch_size

log = logging.getLogger(__name__)


class MtebEncoder:
    """An `Encoder` as mteb's encoder protocol: `mteb.evaluate(MtebEncoder(encoder), tasks)` reads
    `mteb_model_meta`, calls `encode` with a DataLoader of {"text": [...]} batches (mteb's keyword arguments
    land in `**kwargs`), and scores with `similarity` and `similarity_pairwise` (cosine)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._hash: tuple[Any, str] | None = None

    def encode(
        self,
        inputs: Any,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        *,
        task_metadata: Any = None,
        hf_split: str | None = None,
        hf_subset: str | None = None,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> Any:
        """The vectors of an mteb input (a DataLoader of text batches, flattened in order) or of a list of texts;
        mteb's own keywords (the task, split, subset and prompt type) are not the encoder's; the other keywords
        (mteb's `encode_kwargs`: normalize_embeddings, prompt, ...) are `Encoder.encode`'s."""
        texts = mteb_texts(inputs)
        return self.encoder.encode(texts, batch_size=batch_size, show_progress_bar=show_progress_bar, **kwargs)

    def similarity(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity of every row of `a` with every row of `b`."""
        return self.encoder.similarity(a, b)

    def similarity_pairwise(self, a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Cosine similarity of each row of `a` with the same row of `b`, like sentence-transformers'."""
        return pairwise_cos_sim(a, b)

    def name(self) -> tuple[str, str]:
        """MTEB's "org/name" and revision: a Hub snapshot's repo and commit; else the hub name (the embedded
        MiniLM's too), or "dictembed/<folder name>" for a local folder (MTEB needs an organisation part), with a
        hash of the weights as the revision, so that MTEB never files results of different weights together."""
        encoder = self.encoder
        source = str(getattr(encoder.backbone, "name_or_path", "") or encoder.base_model)
        parts = Path(source).parts
        for i, part in enumerate(parts[:-2]):
            if part.startswith("models--") and parts[i + 1] == "snapshots":
                return part[len("models--") :].replace("--", "/", 1), parts[i + 2]
        if HUB_ID.match(source) and "/" in source and not Path(source).exists():
            return source, self.weights_hash()
        return hub_base_model(source) or f"dictembed/{Path(source).name or 'model'}", self.weights_hash()

    def weights_hash(self) -> str:
        """A short hash of the weights, remembered until a tensor moves or changes in place (its _version)."""
        tensors = list(self.encoder.state_dict().values())
        key = tuple((t.data_ptr(), t._version) for t in tensors)
        if self._hash is None or self._hash[0] != key:
            digest = hashlib.sha1()
            self.encoder.hash_weights(digest)
            self._hash = (key, f"weights-{digest.hexdigest()[:12]}")
        return self._hash[1]

    def settings(self) -> dict[str, Any]:
        """The settings that make other vectors from the same weights, for MTEB's experiment name (its result
        folders): pooling and normalisation; a compute precision other than fp32 and an ONNX graph too."""
        encoder = self.encoder
        settings: dict[str, Any] = {"pooling": encoder.pooling, "normalize": encoder.normalize}
        if encoder.compute_precision != "fp32":
            settings["precision"] = encoder.compute_precision
        if encoder.onnx is not None:
            settings["backend"] = encoder.onnx.identity
        return settings

    @property
    def mteb_model_meta(self) -> Any:
        """The model described for MTEB (an `mteb.models.ModelMeta`): name, revision, dimension, max tokens,
        parameters, cosine similarity, the method's citation; the pooling, normalisation, precision and ONNX
        backend are experiment settings, so MTEB keeps the results of different ones apart."""
        model_meta = require("mteb", "mteb.models").ModelMeta
        encoder = self.encoder
        name, revision = self.name()
        method = encoder.record.method
        return model_meta(
            loader=None,
            name=name,
            revision=revision,
            release_date=None,
            languages=None,
            n_parameters=sum(p.numel() for p in encoder.parameters()),
            memory_usage_mb=None,
            max_tokens=encoder.max_length,
            embed_dim=encoder.dim,
            license=None,
            open_weights=True,
            public_training_code=None,
            public_training_data=None,
            framework=["PyTorch", "Sentence Transformers"],
            similarity_fn_name=encoder.similarity_fn_name,
            use_instructions=False,
            training_datasets=None,
            adapted_from=base_hub_name({**encoder.record.to_dict(), "base_model": encoder.base_model})
            if method
            else None,
            citation=citation(method),
            experiment_kwargs=self.settings(),
        )


def mteb_texts(inputs: Any) -> list[str]:
    """The texts of an MTEB input (a torch DataLoader of {"text": [...]} batches) as one list, in order; any other
    input is taken as a list of texts."""
    if not isinstance(inputs, DataLoader):
        return inputs
    texts: list[str] = []
    for batch in inputs:
        if not isinstance(batch, dict) or "text" not in batch:
            found = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
            raise DictEmbedError(f"MTEB input batches must hold texts (a 'text' field), got {found}")
        texts.extend(batch["text"])
    return texts


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def resolve_tasks(tasks: str | Any | Iterable[str | Any]) -> list[Any]:
    """mteb task objects for task names or task objects (one, or a list of them); an unknown name, none at all
    (None, an empty list) or anything else is a one-line error."""
    mteb = require("mteb")
    single = isinstance(tasks, str) or isinstance(tasks, mteb.AbsTask)
    items = [tasks] if single else list(tasks) if isinstance(tasks, Iterable) else []
    if not items:
        raise DictEmbedError(f"tasks must be an MTEB task name or task, or a non-empty list of them, got {tasks!r}")
    resolved = []
    for item in items:
        if isinstance(item, mteb.AbsTask):
            resolved.append(item)
            continue
        try:
            resolved.append(mteb.get_task(str(item)))
        except (KeyError, ValueError) as err:
            hint = _first_line(err).strip("\"'")
            hint = (
                " (did you mean" + hint.split("Did you mean", 1)[1].rstrip("?") + "?)" if "Did you mean" in hint else ""
            )
            raise DictEmbedError(f"unknown MTEB task {item!r}{hint}") from None
    return resolved


def _data_errors() -> tuple[type[BaseException], ...]:
    """What `datasets` / `huggingface_hub` raise for data that cannot be had (offline, missing, gated)."""
    from datasets.exceptions import DatasetsError

    return (OSError, DatasetsError)  # OfflineModeIsEnabled, ConnectionError, HfHubHTTPError are OSErrors


def load_task_data(task: Any) -> list[Any]:
    """Load a task's data (an aggregate task's subtasks' data) before evaluating, so that missing data is
    one error naming the task rather than a failure deep inside mteb; return the tasks it loaded."""
    from mteb.abstasks.aggregated_task import AbsTaskAggregate

    if isinstance(task, AbsTaskAggregate):
        return [loaded for subtask in task.metadata.tasks for loaded in load_task_data(subtask)]
    if task.data_loaded:
        return []
    try:
        task.load_data()
    except _data_errors() as err:
        raise DictEmbedError(
            f"MTEB task {task.metadata.name!r}: its data is not available offline ({_first_line(err)})"
        ) from None
    return [task]


def evaluate_mteb(
    encoder: Any,
    tasks: str | Any | Iterable[str | Any],
    output_folder: str | Path | None = None,
    batch_size: int = 32,
) -> dict[str, float]:
    """Each task's MTEB main score x 100 (e.g. cosine Spearman x 100 for STS, as the rest of this package
    reports), averaged over the task's evaluation splits and subsets, keyed by task name.

    `encoder` is an Encoder (or anything `mteb.evaluate` takes), or a model name or folder to load as one.
    `tasks` are mteb task names or task objects. With `output_folder`, mteb writes its result JSON files there
    (an mteb `ResultCache`), and a task whose results it already holds for the same weights and settings
    (`MtebEncoder.mteb_model_meta`: the revision is a hash of the weights) is read back, not run again, so a run
    cut short resumes at its first missing task; without it nothing is written. A task whose data is not in the
    local cache raises a one-line `DictEmbedError` (mteb asks the Hub for it first: offline, after its retries).
    """
    mteb = require("mteb")
    resolved = resolve_tasks(tasks)  # an unknown name fails before any model is loaded
    check_batch_size(batch_size)
    if encoder is None:
        raise DictEmbedError("encoder must be an Encoder, a model name or folder, or a model mteb takes; got None")
    if isinstance(encoder, (str, Path)):
        encoder = Encoder.load(encoder)
    if isinstance(encoder, Encoder):
        encoder = MtebEncoder(encoder)
    cache = mteb.ResultCache(cache_path=Path(output_folder)) if output_folder is not None else None
    scores: dict[str, float] = {}
    for task in resolved:
        name = task.metadata.name
        loaded = load_task_data(task)
        try:
            result = mteb.evaluate(
                encoder,
                task,
                cache=cache,
                overwrite_strategy="only-missing",
                co2_tracker=False,
                show_progress_bar=False,
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
            )
        finally:
            for done in loaded:  # only what was loaded here: a caller's preloaded task keeps its data
                done.unload_data()
        if result.exceptions or not result.task_results:
            reason = result.exceptions[0].exception if result.exceptions else "no result"
            raise DictEmbedError(f"MTEB task {name!r} failed: {str(reason).strip().splitlines()[0]}")
        scores[name] = 100.0 * float(result.task_results[0].get_score())
        log.info("MTEB %s: %.2f", name, scores[name])
    return scores
