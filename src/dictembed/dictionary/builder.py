"""Building a `Dictionary` from (headword, definition, example, pos) rows, counting what is skipped."""

from __future__ import annotations

import functools
import gc
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from dictembed.dictionary.core import Dictionary, Sense, united
from dictembed.errors import DataFormatError

logger = logging.getLogger(__name__)

MAX_LINES_REPORTED = 5
MAX_EXAMPLE_CHARS = 60  # of the skipped text a report quotes
P = ParamSpec("P")
R = TypeVar("R")


def without_gc(function: Callable[P, R]) -> Callable[P, R]:
    """Run `function` with the cyclic garbage collector paused.

    Building hundreds of thousands of small objects triggers repeated full collections that
    scan the whole heap: loading GCIDE takes about 4x longer with them.
    """

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper


# Format characters (Unicode category Cf) are invisible. At the ends of a text they are left over from
# copying or joining files (a byte order mark, a zero-width space, a direction mark) and would make two
# entries that look the same, so they are removed there. Inside a word some are spelling (ZWNJ and ZWJ in
# Persian, Hindi or Malayalam), so the middle is left alone. These stay even at the ends: ZWNJ and ZWJ (the
# Persian prefix mi- is written with a final ZWNJ, older Malayalam text ends a word in virama + ZWJ, and a
# leading ZWJ shows an Arabic letter's joined form), the visible signs written before a number (the Arabic
# number signs and the like), and the tag characters that end an emoji flag.
KEPT_AT_ENDS = frozenset(
    "\u200c\u200d\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
)
TAG_RANGE = ("\U000e0020", "\U000e007f")


def _invisible_end(char: str) -> bool:
    """Whether `char` is dropped from the ends of a text: a space, or a format character not kept there."""
    if char == " ":
        return True
    return unicodedata.category(char) == "Cf" and char not in KEPT_AT_ENDS and not TAG_RANGE[0] <= char <= TAG_RANGE[1]


# the control characters that are no white space, and lone surrogates (a JSON "\ud800" no encoder can write)
CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\ud800-\udfff]")
C1 = re.compile("[\x80-\x9f]")  # what a Windows (cp1252) file's quotes, dashes and euro sign become read as latin-1


def removed_controls(texts: Iterable[str | None]) -> str | None:
    """Why `clean_text` removes characters from any of `texts` (a row's headword, definition, examples), as the
    load report counts the rows it changed; None when it removes none."""
    found = [t for t in texts if t and not t.isprintable() and CONTROL.search(t)]
    if not found:
        return None
    if any(C1.search(t) for t in found):
        return (
            "rows whose control characters U+0080-U+009F were removed (what a Windows file's quotes and dashes become "
            "read as latin-1: read such a file as cp1252)"
        )
    return "rows whose control characters (NUL, escape, lone surrogates, ...) were removed"


def clean_text(text: str) -> str:
    """`text` in Unicode NFC with every run of whitespace (newlines, tabs) made one space, control characters
    (NUL, ...) removed, and the ends stripped of spaces and format characters (see KEPT_AT_ENDS); "" when nothing
    visible is left."""
    if not text.isprintable():  # tabs, newlines and control characters: most text has none
        text = CONTROL.sub("", text)
    if text.isascii():  # no format character, and already NFC
        return " ".join(text.split())
    text = " ".join(unicodedata.normalize("NFC", text).split())
    start, end = 0, len(text)
    while start < end and _invisible_end(text[start]):
        start += 1
    while end > start and _invisible_end(text[end - 1]):
        end -= 1
    text = text[start:end]
    if all(c == " " or unicodedata.category(c) == "Cf" for c in text):
        return ""
    return text


def _empty_reason(raw: str | None, column: str) -> str:
    """The skip reason of a row whose `column` text (`raw`, before `clean_text`) is empty once cleaned."""
    if raw and raw.strip():
        return f"rows whose {column} is only invisible format or control characters"
    return f"rows with an empty {column}"


def lines_note(lines: list[int], count: int) -> str:
    """The first `lines` of `count` rows as ` (lines 4, 9, ...)` (the dots when there were more); "" for none."""
    return f" (lines {', '.join(map(str, lines))}{', ...' if count > len(lines) else ''})" if lines else ""


def note_line(notes: dict[str, list[int]], reason: str, line: int | None) -> None:
    """Keep `line` among the first MAX_LINES_REPORTED lines noted for `reason`."""
    if line is not None:
        lines = notes.setdefault(reason, [])
        if len(lines) < MAX_LINES_REPORTED:
            lines.append(line)


@dataclass
class LoadReport:
    """What a source loader read, kept and skipped (skipped counts by reason, with first line numbers and, for a
    reason its loader quotes, the first text skipped for it)."""

    source: str
    rows: int = 0
    headwords: int = 0
    senses: int = 0
    examples: int = 0
    repeated_definitions: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_lines: dict[str, list[int]] = field(default_factory=dict)
    skipped_examples: dict[str, str] = field(default_factory=dict)
    changed: Counter[str] = field(default_factory=Counter)
    changed_lines: dict[str, list[int]] = field(default_factory=dict)

    def skips(self) -> str:
        """Every skip reason with its count, first text quoted (if kept) and first line numbers, e.g. "skipped 2
        rows ... (lines 4, 9)", "skipped 1 glosses ..., e.g. 'Synonyme de .' (lines 10)"."""
        parts = []
        for reason, count in sorted(self.skipped.items()):
            example = f", e.g. {self.skipped_examples[reason]!r}" if reason in self.skipped_examples else ""
            parts.append(f"skipped {count} {reason}{example}{lines_note(self.skipped_lines.get(reason, []), count)}")
        return "; ".join(parts)

    def changes(self) -> str:
        """Every change made to rows that were kept, with its count and first line numbers."""
        parts = [
            f"{count} {reason}{lines_note(self.changed_lines.get(reason, []), count)}"
            for reason, count in sorted(self.changed.items())
        ]
        return "; ".join(parts)

    def summary(self) -> str:
        text = (
            f"{self.source}: {self.rows} rows -> {self.headwords} headwords, {self.senses} senses, "
            f"{self.examples} examples ({self.repeated_definitions} repeated definitions united)"
        )
        return "; ".join(filter(None, (text, self.skips(), self.changes())))


class DictionaryBuilder:
    """Collects rows into a `Dictionary`: one sense per distinct definition of a headword.

    A definition repeated under the same headword (as in the Oxford files, one row per example)
    becomes a single sense whose examples are the union of the rows' examples, in order.
    Text is normalised with `clean_text` (NFC, whitespace, format characters at the ends), so text that
    looks the same is one headword or definition; empty headwords or definitions (also those of invisible
    format characters only) are skipped and counted, never dropped silently.
    """

    def __init__(self, source: str, name: str | None = None, unite_repeats: bool = True) -> None:
        self.report = LoadReport(source)
        self.dictionary = Dictionary(name=name or source)
        self.unite_repeats = unite_repeats
        self._senses: dict[tuple[str, str], Sense] = {}

    def skip(self, reason: str, line: int | None = None, text: str | None = None) -> None:
        """Count one skipped row (and remember its line number, and the first `text` given for `reason`, shortened
        to MAX_EXAMPLE_CHARS, for the report)."""
        self.report.skipped[reason] += 1
        if text is not None and reason not in self.report.skipped_examples:
            short = text if len(text) <= MAX_EXAMPLE_CHARS else text[: MAX_EXAMPLE_CHARS - 1] + "…"
            self.report.skipped_examples[reason] = short
        note_line(self.report.skipped_lines, reason, line)

    def skip_row(self, reason: str, line: int | None = None, text: str | None = None) -> None:
        """Count one input row that is not added (a row read, then skipped for `reason`; `text`: see `skip`)."""
        self.report.rows += 1
        self.skip(reason, line, text)

    def change(self, reason: str, line: int | None = None) -> None:
        """Count one row kept with a change a loader made for `reason` (and remember its line, for the report)."""
        self.report.changed[reason] += 1
        note_line(self.report.changed_lines, reason, line)

    def add(
        self,
        headword: str | None,
        definition: str | None,
        examples: Iterable[str] = (),
        pos: str | None = None,
        line: int | None = None,
        antonyms: Iterable[str] = (),
        similar: Iterable[str] = (),
    ) -> bool:
        """Add one row; returns False (and counts it) when the headword or definition is empty. `antonyms` and
        `similar` are the headwords of the opposite and of a close meaning (cleaned as headwords; empty ones and the
        headword itself dropped)."""
        self.report.rows += 1
        raw_headword, raw_definition = headword, definition
        examples = list(examples)
        altered = removed_controls([headword, definition, *examples])
        headword = clean_text(headword or "")
        definition = clean_text(definition or "")
        if not headword:
            self.skip(_empty_reason(raw_headword, "headword"), line)
            return False
        if not definition:
            self.skip(_empty_reason(raw_definition, "definition"), line)
            return False
        if altered:  # a row kept, with characters removed
            self.change(altered, line)
        cleaned = [c for c in map(clean_text, examples) if c]
        opposites = dict.fromkeys(a for a in map(clean_text, antonyms) if a and a != headword)
        close = dict.fromkeys(a for a in map(clean_text, similar) if a and a != headword)
        sense = self._senses.get((headword, definition)) if self.unite_repeats else None
        if sense is None:
            sense = self.dictionary.add(headword, definition, dict.fromkeys(cleaned), pos, opposites, close)
            if self.unite_repeats:
                self._senses[headword, definition] = sense
            return True
        self.report.repeated_definitions += 1
        sense.pos = sense.pos or pos
        sense.examples.extend(e for e in cleaned if e not in sense.examples)
        sense.antonyms = united(sense.antonyms, opposites)
        sense.similar = united(sense.similar, close)
        return True

    def build(self, empty: str = "no rows") -> Dictionary:
        """The finished dictionary; the report is logged (as a warning when rows were skipped) with the
        `LoadReport` as the record's `load_report` attribute.

        A dictionary without any entry raises DataFormatError naming the source: `empty` says why when no
        row was read at all (e.g. "only a header"), else it names the skips.
        """
        report = self.report
        report.headwords = len(self.dictionary)
        report.senses = self.dictionary.num_definitions()
        report.examples = sum(len(s.examples) for e in self.dictionary for s in e.senses)
        level = logging.WARNING if report.skipped or report.changed else logging.INFO
        logger.log(level, report.summary(), extra={"load_report": report})
        if not self.dictionary:
            why = f"all {report.rows} rows were skipped: {report.skips()}" if report.skipped else empty
            raise DataFormatError(report.source, f"no entries ({why})")
        return self.dictionary
