import math
from pathlib import Path

import numpy as np
import pytest

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.sts import (
    aggregate,
    evaluate_sts,
    evaluate_stsb_dev,
    fit_whitening,
    load_sick,
    load_sts_subset,
    load_sts_year,
    load_stsb,
    predict_similarities,
)


class AngleEncoder:
    """'a<k>' -> the unit vector at k degrees, so cos(a0, a<k>) = cos(k): similarity falls as k grows."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        angles = np.radians([float(s[1:]) for s in sentences])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1)


# STS13 subsets -> (angle k of the pair (a0, a<k>), gold); None gold = unscored (empty gold line)
TOY_STS13 = {
    "FNWN": [(10, 5.0), (20, 4.0), (30, 3.0)],  # Spearman +1
    "headlines": [(40, 0.5), (50, 1.0), (170, None), (60, 1.5)],  # Spearman -1 once the unscored pair is dropped
    "OnWN": [(15, 4.8), (25, 3.5), (35, 3.8), (45, 0.2)],  # ranks d = 0, 1, -1, 0 -> 1 - 6*2/60 = 0.8
}


def write_sts_year(root: Path, task: str, subsets: dict[str, list[tuple[int, float | None]]]) -> Path:
    folder = root / "sts" / "STS" / f"{task}-en-test"
    folder.mkdir(parents=True)
    for name, rows in subsets.items():
        (folder / f"STS.input.{name}.txt").write_text("".join(f"a0\ta{k}\n" for k, _ in rows))
        (folder / f"STS.gs.{name}.txt").write_text("".join("\n" if g is None else f"{g}\n" for _, g in rows))
    return folder


@pytest.fixture
def toy_root(tmp_path: Path) -> Path:
    write_sts_year(tmp_path, "STS13", TOY_STS13)
    return tmp_path


def test_aggregations_hand_computed(toy_root: Path):
    model = AngleEncoder()
    # "all": the 10 pairs in order of similarity have gold ranks 1,2,3,5,6,4,9,10,8,7 -> sum d^2 = 24
    expected_all = 100 * (1 - 6 * 24 / (10 * 99))
    scores = evaluate_sts(model, tasks=["STS13"], per_subset=True, data_dir=toy_root)
    assert scores["STS13"] == pytest.approx(expected_all)
    assert scores["STS13/FNWN"] == pytest.approx(100)
    assert scores["STS13/headlines"] == pytest.approx(-100)
    assert scores["STS13/OnWN"] == pytest.approx(80)
    assert scores["avg"] == pytest.approx(expected_all)
    mean = evaluate_sts(model, tasks=["STS13"], aggregation="mean", data_dir=toy_root)
    assert mean["STS13"] == pytest.approx((100 - 100 + 80) / 3)
    wmean = evaluate_sts(model, tasks=["STS13"], aggregation="wmean", data_dir=toy_root)
    assert wmean["STS13"] == pytest.approx((3 * 100 - 3 * 100 + 4 * 80) / 10)
    assert "STS13/FNWN" not in mean


def test_each_sentence_encoded_once_per_task(toy_root: Path):
    model = AngleEncoder()
    evaluate_sts(model, tasks=["STS13"], data_dir=toy_root)
    assert len(model.calls) == 1
    (sentences,) = model.calls
    assert len(sentences) == len(set(sentences)) == 1 + 10  # a0 and the ten scored partners; a170 dropped


def test_aggregate_rejects_unknown_mode():
    with pytest.raises(DictEmbedError, match="aggregation"):
        aggregate([np.arange(3.0)], [np.arange(3.0)], "median")
    with pytest.raises(DictEmbedError, match="STS99"):
        evaluate_sts(AngleEncoder(), tasks=["STS99"])


def test_whitening_gives_identity_covariance():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4)) + 3.0
    white = fit_whitening(x).transform(x)
    np.testing.assert_allclose(white.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(np.cov(white, rowvar=False), np.eye(4), atol=1e-8)


def test_whitening_is_fitted_on_the_task_sentences(toy_root: Path):
    subsets = load_sts_year("STS13", toy_root)
    whitened = predict_similarities(AngleEncoder(), subsets, whitening=True)
    unique = ["a0"] + [f"a{k}" for rows in TOY_STS13.values() for k, g in rows if g is not None]
    table = AngleEncoder().encode(unique)
    white = fit_whitening(table).transform(table)
    (fnwn_first,) = [i for i, s in enumerate(unique) if s == "a10"]
    expected = white[0] @ white[fnwn_first] / (np.linalg.norm(white[0]) * np.linalg.norm(white[fnwn_first]))
    assert whitened[0][0] == pytest.approx(expected)
    assert not math.isclose(whitened[0][0], math.cos(math.radians(10)))


def test_real_sts_years_scored_pair_counts():
    counts = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}
    for task, expected in counts.items():
        subsets = load_sts_year(task)
        assert sum(len(s) for s in subsets) == expected, task
        assert all(len(s.sentences1) == len(s.sentences2) == len(s.scores) for s in subsets)
    sts15 = load_sts_year("STS15")
    assert sum(s.unscored for s in sts15) == 1625 + 750 + 1625 + 750 + 750
    msrpar = load_sts_year("STS12")[0]
    assert msrpar.name == "STS12/MSRpar" and msrpar.scores[:3].tolist() == [4.4, 0.8, 3.6]


def test_real_stsb_and_sick_rows():
    assert [len(load_stsb(s)) for s in ("train", "dev", "test")] == [5749, 1500, 1379]
    test = load_stsb("test")
    assert (test.sentences1[0], test.sentences2[0], test.scores[0]) == (
        "a girl is styling her hair .",
        "a girl is brushing her hair .",
        2.5,
    )
    assert [len(load_sick(s)) for s in ("train", "trial", "test")] == [4500, 500, 4927]
    sick = load_sick("test")  # CRLF file: no carriage return may leak into sentences
    assert sick.scores[0] == 3.3 and sick.sentences2[0].endswith("background")
    assert not any("\r" in s for s in sick.sentences1 + sick.sentences2)


def test_malformed_sts_input_names_file_and_line(tmp_path: Path):
    (tmp_path / "in.txt").write_text("a b\tc d\nno tab here\n")
    (tmp_path / "gs.txt").write_text("1.0\n2.0\n")
    with pytest.raises(DataFormatError, match=r"in\.txt:2: expected 2"):
        load_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt", "toy")
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "gs.txt").write_text("1.0\nhigh\n")
    with pytest.raises(DataFormatError, match=r"gs\.txt:2: score 'high' is not a number"):
        load_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt", "toy")
    (tmp_path / "gs.txt").write_text("1.0\n")
    with pytest.raises(DataFormatError, match="1 gold lines but 2 sentence pairs"):
        load_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt", "toy")


def test_malformed_stsb_and_sick_name_file_and_line(tmp_path: Path):
    stsb = tmp_path / "sts" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    (stsb / "sts-dev.csv").write_text("g\tf\t2012\t1\t3.0\ta\tb\ng\tf\t2012\t2\t3.0\tonly six\n")
    with pytest.raises(DataFormatError, match=r"sts-dev\.csv:2: expected 7"):
        evaluate_stsb_dev(AngleEncoder(), data_dir=tmp_path)
    sick = tmp_path / "sts" / "SICK"
    sick.mkdir()
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\r\n"
    (sick / "SICK_test_annotated.txt").write_text(header + "1\ta\tb\t4.5\tNEUTRAL\r\n2\ta\tb\tx\tNEUTRAL\r\n")
    with pytest.raises(DataFormatError, match=r"SICK_test_annotated\.txt:3: relatedness score 'x'"):
        load_sick("test", tmp_path)
    (sick / "SICK_trial.txt").write_text("1\ta\tb\t4.5\tNEUTRAL\n")
    with pytest.raises(DataFormatError, match=r"SICK_trial\.txt:1: missing the header"):
        load_sick("trial", tmp_path)


@pytest.mark.parametrize("gold", ["7.5", "-1", "nan", "inf", "4_5", "5.0001"])
def test_a_gold_score_outside_0_to_5_or_not_decimal_is_named(tmp_path: Path, gold: str):
    """A score the Spearman correlation would take without a word (7.5, -1), that makes it NaN (nan), or that
    float() reads as another number (4_5 as 45)."""
    (tmp_path / "in.txt").write_text("a\tb\nc\td\ne\tf\n")
    (tmp_path / "gs.txt").write_text(f"1.0\n{gold}\n3\n")
    with pytest.raises(DataFormatError, match=rf"gs\.txt:2: score '{gold}' is (outside 0-5|not a number)"):
        load_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt", "toy")
    stsb = tmp_path / "sts" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True, exist_ok=True)
    (stsb / "sts-test.csv").write_text(f"g\tf\t2012\t1\t3.0\ta\tb\ng\tf\t2012\t2\t{gold}\tc\td\n")
    with pytest.raises(DataFormatError, match=rf"sts-test\.csv:2: score '{gold}'"):
        load_stsb("test", tmp_path)


def test_a_set_of_fewer_than_two_pairs_is_named_not_a_nan(tmp_path: Path):
    (tmp_path / "in.txt").write_text("a\tb\nc\td\n")
    (tmp_path / "gs.txt").write_text("\n2.0\n")  # one scored pair left once the unscored one is dropped
    with pytest.raises(DataFormatError, match=r"gs\.txt: 1 scored sentence pair\(s\); a Spearman correlation needs"):
        load_sts_subset(tmp_path / "in.txt", tmp_path / "gs.txt", "toy")
    stsb = tmp_path / "sts" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    (stsb / "sts-test.csv").write_text("")
    with pytest.raises(DataFormatError, match=r"sts-test\.csv: 0 sentence pair\(s\)"):
        load_stsb("test", tmp_path)
    sick = tmp_path / "sts" / "SICK"
    sick.mkdir()
    (sick / "SICK_test_annotated.txt").write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment\n")
    with pytest.raises(DataFormatError, match=r"SICK_test_annotated\.txt: 0 sentence pair"):
        load_sick("test", tmp_path)


def test_missing_file_is_a_data_format_error(tmp_path: Path):
    with pytest.raises(DataFormatError, match="cannot read file"):
        load_sts_year("STS12", tmp_path)


def test_stsb_dev_score_on_toy_split(tmp_path: Path):
    stsb = tmp_path / "sts" / "STS" / "STSBenchmark"
    stsb.mkdir(parents=True)
    rows = [(10, 4.0), (80, 1.0), (40, 2.0), (20, 3.0)]
    (stsb / "sts-dev.csv").write_text("".join(f"g\tf\t2012\t{i}\t{g}\ta0\ta{k}\n" for i, (k, g) in enumerate(rows)))
    assert evaluate_stsb_dev(AngleEncoder(), data_dir=tmp_path) == pytest.approx(100)
