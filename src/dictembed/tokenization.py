"""Sentences to model inputs: padding to the longest in the batch, truncation at the model's window, and a count
of the sentences that truncation cut (so that a run can say how many it shortened)."""

from __future__ import annotations

from collections.abc import Sequence

from transformers import BatchEncoding, PreTrainedTokenizerBase


def tokenize_counting_cuts(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int
) -> tuple[BatchEncoding, int]:
    """`texts` tokenized as torch tensors (dynamic padding, truncation at `max_length`), and how many were cut."""
    encoded = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    full = (encoded["attention_mask"].sum(1) >= max_length).nonzero().flatten().tolist()
    if not full:  # only rows that fill the window can have been cut
        return encoded, 0
    if encoded.encodings:  # a fast tokenizer kept their overflow
        return encoded, sum(bool(encoded.encodings[i].overflowing) for i in full)
    ids = tokenizer([texts[i] for i in full], truncation=False)["input_ids"]
    return encoded, sum(len(row) > max_length for row in ids)
