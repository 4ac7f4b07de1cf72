"""A second dictionary's definitions of an entry space's words (GCIDE beside WordNet), which the reverse dictionary's
score reads (`search_options.Ranking.second_dictionary_weight`): a description worded as another dictionary words
its answer finds it there. Each definition is encoded as the entry space's own are (by the frozen encoder that
built it, AMP or AC, in the one entry-space cache: `recipes.defsent_plus.second_definitions`) and saved in
`entry_space/second.safetensors`: `counts`, the second dictionary's definitions of each entry (0 for a word it
lacks), and `definitions`, their float16 vectors, entry by entry in the space's order. The candidates stay the
entry space's words; the second dictionary adds none."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from dictembed.dictionary.core import Dictionary
from dictembed.errors import DictEmbedError
from dictembed.io import with_umask
from dictembed.model_folder import SECOND_TENSORS, SPACE_DIR

GCIDE = "gcide"  # the `best` preset's second dictionary for English entry spaces


def second_choice(spec: str) -> str:
    """A `--second-dictionary` value as a run keeps it: "" for none (`none`, any case), else `spec` as given."""
    return "" if spec.strip().lower() in ("", "none") else spec


@dataclass
class SecondDefinitions:
    """The second dictionary `name`'s definition vectors of an entry space's words: `counts[i]` rows of
    `definitions` [rows, dim] (float16) for entry i, one entry after another."""

    name: str
    counts: np.ndarray
    definitions: np.ndarray

    def __post_init__(self) -> None:
        problem = second_problem(self.counts, self.definitions, len(self.counts), self.definitions.shape[-1])
        if problem:
            raise DictEmbedError(f"the second dictionary {self.name}: {problem}")

    @cached_property
    def first(self) -> np.ndarray:
        """The row where each entry's definitions start."""
        return np.cumsum(self.counts) - self.counts

    def fingerprint(self) -> str:
        """A hash of the name, counts and vectors: a run saved with other second definitions is not reused."""
        digest = hashlib.sha1(self.name.encode())
        digest.update(np.ascontiguousarray(self.counts, dtype=np.int64).tobytes())
        digest.update(np.ascontiguousarray(self.definitions, dtype=np.float16).tobytes())
        return digest.hexdigest()[:16]

    def save(self, model_dir: str | Path) -> Path:
        """Write `model_dir/entry_space/second.safetensors` (the entry space's folder, saved before)."""
        import torch
        from safetensors.torch import save_file

        path = Path(model_dir) / SPACE_DIR / SECOND_TENSORS
        tensors = {  # copies: the arrays may be read-only maps of another folder's file (a distilled teacher's)
            "counts": torch.from_numpy(np.array(self.counts, dtype=np.int64)),
            "definitions": torch.from_numpy(np.array(self.definitions, dtype=np.float16)),
        }
        save_file(tensors, str(path), metadata={"dictionary": json.dumps(self.name)})
        with_umask(path)  # safetensors writes 0600
        return path


def second_problem(counts: np.ndarray, definitions: np.ndarray, entries: int, dim: int) -> str | None:
    """What makes saved second-dictionary tensors unusable for a space of `entries` entries of `dim` dimensions,
    or None."""
    if counts.ndim != 1 or counts.shape[0] != entries or counts.dtype != np.int64:
        return f"{entries} entries need as many int64 counts, got {counts.shape} {counts.dtype}"
    if len(counts) and (counts.min() < 0 or counts.max() > definitions.shape[0]):
        return "a count below 0 or above the definitions' rows"
    if definitions.ndim != 2 or definitions.shape != (int(counts.sum()), dim) or definitions.dtype.kind != "f":
        return f"{definitions.shape} definition vectors do not fit the counts and the space's {dim} dimensions"
    return None


def matched(second: Dictionary, words: list[str]) -> Dictionary:
    """The senses of `second` under the entry `words` they define, in the words' order: a headword spelt as the
    word, else those equal to it in lower case (GCIDE's *Giraffe* defines *giraffe*); words it lacks are left out."""
    exact = {entry.headword: entry for entry in second}
    folded: dict[str, list] = {}
    for entry in second:
        folded.setdefault(entry.headword.lower(), []).append(entry)
    chosen = Dictionary(name=f"{second.name}:matched")
    for word in words:
        for entry in [exact[word]] if word in exact else folded.get(word.lower(), []):
            for sense in dict.fromkeys(s.definition for s in entry.senses):
                chosen.add(word, sense)
    return chosen
