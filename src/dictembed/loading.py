"""Loading pretrained models by hub name or folder, with one-line errors: the one home of these checks."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel

from dictembed.errors import ModelLoadError

HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# Files a hub snapshot never needs for loading (other frameworks' weights, exported backends).
HUB_IGNORE = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "onnx/*", "openvino/*", "tf_model*", "flax_model*", "rust_model*"]


def load_pretrained(loader: Any, name_or_path: str, **kwargs: Any) -> Any:
    """Call `loader.from_pretrained`, turning hub/offline/missing-file failures into a ModelLoadError."""
    try:
        return loader.from_pretrained(name_or_path, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or not Path(name_or_path).exists()
        hint = " (no network here: pass a local folder)" if offline else ""
        raise ModelLoadError(f"cannot load model {name_or_path!r}{hint}: {str(err).splitlines()[0]}") from err


def resolve_model(name_or_path: str | Path) -> Path:
    """The local folder of a model: the path itself, or the Hugging Face Hub snapshot of a hub name (read from
    the local cache when offline), so a hub model loads exactly like a folder (dictembed.json, entry_space/)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ModelLoadError(f"model {str(name_or_path)!r} is a file, not a model folder")
    if not HUB_ID.match(str(name_or_path)):
        raise ModelLoadError(f"model folder {str(name_or_path)!r} not found")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(name_or_path), ignore_patterns=HUB_IGNORE))
    except Exception as err:  # noqa: BLE001 - any hub failure (offline, unknown repo, auth) is one message
        raise ModelLoadError(
            f"model {str(name_or_path)!r}: no such folder, and the Hugging Face Hub could not provide it "
            f"({type(err).__name__}; offline, pass a local folder)"
        ) from None


def missing_head_keys(model: PreTrainedModel, missing: list[str]) -> list[str]:
    """The missing checkpoint keys of a *ForMaskedLM that belong to its MLM head, not its base model:
    non-empty when the checkpoint has no pre-trained head."""
    prefix = model.base_model_prefix + "."
    return sorted(k for k in missing if not k.startswith(prefix))


def load_masked_lm_info(name_or_path: str) -> tuple[PreTrainedModel, list[str]]:
    """A *ForMaskedLM and the missing keys of its MLM head (empty when the checkpoint has a pre-trained head)."""
    from transformers import AutoModelForMaskedLM

    model, info = load_pretrained(AutoModelForMaskedLM, name_or_path, output_loading_info=True)
    return model, missing_head_keys(model, info.get("missing_keys", []))
