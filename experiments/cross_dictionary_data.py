"""Training data from two dictionaries without leaking WordNet's held-out headwords.

    python experiments/cross_dictionary_data.py gcide outputs/data/wordnet-train+gcide.jsonl
    python experiments/cross_dictionary_data.py examples outputs/data/wordnet-train+examples.jsonl
    dictembed train --dictionary outputs/data/wordnet-train+gcide.jsonl --limit 20000 --output outputs/minilm-gcide

Writes a JSONL table (`word`, `definition`, `pos`; `dictembed.dictionary.sources.table.jsonl_text`): WordNet's
training split (the 8:1:1 split by headword of `--split-seed`, the one `dictembed train --dictionary wordnet`
uses) and every entry of the other dictionaries whose headword is not in WordNet's dev or test split. A model
trained on it has seen no definition of a headword that the leave-one-out and dev metrics of the WordNet models
hold out, so its reverse-dictionary rows compare with theirs (`experiments/reverse_dictionary_ranking.py
--entries-from`). `examples` stands for WordNet's own example sentences as further definitions of their
headword, the headword's words masked as `___` (`masked_examples`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.load import load_dictionary
from dictembed.dictionary.merge import merge_dictionaries, normalize_key
from dictembed.dictionary.sources.table import jsonl_text
from dictembed.dictionary.split import split_by_headword
from dictembed.io import atomic_write

MASK = "___"


def masked_examples(dictionary: Dictionary) -> Dictionary:
    """Each entry's example sentences as its definitions, with every word that starts like a word of the
    headword (its first letters up to a final e or y, at least three) masked: "he did some ___" for exercise."""
    examples = Dictionary(name=f"{dictionary.name}-examples")
    for entry in dictionary:
        stems = [w.lower().rstrip("ey") for w in re.findall(r"[^\W_]+", entry.headword)]
        stems = [re.escape(s) for s in stems if len(s) >= 3]
        pattern = re.compile(rf"\b(?:{'|'.join(stems)})[^\W_]*", re.IGNORECASE) if stems else None
        for sense in entry.senses:
            for example in sense.examples:
                text = pattern.sub(MASK, example) if pattern else example
                if text.strip():
                    examples.add(entry.headword, text, pos=sense.pos)
    return examples


def training_table(wordnet: Dictionary, others: Dictionary, seed: int = 0) -> tuple[Dictionary, int]:
    """WordNet's training split merged with the entries of `others` whose headword WordNet's dev and test
    splits do not hold (case- and space-blind), and how many entries of `others` were held out."""
    splits = split_by_headword(wordnet, seed=seed)
    held_out = {normalize_key(h) for split in ("dev", "test") for h in splits[split].headwords}
    kept = others.subset([h for h in others.headwords if normalize_key(h) not in held_out])
    merged, _ = merge_dictionaries([splits["train"], kept], name=f"{wordnet.name}-train+{others.name}")
    return merged, len(others) - len(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "others",
        help="comma list of the other dictionaries (gcide, a table file, ...), or examples (WordNet's, masked)",
    )
    parser.add_argument("output", type=Path, help="the .jsonl table to write")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of WordNet's split (default: 0)")
    args = parser.parse_args()
    wordnet = load_dictionary("wordnet")
    others = masked_examples(wordnet) if args.others == "examples" else load_dictionary(args.others)
    merged, held_out = training_table(wordnet, others, args.split_seed)
    atomic_write(args.output, jsonl_text(merged))
    print(
        f"{args.output}: {merged.num_definitions()} definitions of {len(merged)} headwords "
        f"({held_out} of {len(others)} {others.name} headwords held out with WordNet's dev/test)"
    )


if __name__ == "__main__":
    main()
