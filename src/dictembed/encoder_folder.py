"""The folder an `Encoder` saves: a sentence-transformers folder (its pooling declared, the modules after it, the
prompts, the similarity function and truncation it was loaded with) plus the `dictembed.json` run record and a model
card, written atomically; a folder that holds a model is replaced only when asked."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import PreTrainedModel

from dictembed.errors import DictEmbedError
from dictembed.io import staged_dir
from dictembed.loading import Parts, save_parts
from dictembed.model_card import write_model_card
from dictembed.model_folder import write_record
from dictembed.output_folder import check_output_folder
from dictembed.pooling import CUSTOM_POOLINGS
from dictembed.record import RunRecord
from dictembed.texts import check_flag

if TYPE_CHECKING:
    from dictembed.encoder import Encoder

log = logging.getLogger(__name__)


def save_encoder(
    encoder: Encoder,
    path: str | Path,
    record: RunRecord | dict[str, Any] | None = None,
    full_model: PreTrainedModel | None = None,
    name: str | None = None,
    overwrite: bool = False,
) -> Path:
    """`Encoder.save`: `encoder` written to `path` (see there); returns `path`."""
    check_flag("overwrite", overwrite)
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise DictEmbedError(f"Encoder.save: path must be a folder's path, not {path!r}")
    path = Path(path)
    check_output_folder(path, overwrite, label="Encoder.save:", remedy="pass overwrite=True")
    pooling = None if encoder.pooling in CUSTOM_POOLINGS else encoder.pooling_module
    if pooling is None:
        log.warning(
            "pooling %r has no sentence-transformers equivalent: the folder declares mean pooling for "
            "SentenceTransformer(path); Encoder.load(path) gives %r pooling",
            encoder.pooling,
            encoder.pooling,
        )
    post, prompts = list(encoder.post), (encoder.prompts, encoder.default_prompt_name)
    if not isinstance(record, RunRecord):
        record = RunRecord.from_dict({"base_model": encoder.base_model, **(record or {})})
    record.encoder = encoder.config
    record.base_model = record.base_model or encoder.base_model
    saved = record if record.config is not None else record.portable()  # a run's folder keeps its real paths
    with staged_dir(path) as staging:  # removed on failure; a full disk is an OSError naming `path`
        kept = (encoder.similarity_fn_name, encoder.truncate_dim)
        save_parts(
            staging, Parts(encoder.tokenizer, encoder.backbone, pooling, post, *prompts, encoder.max_length, *kept)
        )
        if full_model is not None:
            full_model.save_pretrained(staging)
        write_record(staging, saved)
        write_model_card(staging, saved, name=name or path.name)
    encoder.record = record
    return path
