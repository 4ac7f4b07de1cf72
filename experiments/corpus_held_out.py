"""One description of each corpus word that no training row describes: the shipped everyday corpus's descriptions of
WordNet's dev and test headwords (the split a run trains on, `--split-seed`), one a word, chosen by a seeded draw over
the words in sorted order, written as a description benchmark (`description`, `expected`, `split`; every row `dev`)
that `experiments/published_terms.py --data FILE --split dev` ranks.

    python experiments/corpus_held_out.py /tmp/corpus_held_out.tsv      # 1,708 descriptions

Written with the corpus, of the corpus's register and of rarer words than the benchmark's: a larger set beside the
benchmark's dev split for choosing among training variants, not a measure of people's own words.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from dictembed.description_corpus import EVERYDAY, load_descriptions
from dictembed.dictionary import load_dictionary, split_by_headword


def held_out_rows(split_seed: int, draw_seed: int) -> list[tuple[str, str]]:
    """(description, word) for each corpus word among WordNet's dev and test headwords, one seeded draw a word."""
    splits = split_by_headword(load_dictionary("wordnet"), seed=split_seed)
    held = {h.lower() for name in ("dev", "test") for h in splits[name].headwords}
    by_word: dict[str, list[str]] = {}
    for description in load_descriptions(EVERYDAY):
        if description.word.lower() in held:
            by_word.setdefault(description.word, []).append(description.text)
    rng = random.Random(draw_seed)
    return [(rng.choice(by_word[word]), word) for word in sorted(by_word)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="the TSV to write (refused if it exists)")
    parser.add_argument("--split-seed", type=int, default=0, help="the WordNet split's seed (train's --split-seed)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the draw of one description a word")
    args = parser.parse_args()
    if args.output.exists():
        parser.error(f"{args.output} exists; name a new file")
    rows = held_out_rows(args.split_seed, args.seed)
    lines = ["description\texpected\tsplit", *(f"{text}\t{word}\tdev" for text, word in rows)]
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.output}: {len(rows)} descriptions of {len(rows)} words")


if __name__ == "__main__":
    main()
