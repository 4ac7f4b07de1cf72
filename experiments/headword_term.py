"""The headword term of the reverse dictionary's score (`Ranking.headword_weight`: the cosine of the description to
the word itself), measured through the product's search on another dictionary's definitions of the same headwords.

    python experiments/headword_term.py outputs/minilm-defsent-plus --weights 0,0.3 --json out.json

Query sets: `oxford` and `chang` (`dictembed evaluate reverse-dictionary --queries`), the first `--limit` of each
in a seeded sample whose headword is an entry. Each query is searched over every entry with the model's own
ranking and the headword weight of each row; its rank is 0-based (results above the first holding the gold word),
inf beyond `--depth`. The everyday descriptions are measured by `experiments/published_terms.py`, which searches
with the product default.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace
from pathlib import Path

from published_terms import summary

from dictembed.dictionary import load_dictionary
from dictembed.evaluation import leak_free
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import OVERLAP_WEIGHT, QUERY_WORD_WEIGHT, Ranking


def rank_of(rd: ReverseDictionary, query: str, gold: str, depth: int) -> float:
    """The 0-based rank of the first result holding `gold`; inf when none of the `depth` results does."""
    for rank, result in enumerate(rd.search(query, k=depth, max_definitions=0)):
        if gold in result.words:
            return rank
    return math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model folder whose entry space keeps its headword vectors")
    parser.add_argument("--weights", default="0,0.3", help="headword weights, one row each")
    parser.add_argument("--sets", default="oxford,chang", help="query sets")
    parser.add_argument("--limit", type=int, default=500, help="queries per set")
    parser.add_argument("--depth", type=int, default=300, help="results searched for the gold word")
    parser.add_argument("--query-word-weight", type=float, default=QUERY_WORD_WEIGHT, help="0: that lexical term off")
    parser.add_argument("--overlap-weight", type=float, default=OVERLAP_WEIGHT, help="0: that lexical term off")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()

    ranking = Ranking(query_word_weight=args.query_word_weight, overlap_weight=args.overlap_weight)
    rd = ReverseDictionary.load(args.model, ranking=ranking).prepare()
    table = {}
    for name in args.sets.split(","):
        queries = leak_free.cross_dictionary_queries(rd.space.words, load_dictionary(name), limit=args.limit)
        for weight in (float(w) for w in args.weights.split(",")):
            rd.ranking = replace(rd.ranking, headword_weight=weight)
            ranks = [
                rank_of(rd, query, rd.space.words[gold], args.depth)
                for query, gold in zip(queries.definitions, queries.gold, strict=True)
            ]
            row = table[f"{name}, headword weight {weight:g}"] = summary(ranks)
            print(
                f"{name:<7} w={weight:<4g} median {row['median']:>5}  "
                + "  ".join(f"{k} {row[k]:.3f}" for k in ("acc@1", "acc@10", "acc@100")),
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "table": table}, indent=1))


if __name__ == "__main__":
    main()
