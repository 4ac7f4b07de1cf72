"""The reverse dictionary's two-stage search (`CoarseIndex`) against scoring every group exactly: agreement of the
results and time per single query.

    python benchmarks/coarse_search.py outputs/minilm-defsent-plus --queries 500

Queries: the everyday descriptions and seeded Oxford definitions, one at a time as a server gets them. For each
query both searches list k=10 results with the product's ranking; agreement is counted on the words of the
results. Time: the search only (the query vector is computed once and reused), median over the queries.
Prints one JSON document with the CPU model, its flags of interest and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from dictembed.dictionary import load_dictionary
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary

DESCRIPTIONS = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"


def cpu() -> dict[str, object]:
    """The CPU model and whether it has AVX2, AVX-512, VNNI and AMX."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    wanted = ("avx2", "avx512f", "avx512_vnni", "amx_tile")
    return {"model": model or platform.processor(), "flags": [f for f in wanted if f in flags]}


def timed_search(rd: ReverseDictionary, vectors: torch.Tensor, k: int) -> tuple[list[list[str]], list[float]]:
    """The words of the top-k results of each query vector, searched one at a time, and each search's seconds."""
    words, seconds = [], []
    for vector in vectors:
        start = time.perf_counter()
        results = rd.search_vectors(vector[None], k)[0]
        seconds.append(time.perf_counter() - start)
        words.append([" | ".join(r.words) for r in results])
    return words, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="outputs/minilm-defsent-plus")
    parser.add_argument("--queries", type=int, default=500, help="Oxford definitions added to the descriptions")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rd = ReverseDictionary.load(args.model).prepare()
    texts = [d for d, _ in load_description_pairs(DESCRIPTIONS)]
    oxford = [d for _, d in load_dictionary("oxford").pairs()]
    rng = np.random.default_rng(0)
    texts += [oxford[i] for i in rng.choice(len(oxford), size=min(args.queries, len(oxford)), replace=False)]
    vectors = torch.from_numpy(rd.encoder.encode(texts))
    coarse = rd._coarse
    if coarse is None:
        raise SystemExit(f"{args.model}: too small a space for the two-stage search")
    timed_search(rd, vectors[:20], args.k)  # warm-up
    two_stage, two_stage_s = timed_search(rd, vectors, args.k)
    rd._coarse = None
    exact, exact_s = timed_search(rd, vectors, args.k)
    rd._coarse = coarse
    overlap = [len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(two_stage, exact, strict=True)]
    report = {
        "cpu": cpu(),
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "queries": len(texts),
        "groups": len(rd.groups),
        "top_k_overlap": float(np.mean(overlap)),
        "identical_lists": float(np.mean([a == b for a, b in zip(two_stage, exact, strict=True)])),
        "same_top1": float(np.mean([a[:1] == b[:1] for a, b in zip(two_stage, exact, strict=True)])),
        "median_ms": {"exact": 1000 * float(np.median(exact_s)), "two_stage": 1000 * float(np.median(two_stage_s))},
        "speedup": float(np.median(exact_s) / np.median(two_stage_s)),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
