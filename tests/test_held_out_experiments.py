"""The default tier's experiment helpers: descriptions held out of the corpus, and weight interpolation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import load_script
from safetensors.numpy import load_file, save_file

from dictembed.description_corpus import Description
from dictembed.dictionary import Dictionary, split_by_headword


@pytest.fixture
def held_out(monkeypatch, tmp_path):
    """corpus_held_out.py over a toy dictionary of 40 words and a corpus of two descriptions of each."""
    script = load_script("experiments/corpus_held_out.py")
    dictionary = Dictionary(name="wordnet")
    for i in range(40):
        dictionary.add(f"w{i}", f"definition of w{i}", pos="n")
    corpus = [Description(f"{kind} description of w{i}", f"w{i}", "n", kind) for i in range(40) for kind in "ab"]
    path = tmp_path / "corpus.tsv"
    lines = ["description\tword\tpos\tstyle", *(f"{d.text}\t{d.word}\t{d.pos}\t{d.style}" for d in corpus)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(script, "load_dictionary", lambda name: dictionary)
    monkeypatch.setattr(script, "load_descriptions", lambda spec: corpus)
    monkeypatch.setattr(script, "CORPUS", path)
    return script, split_by_headword(dictionary, seed=0)


def test_taught_rows_describe_training_words_and_leave_the_corpus(held_out, tmp_path) -> None:
    script, splits = held_out
    rows = script.held_out_rows(0, 0, taught=True, words=5)
    assert len(rows) == 5 and len({word for _, word in rows}) == 5
    assert {word for _, word in rows} <= set(splits["train"].headwords)
    assert rows == script.held_out_rows(0, 0, taught=True, words=5)  # seeded
    rest = tmp_path / "rest.tsv"
    assert script.corpus_without(rows, rest) == 80 - 5
    kept = rest.read_text(encoding="utf-8").splitlines()
    assert kept[0].startswith("description\t") and not {line.split("\t")[0] for line in kept} & {t for t, _ in rows}


def test_untaught_rows_describe_dev_and_test_words_only(held_out) -> None:
    script, splits = held_out
    words = {word for _, word in script.held_out_rows(0, 0)}
    assert words == set(splits["dev"].headwords) | set(splits["test"].headwords)


def test_long_rows_are_the_long_descriptions_of_the_drawn_words(held_out, monkeypatch) -> None:
    script, _ = held_out
    longer = [Description(f"a longer description of w{i} as a noun", f"w{i}", "n", "long") for i in range(40)]
    longer.append(Description("a longer description of w0 as a verb", "w0", "v", "long"))
    monkeypatch.setattr(script, "read_corpus", lambda path: longer)
    rows, long_rows = script.held_out_rows(0, 0), script.held_out_rows(0, 0, long=True)
    assert [word for _, word in long_rows] == [word for _, word in rows]
    assert all(text == f"a longer description of {word} as a noun" for text, word in long_rows)  # its own sense


def test_interpolation_moves_each_weight_toward_the_base_and_drops_the_query_graph(tmp_path) -> None:
    script = load_script("experiments/weight_interpolation.py")
    base, trained = tmp_path / "base", tmp_path / "trained"
    base.mkdir()
    trained.mkdir()
    save_file({"w": np.ones((2, 3), np.float32)}, str(trained / "model.safetensors"))
    # the base holds a buffer the trained folder does not save (as the embedded model's position_ids)
    save_file({"w": np.zeros((2, 3), np.float32), "extra": np.ones(1, np.float32)}, str(base / "model.safetensors"))
    (trained / "dictembed.json").write_text(json.dumps({"base_model": str(base)}), encoding="utf-8")
    (trained / "onnx").mkdir()
    (trained / "entry_space").mkdir()
    script.interpolate(trained, 0.25, tmp_path / "out")
    blended = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert set(blended) == {"w"} and np.allclose(blended["w"], 0.25)
    assert (tmp_path / "out" / "entry_space").is_dir() and not (tmp_path / "out" / "onnx").exists()
    with pytest.raises(SystemExit, match="exists"):
        script.interpolate(trained, 0.5, tmp_path / "out")
