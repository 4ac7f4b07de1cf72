"""Training checkpoints that hold only safetensors and JSON, so loading one never runs code from disk.

A checkpoint folder holds the trainable weights (`model.safetensors`), the optimizer's tensors and
settings (`optimizer.safetensors`, `optimizer.json`), the scheduler (`scheduler.json`), the random number
generators (`rng.safetensors`, `rng.json`), an fp16 run's gradient scaler (`scaler.json`) and `run.json`: the step
and the configuration it belongs to.
Anything else in the folder (a planted pickle, say) is never read.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_file, save_model
from torch import nn

from dictembed.errors import DictEmbedError

RUN_FILE = "run.json"
SCALER_FILE = "scaler.json"


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
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
    """Restore what `rng_state` saved (`check_rng_state` first: a state that does not restore is refused before
    any generator changes)."""
    torch.set_rng_state(tensors["torch"])
    cuda = [tensors[f"cuda.{i}"] for i in range(len(tensors) - 1) if f"cuda.{i}" in tensors]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)
    kind, keys, pos, has_gauss, gauss = data["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, state, python_gauss = data["python"]
    random.setstate((version, tuple(state), python_gauss))


def check_rng_state(folder: Path, tensors: dict[str, torch.Tensor], data: Any) -> None:
    """Refuse random states that `set_rng_state` could not restore, naming the file, by restoring each into a
    generator of its own (the process's are left alone): the torch state of `rng.safetensors` (a byte tensor of the
    generator's size), the numpy and python states of `rng.json`."""
    state = tensors.get("torch")
    try:
        if state is None or state.dtype != torch.uint8 or state.shape != torch.get_rng_state().shape:
            raise ValueError("no torch generator state of the right size")
        torch.Generator().set_state(state)
        for name, cuda in tensors.items():
            if name.startswith("cuda.") and (cuda.dtype != torch.uint8 or cuda.ndim != 1):
                raise ValueError(f"{name} is no generator state")
    except (RuntimeError, ValueError, TypeError) as err:
        raise DictEmbedError(f"{folder / 'rng.safetensors'}: corrupt checkpoint file ({_line(err)})") from None
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object expected, not {type(data).__name__}")
        kind, keys, pos, has_gauss, gauss = data["numpy"]
        np.random.RandomState().set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
        version, python_state, python_gauss = data["python"]
        random.Random().setstate((version, tuple(python_state), python_gauss))
    except (KeyError, TypeError, ValueError, OverflowError, IndexError) as err:
        raise DictEmbedError(f"{folder / 'rng.json'}: corrupt checkpoint file ({_line(err)})") from None


def _line(err: BaseException) -> str:
    """An error's first line, or its type's name."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _same_form(saved: Any, expected: Any) -> bool:
    """Whether JSON `saved` has the form of `expected` (what the object to restore writes itself): a number where
    it has a number, a flag where a flag, a list of as many items and an object of the same keys, each alike; a
    null there allows anything."""
    if expected is None:
        return True
    if isinstance(expected, bool) or isinstance(saved, bool):
        return isinstance(saved, bool) and isinstance(expected, bool)
    if isinstance(expected, int | float):
        return isinstance(saved, int | float)
    if isinstance(expected, list | tuple):
        return isinstance(saved, list) and len(saved) == len(expected) and all(map(_same_form, saved, expected))
    if isinstance(expected, dict):
        same_keys = isinstance(saved, dict) and set(map(str, saved)) == set(map(str, expected))
        return same_keys and all(_same_form(saved[str(k)], v) for k, v in expected.items())
    return isinstance(saved, type(expected))


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


def save_checkpoint(
    folder: Path, model: nn.Module, optimizer: Any, scheduler: Any, run: dict[str, Any], scaler: Any = None
) -> None:
    """Write the training state into `folder` (an empty staging folder; the caller renames it into place); an
    enabled fp16 gradient `scaler`'s state too (its scale and growth tracker: `scaler.json`)."""
    if scaler is not None and scaler.is_enabled():
        _write_json(folder / SCALER_FILE, scaler.state_dict())
    save_model(model, str(folder / "model.safetensors"))
    tensors, data = _split_optimizer(optimizer.state_dict())
    save_file(tensors, str(folder / "optimizer.safetensors"))
    _write_json(folder / "optimizer.json", data)
    _write_json(folder / "scheduler.json", scheduler.state_dict())
    tensors, data = rng_state()
    save_file(tensors, str(folder / "rng.safetensors"))
    _write_json(folder / "rng.json", data)
    _write_json(folder / RUN_FILE, run)


def _schedule_fits(saved: Any, scheduler: Any) -> bool:
    """Whether `saved` (scheduler.json) can be the state of `scheduler`: an object holding its public settings
    (`last_epoch`, `base_lrs`, ...), none that would hide one of its methods (a scheduler sets each key on itself: a
    saved `step` would), each it shares of the form its own has (`_same_form`; None either side passes). Keys it
    lacks (another torch's `verbose`) and torch's private ones missing (another version's) pass."""
    expected = json.loads(json.dumps(scheduler.state_dict(), default=lambda value: None))
    if not isinstance(saved, dict) or any(callable(getattr(scheduler, str(key), None)) for key in saved):
        return False
    if any(key not in saved for key in expected if not key.startswith("_")):
        return False
    shared = [(value, expected[key]) for key, value in saved.items() if key in expected]
    return all(value is None or own is None or _same_form(value, own) for value, own in shared)


def checkpoint_run(folder: Path) -> dict[str, Any] | None:
    """The `run.json` of a complete checkpoint (None when the folder is missing or incomplete); one that is no JSON
    object with a whole, non-negative `step` is a one-line error naming it."""
    path = folder / RUN_FILE
    if not path.is_file():
        return None
    run = _read_json(path)
    step = run.get("step") if isinstance(run, dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        shown = f"step {step!r:.40}" if isinstance(run, dict) else f"a {type(run).__name__}"
        raise DictEmbedError(f"{path}: corrupt checkpoint file ({shown}; a JSON object with a whole step expected)")
    return run


def load_checkpoint(
    folder: Path, model: nn.Module, optimizer: Any, scheduler: Any, scaler: Any = None
) -> dict[str, Any]:
    """Restore what `save_checkpoint` wrote (an enabled `scaler`'s state where the checkpoint holds one); returns its
    `run.json`. Each file is checked before anything is restored, and one that would not restore is a one-line error
    naming it."""
    run = checkpoint_run(folder)
    if run is None:
        raise DictEmbedError(f"{folder / RUN_FILE}: missing (an incomplete checkpoint)")
    scaling = _scaler_state(folder, scaler)
    schedule = _read_json(folder / "scheduler.json")
    if not _schedule_fits(schedule, scheduler):
        raise DictEmbedError(
            f"{folder / 'scheduler.json'}: corrupt checkpoint file (not the state of this run's learning-rate schedule)"
        )
    optimizer_data = _read_json(folder / "optimizer.json")
    if not (
        isinstance(optimizer_data, dict)
        and isinstance(optimizer_data.get("scalars"), dict)
        and isinstance(optimizer_data.get("param_groups"), list)
    ):
        raise DictEmbedError(f"{folder / 'optimizer.json'}: corrupt checkpoint file (not an optimizer state)")
    rng_data = _read_json(folder / "rng.json")
    try:
        rng = load_file(str(folder / "rng.safetensors"))
    except (OSError, RuntimeError, ValueError, SafetensorError) as err:
        raise DictEmbedError(f"{folder / 'rng.safetensors'}: corrupt checkpoint file ({_line(err)})") from None
    check_rng_state(folder, rng, rng_data)
    try:
        load_model(model, str(folder / "model.safetensors"), device=str(next(model.parameters()).device))
        optimizer.load_state_dict(_join_optimizer(load_file(str(folder / "optimizer.safetensors")), optimizer_data))
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, SafetensorError) as err:
        raise DictEmbedError(f"{folder}: corrupt checkpoint ({str(err).splitlines()[0]})") from None
    try:
        scheduler.load_state_dict(schedule)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DictEmbedError(f"{folder / 'scheduler.json'}: corrupt checkpoint file ({_line(err)})") from None
    if scaling is not None:
        scaler.load_state_dict(scaling)
    set_rng_state(rng, rng_data)
    return run


def _scaler_state(folder: Path, scaler: Any) -> dict[str, Any] | None:
    """The saved state for an enabled `scaler` (None: no scaler, or a checkpoint without one), checked to be the
    numbers its own state holds."""
    path = folder / SCALER_FILE
    if scaler is None or not scaler.is_enabled() or not path.is_file():
        return None
    saved, own = _read_json(path), scaler.state_dict()
    numbers = isinstance(saved, dict) and all(
        isinstance(saved.get(key), int | float) and not isinstance(saved.get(key), bool) for key in own
    )
    if not numbers:
        raise DictEmbedError(f"{path}: corrupt checkpoint file (not the state of a gradient scaler)")
    return {key: saved[key] for key in own}
