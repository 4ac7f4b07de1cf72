"""The target words of the description corpus (src/dictembed/corpus): frequent single-word WordNet headwords, by the
part of speech of their most frequent sense, minus every expected word of the everyday-descriptions benchmark (dev
and test, with their lemmas), so that the benchmark measures words the corpus never taught.

    python experiments/description_targets.py targets.jsonl    # 8,600 lines: word, pos, n, the first two glosses

The glosses only tell the writer which sense is meant; `n` is 3 for the more frequent half of the words, else 2.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from lemminflect import getAllLemmas
from wordfreq import zipf_frequency

from dictembed.dictionary.sources.wordnet import load_wordnet
from dictembed.evaluation.descriptions import load_description_pairs

BENCHMARK = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"
QUOTA = {"n": 5000, "v": 1500, "a": 1700, "r": 400}  # words per part of speech
WORD = re.compile(r"[a-z]+(-[a-z]+)?")
MIN_ZIPF = 2.0


def benchmark_words(path: Path = BENCHMARK) -> set[str]:
    """Every expected word of the benchmark (all splits) and its lemmas, lower-cased."""
    words = set()
    for _, expected in load_description_pairs(path):
        for word in expected:
            words.add(word.lower())
            words.update(lemma.lower() for lemmas in getAllLemmas(word.lower()).values() for lemma in lemmas)
    return words


def targets() -> list[dict]:
    """The chosen words, most frequent first within each part of speech."""
    excluded = benchmark_words()
    candidates: dict[str, list[tuple[float, str, list[str]]]] = {pos: [] for pos in QUOTA}
    for entry in load_wordnet():
        word, pos = entry.headword, entry.senses[0].pos
        if pos not in QUOTA or not WORD.fullmatch(word) or len(word) < 3 or word in excluded:
            continue
        zipf = zipf_frequency(word, "en")
        if zipf >= MIN_ZIPF:
            candidates[pos].append((zipf, word, [s.definition for s in entry.senses if s.pos == pos][:2]))
    chosen = [(z, w, p, g) for p, quota in QUOTA.items() for z, w, g in sorted(candidates[p], reverse=True)[:quota]]
    median = sorted(z for z, *_ in chosen)[len(chosen) // 2]
    return [{"word": w, "pos": p, "n": 3 if z > median else 2, "senses": g} for z, w, p, g in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="a JSONL file, one target a line")
    args = parser.parse_args()
    rows = targets()
    args.output.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} target words written to {args.output}")


if __name__ == "__main__":
    main()
