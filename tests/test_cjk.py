"""Chinese text (`dictembed.cjk`): segmented text joined back, the CJK share, pinyin initials; and the reverse
dictionary's pattern and pinyin filters, the `predict` table and the API on Chinese words."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from dictembed import cjk
from dictembed.cli.predict import display_width, results_table
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.extras import MissingExtraError
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import Filters, word_script

# word -> definition; 使出 and 使用 start with 使, 出使 holds it second; 银行 reads yín háng (not xíng) as a word
SENSES = {
    "使出": "为特定目的而使用后述能力或特质。",
    "使用": "让人或物发挥作用。",
    "使出来": "把能力或特质发挥出来。",
    "出使": "受派遣到外国去办事。",
    "银行": "经营存款、贷款和汇兑的金融机构。",
    "行走": "用脚走路。",
    "卡拉OK": "一种伴唱的娱乐。",
    "bank": "land beside a river",
}
WORDS = list(SENSES)


def test_join_segmented_removes_spaces_next_to_chinese_only() -> None:
    segmented = "陈达海 大怒 ， 刷刷 刷 连刺 三剑 ， 使出 他 成名 绝技 ‘ 青蟒 剑法 ’ 来 。"
    assert cjk.join_segmented(segmented) == "陈达海大怒，刷刷刷连刺三剑，使出他成名绝技‘青蟒剑法’来。"
    assert cjk.join_segmented("实用 金属 ， 化学 符号 为 Cu 。") == "实用金属，化学符号为Cu。"
    assert cjk.join_segmented("为 英语 tart 的 音译 。") == "为英语tart的音译。"
    assert cjk.join_segmented("英语 New  York 的 意思") == "英语New York的意思"  # Latin words keep one space
    assert cjk.join_segmented("  a   dog  ") == "a dog"
    assert cjk.join_segmented("한국어 문장") == "한국어 문장"  # Korean writes spaces between words
    assert cjk.join_segmented("") == ""


def test_is_cjk_share_and_chinese_word_lists() -> None:
    assert cjk.looks_chinese(["使出", "银行", "卡拉OK"]) and not cjk.looks_chinese(["bank", "使出"])
    assert not cjk.looks_chinese(["食べる", "日本", "見る"])  # Japanese: kana
    assert all(map(cjk.is_cjk, "使，。（々カ"))
    assert not any(map(cjk.is_cjk, "a1 ‘’한é"))
    assert cjk.cjk_share(["使出 Cu", "ab"]) == pytest.approx(2 / 6)
    assert cjk.cjk_share([]) == 0.0 and cjk.cjk_share(["，。"]) == 0.0


@pytest.mark.parametrize(
    "char,cjk_char,han",
    [
        ("カ", True, False),  # katakana: written without spaces, not a Han ideograph
        ("の", True, False),  # hiragana
        ("，", True, False),  # fullwidth comma
        ("。", True, False),  # ideographic full stop
        ("使", True, True),  # the unified block
        ("㐀", True, True),  # Extension A, its first ideograph
        ("\U00020000", True, True),  # Extension B, its first ideograph
        ("\uf900", True, True),  # a compatibility ideograph
        ("䷀", False, False),  # a Yijing hexagram, between Extension A and the unified block
        ("a", False, False),
        ("é", False, False),
        ("한", False, False),  # Hangul: Korean puts spaces between words
    ],
)
def test_the_cjk_and_han_predicates_at_their_boundaries(char: str, cjk_char: bool, han: bool) -> None:
    assert (cjk.is_cjk(char), cjk.is_han(char)) == (cjk_char, han)


def test_pinyin_initials_and_matcher() -> None:
    pytest.importorskip("pypinyin")
    assert cjk.pinyin_initials("使出") == [{"s"}, {"c"}]
    assert cjk.pinyin_initials("银行") == [{"y"}, {"h"}]  # the word's reading, not 行 xíng
    assert cjk.pinyin_initials("卡拉OK") == [{"k", "q"}, {"l"}, {"o"}, {"k"}]  # 卡 alone: kǎ or qiǎ
    sc = cjk.pinyin_matcher("SC ")
    assert [w for w in WORDS if sc(w)] == ["使出", "使出来"]
    assert [w for w in WORDS if cjk.pinyin_matcher("q")(w)] == ["卡拉OK"]  # any reading of 卡
    assert not cjk.pinyin_matcher("b")("bank")  # no Han character: never a pinyin match
    for bad in ("", "s1", "使", "s c", "x" * 21):
        with pytest.raises(DictEmbedError, match="pinyin: the initials of the syllables"):
            cjk.check_pinyin(bad)


def test_a_missing_pypinyin_is_one_line_naming_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pypinyin", None)
    with pytest.raises(MissingExtraError, match=r'pinyin filter needs .*pypinyin.*pip install "dictembed\[zh\]"'):
        cjk.pinyin_matcher("sc")


# ---------------------------------------------------------------------------- the reverse dictionary
@pytest.fixture(scope="module")
def rd(bert_path) -> ReverseDictionary:
    dictionary = Dictionary(name="zh")
    for word, definition in SENSES.items():
        dictionary.add(word, definition)
    rows = np.random.default_rng(0).normal(size=(len(WORDS), 32)).astype(np.float32)
    space = DefinitionSpace(WORDS, rows, similarity="cosine", temperature=0.05)
    return ReverseDictionary(Encoder.load(str(bert_path), pooling="mean"), space, dictionary=dictionary, name="zh")


def _words(results) -> list[str]:
    return sorted(word for result in results for word in result.words)


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("使*", ["使出", "使出来", "使用"]),  # a glob over the whole word
        ("使", ["使出", "使出来", "使用"]),  # a prefix
        ("使?", ["使出", "使用"]),  # two characters
        ("*使", ["出使"]),
        ("/^.使$/", ["出使"]),  # RE2
        ("/行/", ["行走", "银行"]),
        ("卡拉ok", ["卡拉OK"]),  # case-insensitive past the Chinese
    ],
)
def test_patterns_match_chinese_characters(rd, pattern, expected) -> None:
    assert _words(rd.search("使用能力", k=10, filters=Filters(pattern=pattern))) == expected


def test_pinyin_filter_in_search_and_neighbours(rd) -> None:
    pytest.importorskip("pypinyin")
    assert _words(rd.search("使用能力", k=10, filters=Filters(pinyin="sc"))) == ["使出", "使出来"]
    assert _words(rd.search("使用能力", k=10, filters=Filters(pinyin="sc", max_length=2))) == [
        "使出"
    ]  # 使出来 has 3 characters
    assert _words(rd.search("金融机构", k=10, filters=Filters(pinyin="yh"))) == ["银行"]
    assert _words(rd.search("金融机构", k=10, filters=Filters(pinyin="yx"))) == []
    assert _words(rd.neighbours("使出", k=10, filters=Filters(pinyin="s"))) == ["使出来", "使用"]
    assert _words(rd.search("a river", k=10, filters=Filters(pinyin="s", pattern="*来"))) == ["使出来"]
    assert Filters(pinyin=" SC ").pinyin == "sc" and not Filters(pinyin=" ").active
    with pytest.raises(DictEmbedError, match="pinyin"):
        rd.search("使用能力", filters=Filters(pinyin="s-c"))


def test_predict_table_aligns_chinese_words(rd) -> None:
    results = rd.search("使用能力", k=3)
    lines = results_table(results).splitlines()
    assert display_width("使出") == 4 and display_width("ab") == 2
    scores = [display_width(line[: line.index(f"{r.score:.4f}")]) for line, r in zip(lines, results, strict=True)]
    assert len(set(scores)) == 1  # every score starts in the same column
    assert any(SENSES[w][:10] in "\n".join(lines) for w in results[0].words)


def test_predict_table_keeps_its_columns_for_a_long_synonym_list() -> None:
    from types import SimpleNamespace

    from dictembed.cli.predict import WORDS_WIDTH, column_words

    many = ["besotted", "blind drunk", "blotto", "crocked", "fuddled", "pie-eyed", "sloshed"]
    assert column_words(many) == "besotted, blind drunk, blotto, +4"  # 33 columns; one more word would pass 36
    assert (
        column_words(["ab", "cd", "ef"], 10) == "ab, cd, ef" and column_words(["ab", "cd", "efgh"], 10) == "ab, cd, +1"
    )
    assert column_words(["a" * 50, "b"]) == "a" * 31 + "…, +1" and column_words(["猫" * 9], 10) == "猫" * 4 + "…"
    results = [
        SimpleNamespace(words=many, score=1.3, definitions={"adj": ["very drunk"]}),
        SimpleNamespace(words=["tipsy"], score=1.1, definitions={"adj": ["slightly intoxicated"]}),
    ]
    lines = results_table(results).splitlines()
    assert [line.index(f"{r.score:.4f}") for line, r in zip(lines, results, strict=True)] == [
        6 + WORDS_WIDTH
    ] * 2  # "  1  " and a space


def test_api_pinyin_parameter(rd) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("pypinyin")
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    client = TestClient(create_app(reverse_dictionary=rd))
    assert client.get("/health").json()["chinese"] is True  # the page then shows its pinyin filter
    assert 'id="pinyin"' in client.get("/").text
    answer = client.get("/api/reverse", params={"q": "使用能力", "k": 10, "pinyin": "sc", "mode": "describe"})
    assert answer.status_code == 200
    assert sorted(w for r in answer.json()["results"] for w in r["words"]) == ["使出", "使出来"]
    similar = client.get("/api/reverse", params={"q": "使出", "pattern": "使*"}).json()
    assert similar["mode"] == "similar" and _words_json(similar) == ["使出来", "使用"]
    bad = client.get("/api/reverse", params={"q": "使用能力", "pinyin": "s1"})
    assert bad.status_code == 422 and bad.json()["error"].startswith("pinyin: the initials")
    too_long = client.get("/api/reverse", params={"q": "使用能力", "pinyin": "s" * 21})
    assert too_long.status_code == 422


def _words_json(answer: dict) -> list[str]:
    return sorted(w for r in answer["results"] for w in r["words"])


def test_predict_pinyin_option(served_model, capsys) -> None:
    pytest.importorskip("pypinyin")
    from conftest import cli_refuses, cli_succeeds

    out, _ = cli_succeeds(capsys, ["predict", "--model", str(served_model), "a pet", "--pinyin", "SC", "--json"])
    assert json.loads(out) == []  # English words have no pinyin
    cli_refuses(capsys, ["predict", "--model", str(served_model), "a pet", "--pinyin", "s1"], "--pinyin", code=2)


def test_script_filter_keeps_one_language_of_a_merged_dictionary(rd) -> None:
    assert [word_script(w) for w in ("使出", "卡拉OK", "bank", "café", "Привет", "42")] == [
        "cjk",
        "cjk",
        "latin",
        "latin",
        "other",
        "other",
    ]
    assert _words(rd.search("a river", k=10, filters=Filters(script="latin"))) == ["bank"]
    assert _words(rd.search("a river", k=10, filters=Filters(script="cjk"))) == sorted(w for w in WORDS if w != "bank")
    assert _words(rd.neighbours("使出", k=10, filters=Filters(script="latin"))) == ["bank"]
    assert Filters(script="cjk").active and not Filters().active
    with pytest.raises(DictEmbedError, match="unknown script 'greek'"):
        rd.search("a river", filters=Filters(script="greek"))


def test_api_script_parameter_and_counts(rd) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    client = TestClient(create_app(reverse_dictionary=rd))
    assert client.get("/health").json()["scripts"] == {"cjk": 7, "latin": 1}
    answer = client.get("/api/reverse", params={"q": "金融机构", "k": 10, "script": "latin"})
    assert answer.status_code == 200 and _words_json(answer.json()) == ["bank"]
    bad = client.get("/api/reverse", params={"q": "金融机构", "script": "greek"})
    assert bad.status_code == 422 and "script" in bad.json()["error"]


def test_predict_script_option(served_model, capsys) -> None:
    from conftest import cli_refuses, cli_succeeds

    out, _ = cli_succeeds(capsys, ["predict", "--model", str(served_model), "a pet", "--script", "cjk", "--json"])
    assert json.loads(out) == []  # an English dictionary has no CJK words
    out, _ = cli_succeeds(capsys, ["predict", "--model", str(served_model), "a pet", "--script", "latin", "--json"])
    assert json.loads(out)
    cli_refuses(capsys, ["predict", "--model", str(served_model), "a pet", "--script", "greek"], "--script", code=2)


def test_a_long_query_heads_its_results_cut_to_the_width() -> None:
    """`predict --input` printed a 58,000-character line above its results; `--json` keeps the query whole."""
    from dictembed.cli.predict import query_heading

    assert query_heading("a long-necked African animal") == "a long-necked African animal"
    long = "a long-necked African animal " * 2000
    heading = query_heading(long)
    assert (
        display_width(heading) <= 120
        and heading.startswith("a long-necked")
        and heading.endswith(f"… ({len(long):,} characters)")
    )
    wide = query_heading("长颈的非洲动物" * 30, 40)
    assert display_width(wide) <= 40 and wide.startswith("长颈的") and wide.endswith("(210 characters)")
