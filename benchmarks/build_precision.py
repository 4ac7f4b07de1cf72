"""Entry-space build throughput at fp32 (torch, and ONNX Runtime), bf16 (torch, and OpenVINO) and int8, and how far
each moves the space from torch fp32.

    python benchmarks/build_precision.py                          # 5,000 WordNet definitions, 300 queries
    python benchmarks/build_precision.py --limit 20000 --json build.json
    python benchmarks/build_precision.py --quick                  # 100 definitions, 50 queries: a smoke test

The main job's entry space (`DefinitionSpace.build(encoder, wordnet, "amp")`, no cache) over a seeded sample of
`--limit` WordNet definitions, built once per precision after a small warm-up build:
- fp32: `Encoder` in torch fp32 (`DICTEMBED_BUILD_BACKEND=torch`); onnx: the same fp32 network's graph on ONNX
  Runtime as the product's builds run it (`DICTEMBED_BUILD_BACKEND=onnx`: `runtime.graph_twin`, exported at the
  start of the build and timed with it, batches of `GRAPH_BUILD_BATCH`); bf16: `Encoder.set_precision("bf16")` (torch
  autocast; native on a CPU with AMX or AVX512_BF16, emulated and slow without: the script says which); openvino:
  the bf16 encoder's builds on its fp32 graph compiled by OpenVINO with the bf16 hint (`DICTEMBED_BUILD_BACKEND=
  openvino`: `openvino.openvino_twin`, what `auto` runs for a bf16 encoder, exported and compiled at the start of
  the build and timed with it; without native bf16 OpenVINO runs f32 and says so); int8: the
  model's ONNX dynamic int8 export (`dictembed.backends.onnx.export.export`) on ONNX Runtime with `--threads`
  threads.
Reported per precision: seconds and definitions/s; against fp32: the mean/min cosine of the entry vectors, and
for `--queries` held-out WordNet definitions (other senses, not in the space), each encoded at that precision
and scored by cosine against that precision's space, how often the top-1 entry equals fp32's and the mean
overlap of the top-10 (`same_top1`, `top10_overlap`); `space_only_same_top1` scores the fp32 query vectors
against the other space, so only the space differs. Also `bf16_gain` (`devices.bf16_gain`: a linear layer's fp32
time over its bf16 time) and `auto_precision` (what `--precision auto` computes on this CPU). Prints the CPU
(flags, load average) and versions (benchmarks/machine.py) and one JSON document; `--json FILE` writes it too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from machine import finish, has_fast_bf16, machine

from dictembed.backends.onnx.runtime import BUILD_BACKEND_VARIABLE, attach, physical_cores
from dictembed.devices import bf16_gain, cpu_auto_precision
from dictembed.dictionary import Dictionary, load_dictionary, seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.paths import default_model

PRECISIONS = ("fp32", "onnx", "bf16", "openvino", "int8")


def sample(n: int, queries: int, seed: int = 0) -> tuple[Dictionary, list[str]]:
    """A dictionary of `n` seeded WordNet (headword, definition) pairs, and `queries` other definitions."""
    pairs = seeded_sample(load_dictionary("wordnet").pairs(), n + queries, seed)
    dictionary = Dictionary(name=f"wordnet-{n}")
    for headword, definition in pairs[:n]:
        dictionary.add(headword, definition)
    held_out = [definition for _, definition in pairs[n:]]
    return dictionary, held_out


def encoder_at(precision: str, model: str, scratch: Path, threads: int) -> Encoder:
    """The model's encoder computing at `precision` (onnx: torch fp32, its builds on the fp32 graph as
    `DICTEMBED_BUILD_BACKEND=onnx` makes them; openvino: torch bf16, its builds on OpenVINO as
    `DICTEMBED_BUILD_BACKEND=openvino` makes them; int8: its ONNX int8 export, written into `scratch`)."""
    encoder = Encoder.load(model, device="cpu", backend="torch")
    os.environ[BUILD_BACKEND_VARIABLE] = precision if precision in ("onnx", "openvino") else "torch"
    if precision == "onnx":
        return encoder
    if precision == "openvino":
        return encoder.set_precision("bf16")
    if precision != "int8":
        return encoder.set_precision(precision)
    from dictembed.backends.onnx.export import export

    return attach(encoder, export(model, scratch / "int8", quantize="int8"), threads=threads)


def unit(vectors: np.ndarray | torch.Tensor) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    return array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)


def top(queries: np.ndarray, matrix: np.ndarray, k: int = 10) -> np.ndarray:
    """The rows of `matrix` (unit vectors) nearest each query by cosine, best first: [n_queries, k]."""
    scores = queries @ matrix.T
    best = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, best, 1), axis=1, kind="stable")
    return np.take_along_axis(best, order, 1)


def agreement(fp32: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> dict[str, float]:
    """Entry-vector cosine and top-1/top-10 agreement of `other`'s space and queries with fp32's."""
    cosines = (fp32["matrix"] * other["matrix"]).sum(1)
    base, mine = top(fp32["queries"], fp32["matrix"]), top(other["queries"], other["matrix"])
    space_only = top(fp32["queries"], other["matrix"], 1)
    overlap = [len(set(a) & set(b)) / len(a) for a, b in zip(base, mine, strict=True)]
    return {
        "entry_cosine_mean": round(float(cosines.mean()), 5),
        "entry_cosine_min": round(float(cosines.min()), 5),
        "same_top1": round(float(np.mean(base[:, 0] == mine[:, 0])), 4),
        "top10_overlap": round(float(np.mean(overlap)), 4),
        "space_only_same_top1": round(float(np.mean(base[:, 0] == space_only[:, 0])), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: the embedded all-MiniLM-L6-v2")
    parser.add_argument("--limit", type=int, default=5000, help="WordNet definitions in the space (default: 5000)")
    parser.add_argument("--queries", type=int, default=300, help="held-out definitions queried (default: 300)")
    parser.add_argument(
        "--precisions", default=",".join(PRECISIONS), help="comma list of fp32, onnx, bf16, openvino, int8"
    )
    parser.add_argument("--threads", type=int, default=physical_cores(), help="torch and ONNX Runtime threads")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 100 definitions, 50 queries")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the result here")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.queries = 100, 50
    precisions = [p for p in PRECISIONS if p in args.precisions.split(",")]
    model = args.model or default_model()
    result: dict[str, Any] = {"benchmark": "build_precision", **machine(), "threads": args.threads}
    result["bf16_native"] = has_fast_bf16(result["cpu"])
    torch.set_num_threads(args.threads)
    result |= {"bf16_gain": round(bf16_gain(), 3), "auto_precision": cpu_auto_precision()}
    print(
        f"# a linear layer {result['bf16_gain']}x faster in bf16; --precision auto: {result['auto_precision']}",
        file=sys.stderr,
    )
    if {"bf16", "openvino"} & set(precisions) and not result["bf16_native"]:
        print("# no AMX or AVX512_BF16: bf16 is emulated here (slow); the figure says little", file=sys.stderr)
    dictionary, queries = sample(args.limit, args.queries)
    warm_up, _ = sample(16, 0, seed=1)
    result |= {"model": args.model or "all-MiniLM-L6-v2 (embedded)", "definitions": dictionary.num_definitions()}
    result |= {"entries": len(dictionary), "queries": len(queries), "precisions": {}}
    spaces: dict[str, dict[str, np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for precision in precisions:
            encoder = encoder_at(precision, model, Path(scratch), args.threads)
            DefinitionSpace.build(encoder, warm_up, "amp")
            start = time.perf_counter()
            space = DefinitionSpace.build(encoder, dictionary, "amp")
            seconds = time.perf_counter() - start
            vectors = encoder.encode(queries, show_progress_bar=False)
            spaces[precision] = {"matrix": unit(space.matrix), "queries": unit(vectors)}
            row = {"seconds": round(seconds, 2), "definitions_per_s": round(dictionary.num_definitions() / seconds, 1)}
            if precision != "fp32" and "fp32" in spaces:
                row |= agreement(spaces["fp32"], spaces[precision])
            result["precisions"][precision] = row
            print(f"# {precision}: {row}", file=sys.stderr, flush=True)
    finish(result, args.json)


if __name__ == "__main__":
    main()
