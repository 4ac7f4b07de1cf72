"""The dictionary behind a reverse dictionary's results: loaded on first use, each entry's senses, and the stems the
lexical ranking terms read.

`ResultDictionary` is the part of `ReverseDictionary` that loads the dictionary a model folder names (or the one a
user gives in its place, with a count of the entries it does not define), and derives from it each entry's senses
(`EntrySenses`) and the stems of its words and definitions (`lexical_terms.StemSets`), from the stored
`SearchIndex` where it holds them.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dictembed.dictionary.core import Dictionary
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DataFormatError
from dictembed.lexical_terms import StemSets
from dictembed.model_folder import ModelDictionary
from dictembed.paths import public_name

if TYPE_CHECKING:
    from dictembed.entry_space import EntrySpace
    from dictembed.search_index import SearchIndex
    from dictembed.search_space import SearchSpace

log = logging.getLogger(__name__)


class ResultDictionary:
    """The dictionary of a class that sets the entry `space`, the dictionary's `source` and `dictionary_spec`, the
    state below and the `_lock` that guards it, and has an `index` (`ReverseDictionary`)."""

    space: SearchSpace | EntrySpace
    source: ModelDictionary | None
    dictionary_spec: str | None
    dictionary_error: str | None
    _dictionary: Dictionary | None
    _dictionary_tried: bool
    _index: SearchIndex | None
    _senses: EntrySenses | None
    _word_stems: StemSets | None
    _definition_stems: StemSets | None
    _lock: threading.RLock

    if TYPE_CHECKING:  # the host's

        @property
        def index(self) -> SearchIndex | None: ...

    @property
    def dictionary(self) -> Dictionary | None:
        """The model's dictionary, loaded on first use; None (and `dictionary_error` set) if it cannot be found or
        read (results then come without definitions). A file that is there but malformed (`DataFormatError`: the
        folder's own definitions, or the user's `dictionary`) is a one-line error naming its line, every time."""
        with self._lock:
            if not self._dictionary_tried:
                try:
                    self._dictionary = cast(ModelDictionary, self.source).load()
                    self._warn_undefined(self._dictionary)
                except Exception as err:  # best effort: results simply come without definitions
                    there = any(Path(part.strip()).is_file() for part in str(self.dictionary_spec).split(","))
                    if isinstance(err, DataFormatError) and there:
                        raise  # a file that is there but malformed
                    self.dictionary_error = f"cannot load dictionary {self.public_dictionary!r}"
                    spec = self.dictionary_spec
                    log.warning("cannot load dictionary %r: %s; results come without definitions", spec, err)
                self._dictionary_tried = True
            return self._dictionary

    def _warn_undefined(self, dictionary: Dictionary) -> None:
        """Warn, with the count, when entries of the space have no definition in `dictionary` (a dictionary given
        in place of the folder's own that is not the one it indexes): their results show no definition."""
        words = self.space.words
        missing = sum(word not in dictionary for word in words)
        if missing:
            log.warning(
                "%d of %d entries have no definition in %s (its results show none; the folder indexes another "
                "dictionary?)",
                missing,
                len(words),
                self.dictionary_spec,
            )

    @property
    def senses(self) -> EntrySenses | None:
        """Each entry's senses (`EntrySenses`): from the stored index, else from the dictionary (loaded on first
        use); None when the dictionary cannot be loaded."""
        with self._lock:
            if self._senses is None and (dictionary := self.dictionary) is not None:
                self._senses = EntrySenses.of(self.space.words, dictionary)
            return self._senses

    @property
    def word_stems(self) -> StemSets:
        """The stems of each entry's word (`lexical_terms.StemSets`): the stored index's, else computed once."""
        index = self.index
        with self._lock:
            if self._word_stems is None:
                stored = index.word_stems if index is not None else None
                self._word_stems = stored if stored is not None else StemSets.of(self.space.words)
            return self._word_stems

    @property
    def definition_stems(self) -> StemSets | None:
        """The stems of all of each entry's definitions: the stored index's when its senses are the ones shown,
        else computed once from `senses`; None without senses."""
        senses = self.senses
        with self._lock:
            if self._definition_stems is None and senses is not None:
                index = self._index
                stored = index.definition_stems if index is not None and index.senses is senses else None
                self._definition_stems = stored if stored is not None else StemSets.of_senses(senses)
            return self._definition_stems

    @property
    def has_definitions(self) -> bool:
        """Whether results carry definitions."""
        return self.senses is not None

    @property
    def public_dictionary(self) -> str | None:
        """The dictionary's name as a server may show it (`paths.public_name`)."""
        return public_name(self.dictionary_spec) if self.dictionary_spec else self.dictionary_spec
