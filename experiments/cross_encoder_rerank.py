"""A cross-encoder reranker, measured: all-MiniLM-L6-v2's weights with a one-logit head read a description and a
candidate ("words: its best definition") together, trained on the shipped corpus's descriptions against the hard
negatives a first-stage model ranks above or near their word; at search time it reorders the first stage's K best
results by logit + lambda x first-stage score.

    python experiments/cross_encoder_rerank.py mine outputs/minilm-defsent-plus runs/rerank
    python experiments/cross_encoder_rerank.py train runs/rerank --descriptions 8000 --negatives 7
    python experiments/cross_encoder_rerank.py rank runs/rerank MODEL --split dev --depths 10,20 --lambdas 0,5,10
    python experiments/cross_encoder_rerank.py held-out runs/rerank outputs/minilm-defsent-plus

Negatives come from a model not trained on the corpus (the README main job), so they are what a search of a new
description returns. The benchmark's words are not in the corpus (`tests/test_description_corpus.py`), so the dev
and test splits measure words the reranker never saw. Ranks as `published_terms.py` ranks them (all entries, and
the 66k most frequent single words).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from published_terms import DATA, cell, encode, frequent_single_words, gold_forms, rank
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from dictembed.description_corpus import load_descriptions
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.paths import default_model
from dictembed.reverse_dictionary import Result, ReverseDictionary
from dictembed.search_options import Filters

MAX_LENGTH = 64


def candidate_text(result: Result) -> str:
    """What the reranker reads of a result: its first three words and the first word's best definition."""
    first = result.words[0]
    definition = (result.definitions.get(first) or [""])[0]
    return f"{', '.join(result.words[:3])}: {definition}"


def mine(model: str, out: Path, depth: int) -> None:
    """Each corpus description's positive (its word's result, the sense nearest it first) and the first stage's
    `depth` best results without its word, written to out/pairs.jsonl."""
    rd = ReverseDictionary.load(model).prepare()
    corpus = load_descriptions("everyday")
    texts = [d.text for d in corpus]
    started = time.perf_counter()
    found = rd.search_vectors(encode(rd, texts), k=depth, max_definitions=1, texts=texts)
    out.mkdir(parents=True, exist_ok=True)
    kept = 0
    with (out / "pairs.jsonl").open("w", encoding="utf-8") as f:
        for description, results in zip(corpus, found, strict=True):
            gold = gold_forms([description.word])
            positive = next((r for r in results if any(w.lower() in gold for w in r.words)), None)
            if positive is None:
                own = rd.search(description.text, k=1, max_definitions=1, filters=Filters(pattern=description.word))
                positive = own[0] if own else None
            if positive is None:
                continue
            negatives = [candidate_text(r) for r in results if not any(w.lower() in gold for w in r.words)]
            row = {"query": description.text, "positive": candidate_text(positive), "negatives": negatives}
            f.write(json.dumps(row) + "\n")
            kept += 1
    print(f"{kept:,} of {len(corpus):,} descriptions mined in {time.perf_counter() - started:.0f} s")


def sense_of(text: str) -> str:
    """The definition in a `candidate_text`."""
    return text.split(": ", 1)[-1]


def split_rows(out: Path, descriptions: int, negatives: int, seed: int) -> tuple[list[dict], list[dict]]:
    """The mined rows with `negatives` or more negatives, shuffled: the first `descriptions` to train on, and the
    rest whose positive no training row has (words the reranker never saw). A synonym sharing the positive's sense
    is not a negative."""
    rows = [json.loads(line) for line in (out / "pairs.jsonl").open(encoding="utf-8")]
    for row in rows:
        row["negatives"] = [t for t in row["negatives"] if sense_of(t) != sense_of(row["positive"])]
    random.Random(seed).shuffle(rows)
    rows = [r for r in rows if len(r["negatives"]) >= negatives]
    seen = {r["positive"] for r in rows[:descriptions]}
    return rows[:descriptions], [r for r in rows[descriptions:] if r["positive"] not in seen]


def train(out: Path, descriptions: int, negatives: int, groups: int, lr: float, seed: int) -> None:
    """The reranker: listwise cross-entropy over (positive, `negatives` hard negatives) per description, one epoch
    over `descriptions` of them, bf16 autocast where the CPU has it, saved to out/model."""
    rows, _ = split_rows(out, descriptions, negatives, seed)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(default_model())
    model = AutoModelForSequenceClassification.from_pretrained(default_model(), num_labels=1)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = len(rows) // groups
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    rng = random.Random(seed)
    started, losses = time.perf_counter(), []
    for step in range(steps):
        batch = rows[step * groups : (step + 1) * groups]
        queries, candidates = [], []
        for row in batch:
            picked = row["negatives"][: negatives * 2]
            rng.shuffle(picked)
            for text in [row["positive"], *picked[:negatives]]:
                queries.append(row["query"])
                candidates.append(text)
        encoded = tokenizer(
            queries, candidates, padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
        )
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(**encoded).logits.float().view(len(batch), negatives + 1)
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if (step + 1) % 100 == 0 or step + 1 == steps:
            rate = (step + 1) * groups * (negatives + 1) / (time.perf_counter() - started)
            print(f"step {step + 1}/{steps} loss {np.mean(losses[-100:]):.3f} ({rate:.0f} pairs/s)", flush=True)
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    (out / "train.json").write_text(
        json.dumps({"descriptions": len(rows), "negatives": negatives, "groups": groups, "lr": lr, "seed": seed})
    )


def load_reranker(out: Path) -> tuple[Any, torch.nn.Module]:
    """The trained reranker in out/model and its tokenizer, for inference."""
    model = out / "model"
    return AutoTokenizer.from_pretrained(model), AutoModelForSequenceClassification.from_pretrained(model).eval()


@torch.no_grad()
def logits_of(model: torch.nn.Module, tokenizer, query: str, texts: list[str]) -> np.ndarray:
    """The reranker's logit of each (query, text) pair, fp32."""
    encoded = tokenizer(
        [query] * len(texts), texts, padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
    )
    return model(**encoded).logits.view(-1).numpy()


def reranked(results: list[Result], logits: np.ndarray, lam: float) -> list[tuple[float, list[str]]]:
    """(score, words) best first: the first len(logits) results by logit + lam x first-stage score, then the rest."""
    head = sorted(
        ((float(g) + lam * r.score, r.words) for r, g in zip(results, logits, strict=False)), key=lambda x: -x[0]
    )
    return head + [(r.score, r.words) for r in results[len(logits) :]]


def held_out(out: Path, model: str, limit: int) -> None:
    """acc@1 of the first stage and of its 10 best reranked, on corpus descriptions of words no training row has."""
    settings = json.loads((out / "train.json").read_text())
    _, rows = split_rows(out, settings["descriptions"], settings["negatives"], settings["seed"])
    rd = ReverseDictionary.load(model).prepare()
    tokenizer, reranker = load_reranker(out)
    first = reranked_first = found = 0
    for row in rows[:limit]:
        texts = [candidate_text(r) for r in rd.search(row["query"], k=10, max_definitions=1)]
        senses, gold = [sense_of(t) for t in texts], sense_of(row["positive"])
        best = int(np.argmax(logits_of(reranker, tokenizer, row["query"], texts)))
        first += senses[0] == gold
        reranked_first += senses[best] == gold
        found += gold in senses
    n = min(limit, len(rows))
    print(f"{n} corpus descriptions of unseen words: acc@1 {first / n:.3f}, reranked {reranked_first / n:.3f}", end="")
    print(f"; in the 10 best {found / n:.3f}")


def rank_split(out: Path, model: str, split: str, depths: list[int], lambdas: list[float], vocab: int) -> None:
    """Ranks of the split's descriptions with and without the reranker, all entries and the 66k words."""
    pairs = load_description_pairs(DATA, split=split)
    rd = ReverseDictionary.load(model).prepare()
    vocabulary, _ = frequent_single_words(rd.space.words, vocab)
    tokenizer, reranker = load_reranker(out)
    deepest = max(depths)
    rows: dict[tuple[int, float], dict[str, list[float]]] = {}
    timings = []
    for query, expected in pairs:
        gold = gold_forms(expected)
        for key, filters, keep in (("all", None, None), ("66k", Filters(words="single"), vocabulary)):
            results = rd.search(query, k=1000, filters=filters, max_definitions=1)
            if keep is not None:
                results = [r for r in results if any(w in keep for w in r.words)]
            started = time.perf_counter()
            logits = logits_of(reranker, tokenizer, query, [candidate_text(r) for r in results[:deepest]])
            timings.append(time.perf_counter() - started)
            rows.setdefault((0, 0.0), {}).setdefault(key, []).append(rank([(r.score, r.words) for r in results], gold))
            for depth in depths:
                for lam in lambdas:
                    ranked = reranked(results, logits[:depth], lam)
                    rows.setdefault((depth, lam), {}).setdefault(key, []).append(rank(ranked, gold))
    print(f"{model}, {split} ({len(pairs)}); reranking {deepest} took {1000 * np.median(timings):.1f} ms median")
    for (depth, lam), cells in rows.items():
        text = "  ".join(f"{key} {cell(ranks)}" for key, ranks in cells.items())
        print(f"  depth {depth:<3} lambda {lam:<5g} {text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    m = commands.add_parser("mine")
    m.add_argument("model")
    m.add_argument("out", type=Path)
    m.add_argument("--depth", type=int, default=30)
    t = commands.add_parser("train")
    t.add_argument("out", type=Path)
    t.add_argument("--descriptions", type=int, default=8000)
    t.add_argument("--negatives", type=int, default=7)
    t.add_argument("--groups", type=int, default=4, help="descriptions a step")
    t.add_argument("--lr", type=float, default=3e-5)
    t.add_argument("--seed", type=int, default=0)
    h = commands.add_parser("held-out")
    h.add_argument("out", type=Path)
    h.add_argument("model")
    h.add_argument("--limit", type=int, default=300)
    r = commands.add_parser("rank")
    r.add_argument("out", type=Path)
    r.add_argument("model")
    r.add_argument("--split", default="dev")
    r.add_argument("--depths", default="10,20")
    r.add_argument("--lambdas", default="0,5,10,20")
    r.add_argument("--vocabulary", type=int, default=66_421)
    args = parser.parse_args()
    if args.command == "mine":
        mine(args.model, args.out, args.depth)
    elif args.command == "train":
        train(args.out, args.descriptions, args.negatives, args.groups, args.lr, args.seed)
    elif args.command == "held-out":
        held_out(args.out, args.model, args.limit)
    else:
        depths = [int(d) for d in args.depths.split(",")]
        lambdas = [float(x) for x in args.lambdas.split(",")]
        rank_split(args.out, args.model, args.split, depths, lambdas, args.vocabulary)


if __name__ == "__main__":
    main()
