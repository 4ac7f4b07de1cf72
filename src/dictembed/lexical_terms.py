"""The lexical terms of a reverse-dictionary score (`search_options.Ranking`): what the words of a description say
about its best candidates, besides their vectors.

- **The description's own word**: a description seldom uses the word it describes ("a long-necked African animal"
  is not *animal*), so a candidate whose word the description uses (`uses_word`: every token of it, stemmed) is
  lowered by `Ranking.query_word_weight`, wherever it ranks.
- **Shared words**: a candidate whose definitions use the description's words (`shared_words`, stemmed) is raised
  by `Ranking.overlap_weight` per shared word. A word counts only where it is rare among the candidates ranked
  together (in at most `COMMON_SHARE` of their definitions), so that "the", "of" or a French "de" never count and
  no stop list is needed.

Both weights were fitted on the project's description corpus, none of whose words the benchmark's test split asks
for (`experiments/lexical_weights.py`). Tokens are runs of letters (`TOKEN`), case-folded, with an English
inflection (`-s`, `-es`, `-ed`, `-ing`) and a final `e` stripped (`stem`); a script written without spaces
(Chinese, Japanese) gives whole phrases as tokens, which seldom match: the terms then change little.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np

TOKEN = re.compile(r"[^\W\d_]+")
SUFFIXES = ("ing", "ed", "es", "s")  # stripped once, the longest that leaves a stem of at least `MIN_STEM` letters
MIN_STEM = 3
COMMON_SHARE = 0.5  # a word found in more than this share of the candidates' definitions is common: never shared
TOKEN_CACHE = 1 << 16  # tokens whose stems are kept at hand (a few MB)


@lru_cache(maxsize=TOKEN_CACHE)
def stem(token: str) -> str:
    """`token` without one English inflection (`SUFFIXES`; not the `s` of a word in `ss`) when at least `MIN_STEM`
    letters stay, then without a final `e`, so that a word and its inflections meet: "horse", "horses" -> "hors";
    "ride", "riding" -> "rid"; "glass", "glasses" -> "glass"; "bus" -> "bus"."""
    for suffix in SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= MIN_STEM and not token.endswith("ss"):
            token = token[: -len(suffix)]
            break
    return token[:-1] if token.endswith("e") and len(token) > MIN_STEM else token


def stems(text: str) -> frozenset[str]:
    """The stems (`stem`) of the case-folded letter runs of `text`."""
    return frozenset(stem(token) for token in TOKEN.findall(text.casefold()))


def uses_word(word: str, query: frozenset[str]) -> bool:
    """Whether a description of stems `query` uses `word`: every token of it (a phrase needs all of its words)."""
    tokens = stems(word)
    return bool(tokens) and tokens <= query


def shared_words(query: frozenset[str], definitions: Sequence[frozenset[str]]) -> np.ndarray:
    """Per candidate, the number of the description's stems `query` its `definitions` (the stems of all its
    definitions, one set per candidate) use, counting only stems found in at most `COMMON_SHARE` of the
    candidates' definitions (float32)."""
    if not definitions:
        return np.zeros(0, dtype=np.float32)
    found = Counter(word for stems_of in definitions for word in query & stems_of)
    rare = {word for word, count in found.items() if count <= COMMON_SHARE * len(definitions)}
    return np.fromiter((len(rare & stems_of) for stems_of in definitions), dtype=np.float32, count=len(definitions))


def definition_stems(definitions: Iterable[str]) -> frozenset[str]:
    """The stems of all of an entry's definitions."""
    return stems("\n".join(definitions))
