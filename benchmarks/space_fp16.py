"""Saved entry spaces in float16 against float32: file sizes and reverse-dictionary agreement.

    python benchmarks/space_fp16.py outputs/minilm-defsent-plus --queries 1000

The model's saved space is written twice to a temporary folder, `EntrySpace.save(dtype="fp32")` and
`dtype="fp16"`, and both are loaded back (`load` upcasts fp16 to float32, so scoring is float32 either way).
A seeded sample of the model's dictionary definitions (WordNet for the trained MiniLM) is encoded ONCE and
scored against both spaces; reported: the top-10 agreement (mean overlap of the two top-10 sets / 10), how
often top-1 and the ordered top-10 are identical, acc@1/acc@10 of the gold headword under each, the largest
logit difference, the file sizes and the load times, with the machine's load average (a shared machine).

STS is not measured: STS encodes sentences with the encoder alone and never reads the entry space, so a
float16 space cannot change it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from dictembed.entry_space import SPACE_DIR, EntrySpace
from dictembed.model_folder import ModelFolder
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.saved_entry_space import load_entry_space


def sample_pairs(dictionary, n: int, seed: int) -> list[tuple[str, str]]:
    """`n` (headword, definition) pairs drawn without replacement with `seed`."""
    pairs = list(dictionary.pairs())
    chosen = np.random.default_rng(seed).choice(len(pairs), size=min(n, len(pairs)), replace=False)
    return [pairs[i] for i in sorted(chosen)]


def saved_and_loaded(space: EntrySpace, folder: Path, dtype: str) -> tuple[EntrySpace, int, float]:
    """`space` saved in `dtype` under `folder`, loaded back; with the tensor file's size and the load seconds."""
    space.save(folder, dtype=dtype)
    size = (folder / SPACE_DIR / "tensors.safetensors").stat().st_size
    start = time.perf_counter()
    loaded = load_entry_space(folder)
    return loaded, size, time.perf_counter() - start


@torch.no_grad()
def compare(a: EntrySpace, b: EntrySpace, h: torch.Tensor, k: int, chunk: int = 100) -> tuple[np.ndarray, ...]:
    """The top-k entry indices [n, k] under `a` and under `b`, and the largest |logit difference|."""
    tops_a, tops_b, worst = [], [], 0.0
    for start in range(0, len(h), chunk):
        scores_a, scores_b = a(h[start : start + chunk]).float(), b(h[start : start + chunk]).float()
        tops_a.append(scores_a.topk(k, dim=-1).indices.numpy())
        tops_b.append(scores_b.topk(k, dim=-1).indices.numpy())
        worst = max(worst, float((scores_a - scores_b).abs().max()))
    return np.concatenate(tops_a), np.concatenate(tops_b), np.float64(worst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="outputs/minilm-defsent-plus", help="a trained DefSent+ folder")
    parser.add_argument("--queries", type=int, default=1000, help="definitions sampled as queries")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--k", type=int, default=10, help="the top-k compared")
    parser.add_argument("--output", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))

    load_before = os.getloadavg()
    rd = ReverseDictionary.load(args.model, device="cpu")
    dictionary = ModelFolder.open(args.model).dictionary().load()
    pairs = sample_pairs(dictionary, args.queries, args.seed)
    start = time.perf_counter()
    h = torch.cat(list(rd._pooled([d for _, d in pairs], batch_size=64)))  # encoded once for both spaces
    encode_s = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as tmp:
        fp32, size32, load32 = saved_and_loaded(rd.space, Path(tmp) / "fp32", "fp32")
        fp16, size16, load16 = saved_and_loaded(rd.space, Path(tmp) / "fp16", "fp16")
        dtype_recorded = json.loads((Path(tmp) / "fp16" / SPACE_DIR / "space.json").read_text())["dtype"]
    start = time.perf_counter()
    top32, top16, worst = compare(fp32, fp16, h, args.k)
    score_s = time.perf_counter() - start

    gold = np.array([fp32.index[w] for w, _ in pairs])
    overlap = np.array([len(set(a) & set(b)) for a, b in zip(top32, top16, strict=True)]) / args.k
    result = {
        "model": str(args.model),
        "entries": len(fp32),
        "similarity": fp32.similarity,
        "queries": len(pairs),
        "seed": args.seed,
        f"top{args.k}_agreement": float(overlap.mean()),
        f"top{args.k}_sets_identical": float((overlap == 1).mean()),
        f"top{args.k}_order_identical": float((top32 == top16).all(axis=1).mean()),
        "top1_identical": float((top32[:, 0] == top16[:, 0]).mean()),
        "acc1_fp32": float((top32[:, 0] == gold).mean() * 100),
        "acc1_fp16": float((top16[:, 0] == gold).mean() * 100),
        f"acc{args.k}_fp32": float((top32 == gold[:, None]).any(axis=1).mean() * 100),
        f"acc{args.k}_fp16": float((top16 == gold[:, None]).any(axis=1).mean() * 100),
        "max_abs_logit_diff": float(worst),
        "matrix_max_abs_diff": float((fp32.matrix - fp16.matrix).abs().max()),
        "tensors_bytes_fp32": size32,
        "tensors_bytes_fp16": size16,
        "saved_dtype_recorded": dtype_recorded,
        "load_s_fp32": round(load32, 3),
        "load_s_fp16": round(load16, 3),
        "encode_s": round(encode_s, 1),
        "score_s": round(score_s, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "sts": "unaffected: STS encodes with the encoder alone and never reads the entry space",
    }
    print(json.dumps(result, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
