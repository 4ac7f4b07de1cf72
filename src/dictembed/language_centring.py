"""Per-language centring for a cross-lingual reverse dictionary.

A multilingual encoder puts a direction into every vector that says which language its text is in, so that a
description finds the words of its own language first. When a description's language differs from that of the
dictionary searched, centring takes that direction out: the dictionary's mean entry vector is subtracted from its
entry vectors (and definition vectors), and the mean entry vector of a dictionary in the description's language
(one served with the same encoder) from the description's vector (docs/results.md, "Cross-lingual reverse
dictionary"). The language of a description is told by its script (`query_language`).

A centred search is a plain `ReverseDictionary` over the centred space (`CentredSpace`), whose encoder subtracts the
query's shift (`ShiftedEncoder`): ranking, filters, grouping and priors are the reverse dictionary's own.
"""

from __future__ import annotations

import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, cast

import numpy as np

from dictembed.cjk import is_han, is_kana
from dictembed.query_encoder import QueryEncoder, as_rows
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import SearchIndex
from dictembed.search_space import SearchSpace, l2_normalize
from dictembed.word_frequency import is_cyrillic

# The languages a description's script tells (`char_script`'s names; Han with kana among it is Japanese), and those
# written in another script than Latin letters.
SCRIPT_LANGUAGES = {"han": "zh", "cyrillic": "ru"}
NON_LATIN = ("zh", "ja", "ru")
UNDETERMINED = "und"  # the language of a dictionary none can be told for (ISO 639-2)
ROWS_AT_ONCE = 65536  # rows centred at a time: a float32 copy of every definition vector at once is large


def char_script(char: str) -> str | None:
    """The script of a letter: han, kana, cyrillic or latin; None for other characters."""
    if is_han(char):
        return "han"
    if is_kana(char):
        return "kana"
    if is_cyrillic(char):
        return "cyrillic"
    if char.isalpha() and (char.isascii() or unicodedata.name(char, "").startswith("LATIN")):
        return "latin"
    return None


def query_language(text: str, latin: str = "en") -> str | None:
    """The language of a description by the script of most of its letters: Han characters `zh` (`ja` when kana are
    among them), Cyrillic `ru`, Latin letters `latin`; None when it has no letters of these scripts."""
    counts = Counter(script for char in text if (script := char_script(char)) is not None)
    if not counts:
        return None
    kana = counts.pop("kana", 0)
    if kana:
        counts["han"] += kana
    script = max(counts, key=counts.__getitem__)  # ties: the script met first
    if script == "han" and kana:
        return "ja"
    return SCRIPT_LANGUAGES.get(script, latin)


def writes_latin(language: str) -> bool:
    """Whether a language (of a dictionary's headwords) is written in Latin letters: any but those of `NON_LATIN`
    and the undetermined one."""
    return language not in NON_LATIN and language != UNDETERMINED


def mean_entry(space: SearchSpace) -> np.ndarray:
    """The mean entry vector of a matrix space (float32; accumulated in float64)."""
    return np.asarray(space.matrix).mean(axis=0, dtype=np.float64).astype(np.float32)


def shifted(rows: np.ndarray, shift: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`rows - shift` as a new array of `dtype`, computed `ROWS_AT_ONCE` rows at a time."""
    out: np.ndarray = np.empty(rows.shape, dtype=dtype)
    for start in range(0, len(rows), ROWS_AT_ONCE):
        out[start : start + ROWS_AT_ONCE] = np.asarray(rows[start : start + ROWS_AT_ONCE], dtype=np.float32) - shift
    return out


def centred_space(space: SearchSpace, mean: np.ndarray) -> SearchSpace:
    """`space` with `mean` subtracted from its entry vectors and its definition vectors, in memory, each in its
    saved precision (float16 or float32); without its headword vectors, which are in the headwords' language, and
    without a second dictionary's definitions (a cross-lingual search is reranked by neither)."""
    definitions = None if space.definitions is None else shifted(space.definitions, mean, space.definitions.dtype)
    matrix = shifted(space.matrix, mean, space.matrix.dtype)
    return replace(space, matrix=matrix, definitions=definitions, headwords=None, second=None)


class ShiftedEncoder:
    """A query encoder whose vectors are another's minus `shift`: the query side of centring (`QueryEncoder`)."""

    def __init__(self, encoder: QueryEncoder, shift: np.ndarray) -> None:
        self.encoder, self.shift = encoder, shift
        self.max_length = encoder.max_length

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def device(self) -> Any:
        return self.encoder.device

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        prompt: str | None = None,
        show_progress: bool | None = None,
        chunk: int | None = None,
    ) -> Iterator[np.ndarray]:
        """The encoder's vectors (`QueryEncoder.embed`), each minus `shift`."""
        for vectors in self.encoder.embed(texts, batch_size, prompt=prompt, show_progress=show_progress, chunk=chunk):
            yield as_rows(vectors) - self.shift

    def encode(self, sentences: list[str], batch_size: int = 32, *, normalize_embeddings: bool = False) -> np.ndarray:
        """The shifted vectors of `sentences` in one array (scaled to unit length if asked)."""
        rows = np.concatenate([*self.embed(sentences, batch_size, show_progress=False), np.zeros((0, self.dim))])
        rows = rows.astype(np.float32)
        return l2_normalize(rows) if normalize_embeddings else rows

    def count_tokens(self, sentences: Sequence[str]) -> list[int]:
        return self.encoder.count_tokens(sentences)

    def unknown_only(self, sentences: Sequence[str]) -> list[bool]:
        return self.encoder.unknown_only(sentences)


class CentredSpace:
    """The centred searches of one reverse dictionary over a matrix space: its entries minus their mean entry
    vector (`mean`), built on first use and shared by every query language. `search(source)` is the reverse
    dictionary over them whose queries are encoded minus the `mean` of `source` (the centring of a dictionary in the
    query's language, with the same encoder; None: unshifted), one per source, kept."""

    def __init__(self, rd: ReverseDictionary) -> None:
        self.rd = rd
        self._lock = threading.Lock()
        self._parts: tuple[SearchSpace, SearchIndex] | None = None
        self._searches: dict[CentredSpace | None, ReverseDictionary] = {}

    @cached_property
    def mean(self) -> np.ndarray:
        """The mean entry vector (`mean_entry`), computed on first use."""
        return mean_entry(cast(SearchSpace, self.rd.space))

    def _centred(self) -> tuple[SearchSpace, SearchIndex]:
        """The centred space and its index, with the reverse dictionary's senses and its words' frequencies."""
        if self._parts is None:
            space = centred_space(cast(SearchSpace, self.rd.space), self.mean)
            rd = self.rd
            index = SearchIndex.build(space, rd.senses, with_frequencies=False, with_stems=False)
            if rd.reranks_by_words:  # the same words and senses: the same stems
                index = replace(index, word_stems=rd.word_stems, definition_stems=rd.definition_stems)
            self._parts = space, replace(index, frequencies=rd.prior.frequencies)
        return self._parts

    def search(self, source: CentredSpace | None) -> ReverseDictionary:
        """The reverse dictionary over the centred space for queries minus `source.mean` (prepared, kept)."""
        shift = None if source is None else source.mean  # before the lock: `source` is another's
        with self._lock:
            if source not in self._searches:
                space, index = self._centred()
                rd = self.rd
                encoder = rd.encoder if shift is None else cast(QueryEncoder, ShiftedEncoder(rd.encoder, shift))
                language = "auto" if index.frequencies is not None else None  # "auto": the index's frequencies
                dictionary = rd.source or rd.dictionary
                centred = ReverseDictionary(encoder, space, dictionary, rd.name, rd.ranking, language, index)
                self._searches[source] = centred.prepare()
            return self._searches[source]
