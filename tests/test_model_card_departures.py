"""What a model card says of where a run departs from its dictionary and its paper, and what a DefSent folder keeps.

The card counts the definitions and the descriptions a run trained on apart and names the description corpus (with
its licence, and among the Hub datasets when it is the shipped one); it says when DefSent fell back to the input word
embeddings, and when GR-BERT trained a new MLM head; its results text describes only the metrics the record holds. A
DefSent folder names no path of the machine that trained it, in any of its files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import TOY_WORDS, tiny_bert
from transformers import AutoTokenizer

from dictembed.cli import main
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.model_card import render_model_card
from dictembed.model_folder import read_record
from dictembed.paths import EMBEDDED_MODEL
from dictembed.saved_entry_space import load_entry_space

CORPUS = "dictembed-everyday-descriptions"


def _front_matter(card: str) -> dict[str, Any]:
    _, front, _ = card.split("---\n", 2)
    return yaml.safe_load(front)


def _section(card: str, title: str) -> str:
    return card.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _train_defsent(model: Path, root: Path, name: str) -> Path:
    """`dictembed train --method defsent` of `model` on TOY_WORDS, into `root/name`."""
    toy = root / "toy.tsv"
    toy.write_text("word\tdefinition\tpos\n" + "".join(f"{w}\t{d}\tn\n" for w, ds in TOY_WORDS.items() for d in ds))
    out = root / name
    argv = ["train", "--method", "defsent", "--model", str(model), "--dictionary", str(toy), "--output", str(out)]
    assert main([*argv, "--lr-grid", "1e-3", "--device", "cpu"]) == 0
    return out


# ----------------------------------------------------------------- definitions and descriptions
def _record(descriptions: str | None, count: int | None, dictionary: str = "wordnet") -> dict[str, Any]:
    """A DefSent+ record of 20,000 definitions (`--limit 20000`) and `count` descriptions from `descriptions`."""
    options = {"descriptions": descriptions or ""}
    config = {"method": "defsent-plus", "dictionary": dictionary, "limit": 20_000, "options": options}
    record: dict[str, Any] = {"method": "defsent-plus", "data": dictionary, "config": config}
    record["train_examples"] = 20_000 + (count or 0)
    if count is not None:
        record["details"] = {"descriptions": count}
    return record


def test_a_limit_of_definitions_and_the_everyday_descriptions_are_counted_apart() -> None:
    card = render_model_card(_record("everyday", 5_000))
    dictionary = _section(card, "Dictionary")
    assert "| training definitions used | 20000 |" in dictionary
    assert "| training descriptions used | 5000 |" in dictionary
    assert "trained on 5,000 descriptions of its training headwords from dictembed's everyday description corpus" in (
        dictionary.replace("\n", " ")
    )
    assert "MIT licence" in dictionary and "`src/dictembed/corpus/`" in dictionary
    meta = _front_matter(card)
    assert meta["datasets"] == ["wordnet", CORPUS] and meta["language"] == ["en"]
    assert meta["dictionary_licenses"] == {"wordnet": "wordnet"}  # the corpus is no dictionary
    assert "| descriptions `everyday` | [MIT](https://opensource.org/license/mit) |" in _section(card, "License")


def test_the_corpus_with_its_long_descriptions_is_named_as_such() -> None:
    card = render_model_card(_record("everyday-long", 5_000))
    assert "dictembed's everyday description corpus with its long descriptions" in card.replace("\n", " ")
    assert _front_matter(card)["datasets"] == ["wordnet", CORPUS]
    assert "| descriptions `everyday-long` | [MIT](https://opensource.org/license/mit) |" in _section(card, "License")


@pytest.mark.parametrize("spec,count", [("everyday", 0), ("everyday", None), (None, None)])
def test_a_run_without_descriptions_claims_none(spec: str | None, count: int | None) -> None:
    card = render_model_card(_record(spec, count))  # e.g. `everyday` left out beside a non-English dictionary
    assert "| training definitions used | 20000 |" in card
    assert "descriptions" not in _section(card, "Dictionary") and "descriptions `" not in card
    assert _front_matter(card)["datasets"] == ["wordnet"]


def test_a_description_file_is_named_without_a_licence_or_a_dataset(tmp_path: Path) -> None:
    card = render_model_card(_record("mine.tsv", 40, dictionary="toy.tsv"))
    assert "from the description file `mine.tsv`" in _section(card, "Dictionary")
    assert "| descriptions `mine.tsv` | not known: see the source's own terms |" in card
    assert not {"datasets", "language"} & set(_front_matter(card))


# ----------------------------------------------------------------- DefSent's word-embedding fallback
@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DefSent of a tiny BERT without an MLM head: `--space auto` falls back to the input word embeddings."""
    root = tmp_path_factory.mktemp("fallback")
    return _train_defsent(tiny_bert(root / "headless", head=False), root, "ds-fallback")


def test_the_card_of_a_fallback_run_says_it_is_not_the_papers_method(fallback: Path) -> None:
    assert read_record(fallback, required=True).entry_space == "word-embeddings"
    card = (fallback / "README.md").read_text(encoding="utf-8")
    title = card.split("# ds-fallback\n\n", 1)[1].splitlines()[0]
    assert title.startswith("A sentence-embedding model trained with DefSent (the word-embedding fallback instead ")
    method = " ".join(_section(card, "Method").split())
    assert "**Not the paper's method.**" in method and "because the base model has no pre-trained MLM head" in method
    assert "the frozen input word embeddings" in method
    citation = _section(card, "Citation")
    assert citation.index("trained with the word-embedding fallback") < citation.index("@inproceedings")


def test_a_defsent_card_with_the_mlm_head_makes_no_such_claim() -> None:
    record = {"method": "defsent", "entry_space": "mlm-head", "config": {"method": "defsent", "space": "auto"}}
    card = render_model_card(record)
    assert "fallback" not in card and "Not the paper's method" not in card
    chosen = {"method": "defsent", "entry_space": "word-embeddings", "config": {"space": "word-embeddings"}}
    assert "as asked (`--space word-embeddings`)" in render_model_card(chosen)


# ----------------------------------------------------------------- GR-BERT
def _gr_bert(base: str, **details: Any) -> dict[str, Any]:
    """A GR-BERT record as the recipe writes it: triplets trained on, gloss matching and STS-B dev figures."""
    dev = {"gloss_acc": 41.5, "gloss_loss": 1.52, "stsb_dev": 71.2}
    details = {"pooling": "first_last_avg", **details}
    config = {"method": "gr-bert", "model": base, "dictionary": "oxford,chang,wordnet-examples,wordnet"}
    record = {"method": "gr-bert", "base_model": base, "config": config, "train_examples": 8}
    return record | {"dev": dev, "details": details}


def test_a_gr_bert_card_describes_only_its_own_metrics() -> None:
    card = render_model_card(_gr_bert("bert-base-uncased"))
    results = _section(card, "Results")
    text = results.splitlines()[1]
    assert "`stsb_dev`" in text and "`gloss_acc`" in text and "`gloss_loss`" in text
    assert not any(metric in text for metric in ("mrr", "top1", "top10", "reverse dictionary"))
    assert "| gloss_acc | 41.5 |" in results
    assert "| training triplets used (word, example, gloss) | 8 |" in card and "training definitions used" not in card
    assert "new one was initialised" not in card  # BERT's checkpoint has its pre-trained head


@pytest.mark.parametrize(
    "base,details,new",
    [
        (EMBEDDED_MODEL, {}, True),  # all-MiniLM-L6-v2 is saved without an MLM head
        ("my-local-bert", {"new_mlm_head": True}, True),  # as the record says
        (EMBEDDED_MODEL, {"new_mlm_head": False}, False),
        ("my-local-bert", {}, False),  # not known: nothing claimed
    ],
)
def test_a_gr_bert_card_says_when_its_mlm_head_was_new(base: str, details: dict[str, Any], new: bool) -> None:
    method = " ".join(_section(render_model_card(_gr_bert(base, **details)), "Method").split())
    assert ("The base model has no MLM head: a new one was initialised" in method) is new


# ----------------------------------------------------------------- no path of the training machine
def test_an_mlm_head_space_saves_no_path_and_loads_as_it_was(bert_path: Path, tmp_path: Path) -> None:
    model = tmp_path / "machine-local" / "tiny"
    shutil.copytree(bert_path, model)
    space = MLMHeadSpace.from_pretrained(str(model), list(TOY_WORDS), AutoTokenizer.from_pretrained(str(model)))
    saved = space.save(tmp_path / "out")
    meta = json.loads((saved / "space.json").read_text(encoding="utf-8"))
    assert str(model) not in (saved / "space.json").read_text(encoding="utf-8")
    assert not [key for key in meta["model_config"] if key.startswith("_")]
    loaded = load_entry_space(tmp_path / "out")
    h = torch.randn(3, 32)
    assert isinstance(loaded, MLMHeadSpace) and loaded.words == space.words
    torch.testing.assert_close(loaded.scores(h), space.scores(h))
    meta["model_config"]["_name_or_path"] = str(model)  # a space saved before: still loads, and saves without it
    (saved / "space.json").write_text(json.dumps(meta), encoding="utf-8")
    again = load_entry_space(tmp_path / "out")
    torch.testing.assert_close(again.scores(h), space.scores(h))
    assert "_name_or_path" not in json.loads((again.save(tmp_path / "again") / "space.json").read_text())


def test_a_defsent_folder_names_no_path_of_the_training_machine(
    bert_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("machine")
    model = root / "models" / "tiny"
    shutil.copytree(bert_path, model)
    out = _train_defsent(model, root, "ds")
    assert read_record(out, required=True).entry_space == "mlm-head"
    files = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.name == "space.json" for path in files)
    for path in files:  # every file, weights too: a path inside a binary is as public
        data = path.read_bytes()
        assert str(model).encode() not in data and str(root).encode() not in data, path
    assert isinstance(load_entry_space(out), MLMHeadSpace)
    assert main(["predict", "--model", str(out), "--top-k", "3", "a loyal pet that barks"]) == 0


def test_a_distilled_students_texts_are_counted_by_kind() -> None:
    texts = {"descriptions": 30, "definitions": 50, "words": 20}
    record = {"method": "query-distillation", "data": "wordnet", "train_examples": 100, "details": {"texts": texts}}
    rows = _section(render_model_card(record), "Dictionary")
    assert "| training definitions used | 50 |" in rows and "| training headwords used | 20 |" in rows
    assert "| training descriptions used | 30 |" in rows
