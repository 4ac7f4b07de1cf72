"""The indexes a reverse-dictionary search reads, each computed once per model: entries grouped by identical
vectors (`EntryGroups`), the k best of a score row (`top_indices`), a first search stage over a projection of the
entry vectors (`CoarseIndex`) and the words' lengths and case-folded prefixes (`WordIndex`).

`SearchIndex` holds the first three that a model folder stores ready to map (with each entry's senses,
`EntrySenses`): written at save into `search_index/`, or for a folder without one into dictembed's cache, keyed by
a fingerprint of the files it derives from and checked against it at every load."""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dictembed.entry_relations import EntryRelation
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DictEmbedError
from dictembed.lexical_terms import StemSets
from dictembed.model_folder import (
    DEFINITIONS_FILE,
    SEARCH_DIR,
    SPACE_DIR,
    SPACE_META,
    SPACE_TENSORS,
    ModelDictionary,
    ModelFolder,
)
from dictembed.paths import cache_root
from dictembed.record import update_sampled
from dictembed.search_options import word_length
from dictembed.search_space import MATRIX_SPACES, SearchSpace, all_finite, definition_rows, mapped_tensors
from dictembed.word_frequency import entry_frequencies, frequency_source

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary

log = logging.getLogger(__name__)


@dataclass
class EntryGroups:
    """Entries grouped by identical vectors, once: group g holds `order[starts[g]:starts[g + 1]]`."""

    order: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, vectors: np.ndarray) -> EntryGroups:
        """Group the rows of `vectors` by a hash of their bytes (groups ordered by first occurrence)."""
        rows = np.ascontiguousarray(vectors)
        keys: dict[bytes, int] = {}
        group_of = np.fromiter(
            (keys.setdefault(hashlib.blake2b(row.tobytes(), digest_size=16).digest(), len(keys)) for row in rows),
            dtype=np.int64,
            count=len(rows),
        )
        order = np.argsort(group_of, kind="stable")
        return cls(order, np.searchsorted(group_of[order], np.arange(len(keys))))

    def __len__(self) -> int:
        return len(self.starts)

    @cached_property
    def first(self) -> np.ndarray:
        """One entry index per group (its first), computed once."""
        return self.order[self.starts]

    @cached_property
    def sizes(self) -> np.ndarray:
        """The number of entries of each group, computed once."""
        return np.diff(self.starts, append=len(self.order))

    def members(self, group: int) -> np.ndarray:
        start = self.starts[group]
        return self.order[start : start + self.sizes[group]]

    def members_of(self, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entries of each of `groups`, one group after another, and where each group's start among them (for
        `np.maximum.reduceat` and its kind)."""
        positions, starts = definition_rows(self.starts, self.sizes, groups)
        return self.order[positions], starts

    def any(self, entry_mask: np.ndarray) -> np.ndarray:
        """Per group: whether any of its entries is set in `entry_mask`."""
        if not len(self.starts):
            return np.zeros(0, dtype=bool)
        return np.logical_or.reduceat(entry_mask[self.order], self.starts)


def top_indices(scores: np.ndarray, allowed: np.ndarray | None, k: int) -> np.ndarray:
    """The indices of the k highest `scores` among the `allowed`, best first (ties by index)."""
    values = scores[allowed] if allowed is not None else scores  # no copy of every score when unfiltered
    n = len(values)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:  # the k-th score's ties: those of the lowest index, as a full sort would keep
        kth = values[np.argpartition(values, n - k)[n - k]]
        above = np.flatnonzero(values > kth)
        keep = np.concatenate([above, np.flatnonzero(values == kth)[: k - len(above)]])
    else:
        keep = np.arange(n)
    candidates = np.flatnonzero(allowed)[keep] if allowed is not None else keep
    return candidates[np.lexsort((candidates, -values[keep]))]


@dataclass
class CoarseIndex:
    """A first stage for a large space: the unit entry vectors projected on their first principal directions
    (of the uncentred second moment, which best keeps their dot products), so that scoring every group reads a
    third of the matrix; the best candidates are then scored exactly. Kept in numpy on the CPU: its BLAS runs
    this matrix-vector product about 3x faster than torch does (benchmarks/coarse_search.py)."""

    projection: np.ndarray  # [dim, dims]
    vectors: np.ndarray  # [groups, dims]
    product: Callable[[np.ndarray], np.ndarray] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, unit: np.ndarray, dims: int) -> CoarseIndex:
        """The index of the rows of `unit` in `dims` dimensions."""
        rows = np.asarray(unit, dtype=np.float64)
        _, directions = np.linalg.eigh(rows.T @ rows)  # ascending eigenvalues
        projection = np.ascontiguousarray(directions[:, ::-1][:, :dims], dtype=np.float32)
        return cls(projection, np.ascontiguousarray(np.asarray(unit, dtype=np.float32) @ projection))

    def run_on_onnx_runtime(self, threads: int) -> bool:
        """Score on ONNX Runtime from now on, with `threads` threads (`array_kernels.constant_product`: the vectors
        packed once for its GEMM, 4 bytes a value more in memory; a batch of 8 queries on 2 cores in about half
        numpy's time); False where onnxruntime is not installed."""
        from dictembed.backends.onnx.array_kernels import constant_product

        if self.product is None:
            self.product = constant_product(self.vectors, threads)
        return self.product is not None

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Approximate dot products [queries, groups] of unit query vectors with every group."""
        projected = queries @ self.projection
        if self.product is not None and len(projected):
            return self.product(projected)
        if len(projected) == 1:  # a matrix-vector product: the common case of one query
            return (self.vectors @ projected[0])[None]
        return projected @ self.vectors.T


@dataclass
class WordIndex:
    """What the length and initial filters and `neighbours` read of each entry, computed once: its length in
    letters (`word_length`), its group, and the case-folded words in sorted order for prefix look-ups."""

    lengths: np.ndarray  # int32, one per entry
    group_of: np.ndarray  # int64, one per entry
    folded: list[str]  # the case-folded words, sorted
    folded_order: np.ndarray  # the entry of each of `folded`
    by_folded: dict[str, int]  # a case-folded word -> its first entry

    @classmethod
    def of(cls, words: list[str], groups: EntryGroups) -> WordIndex:
        """The index of `words`, grouped by `groups`."""
        folded = [word.casefold() for word in words]
        order = np.asarray(sorted(range(len(words)), key=folded.__getitem__), dtype=np.int64)
        group_of = np.zeros(len(words), dtype=np.int64)
        sizes = np.diff(np.append(groups.starts, len(groups.order)))
        group_of[groups.order] = np.repeat(np.arange(len(groups)), sizes)
        by_folded = dict(zip(reversed(folded), range(len(words) - 1, -1, -1), strict=True))  # the first one wins
        counted = (len(word) if word.isalnum() else word_length(word) for word in words)
        lengths = np.fromiter(counted, dtype=np.int32, count=len(words))
        return cls(lengths, group_of, [folded[i] for i in order], order, by_folded)

    def of_length(self, low: int | None, high: int | None) -> np.ndarray:
        """Entry mask of the words with `low` to `high` letters (None: no bound)."""
        mask = self.lengths >= (low or 0)
        if high is not None:
            mask &= self.lengths <= high
        return mask

    def starting_with(self, prefix: str) -> np.ndarray:
        """Entry mask of the words that start with `prefix` (case-insensitive): two binary searches, no scan."""
        low = prefix.casefold()
        mask = np.zeros(len(self.lengths), dtype=bool)
        if not low:
            return ~mask
        start = bisect.bisect_left(self.folded, low)  # the matches follow one another from here
        if ord(low[-1]) < 0x10FFFF:
            end = bisect.bisect_left(self.folded, low[:-1] + chr(ord(low[-1]) + 1), start)
        else:  # no character sorts after the last one: walk the matches
            end = start
            while end < len(self.folded) and self.folded[end].startswith(low):
                end += 1
        mask[self.folded_order[start:end]] = True
        return mask


INDEX_FORMAT = 3  # 2: the stem sets of the lexical terms; 3: the senses' antonyms and similar words
INDEX_META = "index.json"
INDEX_ARRAYS = "index.safetensors"
COARSE_MIN_GROUPS = 20_000  # a space of fewer groups is scored exactly, every group
COARSE_DIMS = 128
SAMPLES = 16  # blocks of each source file the fingerprint reads (besides its size and the space's words)
SAMPLE_BYTES = 1 << 16


def fingerprint(folder: Path) -> str:
    """A digest of the files a search index derives from: the entry space (space.json whole; the tensors' size
    and `SAMPLES` blocks) and the definitions file (likewise), so that an index built from other files is never
    taken for this folder's, while checking it reads about 2 MB rather than the 300 MB it summarises."""
    digest = hashlib.blake2b(f"search-index-{INDEX_FORMAT}".encode(), digest_size=20)
    digest.update((folder / SPACE_DIR / SPACE_META).read_bytes())
    for path in (folder / SPACE_DIR / SPACE_TENSORS, folder / DEFINITIONS_FILE):
        update_sampled(digest, path, SAMPLES, SAMPLE_BYTES)
    return digest.hexdigest()


@dataclass
class SearchIndex:
    """What a search of a matrix space reads besides the space: its groups, each group's inverse norm (its unit
    vector is its first entry's row times it), the coarse first stage (None: a small space, scored exactly),
    the entries' senses from the folder's own definitions (None: it has none), and the stems of each entry's word
    and of its senses' definitions (`lexical_terms.StemSets`: what the lexical terms of a score compare)."""

    groups: EntryGroups
    inverse_norms: np.ndarray  # float32 [groups]
    coarse: CoarseIndex | None
    senses: EntrySenses | None
    frequencies: np.ndarray | None = None  # each entry's Zipf frequency, as `entry_frequencies` gives them
    frequency_source: str | None = None  # what they derive from (`word_frequency.frequency_source`)
    word_stems: StemSets | None = None  # None: not computed (an index of a space in memory: on first use)
    definition_stems: StemSets | None = None  # of `senses`; None without them

    @classmethod
    def build(
        cls,
        space: SearchSpace,
        senses: EntrySenses | None = None,
        with_frequencies: bool = True,
        frequency_cache: Path | None = None,
        with_stems: bool = True,
    ) -> SearchIndex:
        """The index of `space` (with `senses`, when given, and the words' frequencies in the language recognised,
        `entry_frequencies(words, "auto")`, when asked and wordfreq is installed; read from and written to the
        word-frequency cache in `frequency_cache`, when given; with the stem sets when asked)."""
        groups = EntryGroups.of(space.matrix)
        first = groups.first
        rows = np.asarray(space.matrix[first], dtype=np.float32)
        inverse = (1 / np.maximum(np.linalg.norm(rows, axis=1), 1e-12)).astype(np.float32)
        coarse = None
        if len(first) >= COARSE_MIN_GROUPS and space.dim > COARSE_DIMS:
            coarse = CoarseIndex.of(rows * inverse[:, None], COARSE_DIMS)
        frequencies, source = None, None
        if with_frequencies and (source := frequency_source("auto")) is not None:
            frequencies = entry_frequencies(space.words, "auto", frequency_cache)
        word_stems = StemSets.of(space.words) if with_stems else None
        definition_stems = StemSets.of_senses(senses) if with_stems and senses is not None else None
        frequency_of = source if frequencies is not None else None
        return cls(groups, inverse, coarse, senses, frequencies, frequency_of, word_stems, definition_stems)

    def unit(self, space: SearchSpace) -> np.ndarray:
        """The unit vector of every group [groups, dim] (float32)."""
        return space.unit_rows(self.groups.first, self.inverse_norms)

    def save(self, target: Path, source: str) -> Path:
        """Write the index into the folder `target` (replaced whole, atomically); `source` is the `fingerprint` of
        the files it derives from."""
        from safetensors.numpy import save_file

        from dictembed.io import staged_dir

        arrays = {"order": self.groups.order, "starts": self.groups.starts, "inverse_norms": self.inverse_norms}
        if self.coarse is not None:
            arrays |= {"projection": self.coarse.projection, "coarse": self.coarse.vectors}
        meta: dict = {"format": INDEX_FORMAT, "source": source, "pos_names": None, "frequencies": None}
        if self.frequencies is not None:
            arrays["frequencies"] = self.frequencies
            meta["frequencies"] = self.frequency_source
        if self.senses is not None:
            senses = self.senses
            arrays |= {"sense_starts": senses.starts, "offsets": senses.offsets, "text": senses.text, "pos": senses.pos}
            meta["pos_names"] = senses.pos_names
            for prefix, relation in (("antonym", senses.antonyms), ("similar", senses.similar)):
                if relation is not None:
                    arrays |= {f"{prefix}_starts": relation.starts, f"{prefix}_entries": relation.entries}
        for name, stem_sets in (("word", self.word_stems), ("definition", self.definition_stems)):
            if stem_sets is not None:
                arrays |= {f"{name}_stem_starts": stem_sets.starts, f"{name}_stem_keys": stem_sets.keys}
        with staged_dir(target) as staging:
            save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, staging / INDEX_ARRAYS)
            (staging / INDEX_META).write_text(json.dumps(meta) + "\n", encoding="utf-8")
        return target

    @classmethod
    def open(cls, folder: Path, source: str, entries: int) -> SearchIndex | None:
        """The index saved in `folder`, mapped, if it was built from the files of `fingerprint` `source` for a space
        of `entries` entries; None when there is none, it is another's, or damaged (logged)."""
        meta_path = folder / INDEX_META
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != INDEX_FORMAT or meta.get("source") != source:
                log.debug("%s: the search index was built from other files or by another version; not used", folder)
                return None
            a = mapped_tensors(folder / INDEX_ARRAYS)
            groups = EntryGroups(a["order"], a["starts"])
            if problem := groups_problem(groups, a["inverse_norms"], entries):
                raise ValueError(problem)
            coarse = CoarseIndex(a["projection"], a["coarse"]) if "projection" in a else None
            if coarse is not None and (problem := coarse_problem(coarse, len(groups))):
                raise ValueError(problem)
            senses = None
            if meta.get("pos_names") is not None:
                names = [str(n) for n in meta["pos_names"]]
                antonyms, similar = (
                    EntryRelation(a[f"{prefix}_starts"], a[f"{prefix}_entries"])
                    if f"{prefix}_starts" in a or f"{prefix}_entries" in a  # one without the other: damage
                    else None
                    for prefix in ("antonym", "similar")
                )
                senses = EntrySenses(a["sense_starts"], a["offsets"], a["text"], a["pos"], names, antonyms, similar)
                if len(senses) != entries or (problem := senses.check() or text_problem(senses)):
                    raise ValueError(problem or "its senses do not fit the space")
            frequencies, frequency_of = a.get("frequencies"), meta.get("frequencies")
            if frequencies is not None and (frequencies.shape != (entries,) or not all_finite(frequencies)):
                raise ValueError("its word frequencies do not fit the space or are not all finite")
            if frequencies is not None and frequency_of != frequency_source("auto"):
                frequencies, frequency_of = None, None  # another wordfreq: computed again, from its own cache
            word_stems = StemSets(a["word_stem_starts"], a["word_stem_keys"])
            definition_stems = None
            if senses is not None:
                definition_stems = StemSets(a["definition_stem_starts"], a["definition_stem_keys"])
            for stem_sets in (word_stems, definition_stems):
                if stem_sets is not None and stem_sets.starts.dtype.kind not in "iu":
                    raise ValueError("its stem sets' starts are not whole numbers")
                if stem_sets is not None and (problem := stem_sets.check(entries)):
                    raise ValueError(problem)
            return cls(
                groups, a["inverse_norms"], coarse, senses, frequencies, frequency_of, word_stems, definition_stems
            )
        except (OSError, ValueError, TypeError, KeyError, IndexError, DictEmbedError) as err:
            log.warning("%s: damaged search index (%s); it is rebuilt", folder, err)
            return None


def groups_problem(groups: EntryGroups, inverse_norms: np.ndarray, entries: int) -> str | None:
    """What makes a stored index's groups unfit for a space of `entries` entries (a damaged index), or None: an
    `order` that is not each entry once, `starts` that are not increasing from 0 within it (an empty group or runs
    out of order), inverse norms that are not one positive finite number a group. Vectorised: about a
    millisecond for 150,000 entries."""
    order, starts = groups.order, groups.starts
    if order.ndim != 1 or starts.ndim != 1 or order.dtype.kind not in "iu" or starts.dtype.kind not in "iu":
        return "its groups are not lists of entries"
    if len(order) != entries or len(inverse_norms) != len(starts) or inverse_norms.ndim != 1:
        return "its groups do not fit the space"
    if entries and (order.min() < 0 or order.max() >= entries or np.bincount(order, minlength=entries).max() != 1):
        return "its entry order is not each entry once"
    if entries and (not len(starts) or starts[0] != 0 or starts[-1] >= entries or (np.diff(starts) <= 0).any()):
        return "its groups' starts do not cut the entries into runs"
    if not entries and len(starts):
        return "its groups do not fit the space"
    if not all_finite(inverse_norms) or (len(inverse_norms) and inverse_norms.min() <= 0):
        return "its inverse norms are not all positive finite numbers"
    return None


def coarse_problem(coarse: CoarseIndex, groups: int) -> str | None:
    """What makes a stored coarse index unfit for `groups` groups, or None: shapes that do not fit, or values that
    are not finite (a NaN score would choose the candidates at random)."""
    projection, vectors = coarse.projection, coarse.vectors
    if projection.ndim != 2 or vectors.ndim != 2 or vectors.shape != (groups, projection.shape[1]):
        return "its coarse index does not fit its groups"
    if not (all_finite(projection) and all_finite(vectors)):
        return "its coarse index holds NaN or infinite values"
    return None


def text_problem(senses: EntrySenses) -> str | None:
    """What `EntrySenses.check` leaves unchecked of stored senses, or None: arrays of the wrong kinds (indices that
    are no whole numbers, text that is no bytes), bytes that are not UTF-8, or a definition that starts inside a
    character (its first byte a continuation byte), so that every definition decodes as the dictionary wrote it,
    never with replacement characters. About 5 ms for 13 MB of definitions."""
    text = senses.text
    if any(array.dtype.kind not in "iu" for array in (senses.starts, senses.offsets, senses.pos)):
        return "its senses' indices are not whole numbers"
    if text.dtype != np.uint8 or text.ndim != 1:
        return "its definitions' text is not bytes"
    try:
        str(np.ascontiguousarray(text).data, "utf-8")
    except UnicodeDecodeError as err:
        return f"its definitions' text is not UTF-8 (byte {err.start})"
    inner = senses.offsets[(senses.offsets > 0) & (senses.offsets < len(text))]
    if len(inner) and ((text[inner] & 0xC0) == 0x80).any():
        return "a definition of its text starts inside a character"
    return None


def cached_index_dir(folder: Path, source: str) -> Path:
    """Where dictembed's cache keeps the search index of the model folder `folder` that has none: by its files'
    `fingerprint` `source` and by which files they are (each one's resolved path, device, inode, size and
    modification time), so that the index of one folder never answers for another whose sampled blocks agree, and
    an edit that keeps a file's size still builds the index anew."""
    digest = hashlib.blake2b(source.encode(), digest_size=20)
    for path in (folder / SPACE_DIR / SPACE_META, folder / SPACE_DIR / SPACE_TENSORS, folder / DEFINITIONS_FILE):
        try:
            stat = path.stat()
        except OSError:
            digest.update(f"{path.name}\0absent\n".encode())
            continue
        identity = (path.resolve(), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        digest.update(("\0".join(map(str, identity)) + "\n").encode())
    return cache_root() / "search_index" / digest.hexdigest()


def has_current_index(folder: Path) -> bool:
    """Whether the model folder `folder` holds a search index that opens for its files as they are."""
    stored = folder / SEARCH_DIR
    if not (stored / INDEX_META).is_file():
        return False
    return SearchIndex.open(stored, fingerprint(folder), len(SearchSpace.open(folder))) is not None


def write_search_index(folder: Path, dictionary: Dictionary | None) -> Path | None:
    """Store the search index of the matrix space saved in `folder` in its `search_index/`, with the entries' senses
    in `dictionary` (the folder's own definitions); None for a space without a matrix (an MLM head)."""
    if SearchSpace.saved_type(folder) not in MATRIX_SPACES:
        return None
    space = SearchSpace.open(folder)
    senses = EntrySenses.of(space.words, dictionary) if dictionary is not None else None
    # no word-frequency cache: the index keeps them, and a save never writes outside its folder
    return SearchIndex.build(space, senses).save(folder / SEARCH_DIR, fingerprint(folder))


def folder_search_index(folder: ModelFolder, space: SearchSpace, source: ModelDictionary) -> SearchIndex:
    """The search index of a folder's matrix space: the folder's own (`search_index/`), else the one cached for
    it, else built now (the entries' senses from the folder's own definitions, when it is the dictionary used)
    and cached, under a lock so that processes loading the same folder build it once (a cache that cannot be
    written is only logged)."""
    own = Path(source.spec) == folder.definitions
    source_print = fingerprint(folder.path)
    cached = cached_index_dir(folder.path, source_print)

    def stored(where: Path) -> SearchIndex | None:
        index = SearchIndex.open(where, source_print, len(space))
        if index is not None and (index.senses is not None or not own):
            if own:
                return index
            return replace(index, senses=None, definition_stems=None)  # another dictionary's come with it
        return None

    for where in (folder.file(SEARCH_DIR), cached):
        if (index := stored(where)) is not None:
            return index
    with contextlib.ExitStack() as stack:
        writable = True
        try:
            from filelock import FileLock

            cached.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(FileLock(f"{cached}.lock", timeout=600))
            if (index := stored(cached)) is not None:  # another process built it meanwhile
                return index
        except OSError as err:  # a cache that cannot be written (or locked): build without it
            writable = False
            log.info("the search index of %s is not cached (%s); it is built again at the next load", folder, err)
        senses = None
        if own:
            try:
                senses = EntrySenses.of(space.words, source.load())
            except Exception as err:  # the search then says once that results come without definitions
                log.debug("cannot index the definitions of %s: %s", folder.path, err)
        caching = writable and (senses is not None or not own)
        cached_note = f" (once: it is cached in {cached})" if caching else ""
        log.info("%s: building the search index of its entry space%s", folder.path, cached_note)
        index = SearchIndex.build(space, senses, frequency_cache=cache_root() if writable else None)
        if caching:
            try:
                index.save(cached, source_print)
            except OSError as err:
                log.info("the search index of %s is not cached (%s); it is built again at the next load", folder, err)
    return index
