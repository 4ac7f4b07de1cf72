"""A model's window: the longest input its position embeddings hold, and a max_length a folder, its record or a
caller declares, checked against it (refused unless a positive whole number, cut to the window with a warning)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from dictembed.errors import ModelLoadError

log = logging.getLogger(__name__)


def position_limit(backbone: PreTrainedModel) -> int | None:
    """The longest input the model's position embeddings hold (RoBERTa-style models lose pad_token_id + 1
    positions); None for a model without absolute positions (XLNet declares -1)."""
    positions = getattr(backbone.config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return None
    if "roberta" in backbone.config.model_type:
        positions -= (backbone.config.pad_token_id or 0) + 1
    return positions


def default_max_length(tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel) -> int:
    """The smaller of the tokenizer's limit, the model's position embeddings and 512."""
    return int(min(tokenizer.model_max_length or 512, position_limit(backbone) or 512, 512))


def fit_max_length(value: object, limit: int | None, source: str) -> int:
    """`value` (read from `source`, "FILE: KEY") as a max_length: refused unless a positive whole number; above
    `limit` (`position_limit`) cut to it with a warning, since a longer input would index past the position
    embeddings at the first long sentence."""
    if isinstance(value, float) and value.is_integer():  # JSON reads 1e9 or 512.0 as a float
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:  # JSON true is no length
        raise ModelLoadError(f"{source} is {value!r}, not a positive whole number of tokens")
    if limit is not None and value > limit:
        log.warning("%s is %d, more than the model's %d positions: using %d", source, value, limit, limit)
        return limit
    return value


def declared_length(folder: Path, value: object) -> str:
    """Where a sentence-transformers folder's max_seq_length `value` comes from, as "FILE: KEY": its
    sentence_*_config.json, else its tokenizer_config.json (model_max_length)."""
    for path in [*sorted(folder.glob("sentence_*_config.json")), *sorted(folder.glob("*/sentence_*_config.json"))]:
        if read_json_key(path, "max_seq_length") == value:
            return f"{path}: max_seq_length"
    for path in [folder / "tokenizer_config.json", *sorted(folder.glob("*/tokenizer_config.json"))]:
        if read_json_key(path, "model_max_length") == value:
            return f"{path}: model_max_length"
    return f"model folder {folder}: max_seq_length"


def read_json_key(path: Path, key: str) -> object:
    """`key` of the JSON object in `path`; None when the file, the object or the key is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data.get(key) if isinstance(data, dict) else None
