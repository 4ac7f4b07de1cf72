"""A description memory, measured: the shipped corpus's descriptions encoded by the model's query encoder, and a
result raised by `weight` x (the best cosine of the query to a corpus description of its word, less `threshold`,
floored at 0), over the default ranking's 1,000 best results. Query sets: the benchmark's dev and test descriptions
(whose words the corpus never describes: what the term costs where it cannot help) and `--sample` corpus words
with three or more descriptions, one held out as the query and the rest kept (what it gains where it can).

    python experiments/description_memory.py outputs/minilm-defsent-plus

Ranks over all entries, 0-based, gold words matched with their lemmas (`published_terms.gold_forms`).
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict

from published_terms import DATA, cell, encode, gold_forms, rank

from dictembed.description_corpus import load_descriptions
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary

Query = tuple[str, set[str], int | None, str]  # text, gold forms, the corpus row held out, the set's name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--weights", default="0,0.1,0.2,0.3,0.5", help="the term's weights, one row each")
    parser.add_argument("--thresholds", default="0,0.5,0.6,0.7", help="cosines under which nothing is added")
    parser.add_argument("--sample", type=int, default=300, help="corpus words held out one description each")
    args = parser.parse_args()

    rd = ReverseDictionary.load(args.model).prepare()
    corpus = load_descriptions("everyday")
    memory = encode(rd, [d.text for d in corpus])
    rows_of: dict[str, list[int]] = defaultdict(list)
    for i, d in enumerate(corpus):
        rows_of[d.word.lower()].append(i)
    queries: list[Query] = [
        (text, gold_forms(expected), None, split)
        for split in ("dev", "test")
        for text, expected in load_description_pairs(DATA, split=split)
    ]
    rng = random.Random(0)
    for word in rng.sample(sorted(w for w, rows in rows_of.items() if len(rows) >= 3), args.sample):
        held = rng.choice(rows_of[word])
        queries.append((corpus[held].text, gold_forms([corpus[held].word]), held, "corpus, one held out"))
    texts = [q[0] for q in queries]
    vectors = encode(rd, texts)
    results = rd.search_vectors(vectors, k=1000, max_definitions=0, texts=texts)
    cosines = vectors @ memory.T

    def best(q: int, words: list[str]) -> float:
        rows = [i for w in words for i in rows_of.get(w.lower(), ()) if i != queries[q][2]]
        return float(cosines[q, rows].max()) if rows else 0.0

    nearest = [[best(q, r.words) for r in results[q]] for q in range(len(queries))]
    settings = [(0.0, 0.0)] + [
        (float(w), float(t)) for w in args.weights.split(",") if float(w) for t in args.thresholds.split(",")
    ]
    names = list(dict.fromkeys(q[3] for q in queries))
    print("weight threshold  " + "  ".join(f"{name} ({sum(q[3] == name for q in queries)})" for name in names))
    for weight, threshold in settings:
        ranks: dict[str, list[float]] = defaultdict(list)
        for q, (_, gold, _, name) in enumerate(queries):
            scored = [
                (r.score + weight * max(0.0, c - threshold), r.words)
                for r, c in zip(results[q], nearest[q], strict=True)
            ]
            ranks[name].append(rank(sorted(scored, key=lambda x: -x[0]), gold))
        print(f"{weight:<6g} {threshold:<9g} " + "  ".join(cell(r) for r in ranks.values()), flush=True)


if __name__ == "__main__":
    main()
