"""The reverse dictionary on the published systems' terms: people's descriptions ranked over all entries and over
the N most frequent single-word headwords (WantWords and its successors rank about 50-66k words), without and
with a hint (the initial letter, or the length, known), gold words matched lemma-aware ("facts" counts *fact*).

    python experiments/published_terms.py outputs/minilm-defsent-plus                 # test split, 66,421 words
    python experiments/published_terms.py MODEL --split dev --vocabulary 50000 --json out.json

Ranks are 0-based (the number of results above the first that holds a gold word; `--ranks words`: the number of
their words, as a system ranking single words counts); `--lemmas inflections` counts a gold word's lemmas only where
it is no base form itself (*facts* counts *fact*; *dive* does not count *diva*); a gold word not in the top
`--depth` counts as not found (above every found rank in the median). The candidate set is the N single-word
headwords (no space) of highest `wordfreq` Zipf frequency, ties (WordNet has 63,368 single words with a frequency
above 0) broken alphabetically: the search lists single words (`Filters(words="single")`, with the hint's filter)
and the results whose words are all outside the set are dropped before ranking. A description none of whose gold
forms is in the set (*ice cream*, *polar bear*) counts as not found there; the rows "gold in the set" leave those
descriptions out, as a published test set of the candidate words holds none.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from statistics import median

import numpy as np
from lemminflect import getAllLemmas

from dictembed.evaluation.descriptions import DESCRIPTION_SPLITS, load_description_pairs
from dictembed.query_encoder import batch_invariant
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import Filters, word_length
from dictembed.word_frequency import zipf_frequencies

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"
HINTS = ("none", "initial", "length")


LEMMAS = ("all", "inflections")


def gold_forms(expected: list[str], lemmas: str = "all") -> set[str]:
    """The expected words and their lemmas, lower-cased. `lemmas`: "all" (every lemma lemminflect gives, of any part
    of speech: *dive* also counts *diva*, *saw* counts *see*), or "inflections" (the lemmas of a word that is no base
    form itself: *facts* counts *fact*, *dive* only itself)."""
    forms = {word.lower() for word in expected}
    for word in expected:
        found = {lemma.lower() for lemmas_of in getAllLemmas(word.lower()).values() for lemma in lemmas_of}
        if lemmas == "all" or word.lower() not in found:
            forms.update(found)
    return forms


def is_single(word: str) -> bool:
    """Whether `word` is a single word of the candidate set (no space or underscore)."""
    return " " not in word and "_" not in word


def reachable(gold: set[str], lowered_vocabulary: set[str]) -> bool:
    """Whether a gold form is a word of the candidate set (`lowered_vocabulary`: its words lower-cased), so that a
    search of the set can find it."""
    return not gold.isdisjoint(lowered_vocabulary)


def hint_filters(expected: list[str], hint: str) -> Filters:
    """The filter a hint about the first single expected word gives (a phrase is no candidate: "traffic jam" would
    hide *gridlock*): single words, and its initial or its length in letters and digits, as the filter counts."""
    word = next((w for w in expected if is_single(w)), expected[0])
    if hint == "initial":
        return Filters(words="single", initial=word[0])
    if hint == "length":
        return Filters(words="single", min_length=word_length(word), max_length=word_length(word))
    return Filters(words="single")


def summary(ranks: list[float]) -> dict[str, float]:
    """Median rank (0-based) and accuracy at 1, 10 and 100."""
    return {
        "median": median(ranks),
        **{f"acc@{k}": sum(r < k for r in ranks) / len(ranks) for k in (1, 10, 100)},
        "n": len(ranks),
    }


def cell(ranks: list[float]) -> str:
    """ "median / acc@1 / acc@10 / acc@100" of 0-based ranks (`summary`)."""
    row = summary(ranks)
    return f"{row['median']:g} / {row['acc@1']:.3f} / {row['acc@10']:.3f} / {row['acc@100']:.3f}"


def rank(
    results: list[tuple[float, list[str]]], gold: set[str], vocabulary: set[str] | None = None, by: str = "results"
) -> float:
    """The 0-based rank of the first of (score, words) `results`, best first, holding a gold word, among those
    holding a word of `vocabulary` (None: all); inf when none does. `by`: "results" counts the results above it (a
    result lists the words of identical entries), "words" their words of `vocabulary`, as a system ranking single
    words would (the gold word first among its own result's)."""
    position = 0
    for _, words in results:
        kept = [word for word in words if vocabulary is None or word in vocabulary]
        if not kept:
            continue
        if any(word.lower() in gold for word in words):
            return position
        position += len(kept) if by == "words" else 1
    return math.inf


def rank_of(
    rd: ReverseDictionary,
    query: str,
    gold: set[str],
    filters: Filters | None,
    depth: int,
    vocabulary: set[str] | None,
    by: str = "results",
) -> float:
    """The 0-based rank of the first result holding a gold word among the results holding a word of `vocabulary`
    (None: every result); inf when none of the `depth` results searched holds one (`rank`, counted `by`)."""
    results = rd.search(query, k=depth, filters=filters, max_definitions=0)
    return rank([(r.score, r.words) for r in results], gold, vocabulary, by)


def encode(rd: ReverseDictionary, texts: list[str]) -> np.ndarray:
    """Unit query vectors of `texts`, each encoded as the reverse dictionary encodes a description."""
    batch = 64 if batch_invariant(rd.encoder) else 1
    vectors = np.concatenate([np.asarray(h, dtype=np.float32) for h in rd._pooled(texts, 64, batch)])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def frequent_single_words(words: list[str], n: int) -> tuple[set[str], float]:
    """The `n` single words (no space or underscore) of `words` of highest English Zipf frequency, ties broken
    alphabetically, and the frequency of the last one kept."""
    single = [w for w in words if is_single(w)]
    zipf = zipf_frequencies(single, "en")
    ranked = sorted(range(len(single)), key=lambda i: (-float(zipf[i]), single[i]))
    return {single[i] for i in ranked[:n]}, float(zipf[ranked[min(n, len(ranked)) - 1]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--data", type=Path, default=DATA, help="description<TAB>word|word<TAB>split TSV")
    parser.add_argument("--split", choices=DESCRIPTION_SPLITS, default="test")
    parser.add_argument("--vocabulary", type=int, default=66_421, help="the N most frequent single-word headwords")
    parser.add_argument("--depth", type=int, default=1000, help="results searched for a gold word")
    parser.add_argument("--precision", default="fp32", help="the query encoder's compute precision (default: fp32)")
    parser.add_argument("--headword-weight", type=float, help="the headword term's weight (default: the folder's)")
    parser.add_argument("--second-dictionary-weight", type=float, help="that term's weight (default: the Ranking's)")
    parser.add_argument("--query-word-weight", type=float, help="0: that lexical term off (default: the folder's)")
    parser.add_argument("--overlap-weight", type=float, help="0: that lexical term off (default: the folder's)")
    parser.add_argument("--frequency-weight", type=float, help="the frequency prior's weight (default: the folder's)")
    parser.add_argument("--definition-weight", type=float, help="the best definition's weight (default: the folder's)")
    parser.add_argument("--lemmas", choices=LEMMAS, default="all", help="gold lemmas counted (`gold_forms`)")
    parser.add_argument("--ranks", choices=("results", "words"), default="results", help="what a rank counts (`rank`)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()

    pairs = load_description_pairs(args.data, split=args.split)
    names: tuple[str, ...] = ("headword_weight", "query_word_weight", "overlap_weight", "frequency_weight")
    names += ("definition_weight", "second_dictionary_weight")
    given = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    rd = ReverseDictionary.load(args.model, precision=args.precision, ranking=given).prepare()
    print(f"headword weight {rd.ranking.headword_weight:g}")
    vocabulary, floor = frequent_single_words(rd.space.words, args.vocabulary)
    golds = [gold_forms(expected, args.lemmas) for _, expected in pairs]
    table = {
        "all entries, hint none": summary(
            [
                rank_of(rd, q, gold, None, args.depth, None, args.ranks)
                for (q, _), gold in zip(pairs, golds, strict=True)
            ]
        )
    }
    lowered = {word.lower() for word in vocabulary}
    inside = [reachable(gold, lowered) for gold in golds]
    for hint in HINTS:
        ranks = [
            rank_of(rd, q, gold, hint_filters(e, hint), args.depth, vocabulary, args.ranks)
            for (q, e), gold in zip(pairs, golds, strict=True)
        ]
        table[f"top {len(vocabulary):,}, hint {hint}"] = summary(ranks)
        if any(inside):
            table[f"top {len(vocabulary):,}, gold in the set, hint {hint}"] = summary(
                [r for r, kept in zip(ranks, inside, strict=True) if kept]
            )
    print(
        f"{args.model}, {args.split} ({len(pairs)} descriptions); the {len(vocabulary):,} most frequent single "
        f"words (Zipf >= {floor:.2f})"
    )
    for name, row in table.items():
        print(
            f"  {name:<44} n {row['n']:>4}  median {row['median']:>5}  "
            + "  ".join(f"{k} {row[k]:.3f}" for k in ("acc@1", "acc@10", "acc@100"))
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"model": args.model, "split": args.split, "precision": args.precision}
                | {"lemmas": args.lemmas, "ranks": args.ranks}
                | {"floor": floor, "table": table}
                | {name: getattr(rd.ranking, name) for name in names},  # the weights searched with, given or saved
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
