"""WordNet 3.0 from the Princeton database files (`data.noun`, ...), and the WordNet-examples CSV.

An entry's senses come most frequent first. Within one part of speech they follow WordNet's sense numbers
(the order of the offsets on the lemma's `index.*` line, which WordNet numbers by how often each sense was
tagged in its semantic concordance). The parts of speech are then interleaved by those tag counts
(`cntlist.rev`): the next sense is the first remaining one of the part of speech whose next sense was tagged
most often; ties, untagged senses among them, go to noun, verb, adjective, adverb in that order. So `bank`
starts with "sloping land (especially the slope beside a body of water)" (tagged 25 times), `run` with its
verb "move fast by using one's feet" (106) before its noun "a score in baseball" (18), and `metric`, never
tagged, with its nouns before its adjectives.
"""

from __future__ import annotations

import heapq
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from dictembed import paths
from dictembed.dictionary.builder import DictionaryBuilder, clean_text, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.sources.table import load_table
from dictembed.errors import DataFormatError
from dictembed.text_files import read_lines

DATA_FILES = ("noun", "verb", "adj", "adv")
INDEX_POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}  # the pos field of each `index.*` file
COUNT_FILE = "cntlist.rev"
SENSE_KEY_FILES = {"1": "noun", "2": "verb", "3": "adj", "4": "adv", "5": "adj"}  # a sense key's ss_type
SYNSET_TYPES = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
POINTER_FILES = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}  # a pointer's pos -> its data file
ANTONYM, SIMILAR = "!", "&"  # the pointer symbols read
ADJECTIVE_MARKER = re.compile(r"\((?:a|p|ip)\)$")
# Examples start at the first double quote that follows ';', ':', ',' or 'e.g.' (or opens the gloss).
EXAMPLES_START = re.compile(r'(?:^|[;:,]|\be\.g\.)\s*(?=")')
# Examples are separated by a semicolon or comma touching a quote: `"a"; "b"`, `"a", "b"`, `"a; "b"`.
EXAMPLE_SEPARATOR = re.compile(r'"\s*[;,]\s*"|"\s*;|;\s*"')
ATTRIBUTION = re.compile(r'"\s*-+[^"]*$')
DEFINITION_TAIL = re.compile(r"[\s;:,]*(?:\be\.g\.)?[\s;:,]*$")
EXAMPLES_CSV = Path("dictionaries") / "wordnet_examples" / "WordNet_lemmas.csv"

logger = logging.getLogger(__name__)


SynsetKey = tuple[str, str]  # (data file name, offset): a synset of any part of speech


@dataclass
class Synset:
    """One parsed data line: offset, part of speech, lemma names and gloss parts; the synsets its antonym pointers
    name (from any of its lemmas), its similar-to pointers (a head adjective's satellites, a satellite's head) and
    whether it is a satellite adjective."""

    offset: str
    pos: str
    lemmas: list[str]
    definition: str
    examples: list[str]
    antonyms: list[SynsetKey] = field(default_factory=list)
    similar: list[SynsetKey] = field(default_factory=list)
    satellite: bool = False


def lemma_name(word: str) -> str:
    """A data-file word as a headword: adjective marker `(a)`/`(p)`/`(ip)` removed, `_` -> space."""
    return ADJECTIVE_MARKER.sub("", word).replace("_", " ")


def _balanced(text: str) -> bool:
    return text.count("(") <= text.count(")")


def split_gloss(gloss: str) -> tuple[str, list[str]]:
    """Split a WordNet gloss into its definition and its quoted example sentences.

    Semicolons inside the definition stay in it; a quote inside parentheses (`(e.g., "x")`) belongs
    to the definition; author attributions after an example (`"..." -Shakespeare`) are dropped.
    """
    gloss = gloss.strip()
    for match in EXAMPLES_START.finditer(gloss):
        if _balanced(gloss[: match.start()]):
            break
    else:
        return gloss.rstrip("; "), []
    definition = DEFINITION_TAIL.sub("", gloss[: match.start()])
    examples = []
    for part in EXAMPLE_SEPARATOR.split(gloss[match.end() :]):
        example = clean_text(ATTRIBUTION.sub("", part.strip()).strip('"'))
        if example:
            examples.append(example)
    return definition, examples


def parse_data_line(line: str, path: Path, number: int) -> Synset:
    """Parse `offset lex_filenum ss_type w_cnt word lex_id ... p_cnt ptrs... [frames] | gloss`."""
    head, bar, gloss = line.partition(" | ")
    fields = head.split()
    if not bar or len(fields) < 5:
        raise DataFormatError(path, "not a WordNet data line (expected '... | gloss')", line=number)
    offset, _, ss_type, w_cnt = fields[:4]
    if not offset.isdigit() or ss_type not in SYNSET_TYPES:
        raise DataFormatError(path, f"bad synset offset {offset!r} or type {ss_type!r}", line=number)
    try:
        count = int(w_cnt, 16)
    except ValueError:
        raise DataFormatError(path, f"word count {w_cnt!r} is not hexadecimal", line=number) from None
    words = fields[4 : 4 + 2 * count : 2]
    if count < 1 or len(fields) < 5 + 2 * count or not fields[4 + 2 * count].isdigit():
        raise DataFormatError(path, f"expected {count} (word, lex_id) pairs then a pointer count", line=number)
    definition, examples = split_gloss(gloss)
    synset = Synset(offset, SYNSET_TYPES[ss_type], [lemma_name(w) for w in words], definition, examples)
    synset.satellite = ss_type == "s"
    at, pointers = 5 + 2 * count, int(fields[4 + 2 * count])
    if len(fields) < at + 4 * pointers:
        raise DataFormatError(path, f"expected {pointers} pointers of 4 fields", line=number)
    for symbol, target, pos, source_target in zip(*[iter(fields[at : at + 4 * pointers])] * 4, strict=True):
        if pos not in POINTER_FILES or not target.isdigit() or len(source_target) != 4:
            raise DataFormatError(path, f"bad pointer {symbol} {target} {pos} {source_target}", line=number)
        if symbol == ANTONYM:
            synset.antonyms.append((POINTER_FILES[pos], target))
        elif symbol == SIMILAR:
            synset.similar.append((POINTER_FILES[pos], target))
    return synset


def antonym_words(synset: Synset, synsets: dict[SynsetKey, Synset]) -> list[str]:
    """The antonyms of the lemmas of `synset`: the words of the synsets its antonym pointers name (WordNet points
    from one lemma, *coldness* to *hotness*; its synonyms in that sense, *cold*, share the opposition) and, for a
    head adjective there, its satellites (WordNet's indirect antonyms: *frigid* for *hot*); a satellite adjective
    takes its head's (*doomed* for the *happy* of "marked by good fortune", a satellite of *fortunate*)."""
    pointers = list(synset.antonyms)
    if synset.satellite:
        heads = (synsets[key] for key in synset.similar if key in synsets)
        pointers += [target for head in heads for target in head.antonyms]
    words: dict[str, None] = {}
    for key in pointers:
        if (target := synsets.get(key)) is None:
            continue
        words.update(dict.fromkeys(target.lemmas))
        if not target.satellite:
            for similar in target.similar:
                if similar in synsets:
                    words.update(dict.fromkeys(synsets[similar].lemmas))
    return list(words)


def similar_words(synset: Synset, synsets: dict[SynsetKey, Synset]) -> list[str]:
    """The words WordNet lists as similar to `synset` without sharing it: a head adjective's satellites (*lovely*,
    *gorgeous* for *beautiful*), a satellite's head."""
    words = (lemma for key in synset.similar if key in synsets for lemma in synsets[key].lemmas)
    return list(dict.fromkeys(words))


def read_synsets(path: Path, encoding: str = "utf-8") -> list[Synset]:
    """Every synset of one `data.*` file (licence header lines, starting with two spaces, skipped)."""
    return [
        parse_data_line(line, path, number)
        for number, line in enumerate(read_lines(path, encoding), start=1)
        if line.strip() and not line.startswith("  ")
    ]


def index_lemma(headword: str) -> str:
    """A headword as the `index.*` files and sense keys spell it: lower case, `_` for spaces."""
    return headword.lower().replace(" ", "_")


def read_sense_numbers(path: Path, name: str, encoding: str = "utf-8") -> dict[str, list[str]]:
    """Lemma -> synset offsets in sense-number order, from one `index.*` file, whose lines are
    `lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...`."""
    order: dict[str, list[str]] = {}
    for number, line in enumerate(read_lines(path, encoding), start=1):
        if not line.strip() or line.startswith("  "):
            continue
        fields = line.split()
        counts = fields[2:4]
        if len(fields) < 6 or fields[1] != INDEX_POS[name] or not all(c.isascii() and c.isdigit() for c in counts):
            raise DataFormatError(
                path, f"not a WordNet index line (expected 'lemma {INDEX_POS[name]} ...')", line=number
            )
        synsets, pointers = int(counts[0]), int(counts[1])
        offsets = fields[6 + pointers :]
        if len(offsets) != synsets or not all(o.isdigit() for o in offsets):
            raise DataFormatError(path, f"expected {pointers} pointers, 2 counts and {synsets} offsets", line=number)
        order[fields[0]] = offsets
    return order


def read_tag_counts(path: Path, encoding: str = "utf-8") -> dict[tuple[str, str, int], int]:
    """(lemma, data file name, sense number) -> times tagged in the semantic concordance, from `cntlist.rev`,
    whose lines are `sense_key sense_number tag_cnt` with the key `lemma%ss_type:...`."""
    counts: dict[tuple[str, str, int], int] = {}
    for number, line in enumerate(read_lines(path, encoding), start=1):
        if not line.strip():
            continue
        fields = line.split()
        lemma, _, rest = fields[0].partition("%")
        if (
            len(fields) != 3
            or not lemma
            or rest[:1] not in SENSE_KEY_FILES
            or not all(f.isascii() and f.isdigit() for f in fields[1:])
        ):
            raise DataFormatError(path, "expected 'sense_key sense_number tag_cnt'", line=number)
        counts[lemma, SENSE_KEY_FILES[rest[0]], int(fields[1])] = int(fields[2])
    return counts


@dataclass
class SenseOrder:
    """What orders an entry's senses: each part of speech's index (None: its file is missing) and the tag
    counts; `unlisted` counts the senses of entries with several that an index does not list under their
    lemma (they come after the listed ones of their part of speech, in data-file order)."""

    indexes: dict[str, dict[str, list[str]] | None]
    counts: dict[tuple[str, str, int], int]
    unlisted: int = 0

    def order(self, headword: str, senses: list[tuple[str, Synset]]) -> list[Synset]:
        """The synsets of `headword`, given as (data file name, synset) in file order, most frequent first
        (the rule of the module docstring)."""
        if len(senses) == 1:
            return [senses[0][1]]
        lemma = index_lemma(headword)
        by_file: dict[str, list[Synset]] = {}
        for name, synset in senses:
            by_file.setdefault(name, []).append(synset)
        runs = []
        for name in DATA_FILES:
            synsets = by_file.get(name)
            if not synsets:
                continue
            index = self.indexes.get(name)
            numbers = {offset: n for n, offset in enumerate(index.get(lemma, ()), start=1)} if index else {}
            if index is not None:
                self.unlisted += sum(s.offset not in numbers for s in synsets)
                synsets.sort(key=lambda s: numbers.get(s.offset, len(numbers) + 1))
            runs.append([(-self.counts.get((lemma, name, numbers.get(s.offset, 0)), 0), s) for s in synsets])
        if len(runs) == 1:
            return [synset for _, synset in runs[0]]
        return [synset for _, synset in heapq.merge(*runs, key=lambda pair: pair[0])]


def read_sense_order(folder: Path, encoding: str = "utf-8") -> SenseOrder:
    """The index files and tag counts of a WordNet folder. A missing one is logged (once, with the others):
    without `index.<pos>` that part of speech keeps data-file order, without `cntlist.rev` the parts of
    speech come one after another (noun, verb, adjective, adverb)."""
    indexes: dict[str, dict[str, list[str]] | None] = {}
    missing = []
    for name in DATA_FILES:
        path = folder / f"index.{name}"
        indexes[name] = read_sense_numbers(path, name, encoding) if path.exists() else None
        missing += [] if path.exists() else [path.name]
    count_path = folder / COUNT_FILE
    counts = read_tag_counts(count_path, encoding) if count_path.exists() else {}
    missing += [] if count_path.exists() else [COUNT_FILE]
    if missing:
        logger.warning("%s: no %s; senses are ordered without them (see load_wordnet)", folder, ", ".join(missing))
    return SenseOrder(indexes, counts)


def related_headwords(words: list[str], synonyms: set[str], lowercase: bool) -> list[str]:
    """`words` as headwords (lowercased when asked) but for a headword's `synonyms` (the lemmas of its own synsets,
    as headwords): never a word that shares a sense with it."""
    spelled = (word.lower() if lowercase else word for word in words)
    return [word for word in dict.fromkeys(spelled) if word not in synonyms]


@without_gc
def load_wordnet(wordnet_dir: str | Path | None = None, lowercase: bool = False, encoding: str = "utf-8") -> Dictionary:
    """WordNet 3.0 as a dictionary: one entry per lemma, one sense per synset it belongs to, most frequent
    sense first (WordNet's sense numbers, parts of speech interleaved by tag counts: see the module).

    Headwords keep the data files' spelling (`Mercury` and `mercury` are two entries) unless
    `lowercase`, which merges them (a synset listed twice under one lowercased lemma counts once).
    Satellite adjectives get pos 'a'. Each sense records its antonyms (`antonym_words`) and similar words
    (`similar_words`) but for words that share one of the headword's synsets (a headword may have an antonym that
    is its synonym in another sense). The folder is `wordnet_dir`, else $WNSEARCHDIR, else Debian's.
    Entries come in the order their headwords first appear in the data files. Missing `index.*` files or
    `cntlist.rev` are logged, and the senses they would order keep data-file order (`read_sense_order`).
    """
    folder = paths.wordnet_dir(wordnet_dir)
    builder = DictionaryBuilder("wordnet", unite_repeats=False)
    seen: set[tuple[str, str, str]] = set()
    senses: dict[str, list[tuple[str, Synset]]] = {}
    synsets: dict[SynsetKey, Synset] = {}
    for name in DATA_FILES:
        path = folder / f"data.{name}"
        if not path.exists():
            raise DataFormatError(path, "WordNet data file missing")
        for synset in read_synsets(path, encoding):
            synsets[name, synset.offset] = synset
            for lemma in synset.lemmas:
                headword = lemma.lower() if lowercase else lemma
                key = (headword, synset.offset, name)
                if key in seen:
                    builder.report.repeated_definitions += 1
                    continue
                seen.add(key)
                senses.setdefault(headword, []).append((name, synset))
    order = read_sense_order(folder, encoding)
    for headword, found in senses.items():
        synonyms = {lemma.lower() if lowercase else lemma for _, synset in found for lemma in synset.lemmas}
        for synset in order.order(headword, found):
            antonyms = related_headwords(antonym_words(synset, synsets), synonyms, lowercase)
            similar = related_headwords(similar_words(synset, synsets), synonyms, lowercase)
            builder.add(headword, synset.definition, synset.examples, synset.pos, antonyms=antonyms, similar=similar)
    if order.unlisted:
        logger.warning("%s: %d senses are not in the index under their lemma; they come last", folder, order.unlisted)
    return builder.build()


def load_wordnet_examples(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """The WordNet-examples CSV (`LEMMA,DEFINITION,EXAMPLE,POS`, one row per example; 's' -> 'a')."""
    dictionary = load_table(
        path or paths.data_dir() / EXAMPLES_CSV,
        headword="LEMMA",
        definition="DEFINITION",
        example="EXAMPLE",
        pos="POS",
        fmt="csv",
        name="wordnet-examples",
        encoding=encoding,
    )
    for entry in dictionary:
        for sense in entry.senses:
            sense.pos = SYNSET_TYPES.get(sense.pos or "", sense.pos)
    return dictionary
