"""The Russian wiki WordNet: the SQLite layout, wiki markup stripping, the skip rules with their counts, errors and
the package locator."""

from __future__ import annotations

import logging
import sqlite3
import sys
from contextlib import closing

import pytest

from dictembed.dictionary.sources import ru_wordnet
from dictembed.dictionary.sources.ru_wordnet import EMPTY, PROJECT_PAGES, load_ru_wordnet, strip_wiki
from dictembed.dictionary.sources.wiktionary import INFLECTIONS, NAMES, NO_GLOSS
from dictembed.errors import DataFormatError
from dictembed.extras import MissingExtraError

# (synset_id, lemma, wiki text of the definition); stored as `lemma~ru~lemma~ru~TEXT~id~id` like the package's.
ROWS = [
    (
        0,
        "кошка",
        "{{зоол.|ru}} [[домашний|домашнее]] [[животное]] {{пример|{{выдел|Кошка}} спит.|автор=Чехов}} {{пример|}}",
    ),
    (1, "кошка", "{{разг.}}, {{помета|о женщине}}: ласковая, '''хитрая''' женщина"),
    (2, "копь", "{{устар.}} {{=|рудник|место добычи руды}}"),
    (3, "раскапывание", "{{действие|раскапывать}} {{пример|}}"),
    (4, "продырявленный", "{{прич.|продырявить}} {{пример|}}"),
    (5, "Янгулбей", "мужское имя {{пример|Моего друга зовут {{выдел|Янгулбей}}.}}"),
    (6, "Лютик", "[[река]] [[в]] [[России]]"),
    (6, "лютик", "[[растение]] семейства лютиковых ({{lang|la|Ranunculus}})"),
    (7, "тетра-", "{{морфема|часть=существительным|знач=кратности 4}} {{пример|}}"),
    (8, "Шаблон:new-adm", "{{шаблон}}"),
    (9, "бык", ""),
    (10, "сандхи", "изменение фонем ~ на границах{{-}}морфем\n#"),
    (11, "белка", "самка белки [1]"),
]
SKIPS = {NAMES: 2, INFLECTIONS: 1, EMPTY: 1, PROJECT_PAGES: 1, "rows with an empty definition": 1, NO_GLOSS: 5}


def _database(path, rows=ROWS, layout=True):
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE synsets(synset_id INTEGER NOT NULL, lemma TEXT NOT NULL, definition TEXT)")
        connection.execute("CREATE TABLE hypernyms(sid INTEGER NOT NULL, hypersid INTEGER NOT NULL)")
        connection.executemany(
            "INSERT INTO synsets VALUES (?, ?, ?)",
            [(i, lemma, f"{lemma}~ru~{lemma}~ru~{text}~1~2" if layout else text) for i, lemma, text in rows],
        )
        connection.commit()
    return path


def _report(caplog):
    return next(r.load_report for r in caplog.records if hasattr(r, "load_report"))


def test_headwords_senses_examples_and_skips(tmp_path, caplog):
    path = _database(tmp_path / "wikiwordnet.db")
    with caplog.at_level(logging.INFO):
        dictionary = load_ru_wordnet(path)
    assert dictionary.name == "ru-wordnet"
    senses = {e.headword: [(s.definition, s.examples) for s in e.senses] for e in dictionary}
    assert senses == {
        "кошка": [("домашнее животное", ["Кошка спит."]), ("ласковая, хитрая женщина", [])],
        "копь": [("то же, что рудник; место добычи руды", [])],
        "раскапывание": [("действие по значению глагола раскапывать", [])],
        "лютик": [("растение семейства лютиковых (Ranunculus)", [])],
        "сандхи": [("изменение фонем ~ на границах — морфем", [])],  # a "~" in the text; the next list item cut
        "белка": [("самка белки", [])],
    }
    assert all(s.pos is None for e in dictionary for s in e.senses)
    report = _report(caplog)
    assert dict(report.skipped) == SKIPS
    assert report.rows == len(ROWS)
    assert report.skipped_lines[NAMES] == [6, 7]  # rowids
    assert "skipped 1 rows of wiki project pages ('Шаблон:...', 'Викисловарь:...') (lines 10)" in caplog.text


@pytest.mark.parametrize(
    ("text", "definition", "examples"),
    [
        ("{{п.|ru}}, {{разг.|ru}} [[ввести]] в обращение", "ввести в обращение", []),
        ("{{женск.||велогонщик}}; [[спортсменка]]", "женск. к велогонщик; спортсменка", []),
        ("{{уменьш.|ru|конь}}", "уменьш. к конь", []),
        (
            "{{хим-элем|18|Ar|[[инертный]] [[газ]]}}",
            "химический элемент с атомным номером 18 и символом Ar; инертный газ",
            [],
        ),
        ("{{свойство|состояние=1|знаменитый}} {{пример|}}", "свойство по значению прилагательного знаменитый", []),
        (
            "[[сеть|сети]]{{-}}комплекс {{итп}} {{семантика|синонимы=-|гиперонимы=[[место]]}}",
            "сети — комплекс и т. п.",
            [],
        ),
        ("текст<!-- {{x| --> &nbsp;и&nbsp;ещё<ref>источник</ref>", "текст и ещё", []),
        (
            "слово {{пример|{{--}}Да, {{выдел|слово}}!|Н. С. Лесков|Некуда|1864|источник=НКРЯ}} {{пример|Второе.}}",
            "слово",
            ["— Да, слово!", "Второе."],
        ),
        ("{{помета|цвет:}} {{?}}", "", []),
    ],
)
def test_strip_wiki(text, definition, examples):
    assert strip_wiki(text) == (definition, examples)


def test_not_the_sqlite_layout_is_an_error(tmp_path):
    text = tmp_path / "text.db"
    text.write_text("lemma\tdefinition\n" * 200)
    with pytest.raises(DataFormatError) as error:
        load_ru_wordnet(text)
    assert str(error.value) == (
        f"{text}: not the wiki-ru-wordnet database, a table synsets(synset_id, lemma, definition) "
        "(file is not a database)"
    )
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE words(lemma TEXT)")
    with pytest.raises(DataFormatError, match=r"other\.db: not the wiki-ru-wordnet database.*no such table: synsets"):
        load_ru_wordnet(other)
    plain = _database(tmp_path / "plain.db", rows=[(0, "кошка", "животное")], layout=False)
    with pytest.raises(DataFormatError) as error:
        load_ru_wordnet(plain)
    assert str(error.value) == (f"{plain}: synsets row 1 ('кошка'): definition is not 'lemma~ru~lemma~ru~text~id~id'")
    with pytest.raises(DataFormatError, match="cannot read file"):
        load_ru_wordnet(tmp_path / "missing.db")


def test_database_is_opened_read_only(tmp_path):
    path = _database(tmp_path / "wikiwordnet.db")
    before = path.read_bytes()
    load_ru_wordnet(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wikiwordnet.db"]  # no journal left behind


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(ru_wordnet, "PACKAGE", "no_such_ru_package")
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[ru\]"'):
        load_ru_wordnet()


def test_installed_package_file_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_ru_wordnet_pkg"
    (package / "database").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    _database(package / "database" / "wikiwordnet.db", rows=[(0, "кот", "[[животное]]")])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(ru_wordnet, "PACKAGE", "fake_ru_wordnet_pkg")
    assert load_ru_wordnet()["кот"].definitions == ["животное"]
    assert "fake_ru_wordnet_pkg" not in sys.modules
