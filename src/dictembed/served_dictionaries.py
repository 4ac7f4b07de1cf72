"""The dictionaries `dictembed serve` serves: one model folder each (`--model F1 --model F2`), each labelled with its
dictionary's name and language, the one a search targets (`lang=`, `dictionary=`), and the reverse dictionary a
description searches in it.

One dictionary may be served by several folders whose encoders read different languages (the base model's,
`card_metadata.base_languages`): CC-CEDICT indexed by an English-only model for English descriptions and by a
multilingual one for Chinese ones. A description then goes to the folder whose encoder reads its language, a
specialist (the fewest languages) before a multilingual one (`ServedDictionaries.reader`).

A folder's language is the catalogue's language of its dictionary name (`dictionary.catalog`), else the language
its headwords are in (`word_frequency.guess_language`), else "und"; its word-frequency prior is in that language.
Folders whose encoders are identical (the same weights and settings) share one loaded encoder. With several
dictionaries served, a description in another language than the target dictionary's is searched centred per
language (`language_centring`; `centring=False` turns it off); with one (by one folder or several), searches
are the folder's own.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dictembed.card_metadata import base_languages
from dictembed.dictionary.catalog import language_of
from dictembed.errors import DictEmbedError
from dictembed.folder_search import folder_ranking, saved_space
from dictembed.language_centring import UNDETERMINED, CentredSpace, query_language, writes_latin
from dictembed.model_folder import (
    DEFAULT_DICTIONARY,
    SPACE_DIR,
    SPACE_META,
    WEIGHTS_FILE,
    ModelFolder,
    identifies_encoder,
)
from dictembed.paths import public_name
from dictembed.query_encoder import QueryEncoder
from dictembed.record import file_sha256
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import RankingChoice
from dictembed.search_space import SearchSpace, mapped_tensors
from dictembed.serve_scheduling import ModelThread, QueryBatcher
from dictembed.word_frequency import LANGUAGES, guess_language

if TYPE_CHECKING:
    import torch


PROMPTS_FILE = "config_sentence_transformers.json"  # the encoder's prompts (e5's "query: ")


@dataclass(eq=False)
class ServedDictionary:
    """One served reverse dictionary, its dictionary's name and language, the languages its encoder reads (None:
    any), and its centred searches (None: a space without an entry matrix, never centred)."""

    rd: ReverseDictionary
    language: str
    name: str
    reads: frozenset[str] | None = None
    centring: CentredSpace | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if isinstance(self.rd.space, SearchSpace):
            self.centring = CentredSpace(self.rd)

    def row(self) -> dict[str, Any]:
        """What `/health` lists of it."""
        rd = self.rd
        return {"dictionary": self.name, "language": self.language, "entries": len(rd.space), "model": rd.name}

    def reads_language(self, language: str | None) -> bool:
        """Whether its encoder reads `language` (None: a description in no known script, which only one reading any
        language reads)."""
        return self.reads is None or language in self.reads

    @property
    def breadth(self) -> float:
        """How many languages its encoder reads (any: infinitely many): the fewest, the more specialised."""
        return float("inf") if self.reads is None else len(self.reads)

    def encoder_row(self) -> dict[str, Any]:
        """What `/health` lists of it as one of the folders of its dictionary: its model and what it reads."""
        return {"model": self.rd.name, "reads": None if self.reads is None else sorted(self.reads)}


def named_language(name: str) -> str | None:
    """The catalogue's language of a dictionary name (`catalog.language_of`), or of a comma list of names that share
    one; else None."""
    languages = {language_of(part.strip().lower()) for part in name.split(",")}
    return languages.pop() if len(languages) == 1 and "auto" not in languages else None


def languages_of(name: str, words: list[str]) -> tuple[str, str | None]:
    """The language of a dictionary (`named_language`, else `guess_language` of its headwords, else "und") and that
    of its word-frequency prior: "auto" where its headwords tell that very language (a stored search index keeps
    their frequencies), else the language if the prior has frequencies in it (`LANGUAGES`), else None (no prior)."""
    guessed = guess_language(words)
    language = named_language(name) or guessed or UNDETERMINED
    if guessed == language:
        return language, "auto"
    return language, language if language in LANGUAGES else None


def dictionary_name(folder: ModelFolder, dictionary: str | None = None) -> str:
    """The public name of the dictionary a folder serves: the user's `dictionary`, else the one its record names."""
    record = folder.record
    named = dictionary or record.data or (record.config or {}).get("dictionary") or DEFAULT_DICTIONARY
    return public_name(str(named))


def saved_words(folder: ModelFolder) -> list[str]:
    """The entries of a folder's saved space (its space.json), [] when they cannot be read (loading says why)."""
    try:
        words = json.loads(folder.file(SPACE_DIR, SPACE_META).read_text(encoding="utf-8")).get("words")
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    return [w for w in words if isinstance(w, str)] if isinstance(words, list) else []


def weights_digest(path: Path) -> str:
    """The SHA-256 of a safetensors weights file's tensors by name, those that identify the encoder alone
    (`model_folder.identifies_encoder`, as `Encoder.hash_weights`): two saves of one model differ in the pooler a
    checkpoint without one draws afresh; of the file's bytes when its tensors cannot be mapped."""
    try:
        tensors = mapped_tensors(path)
    except DictEmbedError:
        return str(file_sha256(path))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        if identifies_encoder(name):
            digest.update(name.encode() + b"\0")
            digest.update(np.ascontiguousarray(tensors[name]).tobytes())
    return digest.hexdigest()


def encoder_key(folder: ModelFolder) -> str | None:
    """What identifies a folder's encoder: its weights (`weights_digest`) with its encoder settings and prompts;
    None for a folder without a weights file, or an ONNX export (never shared)."""
    weights = folder.file(WEIGHTS_FILE)
    if folder.is_exported or not weights.is_file():
        return None
    prompts = folder.file(PROMPTS_FILE).read_bytes() if folder.has(PROMPTS_FILE) else b""
    digest = hashlib.sha256(weights_digest(weights).encode())
    digest.update(json.dumps(folder.record.encoder, sort_keys=True).encode() + prompts)
    return digest.hexdigest()


def folder_reverse_dictionary(
    folder: ModelFolder,
    encoder: QueryEncoder | None,
    device: str | torch.device | None,
    precision: str | None,
    ranking: RankingChoice,
    language: str | None,
    dictionary: str | None = None,
) -> ReverseDictionary:
    """`ReverseDictionary.load` of a folder, or with `encoder`, already loaded from another folder, its space;
    `ranking` as `load` takes it (set over the folder's own)."""
    if encoder is None:
        return ReverseDictionary.load(folder, device, precision, ranking, language, dictionary)
    chosen = folder_ranking(folder, ranking)
    source = folder.dictionary(dictionary)
    space, index = saved_space(folder, source)
    return ReverseDictionary(encoder, space, source, folder.name, chosen, language, index)


def open_served(
    paths: Sequence[str | Path],
    device: str | torch.device | None = None,
    precision: str | None = "auto",
    ranking: RankingChoice = None,
    dictionary: str | None = None,
) -> list[ServedDictionary]:
    """The model folders of `paths`, labelled, each loaded as `ReverseDictionary.load` does (`dictionary`: the
    definitions of the only folder, in place of its own), those with identical encoders sharing one."""
    if dictionary is not None and len(paths) > 1:
        raise DictEmbedError("--dictionary replaces the definitions of one model folder; serve several without it")
    encoders: dict[str, QueryEncoder] = {}
    served = []
    for path in paths:
        folder = ModelFolder.open(path)
        name = dictionary_name(folder, dictionary)
        language, prior = languages_of(name, saved_words(folder))
        key = encoder_key(folder)
        shared = encoders.get(key) if key else None
        rd = folder_reverse_dictionary(folder, shared, device, precision, ranking, prior, dictionary)
        if key:
            encoders.setdefault(key, rd.encoder)
        served.append(ServedDictionary(rd, language, name, base_languages(folder.record.base_model)))
    return check_names(served)


def served_of(rd: ReverseDictionary) -> ServedDictionary:
    """A reverse dictionary already loaded, labelled by its dictionary's name (else the model's) and language, and
    the languages its encoder's base model reads."""
    name = rd.public_dictionary or rd.name
    base = getattr(rd.encoder, "base_model", None)
    reads = base_languages(base if isinstance(base, str) else None)
    return ServedDictionary(rd, languages_of(name, list(rd.space.words))[0], name, reads)


def reads_text(reads: frozenset[str] | None) -> str:
    """The languages an encoder reads, for a message: `en`, `en, zh` or `any language`."""
    return "any language" if reads is None else ", ".join(sorted(reads))


def check_names(served: list[ServedDictionary]) -> list[ServedDictionary]:
    """`served`, each dictionary name once (`dictionary=` names one), or by several folders whose encoders read
    different languages (one English-only, one multilingual): `ServedDictionaries.reader` picks one per query."""
    kinds = [(s.name, s.reads) for s in served]
    if twice := next((kind for kind in kinds if kinds.count(kind) > 1), None):
        raise DictEmbedError(
            f"the dictionary {twice[0]!r} is served by several model folders whose encoders read the same languages "
            f"({reads_text(twice[1])}); serve each once, or with encoders of different languages"
        )
    return served


class ServedDictionaries:
    """The served folders (the first is the default target), the dictionary a search targets, the folder of it whose
    encoder reads the query, and the batcher of the reverse dictionary that searches a description in it
    (`serve_scheduling.QueryBatcher`, one each)."""

    def __init__(self, served: list[ServedDictionary], model: ModelThread, centring: bool = True) -> None:
        if not served:
            raise DictEmbedError("no dictionary to serve")
        self.served, self.model = check_names(served), model
        self.default = served[0]
        self.centring = centring and self.several
        self.latin = next((s.language for s in served if writes_latin(s.language)), "en")
        self._lock = threading.Lock()
        self._batchers: dict[int, QueryBatcher] = {}

    @property
    def several(self) -> bool:
        """Whether several dictionaries are served (not one by several folders)."""
        return len({s.name for s in self.served}) > 1

    def folders_of(self, target: ServedDictionary) -> list[ServedDictionary]:
        """The served folders of `target`'s dictionary, in the order served."""
        return [s for s in self.served if s.name == target.name]

    def rows(self) -> list[dict[str, Any]]:
        """What `/health` lists: each dictionary once (its first folder's row), with `encoders` (each folder's model
        and the languages it reads, null: any) when several folders serve it."""
        firsts: dict[str, ServedDictionary] = {}
        for served in self.served:
            firsts.setdefault(served.name, served)
        rows = []
        for first in firsts.values():
            folders = self.folders_of(first)
            extra = {"encoders": [s.encoder_row() for s in folders]} if len(folders) > 1 else {}
            rows.append(first.row() | extra)
        return rows

    def listing(self) -> str:
        """The served dictionaries as `en (wordnet), zh (cc-cedict)`, each once."""
        return ", ".join(dict.fromkeys(f"{s.language} ({s.name})" for s in self.served))

    def choose(self, lang: str | None = None, dictionary: str | None = None) -> ServedDictionary:
        """The dictionary a search targets: the one named `dictionary`, else the first in language `lang`, else the
        default; one not served (or a `dictionary` not in `lang`) is a one-line error listing the served ones."""
        if dictionary is not None:
            found = next((s for s in self.served if s.name == dictionary), None)
            if found is None:
                raise DictEmbedError(f"dictionary: {dictionary[:100]!r} is not served; served: {self.listing()}")
            if lang is not None and found.language != lang:
                raise DictEmbedError(f"lang: the dictionary {dictionary!r} is in {found.language}, not {lang[:20]!r}")
            return found
        if lang is None:
            return self.default
        found = next((s for s in self.served if s.language == lang), None)
        if found is None:
            raise DictEmbedError(f"lang: no dictionary in {lang[:20]!r} is served; served: {self.listing()}")
        return found

    def reader(self, target: ServedDictionary, query: str) -> ServedDictionary:
        """The folder of `target`'s dictionary that answers `query`: of those whose encoder reads the query's language
        (`query_language`), the one reading the fewest (an English-only one for English, a multilingual one for a
        language no specialist reads), the first served among equals; with none, the first served."""
        folders = self.folders_of(target)
        if len(folders) == 1:
            return target
        language = query_language(query, self.latin)
        reading = [s for s in folders if s.reads_language(language)]
        return min(reading, key=lambda s: s.breadth) if reading else folders[0]

    def search_of(self, target: ServedDictionary, query: str) -> ReverseDictionary:
        """The reverse dictionary that searches the description `query` in `target`, in the folder that reads it
        (`reader`): its own, or when centring is on and the query's language (`query_language`) is not the
        target's, the centred one, whose queries are shifted by the mean of a served dictionary in their language
        with the same encoder (if one is served)."""
        target = self.reader(target, query)
        language = query_language(query, self.latin)
        centring = target.centring
        if not self.centring or centring is None or language is None or target.language in (language, UNDETERMINED):
            return target.rd
        same = [s for s in self.served if s.language == language and s.rd.encoder is target.rd.encoder]
        source = next((s for s in same if s.centring is not None), None)
        return centring.search(source.centring if source is not None else None)

    def batcher_of(self, rd: ReverseDictionary) -> QueryBatcher:
        """The batcher of the searches of `rd` (made on first use)."""
        with self._lock:
            if id(rd) not in self._batchers:
                self._batchers[id(rd)] = QueryBatcher(rd, self.model)
            return self._batchers[id(rd)]
