"""JMdict, the Japanese-English dictionary of the EDRDG (CC BY-SA 3.0), from the SQLite database of `jamdict-data`.

The database is read read-only with the standard library, through the tables and columns jamdict writes:
`Kanji(ID, idseq, text)`, `Kana(ID, idseq, text)`, `Sense(ID, idseq)`, `SenseGloss(sid, lang, text)` and
`pos(sid, text)`. An xz-compressed database (`jamdict.db.xz`, as the package's source archive holds it) is
decompressed once into dictembed's cache folder (`paths.cache_root()`, as `jmdict-<key>.sqlite`, keyed by the
compressed file's path, size and time), or into a temporary file when the cache cannot be written.

An entry's headword is its first kanji form, else its first kana form, and its first kana form when one of its senses
is marked "word usually written using kana alone" (`misc`: する, not 為る; a database without the `misc` table has no
such marks); entries sharing a headword are one entry.
A sense's antonyms (`antonym(sid, text)`, JMdict's `ant`: a form, perhaps with its reading and a sense number after
"・") are the headwords of the entries holding that form (and that reading); one naming no entry, or several whose
headwords differ, is passed over and counted. A database without the table has none.
Each sense is one definition: its glosses in `lang` (English) joined with "; ". Its part of speech is n, v, a or r
when every label that maps to one of them (`POS_RULES`) maps to the same letter, labels that only say the word takes
suru or no counting when no other label maps (`SECONDARY`); else None (a noun that is also an adjectival noun, an
expression, a particle...).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import lzma
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError
from dictembed.extras import package_file
from dictembed.io import atomic_file
from dictembed.paths import cache_root
from dictembed.text_files import check_readable

logger = logging.getLogger(__name__)

PACKAGE = "jamdict_data"
DATABASE_NAMES = ("jamdict.db", "jamdict.db.xz")  # in the package folder: pip builds the first from the second
# JMdict's part-of-speech labels (as jamdict writes them, e.g. "Godan verb with 'ru' ending") -> letter; the first
# matching rule decides. Labels that match none (expressions, particles, counters, suffixes...) give no letter.
POS_RULES = (
    (re.compile(r"^noun or verb acting prenominally"), "a"),
    (re.compile(r"^(?:nouns?\b|adverbial noun)"), "n"),  # also "noun or participle which takes the aux. verb suru"
    (re.compile(r"\bverb\b"), "v"),
    (re.compile(r"adjective|adjectival"), "a"),
    (re.compile(r"^adverb\b"), "r"),
)
# Labels saying what else a word combines with (a noun or adverb that takes suru, a noun that takes no): they give
# their letter only to a sense without another letter, so "adverb" + "takes suru" is r, "noun" + "takes no" is n.
SECONDARY = re.compile(r"^noun or participle which takes the aux\. verb suru|^nouns which may take the genitive")
FORMS = "SELECT idseq, text FROM {table} ORDER BY idseq, ID"
DEFAULT_GLOSS_LANG = "eng"  # JMdict's DTD: a gloss without xml:lang is English (a store may keep it empty)
GLOSSES = (
    "SELECT s.idseq, s.ID, g.lang, g.text FROM Sense AS s LEFT JOIN SenseGloss AS g ON g.sid = s.ID "
    "ORDER BY s.idseq, s.ID, g.rowid"
)
LABELS = "SELECT sid, text FROM pos ORDER BY rowid"
ANTONYMS = "SELECT sid, text FROM antonym ORDER BY rowid"
ALL_FORMS = "SELECT idseq, text FROM Kanji UNION ALL SELECT idseq, text FROM Kana"
TABLE = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
USUALLY_KANA = (
    "SELECT DISTINCT s.idseq FROM misc AS m JOIN Sense AS s ON s.ID = m.sid "
    "WHERE m.text = 'word usually written using kana alone'"
)


def jmdict_data_file() -> Path:
    """The JMdict database of the installed `jamdict-data` package (found without importing it)."""
    return package_file(PACKAGE, DATABASE_NAMES, "ja", "JMdict", "jamdict-data")


def jmdict_pos(labels: list[str]) -> str | None:
    """The one letter (n, v, a, r) that a sense's part-of-speech labels map to (`POS_RULES`; `SECONDARY` labels
    only when the others give none), or None: no letter, or several."""
    primary: set[str] = set()
    secondary: set[str] = set()
    for label in labels:
        letter = next((letter for pattern, letter in POS_RULES if pattern.search(label)), None)
        if letter is not None:
            (secondary if SECONDARY.search(label) else primary).add(letter)
    letters = primary or secondary
    return letters.pop() if len(letters) == 1 else None


def cached_copy_name(path: Path) -> str:
    """The cache file name of the decompressed `path`: keyed by its resolved path, size and modification time."""
    stat = path.stat()
    key = hashlib.sha1(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    return f"jmdict-{key}.sqlite"


def _decompress(path: Path, target: Path) -> None:
    """Write the xz-compressed `path` decompressed to `target` (atomically); a damaged file is a DataFormatError."""
    try:
        with lzma.open(path) as source, atomic_file(target) as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
    except (lzma.LZMAError, EOFError) as error:
        raise DataFormatError(path, f"not a readable xz file ({error})") from None


@contextlib.contextmanager
def sqlite_file(path: Path) -> Iterator[Path]:
    """The plain SQLite file of `path`: itself, or for `.xz` its decompressed copy in the cache (made once), else
    (the cache cannot be written) a temporary copy removed afterwards."""
    check_readable(path)
    if path.suffix != ".xz":
        yield path
        return
    target = cache_root() / cached_copy_name(path)
    if target.is_file():
        yield target
        return
    logger.info("decompressing %s into %s (once)", path, target)
    try:
        _decompress(path, target)
    except OSError as error:
        logger.warning("cannot write %s (%s); decompressing %s into a temporary file", target, error, path)
    else:
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="dictembed-jmdict-") as folder:
        _decompress(path, Path(folder) / "jmdict.sqlite")
        yield Path(folder) / "jmdict.sqlite"


def _has_table(connection: sqlite3.Connection, name: str) -> bool:
    """Whether the database has a table `name`."""
    return connection.execute(TABLE, (name,)).fetchone() is not None


def _usually_kana(connection: sqlite3.Connection) -> set[int]:
    """The idseqs of entries with a sense usually written in kana alone ({} without a `misc` table)."""
    return {idseq for (idseq,) in connection.execute(USUALLY_KANA)} if _has_table(connection, "misc") else set()


def _antonyms(
    builder: DictionaryBuilder, connection: sqlite3.Connection, headword_of: dict[int, str]
) -> dict[int, list[str]]:
    """Sense ID -> the headwords its `antonym` rows name (see the module); those naming no entry, or entries of
    several headwords, are counted and passed over. Empty without an `antonym` table."""
    if not _has_table(connection, "antonym"):
        return {}
    holders: dict[str, set[int]] = {}
    for idseq, text in connection.execute(ALL_FORMS):
        holders.setdefault(text, set()).add(idseq)
    found: dict[int, list[str]] = {}
    for sid, text in connection.execute(ANTONYMS):
        text = (text or "").strip()
        parts = [text] if text in holders else [part.strip() for part in text.split("・")]  # a form may hold "・"
        entries = set(holders.get(parts[0], ()))
        if len(parts) > 1 and not parts[1].isdigit():  # its reading
            entries &= holders.get(parts[1], set())
        headwords = {headword_of[i] for i in entries if i in headword_of}
        if len(headwords) == 1:
            found.setdefault(sid, []).append(headwords.pop())
        else:
            builder.skip(f"antonyms naming {'entries of several headwords' if headwords else 'no entry'}")
    return found


def _first_forms(connection: sqlite3.Connection, table: str) -> dict[int, str]:
    """idseq -> the entry's first form in `table` (Kanji or Kana), by ID."""
    forms: dict[int, str] = {}
    for idseq, text in connection.execute(FORMS.format(table=table)):
        forms.setdefault(idseq, text)
    return forms


@without_gc
def load_jmdict(path: str | Path | None = None, lang: str = "eng") -> Dictionary:
    """JMdict (`path`: the jamdict SQLite file, plain or `.xz`; default the installed `jamdict-data` package's) as
    a dictionary named "jmdict": one sense per JMdict sense, its `lang` glosses joined with "; " (see the module).

    Skipped and counted: senses without a gloss in `lang`, senses of entries without any form, entries without a
    sense; glosses in other languages are counted too. A file that is not such a database is a DataFormatError.
    """
    path = Path(path) if path else jmdict_data_file()
    builder = DictionaryBuilder("jmdict")
    with sqlite_file(path) as database:
        try:
            with contextlib.closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as db:
                kanji, kana = _first_forms(db, "Kanji"), _first_forms(db, "Kana")
                for idseq in _usually_kana(db) & kana.keys():
                    kanji.pop(idseq, None)
                labels: dict[int, list[str]] = {}
                for sid, label in db.execute(LABELS):
                    labels.setdefault(sid, []).append(label)
                headword_of = {i: kanji.get(i) or kana.get(i) or "" for i in kanji.keys() | kana.keys()}
                antonyms = _antonyms(builder, db, {i: word for i, word in headword_of.items() if word})
                with_senses = _add_senses(builder, db.execute(GLOSSES), kanji, kana, labels, lang, antonyms)
        except sqlite3.DatabaseError as error:
            raise DataFormatError(path, f"not a jamdict JMdict database ({error})") from None
    for _ in (kanji.keys() | kana.keys()) - with_senses:
        builder.skip("entries without a sense")
    return builder.build(empty="no senses")


def _add_senses(
    builder: DictionaryBuilder,
    rows: Iterator[tuple[int, int, str | None, str | None]],
    kanji: dict[int, str],
    kana: dict[int, str],
    labels: dict[int, list[str]],
    lang: str,
    antonyms: dict[int, list[str]],
) -> set[int]:
    """Add one definition per sense from (idseq, sense ID, lang, gloss) rows grouped by sense, with its `antonyms`;
    returns the idseqs seen. A sense without part-of-speech labels has those of the entry's sense before it (JMdict's
    DTD: an earlier sense's part of speech applies to the later ones until another is given)."""
    seen: set[int] = set()
    inherited: tuple[int, list[str]] = (-1, [])  # the last labelled sense's entry and labels

    def add(idseq: int, sid: int, glosses: list[str]) -> None:
        nonlocal inherited
        seen.add(idseq)
        own = labels.get(sid, [])
        if own or inherited[0] != idseq:
            inherited = (idseq, own)
        headword = kanji.get(idseq) or kana.get(idseq)
        if not headword:
            builder.skip_row("senses of entries without a kanji or kana form")
        elif not glosses:
            builder.skip_row(f"senses without a gloss in {lang}")
        else:
            builder.add(headword, "; ".join(glosses), pos=jmdict_pos(inherited[1]), antonyms=antonyms.get(sid, ()))

    current: tuple[int, int] | None = None
    glosses: list[str] = []
    for idseq, sid, gloss_lang, text in rows:
        if (idseq, sid) != current:
            if current is not None:
                add(*current, glosses)
            current, glosses = (idseq, sid), []
        if text is None:
            continue
        if (gloss_lang or DEFAULT_GLOSS_LANG) != lang:
            builder.skip(f"glosses in other languages than {lang}")
        elif not text.strip():
            builder.skip("empty glosses")
        else:
            glosses.append(text)
    if current is not None:
        add(*current, glosses)
    return seen
