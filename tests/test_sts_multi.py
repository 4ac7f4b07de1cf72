"""Multilingual STS-B (`evaluation.sts_multi`, `dictembed evaluate sts-multi`) on tiny synthetic CSV files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_refuses, cli_succeeds

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.sts_multi import STS_MULTI_LANGUAGES, evaluate_sts_multi, load_sts_multi

# fr: pairs whose cosines fall with their angle gaps 15, 25, 35, 45 degrees; gold 4.8, 3.5, 3.8, 0.2, so the
# ranks differ by d = 0, 1, -1, 0 -> Spearman = 1 - 6 * 2 / (4 * 15) = 0.8. The first field holds a comma.
FR_TEST = (
    '"Un chat, noir",Un chat noir,4.8\r\n'
    "Il pleut,Il fait beau,3.5\r\n"
    'Un chien,"Il a dit ""non"".",3.8\r\n'
    "Un chat noir,Une voiture,0.2\r\n"
)
# en: gaps 10, 20, 30 with gold 5, 2.5, 0 -> Spearman 1; "a cat" appears twice.
EN_TEST = "a cat,a kitten,5.0\na dog,a wolf,2.5\na cat,a car,0\n"
ANGLES = {
    "Un chat, noir": 0,
    "Un chat noir": 15,
    "Il pleut": 100,
    "Il fait beau": 125,
    'Il a dit "non".': 235,
    "Un chien": 200,
    "Une voiture": 60,
    "a cat": 0,
    "a kitten": 10,
    "a dog": 50,
    "a wolf": 70,
    "a car": 30,
}


class AngleEncoder:
    """Each sentence -> the unit vector at its angle in ANGLES (degrees); records every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        angles = np.radians([ANGLES[s] for s in sentences])
        return np.stack([np.cos(angles), np.sin(angles)], axis=1)


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """fr and en test files (no dev files) in a data folder that $DICTEMBED_DATA_DIR points at."""
    folder = tmp_path / "sts_multi"
    folder.mkdir()
    (folder / "stsb-fr-test.csv").write_bytes(FR_TEST.encode())
    (folder / "stsb-en-test.csv").write_text(EN_TEST)
    monkeypatch.setenv("DICTEMBED_DATA_DIR", str(tmp_path))
    return folder


def test_eleven_languages() -> None:
    assert STS_MULTI_LANGUAGES == ("en", "de", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")


def test_loader_reads_quoted_fields(data: Path) -> None:
    fr = load_sts_multi("fr")
    assert fr.sentences1 == ["Un chat, noir", "Il pleut", "Un chien", "Un chat noir"]
    assert fr.sentences2 == ["Un chat noir", "Il fait beau", 'Il a dit "non".', "Une voiture"]
    assert fr.scores.tolist() == [4.8, 3.5, 3.8, 0.2]
    assert fr.name == "STSB-fr/test"


def test_spearman_and_avg_hand_computed(data: Path) -> None:
    model = AngleEncoder()
    result = evaluate_sts_multi(model, ["fr", "en"])
    assert list(result) == ["fr", "en", "avg"]
    assert result["fr"] == pytest.approx(80.0)
    assert result["en"] == pytest.approx(100.0)
    assert result["avg"] == pytest.approx(90.0)
    assert len(model.calls) == 2  # one call per language, each distinct sentence once
    assert sorted(model.calls[1]) == sorted(["a cat", "a kitten", "a dog", "a wolf", "a car"])


def test_data_dir_argument_overrides_the_environment(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DICTEMBED_DATA_DIR", str(data / "nowhere"))
    assert evaluate_sts_multi(AngleEncoder(), ["en"], data_dir=data.parent) == pytest.approx({"en": 100, "avg": 100})


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("une phrase,3.0", "expected 3 comma-separated columns"),
        ("a,b,c,4.0", "got 4"),
        ("a,b,beaucoup", "'beaucoup' is not a number"),
        ("a,b,7.5", "outside 0-5"),
        ("a,b,nan", "'nan' is not a number"),
        ("a,b,0_5", "'0_5' is not a number"),  # float() reads 0_5 as 5.0
    ],
)
def test_malformed_row_names_file_and_line(data: Path, row: str, message: str) -> None:
    (data / "stsb-fr-test.csv").write_text(f"a,b,1.0\nc,d,2.0\n{row}\n")
    with pytest.raises(DataFormatError) as caught:
        load_sts_multi("fr")
    text = str(caught.value)
    assert "stsb-fr-test.csv:3: " in text and message in text and "\n" not in text


@pytest.mark.parametrize("rows", ["", "a,b,1.0\n"])
def test_fewer_than_two_pairs_name_the_file(data: Path, rows: str) -> None:
    (data / "stsb-fr-test.csv").write_text(rows)
    with pytest.raises(DataFormatError, match=r"stsb-fr-test\.csv: [01] sentence pair\(s\); a Spearman correlation"):
        load_sts_multi("fr")


def test_missing_file_names_it_and_the_languages_there(data: Path) -> None:
    with pytest.raises(DictEmbedError, match=r"stsb-de-test\.csv: not found; test files there for: en, fr$"):
        load_sts_multi("de")
    (data / "stsb-de-test.csv").mkdir()  # there, but no file: named as what it is
    with pytest.raises(DataFormatError, match=r"stsb-de-test\.csv: cannot read file \(it is a folder\)$"):
        load_sts_multi("de")
    with pytest.raises(DictEmbedError, match="stsb-en-dev.csv: not found; dev files there for: no language"):
        evaluate_sts_multi(AngleEncoder(), ["en"], split="dev")
    with pytest.raises(DictEmbedError, match="unknown STS-B language 'xx'; expected one of en, de, es"):
        load_sts_multi("xx")
    with pytest.raises(DictEmbedError, match="unknown STS-B split 'train'"):
        load_sts_multi("en", "train")


def test_nothing_is_encoded_before_every_file_is_found(data: Path) -> None:
    model = AngleEncoder()
    with pytest.raises(DictEmbedError, match="stsb-ja-test.csv"):
        evaluate_sts_multi(model, ["en", "ja"])
    assert model.calls == []


def test_cli_refuses_unknown_language_and_missing_file(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli_refuses(capsys, ["evaluate", "sts-multi", "--languages", "fr,xx"], "--languages", "xx", "en, de", code=2)
    cli_refuses(capsys, ["evaluate", "sts-multi", "--languages", "fr,de"], "stsb-de-test.csv", "en, fr")
    cli_refuses(capsys, ["evaluate", "sts-multi"], "stsb-de-test.csv")  # default: all eleven languages


def test_cli_on_the_tiny_bert(data: Path, bert_path: Path, capsys: pytest.CaptureFixture[str], restore_log_level):
    from dictembed.encoder import Encoder

    argv = ["evaluate", "sts-multi", "--model", str(bert_path), "--languages", "en,fr", "--device", "cpu", "--json"]
    out, err = cli_succeeds(capsys, argv)
    result = json.loads(out)
    assert list(result) == ["en", "fr", "avg"]
    assert all(math.isfinite(v) and -100 <= v <= 100 for v in result.values())
    assert result["avg"] == pytest.approx((result["en"] + result["fr"]) / 2)
    assert "multilingual STS-B test" in err
    encoder = Encoder.load(str(bert_path), device="cpu")
    assert evaluate_sts_multi(encoder, ["en", "fr"]) == pytest.approx(result)


def test_default_prompt_is_prefixed_by_the_model(data: Path, bert_path: Path) -> None:
    """A model with a default prompt (multilingual-e5's "query: ") gets it from its own `encode`, as in STS."""
    from dictembed.encoder import Encoder

    encoder = Encoder.load(str(bert_path), device="cpu")
    encoder.prompts, encoder.default_prompt_name = {"query": "query: "}, "query"
    prompted = evaluate_sts_multi(encoder, ["fr"])

    class ByHand:
        def encode(self, sentences: list[str]) -> np.ndarray:
            return np.asarray(encoder.encode(["query: " + s for s in sentences], prompt=""))

    assert prompted == pytest.approx(evaluate_sts_multi(ByHand(), ["fr"]))
    assert not np.allclose(encoder.encode(["Il pleut"]), encoder.encode(["Il pleut"], prompt=""))


def test_dev_score_in_a_language_reads_its_dev_file(data: Path) -> None:
    from dictembed.evaluation.sts_multi import evaluate_sts_dev

    (data / "stsb-fr-dev.csv").write_bytes(FR_TEST.encode())
    assert evaluate_sts_dev(AngleEncoder(), "fr") == pytest.approx(80.0)
    with pytest.raises(DictEmbedError, match="stsb-ru-dev.csv: not found"):
        evaluate_sts_dev(AngleEncoder(), "ru")
