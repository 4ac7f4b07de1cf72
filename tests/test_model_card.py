"""Model cards of real runs: a tiny DefSent+ trained and exported through the command line, its cards read back.

A card must name the folder the user got (never the staging folder it was written in) and show every resolved
setting of the run, including the method's own options nested in the record.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TOY_WORDS

from dictembed.cli import main
from dictembed.record import RunRecord


def _settings_table(card: str) -> dict[str, str]:
    """The rows of the card's "Training and encoder settings" table."""
    section = card.split("## Training and encoder settings", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]*?) \|$", section, flags=re.MULTILINE)
    return {key: value for key, value in rows if key not in ("setting", "---")}


@pytest.fixture(scope="module")
def trained(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("card")
    toy = root / "toy.tsv"
    toy.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, defs in TOY_WORDS.items() for d in defs))
    out = root / "my-defsent-plus"
    argv = ["train", "--model", str(bert_path), "--dictionary", str(toy), "--output", str(out)]
    argv += ["--lr-grid", "1e-3", "--entry-temperature", "0.1", "--device", "cpu"]
    assert main(argv) == 0
    return out


def test_card_of_a_trained_model_names_its_folder_and_every_setting(trained: Path) -> None:
    card = (trained / "README.md").read_text(encoding="utf-8")
    assert card.splitlines()[card.splitlines().index("---", 1) + 2] == "# my-defsent-plus"
    assert ".partial" not in card
    assert 'SentenceTransformer("path/to/my-defsent-plus")' in card
    assert 'dictembed predict --model path/to/my-defsent-plus "a long-necked African animal"' in card
    table = _settings_table(card)
    options = RunRecord.load(trained, required=True).config.options
    assert table["pooling"] == options.pooling == "mean"  # the `best` preset's, resolved
    assert table["entries"] == options.entries == "amp"
    assert table["similarity"] == options.similarity == "cosine"
    assert table["temperature"] == "0.1" and options.entry_temperature == 0.1
    assert table["preset"] == "best" and table["lr"] == "0.001"


def test_card_of_an_export_names_the_export_folder(trained: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "my-int8"
    assert main(["export", "--model", str(trained), "--output", str(out), "--quantize", "int8"]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "# my-int8" in card.splitlines() and ".export" not in card and ".partial" not in card
    assert 'Encoder.load("path/to/my-int8")' in card
    table = _settings_table(card)
    assert (table["entries"], table["similarity"], table["temperature"]) == ("amp", "cosine", "0.1")
