"""What a benchmark ran on: the CPU model and its flags of interest, the load average, the library versions; and
the `--json FILE` writer. Imported by the benchmark scripts beside it (`python benchmarks/NAME.py` puts this
folder on the path)."""

from __future__ import annotations

import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
LIBRARIES = ("torch", "onnxruntime", "transformers", "sentence-transformers", "openvino", "nncf")


def cpu() -> dict[str, Any]:
    """The CPU model (Linux's /proc/cpuinfo) and which of `FLAGS` it has."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    return {"model": model or platform.processor(), "count": os.cpu_count(), "flags": {f: f in flags for f in FLAGS}}


def has_fast_bf16(info: dict[str, Any]) -> bool:
    """Whether the CPU computes bf16 matmuls natively (AMX or AVX512_BF16); without, torch emulates them."""
    return any(info["flags"][f] for f in ("amx_bf16", "avx512_bf16"))


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def versions() -> dict[str, str | None]:
    """Python's version and each of `LIBRARIES`' (None: not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def machine() -> dict[str, Any]:
    """The CPU, versions and load average now, printed as one line to stderr and returned."""
    processor, found, load = cpu(), versions(), load_average()
    flags = " ".join(f for f, present in processor["flags"].items() if present) or "none of " + " ".join(FLAGS)
    print(f"# {processor['model']} x{processor['count']}; flags: {flags}", file=sys.stderr)
    print(f"# {found}; load average {load}", file=sys.stderr, flush=True)
    return {"cpu": processor, "versions": found, "load_average_before": load}


def finish(result: dict[str, Any], json_path: str | None) -> None:
    """Add the load average after, print `result` as JSON and write it to `json_path` when given."""
    result["load_average_after"] = load_average()
    text = json.dumps(result, indent=1)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n", encoding="utf-8")
