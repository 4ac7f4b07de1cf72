"""One description of each corpus word that no training row describes: the shipped everyday corpus's descriptions of
WordNet's dev and test headwords (the split a run trains on, `--split-seed`), one a word, chosen by a seeded draw over
the words in sorted order, written as a description benchmark (`description`, `expected`, `split`; every row `dev`)
that `experiments/published_terms.py --data FILE --split dev` ranks.

    python experiments/corpus_held_out.py /tmp/corpus_held_out.tsv      # 1,708 descriptions
    python experiments/corpus_held_out.py /tmp/taught.tsv --taught /tmp/corpus_rest.tsv --words 1500
    python experiments/corpus_held_out.py /tmp/corpus_held_out_long.tsv --long   # the same words, their long ones

`--taught REST` holds out one description of each corpus word among the training headwords instead, and writes the
corpus without them to REST (for `dictembed train --descriptions REST`): a measure of the words training describes.
`--long` writes, in place of each drawn description, the long description of its word and part of speech
(`corpus/long_descriptions.tsv`): the same words and senses, in the longer register.

Written with the corpus, of the corpus's register and of rarer words than the benchmark's: a larger set beside the
benchmark's dev split for choosing among training variants, not a measure of people's own words.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from dictembed.description_corpus import CORPUS, EVERYDAY, LONG_CORPUS, Description, load_descriptions, read_corpus
from dictembed.dictionary import load_dictionary, split_by_headword


def held_out_rows(
    split_seed: int, draw_seed: int, taught: bool = False, words: int | None = None, long: bool = False
) -> list[tuple[str, str]]:
    """(description, word) for each corpus word among WordNet's dev and test headwords (`taught`: its training
    headwords; `words`: a seeded sample of that many of them), one seeded draw a word (`long`: the long description
    of the drawn one's word and part of speech in its place)."""
    splits = split_by_headword(load_dictionary("wordnet"), seed=split_seed)
    names = ("train",) if taught else ("dev", "test")
    held = {h.lower() for name in names for h in splits[name].headwords}
    by_word: dict[str, list[Description]] = {}
    for description in load_descriptions(EVERYDAY):
        if description.word.lower() in held:
            by_word.setdefault(description.word, []).append(description)
    rng = random.Random(draw_seed)
    chosen = sorted(by_word) if words is None else sorted(rng.sample(sorted(by_word), words))
    drawn = [rng.choice(by_word[word]) for word in chosen]
    if long:
        longer = {(d.word, d.pos): d for d in read_corpus(LONG_CORPUS)}
        drawn = [longer[(d.word, d.pos)] for d in drawn]
    return [(d.text, d.word) for d in drawn]


def corpus_without(rows: list[tuple[str, str]], path: Path) -> int:
    """Write the corpus less the held-out (description, word) rows to `path`, its lines as they are (fields compared
    stripped, as `load_descriptions` reads them); the number of descriptions written."""
    held = set(rows)
    header, *lines = CORPUS.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if tuple(field.strip() for field in line.split("\t")[:2]) not in held]
    path.write_text("\n".join([header, *kept]) + "\n", encoding="utf-8")
    return sum(1 for line in kept if line.strip())  # the reader skips blank lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="the TSV to write (refused if it exists)")
    parser.add_argument("--split-seed", type=int, default=0, help="the WordNet split's seed (train's --split-seed)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the draw of one description a word")
    parser.add_argument("--taught", type=Path, help="hold out training words' descriptions; the rest go to this TSV")
    parser.add_argument("--words", type=int, help="with --taught: hold out a seeded sample of this many words")
    parser.add_argument("--long", action="store_true", help="each word's long description in place of the drawn one")
    args = parser.parse_args()
    for path in (args.output, args.taught):
        if path is not None and path.exists():
            parser.error(f"{path} exists; name a new file")
    if args.long and args.taught is not None:
        parser.error("--long writes a measure; it does not go with --taught")
    rows = held_out_rows(args.split_seed, args.seed, taught=args.taught is not None, words=args.words, long=args.long)
    if args.taught is not None:
        print(f"{args.taught}: {corpus_without(rows, args.taught)} descriptions, the held-out ones left out")
    lines = ["description\texpected\tsplit", *(f"{text}\t{word}\tdev" for text, word in rows)]
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.output}: {len(rows)} descriptions of {len(rows)} words")


if __name__ == "__main__":
    main()
