"""Supervised STS-B fine-tuning at several training-set ratios and seeds (GR-BERT's supervised table).

Usage:
    python experiments/stsb_supervised.py [--model PATH] [--ratios 1.0,0.5,0.2] [--seeds 0,1,2]

Prints a markdown table: ratio, training pairs, test Spearman mean +- sample sd over seeds, dev
Spearman mean, wall and CPU time (all seeds). Scores are cosine Spearman x 100. On a busy machine
pass --threads 1: OpenMP threads that outnumber the free cores make each step many times slower.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def number_list(kind: type) -> Callable[[str], list]:
    """An argparse type for a comma-separated list of `kind` values."""

    def parse(text: str) -> list:
        try:
            return [kind(item) for item in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind.__name__} values, got {text!r}") from None

    return parse


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder or cached name (default: embedded MiniLM)")
    parser.add_argument("--ratios", type=number_list(float), default=[1.0, 0.5, 0.2], help="e.g. 1.0,0.5,0.2")
    parser.add_argument("--seeds", type=number_list(int), default=[0, 1, 2], help="e.g. 0,1,2")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--pooling", default="mean", choices=["cls", "mean", "max"])
    parser.add_argument("--limit", type=int, default=None, help="first N pairs of each split (smoke runs)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None, help="also write all per-seed results here")
    return parser.parse_args()


def fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def main() -> None:
    args = parse_args()
    from dictembed.errors import DictEmbedError

    try:
        run(args)
    except DictEmbedError as exc:
        raise SystemExit(f"error: {exc}") from None


def run(args: argparse.Namespace) -> None:
    """Fine-tune and evaluate every ratio x seed and print the table."""
    logging.basicConfig(level=logging.WARNING)
    import torch

    from dictembed.evaluation.sts_supervised import finetune_stsb_seeds
    from dictembed.paths import default_model

    if args.threads:
        torch.set_num_threads(args.threads)
    model = args.model or default_model()
    ratios, seeds = args.ratios, args.seeds
    rows, results = [], []
    for ratio in ratios:
        start, cpu_start = time.perf_counter(), time.process_time()
        summary = finetune_stsb_seeds(
            model,
            ratio,
            seeds,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            pooling=args.pooling,
            limit=args.limit,
        )
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        results.append(summary)
        per_seed = ", ".join(f"{r['test_spearman']:.2f}" for r in summary["runs"])
        rows.append(
            f"| {ratio:g} | {summary['runs'][0]['n_train']} | {fmt(summary['mean'])} ± {fmt(summary['sd'])} "
            f"| {per_seed} | {fmt(summary['dev_mean'])} | {wall / 60:.1f} min | {cpu / 60:.1f} min |"
        )
        print(f"ratio {ratio:g} done in {wall:.0f}s: test {per_seed}", flush=True)
    print(
        f"\nModel: {model}; seeds {seeds}; epochs {args.epochs}, batch {args.batch_size}, lr {args.lr:g}; "
        f"torch threads {torch.get_num_threads()}\n"
    )
    print("| ratio | train pairs | test Spearman (mean ± sd) | per seed | dev Spearman | wall time | CPU time |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
