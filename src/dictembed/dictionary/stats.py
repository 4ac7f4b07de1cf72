"""Dataset statistics in the manner of DefSent's Table 1: words, definitions, mean definition length; and the
senses that name antonyms or similar words, where the dictionary records them."""

from __future__ import annotations

from typing import Any

import numpy as np

from dictembed.dictionary.core import RELATIONS, Dictionary
from dictembed.vocab import encode_texts, word_token_ids

COLUMNS = {
    "split": "split",
    "words": "words",
    "definitions": "definitions",
    "avg_length": "avg. length",
    "antonyms": "senses w/ antonyms",
    "similar": "senses w/ similar",
    "words_filtered": "words (1-token)",
    "definitions_filtered": "definitions (1-token)",
    "avg_length_filtered": "avg. length (1-token)",
}


def definition_lengths(dictionary: Dictionary, tokenizer: Any = None) -> list[int]:
    """Length of every definition: whitespace tokens, or the tokenizer's tokens (no special tokens)."""
    definitions = [d for _, d in dictionary.pairs()]
    if tokenizer is None:
        return [len(d.split()) for d in definitions]
    return [len(ids) for ids in encode_texts(tokenizer, definitions)]


def _mean(values: list[int]) -> float:
    return float(np.mean(values)) if values else 0.0


def split_stats(dictionary: Dictionary, tokenizer: Any = None) -> dict[str, Any]:
    """Words, definitions and mean definition length, before and (with a tokenizer) after the
    single-token filter (definitions are tokenized once for both); the senses naming antonyms and similar words
    where any sense does."""
    lengths = definition_lengths(dictionary, tokenizer)
    row: dict[str, Any] = {
        "words": len(dictionary),
        "definitions": len(lengths),
        "avg_length": _mean(lengths),
    }
    for relation in RELATIONS:  # a column only for a relation the dictionary records at all
        if count := sum(bool(getattr(s, relation)) for e in dictionary for s in e.senses):
            row[relation] = count
    if tokenizer is not None:
        kept = [token_id is not None for token_id in word_token_ids(tokenizer, dictionary.headwords)]
        per_sense = [keep for keep, entry in zip(kept, dictionary, strict=True) for _ in entry.senses]
        kept_lengths = [n for n, keep in zip(lengths, per_sense, strict=True) if keep]
        row["words_filtered"] = sum(kept)
        row["definitions_filtered"] = len(kept_lengths)
        row["avg_length_filtered"] = _mean(kept_lengths)
    return row


def dictionary_stats(splits: dict[str, Dictionary], tokenizer: Any = None) -> list[dict]:
    """One row per split (DefSent's Table 1): words, definitions and mean definition length (in
    whitespace tokens, or in the tokenizer's tokens when one is given); with a tokenizer the same
    three figures follow for the entries kept by `single_token_filter`."""
    rows = [{"split": split, **split_stats(dictionary, tokenizer)} for split, dictionary in splits.items()]
    for relation in RELATIONS:  # a split without the relation that another split records counts 0
        if any(relation in row for row in rows):
            for row in rows:
                row.setdefault(relation, 0)
    return rows


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


def format_stats_table(rows: list[dict]) -> str:
    """A plain-text table of `dictionary_stats` rows (columns aligned, numbers right-aligned)."""
    if not rows:
        return ""
    keys = [k for k in COLUMNS if any(k in row for row in rows)]
    cells = [[COLUMNS[k] for k in keys]] + [[_cell(row.get(k, "")) for k in keys] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    lines = []
    for n, line in enumerate(cells):
        text = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))]
        lines.append("  ".join(text).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
