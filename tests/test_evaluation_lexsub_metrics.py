"""Lexical substitution scores by hand, and the LS07 / CoInCo readers on real and broken files."""

from __future__ import annotations

from collections import Counter

import pytest

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.lexsub_metrics import (
    best,
    best_mode,
    load_lexsub,
    mode,
    oot,
    oot_mode,
    precision_at_k,
    read_gold,
    read_preprocessed,
    score_ranked,
)

# Item 1: |H| = 5, mode "clever". Item 2: |H| = 5, no mode (luminous and clear tie at 2).
# Item 3: |H| = 1, mode "shiny", and the system does not answer it. Item 4 has no gold: never scored.
GOLD = {
    "1": Counter({"clever": 3, "smart": 1, "bright": 1}),
    "2": Counter({"luminous": 2, "clear": 2, "light": 1}),
    "3": Counter({"shiny": 1}),
    "4": Counter(),
}
RANKED = {
    "1": ["Clever", "brilliant", "smart", "intelligent"],
    "2": ["light", "dim", "luminous", "clear"],
    "4": ["anything"],
}


def test_mode_needs_a_strict_winner():
    assert mode(GOLD["1"]) == "clever"
    assert mode(GOLD["2"]) is None
    assert mode(GOLD["3"]) == "shiny"
    assert mode(GOLD["4"]) is None


def test_best_with_one_answer_by_hand():
    # item 1: freq(clever) / |H| = 3/5 = 0.6; item 2: freq(light) / |H| = 1/5 = 0.2; item 3 unanswered.
    # precision = (0.6 + 0.2) / 2 attempted = 0.4; recall = 0.8 / 3 items with gold = 0.2667.
    top1 = {key: answers[:1] for key, answers in RANKED.items()}
    precision, recall = best(GOLD, top1)
    assert precision == pytest.approx(40.0)
    assert recall == pytest.approx(80.0 / 3)


def test_best_divides_credit_by_number_of_answers():
    # item 1 with two answers: (3 + 1) / 5 / 2 = 0.4; items 2 and 3 unanswered -> recall 0.4 / 3.
    precision, recall = best(GOLD, {"1": ["clever", "smart"]})
    assert precision == pytest.approx(40.0)
    assert recall == pytest.approx(40.0 / 3)


def test_oot_by_hand():
    # item 1: (clever 3 + smart 1) / 5 = 0.8; item 2: (light 1 + luminous 2 + clear 2) / 5 = 1.0.
    # precision = 1.8 / 2 = 0.9; recall = 1.8 / 3 = 0.6.
    precision, recall = oot(GOLD, RANKED)
    assert precision == pytest.approx(90.0)
    assert recall == pytest.approx(60.0)


def test_oot_uses_only_the_first_ten_answers():
    # "clever" is the 11th answer: out of the ten, so item 1 gets nothing -> recall 0.
    answers = {"1": [f"w{i}" for i in range(10)] + ["clever"]}
    assert oot(GOLD, answers).recall == 0.0
    assert oot_mode(GOLD, answers).recall == 0.0


def test_mode_scores_by_hand():
    # Items with a mode: 1 (clever) and 3 (shiny). Item 1's first answer is the mode; item 3 unanswered.
    # best-mode: precision 1/1, recall 1/2. oot-mode: clever is in item 1's list -> same numbers.
    top1 = {key: answers[:1] for key, answers in RANKED.items()}
    assert best_mode(GOLD, top1) == (pytest.approx(100.0), pytest.approx(50.0))
    assert oot_mode(GOLD, RANKED) == (pytest.approx(100.0), pytest.approx(50.0))
    # A mode that is only second in the list counts for oot-mode but not for best-mode.
    swapped = {"1": ["brilliant", "clever"]}
    assert best_mode(GOLD, swapped).recall == 0.0
    assert oot_mode(GOLD, swapped).recall == pytest.approx(50.0)


def test_precision_at_k_by_hand():
    # P@1: item 1 "clever" in gold (1), item 2 "light" in gold (1), item 3 unanswered (0): 2/3.
    # P@3: item 1 [clever, brilliant, smart] -> 2/3; item 2 [light, dim, luminous] -> 2/3; item 3 -> 0.
    # mean = (2/3 + 2/3 + 0) / 3 = 4/9.
    assert precision_at_k(GOLD, RANKED, 1) == pytest.approx(200.0 / 3)
    assert precision_at_k(GOLD, RANKED, 3) == pytest.approx(400.0 / 9)


def test_score_ranked_collects_every_score():
    scores = score_ranked(GOLD, RANKED)
    assert scores["best"] == pytest.approx(80.0 / 3)
    assert scores["best_mode"] == pytest.approx(50.0)
    assert scores["oot"] == pytest.approx(60.0)
    assert scores["oot_mode"] == pytest.approx(50.0)
    assert scores["p_at_1"] == pytest.approx(200.0 / 3)
    assert scores["p_at_3"] == pytest.approx(400.0 / 9)
    assert (scores["n_scored"], scores["n_with_mode"], scores["n_attempted"]) == (3, 2, 2)


def test_read_gold_formats(tmp_path):
    path = tmp_path / "toy.gold"
    path.write_text(
        "bright.a 1 :: intelligent 3;clever 3;smart 1;\n"
        "meeting.N 9 ::  conference 4;get together 2;\n"  # CoInCo: double space, multi-word substitute
        "\n"
        "film.n 7 :: \n"  # no substitute at all
    )
    gold = read_gold(path)
    assert gold["1"] == {"intelligent": 3, "clever": 3, "smart": 1}
    assert gold["9"] == {"conference": 4, "get together": 2}
    assert gold["7"] == Counter()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("bright.a 1 :: clever 3;\nbright.a 2 clever 3;\n", 2),  # no '::'
        ("bright.a 1 :: clever 3;\nbright.a 2 :: smart x;\n", 2),  # count is not a number
        ("bright.a 1 :: clever 3;\n\nbright.a 1 :: smart 1;\n", 3),  # duplicate id
        ("bright.a 1 :: clever 3;\nbright.a 2 :: smart \u00b2;\n", 2),  # a digit int() cannot read
    ],
)
def test_read_gold_errors_name_file_and_line(tmp_path, text, line):
    path = tmp_path / "bad.gold"
    path.write_text(text)
    with pytest.raises(DataFormatError) as error:
        read_gold(path)
    assert f"bad.gold:{line}:" in str(error.value)


def test_read_preprocessed_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.preprocessed"
    path.write_text("bright.a\t1\t1\ta bright boy\nbright.a\t2\t7\ta bright boy\n")
    with pytest.raises(DataFormatError, match=r"bad\.preprocessed:2:"):
        read_preprocessed(path)
    path.write_text("bright.a\t1\ta bright boy\n")
    with pytest.raises(DataFormatError, match=r"bad\.preprocessed:1: expected 4 tab-separated"):
        read_preprocessed(path)
    path.write_text("bright.x\t1\t1\ta bright boy\n")
    with pytest.raises(DataFormatError, match=r"bad\.preprocessed:1: unknown part-of-speech"):
        read_preprocessed(path)
    path.write_text("bright.a\t1\t\u00b9\ta bright boy\n")
    with pytest.raises(DataFormatError, match=r"bad\.preprocessed:1: bad target"):
        read_preprocessed(path)


def test_empty_files_and_zero_counts_are_not_scored_silently(tmp_path):
    """An empty gold or sentence file would score 0.00 everywhere; an instance whose gold counts are all 0 is
    counted among those without gold, as it is left out of every score."""
    from dictembed.evaluation.lexsub_metrics import LexSubData

    (tmp_path / "empty.gold").write_text("\n")
    with pytest.raises(DataFormatError, match=r"empty\.gold: no gold instances"):
        read_gold(tmp_path / "empty.gold")
    (tmp_path / "empty.preprocessed").write_text("")
    with pytest.raises(DataFormatError, match=r"empty\.preprocessed: no instances"):
        read_preprocessed(tmp_path / "empty.preprocessed")
    (tmp_path / "toy.preprocessed").write_text("bright.a\t1\t1\ta bright boy\nbright.a\t2\t1\ta bright girl\n")
    (tmp_path / "toy.gold").write_text("bright.a 1 :: intelligent 0;clever 0;\nbright.a 2 :: smart 2;\n")
    data = LexSubData("toy", read_preprocessed(tmp_path / "toy.preprocessed"), read_gold(tmp_path / "toy.gold"))
    assert data.n_without_gold == 1


def test_load_ls07_real_files(caplog):
    data = load_lexsub("LS07")
    assert len(data.instances) == 2010
    assert len(data.gold) == 2003
    assert data.n_without_gold == 7  # ids 567, 773, 794, 804, 1298, 1886, 1937 have no gold line
    assert "7 of 2010 instances have no gold" in caplog.text
    first = data.instances[0]
    assert (first.instance_id, first.lemma, first.pos, first.index) == ("1", "bright", "a", 13)
    assert first.tokens[first.index] == "bright"
    assert Counter(inst.pos for inst in data.instances) == {"n": 573, "a": 560, "v": 527, "r": 350}
    # Line 1255 is Latin-1, not UTF-8: it is read (and reported), not dropped.
    latin = next(inst for inst in data.instances if inst.instance_id == "1255")
    assert latin.tokens[0] == "m\u00ef"
    assert "1255 is not UTF-8" in caplog.text
    assert data.gold["1"] == {"intelligent": 3, "clever": 3, "smart": 1}


def test_load_coinco_real_files():
    data = load_lexsub("CoInCo")
    assert len(data.instances) == 5388
    assert data.n_without_gold == 0
    assert Counter(inst.pos for inst in data.instances) == {"n": 2536, "v": 1542, "a": 853, "r": 457}
    multiword = next(inst for inst in data.instances if inst.instance_id == "233")
    assert (multiword.lemma, multiword.pos, multiword.tokens[multiword.index]) == (
        "fourth quarter",
        "a",
        "fourth-quarter",
    )
    assert data.gold["7"] == {"tie": 1, "take": 1, "join": 1, "combine": 1, "assimilate": 1, "absorb": 1}
    head = data.head(20)
    assert len(head.instances) == 20 and set(head.gold) == {i.instance_id for i in head.instances}


def test_unknown_dataset_is_a_clear_error():
    with pytest.raises(DictEmbedError, match="unknown lexical substitution data set 'LS99'"):
        load_lexsub("LS99")
