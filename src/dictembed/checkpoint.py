"""Training checkpoints that hold only safetensors and JSON, so loading one never runs code from disk.

A checkpoint folder holds the trainable weights (`model.safetensors`), the optimizer's tensors and
settings (`optimizer.safetensors`, `optimizer.json`), the scheduler (`scheduler.json`), the random number
generators (`rng.safetensors`, `rng.json`) and `run.json`: the step and the configuration it belongs to.
Anything else in the folder (a planted pickle, say) is never read.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from dictembed.errors import DictEmbedError

RUN_FILE = "run.json"


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DictEmbedError(f"{path}: unreadable checkpoint file ({err})") from None


def rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The torch (CPU and CUDA), numpy and python random states as tensors and JSON."""
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        tensors.update({f"cuda.{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())})
    # The global RandomState is an MT19937, whose state is this legacy tuple (numpy's stubs type a call
    # without `legacy=` as the dict form, although the default is legacy=True)
    kind, keys, pos, has_gauss, gauss = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    version, state, python_gauss = random.getstate()
    data = {
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
        "python": [version, list(state), python_gauss],
    }
    return tensors, data


def set_rng_state(tensors: dict[str, torch.Tensor], data: dict[str, Any]) -> None:
    """Restore what `rng_state` saved."""
    torch.set_rng_state(tensors["torch"])
    cuda = [tensors[f"cuda.{i}"] for i in range(len(tensors) - 1) if f"cuda.{i}" in tensors]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    kind, keys, pos, has_gauss, gauss = data["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, state, python_gauss = data["python"]
    random.setstate((version, tuple(state), python_gauss))


def _split_optimizer(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """An optimizer state dict as tensors (`index.name`) and JSON (settings and non-tensor values)."""
    tensors, scalars = {}, {}
    for index, values in state["state"].items():
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{name}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _join_optimizer(tensors: dict[str, torch.Tensor], data: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in [*tensors.items(), *data["scalars"].items()]:
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    return {"state": state, "param_groups": data["param_groups"]}


def save_checkpoint(folder: Path, model: nn.Module, optimizer: Any, scheduler: Any, run: dict[str, Any]) -> None:
    """Write the training state into `folder` (an empty staging folder; the caller renames it into place)."""
    save_model(model, str(folder / "model.safetensors"))
    tensors, data = _split_optimizer(optimizer.state_dict())
    save_file(tensors, str(folder / "optimizer.safetensors"))
    _write_json(folder / "optimizer.json", data)
    _write_json(folder / "scheduler.json", scheduler.state_dict())
    tensors, data = rng_state()
    save_file(tensors, str(folder / "rng.safetensors"))
    _write_json(folder / "rng.json", data)
    _write_json(folder / RUN_FILE, run)


def checkpoint_run(folder: Path) -> dict[str, Any] | None:
    """The `run.json` of a complete checkpoint (None when the folder is missing or incomplete)."""
    return _read_json(folder / RUN_FILE) if (folder / RUN_FILE).is_file() else None


def load_checkpoint(folder: Path, model: nn.Module, optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Restore what `save_checkpoint` wrote; returns its `run.json`."""
    try:
        load_model(model, str(folder / "model.safetensors"), device=str(next(model.parameters()).device))
        optimizer.load_state_dict(
            _join_optimizer(load_file(str(folder / "optimizer.safetensors")), _read_json(folder / "optimizer.json"))
        )
        rng = load_file(str(folder / "rng.safetensors"))
    except (OSError, RuntimeError, ValueError, KeyError) as err:
        raise DictEmbedError(f"{folder}: corrupt checkpoint ({str(err).splitlines()[0]})") from None
    scheduler.load_state_dict(_read_json(folder / "scheduler.json"))
    set_rng_state(rng, _read_json(folder / "rng.json"))
    return _read_json(folder / RUN_FILE)
