"""The Chinese Wordnet file of the shared data (AutoDict's CWN valid split): `word<TAB>context<TAB>definition`.

The context sentence and the definition are word-segmented (`化学 符号 为 Cu 。`). A subword tokenizer wants
the text as it is written, so every field is joined back (`cjk.join_segmented`: no space next to a Chinese
character or punctuation mark, one space between Latin words). The context sentence is the sense's example;
lines repeating a (headword, definition) become one sense holding all their examples, counted in the load
report.
"""

from __future__ import annotations

from pathlib import Path

from dictembed import paths
from dictembed.cjk import join_segmented
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.sources.oxford import load_autodict

CWN = Path("dictionaries") / "cwn_chinese" / "valid.txt"


def load_cwn(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """The Chinese Wordnet (`path`, default the shared data's CWN file), segmented text joined back."""
    return load_autodict(path or paths.data_dir() / CWN, encoding, name="cwn", text=join_segmented)
