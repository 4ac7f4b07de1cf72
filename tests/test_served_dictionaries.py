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


# ------------------------------------------------------------- one dictionary, encoders of different languages
ENGLISH_ONLY, MULTILINGUAL = "sentence-transformers/all-MiniLM-L6-v2", "intfloat/multilingual-e5-small"


def _as_base(folder: Path, base_model: str, to: Path, noise: float = 0.0) -> Path:
    """A copy of `folder` whose record names `base_model`; with `noise`, its word embeddings moved (another
    encoder, whose query vectors, and so scores, differ)."""
    import json
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    copy = Path(shutil.copytree(folder, to))
    record = json.loads((copy / "dictembed.json").read_text())
    (copy / "dictembed.json").write_text(json.dumps({**record, "base_model": base_model}))
    if noise:
        tensors = load_file(str(copy / "model.safetensors"))
        name = next(n for n in tensors if n.endswith("word_embeddings.weight"))
        moved = tensors[name] + np.random.default_rng(0).normal(0, noise, tensors[name].shape).astype(np.float32)
        save_file({**tensors, name: moved}, str(copy / "model.safetensors"))
    return copy


@pytest.fixture(scope="module")
def reader_folders(language_folders, tmp_path_factory) -> dict[str, Path]:
    """zh.tsv (Chinese headwords, English glosses, as CC-CEDICT's) in two folders of distinct encoders, one named
    English-only by its base model, one multilingual."""
    root = tmp_path_factory.mktemp("readers")
    return {
        "english": _as_base(language_folders["zh"], ENGLISH_ONLY, root / "zh-english"),
        "multilingual": _as_base(language_folders["zh"], MULTILINGUAL, root / "zh-multilingual", noise=0.5),
    }


@pytest.fixture(scope="module")
def reader_clients(reader_folders) -> dict[str, object]:
    """Apps serving both reader folders, and each alone."""
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    both = [reader_folders["english"], reader_folders["multilingual"]]
    alone = {kind: TestClient(create_app(folder, device="cpu")) for kind, folder in reader_folders.items()}
    return {"both": TestClient(create_app(both, device="cpu")), **alone}


def _ranked(answer: dict) -> list[tuple[list[str], float]]:
    return [(result["words"], result["score"]) for result in answer["results"]]


@pytest.mark.parametrize(
    ("query", "reader"),
    [
        ("a domesticated animal that barks", "english"),  # English: the English-only specialist
        ("会汪汪叫的宠物", "multilingual"),  # Chinese, which the English-only encoder cannot read
        ("собака, которая лает", "multilingual"),  # Russian: no specialist reads it
        ("12345", "multilingual"),  # no letters: no language a specialist reads
    ],
)
def test_a_description_goes_to_the_folder_whose_encoder_reads_its_language(reader_clients, query, reader) -> None:
    other = "multilingual" if reader == "english" else "english"
    answer = _reverse(reader_clients["both"], q=query, k=100, mode="describe")
    assert answer["model"] == f"zh-{reader}" and answer["dictionary"] == "zh.tsv" and answer["language"] == "zh"
    assert sorted(_words(answer)) == sorted(ZH_WORDS)
    alone = {kind: _ranked(_reverse(reader_clients[kind], q=query, k=100, mode="describe")) for kind in (reader, other)}
    assert _ranked(answer) == alone[reader] != alone[other]  # that encoder's own search, not the other's


def test_health_lists_a_dictionary_of_several_folders_once_with_their_encoders(reader_clients) -> None:
    health = reader_clients["both"].get("/health").json()
    encoders = [{"model": "zh-english", "reads": ["en"]}, {"model": "zh-multilingual", "reads": None}]
    row = {"dictionary": "zh.tsv", "language": "zh", "entries": len(ZH_WORDS), "model": "zh-english"}
    assert health["dictionaries"] == [row | {"encoders": encoders}]
    assert _reverse(reader_clients["both"], 422, q="a pet", lang="en")["error"].endswith("served: zh (zh.tsv)")


def test_the_folder_chosen_is_centred_as_a_dictionary_of_its_own(language_folders, reader_folders) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    folders = [language_folders["en"], reader_folders["english"], reader_folders["multilingual"]]
    app = create_app(folders, device="cpu")
    client, dictionaries = TestClient(app), app.state.served.dictionaries
    en, english, multilingual = dictionaries.served
    assert english.rd.encoder is en.rd.encoder and multilingual.rd.encoder is not en.rd.encoder
    assert [row["dictionary"] for row in client.get("/health").json()["dictionaries"]] == ["en.tsv", "zh.tsv"]
    zh = dictionaries.choose("zh")
    centred = dictionaries.search_of(zh, "a domesticated animal that barks")  # English: the English-only encoder's
    assert centred is english.centring.search(en.centring)  # centred by the English dictionary of that encoder
    assert dictionaries.search_of(zh, "会汪汪叫的宠物") is multilingual.rd  # Chinese into Chinese: as it is
    answer = _reverse(client, q="会汪汪叫的宠物", lang="zh", k=100)
    assert answer["model"] == "zh-multilingual" and sorted(_words(answer)) == sorted(ZH_WORDS)


def test_folders_of_one_dictionary_whose_encoders_read_alike_are_refused(
    language_folders, reader_folders, tmp_path, capsys
) -> None:
    from dictembed.errors import DictEmbedError
    from dictembed.serve import create_app

    english = reader_folders["english"]
    twin = _as_base(language_folders["zh"], "all-mpnet-base-v2", tmp_path / "zh-mpnet")  # English-only as well
    argv = ["serve", "--model", str(english), "--model", str(twin), "--port", "0"]
    cli_refuses(capsys, argv, "'zh.tsv' is served by several model folders", "read the same languages (en)")
    with pytest.raises(DictEmbedError, match=r"'zh.tsv' is served by .* the same languages \(any language\)"):
        create_app([language_folders["zh"], reader_folders["multilingual"]], device="cpu")  # not known: any


@pytest.mark.parametrize(
    ("name", "reads"),
    [
        (ENGLISH_ONLY, {"en"}),
        ("all-MiniLM-L6-v2", {"en"}),  # the Hub name's last part (a folder of it)
        ("sentence-transformers/all-mpnet-base-v2", {"en"}),
        ("all-mpnet-base-v2", {"en"}),  # the offline name
        (MULTILINGUAL, None),
        ("multilingual-e5-small", None),  # the offline name
        ("bert-base-uncased", None),  # not known: any
        (None, None),
    ],
)
def test_the_languages_a_base_models_encoder_reads(name, reads) -> None:
    from dictembed.card_metadata import base_languages

    assert base_languages(name) == (None if reads is None else frozenset(reads))


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
