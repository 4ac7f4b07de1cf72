"""One device policy and one compute-precision policy for every command.

`--device auto` (the default) is `best_device()`: CUDA, else Apple MPS, else the CPU; any
torch device name is accepted (cpu, cuda, cuda:1, mps). `--precision auto` is bf16 where the hardware computes
it natively and fast (a CUDA GPU that supports it; a CPU with Intel AMX, where bf16 encodes about 2x faster at
fp32's STS, docs/results.md; a CPU with AVX512_BF16 but no AMX where a linear layer of a transformer's size runs
at least `BF16_MIN_GAIN` times faster in bf16 than in fp32, timed once per machine: `bf16_gain`) and fp32
elsewhere; fp32 means no autocast. Training turns the precision into accelerate's `mixed_precision`; inference
runs the model under `torch.autocast` (`autocast`). `--precision fp32` reproduces fp32 figures anywhere.
`DICTEMBED_CPU_PRECISION=fp32|bf16` sets what `auto` means on any CPU (the test suite pins fp32, so that it
computes the same on every CPU kind).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import platform
import threading
import time
from pathlib import Path

import torch

from dictembed.device_choices import DEVICE_HELP, DEVICE_TYPES, check_precision, cpu_precision_choice
from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write
from dictembed.paths import cache_root

log = logging.getLogger(__name__)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}  # accelerate's names


def local_cuda() -> torch.device:
    """The CUDA device of this process: under a distributed launch (torchrun, accelerate launch: `LOCAL_RANK`) the
    GPU of its local rank, so that the processes of one machine load their models onto their own GPUs rather than
    all onto the first; else the current one."""
    rank = os.environ.get("LOCAL_RANK", "")
    if rank.isdigit() and int(rank) < torch.cuda.device_count():
        return torch.device("cuda", int(rank))
    return torch.device("cuda")


def best_device() -> torch.device:
    """CUDA when available (`local_cuda`), else Apple MPS, else the CPU (as sentence-transformers chooses)."""
    if torch.cuda.is_available():
        return local_cuda()
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def device_type(device: str | torch.device | None) -> str:
    """The type ("cpu", "cuda", "mps") of a device choice, without checking that it exists; a device torch knows
    that dictembed does not run on (xpu, meta, hpu, ...) is refused with the names it takes."""
    if device is None or str(device) == "auto":
        return best_device().type
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError, TypeError):
        raise DictEmbedError(f"unknown device {device!r}; use {DEVICE_HELP}") from None
    if kind not in DEVICE_TYPES:
        raise DictEmbedError(f"device {device!r}: dictembed runs on {', '.join(DEVICE_TYPES)}; use {DEVICE_HELP}")
    return kind


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
        if chosen.index is None:
            chosen = local_cuda()
    elif chosen.type == "mps" and not (
        getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    ):
        raise DictEmbedError(f"device {device!r}: MPS is not available on this machine")
    return chosen


def loader_device(device: str | torch.device | None) -> torch.device | None:
    """What `Encoder.load(device=...)` takes: None for "auto" (it picks the best device itself)."""
    return None if device is None or str(device) == "auto" else resolve_device(device)


def resolve_precision(precision: str | None, device: str | torch.device | None) -> str:
    """fp32, bf16 or fp16: "auto" (or None) is bf16 on a CUDA device that supports it and on a CPU where
    `cpu_auto_precision` says so, fp32 otherwise."""
    check_precision(precision)
    precision = precision or "auto"
    if precision != "auto":
        return precision
    kind = device_type(device)
    if kind == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    if kind == "cpu":
        return cpu_auto_precision()
    return "fp32"


BF16_MIN_GAIN = 1.5  # bf16 must run `bf16_gain`'s layer this many times faster than fp32 to be auto's choice
# (the fp32 alternative builds on ONNX Runtime, 1.1-1.4x torch's fp32 on 2 AVX2 cores; bf16's autocast adds casts)


def cpu_auto_precision() -> str:
    """What "auto" means on the CPU: `$DICTEMBED_CPU_PRECISION` (fp32 or bf16) when set, else bf16 with AMX, and
    with AVX512_BF16 where `bf16_gain` is at least `BF16_MIN_GAIN`; else fp32."""
    chosen = cpu_precision_choice()
    if chosen != "auto":
        return chosen
    if cpu_has_amx():
        _say_bf16_on_amx()
        return "bf16"
    if cpu_has_avx512_bf16():
        return _avx512_bf16_choice()
    return "fp32"


def cpu_has_amx() -> bool:
    """Whether this CPU has Intel AMX tiles that torch uses (bf16 matmuls several times faster than fp32)."""
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(check and check())
    except RuntimeError:
        return False


def cpu_has_avx512_bf16() -> bool:
    """Whether this CPU has AVX512_BF16 (bf16 dot products in hardware, without AMX's tiles: AMD Zen 4 and later,
    Intel Cooper Lake)."""
    check = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    try:
        return bool(check and check())
    except RuntimeError:
        return False


@functools.cache
def _say_bf16_on_amx() -> None:
    """Say once per process that `auto` chose bf16 on this CPU, and how to get fp32's figures instead."""
    log.info("this CPU has AMX: computing in bf16 (about 2x faster, the same STS); --precision fp32 for fp32")


_CHOICE_LOCK = threading.Lock()  # one timing a process, whichever thread resolves "auto" first


def _avx512_bf16_choice() -> str:
    """`auto` on a CPU with AVX512_BF16 and no AMX: bf16 where `bf16_gain` reaches `BF16_MIN_GAIN`."""
    with _CHOICE_LOCK:
        return _avx512_bf16_decided()


@functools.cache
def _avx512_bf16_decided() -> str:
    """The choice of `_avx512_bf16_choice`, said once a process with its gain. The gain is timed once per machine and
    kept in dictembed's cache (`bf16_gain_file`), so that every process of a run, a resumed run and every rank of a
    launch choose alike rather than each by its own timing; a cache that cannot be written is only logged."""
    path = bf16_gain_file()
    gain, when = _kept_gain(path), f"timed before on this machine ({path})"
    if gain is None:
        try:
            from filelock import FileLock

            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(f"{path}.lock", timeout=60):
                gain = _kept_gain(path)  # another process timed it meanwhile
                if gain is None:
                    gain, when = bf16_gain(), "timed now"
                    atomic_write(path, json.dumps({"gain": gain, "torch": torch.__version__}))
        except OSError as err:  # a cache that cannot be written or locked: this process's own timing
            log.info("the bf16 timing is not kept (%s)", err)
            gain, when = bf16_gain(), "timed now"
    chosen = "bf16" if gain >= BF16_MIN_GAIN else "fp32"
    if chosen == "bf16":
        log.info(
            f"this CPU has AVX512_BF16 and runs a linear layer {gain:.1f}x faster in bf16 ({when}): computing in "
            "bf16 (the same STS as fp32 to the third decimal on AMX); --precision fp32 for fp32"
        )
    else:
        log.info(
            f"this CPU has AVX512_BF16 but runs a linear layer at {gain:.2f}x fp32's speed in bf16 ({when}; "
            f"bf16 from {BF16_MIN_GAIN}x): computing in fp32"
        )
    return chosen


def bf16_gain_file() -> Path:
    """Where dictembed's cache keeps this machine's `bf16_gain`: keyed by the CPU's model and torch's version."""
    model = platform.processor()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), model)
    key = hashlib.sha1(f"{model}|{torch.__version__}".encode()).hexdigest()[:16]
    return cache_root() / f"bf16-gain-{key}.json"


def _kept_gain(path: Path) -> float | None:
    """The gain kept in `path`, or None (none kept, or a damaged file, which is timed again)."""
    try:
        gain = float(json.loads(path.read_text(encoding="utf-8"))["gain"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return gain if gain > 0 else None


def bf16_gain(tokens: int = 1024, width: int = 384, repeats: int = 5) -> float:
    """How many times faster this machine runs a transformer's feed-forward layer (`tokens` rows of `width`, to
    4 x `width`) on the CPU under bf16 autocast than in fp32: the best of `repeats` timed runs of each after a
    warm-up, as the encoder runs (no_grad, autocast's casts included). About 0.1 s where bf16 is native (0.5 s
    where torch emulates it)."""
    generator = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(width, 4 * width)
    rows = torch.randn(tokens, width, generator=generator)

    def best() -> float:
        layer(rows)  # warm-up: the library picks and builds its kernel
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            layer(rows)
            times.append(time.perf_counter() - start)
        return min(times)

    with torch.no_grad():
        fp32 = best()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            bf16 = best()
    return fp32 / max(bf16, 1e-9)


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
