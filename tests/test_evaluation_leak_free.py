"""Reverse-dictionary evaluation that cannot leak (dictembed.evaluation.leak_free): metrics, cross-dictionary
queries, exact leave-one-out entries, the TF-IDF baseline and the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from dictembed.cli import main
from dictembed.dictionary.core import Dictionary
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.evaluation import leak_free
from dictembed.evaluation.ranking import ranks_from_scores
from dictembed.saved_entry_space import load_entry_space


@pytest.fixture(scope="module")
def encoder(bert_path):
    from dictembed.encoder import Encoder

    return Encoder.load(bert_path, pooling="mean", device="cpu").eval()


def _dictionary(words: dict[str, list[str]], name: str = "d") -> Dictionary:
    d = Dictionary(name=name)
    for word, definitions in words.items():
        for definition in definitions:
            d.add(word, definition)
    return d


def _without(dictionary: Dictionary, headword: str, definition: str) -> Dictionary:
    """The same dictionary (same headword order) minus one definition of `headword`."""
    out = Dictionary(name=dictionary.name)
    for entry in dictionary:
        for sense in entry.senses:
            if not (entry.headword == headword and sense.definition == definition):
                out.add(entry.headword, sense.definition)
    return out


# ---------------------------------------------------------------------- leave-one-out
@pytest.mark.parametrize(("entries", "similarity"), [("amp", "cosine"), ("ac", "dot"), ("amp", "dot")])
def test_leave_one_out_equals_a_space_rebuilt_without_the_definition(encoder, toy_dictionary, entries, similarity):
    space = DefinitionSpace.build(encoder, toy_dictionary, entries, similarity=similarity, temperature=0.1)
    assert space.counts.tolist() == [2] * len(toy_dictionary)
    pooled = encoder.with_pooling("cls" if entries == "ac" else "mean")
    for headword in ("dog", "river"):
        query = toy_dictionary[headword].definitions[0]
        gold = space.index[headword]
        loo = space.leave_one_out(np.array([gold]), pooled.encode([query]))
        rebuilt = DefinitionSpace.build(
            encoder, _without(toy_dictionary, headword, query), entries, similarity=similarity, temperature=0.1
        )
        np.testing.assert_allclose(loo[0], rebuilt.matrix[gold].numpy(), atol=1e-5)
        assert rebuilt.counts[gold] == 1
        # the rank of the gold entry is that against the rebuilt space
        queries = leak_free.QuerySet([query], np.array([gold]), 1, 0)
        ranks = leak_free.leave_one_out_ranks(encoder, space, encoder, queries)
        with torch.no_grad():
            expected = ranks_from_scores(rebuilt(encoder(encoder.tokenize([query]))).numpy(), np.array([gold]))
        assert ranks.tolist() == expected.tolist()


def test_stored_vectors_leave_one_out_of_a_projected_space_as_a_rebuilt_one(encoder, toy_dictionary) -> None:
    # a distilled folder's space is its teacher's, projected: no encoder gives its vectors, its stored ones do
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine", temperature=0.1)
    dim = space.matrix.shape[1]
    projection = np.random.default_rng(0).standard_normal((dim, dim)).astype(np.float32)
    projected = space.projected(projection)
    queries = leak_free.leave_one_out_queries(projected, toy_dictionary, stored=True)
    assert queries.rows is not None and len(queries.definitions) == 2 * len(toy_dictionary)
    assert leak_free.leave_one_out_queries(projected, toy_dictionary).rows is None  # only where asked
    ranks = leak_free.leave_one_out_ranks(encoder, projected, None, queries)
    for i in (0, 5):  # the first definition of the first word, the second of the third
        query, gold = queries.definitions[i], int(queries.gold[i])
        rebuilt = DefinitionSpace.build(
            encoder, _without(toy_dictionary, space.words[gold], query), "amp", similarity="cosine", temperature=0.1
        ).projected(projection)
        stored = projected.definitions[int(queries.rows[i])][None].numpy()
        np.testing.assert_allclose(
            projected.leave_one_out(np.array([gold]), stored)[0],
            rebuilt.matrix[gold],
            atol=5e-4,  # the rebuilt space encodes its texts in other batches: float rounding, projected
        )
        with torch.no_grad():
            expected = ranks_from_scores(rebuilt(encoder(encoder.tokenize([query]))).numpy(), np.array([gold]))
        assert ranks[i] == expected[0]
    narrow = space.projected(projection[:, : dim // 2])  # a teacher's space projected to a smaller student
    encoded = leak_free.leave_one_out_queries(narrow, toy_dictionary)  # no stored rows asked: the entry encoder's
    with pytest.raises(DictEmbedError, match=f"gives {dim}-d vectors, the space holds {dim // 2}-d ones"):
        leak_free.leave_one_out_ranks(encoder, narrow, encoder, encoded)
    with pytest.raises(DictEmbedError, match="stored vectors or the entry encoder"):
        leak_free.leave_one_out_ranks(
            encoder, projected, None, leak_free.leave_one_out_queries(projected, toy_dictionary)
        )


def test_a_definition_listed_twice_under_a_word_is_left_out_with_its_copy(encoder, toy_dictionary) -> None:
    # WordNet lists "a grain of barley" twice under barleycorn; a model folder's definitions keep it once
    doubled = _dictionary({**{e.headword: e.definitions for e in toy_dictionary}, "dog": ["a pet that barks"] * 2})
    doubled["dog"].senses.append(toy_dictionary["cat"].senses[0])
    space = DefinitionSpace.build(encoder, doubled, "amp", similarity="cosine")
    start = int((np.cumsum(space.counts.numpy()) - space.counts.numpy())[space.index["dog"]])
    assert space.counts[space.index["dog"]] == 3
    once = _dictionary({**{e.headword: e.definitions for e in doubled}, "dog": ["a pet that barks"]})
    once["dog"].senses.append(toy_dictionary["cat"].senses[0])
    rows = leak_free.stored_rows(space, once)
    assert rows[("dog", 0)] == (start, 2) and rows[("dog", 1)] == (start + 2, 1)  # the first copy, and both counted
    assert len(rows) == len(once.pairs())
    queries = leak_free.leave_one_out_queries(space, once, stored=True)
    barks = queries.definitions.index("a pet that barks")
    assert queries.copies is not None and queries.copies[barks] == 2 and queries.single == 0
    stored = space.definitions[int(queries.rows[barks])][None].float().numpy()
    left = space.leave_one_out(queries.gold[barks : barks + 1], stored, queries.copies[barks : barks + 1])[0]
    alone = DefinitionSpace.build(encoder, _dictionary({"dog": [toy_dictionary["cat"].definitions[0]]}), "amp")
    np.testing.assert_allclose(left, alone.matrix[0].numpy(), atol=2e-3)  # neither copy left in: float16 rows
    # the entry encoder's way counts the copies among the stored vectors near the query's, whether the dictionary
    # lists the definition once (a folder's definitions with --wordnet-dir) or twice: the ranks of the stored way
    stored_ranks = leak_free.leave_one_out_ranks(encoder, space, None, queries)
    for listed in (once, doubled):
        encoded = leak_free.leave_one_out_queries(space, listed)
        assert encoded.rows is None and set(encoded.copies.tolist()) == {leak_free.NEAR_QUERY}
        ranks = leak_free.leave_one_out_ranks(encoder, space, encoder, encoded).tolist()
        assert dict(zip(encoded.definitions, ranks, strict=True)) == dict(
            zip(queries.definitions, stored_ranks.tolist(), strict=True)
        )
    assert [leak_free.EntryRepeats(space).near(space.index["dog"], v) for v in (stored[0], -stored[0])] == [2, 1]
    # a space without its stored vectors counts the dictionary's texts; an entry of copies alone is not scored
    bare = DefinitionSpace(space.words, space.matrix, "cosine", 0.05, space.kind, space.counts)
    listed_twice = leak_free.leave_one_out_queries(bare, doubled)
    twice = zip(listed_twice.copies, listed_twice.definitions, strict=True)
    assert [c for c, d in twice if d == "a pet that barks"] == [2, 2]
    only = _dictionary({**{e.headword: e.definitions for e in toy_dictionary}, "dog": ["a pet that barks"] * 2})
    only_space = DefinitionSpace.build(encoder, only, "amp", similarity="cosine")
    bare_only = DefinitionSpace(only_space.words, only_space.matrix, "cosine", 0.05, only_space.kind, only_space.counts)
    for kind in (only_space, bare_only):
        assert leak_free.leave_one_out_queries(kind, only).single == 2
    once_only = _dictionary({**{e.headword: e.definitions for e in only}, "dog": ["a pet that barks"]})
    assert leak_free.leave_one_out_queries(only_space, once_only).single == 1  # the stored vectors are one
    tfidf = leak_free.TfidfBaseline(doubled.headwords, doubled)
    left_tfidf = tfidf.leave_one_out(["a pet that barks"], np.array([space.index["dog"]])).toarray()[0]
    expected = tfidf.counter.transform([toy_dictionary["cat"].definitions[0]]).toarray()[0] * tfidf.idf  # the rest
    np.testing.assert_allclose(left_tfidf, expected / np.linalg.norm(expected))
    other_words = _dictionary(
        {**{e.headword: e.definitions for e in doubled}, "dog": ["it barks", "it wags", "a", "b"]}
    )
    assert ("dog", 0) not in leak_free.stored_rows(space, other_words)  # four senses against three vectors
    assert leak_free.leave_one_out_queries(space, other_words, stored=True).rows is None  # the encoder's way then


def test_single_definition_headwords_are_counted_not_scored(encoder, toy_dictionary) -> None:
    toy_dictionary.add("sun", "the star that lights the day")
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine")
    extra = _dictionary({"sun": ["the star that lights the day"], "moon": ["it shines at night"]})
    queries = leak_free.leave_one_out_queries(space, toy_dictionary)
    assert queries.single == 1 and queries.kept == 17 and queries.dropped == 0 and len(queries.definitions) == 16
    assert "the star that lights the day" not in queries.definitions
    assert leak_free.leave_one_out_queries(space, extra).counts() == {"n": 0, "kept": 1, "dropped": 1, "single": 1}
    with pytest.raises(DictEmbedError, match="only definition"):
        space.leave_one_out(np.array([space.index["sun"]]), np.zeros((1, space.matrix.shape[1])))


def test_counts_are_saved_and_old_or_ica_spaces_refuse_leave_one_out(encoder, toy_dictionary, tmp_path) -> None:
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine")
    space.save(tmp_path / "new")
    loaded = load_entry_space(tmp_path / "new")
    assert loaded.counts.tolist() == space.counts.tolist()
    DefinitionSpace(space.words, space.matrix, "cosine", 0.05, space.kind).save(tmp_path / "old", dtype="fp32")
    old = load_entry_space(tmp_path / "old")
    assert old.counts is None and torch.equal(old.matrix, space.matrix)
    with pytest.raises(DictEmbedError, match="without its per-entry definition counts"):
        leak_free.leave_one_out_queries(old, toy_dictionary)
    ica = DefinitionSpace(space.words, space.matrix, kind="definitions-amp-ica")
    with pytest.raises(DictEmbedError, match="ICA"):
        leak_free.leave_one_out_queries(ica, toy_dictionary)


def test_counts_do_not_change_the_run_fingerprint(encoder, toy_dictionary) -> None:
    from dictembed.recipes.run import space_fingerprint

    space = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    bare = DefinitionSpace(space.words, space.matrix, space.similarity, space.temperature, space.kind)
    assert space_fingerprint(space) == space_fingerprint(bare)


def test_cached_space_keeps_its_counts(encoder, toy_dictionary, tmp_path) -> None:
    first = DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=tmp_path)
    again = DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=tmp_path)
    assert again.counts.tolist() == first.counts.tolist() and torch.equal(again.matrix, first.matrix)


# ---------------------------------------------------------------------- cross-dictionary
def test_cross_dictionary_kept_and_dropped() -> None:
    words = ["dog", "cat", "ice cream", "Paris", "march", "March"]
    queries = _dictionary(
        {
            "dog": ["a barking pet", "a hound"],
            "ice_cream": ["a frozen dessert"],
            "paris": ["the capital of France"],
            "March": ["the third month"],
            "zebra": ["a striped horse", "an African equid"],
            "ice cream cone": ["a cone of ice cream"],
        }
    )
    q = leak_free.cross_dictionary_queries(words, queries)
    assert (q.kept, q.dropped) == (5, 3)
    assert q.gold.tolist() == [0, 0, 2, 3, 5]  # exact spelling first: March -> March
    assert q.definitions[2] == "a frozen dessert"
    limited = leak_free.cross_dictionary_queries(words, queries, limit=2)
    assert (limited.kept, limited.dropped, len(limited.definitions)) == (5, 3, 2)


def test_model_ranks_match_the_space_logits(encoder, toy_dictionary) -> None:
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine")
    q = leak_free.cross_dictionary_queries(space.words, _dictionary({"dog": ["it barks"], "cat": ["it purrs"]}))
    with torch.no_grad():
        scores = space(encoder(encoder.tokenize(q.definitions))).numpy()
    assert leak_free.model_ranks(encoder, space, q).tolist() == ranks_from_scores(scores, q.gold).tolist()


# ---------------------------------------------------------------------------- TF-IDF
def test_tfidf_ranks_by_hand() -> None:
    d = _dictionary({"a": ["red apple", "red wine"], "b": ["green apple"], "c": ["blue sky"]})
    tfidf = leak_free.TfidfBaseline(["a", "b", "c"], d)
    # n = 3 documents; smooth idf = ln((1 + n) / (1 + df)) + 1: apple df 2, every other term df 1
    idf_apple, idf_one = math.log(4 / 3) + 1, math.log(4 / 2) + 1
    q_norm = math.hypot(idf_one, idf_apple)  # "red apple": red and apple once each
    a_norm = math.sqrt(5 * idf_one**2 + idf_apple**2)  # a: red twice, apple, wine
    b_norm = math.hypot(idf_one, idf_apple)  # b: green, apple
    expected = [(2 * idf_one**2 + idf_apple**2) / (q_norm * a_norm), idf_apple**2 / (q_norm * b_norm), 0.0]
    np.testing.assert_allclose(tfidf.scores(["red apple"])[0], expected, atol=1e-12)
    queries = leak_free.QuerySet(["red apple", "green apple", "blue sky"], np.array([0, 0, 2]), 3, 0)
    assert tfidf.ranks(queries).tolist() == [1, 2, 1]
    # leave-one-out: a without "red apple" is "red wine" (red, wine once each)
    loo = tfidf.leave_one_out(["red apple"], np.array([0])).toarray()[0]
    vocabulary = tfidf.vectorizer.vocabulary_
    assert loo[vocabulary["red"]] == pytest.approx(1 / math.sqrt(2))
    assert loo[vocabulary["wine"]] == pytest.approx(1 / math.sqrt(2)) and loo[vocabulary["apple"]] == 0
    one = leak_free.QuerySet(["red apple"], np.array([0]), 1, 0)
    # gold (red wine) scores idf_one / (sqrt 2 q_norm) = 0.563 > b's 0.366: still first
    assert tfidf.ranks(one, leave_one_out=True).tolist() == [1]
    # "blue sky" left out of c leaves nothing: c scores 0 and ties with b at the bottom
    assert tfidf.ranks(leak_free.QuerySet(["blue sky"], np.array([2]), 1, 0), leave_one_out=True).tolist() == [3]


def test_tfidf_on_chinese_uses_character_ngrams() -> None:
    d = _dictionary({"a": ["红色的苹果", "红酒"], "b": ["绿色的苹果"], "c": ["蓝色的天空"]})
    tfidf = leak_free.TfidfBaseline(["a", "b", "c"], d)
    assert tfidf.analyzer == "char"  # auto: most letters are Chinese
    assert leak_free.TfidfBaseline(["a"], _dictionary({"a": ["red apple"]})).analyzer == "word"
    assert leak_free.char_ngrams("红酒\n 蓝  天 ") == ["红", "酒", "红酒", "蓝", " ", "天", "蓝 ", " 天", "蓝 天"]
    vocabulary = tfidf.vectorizer.vocabulary_
    assert "果红" not in vocabulary and "果 " not in vocabulary  # no n-gram across two definitions
    queries = leak_free.QuerySet(["蓝天空", "红苹果"], np.array([2, 0]), 2, 0)
    assert tfidf.ranks(queries).tolist() == [1, 1]
    words = leak_free.TfidfBaseline(["a", "b", "c"], d, analyzer="word")
    assert words.ranks(queries).tolist() == [3, 3]  # unsegmented Chinese: no word in common, every score 0
    # leave-one-out of "红酒" leaves a's other definition exactly
    loo = tfidf.leave_one_out(["红酒"], np.array([0])).toarray()[0]
    expected = np.zeros(len(vocabulary))
    for gram in leak_free.char_ngrams("红色的苹果"):
        expected[vocabulary[gram]] += tfidf.idf[vocabulary[gram]]
    np.testing.assert_allclose(loo, expected / np.linalg.norm(expected), atol=1e-12)
    with pytest.raises(DictEmbedError, match="unknown TF-IDF analyzer 'chars'"):
        leak_free.TfidfBaseline(["a"], d, analyzer="chars")


# ---------------------------------------------------------------------------- command line
def _write_tsv(path: Path, words: dict[str, list[str]]) -> Path:
    path.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, defs in words.items() for d in defs))
    return path


@pytest.fixture(scope="module")
def saved_model(bert_path, tmp_path_factory):
    """A DefSent+ AMP model folder by hand: the tiny BERT, its space with counts, a record naming both."""
    from conftest import TOY_WORDS

    from dictembed.dictionary import load_dictionary
    from dictembed.encoder import Encoder
    from dictembed.model_folder import write_definitions
    from dictembed.recipes.config import RunConfig
    from dictembed.record import RunRecord

    root = tmp_path_factory.mktemp("leakfree")
    words = {**TOY_WORDS, "sun": ["the star that lights the day"]}
    tsv = _write_tsv(root / "toy.tsv", words)
    encoder = Encoder.load(bert_path, pooling="mean", device="cpu")
    space = DefinitionSpace.build(encoder, load_dictionary(str(tsv)), "amp", similarity="cosine")
    settings = {"model": str(bert_path), "pooling": "mean", "pooler": "none", "dictionary": str(tsv), "split_seed": 0}
    config = RunConfig.create("defsent-plus", **settings)
    record = RunRecord(method="defsent-plus", config=config.to_dict(), pst_step=1, entry_encoder=str(bert_path))
    folder = root / "model"
    encoder.save(folder, record=record)
    space.save(folder)
    write_definitions(folder, load_dictionary(str(tsv)))  # as a trained model's folder holds them
    other = _write_tsv(root / "other.tsv", {"dog": ["it barks"], "sun": ["a hot star"], "zebra": ["a striped horse"]})
    return folder, other


def _run_json(argv: list[str], capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_cross_dictionary_leave_one_out_and_tfidf(saved_model, capsys) -> None:
    folder, other = saved_model
    base = ["evaluate", "reverse-dictionary", "--model", str(folder)]
    cross = _run_json([*base, "--queries", str(other)], capsys)
    assert (cross["n"], cross["kept"], cross["dropped"]) == (2, 2, 1)
    assert set(cross) >= {"mrr", "median_rank", "acc1", "acc10", "acc100", "top1", "top3", "top10"}
    loo = _run_json([*base, "--leave-one-out", "--split", "train"], capsys)
    assert loo["kept"] == loo["n"] + loo["single"] and loo["dropped"] == 0 and 1 <= loo["median_rank"] <= 9
    for extra in (["--queries", str(other)], ["--leave-one-out", "--split", "train"]):
        tfidf = _run_json([*base, "--baseline", "tfidf", *extra], capsys)
        assert {k: tfidf[k] for k in ("n", "kept", "dropped")} == {
            k: (cross if extra[0] == "--queries" else loo)[k] for k in ("n", "kept", "dropped")
        }


def test_cli_leave_one_out_reads_the_folders_stored_vectors_not_its_entry_encoder(
    saved_model, capsys, monkeypatch
) -> None:
    folder, _ = saved_model
    base = ["evaluate", "reverse-dictionary", "--model", str(folder), "--leave-one-out", "--split", "train"]
    # another --dictionary (here the same table, named) takes the entry encoder's way: the figures to match
    encoded = _run_json([*base, "--dictionary", str(folder.parent / "toy.tsv")], capsys)

    def refuse(*args, **kwargs):
        raise AssertionError("the entry encoder was loaded")

    monkeypatch.setattr(leak_free, "load_entry_encoder", refuse)
    stored = _run_json(base, capsys)
    assert stored.pop("mrr") == pytest.approx(encoded.pop("mrr"), abs=1e-6) and stored == encoded


def _last_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err.strip().splitlines()[-1]


def test_cli_old_space_and_bad_options_give_one_line_errors(saved_model, tmp_path, capsys) -> None:
    import shutil

    folder, other = saved_model
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    space = load_entry_space(old)
    DefinitionSpace(space.words, space.matrix, space.similarity, space.temperature, space.kind).save(old)
    base = ["evaluate", "reverse-dictionary", "--model", str(old)]
    assert main([*base, "--leave-one-out", "--split", "train"]) == 1
    assert "without its per-entry definition counts" in _last_error_line(capsys)
    assert main([*base, "--queries", str(other)]) == 0  # cross-dictionary queries need no counts
    capsys.readouterr()
    assert main([*base, "--queries", str(other), "--leave-one-out"]) == 2
    assert "either --queries" in _last_error_line(capsys)


def test_cli_tfidf_analyzer_needs_the_baseline(capsys) -> None:
    from conftest import cli_refuses

    argv = ["evaluate", "reverse-dictionary", "--model", "absent", "--leave-one-out", "--tfidf-analyzer", "char"]
    cli_refuses(capsys, argv, "--tfidf-analyzer needs --baseline tfidf", code=2)
