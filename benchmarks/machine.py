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


def cpu(cpuinfo: str | None = None) -> dict[str, Any]:
    """The CPU model (Linux's /proc/cpuinfo, or `cpuinfo`'s text), its generation ("family 25 model 17": a
    hypervisor may name every AMD host "AMD EPYC"), its clock in MHz and which of `FLAGS` it has."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():  # the first processor's fields
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    family, number = fields.get("cpu family"), fields.get("model")
    generation = f"family {family} model {number}" if family and number else None
    try:
        mhz: int | None = round(float(fields["cpu MHz"]))
    except (KeyError, ValueError):
        mhz = None
    return {
        "model": fields.get("model name") or platform.processor(),
        "generation": generation,
        "mhz": mhz,
        "count": os.cpu_count(),
        "flags": {f: f in flags for f in FLAGS},
    }


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
    generation = f" ({processor['generation']}, {processor['mhz']} MHz)" if processor["generation"] else ""
    print(f"# {processor['model']}{generation} x{processor['count']}; flags: {flags}", file=sys.stderr)
    print(f"# {found}; load average {load}", file=sys.stderr, flush=True)
    return {"cpu": processor, "versions": found, "load_average_before": load}


def finish(result: dict[str, Any], json_path: str | None) -> None:
    """Add the load average after, print `result` as JSON and write it to `json_path` when given."""
    result["load_average_after"] = load_average()
    text = json.dumps(result, indent=1)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n", encoding="utf-8")
