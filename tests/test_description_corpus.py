"""The description corpus: its reader, its use as further training queries, and its separation from the benchmark
that judges it (no answer word of the everyday-descriptions benchmark is a target of the corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import dictionary_of

from dictembed.description_corpus import CORPUS, LONG_CORPUS, Description, load_descriptions, read_corpus
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.objectives.entry_prediction import description_examples

BENCHMARK = Path(__file__).parent / "data" / "everyday_descriptions.tsv"


def test_the_reader_keeps_every_field_and_the_optional_columns(tmp_path: Path) -> None:
    path = tmp_path / "d.tsv"
    path.write_text("description\tword\tpos\tstyle\nthe thing that barks\tdog\tn\tchild\nto walk fast\trun\t\t\n\n")
    assert load_descriptions(path) == [
        Description("the thing that barks", "dog", "n", "child"),
        Description("to walk fast", "run", None, None),
    ]
    short = tmp_path / "short.tsv"
    short.write_text("description\tword\nit falls from clouds\train\n")
    assert load_descriptions(short) == [Description("it falls from clouds", "rain")]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("description\texpected\nx\ty\n", 1, "header"),
        ("description\tword\nonly one field\n", 2, "fields"),
        ("description\tword\n\tdog\n", 2, "fields"),
        ("description\tword\n", None, "no descriptions"),
    ],
)
def test_a_bad_corpus_is_one_error_naming_the_file_and_line(tmp_path: Path, text: str, line, words: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(DataFormatError) as caught:
        load_descriptions(path)
    message = str(caught.value)
    assert str(path) in message and words in message and (line is None or f"{path}:{line}:" in message)


class Space:
    """The part of an entry space `description_examples` reads: its entry index."""

    def __init__(self, words: list[str]) -> None:
        self.index = {word: i for i, word in enumerate(words)}


def test_descriptions_of_words_outside_the_training_split_are_skipped_and_counted(caplog) -> None:
    train = Dictionary(name="train")
    train.add("dog", "a domesticated animal that barks")
    train.add("cat", "a small pet that purrs")
    space = Space(["dog", "cat", "owl"])  # owl: an entry of a dev or test headword
    corpus = [Description("it barks", "dog"), Description("a night bird", "owl"), Description("it purrs", "cat")]
    with caplog.at_level("INFO"):
        examples = description_examples(corpus, train, space)  # type: ignore[arg-type]
    assert examples == [("it barks", 0), ("it purrs", 1)]
    assert "1 of 3 descriptions skipped" in caplog.text


def test_the_shipped_corpus_is_large_and_never_teaches_a_benchmark_answer() -> None:
    from lemminflect import getAllLemmas

    corpus = load_descriptions("everyday")
    assert CORPUS.is_file() and len(corpus) >= 20_000 and len({d.word for d in corpus}) >= 8_000
    assert {d.pos for d in corpus} == {"n", "v", "a", "r"}
    answers = set()
    for _, expected in load_description_pairs(BENCHMARK):
        for word in expected:
            answers.add(word.lower())
            answers.update(lemma.lower() for lemmas in getAllLemmas(word.lower()).values() for lemma in lemmas)
    assert not answers & {d.word.lower() for d in corpus}


def test_the_long_descriptions_are_one_longer_description_of_each_corpus_word() -> None:
    """`everyday-long` is the corpus and, after it, one description of 12 or more words of each of its (word, part of
    speech), style `long`, none holding its word (so none teaches a benchmark answer either)."""
    corpus, long = load_descriptions("everyday"), read_corpus(LONG_CORPUS)
    assert load_descriptions("everyday-long") == corpus + long
    assert sorted((d.word, d.pos) for d in long) == sorted({(d.word, d.pos) for d in corpus})
    assert {d.style for d in long} == {"long"} and min(len(d.text.split()) for d in long) >= 12
    assert all(d.word.lower() not in d.text.lower().split() for d in long)


@pytest.mark.parametrize("ratio", [0.0, 0.25, 10.0])
def test_training_adds_descriptions_at_the_configured_ratio(bert_path, toy_tsv, tmp_path, ratio) -> None:
    from dictembed.recipes.config import RunConfig
    from dictembed.recipes.registry import get_recipe

    corpus = tmp_path / "corpus.tsv"
    rows = [(f"{word} described", word) for word in ("dog", "cat", "car", "rain", "king", "bread", "river", "book")]
    corpus.write_text("description\tword\n" + "".join(f"{text}\t{word}\n" for text, word in rows))
    config = RunConfig.create(
        "defsent-plus",
        model=str(bert_path),
        dictionary=str(toy_tsv),
        output=str(tmp_path / "out"),
        pooling="mean",
        pooler="none",
        entries="amp",
        descriptions=str(corpus),
        description_ratio=ratio,
        split_seed=1,
    )
    recipe = get_recipe("defsent-plus")
    stage = recipe.stage(config, 1, None, None)
    built = recipe.build(config, stage, 0)
    train = stage.data["splits"]["train"]
    definitions = [text for text, _ in built.examples if "described" not in text]
    described = [(text, index) for text, index in built.examples if "described" in text]
    assert len(definitions) == train.num_definitions()
    # one description per word; only the training split's words have theirs used, at most ratio x definitions
    assert len(described) == min(round(ratio * len(definitions)), len(train)) and 0 < len(train) < 8
    names = list(stage.space.index)
    assert all(text.startswith(names[index] + " ") for text, index in described)  # each to its own word's entry


def test_the_everyday_corpus_is_left_out_for_a_dictionary_in_another_language(caplog) -> None:
    """`everyday` describes English words: a French or Chinese dictionary by name trains without it (said once in
    the log), an English one, named or a file of English headwords, with it; a corpus file always applies."""
    import logging

    from dictembed.recipes.defsent import describes

    english = dictionary_of("words", {w: [f"a {w}"] for w in ("dog", "house", "water", "bread", "river", "king")})
    with caplog.at_level(logging.INFO, logger="dictembed"):
        assert describes("everyday", "wordnet", english) and describes("everyday", "words.tsv", english)
        assert not caplog.text
        assert not describes("everyday", "fr-wiktionary", english)
        assert not describes("everyday", "wordnet,cwn", english)
        assert describes("my_descriptions.tsv", "fr-wiktionary", english)
        assert describes("everyday-long", "wordnet", english) and not describes("everyday-long", "cwn", english)
    assert caplog.text.count("the everyday descriptions describe English words; fr-wiktionary is not English") == 1
    assert "wordnet,cwn is not English: trained without them" in caplog.text
