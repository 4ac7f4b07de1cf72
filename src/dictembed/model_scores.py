"""The model's own scores of a reverse dictionary: every entry scored by the logits it was trained with.

`ModelScores` is the part of `ReverseDictionary` that scores as the training objective does, one row per entry
(no grouping, no filters): `scores` (logits), `predict` (softmax probabilities) and `ranks` (the gold entry's rank,
for the evaluation). A matrix space is searched in numpy; its logits come from a torch space made on first use
(`logit_space`), so a search alone never imports torch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import numpy as np

from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.split import seeded_sample
from dictembed.errors import DictEmbedError
from dictembed.query_encoder import QueryEncoder, as_rows
from dictembed.search_index import top_indices
from dictembed.search_options import check_count, check_queries, query_list
from dictembed.search_space import SearchSpace
from dictembed.texts import check_batch_size, check_texts

if TYPE_CHECKING:
    import torch

    from dictembed.entry_space import EntrySpace

log = logging.getLogger(__name__)

CHUNK = 1024  # queries encoded (length-sorted) and scored at a time


class ModelScores:
    """Scores by the model's own logits over every entry, for a class that sets these attributes
    (`ReverseDictionary`): the query `encoder`, the entry `space`, the torch `_logit_space` (None: made from the
    space's arrays on first use) and the `_lock` that guards it."""

    encoder: QueryEncoder
    space: SearchSpace | EntrySpace
    _logit_space: EntrySpace | None
    _lock: threading.RLock

    @property
    def logit_space(self) -> EntrySpace:
        """The torch entry space whose logits are the model's own scores (made from the arrays on first use)."""
        with self._lock:
            if self._logit_space is None:
                from dictembed.entry_space import matrix_space

                self._logit_space = matrix_space(cast(SearchSpace, self.space)).freeze()
            return self._logit_space

    def _pooled(self, texts: list[str], batch_size: int, encode_batch: int | None = None) -> Iterator[np.ndarray]:
        """The pooled float32 vectors of `texts`, `batch_size` rows at a time, in order (encoded `CHUNK` at a time as
        length-sorted batches of `encode_batch`, default `batch_size`; scored a batch at a time, as scores span
        every entry)."""
        for vectors in self.encoder.embed(texts, encode_batch or batch_size, show_progress=False, chunk=CHUNK):
            rows = as_rows(vectors)
            for start in range(0, len(rows), batch_size):
                yield rows[start : start + batch_size]

    def _logits(self, h: np.ndarray) -> torch.Tensor:
        """The model's own logits [batch, n_entries] (float32, on the encoder's device) of pooled vectors `h`."""
        import torch

        device = self.encoder.device
        with torch.no_grad():
            return self.logit_space.to(device)(torch.from_numpy(h).to(device)).float()

    def scores(self, definitions: list[str], batch_size: int = 64) -> np.ndarray:
        """Entry scores [n_definitions, n_entries] (unnormalised logits)."""
        definitions = query_list(definitions, "scores")
        check_texts(definitions, "query", 1)
        batch_size = check_batch_size(batch_size)
        out = [self._logits(h).cpu().numpy() for h in self._pooled(definitions, batch_size)]
        return np.concatenate(out) if out else np.zeros((0, len(self.space)), dtype=np.float32)

    def predict(self, definition: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The top-k entries for one definition with their softmax probabilities."""
        check_queries([definition])
        check_count("top_k", top_k)
        logits = self.scores([definition])[0].astype(np.float64)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        top = top_indices(probs, None, min(top_k, len(probs)))
        return [(self.space.words[i], float(probs[i])) for i in top]

    def ranks(self, dictionary: Dictionary, limit: int | None = None, seed: int = 0) -> np.ndarray:
        """1-based rank of the gold entry for each definition of `dictionary` whose headword is an entry (the others
        are counted in a warning), of a seeded sample of `limit` of them (None: all)."""
        from dictembed.evaluation.ranking import ranks_from_scores

        check_count("limit", limit, none=True)
        check_count("seed", seed, low=0)
        if not isinstance(dictionary, Dictionary):
            raise DictEmbedError(
                f"ranks: a Dictionary (dictembed.dictionary.load_dictionary), not {type(dictionary).__name__}"
            )
        every = list(dictionary.pairs())
        known = [(w, d) for w, d in every if w in self.space.index]
        if len(known) < len(every):
            log.warning(
                "ranks: %d of %d definitions skipped: their headword is no entry", len(every) - len(known), len(every)
            )
        pairs = seeded_sample(known, limit, seed)
        ranks = [np.zeros(0)]
        for start in range(0, len(pairs), 512):  # 512 rows of scores over every entry at a time
            chunk = pairs[start : start + 512]
            gold = np.array([self.space.index[w] for w, _ in chunk])
            ranks.append(ranks_from_scores(self.scores([d for _, d in chunk]), gold))
        return np.concatenate(ranks)
