"""Possible WordNet parts of speech, read from the real WordNet 3.0 files and from broken copies."""

from __future__ import annotations

import pytest

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.wordnet_pos import WordNetPOS, load_wordnet_pos, possible_pos, to_wordnet_pos


@pytest.fixture(scope="module")
def wordnet() -> WordNetPOS:
    return load_wordnet_pos()


def test_lemmas_of_the_index_files(wordnet):
    # index.adj and index.adv list "bright"; index.noun and index.verb do not.
    assert wordnet.possible_pos("bright") == {"a", "r"}
    assert wordnet.possible_pos("clever") == {"a"}
    assert wordnet.possible_pos("quickly") == {"r"}
    assert wordnet.possible_pos("well") == {"n", "v", "a", "r"}
    assert wordnet.possible_pos("the") == frozenset()
    assert possible_pos("Ice Cream") == {"n"}  # collocation: ice_cream in index.noun


def test_exception_lists(wordnet):
    # verb.exc: "ran run"; noun.exc: "geese goose"; adj.exc: "better good", "better well".
    assert wordnet.possible_pos("ran") == {"v"}
    assert wordnet.base_forms("ran", "v") == ["run"]
    assert wordnet.base_forms("geese", "n") == ["goose"]
    assert set(wordnet.base_forms("better", "a")) == {"better", "good", "well"}


def test_detachment_rules(wordnet):
    assert wordnet.base_forms("brighter", "a") == ["bright"]  # -er -> ''
    assert wordnet.base_forms("films", "n") == ["film"]  # -s -> ''
    assert wordnet.base_forms("taking", "v") == ["take"]  # -ing -> -e
    assert wordnet.base_forms("boxes", "n") == ["box"]  # -xes -> -x
    assert wordnet.possible_pos("brighter") == {"a"}
    assert wordnet.has_pos("films", "V") and not wordnet.has_pos("films", "J")


def test_data_set_tags():
    assert [to_wordnet_pos(tag) for tag in "nvarNVJR"] == list("nvarnvar")
    with pytest.raises(DictEmbedError, match="unknown part-of-speech tag 'X'"):
        to_wordnet_pos("X")


def _fake_wordnet(folder, index_noun: str, noun_exc: str = "geese goose\n"):
    (folder / "data.noun").write_text("")
    for name, pos in [("verb", "v"), ("adj", "a"), ("adv", "r")]:
        (folder / f"index.{name}").write_text(f"  1 licence header line\nfast {pos} 1 0 1 0 00000001\n")
    (folder / "index.noun").write_text(index_noun)
    (folder / "noun.exc").write_text(noun_exc)


def test_small_database_and_errors_naming_file_and_line(tmp_path):
    _fake_wordnet(tmp_path, "  1 header\ngoose n 1 0 1 0 00000001\n")
    wordnet = WordNetPOS.load(tmp_path)
    assert wordnet.possible_pos("geese") == {"n"}
    assert wordnet.possible_pos("fast") == {"v", "a", "r"}

    _fake_wordnet(tmp_path, "  1 header\ngoose n 1 0 1 0 00000001\ngander v 1 0 1 0 00000002\n")
    with pytest.raises(DataFormatError, match=r"index\.noun:3: expected 'lemma n synset_cnt"):
        WordNetPOS.load(tmp_path)

    _fake_wordnet(tmp_path, "goose n 1 0 1 0 00000001\n", noun_exc="geese goose\nmice\n")
    with pytest.raises(DataFormatError, match=r"noun\.exc:2:"):
        WordNetPOS.load(tmp_path)


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(DictEmbedError, match="WordNet database not found"):
        WordNetPOS.load(tmp_path)
