"""The reverse dictionary's two-stage search (`CoarseIndex`) against scoring every group exactly: agreement of the
results and time per single query.

    python benchmarks/coarse_search.py outputs/minilm-defsent-plus --queries 500
    python benchmarks/coarse_search.py outputs/minilm-defsent-plus --dims 64     # a coarse stage of 64 dimensions
    python benchmarks/coarse_search.py outputs/minilm-defsent-plus --candidates 500   # 500 scored exactly

Queries: the everyday descriptions and seeded Oxford definitions, one at a time as a server gets them. For each
query both searches list k=10 results with the product's ranking; agreement is counted on the words of the
results. Time: the search only (the query vector is computed once and reused), median over the queries.
Prints one JSON document with the CPU model, its flags of interest and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
from machine import machine

from dictembed import reverse_dictionary
from dictembed.dictionary import load_dictionary
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import CoarseIndex, SearchIndex
from dictembed.search_space import SearchSpace

DESCRIPTIONS = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"


def timed_search(rd: ReverseDictionary, vectors: np.ndarray, k: int) -> tuple[list[list[str]], list[float]]:
    """The words of the top-k results of each query vector, searched one at a time, and each search's seconds."""
    words, seconds = [], []
    for vector in vectors:
        start = time.perf_counter()
        results = rd.search_vectors(vector[None], k)[0]
        seconds.append(time.perf_counter() - start)
        words.append([" | ".join(r.words) for r in results])
    return words, seconds


def with_index(rd: ReverseDictionary, index: SearchIndex) -> ReverseDictionary:
    """`rd` searching with `index` (the same encoder, space, dictionary and ranking)."""
    return ReverseDictionary(rd.encoder, rd.space, rd.source, rd.name, rd.ranking, rd.language, index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="outputs/minilm-defsent-plus")
    parser.add_argument("--queries", type=int, default=500, help="Oxford definitions added to the descriptions")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--dims", type=int, default=None, help="rebuild the coarse stage with this many dimensions")
    parser.add_argument(
        "--candidates", type=int, default=None, help="groups the first stage passes on (default: COARSE_CANDIDATES)"
    )
    args = parser.parse_args()
    if args.candidates is not None:
        reverse_dictionary.COARSE_CANDIDATES = args.candidates
    load = os.getloadavg()[0]
    rd = ReverseDictionary.load(args.model).prepare()
    index = rd.index
    if index is None or index.coarse is None:
        raise SystemExit(f"{args.model}: too small a space for the two-stage search")
    if args.dims is not None:
        space = cast(SearchSpace, rd.space)
        rd = with_index(rd, replace(index, coarse=CoarseIndex.of(index.unit(space), args.dims)))
    texts = [d for d, _ in load_description_pairs(DESCRIPTIONS)]
    oxford = [d for _, d in load_dictionary("oxford").pairs()]
    rng = np.random.default_rng(0)
    texts += [oxford[i] for i in rng.choice(len(oxford), size=min(args.queries, len(oxford)), replace=False)]
    vectors = np.asarray(rd.encoder.encode(texts))
    exact_rd = with_index(rd, replace(cast(SearchIndex, rd.index), coarse=None)).prepare()
    timed_search(rd, vectors[:20], args.k)  # warm-up
    two_stage, two_stage_s = timed_search(rd, vectors, args.k)
    exact, exact_s = timed_search(exact_rd, vectors, args.k)
    overlap = [len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(two_stage, exact, strict=True)]
    report = {
        "cpu": machine()["cpu"],
        "candidates": reverse_dictionary.COARSE_CANDIDATES,
        "coarse_dims": int(cast(SearchIndex, rd.index).coarse.vectors.shape[1]),  # type: ignore[union-attr]
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
