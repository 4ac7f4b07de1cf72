"""One device policy and one compute-precision policy for every command.

`--device auto` (the default) is `best_device()`: CUDA, else Apple MPS, else the CPU; any
torch device name is accepted (cpu, cuda, cuda:1, mps). `--precision auto` is bf16 on a CUDA GPU that
supports it and fp32 elsewhere; fp32 means no autocast. Training turns the precision into accelerate's
`mixed_precision`; inference runs the model under `torch.autocast` (`autocast`). On a CPU with Intel AMX,
bf16 is the fast path at fp32's quality (docs/results.md), but `auto` stays fp32 there so
that results reproduce on CPUs without it; it says so once in the log.
"""

from __future__ import annotations

import contextlib
import functools
import logging

import torch

from dictembed.device_choices import COMPUTE_PRECISIONS, DEVICE_HELP
from dictembed.device_choices import is_main_process as is_main_process  # re-exported
from dictembed.errors import DictEmbedError

log = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}  # accelerate's names


def best_device() -> torch.device:
    """CUDA when available, else Apple MPS, else the CPU (as sentence-transformers chooses)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def device_type(device: str | torch.device | None) -> str:
    """The type ("cpu", "cuda", "mps") of a device choice, without checking that it exists."""
    if device is None or str(device) == "auto":
        return best_device().type
    try:
        return torch.device(device).type
    except (RuntimeError, ValueError):
        raise DictEmbedError(f"unknown device {device!r}; use {DEVICE_HELP}") from None


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The torch device of a choice ("auto"/None: the best one), refused when this machine has none such."""
    if device is None or str(device) == "auto":
        return best_device()
    device_type(device)  # a one-line error for a malformed name
    chosen = torch.device(device)
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise DictEmbedError(f"device {device!r}: CUDA is not available on this machine")
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise DictEmbedError(f"device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    elif chosen.type == "mps" and not (
        getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    ):
        raise DictEmbedError(f"device {device!r}: MPS is not available on this machine")
    return chosen


def loader_device(device: str | torch.device | None) -> torch.device | None:
    """What `Encoder.load(device=...)` takes: None for "auto" (it picks the best device itself)."""
    return None if device is None or str(device) == "auto" else resolve_device(device)


def resolve_precision(precision: str | None, device: str | torch.device | None) -> str:
    """fp32, bf16 or fp16: "auto" (or None) is bf16 on a CUDA device that supports it, fp32 otherwise."""
    precision = precision or "auto"
    if precision not in COMPUTE_PRECISIONS:
        raise DictEmbedError(f"unknown precision {precision!r}; choose from {', '.join(COMPUTE_PRECISIONS)}")
    if precision != "auto":
        return precision
    kind = device_type(device)
    if kind == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    if kind == "cpu" and cpu_has_amx():
        _hint_bf16_on_amx()
    return "fp32"


def cpu_has_amx() -> bool:
    """Whether this CPU has Intel AMX tiles that torch uses (bf16 matmuls several times faster than fp32)."""
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(check and check())
    except RuntimeError:
        return False


@functools.cache
def _hint_bf16_on_amx() -> None:
    """Say once per process that `--precision bf16` is the fast path on this CPU (fp32 stays the default: the
    project's figures are fp32 and reproduce across CPUs with and without AMX)."""
    log.info(
        "this CPU has AMX: --precision bf16 encodes about 2x and trains about 1.2x faster than fp32 on such "
        "CPUs, at the same STS (docs/results.md); fp32 stays the default"
    )


def autocast(device: str | torch.device | None, precision: str | None) -> contextlib.AbstractContextManager:
    """`torch.autocast` on `device`'s type with the precision's dtype; fp32 is no autocast at all."""
    resolved = resolve_precision(precision, device)
    if resolved == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type(device), dtype=DTYPES[resolved])


def wait_for_everyone() -> None:
    """A barrier across the processes of a distributed run; nothing in a single process. Unlike accelerate's
    `wait_for_everyone`, which names the local rank as a CUDA device for every backend, a gloo (CPU) run names
    none: two CPU processes on a machine with one GPU would otherwise ask for a second GPU."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_backend() == "nccl":
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()
