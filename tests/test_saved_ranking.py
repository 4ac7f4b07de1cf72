"""A model folder's own ranking: the score's settings its record saves (`RunRecord.ranking`), set by `train
--descriptions` and `distil`, used by `ReverseDictionary.load`, `predict` and `serve` unless told otherwise, each
setting given set over it; a damaged one is a one-line error naming the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SERVED_WORDS, cli_refuses, cli_succeeds

from dictembed.cli import build_parser
from dictembed.cli.options import ranking_of
from dictembed.errors import DictEmbedError
from dictembed.model_folder import read_record, write_record
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import DESCRIBED_HEADWORD_WEIGHT, HEADWORD_WEIGHT, Ranking, ranking_over
from dictembed.served_dictionaries import open_served


def with_saved_ranking(source: Path, target: Path, ranking: dict) -> Path:
    """A copy of the model folder `source` whose record saves `ranking`."""
    shutil.copytree(source, target)
    record = read_record(target, required=True)
    record.ranking = ranking
    write_record(target, record)
    return target


def test_given_settings_go_over_the_saved_ones_and_a_whole_ranking_over_everything() -> None:
    saved = {"headword_weight": 0.8, "overlap_weight": 0.05}
    assert ranking_over({}) == Ranking()
    assert ranking_over(saved) == Ranking(headword_weight=0.8, overlap_weight=0.05)
    chosen = ranking_over(saved, {"headword_weight": 0.0, "min_frequency": 3})
    assert chosen == Ranking(headword_weight=0.0, overlap_weight=0.05, min_frequency=3.0)
    assert ranking_over(saved, Ranking(depth=50)) == Ranking(depth=50)  # a whole ranking is taken as it is


@pytest.mark.parametrize(
    "saved,given,message",
    [
        ({"headword": 1}, None, "model folder m's saved ranking: no setting 'headword'; choose from frequency_weight"),
        ({"headword_weight": -1}, None, "model folder m's saved ranking: headword_weight: a number from 0 to 1000"),
        ({"headword_weight": "high"}, None, "model folder m's saved ranking: headword_weight: a number from 0 to"),
        ({}, {"depth": 0}, "depth: a whole number >= 1, not 0"),
        ({}, {"weights": 1}, "ranking: no setting 'weights'"),
        ({}, [("headword_weight", 1)], "ranking: a search_options.Ranking or a dict of its settings, not list"),
    ],
)
def test_a_setting_no_ranking_takes_is_a_one_line_error(saved: dict, given, message: str) -> None:
    with pytest.raises(DictEmbedError, match=message.replace("(", r"\(")):
        ranking_over(saved, given, "model folder m")


def test_a_folder_is_searched_with_its_saved_ranking_unless_told_otherwise(served_model, tmp_path) -> None:
    plain = with_saved_ranking(served_model, tmp_path / "plain", {})  # as a folder trained on definitions alone
    assert ReverseDictionary.load(plain, device="cpu").ranking == Ranking()
    folder = with_saved_ranking(served_model, tmp_path / "described", {"headword_weight": 0.8})
    assert ReverseDictionary.load(folder, device="cpu").ranking.headword_weight == 0.8
    rd = ReverseDictionary.load(folder, device="cpu", ranking={"min_frequency": 3})
    assert (rd.ranking.headword_weight, rd.ranking.min_frequency) == (0.8, 3.0)
    assert ReverseDictionary.load(folder, device="cpu", ranking=Ranking()).ranking == Ranking()
    saved = ReverseDictionary.load(folder, device="cpu").search("a pet that barks", k=5)
    asked = ReverseDictionary.load(plain, device="cpu", ranking={"headword_weight": 0.8})
    assert [(r.words, r.score) for r in saved] == [(r.words, r.score) for r in asked.search("a pet that barks", k=5)]


def test_the_command_line_sets_only_what_it_is_given(served_model, tmp_path, capsys) -> None:
    parser = build_parser()
    assert ranking_of(parser.parse_args(["predict", "--model", "m", "q"])) == {}
    given = parser.parse_args(["predict", "--model", "m", "q", "--headword-weight", "0", "--min-frequency", "2"])
    assert ranking_of(given) == {"headword_weight": 0.0, "min_frequency": 2.0}
    plain = with_saved_ranking(served_model, tmp_path / "plain", {})
    folder = with_saved_ranking(served_model, tmp_path / "described", {"headword_weight": 2.0})

    def scores(model: Path, *options: str) -> list[float]:
        out, _ = cli_succeeds(capsys, ["predict", "--model", str(model), "a pet that barks", "--json", *options])
        return [result["score"] for result in json.loads(out)]

    assert scores(folder) == scores(plain, "--headword-weight", "2")
    assert scores(folder, "--headword-weight", str(HEADWORD_WEIGHT)) == scores(plain)
    assert scores(folder) != scores(plain)


def test_served_folders_sharing_an_encoder_keep_their_own_rankings(served_model, tmp_path, capsys) -> None:
    other = tmp_path / "other.tsv"
    other.write_text("word\tdefinition\npuppy\ta young dog\nkitten\ta young cat\n")
    argv = ["index", "--model", str(served_model), "--dictionary", str(other), "--output", str(tmp_path / "other")]
    cli_succeeds(capsys, [*argv, "--device", "cpu"])
    folder = with_saved_ranking(tmp_path / "other", tmp_path / "described", {"headword_weight": 0.8})
    first = with_saved_ranking(served_model, tmp_path / "plain", {})
    plain, described = open_served([first, folder], device="cpu", ranking={"overlap_weight": 0})
    assert plain.rd.encoder is described.rd.encoder  # one encoder loaded for both
    assert (plain.rd.ranking.headword_weight, described.rd.ranking.headword_weight) == (HEADWORD_WEIGHT, 0.8)
    assert plain.rd.ranking.overlap_weight == described.rd.ranking.overlap_weight == 0


def test_a_damaged_saved_ranking_is_refused_naming_the_folder(served_model, tmp_path, capsys) -> None:
    folder = with_saved_ranking(served_model, tmp_path / "damaged", {"headword_weight": -2})
    cli_refuses(capsys, ["predict", "--model", str(folder), "a pet"], str(folder), "headword_weight")
    record = json.loads((folder / "dictembed.json").read_text())
    record["ranking"] = [0.8]
    (folder / "dictembed.json").write_text(json.dumps(record))
    cli_refuses(capsys, ["predict", "--model", str(folder), "a pet"], "dictembed.json", "ranking is list")


def test_training_on_descriptions_saves_the_described_headword_weight(bert_path, tmp_path, capsys) -> None:
    """`train --descriptions` saves its folder's headword weight, which its export keeps and its card states."""
    tsv = tmp_path / "words.tsv"
    tsv.write_text("word\tdefinition\tpos\n" + "".join(f"{w}\t{d}\t{p}\n" for w, d, p in SERVED_WORDS))
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("description\tword\n" + "".join(f"the {w} you know\t{w}\n" for w, _, _ in SERVED_WORDS))
    out = tmp_path / "described"
    argv = ["train", "--model", str(bert_path), "--dictionary", str(tsv), "--descriptions", str(corpus)]
    cli_succeeds(capsys, [*argv, "--output", str(out), "--lr-grid", "1e-3", "--device", "cpu"])
    assert read_record(out, required=True).ranking == {"headword_weight": DESCRIBED_HEADWORD_WEIGHT}
    assert ReverseDictionary.load(out, device="cpu").ranking.headword_weight == DESCRIBED_HEADWORD_WEIGHT
    assert f"`headword_weight` {DESCRIBED_HEADWORD_WEIGHT}" in (out / "README.md").read_text()
    cli_succeeds(capsys, ["export", "--model", str(out), "--output", str(tmp_path / "exported")])
    assert ReverseDictionary.load(tmp_path / "exported").ranking.headword_weight == DESCRIBED_HEADWORD_WEIGHT
