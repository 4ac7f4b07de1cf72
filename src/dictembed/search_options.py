"""The options of a reverse-dictionary search that `dictembed predict` and `dictembed serve` both take: their
choices, defaults and checks (`Filters`, `pattern_matcher`), torch-free so that the command line can build its
options without loading a model."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import re2

from dictembed.errors import DictEmbedError

WordCount = Literal["any", "single", "phrase"]  # `words`: any, single words only, phrases only
WORD_COUNTS: tuple[WordCount, ...] = get_args(WordCount)
POS_TAGS = ("n", "v", "a", "r")  # `pos`: WordNet's parts of speech (noun, verb, adjective, adverb)
DEFAULT_K = 10  # results a search lists unless asked for more or fewer
POS_ALIASES = {"noun": "n", "verb": "v", "adjective": "a", "adj": "a", "s": "a", "adverb": "r", "adv": "r"}
MAX_PATTERN_CHARS = 100
GLOB_CHARACTERS = "*?["


def normalize_pos(pos: str | None) -> str | None:
    """A part of speech as WordNet's letter (`noun` -> `n`, satellite `s` -> `a`); other tags lower-cased."""
    if pos is None:
        return None
    tag = pos.strip().lower()
    return POS_ALIASES.get(tag, tag)


def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """A case-insensitive test for words: `/regex/` (searched anywhere), a glob with `*`, `?` or `[...]`
    (the whole word), or else a prefix (`g` is every word starting with g).

    A regex runs on RE2, whose matching time is linear in the word's length for every pattern: a user's
    pattern can never backtrack exponentially (`/(.*)*x$/` over a long lemma) and stall a server. RE2 has no
    backreferences or lookaround; such a pattern is refused with a one-line error."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise DictEmbedError(f"pattern too long: at most {MAX_PATTERN_CHARS} characters")
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        options = re2.Options()
        options.case_sensitive, options.log_errors = False, False
        try:
            regex = re2.compile(pattern[1:-1], options)
        except re2.error as err:
            detail = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else err
            raise DictEmbedError(
                f"invalid regular expression {pattern!r}: {detail} (RE2 syntax: no backreferences or lookaround)"
            ) from None
        return lambda word: regex.search(word) is not None
    if any(c in pattern for c in GLOB_CHARACTERS):
        glob = re.compile(fnmatch.translate(pattern), re.IGNORECASE)
        return lambda word: glob.match(word) is not None
    prefix = pattern.casefold()
    return lambda word: word.casefold().startswith(prefix)


@dataclass(frozen=True)
class Filters:
    """What words a search may return: part of speech, pattern (see `pattern_matcher`), word count."""

    pos: str | None = None
    pattern: str | None = None
    words: str = "any"

    def __post_init__(self) -> None:
        if self.words not in WORD_COUNTS:
            raise DictEmbedError(f"unknown word count {self.words!r}; choose from {', '.join(WORD_COUNTS)}")
        object.__setattr__(self, "pos", normalize_pos(self.pos) or None)
        if self.pos is not None and self.pos not in POS_TAGS:
            raise DictEmbedError(
                f"unknown part of speech {self.pos!r}; choose from n, v, a, r (noun, verb, adjective, adverb)"
            )
        object.__setattr__(self, "pattern", self.pattern or None)
        if self.pattern is not None:
            pattern_matcher(self.pattern)  # fail early on a bad pattern

    @property
    def active(self) -> bool:
        return self.pos is not None or self.pattern is not None or self.words != "any"
