"""The reverse-dictionary experiments' helpers: the leak-free two-dictionary training table and the echo term."""

from __future__ import annotations

import numpy as np
from conftest import load_script

from dictembed.dictionary import Dictionary, split_by_headword
from dictembed.dictionary.load import load_user_table
from dictembed.dictionary.sources.table import jsonl_text


def toy(name: str, words: list[str]) -> Dictionary:
    dictionary = Dictionary(name=name)
    for i, word in enumerate(words):
        dictionary.add(word, f"{name} definition {i} of {word}", pos="n")
    return dictionary


def test_training_table_holds_out_wordnet_dev_and_test_headwords(tmp_path) -> None:
    script = load_script("experiments/cross_dictionary_data.py")
    wordnet = toy("wordnet", [f"w{i}" for i in range(40)])
    splits = split_by_headword(wordnet, seed=3)
    held = splits["dev"].headwords + splits["test"].headwords
    # the other dictionary: two held-out headwords (one in other case), two training ones, one new word
    others = toy("gcide", [held[0], held[1].upper(), splits["train"].headwords[0], splits["train"].headwords[1], "new"])
    merged, held_out = script.training_table(wordnet, others, seed=3)
    assert held_out == 2
    assert set(merged.headwords) == set(splits["train"].headwords) | {"new"}
    assert merged.num_definitions() == splits["train"].num_definitions() + 3  # the two shared words gain one each
    path = tmp_path / "t.jsonl"
    path.write_text(jsonl_text(merged))
    assert load_user_table(path).pairs() == merged.pairs()  # the table reads back as the same dictionary


def test_echo_marks_entries_whose_words_all_occur_in_the_query() -> None:
    script = load_script("experiments/reverse_dictionary_ranking.py")
    echo = script.Echo(["free time", "hobby", "time", "Free-Time", "time off"])
    marks = echo(["something fun you do in your free time", "hobby"])
    assert marks.tolist() == [[1, 0, 1, 1, 0], [0, 1, 0, 0, 0]]
    assert marks.dtype == np.float32


def test_masked_examples_hide_the_headword_and_its_forms() -> None:
    script = load_script("experiments/cross_dictionary_data.py")
    dictionary = Dictionary(name="wn")
    dictionary.add("physical exercise", "exertion", ["he did some exercising", "regular exercise"], pos="n")
    dictionary.add("happy", "glad", ["a happy ending", "happiness is here", "by happenstance"], pos="a")
    dictionary.add("go", "move", ["go home"], pos="v")  # too short to mask: kept as it is
    masked = script.masked_examples(dictionary)
    assert masked.pairs() == [
        ("physical exercise", "he did some ___"),
        ("physical exercise", "regular ___"),
        ("happy", "a ___ ending"),
        ("happy", "___ is here"),
        ("happy", "by ___"),  # a word that starts like the headword is masked too: the rule is by prefix
        ("go", "go home"),
    ]
