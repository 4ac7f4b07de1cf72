"""GR-BERT (MT by default) on the embedded all-MiniLM-L6-v2: lexical substitution and STS before / after.

MiniLM has no MLM head, so GR training starts from a new head tied to the input embeddings; the
"before" row scores substitutes with h . E^T (SubstituteScorer's fallback). Columns: LS07 and the CoInCo
trial split (best / best-mode / oot / oot-mode / P@1 / P@3, x 100; all instances unless `--lexsub-limit`),
STS (Spearman x 100, first-last-avg pooling) on the tasks of `--sts-tasks`. Rows are stored in
<out>/gr_minilm.json and reused when the script is rerun with the same evaluation settings.

    python experiments/gr_minilm.py --limit 5000 --out runs/gr-bench
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dictembed.encoder import Encoder
from dictembed.evaluation.lexsub import evaluate_lexsub
from dictembed.evaluation.sts import evaluate_sts
from dictembed.model_folder import read_record
from dictembed.paths import default_model
from dictembed.recipes.config import RunConfig
from dictembed.recipes.gr_bert import GR_DICTIONARY, heldout_gloss_accuracy
from dictembed.recipes.run import train

LEXSUB_KEYS = ("best", "best_mode", "oot", "oot_mode", "p_at_1", "p_at_3")


def measure(model: str, args: argparse.Namespace, scoring: str = "auto", sts: bool = True) -> dict[str, float]:
    """Lexical substitution on LS07 and CoInCo-trial (`scoring`: see SubstituteScorer), then STS with
    first-last-avg pooling."""
    row: dict[str, float] = {}
    for dataset in ("LS07", "CoInCo"):
        result = evaluate_lexsub(model, dataset=dataset, limit=args.lexsub_limit, progress=False, scoring=scoring)
        row.update({f"{dataset} {k}": float(result[k]) for k in LEXSUB_KEYS})
    if not sts:
        return row
    tasks = args.sts_tasks.split(",")
    scores = evaluate_sts(Encoder.load(model, pooling="first_last_avg"), tasks=tasks)
    row.update({f"STS {k}": float(v) for k, v in scores.items()})
    return row


def print_table(rows: dict[str, dict[str, float]]) -> None:
    columns = list(dict.fromkeys(c for row in rows.values() for c in row))
    width = max(len(name) for name in rows)
    print(f"{'':<{width}}  " + "  ".join(f"{c:>12}" for c in columns))
    for name, row in rows.items():
        print(f"{name:<{width}}  " + "  ".join(f"{row.get(c, float('nan')):>12.2f}" for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=5000, help="training triplets")
    parser.add_argument("--arch", choices=["mt", "sc"], default="mt")
    parser.add_argument("--dictionary", default=GR_DICTIONARY)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dev-limit", type=int, default=500, help="held-out triplets for gloss accuracy")
    parser.add_argument("--lexsub-limit", type=int, default=None, help="first N instances (default: all)")
    parser.add_argument("--sts-tasks", default="STS12,STS13,STS14,STS15,STS16,STSB,SICKR")
    parser.add_argument("--out", default="runs/gr-bench")
    args = parser.parse_args()

    config = RunConfig.create(
        "gr-bert",
        arch=args.arch,
        dictionary=args.dictionary,
        limit=args.limit,
        dev_limit=args.dev_limit,
        lrs=[args.lr],
        batch_size=args.batch_size,
        select_on="stsb_dev",
        output=str(Path(args.out) / f"gr-{args.arch}"),
        overwrite=True,
    )
    started = time.time()
    path = train(config)
    trained_s = time.time() - started
    saved = read_record(path)
    store = Path(args.out) / "gr_minilm.json"
    stored = json.loads(store.read_text()) if store.exists() else {}
    settings = {"lexsub_limit": args.lexsub_limit, "sts_tasks": args.sts_tasks}
    rows = {}
    trained = f"GR-{args.arch.upper()} ({args.limit} triplets)"
    # MiniLM's head is new and briefly trained, so the trained model is also scored like the "before" row
    measured = (
        ("MiniLM (before)", default_model(), "auto", True),
        (trained, path, "auto", True),
        (f"{trained}, lexsub by h . E^T", path, "embeddings", False),
    )
    for name, model, scoring, sts in measured:
        previous = stored.get(name, {})
        if previous.get("settings") != settings or previous.get("model") != str(model):
            started = time.time()
            previous = {"settings": settings, "model": str(model), "row": measure(str(model), args, scoring, sts)}
            previous["wall_s"] = round(time.time() - started)
            stored[name] = previous
            store.write_text(json.dumps(stored, indent=2))
        rows[name] = previous["row"]
    print_table(rows)
    if "gloss_before" not in stored:
        stored["gloss_before"] = heldout_gloss_accuracy(default_model(), config)
        store.write_text(json.dumps(stored, indent=2))
    print(f"held-out gloss matching before training: {stored['gloss_before']}")
    print(f"dev: {saved.dev}; training + dev evaluation {trained_s:.0f}s; model {path}")


if __name__ == "__main__":
    main()
