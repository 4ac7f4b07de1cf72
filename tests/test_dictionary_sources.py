"""GCIDE, the Oxford files, Chang's CSV, the generic table loader and `load_dictionary`."""

from __future__ import annotations

import json
import logging

import pytest

from dictembed.dictionary import (
    SOURCES,
    load_chang,
    load_dictionary,
    load_gcide,
    load_oxford,
    load_oxford_autodict,
    load_table,
)
from dictembed.dictionary.sources.gcide import clean_definition, gcide_pos
from dictembed.errors import DataFormatError, DictEmbedError

TSV = (
    "word\tdefinition\texample\tpos\n"
    "bank\tland beside a river\tthe river bank\tn\n"
    "bank\tland  beside a river \twe sat on the bank\tn\n"
    "\tno headword\t\t\n"
    "\n"
    "run\t \t\tv\n"
    "run\tmove fast\t\tv\n"
)


def test_gcide(caplog):
    with caplog.at_level(logging.INFO):
        gcide = load_gcide()
    assert (len(gcide), gcide.num_definitions()) == (108_169, 171_882)
    bank = gcide["bank"].senses[0]
    assert bank.definition == "A bench; a high seat, or seat of distinction or judgment; a tribunal or court."
    assert bank.pos == "n"
    assert gcide["aam"].senses[0].definition.endswith("at Antwerp 36 [Written also Aum and Awm.]")
    hell = gcide["abaddon"].senses[1]
    assert (hell.definition, hell.examples) == (
        "Hell; the bottomless pit.",
        ["In all her gates, Abaddon rues Thy bold attempt."],  # newline in the source collapsed
    )
    assert len(gcide["piracy"].senses) == 2  # its third, empty, definition is dropped and counted
    assert "skipped 4 rows with an empty definition" in caplog.text
    assert "skipped 12 headwords without any definition" in caplog.text


def test_gcide_cleaning():
    assert clean_definition("A measure.\n[1913 Webster]") == "A measure.\n "
    assert clean_definition("Gone.\nSyn. -- lost, missing.") == "Gone."
    labels = ["v. t.", "adv.", "a. & n.", ""]
    assert [gcide_pos(label) for label in labels] == ["v", "r", "a. & n.", None]


def test_oxford_simpdefiner_and_autodict_agree():
    oxford = load_oxford()
    assert (len(oxford), oxford.num_definitions()) == (8_867, 12_230)
    assert oxford["fiver"].senses[0].definition == "a five-dollar bill ."
    failure = [s for s in oxford["failure"].senses if s.definition == "lack of success"]
    assert len(failure) == 1 and len(failure[0].examples) == 2  # one sense, both examples
    autodict = load_oxford_autodict()
    assert autodict.pairs() == oxford.pairs()


def test_oxford_malformed(tmp_path):
    src, tgt = tmp_path / "d.src", tmp_path / "d.tgt"
    src.write_text("cat [SEP] the cat sat\ndog [SEP] a dog\n")
    tgt.write_text("a small feline\n")
    with pytest.raises(DataFormatError, match=r"d\.src:2: line counts differ"):
        load_oxford(src)
    src.write_text("cat [SEP] the cat sat\ndog a dog\n")
    tgt.write_text("a small feline\na canine\n")
    with pytest.raises(DataFormatError, match=r"d\.src:2: expected 'word \[SEP\] example'"):
        load_oxford(src)
    src.write_text("cat [SEP] the cat sat\ncat [SEP] my cat\n")
    tgt.write_text("a small feline\na small feline\n")
    assert load_oxford(src)["cat"].senses[0].examples == ["the cat sat", "my cat"]
    auto = tmp_path / "valid.txt"
    auto.write_text("cat\tthe cat sat\ta small feline\ndog\ta canine\n")
    with pytest.raises(DataFormatError, match=r"valid\.txt:2: expected 3 tab-separated fields, got 2"):
        load_oxford_autodict(auto)


def test_chang():
    chang = load_chang()
    assert (len(chang), chang.num_definitions()) == (2_730, 3_380)
    storm = chang["storm"].senses[0]
    assert storm.definition == "a wind of force on the beaufort scale knots or kmh"
    assert storm.examples[0].startswith("fire crews in south and mid pembrokeshire")


def test_table_tsv_groups_repeats_and_reports_skips(tmp_path, caplog):
    path = tmp_path / "mine.tsv"
    path.write_text(TSV)
    with caplog.at_level(logging.WARNING):
        table = load_table(path, example="example", pos="pos")
    assert table.headwords == ["bank", "run"]
    assert [(s.definition, s.examples, s.pos) for s in table["bank"].senses] == [
        ("land beside a river", ["the river bank", "we sat on the bank"], "n")
    ]
    assert table["run"].senses[0].examples == []
    assert "skipped 1 rows with an empty definition (lines 6)" in caplog.text
    assert "skipped 1 rows with an empty headword (lines 4)" in caplog.text


def test_table_csv_and_jsonl(tmp_path):
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text('term,gloss\n"ice cream","frozen, sweet food"\n')
    table = load_table(csv_path, headword="term", definition="gloss")
    assert table.pairs() == [("ice cream", "frozen, sweet food")]
    jsonl = tmp_path / "mine.jsonl"
    records = [{"word": "cat", "definition": "a feline", "example": ["a cat", "my cat"]}, {"word": "dog"}]
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    table = load_table(jsonl, example="example")
    assert table["cat"].senses[0].examples == ["a cat", "my cat"]
    assert len(table) == 1  # the dog has no definition: skipped and counted


def test_table_text_that_looks_the_same_is_one_entry(tmp_path, caplog):
    nfd, nfc = "cafe\u0301", "caf\u00e9"
    path = tmp_path / "mine.tsv"
    path.write_text(
        "word\tdefinition\n"
        f"{nfd}\ta small restaurant\n"
        f"{nfc}\ta small restaurant\n"  # the same sense once NFC
        f"{nfc}\ta {nfd} that sells coffee\n"
        "\u200b\tan invisible headword\n"
        "\ufeff\u200d\ta joiner alone\n"
        "bank\ufeff\tland beside a river\n"
        "\t\u200b\n"
        "\x00\ta NUL alone\n"
        "river\tflowing\x00 water\x07\n",  # control characters inside: removed
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        table = load_table(path)
    assert table.headwords == [nfc, "bank", "river"]
    assert table[nfc].definitions == ["a small restaurant", f"a {nfc} that sells coffee"]
    assert table["river"].definitions == ["flowing water"]
    assert "9 rows -> 3 headwords, 4 senses" in caplog.text and "(1 repeated definitions united)" in caplog.text
    assert "skipped 3 rows whose headword is only invisible format or control characters (lines 5, 6, 9)" in caplog.text
    assert "skipped 1 rows with an empty headword (lines 8)" in caplog.text
    assert "1 rows whose control characters (NUL, escape, lone surrogates, ...) were removed (lines 10)" in caplog.text


def test_a_windows_file_read_as_latin_1_is_counted_and_named(tmp_path, caplog):
    """The encoding hint's latin-1 turned a cp1252 file's quotes, dashes and euro sign into control characters, which
    were removed without a word; a lone surrogate (JSON "\\ud800") made the tokenizer raise."""
    path = tmp_path / "win.tsv"
    path.write_bytes("word\tdefinition\ncafé\ta “hot” drink – €2\ntea\ta drink\n".encode("cp1252"))
    with caplog.at_level(logging.WARNING):
        assert load_table(path, encoding="latin-1")["café"].definitions == ["a hot drink 2"]
    text = "1 rows whose control characters U+0080-U+009F were removed (what a Windows file's quotes and dashes "
    assert text + "become read as latin-1: read such a file as cp1252) (lines 2)" in caplog.text
    assert load_table(path, encoding="cp1252")["café"].definitions == ["a “hot” drink – €2"]
    jsonl = tmp_path / "lone.jsonl"
    jsonl.write_text('{"word": "cat", "definition": "a fe\\ud800line"}\n{"word": "dog", "definition": "a canine"}\n')
    assert load_table(jsonl)["cat"].definitions == ["a feline"]


def test_a_tsv_field_quoted_as_spreadsheets_write_it_loses_the_quoting(tmp_path, caplog):
    """pandas and spreadsheets wrap a TSV field holding a quote in quotes and double it; the quotes were kept."""
    path = tmp_path / "sheet.tsv"
    path.write_text(
        'word\tdefinition\nzebra\t"a ""striped"" horse"\n"rock, stone"\ta hard mass\n'
        'quote\t"a" or "b"\nempty\t""\nplain\tno quotes\n',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        table = load_table(path)
    assert table["zebra"].definitions == ['a "striped" horse'] and "rock, stone" in table.headwords
    assert table["quote"].definitions == ['"a" or "b"']  # not quoted as a spreadsheet quotes: read as written
    assert "empty" not in table.headwords and table["plain"].definitions == ["no quotes"]
    assert "3 fields quoted as spreadsheets write them" in caplog.text and "(lines 2, 3, 5)" in caplog.text


def test_jsonl_keys_missing_from_the_first_record(tmp_path):
    records = [{"word": "cat", "definition": "a feline"}]
    records += [{"word": f"w{i}", "definition": f"sense {i}", "pos": "n", "example": [f"e{i}"]} for i in range(39)]
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    for dictionary in (load_dictionary(str(jsonl)), load_table(jsonl, example="example", pos="pos")):
        senses = [s for e in dictionary for s in e.senses]
        assert (senses[0].pos, senses[0].examples) == (None, [])
        assert [(s.pos, s.examples) for s in senses[1:]] == [("n", [f"e{i}"]) for i in range(39)]
    with pytest.raises(
        DataFormatError, match=r"mine\.jsonl:1: column 'gloss' not found \(columns: word, definition, pos, ex"
    ):
        load_table(jsonl, definition="gloss")


def test_table_errors_name_file_line_and_column(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("word\tmeaning\ncat\ta feline\n")
    with pytest.raises(DataFormatError, match=r"mine\.tsv:1: column 'definition' not found \(columns: word, mea"):
        load_table(path)
    path.write_text("word\tdefinition\ncat\ta feline\ndog\ta canine\textra\n")
    with pytest.raises(DataFormatError, match=r"mine\.tsv:3: 3 fields where the header has 2"):
        load_table(path)
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text('{"word": "cat", "definition": "a feline"}\n{"word": "dog", \n')
    with pytest.raises(DataFormatError, match=r"mine\.jsonl:2: invalid JSON"):
        load_table(jsonl)
    jsonl.write_text('{"word": "cat", "definition": "a feline"}\n["dog"]\n')
    with pytest.raises(DataFormatError, match=r"mine\.jsonl:2: expected a JSON object"):
        load_table(jsonl)
    with pytest.raises(DictEmbedError, match="unknown table format"):
        load_table(tmp_path / "mine.tsv", fmt="xml")
    with pytest.raises(DictEmbedError, match="not found"):
        load_table(tmp_path / "absent.csv")


def test_load_dictionary(tmp_path, caplog):
    path = tmp_path / "mine.tsv"
    path.write_text("word\tdefinition\nFiver\tA five-dollar bill .\nzyzzyva\ta weevil\n")
    with caplog.at_level(logging.INFO):
        merged = load_dictionary(f"oxford, {path}")
    assert len(merged) == 8_868  # "Fiver" joins the Oxford "fiver"
    assert merged["fiver"].definitions == ["a five-dollar bill ."]
    assert "12232 definitions -> 12231 (1 duplicate definitions removed)" in caplog.text
    assert len(load_dictionary("chang")) == 2_730
    with pytest.raises(DictEmbedError, match="unknown dictionary 'oxfords'") as error:
        load_dictionary("oxford,oxfords")
    assert all(name in str(error.value) for name in SOURCES)
    with pytest.raises(DictEmbedError, match="not found"):
        load_dictionary(str(tmp_path / "absent.jsonl"))
    with pytest.raises(DictEmbedError, match="no dictionary named"):
        load_dictionary(" , ")


def test_headerless_table_with_named_columns(tmp_path):
    path = tmp_path / "cwn.txt"
    path.write_text("使出\t他 使出 绝技\t为 特定 目的 而 使用\nbank\tthe bank\tland beside a river\n", encoding="utf-8")
    d = load_dictionary(str(path), columns="word,-,definition")
    assert d.headwords == ["使出", "bank"]
    assert d["使出"].senses[0].definition == "为 特定 目的 而 使用"
    assert d["使出"].senses[0].examples == []
    with_examples = load_dictionary(str(path), columns="word,example,definition")
    assert with_examples["bank"].senses[0].examples == ["the bank"]
    with pytest.raises(DictEmbedError, match=r"cwn\.txt: a \.txt table has no header line: give columns"):
        load_dictionary(str(path))  # a .txt file needs --columns
    with pytest.raises(DataFormatError, match="3 fields where --columns names 2"):
        load_dictionary(str(path), columns="word,definition")
    for bad, message in (
        ("word,x,definition", "unknown column 'x'"),
        ("word,-", "must name word and definition"),
        ("word,word,definition", "named twice"),
    ):
        with pytest.raises(DictEmbedError, match=message):
            load_dictionary(str(path), columns=bad)
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"word": "a", "definition": "b"}\n', encoding="utf-8")
    with pytest.raises(DictEmbedError, match=r"a \.jsonl file names its own"):  # refused before it is read
        load_dictionary(str(jsonl), columns="word,definition")
    mixed = load_dictionary(f"{path},{jsonl}", columns="word,-,definition")  # the columns of the headerless one
    assert mixed["a"].definitions == ["b"] and mixed["bank"].definitions == ["land beside a river"]


def test_columns_option_reaches_training_config():
    from dictembed.recipes.config import RunConfig

    config = RunConfig.create("defsent-plus", columns="word,-,definition")
    assert config.columns == "word,-,definition"


def test_cwn_joins_segmented_text_and_unites_repeated_definitions(tmp_path, monkeypatch, caplog):
    from dictembed.dictionary import load_cwn

    lines = [
        "使出\t陈达海 大怒 ， 使出 他 成名 绝技 ‘ 青蟒 剑法 ’ 来 。\t为 特定 目的 而 使用 后 述 能力 或 特质 。",
        "使出\t每 一种 生物 都 使出 了 浑身解数 。\t为 特定 目的 而 使用 后 述 能力 或 特质 。",
        "使出\t他们 使出 刀 砍 斧劈 。\t为 特定 目的 而 使用 后 述 工具 。",
        "铜\t铜 的 化学 符号 为 Cu 。\t实用 金属 ， 化学 符号 为 Cu 。",
        "塔\t我 爱 吃 蛋 塔 。\t一种 西式 点心 。 为 英语 egg  tart 的 音译 。",
        "",
    ]
    path = tmp_path / "cwn" / "dictionaries" / "cwn_chinese" / "valid.txt"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    with caplog.at_level(logging.INFO):
        d = load_cwn(path)
    assert d.name == "cwn" and d.headwords == ["使出", "铜", "塔"]
    first, second = d["使出"].senses
    assert first.definition == "为特定目的而使用后述能力或特质。"
    assert first.examples == ["陈达海大怒，使出他成名绝技‘青蟒剑法’来。", "每一种生物都使出了浑身解数。"]
    assert second.definition == "为特定目的而使用后述工具。" and second.examples == ["他们使出刀砍斧劈。"]
    assert d["铜"].senses[0].definition == "实用金属，化学符号为Cu。"
    assert d["塔"].senses[0].definition == "一种西式点心。为英语egg tart的音译。"  # Latin words keep one space
    report = next(r.load_report for r in caplog.records if hasattr(r, "load_report"))
    assert (report.rows, report.headwords, report.senses, report.examples) == (5, 3, 4, 5)
    assert report.repeated_definitions == 1
    monkeypatch.setenv("DICTEMBED_DATA_DIR", str(tmp_path / "cwn"))
    assert "cwn" in SOURCES and load_dictionary("cwn").pairs() == d.pairs()
    path.write_text("使出\t只有 两列\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="expected 3 tab-separated fields"):
        load_cwn(path)
