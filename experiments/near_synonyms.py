"""Near-synonym mode (`ReverseDictionary.neighbours`) measured on WordNet's synonym sets and on LS07's substitutes.

    python experiments/near_synonyms.py runs/desc5k-r025 --json   # --depth 1000: more groups scored exactly

WordNet: a seeded sample of the synsets with at least two single-word lemmas that are entries of the model, split
in halves (dev, test) by the same seed. Each such lemma is a query; its synset-mates are the answers. In a space
built from WordNet the lemmas of a synset share its gloss, so their definition vectors for that sense are one:
the set measures how well a scoring finds the entries that share a sense with the query, which is circular for a
WordNet model. LS07 (SemEval 2007 lexical substitution, `lexsub/LS07` of the shared data) does not come from
WordNet: each of its target words is a query and the answers are the substitutes its annotators gave in any of
its sentences (those that are entries), its trial targets the dev split and its test targets the test split.

Per query, of the ten results a user sees (a result is a group of entries with identical vectors, the query word
left out): recall@10, the share of its answers listed; hit@10, whether any is; precision@10, the share of the
results that hold an answer; antonyms@10, the share of the results that hold a WordNet antonym of the query word
(those the library's WordNet dictionary records, `wordnet.antonym_words`: the words of the synsets that a sense of
it points to as antonyms, for an adjective with those synsets' satellites, and for a satellite its head's: WordNet's
indirect antonyms). The variants are `SynonymScoring`s, chosen on dev by one rule: the largest sum of WordNet's
recall@10 and LS07's precision@10; among the variants within 0.005 of it, the smallest sense weight, then the
smallest penalty, then the largest similar pair (1, a shared sense's pair, is the value that needs no tuning).
The test rows are the result. The mixed variants rank the `--depth` candidates of the default's rough stage (with
a similar pair, and the words the model folder's dictionary lists as similar to the query); `PRODUCT` ranks as
`neighbours` does, the default with the antonyms that the folder's dictionary records left out (none for a folder
saved without them). Last, one `neighbours` call, and one `similar_words` call (mode similar's answer, with the
opposites), are timed for `--latency` seeded entries (the first call, which projects the definition vectors, left
out). About 2 minutes of CPU with the defaults.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dictembed.dictionary.sources.wordnet import DATA_FILES, load_wordnet, read_synsets
from dictembed.evaluation.lexsub_metrics import load_lexsub, read_gold
from dictembed.near_synonyms import SynonymScoring
from dictembed.paths import data_dir, wordnet_dir
from dictembed.query_encoder import search_threads
from dictembed.reverse_dictionary import ReverseDictionary

LS07_TRIAL = Path("lexsub/LS07/trial/lst_trial.gold")
K = 10
BEFORE = "entry vectors' cosine alone"
PRODUCT = "the default, the dictionary's antonyms left out (neighbours)"
DEFAULT = SynonymScoring()
WEIGHTS = [(1000, 0.0), (0.5, 0.0), (1.0, 0.0), (2.0, 0.0), (4.0, 0.0), (1.0, 0.1), (1.0, 0.2), (1.0, 0.4), (2.0, 0.2)]
GRID = [(w, p, 0.0) for w, p in WEIGHTS] + [(1.0, 0.2, s) for s in (0.8, 0.9, 1.0)]  # (w, pos penalty, similar pair)
VARIANTS: dict[str, SynonymScoring] = {BEFORE: SynonymScoring(sense_weight=0)} | {
    f"w={w:g}, pos penalty {p:g}"
    + f", similar pair {s:g}" * (s != 0)
    + " (default)" * (SynonymScoring(w, p, similar_pair=s) == DEFAULT): SynonymScoring(w, p, similar_pair=s)
    for w, p, s in GRID
}


class WordNet:
    """The synsets of the WordNet database (`wordnet.read_synsets`), the synsets holding each lemma, and each
    headword's antonyms as the library's WordNet dictionary records them (`wordnet.antonym_words`)."""

    def __init__(self, folder: Path) -> None:
        self.synsets = [synset for name in DATA_FILES for synset in read_synsets(folder / f"data.{name}")]
        dictionary = load_wordnet(folder)
        self.opposites = {e.headword: {a for s in e.senses for a in s.antonyms} for e in dictionary}

    def antonyms(self, word: str) -> set[str]:
        """The WordNet antonyms of `word` (the module docstring)."""
        return self.opposites.get(word, set())


@dataclass
class Query:
    word: str
    answers: set[str]
    antonyms: set[str]


def synonym_sets(wordnet: WordNet, entries: dict[str, int], count: int, seed: int) -> dict[str, list[Query]]:
    """The WordNet dev and test queries of `count` synsets each (the module docstring)."""
    usable = [
        words
        for synset in wordnet.synsets
        if len(words := [w for w in dict.fromkeys(synset.lemmas) if " " not in w and w in entries]) >= 2
    ]
    picked = np.random.default_rng(seed).choice(len(usable), min(2 * count, len(usable)), replace=False)
    halves = {"dev": picked[: len(picked) // 2], "test": picked[len(picked) // 2 :]}
    return {
        split: [Query(w, set(usable[i]) - {w}, wordnet.antonyms(w)) for i in chosen for w in usable[i]]
        for split, chosen in halves.items()
    }


def substitutes(wordnet: WordNet, entries: dict[str, int]) -> dict[str, list[Query]]:
    """The LS07 queries (the module docstring): trial targets dev, test targets test."""
    data = load_lexsub("LS07")
    trial = set(read_gold(data_dir() / LS07_TRIAL))
    answers: dict[tuple[str, str], Counter[str]] = {}
    for instance in data.instances:
        split = "dev" if instance.instance_id in trial else "test"
        answers.setdefault((split, instance.lemma), Counter()).update(data.gold.get(instance.instance_id, {}))
    sets: dict[str, list[Query]] = {"dev": [], "test": []}
    for (split, word), given in answers.items():
        found = {w for w in given if w in entries and w != word}
        if word in entries and found:
            sets[split].append(Query(word, found, wordnet.antonyms(word)))
    return sets


def results(rd: ReverseDictionary, groups: np.ndarray, word: str) -> Iterator[set[str]]:
    """The words of each result (group), the query word left out."""
    for group in groups:
        yield {rd.space.words[i] for i in rd.groups.members(int(group))} - {word}


def measure(rd: ReverseDictionary, tops: list[tuple[Query, np.ndarray]]) -> dict[str, float]:
    """recall@10, hit@10, precision@10 and antonyms@10 of the queries' top groups."""
    scores: dict[str, list[float]] = {"recall@10": [], "hit@10": [], "precision@10": [], "antonyms@10": []}
    for query, top in tops:
        listed = list(results(rd, top, query.word))
        words = set().union(*listed)
        scores["recall@10"].append(len(query.answers & words) / len(query.answers))
        scores["hit@10"].append(bool(query.answers & words))
        scores["precision@10"].append(sum(bool(r & query.answers) for r in listed) / K)
        scores["antonyms@10"].append(sum(bool(r & query.antonyms) for r in listed) / K)
    return {name: float(np.mean(values)) for name, values in scores.items()}


def variants(rd: ReverseDictionary, query: Query, depth: int) -> dict[str, np.ndarray]:
    """Each variant's top groups for one query: `BEFORE` as `neighbours` scores it (every group exactly), the others
    as it ranks the `depth` candidates of the default's rough stage, and `PRODUCT` as `neighbours` ranks them."""
    search = rd.synonym_search
    entry = rd.space.index[query.word]
    group = int(rd.word_index.group_of[entry])
    alone = len(rd.groups.members(group)) == 1
    mask = np.ones(len(rd.space), dtype=bool)
    mask[[entry, *rd.opposites(entry)]] = False
    similar = np.unique(rd.word_index.group_of[rd.related(entry, "similar")])
    exclude, weight = group if alone else None, DEFAULT.sense_weight
    with search_threads(rd.encoder):
        tops = {BEFORE: search.nearest(entry, group, None, K, VARIANTS[BEFORE], alone)[0]}
        found = search.candidates(entry, group, None, depth, exclude, weight)
        listed = search.candidates(entry, group, None, depth, exclude, weight, similar)
        allowed = rd.groups.any(mask)
        product = search.candidates(entry, group, allowed, depth, None, weight, similar).best(DEFAULT, K)[0]
    return (
        tops
        | {
            name: (listed if scoring.similar_pair else found).best(scoring, K)[0]
            for name, scoring in VARIANTS.items()
            if name != BEFORE
        }
        | {PRODUCT: product}
    )


def latency(rd: ReverseDictionary, count: int, seed: int, depth: int) -> dict[str, dict[str, float]]:
    """Milliseconds of one `neighbours` call (k=10, time.perf_counter) for `count` seeded entries, after one call
    that makes what it reads: median, 90th percentile and maximum, before and by default (with `depth`); and of
    one `similar_words` call, mode similar's answer (the neighbours and the opposites they leave out, at the default
    depth)."""
    words = [rd.space.words[i] for i in np.random.default_rng(seed).choice(len(rd.space), count, replace=False)]
    calls: dict[str, Callable[[str], object]] = {
        BEFORE: functools.partial(rd.neighbours, scoring=VARIANTS[BEFORE]),
        "default": functools.partial(rd.neighbours, scoring=replace(DEFAULT, depth=depth)),
        "similar_words": rd.similar_words,
    }
    timings = {}
    for name, call in calls.items():
        call(words[0])
        times = []
        for word in words:
            start = time.perf_counter()
            call(word)
            times.append(1000 * (time.perf_counter() - start))
        timings[name] = {"median": np.median(times), "p90": np.percentile(times, 90), "max": max(times)}
    return {name: {key: round(float(value), 1) for key, value in t.items()} for name, t in timings.items()}


def chosen(rows: list[dict]) -> str:
    """The variant the dev rows choose (the module docstring)."""
    sums: dict[str, float] = {}
    for r in rows:
        if r["split"] == "dev" and r["variant"] not in (BEFORE, PRODUCT):
            score = r["recall@10"] if r["set"] == "WordNet" else r["precision@10"]
            sums[r["variant"]] = sums.get(r["variant"], 0.0) + score
    best = max(sums.values())
    near = [name for name, total in sums.items() if total >= best - 0.005]
    return min(near, key=lambda n: (VARIANTS[n].sense_weight, VARIANTS[n].pos_penalty, -VARIANTS[n].similar_pair))


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    lines = ["| set | split | variant | queries | recall@10 | hit@10 | precision@10 | antonyms@10 |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['split']} | {r['variant']} | {r['queries']} | {r['recall@10']:.3f} | "
            f"{r['hit@10']:.3f} | {r['precision@10']:.3f} | {r['antonyms@10']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a trained DefSent+ folder over WordNet (opened read-only)")
    parser.add_argument("--synsets", type=int, default=300, help="WordNet synsets per split")
    parser.add_argument("--latency", type=int, default=50, help="entries whose neighbours calls are timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--depth", type=int, default=None, help="groups scored exactly (default: the default's)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args()
    started = time.perf_counter()
    rd = ReverseDictionary.load(args.model).prepare()
    wordnet = WordNet(wordnet_dir())
    entries = rd.space.index
    sets = {"WordNet": synonym_sets(wordnet, entries, args.synsets, args.seed), "LS07": substitutes(wordnet, entries)}
    depth = args.depth or SynonymScoring().depth
    rows = []
    for name, splits in sets.items():
        for split, asked in splits.items():
            tops = [(query, variants(rd, query, depth)) for query in asked]
            for variant in [*VARIANTS, PRODUCT]:
                scores = measure(rd, [(query, top[variant]) for query, top in tops])
                rows.append({"set": name, "split": split, "variant": variant, "queries": len(asked)} | scores)
    timings = latency(rd, args.latency, args.seed, depth)
    seconds = round(time.perf_counter() - started, 1)
    report = {"model": args.model, "synsets": args.synsets, "seed": args.seed, "depth": depth, "seconds": seconds}
    if args.json:
        print(json.dumps(report | {"chosen": chosen(rows), "latency_ms": timings, "rows": rows}, indent=1))
    else:
        print(table(rows))
        print(f"chosen on dev: {chosen(rows)}")
        print(f"neighbours latency, ms over {args.latency} entries: {json.dumps(timings)}; {seconds} s in all")


if __name__ == "__main__":
    main()
