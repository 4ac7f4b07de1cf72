"""GR-BERT triplets: (word, context sentence containing the word, gloss), with a hard-negative gloss.

A triplet is made for every example sentence of every sense whose headword can be found in the sentence.
The sentence is split into word tokens (runs of letters/digits; whitespace and punctuation separate them)
and the headword is matched case-insensitively as a whole token, or for a multi-word headword as a span
of consecutive tokens. Each headword token also matches its inflections (lemminflect
`getAllInflections`) and any sentence token whose lemmas (`getAllLemmas`) include it, so "ran" matches
"run" and "notabilities" matches "notability"; inflections of the headword's own lemmas match too
("frisking" finds "frisk"). The first match is kept with its character span.

Examples where the word is not found are counted in a `TripletReport` (and logged), never dropped
silently. The hard negative is another definition of the same headword, drawn with a seeded RNG, or
None when the headword has a single distinct definition.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field

import numpy as np

from dictembed.dictionary.core import Dictionary
from dictembed.extras import require


def _lemminflect():  # noqa: ANN202 - the optional lemminflect module
    """lemminflect, from the `lexsub` extra."""
    return require("lexsub")


log = logging.getLogger(__name__)

WORD = re.compile(r"[^\W_]+")
MAX_REPORTED = 5
OOV_POS = ("NOUN", "VERB", "ADJ")


@dataclass(frozen=True)
class Triplet:
    """A target word in context, its gloss, and another gloss of the same word (or None)."""

    word: str
    context: str
    gloss: str
    span: tuple[int, int]  # character span of the target inside `context`
    negative: str | None = None

    @property
    def target(self) -> str:
        """The target as it appears in the sentence (possibly inflected)."""
        return self.context[self.span[0] : self.span[1]]


@dataclass
class TripletReport:
    """How many example sentences were read, turned into triplets, or skipped (with a few samples)."""

    examples: int = 0
    triplets: int = 0
    unmatched: int = 0
    single_sense: int = 0  # triplets without a hard negative
    unmatched_samples: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.examples} example sentences -> {self.triplets} triplets; {self.unmatched} skipped "
            f"(headword not found in the sentence); {self.single_sense} triplets have no hard negative "
            f"(single-sense headword)"
        )


def word_tokens(text: str) -> list[tuple[str, int, int]]:
    """Word tokens of `text` as (lower-cased token, start, end) character spans."""
    return [(m.group().lower(), m.start(), m.end()) for m in WORD.finditer(text)]


@functools.lru_cache(maxsize=200_000)
def word_forms(word: str) -> frozenset[str]:
    """The lower-cased word, its inflections and those of its lemmas ("frisking" -> "frisk", "frisks"), or
    regular OOV inflections when lemminflect knows none."""
    word = word.lower()
    forms = {word}
    for values in _lemminflect().getAllInflections(word).values():
        forms.update(v.lower() for v in values)
    if len(forms) == 1:
        for pos in OOV_POS:
            for values in _lemminflect().getAllInflectionsOOV(word, pos).values():
                forms.update(v.lower() for v in values)
    for lemma in token_lemmas(word) - {word}:
        for values in _lemminflect().getAllInflections(lemma).values():
            forms.update(v.lower() for v in values)
    return frozenset(forms)


@functools.lru_cache(maxsize=200_000)
def token_lemmas(token: str) -> frozenset[str]:
    """All lemmas lemminflect knows for a (lower-cased) token."""
    return frozenset(v.lower() for values in _lemminflect().getAllLemmas(token).values() for v in values)


def _token_matches(token: str, word: str) -> bool:
    return token in word_forms(word) or word in token_lemmas(token)


def find_target(sentence: str, headword: str) -> tuple[int, int] | None:
    """Character span of the first occurrence of `headword` (or an inflection of it) in `sentence`."""
    words = [w for w, _, _ in word_tokens(headword)]
    if not words:
        return None
    tokens = word_tokens(sentence)
    for i in range(len(tokens) - len(words) + 1):
        if all(_token_matches(tokens[i + k][0], w) for k, w in enumerate(words)):
            return tokens[i][1], tokens[i + len(words) - 1][2]
    return None


def _negative(definitions: list[str], positive: str, rng: np.random.Generator) -> str | None:
    others = [d for d in definitions if d != positive]
    return others[rng.integers(len(others))] if others else None


def build_triplets(dictionary: Dictionary, seed: int = 0) -> tuple[list[Triplet], TripletReport]:
    """Triplets from every sense example of `dictionary`, with seeded hard negatives, and the report."""
    rng = np.random.default_rng(seed)
    report = TripletReport()
    triplets: list[Triplet] = []
    for entry in dictionary:
        definitions = list(dict.fromkeys(entry.definitions))
        for sense in entry.senses:
            for sentence in sense.examples:
                report.examples += 1
                span = find_target(sentence, entry.headword)
                if span is None:
                    report.unmatched += 1
                    if len(report.unmatched_samples) < MAX_REPORTED:
                        report.unmatched_samples.append((entry.headword, sentence))
                    continue
                negative = _negative(definitions, sense.definition, rng)
                report.single_sense += negative is None
                triplets.append(Triplet(entry.headword, sentence, sense.definition, span, negative))
    report.triplets = len(triplets)
    if report.unmatched:
        log.warning(
            "%s: %d of %d example sentences skipped, the headword was not found in them (e.g. %s)",
            dictionary.name,
            report.unmatched,
            report.examples,
            "; ".join(f"{w!r} in {s!r}" for w, s in report.unmatched_samples[:2]),
        )
    return triplets, report
