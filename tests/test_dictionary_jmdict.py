"""JMdict from a jamdict SQLite database: headwords, senses, parts of speech, skips, xz and the cache, errors."""

from __future__ import annotations

import logging
import lzma
import re
import sqlite3

import pytest

from dictembed.dictionary.sources import jmdict
from dictembed.dictionary.sources.jmdict import jmdict_pos, load_jmdict
from dictembed.errors import DataFormatError
from dictembed.extras import MissingExtraError

NOUN = "noun (common) (futsuumeishi)"
NA_ADJECTIVE = "adjectival nouns or quasi-adjectives (keiyodoshi)"
SURU = "noun or participle which takes the aux. verb suru"
# idseq -> (kanji forms, kana forms, senses: [(glosses as (lang, text), pos labels)])
ENTRIES = {
    1000: (["猫"], ["ねこ"], [([("eng", "cat")], [NOUN]), ([("eng", "shamisen")], [NOUN])]),
    1001: ([], ["ゆっくり"], [([("eng", "slowly"), ("eng", "leisurely")], ["adverb (fukushi)", SURU])]),
    1002: (["綺麗", "奇麗"], ["きれい"], [([("eng", "pretty"), ("eng", "lovely")], [NA_ADJECTIVE, NOUN])]),
    1003: (  # the second sense has no labels of its own: the first's apply (JMdict's DTD)
        ["食べる"],
        ["たべる"],
        [([("eng", "to eat")], ["Ichidan verb", "transitive verb"]), ([("eng", "to live on")], [])],
    ),
    1004: (["猫"], ["ねこ"], [([("eng", "cat")], [NOUN])]),  # a homograph repeating a definition
    1005: (["無訳"], ["むやく"], [([("ger", "unübersetzt")], [NOUN])]),  # no English gloss
    1006: ([], ["なし"], []),  # no sense
    1007: ([], [], [([("eng", "orphan")], [NOUN])]),  # no form
    1008: (
        ["表現"],
        ["ひょうげん"],
        [([("eng", " "), ("eng", "expression")], ["expressions (phrases, clauses, etc.)"])],
    ),
    1009: (["水"], ["みず"], [([("", "water")], [])]),  # no labels: nothing inherited; no language: English
}


def make_database(path):
    """A tiny jamdict database: the tables and columns the loader reads, in jamdict's layout."""
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE Entry (idseq INTEGER NOT NULL UNIQUE);"
        "CREATE TABLE Kanji (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT);"
        "CREATE TABLE Kana (ID INTEGER PRIMARY KEY, idseq INTEGER, text TEXT, nokanji BOOLEAN);"
        "CREATE TABLE Sense (ID INTEGER PRIMARY KEY, idseq INTEGER);"
        "CREATE TABLE SenseGloss (sid INTEGER, lang TEXT, gend TEXT, text TEXT);"
        "CREATE TABLE pos (sid INTEGER, text TEXT);"
    )
    sid = 0
    for idseq, (kanji, kana, senses) in ENTRIES.items():
        db.execute("INSERT INTO Entry VALUES (?)", (idseq,))
        db.executemany("INSERT INTO Kanji (idseq, text) VALUES (?, ?)", [(idseq, k) for k in kanji])
        db.executemany("INSERT INTO Kana (idseq, text, nokanji) VALUES (?, ?, 0)", [(idseq, k) for k in kana])
        for glosses, labels in senses:
            sid += 1
            db.execute("INSERT INTO Sense (ID, idseq) VALUES (?, ?)", (sid, idseq))
            db.executemany("INSERT INTO SenseGloss VALUES (?, ?, '', ?)", [(sid, lang, t) for lang, t in glosses])
            db.executemany("INSERT INTO pos VALUES (?, ?)", [(sid, label) for label in labels])
    db.commit()
    db.close()
    return path


def test_a_word_usually_written_in_kana_has_its_kana_headword(database):
    db = sqlite3.connect(database)
    db.execute("CREATE TABLE misc (sid INTEGER, text TEXT)")
    sid = db.execute(
        "SELECT s.ID FROM Sense AS s JOIN Kanji AS k ON k.idseq = s.idseq WHERE k.text = '綺麗'"
    ).fetchone()
    db.execute("INSERT INTO misc VALUES (?, 'word usually written using kana alone')", sid)
    db.commit()
    db.close()
    dictionary = load_jmdict(database)
    assert "綺麗" not in dictionary and dictionary["きれい"].senses[0].definition == "pretty; lovely"
    assert "猫" in dictionary  # unmarked entries keep their kanji


def test_antonyms_name_the_headwords_of_the_forms_they_give(database, caplog):
    """JMdict's `ant`: a form, perhaps with its reading or a sense number; a kana form that entries of several
    headwords share names none, unless its kanji is given; one naming no entry is counted."""
    db = sqlite3.connect(database)
    db.execute("CREATE TABLE antonym (sid INTEGER, text TEXT)")
    adjective = "adjective (keiyoushi)"
    for idseq, kanji, kana, gloss in ((2000, "大きい", "おおきい", "big"), (2001, "小さい", "ちいさい", "small")):
        db.execute("INSERT INTO Kanji (idseq, text) VALUES (?, ?)", (idseq, kanji))
        db.execute("INSERT INTO Kana (idseq, text, nokanji) VALUES (?, ?, 0)", (idseq, kana))
        sid = db.execute("INSERT INTO Sense (idseq) VALUES (?)", (idseq,)).lastrowid
        db.execute("INSERT INTO SenseGloss VALUES (?, 'eng', '', ?)", (sid, gloss))
        db.execute("INSERT INTO pos VALUES (?, ?)", (sid, adjective))
    db.execute("INSERT INTO Kanji (idseq, text) VALUES (2002, '喜連')")  # a second entry read きれい
    db.execute("INSERT INTO Kana (idseq, text, nokanji) VALUES (2001, 'ちい・さい', 0)")  # a form holding "・"
    db.execute("CREATE TABLE misc (sid INTEGER, text TEXT)")  # 綺麗: usually written in kana, its headword きれい
    db.execute("INSERT INTO misc SELECT ID, 'word usually written using kana alone' FROM Sense WHERE idseq = 1002")
    db.execute("INSERT INTO Kana (idseq, text, nokanji) VALUES (2002, 'きれい', 0)")
    sid = db.execute("INSERT INTO Sense (idseq) VALUES (2002)").lastrowid
    db.execute("INSERT INTO SenseGloss VALUES (?, 'eng', '', 'a place name')", (sid,))
    big, small = (db.execute("SELECT ID FROM Sense WHERE idseq = ?", (i,)).fetchone()[0] for i in (2000, 2001))
    rows = [(big, "小さい"), (big, "ない"), (big, "きれい"), (small, "大きい・おおきい"), (small, "ねこ")]
    rows += [(small, "綺麗・きれい・1"), (small, "小さい・2"), (big, "ちい・さい")]  # a sense number; itself: dropped
    db.executemany("INSERT INTO antonym VALUES (?, ?)", rows)
    db.commit()
    db.close()
    with caplog.at_level(logging.INFO):
        dictionary = load_jmdict(database)
    assert [s.antonyms for s in dictionary["大きい"].senses] == [("小さい",)]  # named twice: once
    assert [s.antonyms for s in dictionary["小さい"].senses] == [("大きい", "猫", "きれい")]  # 猫: two entries
    skipped = dict(_report(caplog).skipped)
    assert skipped["antonyms naming no entry"] == 1 and skipped["antonyms naming entries of several headwords"] == 1
    assert all(not s.antonyms for s in load_jmdict(make_database(database.parent / "plain.db"))["猫"].senses)


@pytest.fixture
def database(tmp_path):
    return make_database(tmp_path / "jamdict.db")


def _report(caplog):
    return next(r.load_report for r in caplog.records if hasattr(r, "load_report"))


def test_headwords_senses_and_parts_of_speech(database, caplog):
    with caplog.at_level(logging.INFO):
        dictionary = load_jmdict(database)
    assert dictionary.name == "jmdict"
    assert dictionary.headwords == ["猫", "ゆっくり", "綺麗", "食べる", "表現", "水"]  # first kanji, else first kana
    assert [(s.definition, s.pos) for s in dictionary["猫"].senses] == [("cat", "n"), ("shamisen", "n")]
    assert [(s.definition, s.pos) for s in dictionary["ゆっくり"].senses] == [("slowly; leisurely", "r")]
    assert [(s.definition, s.pos) for s in dictionary["綺麗"].senses] == [("pretty; lovely", None)]  # a and n
    assert [(s.definition, s.pos) for s in dictionary["食べる"].senses] == [("to eat", "v"), ("to live on", "v")]
    assert [(s.definition, s.pos) for s in dictionary["水"].senses] == [("water", None)]
    assert [(s.definition, s.pos) for s in dictionary["表現"].senses] == [("expression", None)]
    report = _report(caplog)
    assert dict(report.skipped) == {
        "senses without a gloss in eng": 1,
        "glosses in other languages than eng": 1,
        "senses of entries without a kanji or kana form": 1,
        "entries without a sense": 1,
        "empty glosses": 1,
    }
    assert (report.rows, report.headwords, report.senses, report.repeated_definitions) == (11, 6, 8, 1)


def test_other_gloss_language(database):
    dictionary = load_jmdict(database, lang="ger")
    assert dictionary.pairs() == [("無訳", "unübersetzt")]


@pytest.mark.parametrize(
    ("labels", "letter"),
    [
        ([NOUN, SURU], "n"),
        (["adverb (fukushi)", "adverb taking the 'to' particle", SURU], "r"),
        ([SURU], "n"),
        (["nouns which may take the genitive case particle 'no'", NA_ADJECTIVE], "a"),
        (["Godan verb with 'ru' ending", "intransitive verb"], "v"),
        (["noun or verb acting prenominally"], "a"),
        (["pre-noun adjectival (rentaishi)"], "a"),
        ([NA_ADJECTIVE, NOUN], None),
        (["expressions (phrases, clauses, etc.)", "Godan verb with 'ku' ending"], "v"),
        (["particle"], None),
        ([], None),
    ],
)
def test_jmdict_pos(labels, letter):
    assert jmdict_pos(labels) == letter


def test_xz_database_is_decompressed_once_into_the_cache(database, tmp_path, monkeypatch):
    packed = tmp_path / "jamdict.db.xz"
    packed.write_bytes(lzma.compress(database.read_bytes()))
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))
    expected = load_jmdict(database).pairs()
    assert load_jmdict(packed).pairs() == expected
    copies = list((tmp_path / "cache").glob("jmdict-*.sqlite"))
    assert len(copies) == 1 and copies[0].read_bytes() == database.read_bytes()

    def no_decompressing(*_):
        raise AssertionError("decompressed again")

    monkeypatch.setattr(jmdict, "_decompress", no_decompressing)
    assert load_jmdict(packed).pairs() == expected


def test_xz_database_without_a_writable_cache_uses_a_temporary_copy(database, tmp_path, monkeypatch, caplog):
    packed = tmp_path / "jamdict.db.xz"
    packed.write_bytes(lzma.compress(database.read_bytes()))
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "not-a-folder"))
    with caplog.at_level(logging.WARNING):
        assert len(load_jmdict(packed)) == 6
    assert "decompressing" in caplog.text and "into a temporary file" in caplog.text


def test_damaged_xz_is_one_line_error(database, tmp_path, monkeypatch):
    packed = tmp_path / "jamdict.db.xz"
    packed.write_bytes(lzma.compress(database.read_bytes())[:-100])
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(packed))}: not a readable xz file"):
        load_jmdict(packed)
    assert not list((tmp_path / "cache").glob("jmdict-*"))  # nothing half-written left behind


def test_not_a_database_is_one_line_error(tmp_path):
    path = tmp_path / "jamdict.db"
    path.write_text("Traditional Simplified [pin1 yin1] /gloss/\n")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}: not a jamdict JMdict database"):
        load_jmdict(path)


def test_database_without_the_tables_is_one_line_error(tmp_path):
    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("CREATE TABLE words (text TEXT)").connection.close()
    with pytest.raises(DataFormatError, match=r"not a jamdict JMdict database \(no such table: Kanji\)"):
        load_jmdict(path)


def test_missing_file_is_one_line_error(tmp_path):
    with pytest.raises(DataFormatError, match=r"jamdict.db: cannot read file \(not found\)"):
        load_jmdict(tmp_path / "jamdict.db")


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(jmdict, "PACKAGE", "no_such_jamdict_package")
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[ja\]"'):
        load_jmdict()


def test_installed_package_file_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_jamdict_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    make_database(package / "jamdict.db")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(jmdict, "PACKAGE", "fake_jamdict_pkg")
    assert jmdict.jmdict_data_file() == package / "jamdict.db"
    assert len(load_jmdict()) == 6
