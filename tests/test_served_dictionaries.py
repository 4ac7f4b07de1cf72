"""`dictembed serve --model F1 --model F2`: several dictionaries, each labelled with its language and name, the one a
search targets (`lang=`, `dictionary=`), one loaded encoder for identical ones, and the labels' languages."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EN_WORDS, ZH_WORDS, cli_refuses

from dictembed.served_dictionaries import languages_of, named_language


@pytest.fixture(scope="module")
def client(language_folders):
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    return TestClient(create_app([language_folders["en"], language_folders["zh"]], device="cpu"))


def _reverse(client, status: int = 200, **params) -> dict:
    response = client.get("/api/reverse", params=params)
    assert response.status_code == status, response.text
    return response.json()


def _words(answer: dict) -> list[str]:
    return [word for result in answer["results"] for word in result["words"]]


def test_health_lists_every_served_dictionary(client) -> None:
    health = client.get("/health").json()
    assert health["dictionaries"] == [
        {"dictionary": "en.tsv", "language": "en", "entries": len(EN_WORDS), "model": "en-folder"},
        {"dictionary": "zh.tsv", "language": "zh", "entries": len(ZH_WORDS), "model": "zh-folder"},
    ]
    assert health["model"] == "en-folder" and health["language"] == "en"  # the first is the default


@pytest.mark.parametrize(
    ("params", "language", "words"),
    [
        ({"lang": "zh"}, "zh", ZH_WORDS),
        ({"lang": "en"}, "en", EN_WORDS),
        ({}, "en", EN_WORDS),  # the default: the first folder's
        ({"dictionary": "zh.tsv"}, "zh", ZH_WORDS),
        ({"lang": "zh", "dictionary": "zh.tsv"}, "zh", ZH_WORDS),
    ],
)
def test_the_target_language_chooses_the_dictionary(client, params, language, words) -> None:
    for query in ("a domesticated animal that barks", "会汪汪叫的宠物"):  # English and Chinese descriptions
        answer = _reverse(client, q=query, k=100, **params)
        assert sorted(_words(answer)) == sorted(words)  # every entry of that dictionary, and no other
        assert answer["language"] == language and answer["dictionary"] == f"{language}.tsv"
        assert {(r["language"], r["dictionary"]) for r in answer["results"]} == {(language, f"{language}.tsv")}


def test_a_word_of_the_target_dictionary_lists_its_neighbours_there(client) -> None:
    answer = _reverse(client, q="狗", lang="zh", mode="similar", k=3)
    assert answer["mode"] == "similar" and answer["entry"] == "狗"
    assert "狗" not in _words(answer) and set(_words(answer)) <= set(ZH_WORDS)
    assert _reverse(client, 422, q="狗", lang="en", mode="similar")["error"].endswith("mode similar needs one")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"lang": "fr"}, "lang: no dictionary in 'fr' is served; served: en (en.tsv), zh (zh.tsv)"),
        ({"dictionary": "wordnet"}, "dictionary: 'wordnet' is not served; served: en (en.tsv), zh (zh.tsv)"),
        ({"lang": "en", "dictionary": "zh.tsv"}, "lang: the dictionary 'zh.tsv' is in zh, not 'en'"),
    ],
)
def test_a_language_or_dictionary_not_served_is_a_422_naming_the_served_ones(client, params, message) -> None:
    assert _reverse(client, 422, q="a pet", **params) == {"error": message}


def test_identical_encoders_are_loaded_once(client, language_folders, tmp_path) -> None:
    import json
    import shutil

    from dictembed.model_folder import ModelFolder
    from dictembed.served_dictionaries import encoder_key

    served = client.app.state.served.dictionaries.served
    assert served[0].rd.encoder is served[1].rd.encoder
    en, zh = (encoder_key(ModelFolder.open(language_folders[language])) for language in ("en", "zh"))
    assert en is not None and en == zh
    other = Path(shutil.copytree(language_folders["en"], tmp_path / "cls"))  # the same weights, pooled otherwise
    record = json.loads((other / "dictembed.json").read_text())
    record["encoder"]["pooling"] = "cls"
    (other / "dictembed.json").write_text(json.dumps(record))
    assert encoder_key(ModelFolder.open(other)) not in (None, en)


def test_the_weights_digest_leaves_out_the_pooler_no_vector_passes_through(language_folders, tmp_path) -> None:
    """A checkpoint without a pooler gets a fresh random one at every load, so two saves of one model differ in it
    alone: they are the same encoder. Any other tensor makes another."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from dictembed.served_dictionaries import weights_digest

    original = language_folders["en"] / "model.safetensors"
    tensors = load_file(str(original))
    name = next(n for n in tensors if n.endswith("word_embeddings.weight"))
    pooler = np.random.default_rng(0).normal(size=(32, 32)).astype(np.float32)
    save_file({**tensors, "pooler.dense.weight": pooler}, str(tmp_path / "pooler.safetensors"))
    save_file({**tensors, name: tensors[name] + 1e-3}, str(tmp_path / "other.safetensors"))
    assert weights_digest(tmp_path / "pooler.safetensors") == weights_digest(original)
    assert weights_digest(tmp_path / "other.safetensors") != weights_digest(original)


def test_one_folder_serves_as_before_with_its_results_labelled(language_folders) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    client = TestClient(create_app(language_folders["zh"], device="cpu"))
    answer = _reverse(client, q="a domesticated animal that barks", k=100)
    assert sorted(_words(answer)) == sorted(ZH_WORDS) and answer["language"] == "zh"
    assert _reverse(client, 422, q="a pet", lang="en")["error"].endswith("served: zh (zh.tsv)")


def test_serve_refuses_a_dictionary_for_several_folders(language_folders, tmp_path, capsys) -> None:
    en, zh = (str(language_folders[language]) for language in ("en", "zh"))
    tsv = tmp_path / "other.tsv"
    tsv.write_text("word\tdefinition\ndog\ta pet\n")
    argv = ["serve", "--model", en, "--model", zh, "--dictionary", str(tsv), "--port", "0"]
    cli_refuses(capsys, argv, "--dictionary", "one model folder", code=2)


def test_a_dictionary_served_twice_is_refused(language_folders) -> None:
    from dictembed.errors import DictEmbedError
    from dictembed.serve import create_app

    with pytest.raises(DictEmbedError, match="'en.tsv' is served by several model folders"):
        create_app([language_folders["en"], language_folders["en"]], device="cpu")


@pytest.mark.parametrize(
    ("name", "words", "language", "prior"),
    [
        ("cc-cedict", ["银行", "河岸", "水"], "zh", "auto"),  # the catalogue's language; the headwords tell it too
        ("jmdict", ["銀行", "川", "水"], "ja", "ja"),  # the catalogue's
        ("wordnet,gcide", ["house", "dog"], "en", "auto"),  # names of one language
        ("mine.tsv", ["écureuil", "mouchoir", "chaussure", "fenêtre", "maison"], "fr", "auto"),  # its headwords tell it
        ("mine.tsv", ["Eichhörnchen", "Schmetterling", "Regenschirm", "Fenster"], "de", "auto"),
        ("mine.tsv", ["собака", "кошка", "дом"], "ru", "auto"),
        ("mine.tsv", ["qzxvw", "jjkqp"], "und", None),  # neither
        ("wordnet,cwn", ["house", "dog", "run"], "en", "auto"),  # names of two languages: the headwords tell it
    ],
)
def test_a_dictionary_is_labelled_with_its_language(name, words, language, prior) -> None:
    assert languages_of(name, words) == (language, prior)


def test_the_catalogue_names_the_language_of_named_dictionaries_only() -> None:
    assert named_language("cc-cedict") == "zh" and named_language("wordnet,gcide") == "en"
    assert named_language("wordnet,cwn") is None and named_language("mine.tsv") is None


def test_the_prior_has_no_frequencies_for_a_language_it_does_not_cover(monkeypatch, caplog) -> None:
    import importlib.util

    from dictembed.word_frequency import entry_frequencies

    assert entry_frequencies(["은행", "강"], "ko") is None  # no Korean: no prior, no error
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "MeCab" else find_spec(name, *a))
    assert entry_frequencies(["銀行", "川"], "ja") is None  # Japanese without MeCab: no prior, the extra named
    assert "pip install 'dictembed[ja]'" in caplog.text
    french = entry_frequencies(["maison", "qzxvw"], "fr")
    assert french is not None and french[0] > 4 and french[1] == 0
