"""CC-CEDICT: lines, headwords, the reference-only and classifier filters, gzip, errors and the package locator."""

from __future__ import annotations

import gzip
import logging
import re

import pytest

from dictembed.dictionary.sources import cedict
from dictembed.dictionary.sources.cedict import load_cc_cedict, read_cedict, reference_kind, write_references
from dictembed.errors import DataFormatError
from dictembed.extras import MissingExtraError

CEDICT = """\
# CC-CEDICT
#! version=1
#! entries=12
銀行 银行 [yin2 hang2] /bank/CL:家[jia1],個|个[ge4]/
世界 世界 [shi4 jie4] /world (CL:個|个[ge4])/
畫龍點睛 画龙点睛 [hua4 long2 dian3 jing1] /to add the finishing touch/
點睛 点睛 [dian3 jing1] /to dot the eyes (abbr. for 畫龍點睛|画龙点睛[hua4 long2 dian3 jing1])/
丁 丁 [Ding1] /surname Ding/
丁 丁 [ding1] /male adult/fourth of the ten Heavenly Stems 天干[tian1 gan1]/
裏 里 [li3] /variant of 裡|里[li3]/old variant of 里[li3]/
鍾 钟 [zhong1] /see 鐘|钟[zhong1]/
個 个 [ge4] /abbr. for 個|个[ge4]/
誰 谁 [shei2] /who/also pr. [shui2]/
乾 干 [gan1] /dry/
幹 干 [gan4] /to do/dry/
空 空 [kong1] / /
"""
CROSS = "cross-reference glosses ('see X', 'same as X', 'also written X', '(also X)', 'cf. X', 'used in X')"
# The glosses that are skipped, by reason: (reason, count).
SKIPS = {
    "classifier notes ('CL:...')": 2,  # a gloss of only a note (one row) and a note stripped from "world"
    "surname glosses ('surname X')": 1,
    "variant glosses ('variant of X')": 2,
    CROSS: 1,
    "abbreviation glosses ('abbr. for X')": 1,
    "pronunciation notes ('also pr. [x]', 'Taiwan pr. [x]')": 1,
    "rows with an empty definition": 1,
}


def _report(caplog):
    return next(r.load_report for r in caplog.records if hasattr(r, "load_report"))


def _write(tmp_path, text=CEDICT, name="cedict.txt"):
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return path


def test_headwords_glosses_and_skips(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        dictionary = load_cc_cedict(_write(tmp_path))
    assert dictionary.name == "cc-cedict"
    assert dictionary.headwords == ["银行", "世界", "画龙点睛", "点睛", "丁", "谁", "干"]
    assert dictionary["银行"].definitions == ["bank"]
    assert dictionary["世界"].definitions == ["world"]  # its classifier note stripped
    assert dictionary["点睛"].definitions == ["to dot the eyes (abbr. for 画龙点睛)"]  # the reference in one form
    assert dictionary["丁"].definitions == ["male adult", "fourth of the ten Heavenly Stems 天干"]
    assert dictionary["干"].definitions == ["dry", "to do"]  # two lines, one headword; "dry" once
    assert all(s.pos is None and not s.examples for e in dictionary for s in e.senses)
    report = _report(caplog)
    assert dict(report.skipped) == SKIPS
    assert (report.rows, report.senses, report.repeated_definitions) == (18, 9, 1)
    assert report.skipped_lines["surname glosses ('surname X')"] == [8]  # the file's line numbers
    assert "skipped 2 variant glosses ('variant of X') (lines 10, 10)" in caplog.text


def test_traditional_headwords_and_references(tmp_path):
    dictionary = load_cc_cedict(_write(tmp_path), traditional=True)
    assert dictionary["乾"].definitions == ["dry"] and dictionary["幹"].definitions == ["to do", "dry"]
    assert dictionary["點睛"].definitions == ["to dot the eyes (abbr. for 畫龍點睛)"]


def test_gzip_file_reads_the_same(tmp_path):
    plain = load_cc_cedict(_write(tmp_path))
    packed = load_cc_cedict(_write(tmp_path, name="cedict.txt.gz"))
    assert packed.pairs() == plain.pairs()


def test_read_cedict_keeps_pinyin_and_both_scripts(tmp_path):
    lines = list(read_cedict(_write(tmp_path)))
    assert len(lines) == 13
    first = lines[0]
    assert (first.traditional, first.simplified, first.pinyin, first.line) == ("銀行", "银行", "yin2 hang2", 4)
    assert first.glosses == ["bank", "CL:家[jia1],個|个[ge4]"]


@pytest.mark.parametrize(
    ("gloss", "kind"),
    [
        ("erhua variant of 一下[yi1 xia4]", "variant glosses ('variant of X')"),
        ("Japanese variant of 佛", "variant glosses ('variant of X')"),
        (
            "see also 啃書|啃书[ken3 shu1]",
            CROSS,
        ),
        (
            "used in 傢伙|家伙[jia1 huo5] and 傢俱|家俱[jia1 ju4]",
            CROSS,
        ),
        (
            "also written 巴頌管|巴颂管 or 巴松管",
            CROSS,
        ),
        ("cf. 大灶", CROSS),  # real rows of the installed CC-CEDICT
        ("(also 赒济)", CROSS),
        ("erhua variant of 胡同|胡同|[hu2 tong4]", "variant glosses ('variant of X')"),  # a stray "|"
        ("also known as 老王", None),
        ("abbr. to 七律", "abbreviation glosses ('abbr. for X')"),
        ("Taiwan pr. [xia4 hai2]", "pronunciation notes ('also pr. [x]', 'Taiwan pr. [x]')"),
        ("polysyllabic surname Moqi", "surname glosses ('surname X')"),
        ("see 艨艟, ancient leatherclad warship", None),  # more than a reference
        ("(used in place names)", None),
        ("to see", None),
        ("Nash (surname)", None),
        ("my (Internet slang variant of 我的[wo3 de5])", None),
    ],
)
def test_reference_kind(gloss, kind):
    assert reference_kind(gloss) == kind


def test_write_references():
    gloss = "social media (abbr. for 社交媒體|社交媒体[she4 jiao1 mei2 ti3] or 社群媒體|社群媒体)"
    assert write_references(gloss) == "social media (abbr. for 社交媒体 or 社群媒体)"
    assert write_references(gloss, traditional=True) == "social media (abbr. for 社交媒體 or 社群媒體)"
    assert write_references("bye-bye (alternative for 拜拜[bai2 bai2])") == "bye-bye (alternative for 拜拜)"


def test_malformed_line_names_file_and_line(tmp_path):
    path = _write(tmp_path, CEDICT + "銀行 银行 yin2 hang2 /bank/\n")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}:17: not a CC-CEDICT line"):
        load_cc_cedict(path)


def test_damaged_gzip_is_one_line_error(tmp_path):
    path = tmp_path / "cedict.txt.gz"
    path.write_bytes(gzip.compress(CEDICT.encode())[:-20])
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}: not a readable gzip file"):
        load_cc_cedict(path)


def test_only_comments_is_an_error(tmp_path):
    with pytest.raises(DataFormatError, match="cc-cedict: no entries"):
        load_cc_cedict(_write(tmp_path, "# CC-CEDICT\n"))


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(cedict, "PACKAGE", "no_such_cedict_package")
    with pytest.raises(MissingExtraError, match=r'pip install "dictembed\[zh\]"'):
        load_cc_cedict()


def test_installed_package_file_is_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "fake_cedict_pkg"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    _write(package / "data", name="cedict_1_0_ts_utf-8_mdbg.txt.gz")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cedict, "PACKAGE", "fake_cedict_pkg")
    assert cedict.cedict_data_file() == package / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    assert len(load_cc_cedict()) == 7
