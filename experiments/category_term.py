"""A category term, measured: a result gains `weight` when a word of the description names one of its word's WordNet
ancestors (the hypernyms of any of its noun or verb senses, transitively: *animal* for *giraffe*, whose gloss never
says it), so that "a long-necked African animal" or "a person who ..." favour the words of that kind. Ranked over
the default ranking's 1,000 best results on the benchmark's dev and test descriptions, Oxford and Chang not read.

    python experiments/category_term.py outputs/minilm-defsent-plus --weights 0,0.01,0.02,0.04

Ranks over all entries, 0-based, gold words matched with their lemmas (`published_terms.gold_forms`); a
description's words are its letter runs, lower-cased, with the lexical terms' stemming (`lexical_terms.stem`).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

from published_terms import DATA, cell, encode, gold_forms, rank

from dictembed import paths
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.lexical_terms import stem
from dictembed.reverse_dictionary import ReverseDictionary

POINTER = re.compile(r"^[@]i?$")  # a hypernym, or an instance's hypernym


def ancestors_by_word() -> dict[str, set[str]]:
    """Per WordNet headword (lower-cased), the stems of the lemmas of every ancestor of its noun and verb senses."""
    folder = paths.wordnet_dir(None)
    parents: dict[str, list[str]] = {}
    lemmas: dict[str, list[str]] = {}
    senses: dict[str, list[str]] = defaultdict(list)
    for part in ("noun", "verb"):
        for line in (folder / f"data.{part}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  "):
                continue
            fields = line.partition(" | ")[0].split()
            key, count = f"{part}{fields[0]}", int(fields[3], 16)
            words = [w.split("(")[0].replace("_", " ").lower() for w in fields[4 : 4 + 2 * count : 2]]
            pointers = int(fields[4 + 2 * count])
            at = 5 + 2 * count
            parents[key] = [
                f"{part}{fields[at + 4 * i + 1]}" for i in range(pointers) if POINTER.match(fields[at + 4 * i])
            ]
            lemmas[key] = words
            for word in words:
                senses[word].append(key)
    closure: dict[str, set[str]] = {}

    def above(key: str) -> set[str]:
        if key not in closure:
            closure[key] = set()
            found: set[str] = set()
            for parent in parents.get(key, ()):
                found.update(stem(w) for w in lemmas.get(parent, ()) if " " not in w)
                found |= above(parent)
            closure[key] = found
        return closure[key]

    return {word: set().union(*(above(k) for k in keys)) for word, keys in senses.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--weights", default="0,0.01,0.02,0.04,0.08", help="the term's weights, one row each")
    ancestors = ancestors_by_word()
    args = parser.parse_args()
    rd = ReverseDictionary.load(args.model).prepare()
    queries = [(t, gold_forms(e), s) for s in ("dev", "test") for t, e in load_description_pairs(DATA, split=s)]
    texts = [q[0] for q in queries]
    results = rd.search_vectors(encode(rd, texts), k=1000, max_definitions=0, texts=texts)
    words_of = [{stem(w) for w in re.findall(r"[a-z]+", t.lower())} for t in texts]
    named = [
        [bool(words_of[q] & set().union(*(ancestors.get(w.lower(), set()) for w in r.words))) for r in results[q]]
        for q in range(len(queries))
    ]
    print("weight  dev (median / acc@1 / acc@10 / acc@100)  test")
    for weight in (float(w) for w in args.weights.split(",")):
        ranks: dict[str, list[float]] = defaultdict(list)
        for q, (_, gold, split) in enumerate(queries):
            gains = zip(results[q], named[q], strict=True)
            scored = sorted(((r.score + weight * n, r.words) for r, n in gains), key=lambda x: -x[0])
            ranks[split].append(rank(scored, gold))
        print(f"{weight:<7g} " + "  ".join(cell(r) for r in ranks.values()), flush=True)


if __name__ == "__main__":
    main()
