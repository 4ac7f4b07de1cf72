"""WordNet 3.0 parsing: the real Debian database, gloss splitting, a fake folder, malformed lines."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dictembed.dictionary import load_dictionary, load_wordnet, load_wordnet_examples, split_gloss
from dictembed.errors import DataFormatError, DictEmbedError

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


def test_wordnet_examples_csv(caplog):
    with caplog.at_level(logging.INFO):
        examples = load_wordnet_examples()
    assert (len(examples), examples.num_definitions()) == (20_516, 36_184)
    able = examples["able"].senses[0]
    assert able.definition.startswith("(usually followed by `to') having the necessary means")
    assert able.examples[:2] == ["able to swim", "she was able to program her computer"]
    assert {s.pos for e in examples for s in e.senses} == {"n", "v", "a", "r"}  # 's' -> 'a'
    assert "44351 rows" in caplog.text
