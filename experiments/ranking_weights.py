"""The reverse dictionary's default weights (`dictembed.search_options.Ranking`): a grid of the definition weight
and the frequency weight, scored on the two tuning sets, neither of which is reported as a result.

    python experiments/ranking_weights.py outputs/minilm-defsent-plus --json weights.json

Tuning sets: the dev split of tests/data/everyday_descriptions.tsv (people's words) and 500 Oxford definitions
drawn with seed 1, leaving out those of the seed-0 sample that experiments/reverse_dictionary_ranking.py reports.
Each cell is scored as the product scores it (the definition term reranks the `RERANK_DEPTH` best groups).
Rule: the largest sum of the two MRRs; among cells within 0.005 of it, the smallest definition weight (the
smaller change), then the largest sum.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
from reverse_dictionary_ranking import CHUNK, DESCRIPTIONS, Queries, Scorer, metrics

from dictembed.dictionary import load_dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.evaluation import leak_free
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.model_folder import ModelFolder, resolve_model
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_options import RERANK_DEPTH

DEFINITION_WEIGHTS = (0, 0.25, 0.5, 0.75, 1.0)
FREQUENCY_WEIGHTS = (0, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02)


def tuning_sets(space: DefinitionSpace, size: int = 500) -> list[Queries]:
    """The description dev split and an Oxford sample disjoint from the reported one."""
    index = leak_free.entry_index(space.words)
    texts, gold = [], []
    for description, expected in load_description_pairs(DESCRIPTIONS, split="dev"):
        found = [i for w in expected if (i := leak_free.lookup(index, w)) is not None]
        if found:
            texts.append(description)
            gold.append(np.array(found))
    oxford = load_dictionary("oxford")
    reported = set(leak_free.cross_dictionary_queries(space.words, oxford, limit=size).definitions)
    drawn = leak_free.cross_dictionary_queries(space.words, oxford, limit=size + size // 2, seed=1)
    kept = [i for i, d in enumerate(drawn.definitions) if d not in reported][:size]
    return [
        Queries("desc-dev", texts, gold),
        Queries("oxford-tune", [drawn.definitions[i] for i in kept], [np.array([drawn.gold[i]]) for i in kept]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a DefSent+ model folder whose entry space keeps its definition vectors")
    parser.add_argument("--json", type=Path, default=None, help="write every cell here")
    args = parser.parse_args()
    folder = resolve_model(args.model)
    space = load_entry_space(folder)
    if not isinstance(space, DefinitionSpace) or space.definitions is None:
        raise SystemExit(f"{args.model}: the entry space keeps no definition vectors")
    pairs = list(ModelFolder.open(folder).dictionary().load().pairs())
    scorer = Scorer(Encoder.load(str(folder), device="cpu"), space, pairs, space.definitions.float().numpy())
    sets = tuning_sets(space)
    parts = {q.name: [scorer.components(q, s, s + CHUNK) for s in range(0, len(q.texts), CHUNK)] for q in sets}
    cells = []
    for a, f in itertools.product(DEFINITION_WEIGHTS, FREQUENCY_WEIGHTS):
        freq = 8 * (1 + a) * f  # the product's weights in the scorer's terms (freq is Zipf / 8)
        cell: dict[str, float] = {"definition_weight": a, "frequency_weight": f}
        for q in sets:
            ranks = []
            for i, p in enumerate(parts[q.name]):
                gold = q.gold[i * CHUNK : (i + 1) * CHUNK]
                combined = np.asarray(p["dense"] + a * p["defmax"] + freq * p["freq"], dtype=np.float32)
                first = np.asarray(p["dense"] + freq / (1 + a) * p["freq"], dtype=np.float32)
                ranks.append(scorer.ranks(combined, gold, first, RERANK_DEPTH) if a else scorer.ranks(combined, gold))
            cell[q.name] = metrics(np.concatenate(ranks))["mrr"]
        cell["sum"] = sum(cell[q.name] for q in sets)
        cells.append(cell)
        print(json.dumps(cell), flush=True)
    best = max(c["sum"] for c in cells)
    near = [c for c in cells if c["sum"] >= best - 0.005]
    chosen = min(near, key=lambda c: (c["definition_weight"], -c["sum"]))
    print(f"chosen: {json.dumps(chosen)}")
    if args.json:
        args.json.write_text(json.dumps({"cells": cells, "chosen": chosen}, indent=1))


if __name__ == "__main__":
    main()
