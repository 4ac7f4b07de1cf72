"""Chinese and Japanese text: word-segmented text joined back, the share of CJK characters in texts, and the
pinyin initials of a Chinese word (`pypinyin`, the `zh` extra). Torch-free."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable

from dictembed.errors import DictEmbedError
from dictembed.extras import require

HANGUL = ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF))
SPACES = re.compile(r"\s+")
MAX_PINYIN_LETTERS = 20  # `pinyin`: the initials of the first syllables


@functools.lru_cache(maxsize=65536)
def is_cjk(char: str) -> bool:
    """Whether `char` is written without spaces around it in Chinese or Japanese: a wide or fullwidth character
    (Han, kana, CJK and fullwidth punctuation), Hangul aside, since Korean puts spaces between words."""
    if char.isascii():
        return False
    code = ord(char)
    if any(low <= code <= high for low, high in HANGUL):
        return False
    return unicodedata.east_asian_width(char) in ("W", "F")


def is_han(char: str) -> bool:
    """Whether `char` is a Han ideograph (CJK Unified Ideographs, their extensions and compatibility forms): the
    characters of Chinese words. Narrower than `is_cjk`, which also holds kana and CJK punctuation. The ranges:
    Extension A, the unified block (not the Yijing hexagrams between them), the compatibility forms, and the
    supplementary and tertiary planes' Extensions B to I and compatibility supplement."""
    return (
        "\u3400" <= char <= "\u4dbf"
        or "\u4e00" <= char <= "\u9fff"
        or "\uf900" <= char <= "\ufaff"
        or "\U00020000" <= char <= "\U000323af"
    )


def join_segmented(text: str) -> str:
    """Word-segmented Chinese (`化学 符号 为 Cu 。`) as it is written: a run of whitespace with a CJK character
    (`is_cjk`) on either side is removed, one between other characters (Latin words) becomes one space
    (`化学符号为Cu。`)."""
    if text.isascii():
        return " ".join(text.split())
    pieces = SPACES.split(text.strip())
    out = [pieces[0]]
    for piece in pieces[1:]:
        if not (out[-1] and piece and (is_cjk(out[-1][-1]) or is_cjk(piece[0]))):
            out.append(" ")
        out.append(piece)
    return "".join(out)


def cjk_share(texts: Iterable[str]) -> float:
    """The share of CJK characters (`is_cjk`) among the letters and digits of `texts` (0 when there are none)."""
    letters = cjk = 0
    for text in texts:
        for char in text:
            if char.isalnum():
                letters += 1
                cjk += is_cjk(char)
    return cjk / letters if letters else 0.0


def is_kana(char: str) -> bool:
    """Whether `char` is Japanese hiragana or katakana (U+3040-U+30FF, and the small katakana of U+31F0-U+31FF)."""
    return "\u3040" <= char <= "\u30ff" or "\u31f0" <= char <= "\u31ff"


def looks_chinese(words: Iterable[str]) -> bool:
    """Whether most letters of `words` are Han characters and nearly none kana (Japanese): a Chinese word list."""
    letters = han = kana = 0
    for word in words:
        for char in word:
            if char.isalnum():
                letters += 1
                han += is_han(char)
                kana += is_kana(char)
    return han > letters / 2 and kana <= letters / 100


def check_pinyin(letters: str) -> str:
    """`letters`, lower-cased and stripped, if they are 1 to `MAX_PINYIN_LETTERS` Latin letters, else an error."""
    value = letters.strip().lower()
    if not value.isascii() or not value.isalpha() or len(value) > MAX_PINYIN_LETTERS:
        raise DictEmbedError(
            f"pinyin: the initials of the syllables, 1 to {MAX_PINYIN_LETTERS} Latin letters (sc for 使出), "
            f"not {letters[:40]!r}"
        )
    return value


def pinyin_initials(word: str) -> list[frozenset[str]]:
    """The possible first letters of each syllable of `word`: one set per Han character (every reading of a
    character that pypinyin does not know in context, the word's reading when it knows the word: 银行 is
    y, h), one letter per Latin letter or digit (lower-cased), nothing for spaces and punctuation."""
    pypinyin = require("zh")
    readings = pypinyin.pinyin(word, style=pypinyin.Style.FIRST_LETTER, heteronym=True, errors=lambda s: list(s))
    initials = []
    for options in readings:
        letters = frozenset(o.lower() for o in options if o.isalnum())
        if letters:
            initials.append(letters)
    return initials


def pinyin_matcher(letters: str) -> Callable[[str], bool]:
    """A test for words whose syllables start with `letters` in order, one letter a syllable (`sc` passes 使出
    and 使出来, not 出使); words without Han characters never pass. Needs pypinyin (`dictembed[zh]`)."""
    wanted = check_pinyin(letters)
    require("zh")

    def matches(word: str) -> bool:
        if not any(map(is_han, word)):
            return False
        initials = pinyin_initials(word)
        return len(initials) >= len(wanted) and all(c in options for c, options in zip(wanted, initials, strict=False))

    return matches
