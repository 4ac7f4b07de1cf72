"""Antonyms and similar words: WordNet's on each sense (antonyms direct and indirect), a table's `antonym` and
`similar` columns, their round trip through a model folder's definitions and search index, and near-synonym search
leaving the antonyms out."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_succeeds
from test_dictionary_wordnet import write_wordnet

from dictembed.dictionary import load_dictionary, load_wordnet
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.merge import merge_dictionaries
from dictembed.dictionary.sources.table import jsonl_text, load_table
from dictembed.entry_relations import EntryRelation
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.model_folder import DEFINITIONS_FILE, SEARCH_DIR
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import INDEX_ARRAYS

# hot (a head adjective) ! cold (a head), each with satellites; `warm` is in a satellite of each, so each of its
# senses has the other cluster's words for antonyms, but never `wintry`, its synonym; rise (verb) ! fall (from
# lemma 1 of fall's synset, which descend shares).
ADJECTIVES = [
    "00000010 00 a 01 hot 0 003 ! 00000020 a 0101 & 00000011 a 0000 & 00000013 a 0000 | of high temperature  ",
    "00000011 00 s 01 torrid 0 001 & 00000010 a 0000 | very hot and dry  ",
    "00000013 00 s 01 warm 0 001 & 00000010 a 0000 | pleasantly hot  ",
    "00000020 00 a 01 cold 0 003 ! 00000010 a 0101 & 00000021 a 0000 & 00000022 a 0000 | of low temperature  ",
    "00000021 00 s 01 frigid 0 001 & 00000020 a 0000 | extremely cold  ",
    "00000022 00 s 02 wintry 0 warm 0 001 & 00000020 a 0000 | as of winter  ",
]
VERBS = [
    "00000030 30 v 01 rise 0 001 ! 00000031 v 0101 | move upward  ",
    "00000031 30 v 02 fall 0 descend 0 001 ! 00000030 v 0101 | move downward  ",
]
FAKE = {"noun": ["00000001 05 n 01 bank 0 000 | sloping land  "], "verb": VERBS, "adj": ADJECTIVES, "adv": []}


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Dictionary:
    return load_wordnet(write_wordnet(tmp_path_factory.mktemp("wordnet"), FAKE))


def antonyms(dictionary: Dictionary, word: str) -> list[tuple[str, ...]]:
    return [sense.antonyms for sense in dictionary[word].senses]


def test_wordnet_senses_record_direct_and_indirect_antonyms(fake: Dictionary) -> None:
    assert antonyms(fake, "hot") == [("cold", "frigid", "wintry", "warm")]  # cold's cluster: wintry's synset
    assert antonyms(fake, "torrid") == [("cold", "frigid", "wintry", "warm")]  # a satellite takes its head's
    assert antonyms(fake, "frigid") == [("hot", "torrid", "warm")]
    assert antonyms(fake, "rise") == [("fall", "descend")]  # no satellites outside adjectives
    assert antonyms(fake, "descend") == [("rise",)]  # the pointer starts from fall, its synonym in that sense
    assert antonyms(fake, "bank") == [()]
    # warm: a synonym of hot's satellite (pleasantly hot) and of cold's (wintry), never its own antonym
    assert sorted(antonyms(fake, "warm")) == [("cold", "frigid"), ("hot", "torrid")]
    assert not any("warm" in a for a in antonyms(fake, "warm"))


def similar(dictionary: Dictionary, word: str) -> list[tuple[str, ...]]:
    return [sense.similar for sense in dictionary[word].senses]


def test_wordnet_senses_record_the_similar_adjectives(fake: Dictionary) -> None:
    assert similar(fake, "hot") == [("torrid", "warm")]  # a head's satellites
    assert similar(fake, "torrid") == [("hot",)]  # a satellite's head
    assert sorted(similar(fake, "warm")) == [("cold",), ("hot",)]
    assert similar(fake, "wintry") == [("cold",)] and similar(fake, "rise") == [()]


def test_the_real_wordnet_records_the_opposites_a_thesaurus_lists() -> None:
    wordnet = load_wordnet()
    every = {w: {a for s in wordnet[w].senses for a in s.antonyms} for w in ("hot", "happy", "big", "rise")}
    assert {"cold", "frigid"} <= every["hot"] and "warm" not in every["hot"]
    assert {"unhappy", "doomed", "unlucky"} <= every["happy"]  # the last two through fortunate's satellites
    assert {"small", "little"} <= every["big"] and "large" not in every["big"]
    assert "fall" in every["rise"]
    assert {"hot", "heat"} <= {a for s in wordnet["cold"].senses for a in s.antonyms}  # heat: from coldness
    assert not any(e.headword in s.antonyms or e.headword in s.similar for e in wordnet for s in e.senses)
    lowered = load_wordnet(lowercase=True)  # a lowercased synonym (IV of quaternary's synset) is no antonym
    assert "iv" not in {a for s in lowered["quaternary"].senses for a in s.antonyms}
    assert "arctic" not in {w for s in lowered["polar"].senses for w in s.similar}
    close = {w for s in wordnet["beautiful"].senses for w in s.similar}
    assert {"lovely", "gorgeous", "pretty"} <= close
    assert not close & {a for s in wordnet["beautiful"].senses for a in s.antonyms}


def test_a_malformed_pointer_names_the_file_and_line(tmp_path: Path) -> None:
    bad = dict(FAKE, verb=["00000030 30 v 01 rise 0 001 ! 00000031 q 0101 | move upward  "])
    with pytest.raises(DataFormatError, match=r"data\.verb:4: bad pointer ! 00000031 q 0101"):
        load_wordnet(write_wordnet(tmp_path / "pos", bad))
    short = dict(FAKE, verb=["00000030 30 v 01 rise 0 002 ! 00000031 v 0101 | move upward  "])
    with pytest.raises(DataFormatError, match=r"data\.verb:4: expected 2 pointers of 4 fields"):
        load_wordnet(write_wordnet(tmp_path / "count", short))


def test_a_jsonl_table_keeps_its_antonyms_through_a_round_trip(fake: Dictionary, tmp_path: Path) -> None:
    path = tmp_path / "fake.jsonl"
    path.write_text(jsonl_text(fake), encoding="utf-8")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {"word": "rise", "definition": "move upward", "pos": "v", "antonym": ["fall", "descend"]} in rows
    hot = next(r for r in rows if r["word"] == "hot")
    assert hot["antonym"] == ["cold", "frigid", "wintry", "warm"] and hot["similar"] == ["torrid", "warm"]
    assert not {"antonym", "similar"} & set(next(r for r in rows if r["word"] == "bank"))  # none: no key
    again = load_dictionary(str(path))
    for entry in fake:
        assert antonyms(again, entry.headword) == antonyms(fake, entry.headword)
        assert similar(again, entry.headword) == similar(fake, entry.headword)


def test_a_tsv_unites_the_antonyms_of_repeated_rows_and_a_wrong_type_is_counted(tmp_path: Path, caplog) -> None:
    tsv = tmp_path / "words.tsv"
    tsv.write_text("word\tdefinition\tantonym\nhot\tvery warm\tcold\nhot\tvery warm\tchilly\nhot\tvery warm\thot\n")
    assert antonyms(load_dictionary(str(tsv)), "hot") == [("cold", "chilly")]  # a word is not its own antonym
    jsonl = tmp_path / "words.jsonl"
    rows = [{"word": "hot", "definition": "very warm", "antonym": 3}, {"word": "up", "definition": "above"}]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with caplog.at_level(logging.WARNING):
        loaded = load_table(jsonl, antonym="antonym")
    assert "hot" not in loaded and "skipped 1 rows whose 'antonym' is not a string or a list of strings" in caplog.text


def test_merging_unites_the_antonyms_of_one_definition() -> None:
    first, second = Dictionary(name="a"), Dictionary(name="b")
    first.add("hot", "very warm", antonyms=["cold"], similar=["torrid"])
    second.add("hot", "very warm", antonyms=["chilly", "cold"], similar=["warm"])
    merged, _ = merge_dictionaries([first, second])
    assert antonyms(merged, "hot") == [("cold", "chilly")] and similar(merged, "hot") == [("torrid", "warm")]


def test_entry_relations_hold_the_words_of_the_space_and_check_their_arrays(caplog) -> None:
    dictionary = Dictionary(name="d")
    dictionary.add("hot", "very warm", antonyms=["cold", "icy", "chilly"])
    dictionary.add("hot", "spicy", antonyms=["mild", "cold"], similar=["peppery"])
    dictionary.add("cold", "very chilly", antonyms=["hot"])
    with caplog.at_level(logging.INFO, logger="dictembed.entry_relations"):
        found = EntryRelation.of(["cold", "hot", "mild"], dictionary, "antonyms")
    assert found is not None and [list(found[i]) for i in range(3)] == [[1], [0, 2], []]  # icy, chilly: no entries
    assert "d: 2 words named as antonyms are no entry of the space (e.g. 'chilly', 'icy'); passed over" in caplog.text
    assert found.check(3) is None and "fit" in str(found.check(4))
    assert "does not hold" in str(EntryRelation(found.starts, found.entries + 1).check(3))
    close = EntryRelation.of(["hot", "peppery"], dictionary, "similar")
    assert close is not None and [list(close[i]) for i in range(2)] == [[1], []]
    plain = Dictionary(name="plain")
    plain.add("hot", "very warm")
    senses = EntrySenses.of(["hot"], plain)
    assert EntryRelation.of(["hot"], plain, "antonyms") is None and senses.antonyms is None and senses.similar is None


WORDS = {  # each antonym pair defined alike, so that an untrained encoder finds them near
    "hot": ("having a high temperature", ["cold"]),
    "cold": ("having a low temperature", ["hot"]),
    "warm": ("having a fairly high temperature", ["cool"]),
    "cool": ("having a fairly low temperature", ["warm"]),
    "tepid": ("having a middling temperature", []),
}


def write_table(path: Path, with_antonyms: bool) -> Path:
    rows = [
        {"word": w, "definition": d} | ({"antonym": a} if with_antonyms and a else {}) for w, (d, a) in WORDS.items()
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def folders(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    """`dictembed index` folders of the tiny BERT over WORDS, with and without their antonyms."""
    from dictembed.cli import main

    root, found = tmp_path_factory.mktemp("antonyms"), {}
    for with_antonyms in (True, False):
        table = write_table(root / f"words-{with_antonyms}.jsonl", with_antonyms)
        found[with_antonyms] = root / f"folder-{with_antonyms}"
        assert (
            main(
                [
                    "index",
                    "-q",
                    "--model",
                    str(bert_path),
                    "--dictionary",
                    str(table),
                    "--output",
                    str(found[with_antonyms]),
                ]
            )
            == 0
        )
    return found


def listed(rd: ReverseDictionary, word: str, **filters) -> list[str]:
    return [w for r in rd.neighbours(word, k=len(WORDS), **filters) for w in r.words]


def test_near_synonyms_of_a_saved_folder_leave_its_antonyms_out(folders: dict[bool, Path]) -> None:
    plain = ReverseDictionary.load(folders[False], device="cpu")
    assert sorted(listed(plain, "hot")) == ["cold", "cool", "tepid", "warm"]  # without antonyms, every other word
    rd = ReverseDictionary.load(folders[True], device="cpu")
    assert sorted(listed(rd, "hot")) == ["cool", "tepid", "warm"]
    assert sorted(listed(rd, "warm")) == ["cold", "hot", "tepid"]
    assert listed(rd, "hot", pattern="c*") == ["cool"] and sorted(listed(rd, "tepid", pattern="c*")) == ["cold", "cool"]
    assert "cold" in [w for r in rd.search("having a high temperature", k=5) for w in r.words]  # describe
    assert rd.antonyms("Hot") == ["cold"] and rd.antonyms("tepid") == [] and plain.antonyms("hot") == []


def test_the_nearest_antonyms_come_first_as_near_synonym_search_scores_them(
    folders: dict[bool, Path], bert_path: Path, tmp_path: Path
) -> None:
    """`antonyms(word, k)`: the dictionary's first, then those `neighbours` would rank first (on the same vectors
    without the antonyms), among those that pass the filters; without k every one, in the dictionary's order."""
    from dictembed.cli import main

    rows = [{"word": w, "definition": d} for w, (d, _) in WORDS.items()]
    rows[0]["antonym"] = ["cool", "tepid", "cold"]  # hot
    table = tmp_path / "words.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert (
        main(["index", "-q", "--model", str(bert_path), "--dictionary", str(table), "--output", str(tmp_path / "f")])
        == 0
    )
    rd = ReverseDictionary.load(tmp_path / "f", device="cpu")
    ranked = [w for w in listed(ReverseDictionary.load(folders[False], device="cpu"), "hot") if w != "warm"]
    assert ranked == ["cold", "tepid", "cool"] and listed(rd, "hot") == ["warm"]  # the tiny model's scores
    assert rd.antonyms("hot") == ["cool", "tepid", "cold"]
    assert rd.antonyms("hot", k=3) == ["cool", "cold", "tepid"] == rd.antonyms("hot", k=10)  # the first, the nearest
    assert rd.antonyms("hot", k=1) == ["cool"] and rd.antonyms("hot", k=2, pattern="*t*") == ["tepid"]
    assert rd.antonyms("hot", pattern="c*") == ["cool", "cold"] and rd.antonyms("warm", k=3) == []
    found = rd.similar_words("hot", k=2)
    assert [w for r in found.results for w in r.words] == ["warm"] and found.opposites == ["cool", "cold"]
    with pytest.raises(DictEmbedError, match="k"):
        rd.antonyms("hot", k=0)


def test_the_folder_keeps_its_antonyms_in_its_definitions_and_index(folders: dict[bool, Path], capsys) -> None:
    rows = [json.loads(line) for line in (folders[True] / DEFINITIONS_FILE).read_text().splitlines()]
    assert {r["word"]: r.get("antonym") for r in rows}["hot"] == ["cold"]
    from safetensors import safe_open

    with safe_open(folders[True] / SEARCH_DIR / INDEX_ARRAYS, "numpy") as tensors:
        assert {"antonym_starts", "antonym_entries"} <= set(tensors.keys())
    with safe_open(folders[False] / SEARCH_DIR / INDEX_ARRAYS, "numpy") as tensors:
        assert "antonym_starts" not in set(tensors.keys())
    out, _ = cli_succeeds(capsys, ["predict", "--model", str(folders[True]), "--mode", "similar", "--json", "hot"])
    assert "cold" not in [w for r in json.loads(out) for w in r["words"]]


def test_predict_and_the_api_name_the_opposites_left_out(folders: dict[bool, Path], capsys, tmp_path: Path) -> None:
    """Mode similar names the entry's antonyms after its near-synonyms (the table's last line, `opposites` of an
    --input row and of the API's answer); a description, a word without antonyms and a dictionary that records
    none name no opposites."""
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    model = ["predict", "--model", str(folders[True]), "--mode"]
    out, _ = cli_succeeds(capsys, [*model, "similar", "hot"])
    assert out.splitlines()[0] == "words like hot:" and out.splitlines()[-1] == "opposites, left out: cold"
    out, _ = cli_succeeds(capsys, [*model, "similar", "tepid"])
    assert "opposites" not in out
    queries = tmp_path / "queries.txt"
    queries.write_text("hot\nwarm\nhaving a high temperature\n")
    out, _ = cli_succeeds(capsys, [*model, "auto", "--input", str(queries), "--json"])
    expected = [("hot", ["cold"]), ("warm", ["cool"]), (None, [])]
    assert [(r["entry"], r["opposites"]) for r in json.loads(out)] == expected
    client = TestClient(create_app(folders[True]))
    answer = client.get("/api/reverse", params={"q": "Hot", "mode": "similar"}).json()
    assert answer["entry"] == "hot" and answer["opposites"] == ["cold"]
    assert "cold" not in [w for r in answer["results"] for w in r["words"]]
    assert client.get("/api/reverse", params={"q": "hot", "mode": "describe"}).json()["opposites"] == []
    plain = TestClient(create_app(folders[False])).get("/api/reverse", params={"q": "hot", "mode": "similar"}).json()
    assert plain["opposites"] == [] and "cold" in [w for r in plain["results"] for w in r["words"]]


def test_damaged_antonym_arrays_make_the_index_rebuilt(folders: dict[bool, Path], tmp_path: Path, caplog) -> None:
    import shutil

    from safetensors.numpy import load_file, save_file

    copy = Path(shutil.copytree(folders[True], tmp_path / "copy"))
    arrays = load_file(copy / SEARCH_DIR / INDEX_ARRAYS)
    arrays["antonym_entries"] = np.full_like(arrays["antonym_entries"], 99)
    save_file(arrays, copy / SEARCH_DIR / INDEX_ARRAYS)
    with caplog.at_level(logging.WARNING):
        rd = ReverseDictionary.load(copy, device="cpu")
        assert sorted(listed(rd, "hot")) == ["cool", "tepid", "warm"]
    assert "damaged search index (its antonyms name entries the space does not hold)" in caplog.text
    half = Path(shutil.copytree(folders[True], tmp_path / "half"))
    arrays = load_file(half / SEARCH_DIR / INDEX_ARRAYS)
    del arrays["antonym_starts"]  # its entries without their starts: damage, not an index without antonyms
    save_file(arrays, half / SEARCH_DIR / INDEX_ARRAYS)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert sorted(listed(ReverseDictionary.load(half, device="cpu"), "hot")) == ["cool", "tepid", "warm"]
    assert "damaged search index ('antonym_starts')" in caplog.text
