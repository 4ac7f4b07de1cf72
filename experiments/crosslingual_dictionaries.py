"""Cross-lingual reverse dictionary over real dictionaries: describe a word in English, Chinese or Japanese and
find it among the entries of CC-CEDICT (Chinese words, English glosses), JMdict (Japanese words, English glosses)
or WordNet (English words).

    python experiments/crosslingual_dictionaries.py --split dev                    # e5, untrained
    python experiments/crosslingual_dictionaries.py --model "" --split test        # the embedded MiniLM
    python experiments/crosslingual_dictionaries.py --model runs/e5-zh --split test --json rows.json

Data: tests/data/crosslingual_zh.tsv and crosslingual_ja.tsv (`description<TAB>expected<TAB>direction<TAB>split`,
written for dictembed; their .md files say how), directions en-zh, zh-en, zh-zh, en-ja, ja-en, ja-ja: the
source language of the description, then the language of the wanted word, whose dictionary is `TARGETS`'.
Candidates: each target dictionary's `--headwords` most frequent headwords in its language (wordfreq) and every
expected word of the data (a vocabulary that holds the answers; `--headwords 0`: the whole dictionary), one space
per dictionary, so the query's own language never crowds the target out (the served reverse
dictionary does the same: one space per dictionary, `lang=` picks it).
Rows per direction: the plain cosine, and the same with per-language centring: the target space's mean entry
vector subtracted from its entries, and from the query the mean of the dev descriptions of its own language
(dev rows only, so the test split never informs it).
Rank: the best 0-based rank of any expected word among the candidates, ties pessimistic.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from dictembed.cache import default_cache_dir
from dictembed.dictionary import load_dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DataFormatError
from dictembed.paths import default_model
from dictembed.search_space import l2_normalize
from dictembed.word_frequency import most_frequent

ROOT = Path(__file__).resolve().parents[1]
DATA = [ROOT / "tests" / "data" / "crosslingual_zh.tsv", ROOT / "tests" / "data" / "crosslingual_ja.tsv"]
TARGETS = {"en": "wordnet", "zh": "cc-cedict", "ja": "jmdict"}  # the language of the wanted word -> dictionary
HEADER = ["description", "expected", "direction", "split"]

Row = tuple[str, list[str], str, str]  # description, expected words, direction, split


def read_rows(path: Path) -> list[Row]:
    """The rows of one description file, checked: four fields, a known direction, split dev or test."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t") != HEADER:
        raise DataFormatError(path, f"the header must be {'<TAB>'.join(HEADER)}", 1)
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = [f.strip() for f in line.split("\t")]
        ok = len(fields) == 4 and fields[0] and fields[3] in ("dev", "test")
        source, _, target = fields[2].partition("-") if ok else ("", "", "")
        words = [w.strip() for w in fields[1].split("|") if w.strip()] if ok else []
        if not (ok and words and source in TARGETS and target in TARGETS):
            raise DataFormatError(path, "expected description, word|word, a direction such as en-zh, dev|test", number)
        rows.append((fields[0], words, fields[2], fields[3]))
    return rows


def candidate_space(encoder: Encoder, language: str, headwords: int, expected: set[str]) -> DefinitionSpace:
    """The AMP space (cosine) of the target dictionary of `language`: its `headwords` most frequent headwords and
    every `expected` word it holds (a vocabulary that holds the answers, as the published reverse dictionaries'),
    or all of it (0)."""
    dictionary = load_dictionary(TARGETS[language])
    if headwords:
        frequent = most_frequent(dictionary, headwords, language, default_cache_dir()).headwords
        dictionary = dictionary.subset({*frequent, *expected}, dictionary.name)
    return DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=default_cache_dir(), similarity="cosine")


def best_ranks(scores: np.ndarray, golds: list[list[int]]) -> np.ndarray:
    """Per query (a row of `scores`), the 0-based rank of its best gold entry, ties pessimistic."""
    ranks = []
    for row, gold in zip(scores, golds, strict=True):
        best = row[gold].max()
        ranks.append(int((row >= best).sum()) - 1)
    return np.asarray(ranks)


def summary(ranks: np.ndarray) -> dict[str, float]:
    """acc@1/10/100 (percent), MRR over 1-based ranks and the median 0-based rank."""
    return {
        "acc1": float(np.mean(ranks < 1) * 100),
        "acc10": float(np.mean(ranks < 10) * 100),
        "acc100": float(np.mean(ranks < 100) * 100),
        "mrr": float(np.mean(1.0 / (ranks + 1))),
        "median": float(np.median(ranks)),
    }


def rank_direction(
    space: DefinitionSpace, queries: list[Row], vectors: dict[str, np.ndarray], source_mean: np.ndarray | None
) -> dict[str, Any]:
    """The figures of one direction's queries over `space`; centred when `source_mean` (the query language's
    mean description vector) is given: the space's mean entry vector off its entries, `source_mean` off the
    queries."""
    entries = np.asarray(space.matrix, dtype=np.float32)
    golds = [[space.index[w] for w in r[1] if w in space.index] for r in queries]
    kept = [i for i, g in enumerate(golds) if g]
    counts = {"centred": source_mean is not None, "candidates": len(space), "queries": len(kept)}
    if not kept:
        return counts | {"dropped": len(queries)} | dict.fromkeys(("acc1", "acc10", "acc100", "mrr", "median"), np.nan)
    q = np.stack([vectors[queries[i][0]] for i in kept])
    if source_mean is not None:
        entries, q = entries - entries.mean(axis=0), q - source_mean
    scores = l2_normalize(q) @ l2_normalize(entries).T
    return counts | {"dropped": len(queries) - len(kept)} | summary(best_ranks(scores, [golds[i] for i in kept]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="multilingual-e5-small", help='encoder ("": the embedded MiniLM)')
    parser.add_argument("--headwords", type=int, default=10000, help="candidates per dictionary (0: all)")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument("--directions", default="", help="comma list (default: every direction in the data)")
    parser.add_argument("--json", default="", help="write the rows here")
    parser.add_argument(
        "--document-prompt", default="", help="the model's prompt (e.g. passage) the definitions are encoded after"
    )
    args = parser.parse_args()
    began = time.monotonic()
    rows = [row for path in DATA for row in read_rows(path)]
    wanted = set(args.directions.split(",")) if args.directions else {r[2] for r in rows}
    encoder = Encoder.load(args.model or default_model(), pooling="mean", max_length=128, device="cpu")
    texts = sorted({r[0] for r in rows})
    vectors = dict(zip(texts, l2_normalize(encoder.encode(texts, batch_size=64)), strict=True))
    source_mean = {
        source: np.mean([vectors[r[0]] for r in rows if r[3] == "dev" and r[2].startswith(source + "-")], axis=0)
        for source in {r[2].split("-")[0] for r in rows}
    }
    documents = encoder
    if args.document_prompt:  # e5's retrieval use: `query: ` for the descriptions, `passage: ` for the definitions
        documents = copy.copy(encoder)
        documents.default_prompt_name = args.document_prompt
    spaces: dict[str, DefinitionSpace] = {}
    out = []
    for split in ("dev", "test") if args.split == "both" else (args.split,):
        for direction in sorted(wanted):
            source, target = direction.split("-")
            if target not in spaces:
                expected = {w for r in rows if r[2].endswith("-" + target) for w in r[1]}
                spaces[target] = candidate_space(documents, target, args.headwords, expected)
            queries = [r for r in rows if r[2] == direction and r[3] == split]
            for centred in (False, True):
                row = rank_direction(spaces[target], queries, vectors, source_mean[source] if centred else None)
                model = (args.model or "all-MiniLM-L6-v2") + (f", {args.document_prompt}" * bool(args.document_prompt))
                row = {"direction": direction, "model": model, "split": split} | row
                out.append(row)
                print(
                    f"{split:4} {direction} {'centred' if centred else 'plain  '} {row['candidates']:>6} cand "
                    f"{row['queries']:>3} q (-{row['dropped']}) acc@1 {row['acc1']:5.1f} @10 {row['acc10']:5.1f} "
                    f"@100 {row['acc100']:5.1f} mrr {row['mrr']:.3f} median {row['median']:g}",
                    flush=True,
                )
    print(f"{time.monotonic() - began:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
