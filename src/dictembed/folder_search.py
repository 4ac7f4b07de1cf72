"""What a saved model folder brings to a search, opened: its entry space (a matrix space memory-mapped, else the torch
space of an MLM head), its `SearchIndex` (stored, or built and cached) and its own ranking (the record's `ranking`
with the settings a caller gives set over it). `ReverseDictionary.load` and the server's folders that share one
encoder open a folder through these."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dictembed.errors import DictEmbedError
from dictembed.model_folder import SPACE_DIR, SPACE_META, ModelDictionary, ModelFolder
from dictembed.search_index import SearchIndex, folder_search_index
from dictembed.search_options import Ranking, RankingChoice, ranking_over
from dictembed.search_space import MATRIX_SPACES, SearchSpace

if TYPE_CHECKING:
    from dictembed.entry_space import EntrySpace


def folder_ranking(folder: ModelFolder, given: RankingChoice = None) -> Ranking:
    """The ranking `folder` is searched with: its record's own settings with `given` set over them
    (`search_options.ranking_over`); a bad saved one is a one-line error naming the folder."""
    return ranking_over(folder.record.ranking, given, f"model folder {folder.path}")


def saved_space(folder: ModelFolder, source: ModelDictionary) -> tuple[EntrySpace | SearchSpace, SearchIndex | None]:
    """A folder's saved entry space: a matrix space memory-mapped with its `SearchIndex` (built and cached for a
    folder without one), else the torch space (an MLM head)."""
    space = opened_space(folder)
    return space, space_index(folder, space, source)


def check_has_space(folder: ModelFolder) -> None:
    """Refuse a folder without a saved entry space (a GR-BERT model, a plain encoder), saying how to make one."""
    if not (folder.path / SPACE_DIR / SPACE_META).is_file():
        raise DictEmbedError(
            f"{folder.path} holds no saved entry space ({SPACE_DIR}/{SPACE_META} missing), which a reverse dictionary "
            f"searches; make a folder with one: dictembed index --model {folder.path} --dictionary wordnet --output DIR"
        )


def opened_space(folder: ModelFolder) -> EntrySpace | SearchSpace:
    """A folder's saved entry space, checked and opened: a matrix space memory-mapped, else the torch space."""
    if SearchSpace.saved_type(folder.path) in MATRIX_SPACES:
        return SearchSpace.open(folder.path)
    from dictembed.saved_entry_space import load_entry_space

    return load_entry_space(folder.path)


def space_index(folder: ModelFolder, space: EntrySpace | SearchSpace, source: ModelDictionary) -> SearchIndex | None:
    """The `SearchIndex` of a matrix space opened from `folder` (stored, or built and cached), None for an MLM head."""
    return folder_search_index(folder, space, source) if isinstance(space, SearchSpace) else None
