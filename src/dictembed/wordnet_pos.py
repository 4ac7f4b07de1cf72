"""Possible parts of speech of an English word, read from the WordNet 3.0 database files.

A word can have part of speech ``p`` when it, or one of its morphological base forms, is a lemma of
``index.<p>``. Base forms come from WordNet's own morphology ("morphy"): the irregular forms listed in
the ``<p>.exc`` exception files (``ran -> run``, ``geese -> goose``) and the standard detachment rules
(``-ies -> -y``, ``-ing -> -e`` ...), each kept only when the result is a lemma of that part of speech.
Parts of speech are WordNet's letters: n (noun), v (verb), a (adjective) and r (adverb).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.paths import wordnet_dir

POS_TAGS = ("n", "v", "a", "r")
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}

# Tags of the lexical substitution data sets (LS07: n v a r; CoInCo: N V J R) and WordNet's satellite 's'.
_TAG_TO_POS = {"n": "n", "v": "v", "a": "a", "j": "a", "s": "a", "r": "r"}

# WordNet's detachment rules (morphy(7WN)): suffix -> ending that replaces it.
DETACHMENT_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
          ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}  # fmt: skip


def to_wordnet_pos(tag: str) -> str:
    """WordNet's letter (n, v, a, r) for a data set tag such as ``a``, ``J`` or ``V``."""
    pos = _TAG_TO_POS.get(tag.strip().lower())
    if pos is None:
        raise DictEmbedError(f"unknown part-of-speech tag {tag!r}; expected one of n, v, a/j, r (any case)")
    return pos


def normalise(word: str) -> str:
    """WordNet's spelling of a query: lower case, collocation words joined by underscores."""
    return "_".join(word.strip().lower().split())


def _data_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-empty line that is not part of the licence header."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if line.startswith(" ") or not line.strip():
                    continue
                yield number, line.split()
    except OSError as error:
        raise DataFormatError(path, f"cannot read WordNet file: {error}") from error


def read_index(path: Path, pos: str) -> frozenset[str]:
    """The lemmas of one ``index.<pos>`` file; each line must be ``lemma pos synset_cnt ...``."""
    lemmas = set()
    for number, fields in _data_lines(path):
        if len(fields) < 4 or fields[1] != pos:
            raise DataFormatError(path, f"expected 'lemma {pos} synset_cnt ...', got {' '.join(fields)!r}", number)
        lemmas.add(fields[0].lower())
    return frozenset(lemmas)


def read_exceptions(path: Path) -> dict[str, tuple[str, ...]]:
    """Irregular form -> base forms from one ``<pos>.exc`` file (``inflected base [base ...]``)."""
    exceptions: dict[str, tuple[str, ...]] = {}
    for number, fields in _data_lines(path):
        if len(fields) < 2:
            raise DataFormatError(path, f"expected 'inflected-form base-form ...', got {fields[0]!r}", number)
        key = fields[0].lower()
        exceptions[key] = exceptions.get(key, ()) + tuple(f.lower() for f in fields[1:])
    return exceptions


@dataclass(frozen=True)
class WordNetPOS:
    """Lemma sets and exception lists of the four WordNet parts of speech."""

    lemmas: dict[str, frozenset[str]]
    exceptions: dict[str, dict[str, tuple[str, ...]]]

    @classmethod
    def load(cls, directory: str | Path | None = None) -> WordNetPOS:
        """Read ``index.{noun,verb,adj,adv}`` and ``{noun,verb,adj,adv}.exc`` from the WordNet folder."""
        folder = wordnet_dir(directory)
        lemmas, exceptions = {}, {}
        for pos, name in POS_FILES.items():
            lemmas[pos] = read_index(folder / f"index.{name}", pos)
            exc_path = folder / f"{name}.exc"
            exceptions[pos] = read_exceptions(exc_path) if exc_path.exists() else {}
        return cls(lemmas, exceptions)

    def base_forms(self, word: str, pos: str) -> list[str]:
        """WordNet lemmas of part of speech ``pos`` that ``word`` may inflect (``word`` itself included)."""
        query = normalise(word)
        index = self.lemmas[pos]
        forms = [query] if query in index else []
        forms += [base for base in self.exceptions[pos].get(query, ()) if base in index]
        for suffix, ending in DETACHMENT_RULES[pos]:
            if query.endswith(suffix) and len(query) > len(suffix):
                base = query[: -len(suffix)] + ending
                if base in index:
                    forms.append(base)
        return list(dict.fromkeys(forms))

    def possible_pos(self, word: str) -> frozenset[str]:
        """The parts of speech (subset of n, v, a, r) under which ``word`` or a base form is in WordNet."""
        return frozenset(pos for pos in POS_TAGS if self.base_forms(word, pos))

    def has_pos(self, word: str, pos: str) -> bool:
        """Whether ``word`` can be used with part of speech ``pos`` (a data set tag or WordNet letter)."""
        return bool(self.base_forms(word, to_wordnet_pos(pos)))


@functools.lru_cache(maxsize=4)
def _load_cached(folder: str) -> WordNetPOS:
    return WordNetPOS.load(folder)


def load_wordnet_pos(directory: str | Path | None = None) -> WordNetPOS:
    """The part-of-speech lexicon of ``directory`` (default ``dictembed.paths.wordnet_dir()``), cached."""
    return _load_cached(str(wordnet_dir(directory)))


def possible_pos(word: str, directory: str | Path | None = None) -> frozenset[str]:
    """Shortcut: the possible WordNet parts of speech of ``word``."""
    return load_wordnet_pos(directory).possible_pos(word)
