"""MTEB evaluation, offline: run `mteb.evaluate` on an Encoder (or any model mteb accepts) and return each
task's main score x 100.

The Encoder implements mteb's encoder protocol itself (`Encoder.mteb_model_meta`, `encode` on mteb's
DataLoaders, `similarity` / `similarity_pairwise`), so no wrapper is involved. Task data comes from the
local Hugging Face `datasets` cache or from a task's own `load_data`; a task whose data is not there is one
`DictEmbedError` naming it, never a network call.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.extras import require

log = logging.getLogger(__name__)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def resolve_tasks(tasks: str | Any | Iterable[str | Any]) -> list[Any]:
    """mteb task objects for task names or task objects (one, or a list of them); an unknown name is an error."""
    mteb = require("mteb")
    items = [tasks] if isinstance(tasks, str) or isinstance(tasks, mteb.AbsTask) else list(tasks)
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
    (an mteb `ResultCache`, always overwritten); without it nothing is written. Runs offline: a task whose data
    is not in the local cache raises a one-line `DictEmbedError`.
    """
    mteb = require("mteb")
    resolved = resolve_tasks(tasks)  # an unknown name fails before any model is loaded
    if isinstance(encoder, (str, Path)):
        from dictembed.encoder import Encoder

        encoder = Encoder.load(encoder)
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
                overwrite_strategy="always",
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
