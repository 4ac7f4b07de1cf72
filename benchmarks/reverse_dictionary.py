"""Reverse dictionary without leaks: a trained DefSent+ model, its untouched base model and TF-IDF.

    python benchmarks/reverse_dictionary.py outputs/minilm-defsent-plus --loo-limit 2000

Query sets (see dictembed.evaluation.leak_free):
- `oxford`, `chang`: definitions written by another dictionary, scored against the model's entries (a query
  counts when its headword is an entry; the others are dropped and counted);
- `loo`: the model's own test-split definitions (split as in training), each left out of its gold entry
  (exact: (mean * count - v) / (count - 1), v from the entry encoder); single-definition entries counted.

Rows: `trained` (the model), `base` (the untouched base model, `dictembed.paths.default_model()`, mean
pooling, scored against the trained model's entry space: the "before"), `tfidf` (TF-IDF cosine of each
entry's concatenated definitions). Every rank is the gold's among ALL entries, ties pessimistic.
A space saved before counts were kept gets them from the model's dictionary (`leak_free.with_counts`),
after checking that the entry encoder rebuilds a few entry vectors.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dictembed.dictionary import load_dictionary, split_by_headword
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace
from dictembed.evaluation import leak_free
from dictembed.loading import resolve_model
from dictembed.paths import default_model
from dictembed.record import RunRecord

COLUMNS = ("kept", "dropped", "single", "n", "mrr", "median_rank", "acc1", "acc10", "acc100")


def check_entries(space, dictionary, entry_encoder, n: int = 20, seed: int = 0) -> float:
    """The largest |mean of the entry encoder's vectors - saved entry vector| over `n` multi-definition entries."""
    counts = space.counts.numpy()
    rng = np.random.default_rng(seed)
    chosen = rng.choice(np.flatnonzero(counts > 1), n, replace=False)
    pooled = entry_encoder.with_pooling(leak_free.entry_pooling(space))
    worst = 0.0
    for i in chosen:
        vectors = pooled.encode(dictionary[space.words[i]].definitions)
        worst = max(worst, float(np.abs(vectors.mean(0) - space.matrix[i].numpy()).max()))
    return worst


def table(rows: list[dict]) -> str:
    head = "| queries | model | kept | dropped | single-def. | scored | MRR | median rank | acc@1 | acc@10 | acc@100 |"
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['queries']} | {r['model']} | {r['kept']:,} | {r['dropped']:,} | {r['single']:,} | {r['n']:,} "
            f"| {r['mrr']:.3f} | {r['median_rank']:g} | {r['acc1']:.1f} | {r['acc10']:.1f} | {r['acc100']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a saved DefSent+ model folder")
    parser.add_argument("--queries", default="oxford,chang", help="comma list of cross-dictionary query sets")
    parser.add_argument("--limit", type=int, default=None, help="at most N cross-dictionary queries per set")
    parser.add_argument("--loo-limit", type=int, default=2000, help="at most N leave-one-out queries (0: none)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()

    start = time.perf_counter()
    folder = resolve_model(args.model)
    record = RunRecord.load(folder, required=True)
    config = record.config
    space = EntrySpace.load(folder)
    dictionary = load_dictionary(config.get("dictionary", "wordnet"), wordnet_dir=config.get("wordnet_dir"))
    trained = Encoder.load(str(folder), device="cpu")
    base = Encoder.load(default_model(), pooling="mean", device="cpu")
    entry_encoder = leak_free.load_entry_encoder(folder, record, "cpu", "fp32")
    tfidf = leak_free.TfidfBaseline(space.words, dictionary)
    models = {"trained": trained, "base (before)": base}
    print(
        f"{args.model}: {len(space):,} entries ({space.kind}, {space.similarity}); entry encoder "
        f"{leak_free.entry_encoder_name(record)}; base {default_model()}",
        flush=True,
    )

    rows = []

    def add(queries_name: str, model: str, ranks: np.ndarray, queries: leak_free.QuerySet) -> None:
        row = {"queries": queries_name, "model": model, **leak_free.summary(ranks, queries)}
        rows.append(row)
        print(json.dumps(row), f"({time.perf_counter() - start:.0f} s)", flush=True)

    for name in [q for q in args.queries.split(",") if q]:
        queries = leak_free.cross_dictionary_queries(space.words, load_dictionary(name), limit=args.limit)
        for model, encoder in models.items():
            add(name, model, leak_free.model_ranks(encoder, space, queries), queries)
        add(name, "TF-IDF", tfidf.ranks(queries), queries)

    if args.loo_limit:
        if space.counts is None:
            space = leak_free.with_counts(space, dictionary)
            print(f"entry check: max |rebuilt - saved| = {check_entries(space, dictionary, entry_encoder):.2e}")
        test = split_by_headword(dictionary, seed=config.get("split_seed", 0))["test"]
        queries = leak_free.leave_one_out_queries(space, test, limit=args.loo_limit)
        name = f"{dictionary.name} test, leave-one-out"
        for model, encoder in models.items():
            add(name, model, leak_free.leave_one_out_ranks(encoder, space, entry_encoder, queries), queries)
        add(name, "TF-IDF", tfidf.ranks(queries, leave_one_out=True), queries)

    print()
    print(table(rows))
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
