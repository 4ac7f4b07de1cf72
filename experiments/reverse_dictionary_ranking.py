"""Ranking candidates for the reverse dictionary, measured on every query set at once.

    python experiments/reverse_dictionary_ranking.py outputs/minilm-defsent-plus \\
        --vectors ~/.cache/dictembed/wordnet-definitions-minilm.npy --json results.json

Entries: the model's definition (AMP) space over all WordNet entries; results are grouped as `predict`
shows them (entries with identical vectors are one result; a group scores its best member). Ranks are
0-based (the number of groups scored strictly above the gold's best group; ties pessimistic).

Query sets: `desc-dev` / `desc-test` (tests/data/everyday_descriptions.tsv, people's words), `oxford`,
`chang` (another dictionary's definitions of the same headwords), `loo` (the model's own test-split
definitions, each left out of its entry: of the AMP mean, of the definition-level maximum and of BM25).

Candidate scores, each an [entries] array per query, combined linearly with weights tuned on `desc-dev`:
- `dense`: cosine of the query to the entry's AMP vector (today's ranking);
- `defmax`: the best cosine of the query to one of the entry's definitions (entry encoder's vectors);
- `bm25`: the best BM25 of the query against one of the entry's definitions (bm25s, English stop words,
  Snowball stems), divided by the query's best BM25 over all definitions;
- `freq`: the entry's `wordfreq` Zipf frequency / 8 (multi-word entries as wordfreq combines them);
- `base`: the best cosine of the query encoded by the ENTRY encoder (the untrained base model, the encoder of
  the definition vectors) to one of the entry's definitions: plain semantic search over the definitions;
- `echo`: 1 when every word of the entry occurs in the query ("free time" for "something fun you do in your free
  time"), else 0; `--echo` adds rows of the product default minus a weight times it.
The product's score (`dictembed.search_options.Ranking`) is (dense + w_d defmax) / (1 + w_d) + w_f Zipf, which
ranks as `dense + w_d defmax + 8 (1 + w_d) w_f freq`; it reranks only the `--depth` best groups by dense + w_f
Zipf (the others keep that order below them), as `--depth` does here for every row with `defmax`. The
definition vectors are the model's own (`DefinitionSpace.definitions`, float16) when its space keeps them;
else `--vectors` caches the entry encoder's vectors of every definition (an .npy file and a .json of the pairs).
`--entries-from` ranks a model trained on other data (`experiments/cross_dictionary_data.py`) over another
model's entries; `--no-tuning` reports only dense, the product default and its `--echo` and `--floors` rows.
`--floors` adds rows for candidate sets (`Ranking.min_frequency`): only words of at least that Zipf frequency.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from dictembed.dictionary import load_dictionary, split_by_headword
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.evaluation import leak_free
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.extras import require
from dictembed.model_folder import DEFINITIONS_FILE, ModelFolder, read_record, resolve_model
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_index import EntryGroups
from dictembed.search_options import RERANK_DEPTH, Ranking

DESCRIPTIONS = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"
COMPONENTS = ("dense", "defmax", "bm25", "freq", "base", "echo")
WORD = re.compile(r"[^\W_]+")
CHUNK = 128


@dataclass
class Queries:
    """Query texts, their gold entries (any of a set), and for leave-one-out the definition left out."""

    name: str
    texts: list[str]
    gold: list[np.ndarray]
    left_out: np.ndarray | None = None  # definition index per query (-1: none)
    counts: dict[str, int] = field(default_factory=dict)


def definition_vectors(path: Path | None, pairs: list[tuple[str, str]], entry_encoder: Encoder) -> np.ndarray:
    """The entry encoder's vectors of every definition, in `pairs` order, cached at `path` (keyed by the pairs)."""
    if path is not None and path.exists():
        saved = json.loads(path.with_suffix(".json").read_text())
        vectors = np.load(path, mmap_mode="r")
        where = {(w, d): i for i, (w, d) in enumerate(saved)}
        order = np.array([where[(w, d)] for w, d in pairs])
        return np.ascontiguousarray(vectors[order], dtype=np.float32)
    vectors = entry_encoder.encode([d for _, d in pairs], batch_size=128, show_progress_bar=True)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
        path.with_suffix(".json").write_text(json.dumps(pairs))
    return np.asarray(vectors, dtype=np.float32)


def word_sets(texts: list[str]) -> list[frozenset[str]]:
    """Each text's lower-cased words (letters and digits)."""
    return [frozenset(WORD.findall(t.lower())) for t in texts]


class Echo:
    """Which entries' words all occur in the query ("free time" for "something you do in your free time"):
    people describing a word rarely use the word itself."""

    def __init__(self, words: list[str]):
        sets = word_sets(words)
        self.sizes = np.array([len(ws) for ws in sets])
        self.holders: dict[str, list[int]] = {}
        for i, ws in enumerate(sets):
            for w in ws:
                self.holders.setdefault(w, []).append(i)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), len(self.sizes)), dtype=np.float32)
        for row, ws in enumerate(word_sets(texts)):
            hits = np.zeros(len(self.sizes), dtype=np.int64)
            for w in ws:
                hits[self.holders.get(w, [])] += 1
            out[row] = (hits == self.sizes) & (self.sizes > 0)
        return out


def zipf(words: list[str]) -> np.ndarray:
    from wordfreq import zipf_frequency

    return np.array([zipf_frequency(w, "en") for w in words], dtype=np.float32)


class Scorer:
    """Every candidate score of a query over all entries, and the grouped 0-based rank of its gold."""

    def __init__(
        self,
        encoder: Encoder,
        space: DefinitionSpace,
        pairs: list[tuple[str, str]],
        vectors: np.ndarray,
        base: Encoder | None = None,
    ):
        bm25s = require("experiments", "bm25s")
        stemmer = require("experiments", "Stemmer")

        self.encoder, self.space, self.base = encoder, space, base
        self.owner = np.array([space.index[w] for w, _ in pairs])
        if (np.diff(self.owner) < 0).any():
            raise SystemExit("definitions must come grouped by entry, in entry order")
        self.starts = np.flatnonzero(np.r_[True, np.diff(self.owner) != 0])
        self.def_unit = torch.from_numpy(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
        self.entry_unit = F.normalize(space.matrix.float(), dim=-1)
        self.raw_vectors = vectors
        self.stemmer = stemmer.Stemmer("english")
        self.bm25 = bm25s.BM25()
        corpus = bm25s.tokenize([d for _, d in pairs], stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.bm25.index(corpus, show_progress=False)
        self.freq = zipf(space.words) / 8.0
        self.echo = Echo(space.words)
        groups = EntryGroups.of(space.matrix.numpy())
        self.group_of = np.empty(len(space), dtype=np.int64)
        for g in range(len(groups.first)):
            self.group_of[groups.members(g)] = g
        self.by_group = np.argsort(self.group_of, kind="stable")
        self.group_starts = np.flatnonzero(np.r_[True, np.diff(self.group_of[self.by_group]) != 0])

    def _per_entry_max(self, per_definition: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(per_definition, self.starts, axis=-1)

    def components(self, queries: Queries, start: int, stop: int) -> dict[str, np.ndarray]:
        texts = queries.texts[start:stop]
        h = F.normalize(torch.from_numpy(self.encoder.encode(texts, batch_size=64)), dim=-1)
        dense = (h @ self.entry_unit.T).numpy()
        per_def = (h @ self.def_unit.T).numpy()
        if self.base is not None:
            b = F.normalize(torch.from_numpy(self.base.encode(texts, batch_size=64)), dim=-1)
            per_def_base = (b @ self.def_unit.T).numpy()
        else:
            per_def_base = np.zeros_like(per_def)
        tokens = bm25s_tokens(self, texts)
        lexical = np.stack([self.bm25.get_scores(t) if t else np.zeros(len(self.owner)) for t in tokens])
        if queries.left_out is not None:
            for row, (d, gold) in enumerate(zip(queries.left_out[start:stop], queries.gold[start:stop], strict=True)):
                e = int(gold[0])
                loo = self.space.leave_one_out(np.array([e]), self.raw_vectors[d][None])[0]
                dense[row, e] = float(h[row] @ F.normalize(torch.from_numpy(loo), dim=-1))
                per_def[row, d] = -np.inf
                per_def_base[row, d] = -np.inf
                lexical[row, d] = 0.0
        best = lexical.max(axis=1, keepdims=True)
        lexical = lexical / np.where(best > 0, best, 1.0)
        parts = {
            "dense": dense,
            "defmax": self._per_entry_max(per_def),
            "bm25": self._per_entry_max(lexical),
            "base": self._per_entry_max(per_def_base),
            "echo": self.echo(texts),
        }
        if queries.left_out is not None:  # the gold's group mates share its definitions: leave it out of them too
            for row, gold in enumerate(queries.gold[start:stop]):
                e = int(gold[0])
                mates = self.by_group[self.group_of[self.by_group] == self.group_of[e]]
                for values in parts.values():
                    values[row, mates] = values[row, e]
        return {**parts, "freq": self.freq[None, :]}

    def grouped(self, scores: np.ndarray) -> np.ndarray:
        """Per group, its best member's score."""
        return np.maximum.reduceat(scores[:, self.by_group], self.group_starts, axis=1)

    def ranks(
        self, combined: np.ndarray, gold: list[np.ndarray], first: np.ndarray | None = None, depth: int = 0
    ) -> np.ndarray:
        """0-based grouped ranks: groups (best member's score) scored strictly above the gold's best group.
        With `first` (a first-stage score), only each row's `depth` best groups by it are ordered by `combined`,
        ahead of the rest, which keep the order of `first`."""
        grouped = self.grouped(combined)
        if first is not None:
            stage = self.grouped(first)
            top = np.argpartition(-stage, depth - 1, axis=1)[:, :depth]
            inside = np.zeros_like(stage, dtype=bool)
            np.put_along_axis(inside, top, True, axis=1)
            grouped = np.where(inside, grouped.astype(np.float64) + 1e3, stage)  # float32 would round ties in
        out = np.empty(len(gold))
        for row, g in enumerate(gold):
            best = grouped[row, self.group_of[g]].max()
            out[row] = (grouped[row] > best).sum()
        return out


def bm25s_tokens(scorer: Scorer, texts: list[str]) -> list[list[str]]:
    bm25s = require("experiments", "bm25s")

    vocab = scorer.bm25.vocab_dict
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=scorer.stemmer, return_ids=False, show_progress=False)
    return [[t for t in row if t in vocab] for row in tokens]


def metrics(ranks: np.ndarray) -> dict[str, float]:
    """Median rank (0- and 1-based), accuracy@1/10/100 and MRR from 0-based ranks."""
    return {
        "n": len(ranks),
        "median0": float(np.median(ranks)),
        "median1": float(np.median(ranks) + 1),
        "acc1": float(np.mean(ranks < 1)),
        "acc10": float(np.mean(ranks < 10)),
        "acc100": float(np.mean(ranks < 100)),
        "mrr": float(np.mean(1.0 / (ranks + 1))),
    }


def query_sets(space: DefinitionSpace, dictionary, pairs, split_seed: int, limit: int) -> list[Queries]:
    index = leak_free.entry_index(space.words)
    sets = []
    for split in ("dev", "test"):
        rows = load_description_pairs(DESCRIPTIONS, split=split)
        texts, gold, missing = [], [], 0
        for description, expected in rows:
            found = [i for w in expected if (i := leak_free.lookup(index, w)) is not None]
            if found:
                texts.append(description)
                gold.append(np.array(found))
            else:
                missing += 1
        sets.append(Queries(f"desc-{split}", texts, gold, counts={"dropped": missing}))
    for name in ("oxford", "chang"):
        q = leak_free.cross_dictionary_queries(space.words, load_dictionary(name), limit=limit)
        sets.append(Queries(name, q.definitions, [np.array([g]) for g in q.gold], counts=q.counts()))
    test = split_by_headword(dictionary, seed=split_seed)["test"]
    q = leak_free.leave_one_out_queries(space, test, limit=limit)
    where = {}
    for i, pair in enumerate(pairs):
        where.setdefault((pair[0], pair[1]), i)
    left_out = np.array([where[(space.words[g], d)] for g, d in zip(q.gold, q.definitions, strict=True)])
    sets.append(Queries("loo", q.definitions, [np.array([g]) for g in q.gold], left_out, q.counts()))
    return sets


def saved_pairs(folder: Path) -> list[tuple[str, str]]:
    """(word, definition) of every row of the folder's definitions.jsonl, in its order and repeats kept, as the
    entry space stores their vectors (loading it as a dictionary unites a definition a word lists twice)."""
    lines = (folder / DEFINITIONS_FILE).read_text(encoding="utf-8").splitlines()
    return [(row["word"], row["definition"]) for row in map(json.loads, lines) if row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a DefSent+ model folder (definition entry space)")
    parser.add_argument(
        "--entries-from",
        default=None,
        help="take the entry space, its dictionary and entry encoder from this DefSent+ model folder, and only the "
        "query encoder from MODEL: a model trained on other data, ranked over the same entries (default: MODEL)",
    )
    parser.add_argument("--vectors", type=Path, default=None, help="cache of the definition vectors (.npy)")
    parser.add_argument("--limit", type=int, default=1000, help="queries per cross-dictionary / leave-one-out set")
    parser.add_argument("--json", type=Path, default=None, help="write every component score summary here")
    parser.add_argument("--no-definitions", action="store_true", help="leave out `defmax` (no definition vectors)")
    parser.add_argument("--no-base", action="store_true", help="leave out `base` (no second query encoding)")
    parser.add_argument(
        "--floors",
        type=lambda text: [float(x) for x in text.split(",") if x],
        default=[1.0, 2.0, 3.0],
        help="candidate sets measured with the product default: words of at least these Zipf frequencies",
    )
    parser.add_argument(
        "--echo",
        type=lambda text: [float(x) for x in text.split(",") if x],
        default=[0.05, 0.1, 0.2, 1.0],
        help="rows of the product default minus these weights x `echo` (the entry's words all occur in the query)",
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=RERANK_DEPTH,
        help="in the reported rows, rerank only this many groups by `defmax` and `base` (0: all of them); the "
        "weights are tuned without it",
    )
    parser.add_argument(
        "--no-tuning",
        action="store_true",
        help="report only dense and the product default rows (no weight grid): to compare models",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    folder = resolve_model(args.entries_from or args.model)
    record = read_record(folder, required=True)
    source = ModelFolder.open(folder).dictionary()
    dictionary = source.load()
    space = load_entry_space(folder)
    assert isinstance(space, DefinitionSpace)
    space = leak_free.with_counts(space, dictionary) if space.counts is None else space
    pairs = [(w, d) for w, d in dictionary.pairs()]
    entry_encoder = leak_free.load_entry_encoder(folder, record, "cpu", "fp32")
    pooled = entry_encoder.with_pooling(leak_free.entry_pooling(space))
    if args.no_definitions:  # a stand-in: every definition the zero vector, so `defmax` is 0 and not tuned
        vectors = np.zeros((len(pairs), space.matrix.shape[1]), dtype=np.float32)
        vectors[:, 0] = 1.0
    elif space.definitions is not None:  # the model's own, as the reverse dictionary uses them
        if len(space.definitions) != len(pairs):  # a definition listed twice under a word: the space keeps both rows
            pairs = saved_pairs(folder)
        assert len(space.definitions) == len(pairs), "the space's definitions are not the dictionary's"
        vectors = space.definitions.float().numpy()
    else:
        vectors = definition_vectors(args.vectors, pairs, pooled)
    encoder = Encoder.load(str(resolve_model(args.model)), device="cpu")
    scorer = Scorer(encoder, space, pairs, vectors, None if args.no_base else pooled)
    print(f"ready in {time.perf_counter() - start:.0f} s", flush=True)

    sets = query_sets(space, dictionary, pairs, source.split_seed, args.limit)
    dev = next(q for q in sets if q.name == "desc-dev")
    dev_parts = [scorer.components(dev, s, s + CHUNK) for s in range(0, len(dev.texts), CHUNK)]

    second = ("defmax", "base")  # the terms that rerank the `--depth` best by the others

    def ranks_of(
        parts: dict[str, np.ndarray], weights: dict[str, float], gold: list[np.ndarray], depth: int = 0
    ) -> np.ndarray:
        floor = weights.get("floor", 0)  # the candidate set: words of at least this Zipf frequency
        if floor:
            rare = scorer.freq * 8 < floor
            parts = {c: np.where(rare, -np.inf, v) if c == "dense" else v for c, v in parts.items()}
        depth = int(weights.get("depth", depth))
        weights = {c: w for c, w in weights.items() if c in COMPONENTS}
        combined = np.asarray(sum(w * parts[c] for c, w in weights.items() if w), dtype=np.float32)
        scale = 1 + sum(weights.get(c, 0) for c in second)
        if scale == 1 or not depth:
            return scorer.ranks(combined, gold)
        first = sum(
            w / scale * parts[c] if c == "freq" else w * parts[c] for c, w in weights.items() if w and c not in second
        )
        return scorer.ranks(combined, gold, np.asarray(first, dtype=np.float32), depth)

    grid = {
        "defmax": (0, 0.25, 0.5, 0.75, 1, 2),
        "bm25": (0, 0.05, 0.1),
        "freq": (0, 0.025, 0.05, 0.075, 0.1, 0.2),
        "base": (0,) if args.no_base else (0, 0.5, 1, 2),
    }
    if args.no_definitions:
        grid["defmax"] = (0,)
    if args.no_tuning:
        grid = {component: (0,) for component in grid}
    tuned = []
    for a, b, c, d in itertools.product(*grid.values()):
        weights = {"dense": 1.0, "defmax": a, "bm25": b, "freq": c, "base": d}
        ranks = np.concatenate(
            [ranks_of(p, weights, dev.gold[i * CHUNK : (i + 1) * CHUNK]) for i, p in enumerate(dev_parts)]
        )
        tuned.append((metrics(ranks)["mrr"], weights))
    tuned.sort(key=lambda t: -t[0])
    print(f"tuned on desc-dev ({time.perf_counter() - start:.0f} s): {tuned[:5]}", flush=True)
    rows = {"dense (today)": {"dense": 1.0}}
    if not args.no_tuning:
        for component in grid:  # each candidate alone, at its best non-zero weight on desc-dev
            alone = [w for _, w in tuned if w[component] and all(w[c] == 0 for c in grid if c != component)]
            if alone:
                rows[f"+{component}"] = alone[0]
        for label, without in (("defmax+freq", ("bm25", "base")), ("defmax+freq+base", ("bm25",))):
            best = [w for _, w in tuned if all(w[c] == 0 for c in without)]
            rows[f"{label}, tuned"] = best[0]
        rows["all, tuned"] = tuned[0][1]
    default = Ranking()  # the product's default, in this script's weights
    a = default.definition_weight
    rows["product default"] = {"dense": 1.0, "defmax": a, "freq": 8 * (1 + a) * default.frequency_weight}
    rows["product default, every group reranked"] = {**rows["product default"], "depth": 0}
    for penalty in args.echo:
        rows[f"product default, echo -{penalty:g}"] = {**rows["product default"], "echo": -penalty}
    for floor in args.floors:
        rows[f"product default, Zipf >= {floor:g}"] = {**rows["product default"], "floor": floor}
    results = []
    for q in sets:
        found: dict[str, list[np.ndarray]] = {label: [] for label in rows}
        for s in range(0, len(q.texts), CHUNK):
            parts = dev_parts[s // CHUNK] if q is dev else scorer.components(q, s, s + CHUNK)
            for label, weights in rows.items():
                found[label].append(ranks_of(parts, weights, q.gold[s : s + CHUNK], args.depth))
        for label, weights in rows.items():
            r = {"ranking": label, "weights": weights, "queries": q.name, **q.counts}
            r.update(metrics(np.concatenate(found[label])))
            results.append(r)
            print(
                f"| {label} | {q.name} | {r['n']} | {r['median0']:g} | {r['acc1']:.3f} | {r['acc10']:.3f} "
                f"| {r['acc100']:.3f} | {r['mrr']:.3f} | {json.dumps(weights)}",
                flush=True,
            )
    print(f"{time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"top_dev": tuned[:10], "rows": results}, indent=1))


if __name__ == "__main__":
    main()
