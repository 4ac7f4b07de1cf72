"""A query adapter, measured: a linear map W (384 x 384 for MiniLM) applied to the query vector before the search,
trained on the shipped corpus's descriptions to move a description toward its word's entry (softmax over every
entry at the model's temperature, W pulled toward the identity by `--decay` x ||W - I||^2), the encoder and the
entry space frozen. A global change of register ("the thing you use to ..." against "an implement for ...") could
carry to words the corpus never describes, where a memory of its descriptions cannot (`description_memory.py`).

    python experiments/query_adapter.py outputs/minilm-defsent-plus --decays 0,1,10 --split dev

Chosen on corpus words held out of the adapter's training (word-disjoint, `--held-out`) by acc@10 of the cosine
alone, then ranked as `published_terms.py` ranks (the default ranking, all entries and the 66k most frequent single
words) on the benchmark's `--split`, whose words the corpus never describes.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import numpy as np
import torch
from published_terms import DATA, encode, frequent_single_words, gold_forms, hint_filters, rank_of, summary

from dictembed.description_corpus import load_descriptions
from dictembed.evaluation.descriptions import load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary


class Adapted:
    """A query encoder whose pooled vectors go through `matrix` (then to unit length), otherwise `encoder`."""

    def __init__(self, encoder: Any, matrix: np.ndarray) -> None:
        self.encoder, self.matrix = encoder, matrix

    def __getattr__(self, name: str) -> Any:
        return getattr(self.encoder, name)

    def embed(self, texts: Any, *args: Any, **kwargs: Any) -> Any:
        for vectors in self.encoder.embed(texts, *args, **kwargs):
            moved = np.asarray(vectors, dtype=np.float32) @ self.matrix
            yield moved / np.linalg.norm(moved, axis=1, keepdims=True)


def train(
    queries: torch.Tensor, targets: torch.Tensor, entries: torch.Tensor, decay: float, epochs: int, seed: int
) -> torch.Tensor:
    """W trained from the identity: cross-entropy of each query's softmax over `entries` (cosine / 0.05)."""
    generator = torch.Generator().manual_seed(seed)
    eye = torch.eye(queries.shape[1])
    matrix = torch.nn.Parameter(eye.clone())
    optimizer = torch.optim.Adam([matrix], lr=1e-3)
    for _ in range(epochs):
        for batch in torch.randperm(len(queries), generator=generator).split(512):
            moved = torch.nn.functional.normalize(queries[batch] @ matrix, dim=-1)
            loss = torch.nn.functional.cross_entropy(moved @ entries.T / 0.05, targets[batch])
            loss = loss + decay * ((matrix - eye) ** 2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return matrix.detach()


def accuracy_at(queries: torch.Tensor, targets: torch.Tensor, entries: torch.Tensor, matrix: torch.Tensor) -> float:
    """acc@10 of the cosine alone over every entry."""
    with torch.no_grad():
        moved = torch.nn.functional.normalize(queries @ matrix, dim=-1)
        top = (moved @ entries.T).topk(10, dim=-1).indices
    return float((top == targets[:, None]).any(dim=-1).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder")
    parser.add_argument("--decays", default="0,1,10", help="weights of ||W - I||^2, one adapter each")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--held-out", type=float, default=0.15, help="the share of corpus words held out")
    parser.add_argument("--split", default="dev", help="the benchmark split ranked with the chosen adapter")
    parser.add_argument("--vocabulary", type=int, default=66_421)
    args = parser.parse_args()
    torch.manual_seed(0)

    rd = ReverseDictionary.load(args.model).prepare()
    space = rd.space
    entries = torch.nn.functional.normalize(torch.from_numpy(np.asarray(space.matrix, dtype=np.float32)), dim=-1)
    corpus = [d for d in load_descriptions("everyday") if d.word in space.index]
    words = sorted({d.word for d in corpus})
    held = set(random.Random(0).sample(words, int(args.held_out * len(words))))
    began = time.monotonic()
    vectors = torch.from_numpy(encode(rd, [d.text for d in corpus]))
    targets = torch.tensor([space.index[d.word] for d in corpus])
    kept = torch.tensor([d.word not in held for d in corpus])
    print(f"{len(corpus):,} descriptions of {len(words):,} words encoded in {time.monotonic() - began:.0f} s")
    identity = torch.eye(vectors.shape[1])
    base = accuracy_at(vectors[~kept], targets[~kept], entries, identity)
    print(f"held-out corpus words, cosine alone: acc@10 {base:.3f} without an adapter")
    best, best_accuracy = identity, base
    for decay in (float(x) for x in args.decays.split(",")):
        matrix = train(vectors[kept], targets[kept], entries, decay, args.epochs, seed=0)
        accuracy = accuracy_at(vectors[~kept], targets[~kept], entries, matrix)
        change = float(torch.linalg.matrix_norm(matrix - identity))
        print(f"  decay {decay:g}: acc@10 {accuracy:.3f}, ||W - I|| {change:.2f}")
        if accuracy > best_accuracy:
            best, best_accuracy = matrix, accuracy

    pairs = load_description_pairs(DATA, split=args.split)
    vocabulary, _ = frequent_single_words(space.words, args.vocabulary)
    for name, matrix in (("without", identity), ("with the best adapter", best)):
        rd.encoder = Adapted(rd.encoder.encoder if isinstance(rd.encoder, Adapted) else rd.encoder, matrix.numpy())
        every = summary([rank_of(rd, q, gold_forms(e), None, 1000, None) for q, e in pairs])
        top = summary([rank_of(rd, q, gold_forms(e), hint_filters(e, "none"), 1000, vocabulary) for q, e in pairs])
        print(
            f"{args.split} {name}: all entries "
            + " ".join(f"{k} {every[k]:.3f}" for k in ("median", "acc@1", "acc@10", "acc@100"))
            + " | 66k "
            + " ".join(f"{k} {top[k]:.3f}" for k in ("median", "acc@1", "acc@10", "acc@100"))
        )


if __name__ == "__main__":
    main()
