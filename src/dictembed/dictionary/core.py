"""The one dictionary type: headword -> senses (definition, examples, part of speech, antonyms, similar words)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass
class Sense:
    """One definition of a headword, with its example sentences, part of speech, antonyms (the headwords whose
    meaning is the opposite of this sense's) and similar words (the headwords of a meaning close to this sense's
    that do not share it), as the source records them."""

    definition: str
    examples: list[str] = field(default_factory=list)
    pos: str | None = None
    antonyms: tuple[str, ...] = ()
    similar: tuple[str, ...] = ()


RELATIONS = ("antonyms", "similar")  # the fields of a sense that name other headwords


def united(kept: tuple[str, ...], more: Iterable[str]) -> tuple[str, ...]:
    """`kept` followed by the words of `more` it lacks, in order (a sense's antonyms or similar words with a
    repeat's)."""
    return tuple(dict.fromkeys((*kept, *more)))


@dataclass
class Entry:
    """A headword and its senses, in source order."""

    headword: str
    senses: list[Sense] = field(default_factory=list)

    @property
    def definitions(self) -> list[str]:
        return [s.definition for s in self.senses]


class Dictionary:
    """An ordered mapping headword -> Entry, with the name of the source(s) it came from."""

    def __init__(self, entries: Iterable[Entry] = (), name: str = "dictionary") -> None:
        self.name = name
        self._entries: dict[str, Entry] = {}
        for entry in entries:
            self.add_entry(entry)

    def add(
        self,
        headword: str,
        definition: str,
        examples: Iterable[str] = (),
        pos: str | None = None,
        antonyms: Iterable[str] = (),
        similar: Iterable[str] = (),
    ) -> Sense:
        """Add one sense to `headword`, creating the entry if needed; returns the new sense."""
        entry = self._entries.get(headword)
        if entry is None:
            entry = self._entries[headword] = Entry(headword)
        sense = Sense(definition, list(examples), pos, tuple(antonyms), tuple(similar))
        entry.senses.append(sense)
        return sense

    def add_entry(self, entry: Entry) -> None:
        """Add all senses of `entry` (appending to an existing headword)."""
        for sense in entry.senses:
            self.add(entry.headword, sense.definition, sense.examples, sense.pos, sense.antonyms, sense.similar)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def __contains__(self, headword: object) -> bool:
        return headword in self._entries

    def __getitem__(self, headword: str) -> Entry:
        return self._entries[headword]

    @property
    def headwords(self) -> list[str]:
        return list(self._entries)

    def num_definitions(self) -> int:
        return sum(len(e.senses) for e in self)

    def records(self, relation: str) -> bool:
        """Whether any sense records a word in `relation` (one of `RELATIONS`)."""
        return any(getattr(s, relation) for e in self for s in e.senses)

    def pairs(self) -> list[tuple[str, str]]:
        """Every (headword, definition) pair, the unit DefSent trains on."""
        return [(e.headword, s.definition) for e in self for s in e.senses]

    def subset(self, headwords: Iterable[str], name: str | None = None) -> Dictionary:
        """A new dictionary holding only `headwords` (those present), in this dictionary's order."""
        keep = set(headwords)
        return Dictionary((e for e in self if e.headword in keep), name or self.name)

    def __repr__(self) -> str:
        return f"Dictionary({self.name!r}, {len(self)} headwords, {self.num_definitions()} definitions)"
