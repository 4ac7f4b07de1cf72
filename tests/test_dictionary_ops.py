"""Merging, splitting by headword, the single-token filter and the statistics table."""

from __future__ import annotations

import logging

import pytest
from transformers import AutoTokenizer

from dictembed.dictionary import (
    Dictionary,
    clean_text,
    dictionary_stats,
    format_stats_table,
    load_oxford,
    merge_dictionaries,
    single_token_filter,
    split_by_headword,
    split_sizes,
)
from dictembed.errors import DictEmbedError
from dictembed.paths import default_model


@pytest.fixture(scope="module")
def bert():
    return AutoTokenizer.from_pretrained(default_model())


def toy(words: list[str], name: str = "toy") -> Dictionary:
    dictionary = Dictionary(name=name)
    for word in words:
        dictionary.add(word, f"definition of {word}")
    return dictionary


def test_merge_deduplicates_case_and_space_blind(caplog):
    first = Dictionary(name="one")
    first.add("Bank", "A river side", ["e1"])
    first.add("Bank", "a place for money")
    second = Dictionary(name="two")
    second.add("bank ", " a  river SIDE", ["e2", "e1"], pos="n")
    second.add("cat", "a feline")
    with caplog.at_level(logging.INFO):
        merged, report = merge_dictionaries([first, second])
    assert (report.entries_in, report.entries_out) == (3, 2)
    assert (report.definitions_in, report.duplicate_definitions, report.definitions_out) == (4, 1, 3)
    assert merged.name == "one+two"
    assert merged.headwords == ["Bank", "cat"]
    river = merged["Bank"].senses[0]
    assert (river.definition, river.examples, river.pos) == ("A river side", ["e1", "e2"], "n")
    assert first["Bank"].senses[0].examples == ["e1"]  # inputs untouched
    assert "4 definitions -> 3 (1 duplicate definitions removed)" in caplog.text


def test_merge_keeps_the_case_variants_one_dictionary_keeps_apart():
    """`--dictionary wordnet,mine.tsv` folded WordNet's *Polish* (the language) into *polish* (to shine)."""
    wordnet = Dictionary(name="wordnet")
    wordnet.add("Polish", "the Slavic language of Poland")
    wordnet.add("polish", "make shiny")
    wordnet.add("giraffe", "tallest living quadruped")
    mine = Dictionary(name="mine")
    mine.add("Giraffe", "a long-necked African animal")  # another dictionary's case: joins the one entry
    mine.add("POLISH", "to rub until it shines")  # two entries match it case-blind, none exactly: its own
    mine.add("polish", "Make  shiny")  # the exact spelling: its duplicate definition goes
    mine.add("March", "the third month")
    mine.add("march", "walk with regular steps")  # this dictionary's own two stay two
    merged, report = merge_dictionaries([wordnet, mine])
    assert merged.headwords == ["Polish", "polish", "giraffe", "POLISH", "March", "march"]
    assert merged["giraffe"].definitions == ["tallest living quadruped", "a long-necked African animal"]
    assert merged["Polish"].definitions == ["the Slavic language of Poland"]
    assert (report.entries_out, report.duplicate_definitions) == (6, 1)


NFD_CAFE, NFC_CAFE = "cafe\u0301", "caf\u00e9"


def test_clean_text_is_nfc_without_format_characters_at_the_ends():
    assert clean_text(NFD_CAFE) == NFC_CAFE
    assert clean_text(" \ufeffword\u200b ") == clean_text("word\u2060") == clean_text("\u200e word \u200f") == "word"
    assert (
        clean_text("\u200b") == clean_text("\ufeff \u200b") == clean_text("\u200d") == clean_text("\u200c\u200d") == ""
    )
    persian = "\u0645\u06cc\u200c\u0634\u0648\u062f"  # ZWNJ inside a word is spelling
    assert clean_text(persian) == persian
    assert clean_text("\u0645\u06cc\u200c") == "\u0645\u06cc\u200c"  # the prefix mi- ends in ZWNJ
    malayalam = "\u0d05\u0d35\u0d28\u0d4d\u200d"  # an old-style chillu: virama + ZWJ
    assert clean_text(malayalam + "\ufeff") == malayalam
    flag = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # ends in tag characters
    assert clean_text(flag) == flag
    assert clean_text("ice\u200bcream") == "ice\u200bcream"  # the middle is left alone
    assert clean_text("a  river\tbank ") == "a river bank"


def test_merge_unites_text_that_looks_the_same():
    first = Dictionary(name="one")
    first.add(NFD_CAFE, f"a small {NFD_CAFE}")
    second = Dictionary(name="two")
    second.add(NFC_CAFE + "\ufeff", f"a small {NFC_CAFE}")
    merged, report = merge_dictionaries([first, second])
    assert merged.headwords == [NFC_CAFE] and merged.pairs() == [(NFC_CAFE, f"a small {NFC_CAFE}")]
    assert (report.entries_out, report.duplicate_definitions) == (1, 1)


def test_split_sizes():
    assert split_sizes(10, (8, 1, 1)) == (8, 1, 1)
    assert split_sizes(3, (8, 1, 1)) == (2, 1, 0)
    assert split_sizes(7, (1, 0, 0)) == (7, 0, 0)
    with pytest.raises(DictEmbedError, match="ratios"):
        split_sizes(10, (1, -1, 1))


def test_split_is_disjoint_reproducible_and_order_independent():
    words = [f"w{i:04d}" for i in range(1000)]
    splits = split_by_headword(toy(words), seed=3)
    sets = {name: set(split.headwords) for name, split in splits.items()}
    assert {name: len(s) for name, s in sets.items()} == {"train": 800, "dev": 100, "test": 100}
    assert sets["train"] | sets["dev"] | sets["test"] == set(words)
    assert not (sets["train"] & sets["dev"] or sets["train"] & sets["test"] or sets["dev"] & sets["test"])
    again = split_by_headword(toy(list(reversed(words))), seed=3)
    assert {name: set(split.headwords) for name, split in again.items()} == sets
    other = split_by_headword(toy(words), seed=4)
    assert set(other["test"].headwords) != sets["test"]
    assert splits["dev"].name == "toy/dev"


def test_split_keeps_case_variants_together():
    words = [f"w{i}" for i in range(50)] + [f"W{i}" for i in range(50)]
    splits = split_by_headword(toy(words), seed=0)
    for split in splits.values():
        lowered = {h.lower() for h in split.headwords}
        assert len(split) == 2 * len(lowered)


def test_split_real_oxford_is_roughly_8_1_1():
    splits = split_by_headword(load_oxford(), seed=0)
    sizes = [len(splits[name]) for name in ("train", "dev", "test")]
    assert sum(sizes) == 8_867
    assert sizes == [7_094, 886, 887]


def test_single_token_filter_counts(bert, caplog):
    dictionary = toy(["bank", "ice cream", "unbelievable", "xqzv"])
    dictionary.add("bank", "a river side")
    with caplog.at_level(logging.INFO):
        kept, report = single_token_filter(dictionary, bert)
    assert kept.headwords == ["bank", "unbelievable"]
    assert (report.kept_headwords, report.kept_definitions) == (2, 3)
    assert (report.dropped_headwords, report.dropped_definitions) == (2, 2)
    assert "kept 2 headwords (3 definitions), dropped 2 headwords (2 definitions)" in caplog.text


def test_stats_whitespace_and_tokenizer(bert):
    train = Dictionary(name="train")
    train.add("bank", "the side of a river")  # 5 words, 5 BERT tokens
    train.add("bank", "money")  # 1 word, 1 token
    train.add("ice cream", "a frozen dessert")  # 3 words, 3 tokens; 'ice cream' is two tokens
    test = Dictionary(name="test")
    test.add("cat", "unbelievably furry")  # 2 words; 6 tokens: un ##bel ##ie ##va ##bly furry
    rows = dictionary_stats({"train": train, "test": test})
    assert rows == [
        {"split": "train", "words": 2, "definitions": 3, "avg_length": 3.0},
        {"split": "test", "words": 1, "definitions": 1, "avg_length": 2.0},
    ]
    rows = dictionary_stats({"train": train, "test": test}, tokenizer=bert)
    assert rows[0] == {
        "split": "train",
        "words": 2,
        "definitions": 3,
        "avg_length": 3.0,
        "words_filtered": 1,
        "definitions_filtered": 2,
        "avg_length_filtered": 3.0,
    }
    assert rows[1]["avg_length"] == 6.0 and rows[1]["avg_length_filtered"] == 6.0
    table = format_stats_table(rows).splitlines()
    assert table[0].split("  ")[:4] == ["split", "words", "definitions", "avg. length"]
    assert table[0].endswith("avg. length (1-token)")
    assert set(table[1]) == {"-", " "}
    assert table[2].split() == ["train", "2", "3", "3.00", "1", "2", "3.00"]
    assert format_stats_table([]) == ""


def test_stats_count_the_senses_naming_antonyms_and_similar_words() -> None:
    train = Dictionary(name="train")
    train.add("hot", "of high temperature", antonyms=["cold", "cool"])
    train.add("hot", "stolen")
    train.add("warm", "fairly hot", similar=["hot"], antonyms=["cool"])
    test = Dictionary(name="test")
    test.add("cat", "a small pet")
    rows = dictionary_stats({"train": train, "test": test})
    assert [(row["antonyms"], row["similar"]) for row in rows] == [(2, 1), (0, 0)]
    table = format_stats_table(rows).splitlines()
    assert table[0].endswith("senses w/ antonyms  senses w/ similar")
    assert table[2].split()[-2:] == ["2", "1"] and table[3].split()[-2:] == ["0", "0"]
    assert "antonyms" not in dictionary_stats({"test": test})[0]  # no column where no sense records one
