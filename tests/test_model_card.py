"""Model cards of real runs: a tiny DefSent+ trained and exported through the command line, its cards read back.

A card must name the folder the user got (never the staging folder it was written in) and show every resolved
setting of the run, including the method's own options nested in the record. Its YAML front matter carries the Hub
metadata: the weights' licence, the dictionary's languages, datasets and licences, and the figures in `model-index`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import TOY_WORDS

from dictembed.cli import main
from dictembed.dictionary.catalog import CATALOG
from dictembed.dictionary.load import SOURCES
from dictembed.model_card import render_model_card
from dictembed.model_folder import read_record
from dictembed.paths import EMBEDDED_MODEL


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
    options = read_record(trained, required=True).settings
    assert table["pooling"] == options["pooling"] == "mean"  # the `best` preset's, resolved
    assert table["entries"] == options["entries"] == "amp"
    assert table["similarity"] == options["similarity"] == "cosine"
    assert table["temperature"] == "0.1" and options["entry_temperature"] == 0.1
    assert table["preset"] == "best" and table["lr"] == "0.001"


def test_card_of_an_export_names_the_export_folder(trained: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "my-int8"
    assert main(["export", "--model", str(trained), "--output", str(out), "--quantize", "int8"]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "# my-int8" in card.splitlines() and ".export" not in card and ".partial" not in card
    # no torch weights: the loads of its graph, not Encoder.load
    assert 'OnnxQueryEncoder.open("path/to/my-int8")' in card and "Encoder.load(" not in card
    assert (
        'SentenceTransformer("path/to/my-int8", backend="onnx", model_kwargs={"file_name": "model_qint8.onnx"})' in card
    )
    table = _settings_table(card)
    assert (table["entries"], table["similarity"], table["temperature"]) == ("amp", "cosine", "0.1")
    kept = tmp_path / "kept"
    assert main(["export", "--model", str(trained), "--output", str(kept), "--quantize", "int8", "--keep-weights"]) == 0
    assert 'Encoder.load("path/to/kept")' in (kept / "README.md").read_text(encoding="utf-8")  # weights: as trained


def test_card_of_a_run_on_descriptions_counts_them_apart_from_the_definitions(trained: Path) -> None:
    record = read_record(trained, required=True)
    described = record.details["descriptions"]  # the `best` preset trains on the everyday descriptions too
    assert record.settings["descriptions"] == "everyday" and described > 0 and record.train_examples is not None
    card = (trained / "README.md").read_text(encoding="utf-8")
    section = card.split("## Dictionary\n", 1)[1].split("\n## ", 1)[0]
    assert f"| training definitions used | {record.train_examples - described} |" in section
    assert f"| training descriptions used | {described} |" in section
    assert f"trained on {described} descriptions of its training headwords from dictembed's everyday description" in (
        " ".join(section.split())
    )
    assert "| descriptions `everyday` | [MIT](https://opensource.org/license/mit) |" in card


# ----------------------------------------------------------------- Hub metadata
def _front_matter(card: str) -> dict[str, Any]:
    """The card's front matter, parsed as YAML."""
    empty, front, _ = card.split("---\n", 2)
    assert empty == ""
    return yaml.safe_load(front)


def _as_trained_on(folder: Path, dictionary: str, model: str) -> dict[str, Any]:
    """The folder's record as a run on `dictionary` from the Hub model `model` writes it (the dev figures kept)."""
    record = read_record(folder, required=True).to_dict()
    record["config"] |= {"dictionary": dictionary, "model": model}
    return record | {"data": dictionary, "base_model": model, "entry_encoder": model, "sources": {}}


def test_card_of_a_wordnet_run_carries_licences_languages_datasets_and_dev_figures(trained: Path) -> None:
    record = _as_trained_on(trained, "wordnet", EMBEDDED_MODEL)
    card = render_model_card(record, name="minilm-wordnet")
    meta = _front_matter(card)
    assert meta["base_model"] == EMBEDDED_MODEL and meta["license"] == "apache-2.0"
    assert meta["language"] == ["en"] and meta["datasets"] == ["wordnet", "dictembed-everyday-descriptions"]
    assert meta["dictionary_licenses"] == {"wordnet": "wordnet"}  # the descriptions are no dictionary
    (index,) = meta["model-index"]
    (result,) = index["results"]  # the run measured no test figure: STS-B dev alone, labelled dev
    assert index["name"] == "minilm-wordnet" and result["task"]["type"] == "sentence-similarity"
    assert result["dataset"] == {
        "name": "STS Benchmark (dev)",
        "type": "sentence-transformers/stsb",
        "split": "validation",
    }
    (metric,) = result["metrics"]
    assert metric["name"].endswith("(dev)") and metric["value"] == round(record["dev"]["stsb_dev"], 4)
    link = "[WordNet 3.0 license (BSD-like)](https://wordnet.princeton.edu/license-and-commercial-use)"
    assert f"| dictionary `wordnet` | {link} |" in card
    assert "| weights (base model `sentence-transformers/all-MiniLM-L6-v2`) | [Apache 2.0](" in card


def test_card_of_a_local_base_and_table_claims_no_licence(trained: Path) -> None:
    card = (trained / "README.md").read_text(encoding="utf-8")
    meta = _front_matter(card)
    assert "license" not in meta
    # the table has no known language or dataset: only the everyday descriptions the `best` preset trained on do
    assert meta["datasets"] == ["dictembed-everyday-descriptions"] and meta["language"] == ["en"]
    assert meta["dictionary_licenses"] == {"toy.tsv": "unknown"}
    assert "| dictionary `toy.tsv` | not known: see the source's own terms |" in card
    assert "not known: see the base model's own terms |" in card


@pytest.mark.parametrize(
    "model,dictionary,licence,languages,licences",
    [
        ("multilingual-e5-small", "cwn", "mit", ["zh"], {"cwn": "unknown"}),  # the offline name of the e5 model
        (
            "intfloat/multilingual-e5-small",
            "wordnet,cwn",
            "mit",
            ["en", "zh"],
            {"wordnet": "wordnet", "cwn": "unknown"},
        ),
        (
            "sentence-transformers/all-mpnet-base-v2",
            "wordnet,gcide",
            "apache-2.0",
            ["en"],
            {"wordnet": "wordnet", "gcide": "gpl-3.0"},
        ),
        ("roberta-base", "gcide", None, ["en"], {"gcide": "gpl-3.0"}),  # a base model whose licence is not known
    ],
)
def test_card_metadata_follows_the_base_model_and_dictionary(
    model: str, dictionary: str, licence: str | None, languages: list[str], licences: dict[str, str]
) -> None:
    meta = _front_matter(render_model_card({"base_model": model, "config": {"dictionary": dictionary}}))
    assert meta.get("license") == licence and meta["language"] == languages
    assert meta["datasets"] == list(licences) and meta["dictionary_licenses"] == licences
    assert "model-index" not in meta  # no figures, no model-index


@pytest.mark.parametrize(
    "offline,upstream",
    [
        ("multilingual-e5-small", "intfloat/multilingual-e5-small"),
        ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
    ],
)
def test_a_base_model_prepared_offline_links_its_upstream_repository(offline: str, upstream: str) -> None:
    card = render_model_card({"base_model": offline})
    assert _front_matter(card)["base_model"] == upstream
    base = card.split("## Base model\n\n", 1)[1].splitlines()[0]
    link = f"[{upstream}](https://huggingface.co/{upstream})"
    assert base == f"{link} (as `dictembed models prepare {offline}` builds it offline)"
    assert f"huggingface.co/{offline})" not in card


def test_every_named_dictionary_has_a_language_and_a_licence_entry() -> None:
    assert set(CATALOG) == set(SOURCES)


def test_sts_test_figures_of_a_record_come_before_the_dev_figure() -> None:
    record = {"dev": {"stsb_dev": 86.91}, "evaluation": {"sts": {"STSB": 83.44, "SICKR": 76.28, "avg": 80.92}}}
    (index,) = _front_matter(render_model_card(record, name="m"))["model-index"]
    rows = [(r["dataset"]["type"], r["dataset"]["split"], r["metrics"][0]["value"]) for r in index["results"]]
    assert rows == [
        ("sentence-transformers/stsb", "test", 83.44),
        ("mteb/sickr-sts", "test", 76.28),
        ("sentence-transformers/stsb", "validation", 86.91),
    ]
