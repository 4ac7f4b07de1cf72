"""Further texts of a word as a ranking term, measured: WordNet's example sentences of its senses ("a silent house",
"made drowsy by the long ride") or a second dictionary's definitions of it (GCIDE), encoded by the model that built
the entry space, and a result raised by `weight` x (the best cosine of the query to a text of its words, less
`floor`, floored at 0), the default ranking's 1,000 best reranked.

    python experiments/extra_texts_term.py outputs/minilm-defsent-plus --texts examples --weights 0,0.1,0.2

A description of a situation ("a room where you could hear a pin drop") may read like an example of its word in use
more than like its definition. Ranks 0-based over all entries and over the 66,421 most frequent single words
(results whose words all fall outside them dropped), gold words matched with their lemmas; the description sets are
the benchmark's dev and test splits and any `--data` file's rows; Oxford and Chang (500 definitions each, as
`experiments/headword_term.py` draws them) with `--dictionaries`.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
from published_terms import DATA, cell, encode, frequent_single_words, gold_forms, rank

from dictembed import paths
from dictembed.dictionary import load_dictionary
from dictembed.evaluation import leak_free
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.texts import unique_index


def texts_by_word(kind: str, words: set[str]) -> dict[str, list[str]]:
    """Per lower-cased headword of `words`: its WordNet examples (`examples`) or its GCIDE definitions (`gcide`)."""
    found: dict[str, list[str]] = defaultdict(list)
    source = load_dictionary("wordnet" if kind == "examples" else "gcide")
    for entry in source:
        word = entry.headword.lower()
        if word not in words:
            continue
        for sense in entry.senses:
            found[word].extend(sense.examples if kind == "examples" else [sense.definition])
    return {w: list(dict.fromkeys(t)) for w, t in found.items() if t}


def encoded(texts: list[str], cache: Path) -> np.ndarray:
    """Unit vectors of `texts` by the embedded all-MiniLM-L6-v2 (the entry space's encoder), cached in `cache`."""
    if cache.exists():
        return np.load(cache)
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(paths.default_model(), device="cpu")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        vectors = model.encode(texts, batch_size=128, normalize_embeddings=True, show_progress_bar=False)
    vectors = np.asarray(vectors, dtype=np.float32)
    np.save(cache, vectors)
    return vectors


def term_variants(
    best: list[float], own: list[float], floors: list[float], weights: list[float]
) -> list[tuple[str, float, list[float]]]:
    """Per result (its best cosine to the texts, NaN for none; `own`: to its own dictionary's definitions), the term
    of each variant and weight: past a floor (`floor F`), the texts' cosine in place of the own one where there are
    texts (`stand-in`), and the texts' gain over the own one (`gain`)."""
    pairs = list(zip(best, own, strict=True))
    variants = [
        (f"floor {f:g}", w, [max(b - f, 0.0) if b == b else 0.0 for b in best]) for f in floors for w in weights
    ]
    variants += [("stand-in", w, [b if b == b else o for b, o in pairs]) for w in weights if w]
    variants += [("gain", w, [max(b - o, 0.0) if b == b else 0.0 for b, o in pairs]) for w in weights if w]
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder (its entry space built by the embedded MiniLM)")
    parser.add_argument("--texts", choices=("examples", "gcide"), default="examples")
    parser.add_argument("--weights", default="0,0.05,0.1,0.2,0.3")
    parser.add_argument("--floors", default="0,0.3")
    parser.add_argument("--data", type=Path, action="append", default=[], help="more description TSVs (split dev)")
    parser.add_argument("--dictionaries", default="oxford,chang", help="definition query sets ('' for none)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp"), help="folder for the encoded texts")
    args = parser.parse_args()

    rd = ReverseDictionary.load(args.model).prepare()
    words = {w.lower() for w in rd.space.words}
    extra = texts_by_word(args.texts, words)
    flat = [t for w in sorted(extra) for t in extra[w]]
    owners, start = {}, 0
    for w in sorted(extra):
        owners[w] = np.arange(start, start + len(extra[w]))
        start += len(extra[w])
    print(f"{args.texts}: {len(flat):,} texts of {len(extra):,} words", flush=True)
    unique, (back,) = unique_index(flat)
    vectors = encoded(unique, args.cache / f"extra-{args.texts}.npy")[back]
    vocabulary, _ = frequent_single_words(rd.space.words, 66_421)

    sets: dict[str, list[tuple[str, set[str]]]] = {}
    for split in ("dev", "test"):
        sets[split] = [(t, gold_forms(e)) for t, e in load_description_pairs(DATA, split=split)]
    for path in args.data:
        sets[path.stem] = [(t, gold_forms(e)) for t, e in load_description_pairs(path, split="dev")]
    for name in filter(None, args.dictionaries.split(",")):
        queries = leak_free.cross_dictionary_queries(rd.space.words, load_dictionary(name), limit=500)
        sets[name] = [(q, {rd.space.words[g].lower()}) for q, g in zip(queries.definitions, queries.gold, strict=True)]

    floors = [float(f) for f in args.floors.split(",")]
    weights = [float(w) for w in args.weights.split(",")]
    index = {w: i for i, w in enumerate(rd.space.words)}
    space = rd.space
    for name, queries in sets.items():
        texts = [q for q, _ in queries]
        h = encode(rd, texts)
        results = rd.search_vectors(h, k=1000, max_definitions=0, texts=texts)
        rows: dict[tuple[str, float], tuple[list[float], list[float]]] = {}
        for q, (_, gold) in enumerate(queries):
            cosine = vectors @ h[q]
            best: list[float] = []
            for r in results[q]:
                found = [owners[w.lower()] for w in r.words if w.lower() in owners]
                best.append(float(cosine[np.concatenate(found)].max()) if found else math.nan)
            entries = np.array([index[r.words[0]] for r in results[q]])
            mine = space.definition_cosines(entries, h[q])
            own = [float(c.max()) if len(c) else 0.0 for c in mine]
            variants = term_variants(best, own, floors, weights)
            for kind, weight, term in variants:
                pairs = zip(results[q], term, strict=True)
                scored = sorted(((r.score + weight * t, r.words) for r, t in pairs), key=lambda x: -x[0])
                every, top = rows.setdefault((kind, weight), ([], []))
                every.append(rank(scored, gold))
                top.append(rank(scored, gold, vocabulary))
        print(f"{name} ({len(queries)}): variant weight | all entries | 66k", flush=True)
        for (kind, weight), (every, top) in rows.items():
            print(f"  {kind:<9} {weight:<5g} {cell(every)} | {cell(top)}", flush=True)


if __name__ == "__main__":
    main()
