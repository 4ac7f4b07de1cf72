"""Quality benchmark on the embedded all-MiniLM-L6-v2: the untrained baseline, DefSent with the
word-embedding fallback, DefSent+ across (CLS|Mean, AC|AMP), PST steps 2-3 and ICA.

Columns: STS (7 tasks + avg), SentEval avg (with --senteval), reverse-dictionary MRR / top-k on held-out
(test) headwords. Trained models are reused when the script is rerun (each run's folder is kept); a row whose
published configuration differs from the requested one (e.g. more --pst-steps) is retrained, reusing its
finished runs.

    python experiments/quality_minilm.py --limit 20000 --out runs/bench
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from dictembed.dictionary import load_dictionary, split_by_headword
from dictembed.encoder import Encoder
from dictembed.evaluation.ranking import reverse_dictionary_metrics
from dictembed.evaluation.sts import evaluate_sts
from dictembed.model_folder import read_record
from dictembed.paths import default_model
from dictembed.recipes.config import RunConfig
from dictembed.recipes.run import train
from dictembed.reverse_dictionary import ReverseDictionary

STS_KEYS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STSB", "SICKR", "avg"]


def rows(args: argparse.Namespace) -> dict[str, tuple[str, RunConfig | None]]:
    """Row name -> (how to get the model, config)."""
    out = Path(args.out)
    shared = dict(
        dictionary=args.dictionary,
        limit=args.limit,
        lrs=args.lrs,
        seeds=args.seeds,
        dev_limit=args.dev_limit,
        max_length=128,
        cache_dir=str(out / "cache"),  # entry spaces built by the same encoder are shared across rows
        overwrite=True,  # a rerun reuses every finished (step, lr, seed) run whose configuration is the same
    )

    def plus(**settings) -> RunConfig:
        options = {"pooler": args.pooler, "similarity": args.similarity, "select_on": "stsb_dev"}
        return RunConfig.create("defsent-plus", **shared, **options | settings)

    table: dict[str, tuple[str, RunConfig | None]] = {"baseline (MiniLM, mean)": ("baseline", None)}
    table["DefSent, word-embedding fallback, mean"] = (
        "defsent",
        RunConfig.create(
            "defsent", **shared, pooling="mean", space="word-embeddings", output=str(out / "defsent-we-mean")
        ),
    )
    folder, label = (f"-{args.tag}", f" [{args.tag}]") if args.tag else ("", "")
    for pooling in ("cls", "mean"):
        for entries in ("ac", "amp"):
            name = f"plus-{pooling}-{entries}{folder}"
            steps = args.pst_steps if (pooling, entries) == tuple(args.pst_config.split("-")) else 1
            table[f"DefSent+ {pooling.upper()} {entries.upper()} step 1{label}"] = (
                "plus",
                plus(pooling=pooling, entries=entries, pst_steps=steps, output=str(out / name)),
            )
    pooling, entries = args.pst_config.split("-")
    for step in range(2, args.pst_steps + 1):
        table[f"DefSent+ {pooling.upper()} {entries.upper()} step {step}{label}"] = (
            f"step{step}",
            table[f"DefSent+ {pooling.upper()} {entries.upper()} step 1{label}"][1],
        )
    ica_output = str(out / f"plus-{args.pst_config}-ica{folder}")
    table[f"DefSent+ {pooling.upper()} {entries.upper()} step 1 + ICA{label}"] = (
        "plus",
        plus(pooling=pooling, entries=entries, ica="last", output=ica_output),
    )
    return table


def model_path(kind: str, config: RunConfig | None) -> str:
    if kind == "baseline":
        return default_model()
    assert config is not None
    if kind == "defsent":
        return str(train(config))
    saved = read_record(config.output)
    if saved.config is None or saved.config.to_dict() != config.to_dict():
        train(config)  # finished (lr, seed, step) runs inside are reused; only what changed trains
    history = read_record(config.output, required=True).selection.get("pst")
    if kind.startswith("step"):
        return next(h["path"] for h in history if h["step"] == int(kind[4:]))
    return next(h["path"] for h in history if h["step"] == 1) if history else config.output


def evaluate(path: str, args: argparse.Namespace, test_split) -> dict[str, float]:
    encoder = Encoder.load(path)
    result = {k: v for k, v in evaluate_sts(encoder).items() if k in STS_KEYS}
    if args.senteval:
        from dictembed.evaluation.senteval import evaluate_senteval

        result["SentEval"] = evaluate_senteval(encoder)["avg"]
    if path != default_model():
        ranks = ReverseDictionary.load(path).ranks(test_split, limit=args.rd_limit)
        result.update({f"rd_{k}": v for k, v in reverse_dictionary_metrics(ranks).items()})
    info = read_record(path)
    if info.exists:
        result["examples_per_s"] = info.throughput or 0.0
        result["lr"] = info.lr
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dictionary", default="wordnet")
    parser.add_argument("--limit", type=int, default=20000, help="training definitions per run")
    parser.add_argument("--lrs", type=lambda s: [float(x) for x in s.split(",")], default=[2e-5])
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0])
    parser.add_argument("--pooler", choices=["none", "model"], default="none")
    parser.add_argument("--similarity", choices=["dot", "cosine"], default="dot", help="DefSent+ entry logits")
    parser.add_argument("--tag", default="", help="suffix of row names and run folders (variants of the grid)")
    parser.add_argument("--pst-steps", type=int, default=3)
    parser.add_argument("--pst-config", default="mean-amp", help="pooling-entries of the PST and ICA rows")
    parser.add_argument("--dev-limit", type=int, default=2000)
    parser.add_argument("--rd-limit", type=int, default=5000, help="held-out definitions for reverse dictionary")
    parser.add_argument("--senteval", action="store_true")
    parser.add_argument("--only", default=None, help="regular expression: run only the rows it matches (re.search)")
    parser.add_argument("--out", default="runs/bench")
    args = parser.parse_args()

    test_split = split_by_headword(load_dictionary(args.dictionary), seed=0)["test"]
    store = Path(args.out) / "quality_minilm.json"
    results = json.loads(store.read_text()) if store.exists() else {}  # rows of earlier invocations stay
    for name, (kind, config) in rows(args).items():
        if args.only and not re.search(args.only, name):
            continue
        start = time.time()
        results[name] = evaluate(model_path(kind, config), args, test_split)
        results[name]["wall_s"] = round(time.time() - start)
        print(json.dumps({name: results[name]}), flush=True)
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(results, indent=2))
    columns = sorted({k for r in results.values() for k in r}, key=lambda k: (k not in STS_KEYS, k))
    columns = [k for k in STS_KEYS if k in columns] + [k for k in columns if k not in STS_KEYS]
    print("\n| model | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, r in results.items():
        cells = [f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
