"""`dictembed dictionaries`: the catalogue of named dictionaries, their licences, and counts once loaded."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import cli_succeeds

from dictembed.dictionary import catalog
from dictembed.dictionary.catalog import CATALOG, known_counts
from dictembed.dictionary.load import SOURCES, load_source

LANGUAGES = {"fr-wiktionary": "fr", "de-wiktionary": "de", "ru-wordnet": "ru", "cc-cedict": "zh", "jmdict": "ja"}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _rows(capsys) -> dict[str, dict]:
    out, _ = cli_succeeds(capsys, ["dictionaries", "--json"])
    return {row["name"]: row for row in json.loads(out)["dictionaries"]}


def test_every_named_source_is_listed_with_its_language_licence_and_extra(cache, capsys) -> None:
    rows = _rows(capsys)
    assert list(rows) == list(CATALOG) == list(SOURCES)
    for name, language in LANGUAGES.items():
        assert rows[name]["language"] == language and rows[name]["licence"] and rows[name]["extra"]
    assert rows["cc-cedict"]["definition_language"] == "en" and rows["jmdict"]["definition_language"] == "en"
    assert rows["wordnet"]["licence_id"] == "wordnet" and rows["gcide"]["licence_id"] == "gpl-3.0"
    assert all(row["headwords"] is None for row in rows.values())  # nothing loaded in this cache yet


def test_counts_appear_once_a_dictionary_has_loaded_and_go_with_its_version(cache, capsys, monkeypatch) -> None:
    cwn = load_source("cwn")
    assert known_counts()["cwn"]["headwords"] == len(cwn)
    row = _rows(capsys)["cwn"]
    assert (row["headwords"], row["definitions"]) == (len(cwn), cwn.num_definitions())
    gcide = CATALOG["gcide"]
    counts = {"gcide": {"headwords": 5, "definitions": 7, "version": "0.0.1"}}
    assert catalog.counts_of(gcide, counts) is None  # counted on another version of the data package
    counts["gcide"]["version"] = gcide.data_version()
    assert catalog.counts_of(gcide, counts) == counts["gcide"]


def test_counts_go_with_the_data_file_or_folder_they_were_taken_on(cache, capsys, tmp_path) -> None:
    """WordNet and the shared data's dictionaries have no package version: a count taken under another
    --wordnet-dir was shown for the system's WordNet; a damaged counts file made `dictionaries` raise."""
    wordnet = CATALOG["wordnet"]
    other = tmp_path / "wn"
    other.mkdir()
    (other / "data.noun").write_text("  1 a small WordNet\n")
    counts = {"wordnet": {"headwords": 1124, "definitions": 1276, "version": wordnet.data_print(other)}}
    assert catalog.counts_of(wordnet, counts, other) == counts["wordnet"]
    assert catalog.counts_of(wordnet, counts) is None  # the system's WordNet is another folder
    (other / "data.noun").write_text("  1 a small WordNet, edited\n")
    assert catalog.counts_of(wordnet, counts, other) is None  # the folder's data changed since
    row = {"version": wordnet.data_print()}
    for damaged in ({"headwords": "many", "definitions": 3}, {"definitions": 3}, {"headwords": -1, "definitions": 3}):
        assert catalog.counts_of(wordnet, {"wordnet": row | damaged}) is None
    (cache / "dictionaries").mkdir(parents=True)
    (cache / "dictionaries" / "counts.json").write_text(json.dumps({"wordnet": row | {"headwords": "many"}}))
    assert _rows(capsys)["wordnet"]["headwords"] is None


def test_a_dictionary_whose_package_is_missing_names_its_extra(cache, capsys, monkeypatch) -> None:
    missing = replace(CATALOG["jmdict"], package="no-such-package-here")
    monkeypatch.setitem(CATALOG, "jmdict", missing)
    row = _rows(capsys)["jmdict"]
    assert row["installed"] is False and row["extra"] == "ja"
    out, _ = cli_succeeds(capsys, ["dictionaries"])
    assert 'pip install "dictembed[ja]"' in out


def test_the_model_card_names_each_named_dictionarys_licence() -> None:
    from dictembed.card_metadata import dictionary_metadata

    meta = dictionary_metadata("fr-wiktionary,jmdict,mine.tsv")
    assert meta["language"] == ["fr", "ja"]
    assert meta["dictionary_licenses"] == {
        "fr-wiktionary": "cc-by-sa-4.0",
        "jmdict": "cc-by-sa-3.0",
        "mine.tsv": "unknown",
    }


def test_every_dictionary_extra_is_declared_and_installs_its_package() -> None:
    from pathlib import Path

    from packaging.requirements import Requirement

    from dictembed.extras import MIN_PYTHON

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser as a package
        tomllib = pytest.importorskip("tomli")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for named in CATALOG.values():
        if named.package is not None:
            assert named.extra in extras, named.name
            assert named.package in {Requirement(r).name for r in extras[named.extra]}, named.name
    # an extra whose packages carry a Python marker is one `install_hint` names the Python it needs for
    marked = {
        extra: str(Requirement(r).marker)
        for extra, requirements in extras.items()
        for r in requirements
        if Requirement(r).marker is not None
    }
    assert marked.keys() == MIN_PYTHON.keys()
    for extra, (major, minor) in MIN_PYTHON.items():
        assert marked[extra] == f'python_version >= "{major}.{minor}"'
    (everything,) = extras["dictionaries"]
    assert set(Requirement(everything).extras) == {n.extra for n in CATALOG.values() if n.extra and n.extra != "gcide"}


def test_language_of_a_named_dictionary_else_auto() -> None:
    from dictembed.dictionary.catalog import language_of

    assert [language_of(name) for name in LANGUAGES] == list(LANGUAGES.values())
    assert language_of("wordnet") == "en" and language_of("cwn") == "zh"
    assert language_of("my.tsv") == "auto" and language_of("wordnet,cwn") == "auto"


def test_a_wordnet_dir_without_wordnet_is_refused_by_every_command_that_takes_it(capsys, tmp_path) -> None:
    """`head learn --dictionary mine.tsv --wordnet-dir /typo` ran, the folder never read."""
    from dictembed.cli import main

    (tmp_path / "empty").mkdir()
    for command in (["dictionaries"], ["head", "learn", "--output", str(tmp_path / "h")], ["data", "stats"]):
        assert main([*command, "--wordnet-dir", str(tmp_path / "nope")]) == 2
        assert f"argument --wordnet-dir: {tmp_path / 'nope'}: no such folder" in capsys.readouterr().err
        assert main([*command, "--wordnet-dir", str(tmp_path / "empty")]) == 2
        assert "no WordNet database there (no data.noun)" in capsys.readouterr().err


def test_an_extra_that_needs_a_newer_python_says_so(monkeypatch) -> None:
    """On Python 3.10, `pip install "dictembed[fr]"` installs nothing (its package needs 3.11): the hint says so."""
    import sys

    from dictembed.extras import install_hint

    assert install_hint("fr") == 'pip install "dictembed[fr]"' and install_hint("de") == 'pip install "dictembed[de]"'
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    assert install_hint("fr") == 'pip install "dictembed[fr]" on Python 3.11 or later (this is 3.10)'
    assert install_hint("de") == 'pip install "dictembed[de]"'
