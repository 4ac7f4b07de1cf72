"""A word-frequency prior for the reverse dictionary: people look for words they have met, so among entries
the model scores alike, the more frequent word is the likelier answer. Frequencies are `wordfreq`'s Zipf
scale (0: unknown, 3: once per million words ... 7: "the"); the ranking score of an entry adds a weight x its
Zipf frequency (`search_options.Ranking`, chosen on the dev split of the everyday descriptions;
docs/results.md, "Reverse dictionary ranking"), and a search may list only the entries above a floor."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dictembed.cjk import is_han, is_kana, looks_chinese
from dictembed.errors import DictEmbedError
from dictembed.io import atomic_file

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary

log = logging.getLogger(__name__)

# The languages whose frequencies the prior uses (Chinese needs jieba, Japanese MeCab: `SEGMENTERS`); those written
# in Latin letters, English first.
LANGUAGES = ("en", "zh", "fr", "de", "ru", "ja")
BOUNDARY_PENALTY = ("ja",)  # languages whose multi-token words lose a Zipf point per inferred boundary (`zipf`)
SEGMENTERS = {"zh": ("jieba", "zh"), "ja": ("MeCab", "ja")}  # language -> (the module wordfreq needs, its extra)
LATIN_LANGUAGES = ("en", "fr", "de")
SAMPLE = 2000  # headwords looked at to recognise the language of a dictionary
MIXED_MIN = 100  # headwords of each script (Han and other) that make a dictionary one of two languages


def check_language(language: object) -> None:
    """Refuse a prior language that is none of "auto" (recognise it), "none" or None (no prior), `LANGUAGES`."""
    if language is not None and language not in ("auto", "none", *LANGUAGES):
        choices = ", ".join(("auto", "none", *LANGUAGES))
        raise DictEmbedError(f"language {language!r}: the word-frequency prior knows {choices}")


def _wordfreq():  # noqa: ANN202 - the module, imported on first use (it loads its word lists lazily)
    try:
        import wordfreq
    except ImportError:
        return None
    return wordfreq


def frequency_source(language: str | None = "auto") -> str | None:
    """What the frequencies `entry_frequencies` gives for `language` derive from (the language and wordfreq's
    version), to store them beside an index and know them for the same; None without wordfreq."""
    try:
        version = importlib.metadata.version("wordfreq")
    except importlib.metadata.PackageNotFoundError:
        return None
    return f"{language}|wordfreq {version}"


def guess_language(words: list[str]) -> str | None:
    """The language of a word list among `LANGUAGES`, judged on an evenly spaced sample of `SAMPLE` headwords:
    when most hold Han characters or kana, `zh` if their letters are Chinese (`cjk.looks_chinese`: nearly no kana),
    else `ja`; `ru` when most hold Cyrillic letters, else the one of
    `LATIN_LANGUAGES` in which wordfreq knows the most of them (English on a tie; its lists know many French and
    German words), if most; else None (no prior)."""
    wordfreq = _wordfreq()
    if wordfreq is None or not words:
        return None
    sample = words[:: max(1, len(words) // SAMPLE)][:SAMPLE]
    if sum(any(is_han(c) or is_kana(c) for c in w) for w in sample) * 2 > len(sample):
        return "zh" if looks_chinese(sample) else "ja"  # kana among the letters: Japanese
    if sum(any(map(is_cyrillic, w)) for w in sample) * 2 > len(sample):
        return "ru"
    known = {language: sum(wordfreq.zipf_frequency(w, language) > 0 for w in sample) for language in LATIN_LANGUAGES}
    best = max(known, key=known.__getitem__)  # ties: the first, English
    return best if known[best] * 2 > len(sample) else None


def is_cyrillic(char: str) -> bool:
    """Whether `char` is a Cyrillic letter (the Cyrillic block and its supplement)."""
    return "\u0400" <= char <= "\u052f"


def _quiet_jieba() -> None:
    """Send jieba's messages ("Building prefix dict ...") through dictembed's logging, where the command line's level
    applies (shown at -v, not by default): jieba logs them at DEBUG on a stderr handler and level of its own, set
    when it is imported. Nothing without jieba."""
    try:
        import jieba
    except ImportError:
        return
    logger = logging.getLogger("jieba")
    if (handler := getattr(jieba, "log_console", None)) is not None:  # its handler on stderr (jieba 0.42)
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)


def zipf(wordfreq: Any, word: str, language: str) -> float:
    """wordfreq's Zipf frequency of `word`, less one for each boundary its segmenter infers inside it in a language
    of `BOUNDARY_PENALTY`: wordfreq takes that penalty for Chinese but not for Japanese, where a string of particles
    (のたのた, a JMdict headword) would otherwise rank with the most frequent words."""
    value = float(wordfreq.zipf_frequency(word, language))
    if language in BOUNDARY_PENALTY and value > 0:
        value = max(0.0, value - (len(wordfreq.tokenize(word, language)) - 1))
    return value


def zipf_frequencies(words: list[str], language: str, cache_dir: Path | None = None) -> np.ndarray:
    """The Zipf frequency of each word in `language` (float32; 0 for words wordfreq does not know), cached in
    `cache_dir` (when given) under a key of the words, the language and wordfreq's version."""
    wordfreq = _wordfreq()
    if wordfreq is None:
        return np.zeros(len(words), dtype=np.float32)
    rule = "|boundaries" if language in BOUNDARY_PENALTY else ""
    digest = hashlib.sha1(f"{language}|{getattr(wordfreq, '__version__', '')}{rule}".encode())
    for word in words:
        digest.update(word.encode() + b"\n")
    path = None if cache_dir is None else cache_dir / f"frequency-{digest.hexdigest()[:16]}.npy"
    if path is not None and path.is_file():
        try:
            cached = np.load(path, allow_pickle=False)
            if cached.shape == (len(words),) and cached.dtype == np.float32 and np.isfinite(cached).all():
                return cached
        except (OSError, ValueError):
            pass
        log.warning("word-frequency cache %s is damaged; recomputing it", path)
    if SEGMENTERS.get(language, ("", ""))[0] == "jieba":
        _quiet_jieba()
    values = np.fromiter((zipf(wordfreq, w, language) for w in words), dtype=np.float32, count=len(words))
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_file(path) as f:
                np.save(f, values, allow_pickle=False)
        except OSError as err:
            log.warning("cannot cache word frequencies in %s (%s)", path, err.strerror or err)
    return values


def entry_frequencies(
    words: list[str], language: str | None = "auto", cache_dir: Path | None = None
) -> np.ndarray | None:
    """The Zipf frequency of each word (`zipf_frequencies`), or None when there are none to use: language None,
    an unrecognised language under `auto`, wordfreq (or its segmenter, `SEGMENTERS`) missing, or a wordfreq whose
    word lists cannot be read (a partial or damaged install; the ranking then goes without its prior rather than
    a saved folder failing); each said once."""
    try:
        return _entry_frequencies(words, language, cache_dir)
    except (LookupError, OSError) as err:  # wordfreq: "No wordlist 'best' available for language 'fr'", a bad file
        log.warning("no word frequencies: wordfreq cannot read its word lists (%s)", err)
        return None


def _entry_frequencies(words: list[str], language: str | None, cache_dir: Path | None) -> np.ndarray | None:
    if language is None or language == "none":
        return None
    if language == "auto":
        cjk = np.fromiter((any(map(is_han, w)) for w in words), dtype=bool, count=len(words))
        if min(int(cjk.sum()), int((~cjk).sum())) >= MIXED_MIN:
            return two_script_frequencies(words, cjk, cache_dir)
        language = guess_language(words)
        if language is None:
            log.info("no word frequencies: the headwords are in none of %s", ", ".join(LANGUAGES))
            return None
    if language not in LANGUAGES:
        log.info("no word frequencies: the prior has none for language %r", language)
        return None
    if _wordfreq() is None:
        log.warning("no word frequencies: wordfreq is not installed (pip install wordfreq)")
        return None
    module, extra = SEGMENTERS.get(language, ("", ""))
    if module and importlib.util.find_spec(module) is None:
        log.warning("no word frequencies in %s: they need %s (pip install 'dictembed[%s]')", language, module, extra)
        return None
    return zipf_frequencies(words, language, cache_dir)


def two_script_frequencies(words: list[str], cjk: np.ndarray, cache_dir: Path | None = None) -> np.ndarray:
    """The frequencies of a dictionary of two languages (WordNet and CWN merged): each headword in the language
    of its script, Chinese for those with Han characters (`cjk`) and the recognised language of the others
    (`guess_language`); 0 where none can be had."""
    out = np.zeros(len(words), dtype=np.float32)
    others = [w for w, c in zip(words, cjk, strict=True) if not c]
    for mask, language in ((cjk, "zh"), (~cjk, guess_language(others))):
        part = [w for w, m in zip(words, mask, strict=True) if m]
        values = entry_frequencies(part, language, cache_dir) if language is not None else None
        if values is not None:
            out[mask] = values
        found = f"in {language}" if values is not None else "none"
        log.info("word frequencies of a dictionary in two scripts: %s headwords %s", f"{len(part):,}", found)
    return out


def most_frequent(
    dictionary: Dictionary, n: int, language: str | None = "auto", cache_dir: Path | None = None
) -> Dictionary:
    """The `n` headwords of `dictionary` most frequent in `language` (`entry_frequencies`; ties in dictionary
    order), as a subset in dictionary order; the whole dictionary when it has no more than `n`. A DictEmbedError
    when no frequencies can be had, rather than an arbitrary sample. The frequencies are cached in `cache_dir`."""
    words = dictionary.headwords
    if len(words) <= n:
        return dictionary
    values = entry_frequencies(words, language, cache_dir)
    if values is None:
        raise DictEmbedError(f"{dictionary.name}: no word frequencies to choose its {n:,} most frequent headwords by")
    order = np.argsort(-values, kind="stable")[:n]
    log.info(
        "%s: the %s most frequent of %s headwords (Zipf >= %.2f)",
        dictionary.name,
        f"{n:,}",
        f"{len(words):,}",
        float(values[order[-1]]),
    )
    return dictionary.subset((words[i] for i in order), name=dictionary.name)
