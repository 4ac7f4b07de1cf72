"""Fit the lexical terms' weights (`Ranking.query_word_weight`, `Ranking.overlap_weight`) on the description corpus.

    python experiments/lexical_weights.py outputs/minilm-defsent-plus            # 6,000 corpus descriptions
    python experiments/lexical_weights.py MODEL --limit 0 --json out.json          # all of them

Each training query is a corpus description (`dictembed.description_corpus`, `everyday`) whose word is no answer of
the benchmark (dev or test, lemma-aware), a seeded sample of `--limit`. For each, the `LEXICAL_DEPTH` best results
of the score without the lexical terms, and per result that score, whether the description uses its word and how
many words it shares with its definitions (`lexical_terms`). The weights maximise the likelihood of the gold
result under a softmax over each query's results of (score + overlap x shared - query_word x used) / T, T fitted
(queries whose gold is not among them carry no information and are left out). Prints the fitted weights and, on the
benchmark's dev and test descriptions over all entries, acc@1/3/10 and the median rank among those results without
the terms, with the fitted weights and with the defaults.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import replace
from pathlib import Path
from statistics import median

import numpy as np
import torch
from published_terms import DATA, gold_forms

from dictembed.description_corpus import EVERYDAY, load_descriptions
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import LEXICAL_DEPTH, OVERLAP_WEIGHT, QUERY_WORD_WEIGHT

Lists = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # per query: score, used, shared, gold [depth]


def result_lists(rd: ReverseDictionary, pairs: list[tuple[str, list[str]]]) -> list[Lists]:
    """Per (description, gold words): its best results' score without the lexical terms and their features."""
    base = replace(rd.ranking, query_word_weight=0, overlap_weight=0)
    used_only = replace(base, query_word_weight=1)
    shared_only = replace(base, overlap_weight=1)
    out, start = [], 0
    for h in rd._pooled([text for text, _ in pairs], 64):
        for vector, (text, words) in zip(h, pairs[start : start + len(h)], strict=True):
            rd.ranking = base
            depth, prior = max(LEXICAL_DEPTH, rd.ranking.depth), rd.group_prior
            (top, scores), *_ = rd._best_groups(vector[None], None, depth, prior)
            top, scores = rd._rerank(vector, top, scores, prior=prior)
            top, scores = top[:LEXICAL_DEPTH], scores[:LEXICAL_DEPTH]
            rd.ranking = used_only
            used = -rd._word_terms(text, top, None)
            rd.ranking = shared_only
            shared = rd._word_terms(text, top, None)
            gold = gold_forms(words)
            hit = [any(rd.space.words[i].lower() in gold for i in rd.groups.members(int(g))) for g in top]
            out.append((scores.astype(np.float64), used, shared, np.asarray(hit)))
        start += len(h)
    rd.ranking = replace(base, query_word_weight=QUERY_WORD_WEIGHT, overlap_weight=OVERLAP_WEIGHT)
    return out


def fit(lists: list[Lists]) -> tuple[float, float]:
    """(query_word, overlap) maximising the gold's softmax likelihood (with a fitted temperature), by L-BFGS."""
    kept = [row for row in lists if row[3].any()]
    score, used, shared, gold = (torch.tensor(np.stack([row[i] for row in kept])) for i in range(4))
    weights = torch.tensor([0.0, 0.0, 20.0], dtype=torch.float64, requires_grad=True)  # the last: 1 / temperature
    optimizer = torch.optim.LBFGS([weights], max_iter=200, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        logits = weights[2] * score - weights[0] * used + weights[1] * shared
        value = (logits.logsumexp(1) - logits.masked_fill(~gold.bool(), -torch.inf).logsumexp(1)).mean()
        value.backward()
        return value

    optimizer.step(loss)
    fitted = weights.detach()
    return float(fitted[0] / fitted[2]), float(fitted[1] / fitted[2])


def summary(lists: list[Lists], query_word: float, overlap: float) -> dict[str, float]:
    """acc@1/3/10 and the median rank (0-based; a gold outside the lists ranks last) under the given weights."""
    ranks = []
    for score, used, shared, gold in lists:
        order = np.lexsort((np.arange(len(score)), -(score - query_word * used + overlap * shared)))
        found = np.flatnonzero(gold[order])
        ranks.append(float(found[0]) if len(found) else float(LEXICAL_DEPTH))
    return {"median": median(ranks), **{f"acc@{k}": sum(r < k for r in ranks) / len(ranks) for k in (1, 3, 10)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--limit", type=int, default=6000, help="corpus descriptions to fit on (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rd = ReverseDictionary.load(args.model).prepare()
    dev, test = load_description_pairs(DATA, "dev"), load_description_pairs(DATA, "test")
    held = set().union(*(gold_forms(words) for _, words in dev + test))
    corpus = [d for d in load_descriptions(EVERYDAY) if not gold_forms([d.word]) & held]
    random.Random(args.seed).shuffle(corpus)
    train = [(d.text, [d.word]) for d in corpus[: args.limit or None]]
    query_word, overlap = fit(result_lists(rd, train))
    report: dict = {"model": args.model, "descriptions": len(train), "query_word": query_word, "overlap": overlap}
    print(f"fitted on {len(train)} descriptions: query_word_weight {query_word:.4f}, overlap_weight {overlap:.4f}")
    for name, pairs in (("dev", dev), ("test", test)):
        lists = result_lists(rd, pairs)
        for label, weights in (("without", (0.0, 0.0)), ("fitted", (query_word, overlap))):
            report[f"{name}, {label}"] = row = summary(lists, *weights)
            print(f"{name:4s} {label:9s}", "  ".join(f"{key} {value:.3f}" for key, value in row.items()))
        report[f"{name}, defaults"] = row = summary(lists, QUERY_WORD_WEIGHT, OVERLAP_WEIGHT)
        print(f"{name:4s} defaults ", "  ".join(f"{key} {value:.3f}" for key, value in row.items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
