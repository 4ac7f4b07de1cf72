"""Cross-lingual reverse dictionary: English descriptions of Chinese (CWN) words and Chinese descriptions of
English (WordNet) words, ranked by one multilingual encoder in one merged WordNet+CWN entry space.

The English side is the WordNet entries whose headword has a wordfreq Zipf frequency of at least
`--min-frequency` (default 3.5; `dictembed.word_frequency`, as the reverse dictionary's `--min-frequency`
candidate floor): the entries people look for, and an entry space a 2-core CPU builds in minutes.

    python experiments/crosslingual_reverse_dictionary.py --precision bf16 --show 100   # e5, untrained
    python experiments/crosslingual_reverse_dictionary.py --model "" --json rows.json   # MiniLM (embedded)
    python experiments/crosslingual_reverse_dictionary.py --model outputs/e5-defsent-plus \\
        --entry-model multilingual-e5-small                                              # a trained encoder

Data: tests/data/crosslingual_descriptions.tsv, `description<TAB>expected<TAB>direction` with `en-zh` (an
English description, the expected words CWN headwords) or `zh-en` (a Chinese description, WordNet headwords);
expected alternatives are separated by `|`. Every expected word must be an entry of its target dictionary,
and each zh-en row needs one expected word above the floor (its others are dropped).

Entry spaces: AMP (the mean of each entry's definition vectors) built by `--entry-model` (default: `--model`)
with the settings `dictembed train` uses (mean pooling, 128 tokens, `--precision`, default fp32), cached in
the default entry-space cache, scored by cosine (the `best` preset's logits). An AMP vector depends only on
its entry's definitions, so when the headwords of WordNet and CWN are disjoint (checked) the merged space is
the two spaces one after the other. `load_dictionary("wordnet,cwn")` is not quite that union: merging unites
headwords up to case (WordNet's `Order` and `order` become one entry) and drops repeated definitions; the
script prints its counts.

Rows, per direction: (a) the target dictionary's entries only, (b) the merged space, with the share of
queries whose top result is a word of the other language (the source language of the description), (c) the
merged space centered per language: each dictionary's mean entry vector subtracted from its entries, and the
mean entry vector of the description's own language from the description's vector, (d) the same, the
target dictionary's entries only (a language filter on the centered space).
Contrast: the English test rows of tests/data/everyday_descriptions.tsv over the same WordNet entries
(rows without an expected word above the floor dropped). Rank: the best 0-based rank of any expected word
among all entries, ties pessimistic; MRR over 1-based ranks.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from dictembed.cache import cache_key, default_cache_dir, space_path
from dictembed.dictionary import Dictionary, load_dictionary
from dictembed.dictionary.merge import normalize_key
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.evaluation.ranking import reverse_dictionary_metrics
from dictembed.paths import default_model
from dictembed.word_frequency import zipf_frequencies

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "crosslingual_descriptions.tsv"
EVERYDAY = ROOT / "tests" / "data" / "everyday_descriptions.tsv"
DIRECTIONS = {"en-zh": "cwn", "zh-en": "wordnet"}  # direction -> the dictionary of the expected words
HEADER = ["description", "expected", "direction"]

Pairs = list[tuple[str, list[str]]]


def read_crosslingual(path: str | Path) -> dict[str, Pairs]:
    """The rows of a `description<TAB>expected<TAB>direction` TSV, by direction, in file order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t") != HEADER:
        raise DataFormatError(path, "the header must be `description<TAB>expected<TAB>direction`", 1)
    rows: dict[str, Pairs] = {direction: [] for direction in DIRECTIONS}
    for number, line in enumerate(lines[1:], start=2):
        fields = [f.strip() for f in line.split("\t")]
        words = [w.strip() for w in fields[1].split("|") if w.strip()] if len(fields) == 3 else []
        if not words or not fields[0] or fields[2] not in DIRECTIONS:
            raise DataFormatError(path, f"expected a description, word|word|..., and {' or '.join(DIRECTIONS)}", number)
        rows[fields[2]].append((fields[0], words))
    return rows


def check_expected(pairs: Pairs, headwords: list[str], name: str) -> None:
    """Raise when an expected word is not a headword of the target dictionary `name`."""
    known = set(headwords)
    missing = sorted({w for _, words in pairs for w in words if w not in known})
    if missing:
        raise DictEmbedError(f"not headwords of {name}: {', '.join(missing)}")


def known_pairs(pairs: Pairs, headwords: list[str]) -> tuple[Pairs, int]:
    """The pairs with their expected words narrowed to `headwords`, and how many had none left (dropped)."""
    known = set(headwords)
    kept = [(d, [w for w in words if w in known]) for d, words in pairs]
    return [(d, words) for d, words in kept if words], sum(not words for _, words in kept)


def load_encoder(name: str, precision: str = "fp32") -> Encoder:
    """An encoder as `dictembed train` loads its base model: mean pooling, 128 tokens, on the CPU."""
    encoder = Encoder.load(name or default_model(), pooling="mean", max_length=128, device="cpu")
    return encoder.set_precision(precision)


def frequent_entries(dictionary: Dictionary, floor: float) -> Dictionary:
    """The entries of an English dictionary whose headword has a Zipf frequency of at least `floor`."""
    frequencies = zipf_frequencies(dictionary.headwords, "en")
    kept = [w for w, f in zip(dictionary.headwords, frequencies, strict=True) if f >= floor]
    return dictionary.subset(kept, f"{dictionary.name} (Zipf >= {floor:g})")


def build_space(encoder: Encoder, dictionary: Dictionary) -> DefinitionSpace:
    """The cached AMP space of `dictionary` by `encoder`, scored by cosine (the `best` preset's logits)."""
    return DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=default_cache_dir(), similarity="cosine")


def english_space(encoder: Encoder, full: Dictionary, entries: Dictionary) -> tuple[DefinitionSpace, str]:
    """The AMP space of `entries` (a subset of `full`): cut from `full`'s space when that is cached (the same
    vectors: an AMP vector depends only on its own entry's definitions), else built; and which of the two."""
    if space_path(cache_key(encoder, full, "amp", False), default_cache_dir()).is_file():
        return build_space(encoder, full).subset(entries.headwords), f"cut from the cached {full.name} space"
    return build_space(encoder, entries), f"the space of {entries.name} itself (built, or cached)"


def concatenate(first: DefinitionSpace, second: DefinitionSpace) -> DefinitionSpace:
    """The entries of `first`, then those of `second`: the AMP space of the two dictionaries' entries together
    when no headword is in both (an AMP vector depends only on its own entry's definitions)."""
    shared = set(first.words) & set(second.words)
    if shared:
        raise DictEmbedError(f"{len(shared)} headwords in both spaces, e.g. {sorted(shared)[:5]}; build the merged one")
    counts = None
    if first.counts is not None and second.counts is not None:
        counts = torch.cat([first.counts, second.counts])
    definitions = None
    if first.definitions is not None and second.definitions is not None and counts is not None:
        definitions = torch.cat([first.definitions, second.definitions])
    matrix = torch.cat([first.matrix, second.matrix])
    kind = first.kind
    return DefinitionSpace(
        first.words + second.words, matrix, first.similarity, first.temperature, kind, counts, definitions
    )


def check_disjoint(first: Dictionary, second: Dictionary) -> str:
    """Raise when a headword is in both dictionaries, up to case and spaces (`normalize_key`, as merging)."""
    shared = {normalize_key(w) for w in first.headwords} & {normalize_key(w) for w in second.headwords}
    if shared:
        raise DictEmbedError(f"{len(shared)} headwords in {first.name} and {second.name}, e.g. {sorted(shared)[:5]}")
    return f"{first.name} and {second.name}: no headword in both, up to case and spaces"


def merged_counts(spec: str) -> str:
    """The entries and definitions of `load_dictionary(spec)` (which unites headwords up to case and spaces)."""
    merged = load_dictionary(spec)
    return f"load_dictionary({spec!r}): {len(merged):,} entries, {merged.num_definitions():,} definitions"


def centered(first: DefinitionSpace, second: DefinitionSpace) -> DefinitionSpace:
    """`concatenate` with each part's mean entry vector subtracted from its entries: language centering, which
    takes out of the vectors the direction that says which language a text is in."""
    parts = [
        DefinitionSpace(s.words, s.matrix - s.matrix.mean(0), s.similarity, s.temperature) for s in (first, second)
    ]
    return concatenate(*parts)


@torch.no_grad()
def scores_of(
    encoder: Encoder, space: DefinitionSpace, texts: list[str], shift: torch.Tensor | None = None
) -> np.ndarray:
    """The space's logits [texts, entries] for `texts` encoded by `encoder` (its default prompt applied), each
    vector minus `shift` when given."""
    with encoder.autocast():
        vectors = torch.cat(list(encoder.embed(texts, batch_size=64, show_progress=False)))
    if shift is not None:
        vectors = vectors - shift
    return space.to("cpu")(vectors).float().numpy()


def best_ranks(scores: np.ndarray, words: list[str], pairs: Pairs) -> np.ndarray:
    """The best 0-based rank of any expected word of each pair (ties pessimistic: entries scoring >= it)."""
    index = {w: i for i, w in enumerate(words)}
    ranks = []
    for row, (_, expected) in zip(scores, pairs, strict=True):
        gold = np.array([index[w] for w in expected])
        ranks.append(min(int((row >= row[g]).sum()) - 1 for g in gold))
    return np.array(ranks)


def summary(ranks: np.ndarray) -> dict[str, float]:
    """n, top-1 and top-10 (%), MRR (1-based ranks) and the median 0-based rank of 0-based `ranks`."""
    metrics = reverse_dictionary_metrics(ranks + 1.0)
    keep = {key: metrics[key] for key in ("top1", "top10", "mrr")}
    return {"n": len(ranks), **keep, "median_rank": metrics["median_rank"] - 1}


def evaluate(
    encoder: Encoder,
    space: DefinitionSpace,
    pairs: Pairs,
    other: set[str] | None = None,
    shift: torch.Tensor | None = None,
) -> tuple[dict[str, float], list[str]]:
    """The summary of `pairs` ranked in `space` (query vectors minus `shift`), with `wrong_language` (%: the top
    result in `other`), and each query's top result."""
    scores = scores_of(encoder, space, [d for d, _ in pairs], shift)
    ranks = best_ranks(scores, space.words, pairs)
    top = [space.words[i] for i in scores.argmax(1)]
    row = summary(ranks)
    if other is not None:
        row["wrong_language"] = float(np.mean([w in other for w in top]) * 100)
    return row, top


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| queries | model | entries | n | top-1 % | top-10 % | MRR | median rank (0-based) | top-1 wrong language % |",
        "|" + "---|" * 9,
    ]
    for r in rows:
        wrong = f"{r['wrong_language']:.1f}" if "wrong_language" in r else ""
        lines.append(
            f"| {r['queries']} | {r['model']} | {r['entries']} | {r['n']} | {r['top1']:.1f} | {r['top10']:.1f} "
            f"| {r['mrr']:.3f} | {r['median_rank']:g} | {wrong} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="multilingual-e5-small", help="the query encoder ('': the embedded MiniLM)")
    parser.add_argument("--entry-model", default=None, help="the encoder of the entry spaces (default: --model)")
    parser.add_argument("--min-frequency", type=float, default=3.5, help="Zipf floor of the English entries")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="compute precision")
    parser.add_argument("--data", type=Path, default=DATA, help="description<TAB>expected<TAB>direction TSV")
    parser.add_argument("--show", type=int, default=0, help="print the top result of the first N queries per set")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()

    start = time.perf_counter()
    label = Path(args.model).name if args.model else "all-MiniLM-L6-v2"
    encoder = load_encoder(args.model, args.precision)
    same = args.entry_model in (None, args.model)
    entry_encoder = encoder if same else load_encoder(args.entry_model, args.precision)
    full = {name: load_dictionary(name) for name in ("wordnet", "cwn")}
    data = read_crosslingual(args.data)
    for direction, name in DIRECTIONS.items():
        check_expected(data[direction], full[name].headwords, name)
    dictionaries = {"wordnet": frequent_entries(full["wordnet"], args.min_frequency), "cwn": full["cwn"]}
    data["zh-en"], dropped_zh = known_pairs(data["zh-en"], dictionaries["wordnet"].headwords)
    for d in dictionaries.values():
        print(f"{d.name}: {len(d):,} entries, {d.num_definitions():,} definitions", flush=True)
    print(check_disjoint(full["wordnet"], full["cwn"]), flush=True)
    print(merged_counts("wordnet,cwn"), flush=True)
    english, how = english_space(entry_encoder, full["wordnet"], dictionaries["wordnet"])
    spaces = {"wordnet": english, "cwn": build_space(entry_encoder, dictionaries["cwn"])}
    print(f"English entries: {how}", flush=True)
    merged = concatenate(spaces["wordnet"], spaces["cwn"])
    level = centered(spaces["wordnet"], spaces["cwn"])
    print(f"spaces built or loaded ({time.perf_counter() - start:.0f} s)", flush=True)

    rows: list[dict] = []

    def add(
        queries: str,
        entries: str,
        space: DefinitionSpace,
        pairs: Pairs,
        other: set[str] | None,
        shift: torch.Tensor | None = None,
    ) -> None:
        row, top = evaluate(encoder, space, pairs, other, shift)
        rows.append({"queries": queries, "model": label, "entries": entries, **row})
        print(json.dumps(rows[-1]), f"({time.perf_counter() - start:.0f} s)", flush=True)
        for (description, expected), found in list(zip(pairs, top, strict=True))[: args.show]:
            print(f"  {description} -> {found} (expected {'|'.join(expected)})", flush=True)

    for direction, name in DIRECTIONS.items():
        source = "wordnet" if name == "cwn" else "cwn"
        queries = f"{direction} ({dropped_zh} dropped)" if direction == "zh-en" else direction
        add(queries, f"{name} ({len(spaces[name]):,})", spaces[name], data[direction], None)
        other = set(spaces[source].words)
        add(queries, f"wordnet+cwn ({len(merged):,})", merged, data[direction], other)
        shift = spaces[source].matrix.mean(0)  # the mean entry of the description's own language
        add(queries, f"wordnet+cwn, centered per language ({len(merged):,})", level, data[direction], other, shift)
        target = level.subset(spaces[name].words)
        add(queries, f"{name}, centered per language ({len(target):,})", target, data[direction], None, shift)
    everyday, dropped = known_pairs(load_description_pairs(EVERYDAY, split="test"), spaces["wordnet"].words)
    name = f"en-en (everyday test, {dropped} dropped)"
    add(name, f"wordnet ({len(spaces['wordnet']):,})", spaces["wordnet"], everyday, None)
    add(name, f"wordnet+cwn ({len(merged):,})", merged, everyday, set(spaces["cwn"].words))
    shift = spaces["wordnet"].matrix.mean(0)
    add(name, f"wordnet+cwn, centered per language ({len(merged):,})", level, everyday, set(spaces["cwn"].words), shift)

    print()
    print(table(rows))
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
