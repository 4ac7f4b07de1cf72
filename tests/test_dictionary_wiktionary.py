"""French and German Wiktionary glosses: the glosses layout, wiki text cleaning, each skip rule with its count, errors
and the package locator."""

from __future__ import annotations

import gzip
import logging
import sys

import pytest

from dictembed.dictionary.sources import wiktionary
from dictembed.dictionary.sources.wiktionary import (
    FRENCH,
    GERMAN,
    IMAGES,
    INFLECTIONS,
    LOST_WORDS,
    NAMES,
    NO_GLOSS,
    REFERENCES,
    VARIANTS,
    clean_gloss,
    load_de_wiktionary,
    load_fr_wiktionary,
    read_glosses,
)
from dictembed.errors import DataFormatError
from dictembed.extras import MissingExtraError

FRENCH_GLOSSES = [
    "chat\tPetit mammifère félin domestique. | Synonyme de matou.",
    "chats\tPluriel de chat.",
    "Lyon\tCommune française, située dans le département du Rhône. | Prénom masculin.",
    "Lyonnais\tHabitant de Lyon.",
    "clef\tVariante orthographique de clé.",
    "oeil\tOrthographe par contrainte typographique de œil.",
    "",
    "acier\tvoir d’acier",
    "revoir\tVoir de nouveau.",
    "freudien\tQui découle ou s’apparente à la pensée de .",
    "planète\tCorps céleste en orbite autour du Soleil.thumb|redresse|[[Vesta#fr|Vesta est une planète mineure.]]",
    "chinois\tthumb|Un chinois (2). Passoire de forme conique. | Langue parlée en Chine ().",
    "manger\t'''Prendre''' de la [[nourriture|nourriture]]&nbsp;; se [[nourrir]]{{réf}}.",
]
FRENCH_SKIPS = {NAMES: 2, INFLECTIONS: 1, VARIANTS: 2, REFERENCES: 1, LOST_WORDS: 1, IMAGES: 1, NO_GLOSS: 6}

GERMAN_GLOSSES = [
    "Hund\tHaustier, das bellt | Familienname",
    "Schmidt\tdeutschsprachiger Nachname, Familienname",
    "Leipzig\tStadt in Deutschland, Sachsen | Ortsteil der Gemeinde Seedorf",
    "Grenzstadt\tStadt an einer Grenze",
    "Vatersname\tVorname des Vaters als Teil des Namens seines Kindes",
    "Portmonee\talternative Schreibweise von Portemonnaie",
    "Jojo\tsiehe Jo-Jo",
    "s. o.\tsiehe oben",
    "dem\tDativ Singular des definiten Artikels der",
    "Merkelianer\tAnhänger von ; Befürworter der Politik von Angela Merkel",
    "Haus\tGesamtheit der Bewohner in dem unter [2] beschriebenen Gebäude | {{K|ugs.}} Gebäude[1], in dem man wohnt",
]
GERMAN_SKIPS = {NAMES: 4, INFLECTIONS: 1, VARIANTS: 1, REFERENCES: 1, LOST_WORDS: 1, NO_GLOSS: 6}


def _write(path, lines, compress=True):
    text = "".join(line + "\n" for line in lines)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _report(caplog):
    return next(r.load_report for r in caplog.records if hasattr(r, "load_report"))


def _senses(dictionary):
    return {entry.headword: [sense.definition for sense in entry.senses] for entry in dictionary}


def test_french_headwords_senses_and_skips(tmp_path, caplog):
    path = _write(tmp_path / "glosses.txt.gz", FRENCH_GLOSSES)
    with caplog.at_level(logging.INFO):
        dictionary = load_fr_wiktionary(path)
    assert dictionary.name == "fr-wiktionary"
    assert _senses(dictionary) == {
        "chat": ["Petit mammifère félin domestique.", "Synonyme de matou."],
        "Lyonnais": ["Habitant de Lyon."],
        "revoir": ["Voir de nouveau."],
        "planète": ["Corps céleste en orbite autour du Soleil."],
        "chinois": ["Langue parlée en Chine."],
        "manger": ["Prendre de la nourriture ; se nourrir."],
    }
    assert all(sense.pos is None and not sense.examples for entry in dictionary for sense in entry.senses)
    report = _report(caplog)
    assert dict(report.skipped) == FRENCH_SKIPS
    assert report.rows == 15  # every gloss read, kept or skipped
    assert report.skipped_lines[NAMES] == [3, 3] and report.skipped_lines[LOST_WORDS] == [10]
    assert report.skipped_lines[NO_GLOSS] == [2, 3, 5, 6, 8]  # the first five of six


def test_german_headwords_senses_and_skips(tmp_path, caplog):
    path = _write(tmp_path / "glosses.txt.gz", GERMAN_GLOSSES)
    with caplog.at_level(logging.INFO):
        dictionary = load_de_wiktionary(path)
    assert dictionary.name == "de-wiktionary"
    assert _senses(dictionary) == {
        "Hund": ["Haustier, das bellt"],
        "Grenzstadt": ["Stadt an einer Grenze"],  # a compound of "Stadt": a common noun
        "Vatersname": ["Vorname des Vaters als Teil des Namens seines Kindes"],
        "s. o.": ["siehe oben"],
        "Haus": ["Gesamtheit der Bewohner in dem unter beschriebenen Gebäude", "Gebäude, in dem man wohnt"],
    }
    assert dict(_report(caplog).skipped) == GERMAN_SKIPS
    assert "skipped 4 proper-name glosses (a place, a given name or a surname) (lines 1, 2, 3, 3)" in caplog.text


@pytest.mark.parametrize(
    ("rules", "headword", "gloss", "reason"),
    [
        (FRENCH, "abritées", "Féminin pluriel de abrité.", INFLECTIONS),
        (FRENCH, "vacciné", "Participe passé masculin singulier du verbe vacciner.", INFLECTIONS),
        (FRENCH, "mange", "Troisième personne du singulier du présent de manger.", INFLECTIONS),
        (FRENCH, "proboscidiens", "Pluriel de proboscidien. Ordre de mammifères à trompe.", None),
        (FRENCH, "fadasse", "Féminin de fada : folle, stupide.", None),
        (FRENCH, "tiers", "Troisième personne.", None),
        (FRENCH, "Ecly", "Graphie souvent utilisée pour Écly, la graphie normale ne pouvant être tapée.", VARIANTS),
        (FRENCH, "ubiquitiner", "Variante de .", VARIANTS),
        (FRENCH, "mildew", "Orthographe ancienne de mildiou, qui peut être confondu avec l’oïdium.", None),
        (FRENCH, "Paris", "Capitale de la France.", NAMES),
        (FRENCH, "capitale", "Ville où siège le gouvernement.", None),  # lower case: no name
        (FRENCH, "île Maurice", "Île de l’océan Indien.", NAMES),
        (FRENCH, "Chémery", "Ancienne commune française, située dans la Moselle.", NAMES),
        (FRENCH, "Allemande", "Habitante de l’Allemagne.", None),
        (FRENCH, "prendre", "Bénéficier de.", None),  # no space before the period: nothing lost
        (FRENCH, "anti-immigration", "Qui s’oppose à l’.", LOST_WORDS),
        (FRENCH, "pliage", "Le fait de déformer une , formant ainsi un pli.", LOST_WORDS),
        (FRENCH, "quelque", "S’attacher à quelqu’un ; se dévouer à lui.", None),
        (GERMAN, "Strich", "Ort der Anbahnung von Prostitution", None),
        (GERMAN, "Ostwestfale", "Bewohner der Region im Nord-Osten von Nordrhein-Westfalen", None),
        (GERMAN, "Titicaca", "der größte See in Südamerika", NAMES),
        (GERMAN, "Wörthersee", "der größte See in Kärnten", None),  # a compound of "See": kept like "Grenzstadt"
        (GERMAN, "Gebirgssee", "See im Gebirge", None),
        (GERMAN, "Xandra", "weiblicher Vorname, Kurzform von Alexandra", NAMES),
        (GERMAN, "Masseltoff", "umgangssprachlich: Nebenform von Masseltopp", VARIANTS),
        (GERMAN, "Portmonee", "alternative Schreibweise von Portemonnaie, 1996 eingeführt", None),
        (GERMAN, "Arachinsäure", "Chemie: siehe Eicosansäure", REFERENCES),
        (GERMAN, "Herzchen", "Diminutiv von Herz", None),
    ],
)
def test_rules(rules, headword, gloss, reason):
    assert rules.skip_reason(headword, gloss) == reason


def test_clean_gloss_strips_markup_exactly():
    assert clean_gloss("[[a|b]] et '''c''' &amp; ''d''") == "b et c & d"
    assert clean_gloss("{{K|ugs.|t1=_}} Weg für Fußgänger (520&ndash;565 nm)") == " Weg für Fußgänger (520–565 nm)"
    assert clean_gloss("Intervalle [0, 1] fini[1].") == "Intervalle [0, 1] fini."
    assert clean_gloss("Eucharistie. vignette|L'[[hostie]] consacrée") == "Eucharistie."
    assert clean_gloss("a<ref>source</ref> b<!-- note --> ( ) c") == "a b c"
    assert clean_gloss("plain text, nothing to do") == "plain text, nothing to do"


def test_plain_text_and_crlf_lines(tmp_path):
    path = tmp_path / "glosses.txt"
    path.write_bytes("chat\tFélin.\r\n\r\nchien\tCanidé. | Ami.\r\n".encode())
    assert _senses(read_glosses(path, FRENCH, "x")) == {"chat": ["Félin."], "chien": ["Canidé.", "Ami."]}


def test_line_without_tab_is_an_error(tmp_path):
    path = _write(tmp_path / "glosses.txt.gz", ["chat\tFélin.", "", "chien Canidé."])
    with pytest.raises(DataFormatError) as error:
        load_fr_wiktionary(path)
    assert str(error.value) == f"{path}:3: expected 'headword<TAB>gloss | gloss | ...' (no tab)"


def test_broken_gzip_and_bad_bytes_are_errors(tmp_path):
    path = tmp_path / "glosses.txt.gz"
    path.write_bytes(b"\x1f\x8b" + b"not gzip")
    with pytest.raises(DataFormatError, match=r"glosses\.txt\.gz:1: not a readable gzip file"):
        load_fr_wiktionary(path)
    path.write_bytes(gzip.compress("chat\tFélin.\n".encode() * 100)[:40])  # cut short: the lines before it are read
    with pytest.raises(DataFormatError, match=r"glosses\.txt\.gz:\d+: not a readable gzip file \(Compressed file"):
        load_fr_wiktionary(path)
    path.write_bytes(gzip.compress(b"chat\tF\xe9lin.\n"))
    with pytest.raises(DataFormatError, match=r"glosses\.txt\.gz:1: not valid utf-8"):
        load_fr_wiktionary(path)
    assert _senses(load_fr_wiktionary(path, encoding="latin-1")) == {"chat": ["Félin."]}
    with pytest.raises(DataFormatError, match="cannot read file"):
        load_de_wiktionary(tmp_path / "missing.txt.gz")


def test_no_kept_gloss_is_an_error(tmp_path):
    path = _write(tmp_path / "glosses.txt.gz", ["Lyon\tCommune française."])
    with pytest.raises(DataFormatError, match="no entries"):
        load_fr_wiktionary(path)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(wiktionary, "FR_PACKAGE", "no_such_fr_package")
    monkeypatch.setattr(wiktionary, "DE_PACKAGE", "no_such_de_package")
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[fr\]"'):
        load_fr_wiktionary()
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[de\]"'):
        load_de_wiktionary()


def test_installed_package_file_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_wiktionary_pkg"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    _write(package / "data" / "glosses.txt.gz", ["Hund\tHaustier"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(wiktionary, "DE_PACKAGE", "fake_wiktionary_pkg")
    assert _senses(load_de_wiktionary()) == {"Hund": ["Haustier"]}
    assert "fake_wiktionary_pkg" not in sys.modules
