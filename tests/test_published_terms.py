"""The published systems' terms (`experiments/published_terms.py`): gold forms, hints and ranks computed as stated,
on hand-made results."""

from __future__ import annotations

import math

from conftest import load_script

terms = load_script("experiments/published_terms.py")


def test_gold_forms_count_an_inflections_lemma_and_inflections_only_when_asked() -> None:
    assert "fact" in terms.gold_forms(["facts"]) and "fact" in terms.gold_forms(["facts"], "inflections")
    assert "diva" in terms.gold_forms(["dive"])  # lemminflect reads "dive" as a plural of *diva* too
    assert terms.gold_forms(["dive"], "inflections") == {"dive"}  # a base form counts itself only
    assert "see" not in terms.gold_forms(["saw"], "inflections")


def test_a_hint_comes_from_the_first_single_word_and_counts_letters_as_the_filter() -> None:
    initial = terms.hint_filters(["traffic jam", "gridlock"], "initial")
    assert initial.initial == "g"  # a phrase is no candidate: its initial would hide *gridlock*
    length = terms.hint_filters(["single-handedly"], "length")
    assert length.min_length == length.max_length == 14  # letters and digits, not 15 characters
    assert terms.hint_filters(["ice cream"], "none").words == "single"


def test_ranks_count_results_or_their_words() -> None:
    results = [(0.9, ["automobile", "motorcar"]), (0.8, ["bus"]), (0.7, ["car", "machine"])]
    assert terms.rank(results, {"car"}) == 2
    assert terms.rank(results, {"car"}, by="words") == 3
    assert terms.rank(results, {"car"}, {"bus", "car"}, by="words") == 1  # only the candidate set's words count
    assert terms.rank(results, {"tram"}) == math.inf


def test_a_description_is_reachable_only_through_a_gold_form_in_the_candidate_set() -> None:
    lowered = {"bear", "ice", "fact", "paris"}
    assert not terms.reachable({"polar bear", "ice bear"}, lowered)  # a phrase is no candidate
    assert terms.reachable(terms.gold_forms(["facts"]), lowered)  # through its lemma
    assert terms.reachable({"paris"}, lowered)  # the set lower-cased, as the gold forms are
