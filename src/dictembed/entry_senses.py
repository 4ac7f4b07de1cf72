"""The senses a search shows, entry by entry of a space: each entry's definitions and parts of speech in the
dictionary's order, kept as arrays (`starts`, `offsets`, the UTF-8 `text`, `pos` codes) that a saved search index
maps instead of parsing the dictionary (200,000 definitions parse in about 7 s; mapped, a search reads ten)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from dictembed.dictionary.core import RELATIONS
from dictembed.entry_relations import EntryRelation
from dictembed.search_options import normalize_pos
from dictembed.search_space import ranges_fit

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary

NO_POS = -1


@dataclass
class EntrySenses:
    """Entry i's senses are rows `starts[i]:starts[i + 1]`; row r's definition is `text[offsets[r]:offsets[r + 1]]`
    (UTF-8) and its part of speech `pos_names[pos[r]]` (`NO_POS`: none). An entry of no sense is a word the
    dictionary does not hold. `antonyms`, `similar`: the entries' antonyms and similar words (`entry_relations`;
    None: the dictionary records none)."""

    starts: np.ndarray  # int64 [entries + 1]
    offsets: np.ndarray  # int64 [senses + 1]
    text: np.ndarray  # uint8 [bytes]
    pos: np.ndarray  # int16 [senses]
    pos_names: list[str]
    antonyms: EntryRelation | None = None
    similar: EntryRelation | None = None

    @classmethod
    def of(cls, words: Sequence[str], dictionary: Dictionary) -> EntrySenses:
        """The senses of `words` in `dictionary` (none for a word it does not hold)."""
        starts, offsets, chunks, codes = [0], [0], [], []
        names: dict[str, int] = {}
        size = 0
        for word in words:
            senses = dictionary[word].senses if word in dictionary else []
            for sense in senses:
                data = sense.definition.encode("utf-8")
                chunks.append(data)
                size += len(data)
                offsets.append(size)
                codes.append(NO_POS if sense.pos is None else names.setdefault(sense.pos, len(names)))
            starts.append(len(offsets) - 1)
        related = any(dictionary.records(relation) for relation in RELATIONS)
        index = {word: i for i, word in enumerate(words)} if related else None  # one look-up for every relation
        return cls(
            np.asarray(starts, dtype=np.int64),
            np.asarray(offsets, dtype=np.int64),
            np.frombuffer(b"".join(chunks), dtype=np.uint8),
            np.asarray(codes, dtype=np.int16),
            list(names),
            *(EntryRelation.of(words, dictionary, relation, index) for relation in RELATIONS),
        )

    def __len__(self) -> int:
        return len(self.starts) - 1

    def check(self) -> str | None:
        """What makes the arrays inconsistent (a damaged index), or None."""
        starts, offsets = self.starts, self.offsets
        if starts.ndim != 1 or offsets.ndim != 1 or len(starts) < 1 or len(offsets) < 1:
            return "the sense arrays are not lists"
        if not ranges_fit(starts, len(offsets) - 1):
            return "the entries' sense ranges do not fit the senses"
        if not ranges_fit(offsets, len(self.text)):
            return "the definitions' byte ranges do not fit the text"
        codes = self.pos
        if len(codes) != len(offsets) - 1 or (
            len(codes) and not NO_POS <= codes.min() <= codes.max() < len(self.pos_names)
        ):
            return "the parts of speech do not fit the senses"
        for name, relation in (("antonyms", self.antonyms), ("similar words", self.similar)):
            if relation is not None and (problem := relation.check(len(self))):
                return f"its {name} {problem}"
        return None

    def senses(self, entry: int) -> list[tuple[str, str | None]]:
        """Entry `entry`'s (definition, part of speech) pairs, in the dictionary's order."""
        rows = range(int(self.starts[entry]), int(self.starts[entry + 1]))
        text, offsets = self.text, self.offsets
        return [
            (
                bytes(text[offsets[r] : offsets[r + 1]]).decode("utf-8", errors="replace"),
                None if self.pos[r] == NO_POS else self.pos_names[self.pos[r]],
            )
            for r in rows
        ]

    def holds(self, entry: int) -> bool:
        """Whether the dictionary holds the entry's word (it has a sense)."""
        return bool(self.starts[entry + 1] > self.starts[entry])

    @cached_property
    def has_pos(self) -> bool:
        """Whether any sense records a part of speech."""
        return bool((np.asarray(self.pos) != NO_POS).any())

    def with_pos(self, tag: str) -> np.ndarray:
        """Entry mask of the entries with a sense of part of speech `tag` (as `normalize_pos` writes it)."""
        matching = np.asarray([normalize_pos(name) == tag for name in self.pos_names] + [False], dtype=bool)
        per_sense = matching[np.asarray(self.pos)]  # NO_POS reads the last, False
        running = np.concatenate([[0], np.cumsum(per_sense, dtype=np.int64)])
        return running[self.starts[1:]] > running[self.starts[:-1]]
