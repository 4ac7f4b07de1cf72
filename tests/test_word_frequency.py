"""The word-frequency prior of the reverse dictionary: score = cosine + weight x Zipf frequency."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from wordfreq import zipf_frequency

from dictembed.cache import own_files
from dictembed.cli import main
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import FREQUENCY_WEIGHT, Ranking
from dictembed.word_frequency import entry_frequencies, guess_language, zipf_frequencies

# "house" is a frequent word, "domicile" a rare one: with identical vectors but for a tiny nudge, the prior decides
WORDS = ["domicile", "house", "zyzzyva", "giraffe"]


@pytest.fixture(scope="module")
def encoder(bert_path: Path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean")


@pytest.fixture(scope="module")
def space() -> DefinitionSpace:
    rows = np.random.default_rng(1).normal(size=(len(WORDS), 32)).astype(np.float32)
    rows[1] = rows[0] * 0.999 + rows[1] * 0.001  # `house` a hair away from `domicile`
    return DefinitionSpace(WORDS, rows, similarity="cosine", temperature=0.05)


def _dictionary() -> Dictionary:
    d = Dictionary(name="toy")
    for word in WORDS:
        d.add(word, f"the meaning of {word}", pos="n")
    return d


def test_the_score_is_cosine_plus_weight_times_zipf(encoder: Encoder, space: DefinitionSpace) -> None:
    query = "a place where people live"
    plain = ReverseDictionary(encoder, space, _dictionary(), ranking=Ranking(frequency_weight=0)).search(query, k=4)
    ranked = ReverseDictionary(
        encoder, space, _dictionary(), ranking=Ranking(frequency_weight=0.05), language="en"
    ).search(query, k=4)
    cosine = {r.words[0]: r.score for r in plain}
    expected = {w: cosine[w] + 0.05 * zipf_frequency(w, "en") for w in WORDS}
    assert {r.words[0]: r.score for r in ranked} == pytest.approx(expected, abs=1e-5)
    assert [r.words[0] for r in ranked] == sorted(expected, key=expected.__getitem__, reverse=True)
    by_word = [r.words[0] for r in ranked]
    assert by_word.index("house") < by_word.index("domicile")  # the frequent word wins a near tie


def test_no_prior_when_turned_off_or_unknown(encoder: Encoder, space: DefinitionSpace) -> None:
    for options in ({"ranking": Ranking(frequency_weight=0)}, {"language": None}, {"language": "none"}):
        rd = ReverseDictionary(encoder, space, _dictionary(), **options)  # type: ignore[arg-type]
        assert rd.prepare().group_prior is None
    assert entry_frequencies(["qzxvw", "jjkqp", "xxvqz"], "auto") is None  # neither English nor Chinese


def test_the_language_is_recognised() -> None:
    assert guess_language(["house", "dog", "run quickly", "giraffe"]) == "en"
    assert guess_language(["使出", "银行", "冰", "水"]) == "zh"
    japanese = ["猫", "犬", "学校", "食べる", "勉強", "日本", "する", "ありがとう", "テレビ", "水"]
    assert guess_language(japanese) == "ja"  # Han characters among kana: Japanese, not Chinese
    assert guess_language(["qzxvw", "jjkqp"]) is None
    zh = zipf_frequencies(["银行", "使出"], "zh")
    assert zh[0] > 3 and zh.dtype == np.float32


def test_frequencies_are_cached_and_a_damaged_cache_recomputed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = zipf_frequencies(WORDS, "en", tmp_path)
    (cached,) = tmp_path.glob("frequency-*.npy")
    np.testing.assert_array_equal(np.load(cached), first)
    assert own_files(tmp_path) == [cached]  # `dictembed cache clear` removes it
    np.save(cached, np.full(len(WORDS), np.nan, dtype=np.float32))  # damaged: NaN
    with caplog.at_level(logging.WARNING):
        again = zipf_frequencies(WORDS, "en", tmp_path)
    np.testing.assert_array_equal(again, first)
    assert "damaged" in caplog.text and str(cached) in caplog.text
    cached.write_bytes(b"not an array")
    np.testing.assert_array_equal(zipf_frequencies(WORDS, "en", tmp_path), first)


def test_the_cli_refuses_a_negative_or_overflowing_weight(capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("-1", "1e308"):  # 1e308 times a cosine overflowed the score to NaN: results in file order
        assert main(["predict", "a dog", "--model", "m", "--frequency-weight", value]) == 2
        assert "must be a number from 0 to 1000" in capsys.readouterr().err
    assert FREQUENCY_WEIGHT > 0


def test_a_dictionary_of_two_scripts_gets_each_word_in_its_own_language(caplog) -> None:
    from wordfreq import top_n_list

    english, chinese = top_n_list("en", 150), [w for w in top_n_list("zh", 400) if guess_language([w]) == "zh"][:150]
    assert len(chinese) == 150
    words = english + chinese
    with caplog.at_level(logging.INFO, logger="dictembed.word_frequency"):
        values = entry_frequencies(words, "auto")
    assert values is not None
    np.testing.assert_allclose(values[:150], zipf_frequencies(english, "en"))
    np.testing.assert_allclose(values[150:], zipf_frequencies(chinese, "zh"))
    assert "two scripts" in caplog.text
    # one script with a few words of the other: the majority's language for all, as before
    few = english + chinese[:5]
    np.testing.assert_allclose(entry_frequencies(few, "auto"), zipf_frequencies(few, "en"))


def test_most_frequent_keeps_the_frequent_headwords_in_dictionary_order() -> None:
    from dictembed.errors import DictEmbedError
    from dictembed.word_frequency import most_frequent

    d = Dictionary(name="toy")
    for word in ["zyzzyva", "house", "domicile", "the", "giraffe"]:
        d.add(word, f"the meaning of {word}")
    kept = most_frequent(d, 3, "en")
    by_frequency = sorted(d.headwords, key=lambda w: -zipf_frequency(w, "en"))[:3]
    assert set(kept.headwords) == set(by_frequency) == {"the", "house", "giraffe"}
    assert kept.headwords == [w for w in d.headwords if w in by_frequency]  # the dictionary's order
    assert most_frequent(d, 5, "en") is d  # nothing to cut
    with pytest.raises(DictEmbedError, match="toy: no word frequencies"):
        most_frequent(d, 2, None)


def test_japanese_words_lose_a_point_per_inferred_boundary() -> None:
    from types import SimpleNamespace

    from dictembed.word_frequency import zipf

    tokens = {"のたのた": ["の", "た", "の", "た"], "冷蔵庫": ["冷蔵庫"], "猫だ": ["猫", "だ"]}
    fake = SimpleNamespace(
        zipf_frequency=lambda word, language: {"のたのた": 6.94, "冷蔵庫": 4.21, "猫だ": 0.5}[word],
        tokenize=lambda word, language: tokens[word],
    )
    assert zipf(fake, "のたのた", "ja") == pytest.approx(3.94)  # four particles: no longer among the most frequent
    assert zipf(fake, "冷蔵庫", "ja") == pytest.approx(4.21)  # one token: as wordfreq says
    assert zipf(fake, "猫だ", "ja") == 0.0  # never below 0
    assert zipf(fake, "のたのた", "zh") == pytest.approx(6.94)  # wordfreq penalises Chinese itself


@pytest.mark.parametrize("level,shown", [(logging.WARNING, False), (logging.DEBUG, True)])
def test_jieba_speaks_only_at_the_debug_level(level: int, shown: bool) -> None:
    """jieba announces loading its dictionary ("Building prefix dict ...") at DEBUG on a stderr handler of its own:
    in a fresh process (jieba used the first time), the default level shows none of it and -v (DEBUG) shows it
    once, through dictembed's logging."""
    import subprocess
    import sys

    code = (
        "from dictembed.cli import configure_logging\n"
        "from dictembed.word_frequency import zipf_frequencies\n"
        f"configure_logging({level})\n"
        "assert zipf_frequencies(['长颈鹿'], 'zh')[0] > 0\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "prefix dict" in line]
    assert len(lines) == shown and all(line.startswith("DEBUG jieba: Building prefix dict from ") for line in lines)


def test_a_wordfreq_without_a_word_list_gives_no_prior_and_a_warning(
    encoder: Encoder, space: DefinitionSpace, monkeypatch, caplog
) -> None:
    """A partial wordfreq install (its French list removed) fails on lookup: no prior, said once, and the reverse
    dictionary still ranks rather than a search or a save failing."""
    import wordfreq

    def missing(word: str, lang: str, *args, **kwargs) -> float:
        if lang != "en":
            raise LookupError(f"No wordlist 'best' available for language {lang!r}")
        return zipf_frequency(word, lang)

    monkeypatch.setattr(wordfreq, "zipf_frequency", missing)
    with caplog.at_level(logging.WARNING):
        assert entry_frequencies(WORDS, "auto") is None
        rd = ReverseDictionary(encoder, space, _dictionary())
        assert rd.prepare().group_prior is None and rd.search("a pet that barks", k=2)
    assert "No wordlist 'best' available for language 'fr'" in caplog.text
    assert entry_frequencies(WORDS, "en") is not None  # English alone is readable


def test_a_word_the_filters_remove_lends_its_frequency_to_no_result(encoder: Encoder) -> None:
    """A group's prior was its most frequent word's even when a filter removed that word: *abode*, sharing *house*'s
    vector, ranked on *house*'s frequency under `initial="a"`. It is now the most frequent word the filters keep."""
    words = ["house", "abode", "aerie"]
    rows = np.random.default_rng(2).normal(size=(3, 32)).astype(np.float32)
    rows[1] = rows[0]  # one group: house and abode
    space = DefinitionSpace(words, rows, similarity="cosine", temperature=0.05)
    dictionary = Dictionary(name="toy")
    for word in words:
        dictionary.add(word, f"the meaning of {word}", pos="n")
    query = "a place where birds live"
    plain = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(frequency_weight=0))
    cosine = {r.words[0]: r.score for r in plain.search(query, k=3)}
    ranked = ReverseDictionary(encoder, space, dictionary, ranking=Ranking(frequency_weight=0.5), language="en")
    scores = {r.words[0]: r.score for r in ranked.search(query, k=3, initial="a")}
    assert scores == pytest.approx(
        {w: cosine[w if w != "abode" else "house"] + 0.5 * zipf_frequency(w, "en") for w in ("abode", "aerie")},
        abs=1e-5,
    )
    unfiltered = {tuple(r.words): r.score for r in ranked.search(query, k=3)}
    assert unfiltered[("house", "abode")] == pytest.approx(
        cosine["house"] + 0.5 * zipf_frequency("house", "en"), abs=1e-5
    )
