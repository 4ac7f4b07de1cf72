"""Reverse-dictionary evaluation that cannot leak the query into its gold entry.

A DefSent+ entry is the mean of its own definitions' vectors, so scoring a model's own definitions against
its own entries puts the query inside the gold vector. Two ways out, and a baseline:

- cross-dictionary queries (`cross_dictionary_queries`): definitions written by ANOTHER dictionary (Oxford,
  Chang, a table) scored against the model's entries; a query counts when its headword is an entry (exactly,
  else up to case, whitespace and underscores), the others are dropped and counted;
- leave-one-out (`leave_one_out_ranks`): the model's own held-out definitions, with the gold entry's vector
  recomputed without the query, (mean * count - k * v) / (count - k), v being the query's own vector among those
  the space stores (`stored_rows`: the vectors its mean was made of, a distilled space's projected ones too), else
  its vector under the ENTRY encoder (the model that built the space), and k the times the entry lists that
  definition (WordNet's *barleycorn* lists "a grain of barley" twice: leaving one copy in would leak it); an entry
  left without a definition vanishes, so those queries are counted (`QuerySet.single`), never scored;
- `TfidfBaseline`: TF-IDF cosine of the query against each entry's concatenated definitions (no neural
  model), over words or, for Chinese and Japanese, character n-grams, with an exact leave-one-out of the
  query's term counts (the IDF stays that of all entries).

Every rank is that of the gold entry among ALL entries, ties pessimistic (`ranks_from_scores`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from dictembed.cjk import cjk_share
from dictembed.devices import loader_device
from dictembed.dictionary import load_dictionary, split_by_headword
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.merge import normalize_key
from dictembed.dictionary.split import seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_logits import cosine_logits
from dictembed.entry_space import DefinitionSpace, EntrySpace
from dictembed.errors import DictEmbedError
from dictembed.evaluation.ranking import ranks_from_scores, reverse_dictionary_metrics
from dictembed.model_folder import ModelFolder
from dictembed.paths import default_model
from dictembed.saved_entry_space import load_entry_space

log = logging.getLogger(__name__)
CHUNK = 256  # queries scored against every entry at a time
REPEAT_COSINE = 0.9999  # two stored vectors of one entry this close are one definition listed twice
NEAR_QUERY = 0  # `QuerySet.copies`: counted when ranking, as the entry's stored vectors this close to the query's


@dataclass
class QuerySet:
    """Queries with the index of their gold entry: `kept` matched an entry, `dropped` did not, `single`
    (leave-one-out) had an entry with no other definition than the query (and its copies); `definitions`/`gold`
    are the scored ones (after a limit)."""

    definitions: list[str]
    gold: np.ndarray
    kept: int
    dropped: int
    single: int = 0
    rows: np.ndarray | None = None  # leave-one-out: each query's row among the space's stored definition vectors
    copies: np.ndarray | None = None  # leave-one-out: the times each query's gold lists its definition (`NEAR_QUERY`)

    def counts(self) -> dict[str, int]:
        return {"n": len(self.definitions), "kept": self.kept, "dropped": self.dropped, "single": self.single}


def _key(word: str) -> str:
    return normalize_key(word.replace("_", " "))


def entry_index(words: list[str]) -> dict[str, int]:
    """Headword -> entry index: every exact word, then its key up to case/whitespace/underscores (the first
    entry of a key wins, a lower-case spelling first)."""
    index = {w: i for i, w in enumerate(words)}
    loose: dict[str, int] = {}
    for i in sorted(range(len(words)), key=lambda i: (words[i] != words[i].lower(), i)):
        loose.setdefault(_key(words[i]), i)
    return {**{f"\0{k}": i for k, i in loose.items()}, **index}


def lookup(index: dict[str, int], word: str) -> int | None:
    found = index.get(word)
    return found if found is not None else index.get(f"\0{_key(word)}")


def cross_dictionary_queries(
    words: list[str], queries: Dictionary, limit: int | None = None, seed: int = 0
) -> QuerySet:
    """The definitions of `queries` whose headword is one of `words` (the entries); the rest dropped."""
    index = entry_index(words)
    matched = [(lookup(index, w), d) for w, d in queries.pairs()]
    kept = [(g, d) for g, d in matched if g is not None]
    sample = seeded_sample(kept, limit, seed)
    return QuerySet(
        [d for _, d in sample], np.array([g for g, _ in sample], dtype=np.int64), len(kept), len(matched) - len(kept)
    )


def leave_one_out_queries(
    space: DefinitionSpace, dictionary: Dictionary, limit: int | None = None, seed: int = 0, stored: bool = False
) -> QuerySet:
    """The definitions of `dictionary` (the model's own, e.g. its test split) whose headword is an entry of
    `space` with a definition besides the query and its copies; the others are counted in `single`. With `stored`
    (`dictionary` being the one that built the space), each query's row among the space's stored definition
    vectors too (`stored_rows`), where every one of them is found, and its copies among them. Otherwise a space
    with stored vectors counts the copies when ranking (`NEAR_QUERY`: those near the query's vector; an entry
    whose stored vectors are all one definition is single), and one without them in the dictionary's texts."""
    counts = space.check_leave_one_out()
    rows = stored_rows(space, dictionary) if stored else {}
    queries: list[tuple[int | None, str, int, int]] = []  # (gold, definition, stored row, copies)
    for entry in dictionary:
        g, texts = space.index.get(entry.headword), entry.definitions
        for j, text in enumerate(texts):
            near = NEAR_QUERY if space.definitions is not None else texts.count(text)
            queries.append((g, text, *rows.get((entry.headword, j), (-1, near))))
    kept = [q for q in queries if q[0] is not None]
    repeats = EntryRepeats(space)

    def left(g: int, copies: int) -> bool:  # whether entry g keeps a definition once the query and its copies leave
        return bool(counts[g] > 1 and counts[g] > (copies or repeats.of(g).min()))

    scored = [q for q in kept if left(cast(int, q[0]), q[3])]
    sample = seeded_sample(scored, limit, seed)
    found = np.array([row for _, _, row, _ in sample], dtype=np.int64)
    return QuerySet(
        [d for _, d, _, _ in sample],
        np.array([g for g, _, _, _ in sample], dtype=np.int64),
        len(kept),
        len(queries) - len(kept),
        single=len(kept) - len(scored),
        rows=found if stored and (found >= 0).all() else None,
        copies=np.array([k for _, _, _, k in sample], dtype=np.int64),
    )


class EntryRepeats:
    """For each stored definition vector of an entry, how many of the entry's vectors repeat it (cosine above
    `REPEAT_COSINE`), itself included: 1 for a definition listed once."""

    def __init__(self, space: DefinitionSpace) -> None:
        self.space, counts = space, space.check_counts()
        self.counts, self.first = counts, np.cumsum(counts) - counts
        self._of: dict[int, np.ndarray] = {}

    def block(self, g: int) -> torch.Tensor:
        """The unit vectors entry `g` stores, one row per definition."""
        start, count = int(self.first[g]), int(self.counts[g])
        stored = cast(torch.Tensor, self.space.definitions)[start : start + count]
        return torch.nn.functional.normalize(stored.float(), dim=-1)

    def pairs(self, g: int) -> np.ndarray:
        """Which of entry `g`'s stored vectors repeat which: a boolean [count, count] matrix, its diagonal true."""
        block = self.block(g)
        return (block @ block.T > REPEAT_COSINE).cpu().numpy()

    def of(self, g: int) -> np.ndarray:
        if self.space.definitions is None or self.counts[g] < 2:
            return np.ones(int(self.counts[g]), dtype=np.int64)
        if g not in self._of:
            self._of[g] = self.pairs(g).sum(1)
        return self._of[g]

    def near(self, g: int, vector: np.ndarray) -> int:
        """The copies of the definition whose vector is `vector` among entry `g`'s: those within `REPEAT_COSINE`,
        at least one, at most all but one (an entry of one definition's copies alone is never ranked)."""
        query = torch.nn.functional.normalize(torch.as_tensor(vector, dtype=torch.float32), dim=-1)
        block = self.block(g)
        near = int((block @ query.to(block.device) > REPEAT_COSINE).sum())
        return min(max(near, 1), int(self.counts[g]) - 1)


def stored_rows(space: DefinitionSpace, dictionary: Dictionary) -> dict[tuple[str, int], tuple[int, int]]:
    """(headword, sense position) -> (the row of that definition's vector among those `space` stores, its copies
    among the entry's rows), for the entries of `dictionary` (the one that built the space) it can match: all of an
    entry's rows where their count is its senses' (the copies those of its text); where a word lists one
    definition twice (WordNet's *barleycorn*), which a model folder's definitions keep once, each row but those
    repeating an earlier row of the entry (`EntryRepeats`), with its repeats counted. Empty for a space without
    stored vectors."""
    if space.definitions is None:
        return {}
    repeats = EntryRepeats(space)
    rows: dict[tuple[str, int], tuple[int, int]] = {}
    for entry in dictionary:
        g = space.index.get(entry.headword)
        if g is None:
            continue
        start, count, texts = int(repeats.first[g]), int(repeats.counts[g]), entry.definitions
        if count == len(texts):  # the dictionary lists each of the space's definitions, repeats and all
            own = [(start + i, texts.count(text)) for i, text in enumerate(texts)]
        else:
            near = repeats.pairs(g)
            own = [(start + i, int(near[i].sum())) for i in range(count) if not near[i, :i].any()]
        if len(own) == len(texts):
            rows.update(((entry.headword, j), row) for j, row in enumerate(own))
    return rows


def with_counts(space: DefinitionSpace, dictionary: Dictionary) -> DefinitionSpace:
    """A space saved before counts were kept, with the counts of the dictionary that built it (its
    headwords must be the space's words, in order); the matrix is shared, not checked."""
    if space.words != dictionary.headwords:
        raise DictEmbedError(f"the entries of the space are not the headwords of {dictionary.name!r}")
    counts = np.array([len(e.senses) for e in dictionary])
    return DefinitionSpace(space.words, space.matrix, space.similarity, space.temperature, space.kind, counts)


def _chunks(encoder: Encoder, queries: QuerySet, batch_size: int) -> Iterator[tuple[int, torch.Tensor]]:
    """(start, vectors on the encoder's device) of the queries, `CHUNK` at a time (`Encoder.embed`: length-sorted
    batches, one truncation warning for the whole set)."""
    vectors = encoder.embed(queries.definitions, batch_size, show_progress=False, chunk=CHUNK)
    for start, h in zip(range(0, len(queries.definitions), CHUNK), vectors, strict=True):
        yield start, h.to(encoder.device)


@torch.no_grad()
def model_ranks(encoder: Encoder, space: Any, queries: QuerySet, batch_size: int = 64) -> np.ndarray:
    """Ranks of the gold entries of `queries` encoded by `encoder`, scored by `space` (its own logits)."""
    space = space.to(encoder.device)
    ranks = [np.zeros(0)]
    for start, h in _chunks(encoder, queries, batch_size):
        scores = space(h).float().cpu().numpy()
        ranks.append(ranks_from_scores(scores, queries.gold[start : start + CHUNK]))
    return np.concatenate(ranks)


def entry_pooling(space: DefinitionSpace) -> str:
    """The pooling that built the space's vectors: [CLS] for AC, mean for AMP."""
    if space.is_ica:
        raise DictEmbedError("leave-one-out needs a plain definition space; an ICA-transformed one has no means")
    if space.entries is not None:
        return "cls" if space.entries == "ac" else "mean"
    raise DictEmbedError(f"leave-one-out needs an AC or AMP definition space, not {space.kind!r}")


@torch.no_grad()
def leave_one_out_ranks(
    encoder: Encoder, space: EntrySpace, entry_encoder: Encoder | None, queries: QuerySet, batch_size: int = 64
) -> np.ndarray:
    """Ranks with each gold entry rebuilt without its query: every other entry scored as usual, the gold by
    the space's logits (dot, or cosine / temperature) against (mean * count - k * v) / (count - k), v the query's
    stored vector (`queries.rows`), else its vector under `entry_encoder`, k its copies (`queries.copies`)."""
    if not isinstance(space, DefinitionSpace):
        raise DictEmbedError(f"leave-one-out needs a definition (DefSent+) entry space, not {space.kind!r}")
    stored = space.definitions if queries.rows is not None else None
    pooled_entry = None
    if stored is None:
        if entry_encoder is None:
            raise DictEmbedError("leave-one-out needs the queries' stored vectors or the entry encoder")
        pooled_entry = entry_encoder.with_pooling(entry_pooling(space))
        if pooled_entry.dim != space.matrix.shape[1]:
            raise DictEmbedError(
                f"leave-one-out: the entry encoder gives {pooled_entry.dim}-d vectors, the space holds "
                f"{space.matrix.shape[1]}-d ones (a distilled folder's space is its teacher's, projected): it needs "
                "the folder's own definitions, whose stored vectors it reads"
            )
    space = space.to(encoder.device)
    ranks = [np.zeros(0)]
    for start, h in _chunks(encoder, queries, batch_size):
        texts, gold = queries.definitions[start : start + CHUNK], queries.gold[start : start + CHUNK]
        if pooled_entry is None:
            rows = cast(np.ndarray, queries.rows)[start : start + CHUNK]
            v = cast(torch.Tensor, stored)[torch.from_numpy(rows)].float().cpu().numpy()
        else:
            with pooled_entry.autocast():
                v = np.asarray(pooled_entry.encode(texts, batch_size=batch_size), dtype=np.float32)
        copies = None if queries.copies is None else queries.copies[start : start + CHUNK].copy()
        if copies is not None and (copies == NEAR_QUERY).any():
            repeats = EntryRepeats(space)
            for i in np.flatnonzero(copies == NEAR_QUERY):
                copies[i] = repeats.near(int(gold[i]), v[i])
        loo = torch.from_numpy(space.leave_one_out(gold, v, copies)).to(encoder.device)
        scores = space(h).float()
        if space.similarity == "cosine":  # each query against its own gold vector: [B, 1, d] x [B, 1, d]
            own = cosine_logits(h[:, None], loo[:, None], space.temperature)[:, 0, 0]
        else:
            own = (h * loo).sum(-1)
        scores[torch.arange(len(gold)), torch.from_numpy(gold).to(encoder.device)] = own
        ranks.append(ranks_from_scores(scores.cpu().numpy(), gold))
    return np.concatenate(ranks)


def entry_encoder_name(record: Any, folder: str | Path | None = None) -> str:
    """The model that built a DefSent+ space: the record's `entry_encoder`, or, for records saved before it
    was kept, the base model of a first PST step. A published record names a local folder of the machine that
    trained the model by its public name (`RunRecord.portable`): the embedded model is this machine's copy, a
    run folder (`model-runs/step1/...`) is looked for beside the model `folder`; another one cannot be found,
    which is an error naming it."""
    if record.entry_encoder:
        local = record.local_source("model", record.entry_encoder)
        beside = Path(folder).parent / record.entry_encoder if folder is not None else None
        if local == "embedded":
            return default_model()
        if local and beside is not None and len(Path(record.entry_encoder).parts) > 1 and beside.is_dir():
            return str(beside)
        if local:
            raise DictEmbedError(
                f"the entry encoder {record.entry_encoder} was a local folder of the machine that trained the model; "
                "leave-one-out needs it (evaluate the run folder it was published from, on that machine)"
            )
        return str(record.entry_encoder)
    if record.pst_step in (None, 1) and record.settings.get("model"):
        return str(record.settings["model"])
    raise DictEmbedError("the model's record names no entry encoder (saved before it was kept, PST step > 1)")


def load_entry_encoder(folder: str | Path, record: Any, device: Any = None, precision: str | None = "auto") -> Encoder:
    """The entry encoder as the recipe loaded it (the run's pooling, pooler and max length)."""
    settings = record.settings
    return Encoder.load(
        entry_encoder_name(record, folder),
        pooling=settings.get("pooling"),
        pooler=settings.get("pooler"),
        max_length=settings.get("max_length"),
        device=loader_device(device),
    ).set_precision(precision)


ANALYZERS = ("auto", "word", "char")
CHAR_NGRAMS = (1, 3)  # the `char` analyzer: character 1- to 3-grams


def char_ngrams(text: str) -> list[str]:
    """The lower-cased character 1- to 3-grams of each line of `text` (whitespace runs made one space): an
    entry's definitions, one a line, give exactly the sum of their own n-grams, none across two of them."""
    low, high = CHAR_NGRAMS
    grams = []
    for line in text.lower().split("\n"):
        line = " ".join(line.split())
        grams += [line[i : i + n] for n in range(low, high + 1) for i in range(len(line) - n + 1)]
    return grams


def tfidf_analyzer(analyzer: str, texts: list[str]) -> str:
    """`word` or `char` for the TF-IDF baseline: `auto` is `char` when most letters of `texts` are Chinese or
    Japanese (`cjk.cjk_share` over half), whose words no spaces separate, else `word`."""
    if analyzer not in ANALYZERS:
        raise DictEmbedError(f"unknown TF-IDF analyzer {analyzer!r}; choose from {', '.join(ANALYZERS)}")
    if analyzer == "auto":
        return "char" if cjk_share(texts) > 0.5 else "word"
    return analyzer


class TfidfBaseline:
    """TF-IDF (scikit-learn's TfidfVectorizer) of each entry's concatenated definitions; a query scores every
    entry by cosine. An entry without definitions scores 0. `analyzer`: `word` (scikit-learn's default words of
    two or more letters), `char` (`char_ngrams`, for text without spaces between words) or `auto` (see
    `tfidf_analyzer`); `self.analyzer` says which."""

    def __init__(self, words: list[str], dictionary: Dictionary, analyzer: str = "auto") -> None:
        from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

        self.words = list(words)
        definitions = [d for w in self.words if w in dictionary for d in dictionary[w].definitions]
        self.analyzer = tfidf_analyzer(analyzer, definitions)
        options: dict[str, Any] = {"analyzer": char_ngrams} if self.analyzer == "char" else {}
        self.definitions = [dictionary[w].definitions if w in dictionary else [] for w in self.words]
        documents = [" \n ".join(texts) for texts in self.definitions]
        self.vectorizer = TfidfVectorizer(dtype=np.float64, **options)
        try:
            self.matrix = self.vectorizer.fit_transform(documents).tocsr()  # rows l2-normalised
        except ValueError:  # scikit-learn's "empty vocabulary": no entry of the model is defined with a term
            raise DictEmbedError(
                f"the TF-IDF baseline: no entry of the model has a definition with a term in {dictionary.name!r} "
                f"({sum(map(len, self.definitions))} definitions of its {len(self.words)} entries)"
            ) from None
        self.counter = CountVectorizer(vocabulary=self.vectorizer.vocabulary_, **options)
        self.counts = self.counter.transform(documents).tocsr()
        self.idf = self.vectorizer.idf_

    def scores(self, texts: list[str]) -> np.ndarray:
        """Cosine [n_texts, n_entries]."""
        return (self.vectorizer.transform(texts) @ self.matrix.T).toarray()

    def leave_one_out(self, texts: list[str], gold: np.ndarray) -> np.ndarray:
        """The TF-IDF rows of `gold[i]` without the term counts of `texts[i]`, as often as the entry lists it
        (l2-normalised; zero if empty)."""
        import scipy.sparse
        from sklearn.preprocessing import normalize

        copies = [max(self.definitions[g].count(t), 1) for t, g in zip(texts, np.asarray(gold).tolist(), strict=True)]
        taken = scipy.sparse.diags(np.asarray(copies, dtype=np.float64)) @ self.counter.transform(texts)
        rest = self.counts[gold] - taken
        if rest.nnz and rest.data.min() < 0:
            raise DictEmbedError("leave-one-out of a text that is not among the entry's definitions")
        return normalize(rest.multiply(self.idf).tocsr())

    def ranks(self, queries: QuerySet, leave_one_out: bool = False) -> np.ndarray:
        ranks = [np.zeros(0)]
        for start in range(0, len(queries.definitions), CHUNK):
            texts, gold = queries.definitions[start : start + CHUNK], queries.gold[start : start + CHUNK]
            scores = self.scores(texts)
            if leave_one_out:
                q = self.vectorizer.transform(texts)
                scores[np.arange(len(gold)), gold] = np.asarray(q.multiply(self.leave_one_out(texts, gold)).sum(1))[
                    :, 0
                ]
            ranks.append(ranks_from_scores(scores, gold))
        return np.concatenate(ranks)


def summary(ranks: np.ndarray, queries: QuerySet) -> dict[str, float]:
    """The metrics of `ranks` with the query counts."""
    return {**reverse_dictionary_metrics(ranks), **queries.counts()}


def evaluate_leak_free(
    model: str | Path,
    queries: str | None = None,
    leave_one_out: bool = False,
    baseline: str | None = None,
    split: str = "test",
    limit: int | None = None,
    dictionary: str | None = None,
    wordnet_dir: str | None = None,
    encoding: str | None = None,
    device: Any = "auto",
    precision: str | None = "auto",
    analyzer: str = "auto",
) -> dict[str, float]:
    """The leak-free reverse-dictionary metrics of a saved model (`summary`): either `queries`, ANOTHER
    dictionary's definitions (oxford, chang or a file) against the model's entries, or `leave_one_out`, the
    model's own `split` definitions each left out of its gold entry; scored by the model or, with
    `baseline="tfidf"`, by TF-IDF over `analyzer`'s terms (`TfidfBaseline`). `dictionary`, `wordnet_dir` and
    `encoding` replace the model's own."""
    if bool(queries) == leave_one_out:
        raise DictEmbedError("give either queries (oxford, chang or a file) or leave_one_out")
    if baseline not in (None, "tfidf"):
        raise DictEmbedError(f"unknown baseline {baseline!r}; choose from tfidf")
    model_folder = ModelFolder.open(model)
    folder, source = model_folder.path, model_folder.dictionary(dictionary, wordnet_dir, encoding)
    space = load_entry_space(folder)
    own = source.load() if leave_one_out or baseline else None  # loaded wherever it is used below
    if queries:
        other = load_dictionary(queries, encoding=encoding or "utf-8")
        query_set = cross_dictionary_queries(space.words, other, limit=limit)
    else:
        if not isinstance(space, DefinitionSpace):
            raise DictEmbedError(f"--leave-one-out needs a DefSent+ definition space, not {space.kind!r}")
        held_out = split_by_headword(cast(Dictionary, own), seed=source.split_seed)[split]
        # the stored vectors are those of the folder's own definitions, the dictionary written beside its space
        definitions = model_folder.definitions
        own_file = definitions.is_file() and Path(source.spec).resolve() == definitions.resolve()
        query_set = leave_one_out_queries(space, held_out, limit=limit, stored=own_file)
    if not query_set.definitions:
        raise DictEmbedError(f"no queries to score ({query_set.kept} kept, {query_set.dropped} dropped)")
    if baseline == "tfidf":
        tfidf = TfidfBaseline(space.words, cast(Dictionary, own), analyzer)
        ranks = tfidf.ranks(query_set, leave_one_out=leave_one_out)
    else:
        encoder = Encoder.load(model_folder, device=loader_device(device)).set_precision(precision)
        if leave_one_out:
            entry_encoder = None
            if query_set.rows is None:  # no stored vector for some query: the entry encoder encodes them
                entry_encoder = load_entry_encoder(folder, model_folder.record, device, precision)
            ranks = leave_one_out_ranks(encoder, space, entry_encoder, query_set)
        else:
            ranks = model_ranks(encoder, space, query_set)
    return summary(ranks, query_set)
