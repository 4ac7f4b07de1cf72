"""`ReverseDictionary.search` for people: grouped synonyms, filters, definitions; `predict --input`; the
everyday-descriptions regression set (checked against a real model only when DICTEMBED_EVERYDAY_MODEL names one)."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import numpy as np
import pytest

from dictembed.cli import main
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.descriptions import hit_ranks, load_description_pairs
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import EntryGroups, top_indices
from dictembed.search_options import Filters, Ranking

EVERYDAY = Path(__file__).parent / "data" / "everyday_descriptions.tsv"
SHORT = "lasting a very short time"
# word -> [(definition, pos)]; the first three share their one definition, so their vectors are identical.
SENSES: dict[str, list[tuple[str, str]]] = {
    "transitory": [(SHORT, "s")],
    "fugacious": [(SHORT, "s")],
    "short-lived": [(SHORT, "a")],
    "giraffe": [("tallest living quadruped with a very long neck", "n")],
    "girl": [("a young woman", "n")],
    "ice cream": [("frozen dessert made of cream and sugar", "n")],
    "run": [("move fast by using one's feet", "v"), ("a score in baseball", "n")],
    "quickly": [("with rapid movements", "r")],
}
WORDS = list(SENSES)
SYNONYMS = ["transitory", "fugacious", "short-lived"]


@pytest.fixture(scope="module")
def space() -> DefinitionSpace:
    rows = np.random.default_rng(0).normal(size=(len(WORDS), 32)).astype(np.float32)
    rows[1] = rows[2] = rows[0]
    return DefinitionSpace(WORDS, rows, similarity="cosine", temperature=0.05)


@pytest.fixture(scope="module")
def dictionary() -> Dictionary:
    d = Dictionary(name="senses")
    for word, senses in SENSES.items():
        for definition, pos in senses:
            d.add(word, definition, pos=pos)
    return d


@pytest.fixture(scope="module")
def encoder(bert_path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean")


@pytest.fixture(scope="module")
def rd(encoder, space, dictionary) -> ReverseDictionary:
    """Ranked by cosine alone (no word-frequency prior: see test_word_frequency.py)."""
    ranking = Ranking(frequency_weight=0, query_word_weight=0, overlap_weight=0)
    return ReverseDictionary(encoder, space, dictionary=dictionary, name="toy", ranking=ranking)


def _words(results) -> list[str]:
    return [word for result in results for word in result.words]


# ---------------------------------------------------------------------------- grouping
def test_entry_groups_hash_identical_rows_once(space) -> None:
    groups = EntryGroups.of(space.matrix.numpy())
    assert len(groups) == len(WORDS) - 2
    assert groups.members(0).tolist() == [0, 1, 2] and groups.first.tolist() == [0, 3, 4, 5, 6, 7]
    mask = np.zeros(len(WORDS), dtype=bool)
    mask[[1, 6]] = True
    assert groups.any(mask).tolist() == [True, False, False, False, True, False]


def test_synonyms_are_one_result_scored_by_cosine(rd, encoder, space) -> None:
    results = rd.search(SHORT, k=10)
    assert len(results) == len(WORDS) - 2 and sorted(_words(results)) == sorted(WORDS)
    synonyms = next(r for r in results if "fugacious" in r.words)
    assert synonyms.words == SYNONYMS
    assert synonyms.definitions == {w: [SHORT] for w in SYNONYMS}
    assert synonyms.pos == {"transitory": ["a"], "fugacious": ["a"], "short-lived": ["a"]}  # satellite s -> a
    h = encoder.encode(SHORT)
    matrix = space.matrix.numpy()
    cosine = matrix @ h / np.linalg.norm(matrix, axis=1) / np.linalg.norm(h)
    assert [r.score for r in results] == pytest.approx(sorted(set(cosine.tolist()), reverse=True), abs=1e-5)
    assert rd.score_kind == "cosine"
    assert synonyms.to_dict()["words"] == SYNONYMS and set(synonyms.to_dict()) == {
        "words",
        "score",
        "definitions",
        "pos",
    }


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"pos": "a"}, SYNONYMS),
        ({"pos": "adjective"}, SYNONYMS),
        ({"pos": "noun"}, ["giraffe", "girl", "ice cream", "run"]),
        ({"pos": "v"}, ["run"]),
        ({"pos": "R"}, ["quickly"]),
        ({"pattern": "gir*"}, ["giraffe", "girl"]),
        ({"pattern": "GIRA"}, ["giraffe"]),  # a prefix, case-insensitive
        ({"pattern": "/^g.*e$/"}, ["giraffe"]),
        ({"pattern": "fug*"}, ["fugacious"]),  # the group shows only its matching word
        ({"pattern": "*-*"}, ["short-lived"]),
        ({"words": "phrase"}, ["ice cream"]),
        ({"words": "single", "pos": "n"}, ["giraffe", "girl", "run"]),
        ({"pattern": "zzz"}, []),
    ],
)
def test_filters(rd, filters, expected) -> None:
    assert sorted(_words(rd.search("a tall animal", k=10, filters=Filters(**filters)))) == sorted(expected)


def test_k_limits_the_results_after_filtering(rd) -> None:
    assert len(rd.search("a tall animal", k=2, filters=Filters(pos="n"))) == 2
    assert len(rd.search("a tall animal", k=100)) == len(WORDS) - 2


def test_a_pos_filter_lists_that_part_of_speech_first(rd) -> None:
    def run(pos: str | None = None, max_definitions: int = 10) -> tuple[list[str], list[str | None]]:
        found = next(r for r in rd.search("a tall animal", 10, Filters(pos=pos), max_definitions) if "run" in r.words)
        return found.definitions["run"], found.pos["run"]

    verb, noun = (definition for definition, _ in SENSES["run"])
    assert run() == run(pos="v") == ([verb, noun], ["v", "n"])  # dictionary order, kept when it already fits
    assert run(pos="noun") == ([noun, verb], ["n", "v"])
    assert run(pos="n", max_definitions=1) == ([noun], ["n"])  # max_definitions keeps the filtered sense


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"words": "many"}, "word count"),
        ({"pattern": "/(/"}, "regular expression"),
        ({"pattern": "x" * 101}, "long"),
        ({"pos": "x"}, "unknown part of speech 'x'"),
    ],
)
def test_bad_filters_are_errors(rd, filters, message) -> None:
    with pytest.raises(DictEmbedError, match=message):
        rd.search("a tall animal", filters=Filters(**filters))


def test_without_a_dictionary_results_have_no_definitions(encoder, space) -> None:
    bare = ReverseDictionary(encoder, space)
    results = bare.search(SHORT, k=3)
    assert len(results) == 3 and all(r.definitions == {} for r in results)
    with pytest.raises(DictEmbedError, match="part of speech"):
        bare.search(SHORT, filters=Filters(pos="n"))


def test_a_dictionary_that_cannot_be_loaded_is_logged_once(encoder, space, tmp_path, caplog) -> None:
    missing = ReverseDictionary(encoder, space, dictionary=str(tmp_path / "gone.tsv"))
    with caplog.at_level(logging.WARNING, logger="dictembed.result_dictionary"):
        for _ in range(3):
            assert all(r.definitions == {} for r in missing.search(SHORT, k=3))
    assert len([r for r in caplog.records if "cannot load dictionary" in r.message]) == 1
    assert "gone.tsv" in missing.dictionary_error


def test_a_malformed_dictionary_is_an_error_naming_its_line(encoder, space, tmp_path) -> None:
    """A dictionary that is missing loses only the definitions; one that is there but malformed is an error naming
    the file and line, at every search (never results quietly without definitions)."""
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"word": "giraffe", "definition": "tall"}\n{"word": "girl", "definition": \n', encoding="utf-8")
    rd = ReverseDictionary(encoder, space, dictionary=str(broken))
    for _ in range(2):
        with pytest.raises(DictEmbedError, match=f"^{broken}:2: ") as caught:
            rd.search(SHORT, k=3)
        assert "\n" not in str(caught.value)


def test_search_many_predict_and_top_indices(rd) -> None:
    queries = [SHORT, "a young woman", "with rapid movements"]
    many = rd.search_many(queries, k=4, filters=Filters(pos="n"))
    assert [[r.to_dict() for r in rs] for rs in many] == [
        [r.to_dict() for r in rd.search(q, 4, Filters(pos="n"))] for q in queries
    ]
    ranked = rd.predict(SHORT, top_k=3)  # the model's softmax over single entries, ungrouped
    assert len(ranked) == 3 and all(w in WORDS and 0 < p < 1 for w, p in ranked)
    scores = np.array([0.5, 0.9, 0.9, 0.1, 0.7])
    assert top_indices(scores, None, 3).tolist() == [1, 2, 4]  # ties by index
    assert top_indices(scores, np.array([1, 0, 1, 1, 0], dtype=bool), 10).tolist() == [2, 0, 3]
    assert top_indices(scores, np.zeros(5, dtype=bool), 3).tolist() == []


def test_many_queries_are_a_list_and_counts_whole_numbers(rd) -> None:
    """search_many and scores take a list of descriptions (one string, None or a number: one line); k and
    batch_size take any whole number, numpy's too, and nothing else."""
    for queries in ("a dog", None, 5):
        with pytest.raises(DictEmbedError, match="^search_many takes a list of descriptions, not "):
            rd.search_many(queries)  # type: ignore[arg-type]
    with pytest.raises(DictEmbedError, match="^scores takes a list of descriptions, not one string"):
        rd.scores(SHORT)  # type: ignore[arg-type]
    assert rd.scores(q for q in [SHORT, "a young woman"]).shape == (2, len(rd.space))  # any iterable
    with pytest.raises(DictEmbedError, match="^batch_size must be a whole number"):
        rd.search_many([SHORT], batch_size="8")  # type: ignore[arg-type]
    assert [r.words for r in rd.search(SHORT, k=np.int64(2))] == [r.words for r in rd.search(SHORT, k=2)]


def test_a_space_without_a_matrix_scores_by_probability(bert_path, encoder) -> None:
    space = MLMHeadSpace.from_pretrained(str(bert_path), ["dog", "cat", "car", "rain"], encoder.tokenizer)
    results = ReverseDictionary(encoder, space).search("a pet that barks", k=4)
    assert ReverseDictionary(encoder, space).score_kind == "probability"
    scores = [r.score for r in results]
    assert len(results) == 4 and scores == sorted(scores, reverse=True) and sum(scores) == pytest.approx(1, abs=1e-4)


# -------------------------------------------------------------------- length, initial letters, near-synonyms
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"min_length": 4, "max_length": 4}, ["girl"]),
        ({"max_length": 7}, ["giraffe", "girl", "run", "quickly"]),
        ({"min_length": 10}, ["transitory", "short-lived"]),  # the hyphen does not count
        ({"min_length": 8, "words": "phrase"}, ["ice cream"]),  # nor the space
        ({"initial": "GI"}, ["giraffe", "girl"]),
        ({"initial": "f", "min_length": 9}, ["fugacious"]),  # the group shows only its passing word
        ({"initial": "short-"}, ["short-lived"]),
        ({"initial": "gir*"}, []),  # taken literally
        ({"initial": "g", "pos": "n", "pattern": "*l"}, ["girl"]),
    ],
)
def test_length_and_initial_filters(rd, filters, expected) -> None:
    assert sorted(_words(rd.search("a tall animal", k=10, filters=Filters(**filters)))) == sorted(expected)


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"min_length": 0}, "min_length: a whole number of letters from 1 to 100"),
        ({"max_length": 101}, "max_length"),
        ({"min_length": 5, "max_length": 4}, "min_length: 5 is more than max_length 4"),
        ({"initial": "g" * 21}, "initial: too long"),
    ],
)
def test_bad_length_and_initial_filters(rd, filters, message) -> None:
    with pytest.raises(DictEmbedError, match=message):
        rd.search("a tall animal", filters=Filters(**filters))
    with pytest.raises(DictEmbedError, match=message):
        rd.neighbours("girl", filters=Filters(**filters))


def test_length_bounds_and_the_word_index() -> None:
    from dictembed.search_index import WordIndex
    from dictembed.search_options import length_bounds, word_length

    assert length_bounds(5) == (5, 5) and length_bounds(None, 2, None) == (2, None)
    with pytest.raises(DictEmbedError, match="not both"):
        length_bounds(5, None, 6)
    assert [word_length(w) for w in ("ice cream", "short-lived", "o'clock", "3D")] == [8, 10, 6, 2]
    words = ["Apple", "apricot", "b", "ap", "Straße", "a\U0010ffffz", "a\U0010ffff"]
    index = WordIndex.of(words, EntryGroups.of(np.arange(len(words))[:, None]))
    starting = lambda prefix: [w for w, hit in zip(words, index.starting_with(prefix), strict=True) if hit]  # noqa: E731
    assert starting("AP") == ["Apple", "apricot", "ap"] and starting("apr") == ["apricot"] and starting("c") == []
    assert starting("strass") == ["Straße"]  # case-folded on both sides
    assert starting("a\U0010ffff") == ["a\U0010ffffz", "a\U0010ffff"]
    assert index.of_length(2, 5).tolist() == [True, False, False, True, False, True, False]
    assert index.by_folded["apple"] == 0 and index.group_of.tolist() == list(range(len(words)))


def test_search_takes_the_mode_predict_and_the_api_take(rd) -> None:
    assert rd.search("transitory", k=3, mode="similar") == rd.neighbours("transitory", k=3)
    assert rd.search("Girl", k=2, mode="auto", length=7) == rd.neighbours("Girl", k=2, length=7)  # an entry: similar
    description = "a tall animal with a long neck"  # no entry: auto searches it as a description
    assert (
        rd.search(description, k=3, mode="auto") == rd.search(description, k=3) == rd.search_many([description], 3)[0]
    )
    assert rd.search("transitory", k=3) == rd.search_many(["transitory"], 3)[0]  # describe, the default
    with pytest.raises(DictEmbedError, match="unknown mode 'synonyms'; choose from auto, describe, similar"):
        rd.search("transitory", mode="synonyms")
    with pytest.raises(DictEmbedError, match="not an entry of this model; mode similar needs one"):
        rd.search(description, mode="similar")
    for query in ("transitory", description):  # the same keywords either way auto answers: filters only
        with pytest.raises(DictEmbedError, match="scoring"):
            rd.search(query, mode="auto", scoring=None)
        with pytest.raises(DictEmbedError, match="batch_size"):
            rd.search(query, mode="auto", batch_size=8)


def test_neighbours_are_the_nearest_entry_vectors_without_the_word(rd, space) -> None:
    results = rd.neighbours("transitory", k=10)
    assert results[0].words == ["fugacious", "short-lived"] and results[0].score == pytest.approx(1.0, abs=1e-5)
    assert "transitory" not in _words(results) and sorted(_words(results)) == sorted(set(WORDS) - {"transitory"})
    matrix = space.matrix.numpy()
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    cosine = unit[3:] @ unit[0]  # the other groups, against the entry's own vector
    assert [r.score for r in results[1:]] == pytest.approx(sorted(cosine.tolist(), reverse=True), abs=1e-5)
    assert [r.words[0] for r in results[1:]] == [WORDS[3 + i] for i in np.argsort(-cosine, kind="stable")]
    assert results[0].definitions == {"fugacious": [SHORT], "short-lived": [SHORT]}
    assert _words(rd.neighbours("Girl", k=5, filters=Filters(pattern="gir*"))) == [
        "giraffe"
    ]  # an entry case-insensitively
    assert _words(rd.neighbours("giraffe", k=1, filters=Filters(min_length=9, max_length=9))) == ["fugacious"]
    assert rd.neighbours("girl", k=2) == rd.neighbours("girl", k=5)[:2]
    alone = rd.neighbours("girl", k=10)  # a word alone in its group: every other group, no empty result
    assert len(alone) == len(WORDS) - 3 and "girl" not in _words(alone) and all(r.words for r in alone)
    assert alone == rd.neighbours(
        "girl", k=10, filters=Filters(words="any", max_length=100)
    )  # the same through the masks


def test_modes_choose_neighbours_for_an_entry(rd) -> None:
    assert rd.entry_of(" Giraffe ") == "giraffe" and rd.entry_of("ICE CREAM") == "ice cream"
    assert rd.entry_of("zebra") is None and rd.entry_of("a tall animal") is None
    assert rd.similar_entry("giraffe") == "giraffe" and rd.similar_entry("giraffe", "similar") == "giraffe"
    assert rd.similar_entry("giraffe", "describe") is None and rd.similar_entry("zebra") is None
    with pytest.raises(DictEmbedError, match="'zebra' is not an entry"):
        rd.similar_entry("zebra", "similar")
    with pytest.raises(DictEmbedError, match="unknown mode 'synonyms'"):
        rd.similar_entry("giraffe", "synonyms")
    with pytest.raises(DictEmbedError, match="not an entry"):
        rd.neighbours("zebra")


def test_neighbours_in_a_space_without_a_matrix(bert_path, encoder) -> None:
    from dictembed.entry_space import EntrySpace

    space = MLMHeadSpace.from_pretrained(str(bert_path), ["dog", "cat", "car", "rain"], encoder.tokenizer)
    results = ReverseDictionary(encoder, space).neighbours("dog", k=3)  # the MLM head's output rows
    vectors = space.vectors()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = {word: float(unit[i] @ unit[space.index["dog"]]) for i, word in enumerate(space.words) if word != "dog"}
    assert [r.words[0] for r in results] == sorted(cosine, key=lambda w: -cosine[w])
    assert [r.score for r in results] == pytest.approx(sorted(cosine.values(), reverse=True), abs=1e-5)

    class NoVectors(EntrySpace):
        def scores(self, h):
            return h[:, :2]

    bare = ReverseDictionary(encoder, NoVectors(["dog", "cat"]))
    assert not bare.has_entry_vectors and bare.similar_entry("dog") is None  # auto: described
    with pytest.raises(DictEmbedError, match="no entry vectors"):
        bare.neighbours("dog")


# -------------------------------------------------------------------- predict on the CLI
@pytest.fixture(scope="module")
def model_dir(served_model) -> Path:
    return served_model


def test_predict_input_prints_one_json_document(model_dir, tmp_path, capsys, caplog) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("a domesticated animal that barks\n\na vehicle with four wheels and an engine\n")
    with caplog.at_level(logging.WARNING, logger="dictembed.cli.predict"):
        assert main(["predict", "--model", str(model_dir), "--input", str(queries), "--top-k", "3", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert [(d["line"], d["query"]) for d in data] == [
        (1, "a domesticated animal that barks"),
        (3, "a vehicle with four wheels and an engine"),
    ]
    assert f"{queries}: 1 blank line(s) skipped (line 2)" in caplog.text  # counted, with the file's line numbers
    assert all(len(d["results"]) == 3 for d in data)
    assert set(data[0]["results"][0]) == {"word", "words", "score", "definitions", "pos"}
    assert any(r["words"] == ["car", "automobile", "motor car"] for r in data[1]["results"])
    assert "a domesticated animal that barks\n  1  " in captured.err  # the table, on stderr


def test_predict_filters_and_table(model_dir, capsys) -> None:
    assert main(["predict", "--model", str(model_dir), "a machine you drive", "--words", "phrase", "--pos", "n"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["motor", "ice"]  # "motor car", "ice cream"
    assert "a vehicle with four wheels and an engine" in lines[0] or "a machine you drive on roads" in lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "--model", "{model}"],
        ["predict", "--model", "{model}", "a pet", "--input", "{model}/x.txt"],
        ["predict", "--model", "{model}", "a pet", "--pattern", "/(/"],
        ["predict", "--model", "{model}", "a pet", "--words", "many"],
        ["predict", "--model", "{model}", "a pet", "--pos", "x"],
        ["predict", "--model", "{model}", "a pet", "--length", "5", "--min-length", "4"],
        ["predict", "--model", "{model}", "a pet", "--min-length", "5", "--max-length", "4"],
        ["predict", "--model", "{model}", "a pet", "--length", "0"],
        ["predict", "--model", "{model}", "a pet", "--initial", "g" * 21],
        ["predict", "--model", "{model}", "a pet", "--mode", "synonyms"],
    ],
)
def test_predict_usage_errors(model_dir, argv, capsys) -> None:
    assert main([a.format(model=model_dir) for a in argv]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--pos", "x"], "--pos: unknown part of speech"),  # the option names it, not "pos:" again
        (["--words", "single", "--pos", "x"], "--pos/--words: unknown part of speech"),
        (["--min-length", "5", "--max-length", "4"], "--min-length/--max-length: 5 is more than max_length 4"),
    ],
)
def test_a_filter_error_names_the_options_given(model_dir, options, named, capsys) -> None:
    from conftest import cli_refuses

    line = cli_refuses(capsys, ["predict", "--model", str(model_dir), "a pet", *options], code=2)
    assert f"error: {named}" in line and "--pattern" not in line  # the options given, not all nine filters


def test_predict_modes_and_length_filters(model_dir, tmp_path, capsys) -> None:
    model = ["predict", "--model", str(model_dir)]
    assert main([*model, "car", "--mode", "auto", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["words"] == ["automobile", "motor car"] and "car" not in [w for r in rows for w in r["words"]]
    assert main([*model, "car", "--mode", "similar", "--top-k", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "words like car:"
    assert main([*model, "car", "--top-k", "100", "--json"]) == 0  # describe by default, as ever
    assert "car" in [w for r in json.loads(capsys.readouterr().out) for w in r["words"]]
    assert main([*model, "something that moves fast", "--length", "3", "--initial", "C", "--json"]) == 0
    assert sorted(w for r in json.loads(capsys.readouterr().out) for w in r["words"]) == ["car", "cat"]
    queries = tmp_path / "queries.txt"
    queries.write_text("Dog\na vehicle with four wheels\n")
    assert main([*model, "--input", str(queries), "--mode", "auto", "--min-length", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["entry"] for d in data] == ["dog", None]
    assert all(len(w.replace(" ", "")) >= 4 for d in data for r in d["results"] for w in r["words"])
    assert main([*model, "zebra", "--mode", "similar"]) == 1
    assert "not an entry" in capsys.readouterr().err
    queries.write_text("cat\nzzqx\ndog\n")
    assert main([*model, "--input", str(queries), "--mode", "similar"]) == 1
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(f"{queries}:2: 'zzqx' is not an entry of this model; mode similar needs one")
    )


def test_predict_input_without_queries_is_a_runtime_error(model_dir, tmp_path, capsys) -> None:
    (tmp_path / "empty.txt").write_text("\n  \n")
    assert main(["predict", "--model", str(model_dir), "--input", str(tmp_path / "empty.txt")]) == 1
    assert "no queries" in capsys.readouterr().err


# ---------------------------------------------------------------- everyday descriptions
def test_everyday_descriptions_file_format() -> None:
    pairs = load_description_pairs(EVERYDAY)
    assert (
        len(pairs) >= 10
        and ("a long-necked African animal", ["giraffe", "camelopard", "Giraffa camelopardalis"]) in pairs
    )
    assert len({d for d, _ in pairs}) == len(pairs) and all(words for _, words in pairs)


def test_description_pairs_errors_name_the_line(tmp_path) -> None:
    (tmp_path / "bad.tsv").write_text("description\texpected\na tall animal\n")
    with pytest.raises(DictEmbedError, match="bad.tsv:2"):
        load_description_pairs(tmp_path / "bad.tsv")
    (tmp_path / "header.tsv").write_text("query\tword\n")
    with pytest.raises(DictEmbedError, match="header"):
        load_description_pairs(tmp_path / "header.tsv")


def test_description_pairs_keep_the_rows_of_a_split(tmp_path) -> None:
    rows = [
        ("a tall animal", "giraffe", "dev"),
        ("a big grey animal", "elephant|jumbo", "test"),
        ("a fruit", "apple", "dev"),
    ]
    (tmp_path / "split.tsv").write_text("description\texpected\tsplit\n" + "".join("\t".join(r) + "\n" for r in rows))
    everything = load_description_pairs(tmp_path / "split.tsv")
    assert everything == [
        ("a tall animal", ["giraffe"]),
        ("a big grey animal", ["elephant", "jumbo"]),
        ("a fruit", ["apple"]),
    ]
    assert load_description_pairs(tmp_path / "split.tsv", split="dev") == [everything[0], everything[2]]
    assert load_description_pairs(tmp_path / "split.tsv", split="test") == [everything[1]]
    with pytest.raises(DictEmbedError, match="train"):
        load_description_pairs(tmp_path / "split.tsv", split="train")
    # a file without the column still loads whole, but has no split to select
    (tmp_path / "two.tsv").write_text("description\texpected\na tall animal\tgiraffe\n")
    assert load_description_pairs(tmp_path / "two.tsv") == [("a tall animal", ["giraffe"])]
    with pytest.raises(DataFormatError, match="two.tsv:1: no `split` column"):
        load_description_pairs(tmp_path / "two.tsv", split="dev")


@pytest.mark.parametrize(
    "row, where",
    [
        ("a big grey animal\telephant\ttrain", "'train'"),
        ("a big grey animal\telephant\t", "''"),
        ("a big grey animal\telephant", ""),
    ],
)
def test_a_bad_split_value_names_the_file_and_line(tmp_path, row, where) -> None:
    (tmp_path / "split.tsv").write_text(f"description\texpected\tsplit\na tall animal\tgiraffe\tdev\n{row}\n")
    for split in (None, "dev", "test"):  # checked whichever rows are asked for
        with pytest.raises(DataFormatError, match=f"split.tsv:3: .*{where}") as error:
            load_description_pairs(tmp_path / "split.tsv", split=split)
        assert "\n" not in str(error.value) and error.value.line == 3


def test_everyday_descriptions_have_dev_and_test_splits() -> None:
    pairs = load_description_pairs(EVERYDAY)
    dev, test = load_description_pairs(EVERYDAY, split="dev"), load_description_pairs(EVERYDAY, split="test")
    assert len(pairs) >= 300 and dev and test and len(dev) + len(test) == len(pairs)
    assert sorted(dev + test) == sorted(pairs) and 0.3 <= len(dev) / len(pairs) <= 0.5
    firsts = [words[0].lower() for _, words in pairs]
    assert len(set(firsts)) == len(firsts), [w for w in set(firsts) if firsts.count(w) > 1]
    leaks = [(d, w) for (d, _), w in zip(pairs, firsts, strict=True) if re.search(rf"\b{re.escape(w)}\b", d.lower())]
    assert not leaks, leaks


def test_hit_ranks_on_the_tiny_model(model_dir) -> None:
    pairs = [("a domesticated animal that barks", ["dog", "hound"]), ("a domesticated animal", ["no such word"])]
    ranks = hit_ranks(ReverseDictionary.load(model_dir), pairs, k=5)
    assert ranks[0] in range(1, 6) and ranks[1] is None


@pytest.mark.skipif(not os.environ.get("DICTEMBED_EVERYDAY_MODEL"), reason="set DICTEMBED_EVERYDAY_MODEL to a model")
def test_everyday_descriptions_hit_the_top_10_of_a_real_model() -> None:
    pairs = load_description_pairs(EVERYDAY)
    ranks = hit_ranks(ReverseDictionary.load(os.environ["DICTEMBED_EVERYDAY_MODEL"]), pairs, k=10)
    hits = sum(rank is not None for rank in ranks)
    print(f"everyday descriptions: {hits}/{len(pairs)} in the top 10")
    misses = [d for (d, _), rank in zip(pairs, ranks, strict=True) if rank is None]
    assert hits >= len(pairs) // 2, f"{hits}/{len(pairs)} in the top 10; missed: {misses}"


def test_an_empty_query_is_an_error_not_a_result(rd, model_dir, capsys) -> None:
    with pytest.raises(DictEmbedError, match="empty query"):
        rd.search("   ")
    assert main(["predict", "--model", str(model_dir), ""]) == 1
    assert "empty query" in capsys.readouterr().err


def test_a_query_the_tokenizer_reads_only_as_unknown_tokens_is_an_error(rd, served_model, capsys) -> None:
    """An emoji, or one word longer than word pieces go, encodes as [UNK] alone, whose vector ranked the same
    confident words for every such query."""
    from dictembed.backends.onnx.query import OnnxQueryEncoder

    onnx = ReverseDictionary.load(served_model)
    assert isinstance(onnx.encoder, OnnxQueryEncoder) and isinstance(rd.encoder, Encoder)
    for search in (rd, onnx):
        for query in ("\U0001f431", "\u2708 \U0001f431", "a" * 300):
            with pytest.raises(DictEmbedError, match=r"^query 1 \(.*\): the model's tokenizer reads none of it"):
                search.search(query)
        with pytest.raises(DictEmbedError, match="^query 2 \\('\U0001f431'\\)"):
            search.search_many(["a dog", "\U0001f431"])
        assert search.search("a dog \U0001f431", k=1)  # a known word beside it is enough
    assert main(["predict", "--model", str(served_model), "\U0001f431", "-q"]) == 1
    err = capsys.readouterr().err
    assert "reads none of it" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_bad_precision_is_refused_before_the_folder_opens() -> None:
    """It was refused only after the torch weights had loaded."""
    with pytest.raises(DictEmbedError, match="^unknown precision 'fp8'; choose from auto, fp32, bf16, fp16$"):
        ReverseDictionary.load("/no/such/folder", precision="fp8")


def test_unknown_only_counts_texts_of_unknown_tokens_or_none() -> None:
    from dictembed.texts import unknown_only

    assert unknown_only([[100], [100, 100], [5, 100], [], [7]], 100) == [True, True, False, True, False]
    assert unknown_only([[100], []], None) == [False, True]  # byte-level: no unknown token, every text read


def test_a_model_folder_serves_its_definitions_from_anywhere(served_model, tmp_path, monkeypatch) -> None:
    """The folder keeps what serving needs of its dictionary: moved elsewhere, with the training dictionary gone
    and another file at the recorded relative path, it still serves its own definitions and pos filter."""
    import shutil

    from dictembed.model_folder import DEFINITIONS_FILE

    assert (served_model / DEFINITIONS_FILE).is_file()
    moved = tmp_path / "elsewhere" / "model"
    shutil.copytree(served_model, moved)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "served.tsv").write_text("word\tdefinition\tpos\nimpostor\tnot the model's definition\tn\n")
    rd = ReverseDictionary.load(moved)
    assert rd.dictionary is not None and "impostor" not in rd.dictionary
    from dictembed.dictionary import load_dictionary

    trained_on = load_dictionary(str(served_model.parent / "served.tsv"))  # conftest's `served_model`
    assert rd.dictionary.pairs() == trained_on.pairs()
    assert [[s.pos for s in e.senses] for e in rd.dictionary] == [[s.pos for s in e.senses] for e in trained_on]
    original = ReverseDictionary.load(served_model)
    results = rd.search("a domesticated animal that barks", k=3, filters=Filters(pos="n"))
    assert results and all("n" in r.pos[w] for r in results for w in r.words)  # definitions and parts of speech
    same = original.search("a domesticated animal that barks", k=3, filters=Filters(pos="n"))
    assert [r.to_dict() for r in results] == [r.to_dict() for r in same]
    assert str(served_model.parent) not in (moved / DEFINITIONS_FILE).read_text()


def test_a_pos_filter_on_a_dictionary_without_parts_of_speech_says_so(encoder, space, dictionary) -> None:
    plain = Dictionary(name="no-pos")
    for entry in dictionary:
        for sense in entry.senses:
            plain.add(entry.headword, sense.definition)  # no part of speech anywhere
    rd = ReverseDictionary(encoder, space, dictionary=plain)
    with pytest.raises(DictEmbedError, match="records none"):
        rd.search(SHORT, filters=Filters(pos="n"))
    assert rd.search(SHORT, k=2)  # without the filter it searches as ever


def test_a_folder_without_an_entry_space_says_how_to_make_one_not_to_pass_a_dictionary(saved_bert, capsys) -> None:
    """A GR-BERT folder (an encoder, no entry space) was told to pass --dictionary, which then failed on the space."""
    plain = ["predict", "--model", str(saved_bert), "a dog"]
    for argv in (plain, [*plain, "--dictionary", "wordnet"]):
        assert main([*argv, "-q"]) == 1
        err = capsys.readouterr().err
        assert "holds no saved entry space" in err and "dictembed index --model" in err and "Traceback" not in err
    with pytest.raises(DictEmbedError, match="holds no saved entry space .*dictembed index"):
        ReverseDictionary.load(saved_bert, dictionary="wordnet")
