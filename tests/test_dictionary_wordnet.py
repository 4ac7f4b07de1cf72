"""WordNet 3.0 parsing: the real Debian database, gloss splitting, a fake folder, malformed lines."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from dictembed.dictionary import load_dictionary, load_wordnet, load_wordnet_examples, split_gloss
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_options import Filters

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
FAKE = {
    "noun": [
        "00000001 05 n 02 river_bank 0 Bank 0 000 | sloping land beside a river; "
        '"he sat on the bank of the river"; "they pulled the canoe up on the bank"  ',
        "00000002 05 n 01 bank 1 000 | a financial institution  ",
    ],
    "verb": [
        "00000003 29 v 01 breathe 0 001 @ 00000009 v 0000 01 + 02 00 | draw air into, and expel out of, "
        'the lungs; "I can breathe better when the air is clean"  ',
    ],
    "adj": ["00000004 00 s 02 used_to(p) 0 galore(ip) 0 000 | in the habit;  "],
    "adv": ["00000005 02 r 01 well 0 000 | in a good manner  "],
}


def write_wordnet(folder: Path, lines: dict[str, list[str]] = FAKE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in lines.items():
        (folder / f"data.{name}").write_text(HEADER * 3 + "".join(line + "\n" for line in data))
    return folder


@pytest.fixture(scope="module")
def wordnet():
    return load_wordnet()


def test_breathe_has_its_definition_and_example(wordnet):
    senses = {s.definition: s for s in wordnet["breathe"].senses}
    sense = senses["draw air into, and expel out of, the lungs"]
    assert sense.examples == ["I can breathe better when the air is clean", "The patient is respiring"]
    assert sense.pos == "v"
    assert "respire" in wordnet and "take a breath" in wordnet


def test_counts_match_wordnet_3_0(wordnet):
    # Case-preserving: "Mercury" and "mercury" are two entries.
    assert len(wordnet) == 148_730
    assert wordnet.num_definitions() == 206_978
    assert "Mercury" in wordnet and "mercury" in wordnet


def test_lowercase_counts_match_published_statistics():
    lowered = load_wordnet(lowercase=True)
    assert len(lowered) == 147_306  # unique strings in WordNet 3.0
    assert lowered.num_definitions() == 206_941  # word-sense pairs


def test_headwords_are_clean_and_pos_letters(wordnet):
    assert not [h for h in wordnet.headwords if "_" in h or h.endswith(("(a)", "(p)", "(ip)"))]
    assert {s.pos for e in wordnet for s in e.senses} == {"n", "v", "a", "r"}
    used_to = wordnet["used to"].senses[0]
    assert used_to.definition == "in the habit"
    assert used_to.examples[-1] == "...was wont to complain that this is a cold world"  # attribution dropped
    assert [s.definition for s in wordnet["outback"].senses][-1] == "inaccessible and sparsely populated"


def test_senses_come_most_frequent_first(wordnet, caplog):
    bank, ice, run = (wordnet[word].senses for word in ("bank", "ice", "run"))
    assert bank[0].definition == "sloping land (especially the slope beside a body of water)"  # tagged 25 times
    assert bank[1].definition.startswith("a financial institution that accepts deposits")  # 20
    assert ice[0].definition == "water frozen in the solid state"
    assert (run[0].pos, run[0].definition) == (
        "v",
        "move fast by using one's feet, with one foot off the ground at any given time",
    )
    # Parts of speech interleave by tag counts: the noun "a score in baseball" (18) before the verb's 5th (10).
    score = next(i for i, s in enumerate(run) if s.definition.startswith("a score in baseball"))
    assert [s.pos for s in run[:score]] == ["v"] * 4 and run[score].pos == "n"
    metric = wordnet["metric"].senses  # never tagged: sense numbers, nouns before adjectives
    assert [s.pos for s in metric] == ["n", "n", "n", "a", "a"]
    assert metric[0].definition.startswith("a function of a topological space")
    with caplog.at_level(logging.WARNING):
        lowered = load_wordnet(lowercase=True)
    assert not caplog.records  # every index file there, every sense listed under its lemma
    assert lowered["mercury"].senses[0].definition.startswith("a heavy silvery toxic univalent and bivalent metallic")
    assert [s.definition for s in lowered["bank"].senses] == [s.definition for s in bank]


def test_a_pos_filter_lists_metrics_adjective_senses_first(wordnet, bert_path):
    words = ["metric", "metrical", "bank"]
    encoder = Encoder.load(str(bert_path), pooling="mean")
    rows = np.random.default_rng(0).normal(size=(len(words), encoder.dim)).astype(np.float32)
    space = DefinitionSpace(words, rows, similarity="cosine", temperature=0.05)
    rd = ReverseDictionary(encoder, space, dictionary=wordnet.subset(words))
    adjective = "based on the meter as a standard of measurement"

    def metric(pos: str | None = None, max_definitions: int = 10) -> tuple[list[str], list[str | None]]:
        found = next(
            r for r in rd.search("using the metric system", 3, Filters(pos=pos), max_definitions) if "metric" in r.words
        )
        return found.definitions["metric"], found.pos["metric"]

    assert metric()[1] == ["n", "n", "n", "a", "a"]
    definitions, pos = metric(pos="a")
    assert definitions[0] == adjective and pos == ["a", "a", "n", "n", "n"]
    assert metric(pos="adjective", max_definitions=1) == ([adjective], ["a"])  # not folded away under the nouns


LUNGS = "draw air into, and expel out of, the lungs"
GLOSSES = [
    (f'{LUNGS}; "I can breathe"; "x"', LUNGS, ["I can breathe", "x"]),
    ("a; b; c", "a; b; c", []),
    ('keep; e.g., "keep clean"; "hold in place"', "keep", ["keep clean", "hold in place"]),
    ('spread ("straw" is archaic); "strew toys"', 'spread ("straw" is archaic)', ["strew toys"]),
    ('a report (e.g., "he said `I am a fool\'")', 'a report (e.g., "he said `I am a fool\'")', []),
    ('feel; "mercy is not strained" -Shakespeare; "y"', "feel", ["mercy is not strained", "y"]),
    ('render, "recite a poem"; "retell a story"', "render", ["recite a poem", "retell a story"]),
    ('push :"He knocked the glass"', "push", ["He knocked the glass"]),
    ('utter; "drop a hint"; drop names"', "utter", ["drop a hint", "drop names"]),
    ('he said; "a; b"; "c"', "he said", ["a; b", "c"]),
]


@pytest.mark.parametrize(("gloss", "definition", "examples"), GLOSSES)
def test_split_gloss(gloss, definition, examples):
    assert split_gloss(gloss) == (definition, examples)


def test_fake_folder_by_override_and_environment(tmp_path, monkeypatch):
    folder = write_wordnet(tmp_path / "wn")
    monkeypatch.setenv("WNSEARCHDIR", str(folder))
    from_env = load_wordnet()
    assert sorted(from_env.headwords) == [
        "Bank",
        "bank",
        "breathe",
        "galore",
        "river bank",
        "used to",
        "well",
    ]
    assert [s.definition for s in from_env["bank"].senses] == ["a financial institution"]
    assert from_env["Bank"].senses[0].examples == [
        "he sat on the bank of the river",
        "they pulled the canoe up on the bank",
    ]
    assert from_env["galore"].senses[0].pos == "a"  # satellite
    lowered = load_wordnet(lowercase=True)
    assert [s.definition for s in lowered["bank"].senses] == [
        "sloping land beside a river",
        "a financial institution",
    ]
    other = write_wordnet(tmp_path / "other", {**FAKE, "adv": ["00000006 02 r 01 badly 0 000 | poorly  "]})
    assert "badly" in load_wordnet(wordnet_dir=other)  # the argument wins over $WNSEARCHDIR
    assert "badly" in load_dictionary("wordnet", wordnet_dir=other)
    monkeypatch.setenv("WNSEARCHDIR", str(tmp_path / "missing"))
    with pytest.raises(DictEmbedError, match="WordNet database not found"):
        load_wordnet()


@pytest.mark.parametrize(
    "bad",
    [
        "00000009 05 n 01 bank 0 000 no gloss separator",
        "00000009 05 q 01 bank 0 000 | unknown synset type",
        "00000009 05 n zz bank 0 000 | word count not hex",
        "00000009 05 n 03 bank 0 000 | fewer words than announced",
        "xx 05 n 01 bank 0 000 | bad offset",
    ],
)
def test_malformed_data_line_names_file_and_line(tmp_path, bad):
    folder = write_wordnet(tmp_path, {**FAKE, "noun": [FAKE["noun"][0], bad]})
    with pytest.raises(DataFormatError) as error:
        load_wordnet(wordnet_dir=folder)
    assert error.value.path == str(folder / "data.noun")
    assert error.value.line == 5  # three header lines, then the good line
    assert "data.noun:5:" in str(error.value)


ORDERED = {
    "noun": [
        "00000001 05 n 01 bank 0 000 | a long ridge or pile  ",
        "00000002 05 n 02 bank 0 Bank 0 000 | sloping land  ",
        "00000003 05 n 01 metric 0 000 | a system of measures  ",
    ],
    "verb": ["00000004 38 v 01 bank 0 000 | tip laterally  "],
    "adj": ["00000005 00 a 01 metric 0 000 | based on the meter  "],
    "adv": ["00000006 02 r 01 well 0 000 | in a good manner  "],
}
INDEX = {  # lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offsets (sense 1 first)
    "noun": ["bank n 2 1 @ 2 2 00000002 00000001  ", "metric n 1 0 1 0 00000003  "],
    "verb": ["bank v 1 0 1 1 00000004  "],
    "adj": ["metric a 1 0 1 0 00000005  "],
    "adv": ["well r 1 0 1 0 00000006  "],
}
COUNTS = ["bank%1:17:01:: 1 25", "bank%2:38:00:: 1 3", "bank%1:17:00:: 2 2"]  # sense_key sense_number tag_cnt


def write_ordered(folder: Path, index: dict[str, list[str]] = INDEX, counts: list[str] | None = COUNTS) -> Path:
    write_wordnet(folder, ORDERED)
    for name, lines in index.items():
        (folder / f"index.{name}").write_text(HEADER * 2 + "".join(line + "\n" for line in lines))
    if counts is not None:
        (folder / "cntlist.rev").write_text("".join(line + "\n" for line in counts))
    return folder


def definitions(dictionary, word: str) -> list[str]:
    return [s.definition for s in dictionary[word].senses]


def test_sense_numbers_order_each_part_of_speech_and_tag_counts_interleave_them(tmp_path, caplog):
    folder = write_ordered(tmp_path)
    with caplog.at_level(logging.WARNING):
        wordnet = load_wordnet(wordnet_dir=folder)
    assert not caplog.records
    # noun sense 1 (25), verb sense 1 (3), noun sense 2 (2); the data files hold them ridge, land, tip
    assert definitions(wordnet, "bank") == ["sloping land", "tip laterally", "a long ridge or pile"]
    assert definitions(wordnet, "Bank") == ["sloping land"]  # the index's lemma is lower case
    assert definitions(wordnet, "metric") == ["a system of measures", "based on the meter"]  # untagged: n, v, a, r
    assert wordnet.headwords == ["bank", "Bank", "metric", "well"]  # entries keep data-file order
    lowered = load_wordnet(wordnet_dir=folder, lowercase=True)
    assert definitions(lowered, "bank") == definitions(wordnet, "bank")  # the shared synset counts once


def test_without_tag_counts_or_an_index_senses_keep_file_order(tmp_path, caplog):
    folder = write_ordered(tmp_path / "no-counts", counts=None)
    with caplog.at_level(logging.WARNING):
        wordnet = load_wordnet(wordnet_dir=folder)
    assert definitions(wordnet, "bank") == ["sloping land", "a long ridge or pile", "tip laterally"]  # n, v, a, r
    assert [r.message for r in caplog.records] == [
        f"{folder}: no cntlist.rev; senses are ordered without them (see load_wordnet)"
    ]
    caplog.clear()
    folder = write_ordered(tmp_path / "no-bank-noun", {**INDEX, "noun": INDEX["noun"][1:]})
    (folder / "index.verb").unlink()
    with caplog.at_level(logging.WARNING):
        wordnet = load_wordnet(wordnet_dir=folder)
    assert definitions(wordnet, "bank") == ["a long ridge or pile", "sloping land", "tip laterally"]
    messages = [r.message for r in caplog.records]
    assert len(messages) == 2 and "no index.verb;" in messages[0]
    assert messages[1] == f"{folder}: 2 senses are not in the index under their lemma; they come last"


@pytest.mark.parametrize(
    ("file", "bad"),
    [
        ("index.noun", "bank n 2 1 @ 2 2 00000002"),  # fewer offsets than synset_cnt
        ("index.noun", "bank v 1 0 1 1 00000002"),  # another part of speech's line
        ("index.noun", "bank n x 0 1 1 00000002"),
        ("cntlist.rev", "bank%1:17:01:: one 25"),
        ("cntlist.rev", "bank 1 25"),
    ],
)
def test_malformed_index_or_count_line_names_file_and_line(tmp_path, file, bad):
    if file == "cntlist.rev":
        folder = write_ordered(tmp_path, counts=[COUNTS[0], bad])
    else:
        folder = write_ordered(tmp_path, {**INDEX, "noun": [INDEX["noun"][1], bad]})
    with pytest.raises(DataFormatError) as error:
        load_wordnet(wordnet_dir=folder)
    assert error.value.path == str(folder / file)
    assert error.value.line == (2 if file == "cntlist.rev" else 4)  # after two header lines and a good line


def test_wordnet_examples_csv(caplog):
    with caplog.at_level(logging.INFO):
        examples = load_wordnet_examples()
    assert (len(examples), examples.num_definitions()) == (20_516, 36_184)
    able = examples["able"].senses[0]
    assert able.definition.startswith("(usually followed by `to') having the necessary means")
    assert able.examples[:2] == ["able to swim", "she was able to program her computer"]
    assert {s.pos for e in examples for s in e.senses} == {"n", "v", "a", "r"}  # 's' -> 'a'
    assert "44351 rows" in caplog.text
