"""The entry space a model folder saved (`entry_space/`), loaded as the class that saved it and checked first: a
corrupt or mismatched one is a one-line error naming its file."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from dictembed.entry_logits import ENTRY_TEMPERATURE
from dictembed.entry_space import SAVE_DTYPES, DefinitionSpace, EntrySpace, WordEmbeddingSpace
from dictembed.errors import DictEmbedError
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.model_folder import SPACE_DIR, SPACE_META, SPACE_TENSORS
from dictembed.search_space import saved_problem


def load_entry_space(model_dir: str | Path) -> EntrySpace:
    """The entry space saved in `model_dir/entry_space/`; a corrupt or mismatched one is a one-line error naming
    its file."""
    folder = Path(model_dir) / SPACE_DIR
    if not (folder / SPACE_META).exists():
        raise DictEmbedError(f"{model_dir} holds no saved entry space ({SPACE_DIR}/space.json missing)")
    try:
        meta = json.loads((folder / SPACE_META).read_text(encoding="utf-8"))
        kind, words = meta["type"], list(meta["words"])
        if meta.get("dtype", "fp32") not in SAVE_DTYPES:  # older saves have no dtype: float32
            raise ValueError(f"unknown dtype {meta['dtype']!r}")
    except (OSError, ValueError, TypeError, KeyError) as err:
        detail = f"{type(err).__name__}: {err}"
        raise DictEmbedError(f"{folder / 'space.json'}: corrupt entry space ({detail})") from None
    if not (folder / SPACE_TENSORS).is_file():
        raise DictEmbedError(f"{folder / SPACE_TENSORS}: missing from its model folder")
    try:
        tensors = load_file(str(folder / SPACE_TENSORS))
    except (OSError, SafetensorError) as err:
        raise DictEmbedError(f"{folder / 'tensors.safetensors'}: corrupt or truncated ({err})") from None
    arrays = {name: (t.float() if t.dtype == torch.bfloat16 else t).numpy() for name, t in tensors.items()}
    if problem := saved_problem(meta, words, arrays):
        raise DictEmbedError(f"{folder}: the saved entry space cannot be trusted: {problem}")
    try:
        if kind == "MLMHeadSpace":
            return MLMHeadSpace.from_saved(meta, tensors)
        cls = {"WordEmbeddingSpace": WordEmbeddingSpace, "DefinitionSpace": DefinitionSpace}[kind]
        kept = ("counts", "definitions", "headwords")
        extra = {name: tensors.get(name) for name in kept} if cls is DefinitionSpace else {}
        return cls(
            words,
            tensors["matrix"],
            meta.get("similarity", "dot"),
            meta.get("temperature", ENTRY_TEMPERATURE),
            meta.get("kind"),
            **extra,
        )
    except (DictEmbedError, KeyError, TypeError, ValueError, RuntimeError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        raise DictEmbedError(f"{folder}: the saved entry space does not load ({detail})") from None
