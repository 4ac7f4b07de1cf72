"""The options of a reverse-dictionary search that `dictembed predict` and `dictembed serve` both take: their
choices, defaults and checks (`Filters`, `Filters.of`: the filters by the names that `predict`, `/api/reverse` and
`ReverseDictionary.search` share; `pattern_matcher`), torch-free so that the command line can build its
options without loading a model."""

from __future__ import annotations

import fnmatch
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal, get_args

import re2

from dictembed.cjk import check_pinyin, is_cjk, pinyin_matcher
from dictembed.errors import DictEmbedError
from dictembed.texts import check_texts, is_blank, is_real_number, is_whole_number, text_list

WordCount = Literal["any", "single", "phrase"]  # `words`: any, single words only, phrases only
WORD_COUNTS: tuple[WordCount, ...] = get_args(WordCount)
# `mode`: auto (an entry's near-synonyms when the query is an entry, else a description), describe, similar
SearchMode = Literal["auto", "describe", "similar"]
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
DEFAULT_MODE: SearchMode = "describe"  # `predict` and the page (the page's switch: describe or similar words)
# `script`: any, words written in CJK characters (Chinese, Japanese), words in Latin letters (English)
Script = Literal["any", "cjk", "latin"]
SCRIPTS: tuple[Script, ...] = get_args(Script)
SortOrder = Literal["relevance", "alphabet", "length"]  # `sort`: the order results are listed in
SORT_ORDERS: tuple[SortOrder, ...] = get_args(SortOrder)
MAX_WORD_LENGTH = 100  # `min_length`, `max_length`, `length`: letters, 1..100
MAX_INITIAL_CHARS = 20  # `initial`: the first letters of the word
POS_TAGS = ("n", "v", "a", "r")  # `pos`: WordNet's parts of speech (noun, verb, adjective, adverb)
DEFAULT_K = 10  # results a search lists unless asked for more or fewer
# `Ranking`: the weights of a search's score, chosen on the dev split of tests/data/everyday_descriptions.tsv and
# a tuning sample of the Oxford definitions (docs/results.md, "Reverse dictionary ranking")
FREQUENCY_WEIGHT = 0.0125  # x the word's Zipf frequency (dictembed.word_frequency)
DEFINITION_WEIGHT = 0.75  # x the cosine to the entry's best single definition
HEADWORD_WEIGHT = 0.2  # x the cosine to the entry's word itself, encoded as a description is
MAX_WEIGHT = 1000.0  # a ranking weight at most (1e308 overflowed the score to NaN and ranked in file order)
# the same for a query encoder taught people's descriptions (`train --descriptions`, `distil`), saved in its folder's
# record (`RunRecord.ranking`): chosen on the dev descriptions (docs/results.md, "The headword weight of a folder
# trained on descriptions")
DESCRIBED_HEADWORD_WEIGHT = 0.5
# x (the best cosine to a second dictionary's definition of the entry's word, less SECOND_FLOOR, floored at 0), for a
# folder that keeps them (`second_dictionary`): chosen on the dev descriptions (docs/results.md, "A second
# dictionary's definitions")
SECOND_DICTIONARY_WEIGHT = 0.5
SECOND_FLOOR = 0.3
RERANK_DEPTH = 200  # the best results by the rest of the score that the definition and headword terms rerank
# the lexical terms (`lexical_terms`), fitted on the description corpus (experiments/lexical_weights.py)
QUERY_WORD_WEIGHT = 0.15  # taken off a result whose word the description itself uses
OVERLAP_WEIGHT = 0.025  # x the description's words that the result's definitions use (the rarer ones)
LEXICAL_DEPTH = 100  # the best results by the rest of the score whose definitions the overlap term reads
POS_ALIASES = {"noun": "n", "verb": "v", "adjective": "a", "adj": "a", "s": "a", "adverb": "r", "adv": "r"}
MAX_PATTERN_CHARS = 100
GLOB_CHARACTERS = "*?["
# the filters by the names that `predict` (--min-length ...), `/api/reverse` and `ReverseDictionary.search` take
FILTER_OPTIONS = ("pos", "pattern", "words", "length", "min_length", "max_length", "initial", "pinyin", "script")


def normalize_pos(pos: str | None) -> str | None:
    """A part of speech as WordNet's letter (`noun` -> `n`, satellite `s` -> `a`); other tags lower-cased."""
    if pos is None:
        return None
    tag = pos.strip().lower()
    return POS_ALIASES.get(tag, tag)


def word_script(word: str) -> str:
    """`cjk` when `word` holds a CJK character (`cjk.is_cjk`), else `latin` when it holds a Latin letter, else
    `other`: what the `script` filter keeps apart in a dictionary of several languages (WordNet and CWN)."""
    if any(map(is_cjk, word)):
        return "cjk"
    if any(c.isalpha() and (c.isascii() or unicodedata.name(c, "").startswith("LATIN")) for c in word):
        return "latin"
    return "other"


def word_test(kind: str, value: str) -> Callable[[str], bool]:
    """The test of a word for one filter of `Filters` other than the part of speech (which needs the dictionary):
    `pattern`, `pinyin`, `script` or `words` (the word count), with that filter's `value`."""
    if kind == "pattern":
        return pattern_matcher(value)
    if kind == "pinyin":
        return pinyin_matcher(value)
    if kind == "script":
        return lambda word: word_script(word) == value
    if kind == "words":
        return lambda word: (len(word.split()) > 1) == (value == "phrase")
    raise DictEmbedError(f"unknown filter {kind!r}")


def word_length(word: str) -> int:
    """A word's length as the length filters count it: its letters and digits, so spaces, hyphens and
    apostrophes do not count (`ice cream` and `short-lived` have 8 and 10), as in a crossword."""
    return sum(c.isalnum() for c in word)


def length_bounds(
    length: int | None, min_length: int | None = None, max_length: int | None = None
) -> tuple[int | None, int | None]:
    """(min_length, max_length) from an exact `length` or from bounds; an exact length with a bound is an error."""
    if length is None:
        return min_length, max_length
    if min_length is not None or max_length is not None:
        raise DictEmbedError("length: give an exact length or min_length/max_length, not both")
    return length, length


def check_count(name: str, value: object, low: int = 1, none: bool = False) -> None:
    """Refuse a count option `name` (`k`, `top_k`, `max_definitions`) that is not a whole number of at least `low`
    (None passes where `none`: no limit)."""
    if value is None and none:
        return
    if not is_whole_number(value, low):
        extra = " or None (no limit)" if none else ""
        raise DictEmbedError(f"{name}: a whole number of at least {low}{extra}, not {value!r}")


def query_list(queries: object, method: str) -> list[Any]:
    """The descriptions `method` (search_many, scores) was given, as a list: refused in one line when one string
    (`search` takes one) or nothing iterable; the caller checks each text (`check_queries`, `check_texts`)."""
    if isinstance(queries, str):
        raise DictEmbedError(f"{method} takes a list of descriptions, not one string (search takes one)")
    if isinstance(queries, (bytes, bytearray)) or not isinstance(queries, Iterable):
        raise DictEmbedError(f"{method} takes a list of descriptions, not {type(queries).__name__}")
    return text_list(queries, f"{method}'s descriptions")


def check_queries(queries: Sequence[Any]) -> None:
    """Refuse, naming the first, a query that is not a string, is not valid Unicode text (`texts.check_texts`), or
    holds nothing a tokenizer reads (`texts.is_blank`: spaces, zero-width and control characters)."""
    check_texts(queries, "query", 1)
    if blank := [i for i, query in enumerate(queries, 1) if is_blank(query)]:
        raise DictEmbedError(f"empty query (query {blank[0]}); describe the word you are looking for")


def check_search(k: object, max_definitions: object) -> None:
    """Refuse a search's `k` that is not a whole number of at least 1, and `max_definitions` that is neither that
    nor 0 nor None (every definition)."""
    check_count("k", k)
    check_count("max_definitions", max_definitions, low=0, none=True)


def check_letters(name: str, value: object) -> None:
    """Refuse a length option `name` (`length`, `min_length`, `max_length`) that is not a whole number of letters
    from 1 to `MAX_WORD_LENGTH`."""
    if value is not None and not is_whole_number(value, 1, MAX_WORD_LENGTH):
        raise DictEmbedError(f"{name}: a whole number of letters from 1 to {MAX_WORD_LENGTH}, not {value!r}")


def pattern_matcher(pattern: str) -> Callable[[str], bool]:
    """A case-insensitive test for words: `/regex/` (searched anywhere), a glob with `*`, `?` or `[...]`
    (the whole word), or else a prefix (`g` is every word starting with g).

    A regex runs on RE2, whose matching time is linear in the word's length for every pattern: a user's
    pattern can never backtrack exponentially (`/(.*)*x$/` over a long lemma) and stall a server. RE2 has no
    backreferences or lookaround; such a pattern is refused with a one-line error."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise DictEmbedError(f"pattern: too long, at most {MAX_PATTERN_CHARS} characters")
    if pattern == "//":
        raise DictEmbedError("pattern: an empty regular expression //; write one between the slashes, e.g. /^gir/")
    if len(pattern) > 2 and pattern.startswith("/") and pattern.endswith("/"):
        options = re2.Options()
        options.case_sensitive, options.log_errors = False, False
        try:
            regex = re2.compile(pattern[1:-1], options)
        except re2.error as err:
            detail = err.args[0].decode(errors="replace") if err.args and isinstance(err.args[0], bytes) else err
            raise DictEmbedError(
                f"pattern: invalid regular expression {pattern}: {detail} (RE2 syntax: no backreferences or lookaround)"
            ) from None
        return lambda word: regex.search(word) is not None
    if any(c in pattern for c in GLOB_CHARACTERS):
        for body in re.findall(r"\[!?(\]?[^\]]*)\]", pattern):  # a reversed range matches nothing: say so
            if reversed_range := next(((a, b) for a, b in re.findall(r"(.)-(.)", body) if a > b), None):
                start, end = reversed_range
                raise DictEmbedError(f"pattern {pattern}: the range {start}-{end} is empty; write it {end}-{start}")
        glob = re.compile(fnmatch.translate(pattern), re.IGNORECASE)
        return lambda word: glob.match(word) is not None
    prefix = pattern.casefold()
    return lambda word: word.casefold().startswith(prefix)


@dataclass(frozen=True)
class Filters:
    """What words a search may return: part of speech, pattern (see `pattern_matcher`), word count, length in
    letters (`word_length`, bounds included), initial letters (a case-insensitive prefix, taken literally),
    the pinyin initials of a Chinese word's first syllables (`cjk.pinyin_matcher`: `sc` for 使出) and the
    script (`word_script`: the language of a merged dictionary's entries)."""

    pos: str | None = None
    pattern: str | None = None
    words: str = "any"
    min_length: int | None = None
    max_length: int | None = None
    initial: str | None = None
    pinyin: str | None = None
    script: str = "any"

    def __post_init__(self) -> None:
        for name in ("pos", "pattern", "words", "initial", "pinyin", "script"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise DictEmbedError(f"{name}: a string, not {value!r}")
        if self.words not in WORD_COUNTS:
            raise DictEmbedError(f"words: unknown word count {self.words!r}; choose from {', '.join(WORD_COUNTS)}")
        if self.script not in SCRIPTS:
            raise DictEmbedError(f"script: unknown script {self.script!r}; choose from {', '.join(SCRIPTS)}")
        object.__setattr__(self, "pos", normalize_pos(self.pos) or None)
        if self.pos is not None and self.pos not in POS_TAGS:
            raise DictEmbedError(
                f"pos: unknown part of speech {self.pos!r}; choose from n, v, a, r (noun, verb, adjective, adverb)"
            )
        object.__setattr__(self, "pattern", unicodedata.normalize("NFC", self.pattern) if self.pattern else None)
        if self.pattern is not None:
            pattern_matcher(self.pattern)  # fail early on a bad pattern
        for name in ("min_length", "max_length"):
            check_letters(name, getattr(self, name))
        if self.min_length is not None and self.max_length is not None and self.min_length > self.max_length:
            raise DictEmbedError(f"min_length: {self.min_length} is more than max_length {self.max_length}")
        object.__setattr__(self, "initial", unicodedata.normalize("NFC", (self.initial or "").strip()) or None)
        if self.initial is not None and len(self.initial) > MAX_INITIAL_CHARS:
            raise DictEmbedError(f"initial: too long, at most {MAX_INITIAL_CHARS} characters")
        pinyin = (self.pinyin or "").strip()
        object.__setattr__(self, "pinyin", check_pinyin(pinyin) if pinyin else None)

    @staticmethod
    def none_asked(options: dict[str, Any]) -> bool:
        """Whether `options` (named as `FILTER_OPTIONS`) ask for no filter: each None or its field's default, so
        that `Filters.of(**options)` lets every entry through."""
        return all(
            value is None or (name in FILTER_DEFAULTS and value == FILTER_DEFAULTS[name])
            for name, value in options.items()
        )

    @classmethod
    def of(cls, **options: Any) -> Filters:
        """The filters of `options` named as `FILTER_OPTIONS` (the names of `predict`, `/api/reverse` and
        `ReverseDictionary.search`): the fields, and an exact `length` in place of `min_length`/`max_length`
        (`length_bounds`); None leaves an option unset. An unknown name is a one-line error listing the valid ones."""
        if unknown := [name for name in options if name not in FILTER_OPTIONS]:
            named = ", ".join(map(repr, unknown))
            raise DictEmbedError(
                f"unknown filter{'s' * (len(unknown) > 1)} {named}; the filters are {', '.join(FILTER_OPTIONS)}"
            )
        given = {name: value for name, value in options.items() if value is not None}
        for name, value in given.items():
            if not name.endswith("length") and not isinstance(value, str):
                raise DictEmbedError(f"{name}: a string, not {value!r}")
        length = given.pop("length", None)
        check_letters("length", length)
        low, high = length_bounds(length, given.pop("min_length", None), given.pop("max_length", None))
        return cls(min_length=low, max_length=high, **given)

    @classmethod
    def resolve(cls, filters: Filters | None, options: dict[str, Any]) -> Filters:
        """`filters`, or else `Filters.of(**options)` of the filter keywords (none: no filter); both at once is a
        one-line error. How `ReverseDictionary.search` and its kin read their filters."""
        if filters is not None and options:
            raise DictEmbedError(f"give filters=Filters(...) or filter keywords ({', '.join(options)}), not both")
        if filters is not None and not isinstance(filters, Filters):
            raise DictEmbedError(f"filters: a Filters, not {type(filters).__name__}")
        return filters if filters is not None else cls.of(**options)

    @property
    def active(self) -> bool:
        return (
            self.pos is not None
            or self.pattern is not None
            or self.words != "any"
            or self.min_length is not None
            or self.max_length is not None
            or self.initial is not None
            or self.pinyin is not None
            or self.script != "any"
        )


FILTER_DEFAULTS = {field.name: field.default for field in fields(Filters)}  # what `Filters.none_asked` compares with


@dataclass(frozen=True)
class Ranking:
    """How a search scores an entry for a query vector q:

        (cos(q, entry vector) + definition_weight x max over its definitions cos(q, definition vector))
        / (1 + definition_weight) + frequency_weight x Zipf frequency of its word
        + headword_weight x cos(q, the vector of the word itself)
        + second_dictionary_weight x max(0, max over a second dictionary's definitions of it cos(q, definition) - 0.3)
        - query_word_weight x [the description uses the word] + overlap_weight x (words shared with its definitions)

    The definition term needs the space's definition vectors (`DefinitionSpace.definitions`), the headword term
    its headword vectors (`DefinitionSpace.headwords`: each word encoded as a description is), the second-dictionary
    term a second dictionary's definition vectors (`second_dictionary`); they rerank only
    the `depth` best entries by the rest of the score (or the k asked for, when more), so they cost a few
    hundred dot products a query. Results that are several words (identical entries) take their best word's
    headword cosine. The two lexical terms (`lexical_terms`: the description's text, not its vector; the overlap
    needs the dictionary's definitions, of the `LEXICAL_DEPTH` best by the rest of the score) rerank the same results
    as the other two. A weight of 0 turns its term off.

    `min_frequency` (None: every entry) is the candidate set: only entries whose word has at least this Zipf
    frequency (3: once per million words) are ever listed."""

    frequency_weight: float = FREQUENCY_WEIGHT
    definition_weight: float = DEFINITION_WEIGHT
    depth: int = RERANK_DEPTH
    min_frequency: float | None = None
    headword_weight: float = HEADWORD_WEIGHT
    second_dictionary_weight: float = SECOND_DICTIONARY_WEIGHT
    query_word_weight: float = QUERY_WORD_WEIGHT
    overlap_weight: float = OVERLAP_WEIGHT

    def __post_init__(self) -> None:
        """Refuse what no score can use; numpy's numbers are kept as Python's (the record and the API write JSON)."""
        weights = ("frequency_weight", "definition_weight", "headword_weight", "second_dictionary_weight")
        for name in (*weights, "query_word_weight", "overlap_weight"):
            value = getattr(self, name)
            if not is_real_number(value, 0, MAX_WEIGHT):
                raise DictEmbedError(f"{name}: a number from 0 to {MAX_WEIGHT:g}, not {value!r}")
            if not isinstance(value, int):
                object.__setattr__(self, name, float(value))
        if not is_whole_number(self.depth):
            raise DictEmbedError(f"depth: a whole number >= 1, not {self.depth!r}")
        object.__setattr__(self, "depth", int(self.depth))
        floor = self.min_frequency
        if floor is not None and not is_real_number(floor, 0, 8):
            raise DictEmbedError(f"min_frequency: a Zipf frequency from 0 to 8, not {floor!r}")
        if floor is not None and not isinstance(floor, int):
            object.__setattr__(self, "min_frequency", float(floor))


def saved_ranking(described: bool) -> dict[str, Any]:
    """The ranking settings a trained folder saves in its record (`RunRecord.ranking`): a query encoder taught
    people's descriptions reads its words' own vectors better (`DESCRIBED_HEADWORD_WEIGHT`); one taught definitions
    alone keeps the defaults."""
    return {"headword_weight": DESCRIBED_HEADWORD_WEIGHT} if described else {}


RankingChoice = Ranking | Mapping[str, Any] | None  # a whole ranking, or some of its settings by name, or none


def ranking_over(saved: Mapping[str, Any], given: RankingChoice = None, owner: str = "the folder") -> Ranking:
    """The ranking a saved folder is searched with: `given` itself when it is a whole `Ranking`; else the folder's
    own settings (`saved`, its record's `ranking`) with those `given` by name set over them; unnamed ones keep
    `Ranking`'s defaults. A setting no `Ranking` has, or a value it refuses, is a one-line error naming its owner."""
    if isinstance(given, Ranking):
        return given
    if given is not None and not isinstance(given, Mapping):
        raise DictEmbedError(f"ranking: a search_options.Ranking or a dict of its settings, not {type(given).__name__}")
    known = [field.name for field in fields(Ranking)]
    for where, settings in ((f"{owner}'s saved ranking", saved), ("ranking", given or {})):
        unknown = [name for name in settings if name not in known]
        if unknown:
            raise DictEmbedError(f"{where}: no setting {unknown[0]!r:.60}; choose from {', '.join(known)}")
    try:
        stored = Ranking(**saved)
    except DictEmbedError as err:
        raise DictEmbedError(f"{owner}'s saved ranking: {err}") from None
    return replace(stored, **(given or {}))
