"""Reverse dictionary: rank the entries of a saved entry space for a definition (definition -> words)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.split import seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace


class ReverseDictionary:
    """An encoder and the entry space it was trained against."""

    def __init__(self, encoder: Encoder, space: EntrySpace) -> None:
        self.encoder = encoder
        self.space = space.freeze()

    @classmethod
    def load(cls, path: str | Path) -> ReverseDictionary:
        return cls(Encoder.load(str(path)), EntrySpace.load(path))

    @torch.no_grad()
    def scores(self, definitions: list[str], batch_size: int = 64) -> np.ndarray:
        """Entry scores [n_definitions, n_entries] (unnormalised logits)."""
        self.encoder.eval()
        space = self.space.to(self.encoder.device)
        out = []
        for start in range(0, len(definitions), batch_size):
            h = self.encoder(self.encoder.tokenize(definitions[start : start + batch_size]))
            out.append(space(h).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, len(space)), dtype=np.float32)

    def predict(self, definition: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The top-k entries for one definition with their softmax probabilities."""
        logits = torch.from_numpy(self.scores([definition])[0])
        probs = logits.softmax(-1)
        top = probs.topk(min(top_k, len(probs)))
        return [(self.space.words[i], float(p)) for p, i in zip(top.values, top.indices, strict=True)]

    def ranks(self, dictionary: Dictionary, limit: int | None = None, seed: int = 0) -> np.ndarray:
        """1-based rank of the gold entry for each definition of `dictionary` whose headword is an entry."""
        from dictembed.evaluation.reverse_dictionary import ranks_from_scores

        pairs = seeded_sample([(w, d) for w, d in dictionary.pairs() if w in self.space.index], limit, seed)
        ranks = [np.zeros(0)]
        for start in range(0, len(pairs), 512):  # 512 rows of scores over every entry at a time
            chunk = pairs[start : start + 512]
            gold = np.array([self.space.index[w] for w, _ in chunk])
            ranks.append(ranks_from_scores(self.scores([d for _, d in chunk]), gold))
        return np.concatenate(ranks)
