"""The untrained encoder's own search as a ranking term, measured: the query encoded a second time by the embedded
all-MiniLM-L6-v2 (the encoder that built the entry space and its definition vectors), and a result raised by
`weight` x its best cosine to the result's definitions (WordNet's, and with `--second` also GCIDE's): the plain
semantic search a user could write, added to the trained ranking as an ensemble of two encoders. The default
ranking's 1,000 best are reranked.

    python experiments/base_query_term.py runs/main-dedup --weights 0,0.1,0.2,0.3,0.5

Ranks 0-based over all entries and over the 66,421 most frequent single words, gold words matched with their
lemmas; the benchmark's dev and test descriptions, Oxford and Chang (500 definitions each) with `--dictionaries`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from extra_texts_term import encoded
from published_terms import DATA, cell, encode, frequent_single_words, gold_forms, rank

from dictembed.dictionary import load_dictionary
from dictembed.evaluation import leak_free
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary


def second_best(rd: ReverseDictionary, entries: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per entry, the best cosine of unit `query` to the second dictionary's definitions of it (-1 for none)."""
    second = rd.space.second
    best = np.full(len(entries), -1.0, dtype=np.float32)
    if second is None:
        return best
    for i, e in enumerate(entries):
        start, count = int(second.first[e]), int(second.counts[e])
        if count:
            rows = np.asarray(second.definitions[start : start + count], dtype=np.float32)
            best[i] = float((rows @ query / np.linalg.norm(rows, axis=1)).max())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder (its entry space built by the embedded MiniLM)")
    parser.add_argument("--weights", default="0,0.1,0.2,0.3,0.5")
    parser.add_argument("--splits", default="dev,test")
    parser.add_argument("--second", action="store_true", help="also the second dictionary's definitions")
    parser.add_argument("--dictionaries", default="", help="definition query sets, e.g. oxford,chang")
    args = parser.parse_args()

    rd = ReverseDictionary.load(args.model).prepare()
    vocabulary, _ = frequent_single_words(rd.space.words, 66_421)
    index = {w: i for i, w in enumerate(rd.space.words)}
    sets: dict[str, list[tuple[str, set[str]]]] = {}
    for split in filter(None, args.splits.split(",")):
        sets[split] = [(t, gold_forms(e)) for t, e in load_description_pairs(DATA, split=split)]
    for name in filter(None, args.dictionaries.split(",")):
        queries = leak_free.cross_dictionary_queries(rd.space.words, load_dictionary(name), limit=500)
        sets[name] = [(q, {rd.space.words[g].lower()}) for q, g in zip(queries.definitions, queries.gold, strict=True)]
    weights = [float(w) for w in args.weights.split(",")]
    for name, queries in sets.items():
        texts = [q for q, _ in queries]
        h = encode(rd, texts)
        base = encoded(texts, Path(f"/tmp/base-query-{name}.npy"))
        results = rd.search_vectors(h, k=1000, max_definitions=0, texts=texts)
        rows: dict[float, tuple[list[float], list[float]]] = {}
        for q, (_, gold) in enumerate(queries):
            entries = np.array([index[r.words[0]] for r in results[q]])
            cosines = rd.space.definition_cosines(entries, base[q])
            term = np.array([float(c.max()) if len(c) else -1.0 for c in cosines or []], dtype=np.float32)
            if args.second:
                term = np.maximum(term, second_best(rd, entries, base[q]))
            for weight in weights:
                scored = sorted(
                    ((r.score + weight * float(t), r.words) for r, t in zip(results[q], term, strict=True)),
                    key=lambda x: -x[0],
                )
                every, top = rows.setdefault(weight, ([], []))
                every.append(rank(scored, gold))
                top.append(rank(scored, gold, vocabulary))
        print(f"{name} ({len(queries)}): weight | all entries | 66k", flush=True)
        for weight, (every, top) in rows.items():
            print(f"  {weight:<5g} {cell(every)} | {cell(top)}", flush=True)


if __name__ == "__main__":
    main()
