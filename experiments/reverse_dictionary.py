"""Reverse dictionary without leaks: trained models, their untouched base model and TF-IDF, on identical
entries and queries.

    python experiments/reverse_dictionary.py outputs/minilm-defsent-plus --loo-limit 2000
    python experiments/reverse_dictionary.py outputs/minilm-defsent-plus outputs/OTHER ... --loo-limit 5000

The FIRST model must be a DefSent+ model: its definition space gives the entries (the common space), its
dictionary and split the leave-one-out queries. Every further model is scored on the same entries and
queries: against its own space when that is a definition space over the same entries (e.g. a PST step's,
left out with its own entry encoder), else (e.g. DefSent's word-embedding space) its encoder against the
common space; the `entry space` column says which.

Query sets (see dictembed.evaluation.leak_free):
- `oxford`, `chang`: definitions written by another dictionary, scored against the model's entries (a query
  counts when its headword is an entry; the others are dropped and counted);
- `loo`: the model's own test-split (`--split dev`: dev-split) definitions (split as in training), each left out
  of its gold entry (exact: (mean * count - v) / (count - 1), v from the entry encoder); single-definition
  entries counted.

Rows: each model, `base` (the untouched base model, mean pooling, scored against the common space: the
"before"; `--base`, by default the model the first one was trained from when that built its space, else
`dictembed.paths.default_model()`), `tfidf` (TF-IDF cosine of each entry's concatenated definitions, over words
or character 1-3-grams: `--tfidf-analyzer`, auto: n-grams for Chinese and Japanese). Every rank is the gold's
among ALL entries, ties pessimistic.

    python experiments/reverse_dictionary.py outputs/e5-cwn-defsent-plus --queries "" --loo-limit 100000 --split dev
A space saved before counts were kept gets them from the model's dictionary (`leak_free.with_counts`),
after checking that the entry encoder rebuilds a few entry vectors.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from dictembed.dictionary import Dictionary, load_dictionary, split_by_headword
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.evaluation import leak_free
from dictembed.model_folder import ModelFolder, read_record, resolve_model
from dictembed.paths import default_model
from dictembed.record import RunRecord
from dictembed.saved_entry_space import load_entry_space

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


def model_label(folder: Path, record: RunRecord) -> str:
    """`DefSent+ step 2 (folder)`, `DefSent (folder)`: the method, the PST step, the folder's name."""
    method = {"defsent-plus": "DefSent+", "defsent": "DefSent", "gr-bert": "GR-BERT"}.get(record.method or "", "?")
    step = f" step {record.pst_step}" if record.method == "defsent-plus" and record.pst_step else ""
    return f"{method}{step} ({folder.name})"


def counted(space: DefinitionSpace, dictionary: Dictionary, entry_encoder: Encoder, name: str) -> DefinitionSpace:
    """`space` with per-entry counts: its own, or (saved before they were kept) the dictionary's, checked."""
    if space.counts is not None:
        return space
    space = leak_free.with_counts(space, dictionary)
    print(
        f"{name}: counts from the dictionary; max |rebuilt - saved| = "
        f"{check_entries(space, dictionary, entry_encoder):.2e}",
        flush=True,
    )
    return space


def table(rows: list[dict]) -> str:
    head = (
        "| queries | model | entry space | kept | dropped | single-def. | scored | MRR | median rank "
        "| acc@1 | acc@10 | acc@100 |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['queries']} | {r['model']} | {r['space']} | {r['kept']:,} | {r['dropped']:,} | {r['single']:,} "
            f"| {r['n']:,} "
            f"| {r['mrr']:.3f} | {r['median_rank']:g} | {r['acc1']:.1f} | {r['acc10']:.1f} | {r['acc100']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="saved model folders; the first, a DefSent+ model, gives the entries")
    parser.add_argument("--queries", default="oxford,chang", help="comma list of cross-dictionary query sets")
    parser.add_argument("--limit", type=int, default=None, help="at most N cross-dictionary queries per set")
    parser.add_argument("--loo-limit", type=int, default=2000, help="at most N leave-one-out queries (0: none)")
    parser.add_argument("--split", default="test", choices=["test", "dev"], help="the leave-one-out headwords")
    parser.add_argument("--base", default=None, help="the untouched model of the base row (default: see above)")
    parser.add_argument("--tfidf-analyzer", default="auto", choices=leak_free.ANALYZERS, help="TF-IDF terms")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()

    start = time.perf_counter()
    folder = resolve_model(args.models[0])
    record = read_record(folder, required=True)
    source = ModelFolder.open(folder).dictionary()
    common = load_entry_space(folder)
    if not isinstance(common, DefinitionSpace):
        raise DictEmbedError(
            f"{args.models[0]}: the first model must have a DefSent+ definition space, not {common.kind!r}"
        )
    dictionary = source.load()
    entry_encoder = leak_free.load_entry_encoder(folder, record, "cpu", "fp32")
    common_name = f"{folder.name}'s"
    scorers: list[dict[str, Any]] = []
    for path in args.models:
        model_folder = resolve_model(path)
        model_record = read_record(model_folder, required=True)
        own = load_entry_space(model_folder)
        scorer = {
            "model": model_label(model_folder, model_record),
            "encoder": Encoder.load(str(model_folder), device="cpu"),
        }
        if isinstance(own, DefinitionSpace) and own.words == common.words:
            own_entry_encoder = entry_encoder
            if leak_free.entry_encoder_name(model_record) != leak_free.entry_encoder_name(record):
                own_entry_encoder = leak_free.load_entry_encoder(model_folder, model_record, "cpu", "fp32")
            own = counted(own, dictionary, own_entry_encoder, model_folder.name)
            label = (
                "common"
                if model_folder == folder
                else f"own ({own.kind}, by {Path(leak_free.entry_encoder_name(model_record)).name})"
            )
            scorer.update(space=own, entry_encoder=own_entry_encoder, label=label)
        else:
            scorer.update(space=None, entry_encoder=entry_encoder, label=f"common ({common_name}; its own: {own.kind})")
        scorers.append(scorer)
    common = counted(common, dictionary, entry_encoder, folder.name) if args.loo_limit else common
    for scorer in scorers:
        scorer["space"] = scorer["space"] if scorer["space"] is not None else common
    base_name = args.base or (
        leak_free.entry_encoder_name(record, folder) if record.pst_step in (None, 1) else default_model()
    )
    base = Encoder.load(base_name, pooling="mean", device="cpu")
    scorers.append(
        {"model": "base (before)", "encoder": base, "space": common, "entry_encoder": entry_encoder, "label": "common"}
    )
    tfidf = leak_free.TfidfBaseline(common.words, dictionary, args.tfidf_analyzer)
    print(
        f"entries: {args.models[0]}: {len(common):,} ({common.kind}, {common.similarity}); entry encoder "
        f"{leak_free.entry_encoder_name(record, folder)}; base {base_name}; TF-IDF over {tfidf.analyzer} terms",
        flush=True,
    )

    rows = []

    def add(queries_name: str, model: str, space_label: str, ranks: np.ndarray, queries: leak_free.QuerySet) -> None:
        row = {"queries": queries_name, "model": model, "space": space_label, **leak_free.summary(ranks, queries)}
        rows.append(row)
        print(json.dumps(row), f"({time.perf_counter() - start:.0f} s)", flush=True)

    for name in [q for q in args.queries.split(",") if q]:
        queries = leak_free.cross_dictionary_queries(common.words, load_dictionary(name), limit=args.limit)
        for scorer in scorers:
            add(
                name,
                scorer["model"],
                scorer["label"],
                leak_free.model_ranks(scorer["encoder"], scorer["space"], queries),
                queries,
            )
        add(name, f"TF-IDF ({tfidf.analyzer})", "common", tfidf.ranks(queries), queries)

    if args.loo_limit:
        held_out = split_by_headword(dictionary, seed=source.split_seed)[args.split]
        queries = leak_free.leave_one_out_queries(common, held_out, limit=args.loo_limit)
        name = f"{dictionary.name} {args.split}, leave-one-out"
        for scorer in scorers:
            ranks = leak_free.leave_one_out_ranks(scorer["encoder"], scorer["space"], scorer["entry_encoder"], queries)
            add(name, scorer["model"], scorer["label"], ranks, queries)
        add(name, f"TF-IDF ({tfidf.analyzer})", "common", tfidf.ranks(queries, leave_one_out=True), queries)

    print()
    print(table(rows))
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
