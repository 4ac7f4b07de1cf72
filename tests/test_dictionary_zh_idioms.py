"""Chinese idioms: idiom -> explanation, examples, the cross-reference filter, errors and the package locator."""

from __future__ import annotations

import json
import logging
import re

import pytest

from dictembed.dictionary.sources import zh_idioms
from dictembed.dictionary.sources.zh_idioms import idiom_example, load_zh_idioms
from dictembed.errors import DataFormatError
from dictembed.extras import MissingExtraError


def idiom(word, explanation, example="无"):
    """One item in the package's layout."""
    return {
        "derivation": "《汉书》",
        "example": example,
        "explanation": explanation,
        "pinyin": "",
        "word": word,
        "abbreviation": "",
    }


IDIOMS = [
    idiom("一家老小", "指全家人。", "叫我～喝西北风？★清·吴敬梓《儒林外史》第三回"),
    idiom("雄才大略", "非常杰出的才智和谋略。", "汉武帝～，命卫青出兵。★清·陈天华《狮子吼》"),
    idiom("庖丁解牛", "比喻做事得心应手。"),
    idiom("度长絜短", "见度长絜大”。"),  # only a cross-reference
    idiom("金相玉式", "同金相玉质”。"),  # only a cross-reference
    idiom("拔萃出类", "同出类拔萃”。指高出众人。"),  # a cross-reference and an explanation: kept
    idiom("授受不亲", " "),
    idiom("一言为定", "一句话说定了，不再更改。", "我们决不反悔，一言为定。"),
]


def _write(tmp_path, data=IDIOMS, name="成语.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _report(caplog):
    return next(r.load_report for r in caplog.records if hasattr(r, "load_report"))


def test_idioms_explanations_examples_and_skips(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        dictionary = load_zh_idioms(_write(tmp_path))
    assert dictionary.name == "zh-idioms"
    assert dictionary.headwords == ["一家老小", "雄才大略", "庖丁解牛", "拔萃出类", "一言为定"]
    assert dictionary["一家老小"].senses[0].definition == "指全家人。"
    assert dictionary["一家老小"].senses[0].examples == ["叫我一家老小喝西北风？"]
    assert dictionary["雄才大略"].senses[0].examples == ["汉武帝雄才大略，命卫青出兵。"]
    assert dictionary["庖丁解牛"].senses[0].examples == []  # "无": none
    assert dictionary["拔萃出类"].definitions == ["同出类拔萃。指高出众人。"]  # the quote the data lost the opening of
    assert dictionary["一言为定"].senses[0].examples == ["我们决不反悔，一言为定。"]
    report = _report(caplog)
    assert dict(report.skipped) == {
        "cross-reference explanations ('同X”。', '见X”。')": 2,
        "rows with an empty definition": 1,
    }
    assert (report.rows, report.senses, report.examples) == (8, 5, 3)
    assert dict(report.changed) == {zh_idioms.UNOPENED_QUOTES: 1}


def test_only_closing_quotes_that_close_nothing_are_removed():
    from dictembed.dictionary.sources.zh_idioms import without_unopened_quotes

    assert without_unopened_quotes("意译为无间”，即痛苦") == "意译为无间，即痛苦"
    assert without_unopened_quotes("意译为“无间”，即痛苦") == "意译为“无间”，即痛苦"
    assert without_unopened_quotes("”a“b”c”") == "a“b”c"


def test_idiom_example():
    assert idiom_example("阿党比周", "或众～，或其人特立不群。★《论语》") == "或众阿党比周，或其人特立不群。"
    assert idiom_example("阿党比周", "无") == ""
    assert idiom_example("阿党比周", " 无 ★《论语》") == ""


def test_invalid_json_names_the_line(tmp_path):
    path = tmp_path / "成语.json"
    path.write_text('[\n{"word": "一家老小",\n"explanation": }\n]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}:3: invalid JSON"):
        load_zh_idioms(path)


def test_not_a_list_is_an_error(tmp_path):
    with pytest.raises(DataFormatError, match="expected a JSON list of idioms"):
        load_zh_idioms(_write(tmp_path, {"一家老小": "指全家人。"}))


@pytest.mark.parametrize("item", [{"explanation": "指全家人。"}, {"word": "一家老小", "explanation": 3}, "一家老小"])
def test_malformed_item_names_it(tmp_path, item):
    path = _write(tmp_path, [IDIOMS[0], item])
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}: item 2 is not an idiom object"):
        load_zh_idioms(path)


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(zh_idioms, "PACKAGE", "no_such_idioms_package")
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[zh\]"'):
        load_zh_idioms()


def test_installed_package_file_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_idioms_pkg"
    (package / "数据").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    _write(package / "数据")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(zh_idioms, "PACKAGE", "fake_idioms_pkg")
    assert zh_idioms.zh_idioms_data_file() == package / "数据" / "成语.json"
    assert len(load_zh_idioms()) == 5
