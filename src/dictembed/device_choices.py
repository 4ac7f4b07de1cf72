"""The device and precision choices a command offers (`--device`, `--precision`), the environment variables that
set what "auto" means (`DICTEMBED_CPU_PRECISION`, `DICTEMBED_BUILD_BACKEND`) and whether this process is the main
one, torch-free, so that the command line is built, checked and reports without torch; `dictembed.devices` and
`dictembed.backends.onnx.runtime` resolve the choices."""

from __future__ import annotations

import os

from dictembed.errors import DictEmbedError

DEVICE_HELP = "auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps"
DEVICE_TYPES = ("cpu", "cuda", "mps")  # the torch device types dictembed runs on
COMPUTE_PRECISIONS = ("auto", "fp32", "bf16", "fp16")
PRECISION_HELP = (
    "compute precision: auto (bf16 on a CUDA GPU that supports it, on a CPU with AMX, and on one with AVX512_BF16 "
    "where bf16 times 1.5x faster; else fp32), fp32, bf16, fp16"
)


def check_precision(precision: object) -> None:
    """Refuse a compute precision that is not one of `COMPUTE_PRECISIONS` (None: auto), before anything loads."""
    if precision is not None and precision not in COMPUTE_PRECISIONS:
        raise DictEmbedError(f"unknown precision {precision!r}; choose from {', '.join(COMPUTE_PRECISIONS)}")


CPU_PRECISION_VARIABLE = "DICTEMBED_CPU_PRECISION"  # what --precision auto means on the CPU
CPU_PRECISIONS = ("auto", "fp32", "bf16")
BUILD_BACKEND_VARIABLE = "DICTEMBED_BUILD_BACKEND"  # what encodes an fp32 build on the CPU
# auto (the default): from `runtime.graph_build_min` texts the fp32 graph (compiled by OpenVINO for an encoder that
# computes in bf16, where the openvino extra is installed), else torch; onnx: the fp32 graph; int8:
# the graph quantised as `export --quantize int8` does (other vectors: keyed apart in the cache, `builds_int8`);
# openvino: the fp32 graph compiled by OpenVINO, in the encoder's compute precision (bf16 where it computes in bf16)
BUILD_BACKENDS = ("auto", "torch", "onnx", "int8", "openvino")


def cpu_precision_choice() -> str:
    """`$DICTEMBED_CPU_PRECISION`, one of `CPU_PRECISIONS` (unset: auto)."""
    chosen = os.environ.get(CPU_PRECISION_VARIABLE, "").strip().lower() or "auto"
    if chosen not in CPU_PRECISIONS:
        raise DictEmbedError(f"{CPU_PRECISION_VARIABLE}={chosen!r}: use fp32, bf16 or auto")
    return chosen


def build_choice() -> str:
    """`$DICTEMBED_BUILD_BACKEND`, one of `BUILD_BACKENDS` (unset: auto)."""
    choice = os.environ.get(BUILD_BACKEND_VARIABLE, "").strip().lower() or "auto"
    if choice not in BUILD_BACKENDS:
        raise DictEmbedError(f"{BUILD_BACKEND_VARIABLE}={choice!r}: use {', '.join(BUILD_BACKENDS)}")
    return choice


def check_environment() -> None:
    """Refuse a value of `DICTEMBED_CPU_PRECISION` or `DICTEMBED_BUILD_BACKEND` that no command takes, before
    anything loads."""
    cpu_precision_choice()
    build_choice()


def is_main_process() -> bool:
    """Whether this process writes shared files: always in a single process; rank 0 under a distributed launcher
    (`torchrun`, `accelerate launch`), which sets RANK."""
    return int(os.environ.get("RANK", "0")) == 0
