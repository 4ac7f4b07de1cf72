"""The device and precision choices a command offers (`--device`, `--precision`) and whether this process is the
main one, torch-free, so that the command line is built and reports without torch; `dictembed.devices` resolves
the choices."""

from __future__ import annotations

import os

DEVICE_HELP = "auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps"
COMPUTE_PRECISIONS = ("auto", "fp32", "bf16", "fp16")
PRECISION_HELP = (
    "compute precision: auto (bf16 on a CUDA GPU that supports it, on a CPU with AMX, and on one with AVX512_BF16 "
    "where bf16 times 1.5x faster; else fp32), fp32, bf16, fp16"
)


def is_main_process() -> bool:
    """Whether this process writes shared files: always in a single process; rank 0 under a distributed launcher
    (`torchrun`, `accelerate launch`), which sets RANK."""
    return int(os.environ.get("RANK", "0")) == 0
