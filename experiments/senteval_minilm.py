"""SentEval transfer tasks on the embedded all-MiniLM-L6-v2: prints a markdown table and the wall time.

Usage: python experiments/senteval_minilm.py [--tasks MR CR ...] [--inner-folds 10] [--seed 1111]
"""

from __future__ import annotations

import argparse
import logging
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=None, help="subset of MR CR SUBJ MPQA SST2 TREC MRPC")
    parser.add_argument("--folds", type=int, default=10, help="outer CV folds (SentEval: 10)")
    parser.add_argument("--inner-folds", type=int, default=10, help="inner CV folds for C (SentEval: 10)")
    parser.add_argument("--seed", type=int, default=1111)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from sentence_transformers import SentenceTransformer

    from dictembed.evaluation.senteval import SENTEVAL_TASKS, evaluate_senteval
    from dictembed.paths import default_model

    model = SentenceTransformer(default_model(), device="cpu")
    start = time.perf_counter()
    scores = evaluate_senteval(model, tasks=args.tasks, seed=args.seed, folds=args.folds, inner_folds=args.inner_folds)
    wall = time.perf_counter() - start

    columns = [t for t in SENTEVAL_TASKS if t in scores] + ["avg"]
    print("| model | " + " | ".join(columns) + " | MRPC F1 |")
    print("|---" * (len(columns) + 2) + "|")
    f1 = f"{scores['MRPC/F1']:.2f}" if "MRPC/F1" in scores else "-"
    print("| all-MiniLM-L6-v2 | " + " | ".join(f"{scores[c]:.2f}" for c in columns) + f" | {f1} |")
    print(f"\nwall time: {wall:.0f} s (folds={args.folds}, inner folds={args.inner_folds}, seed={args.seed})")


if __name__ == "__main__":
    main()
