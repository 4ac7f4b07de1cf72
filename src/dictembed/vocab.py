"""Which words a tokenizer spells as exactly one vocabulary token, as they appear mid-sentence.

DefSent predicts a headword from its definition through the masked-language-model head, so it
only trains on headwords that are a single token. Mid-sentence, a WordPiece (BERT) word is
tokenized alone (`bank`), while a byte-level BPE (RoBERTa, GPT-2) word carries its leading space
(`Ġbank`). The style is detected from the tokenizer's behaviour, never from the model name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenizers import Tokenizer

BATCH = 10_000


def leading_space_matters(tokenizer: Any) -> bool:
    """True when a leading space changes the tokens (byte-level BPE: " a" -> `Ġa`, "a" -> `a`).

    WordPiece drops the space and SentencePiece already marks every word start (`▁a`), so for
    them a word is tokenized as written.
    """
    return tokenizer.tokenize(" a") != tokenizer.tokenize("a")


def _plain_backend(tokenizer: Any) -> Tokenizer | None:
    """A copy of a fast tokenizer's Rust backend with truncation and padding off (None if slow)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not isinstance(backend, Tokenizer):
        return None
    if backend.truncation is None and backend.padding is None:
        return backend
    backend = Tokenizer.from_str(backend.to_str())
    backend.no_truncation()
    backend.no_padding()
    return backend


def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text without special tokens, untruncated, in batches of 10,000.

    Long lists go straight through the Rust backend of a fast tokenizer (about twice as fast as
    calling the tokenizer); short ones, and slow tokenizers, through the ordinary call.
    """
    backend = _plain_backend(tokenizer) if len(texts) > 100 else None
    encoded: list[list[int]] = []
    for start in range(0, len(texts), BATCH):
        batch = list(texts[start : start + BATCH])
        if backend is not None:
            encoded.extend(e.ids for e in backend.encode_batch(batch, add_special_tokens=False))
        elif batch:
            encoded.extend(tokenizer(batch, add_special_tokens=False, truncation=False)["input_ids"])
    return encoded


def word_token_ids(tokenizer: Any, words: Sequence[str]) -> list[int | None]:
    """`word_token_id` for many words at once."""
    prefix = " " if leading_space_matters(tokenizer) else ""
    unknown = getattr(tokenizer, "unk_token_id", None)
    encoded = encode_texts(tokenizer, [prefix + w for w in words])
    return [
        int(ids[0]) if len(ids) == 1 and ids[0] != unknown and word.strip() else None
        for word, ids in zip(words, encoded, strict=True)
    ]


def word_token_id(tokenizer: Any, word: str) -> int | None:
    """The id of the single token that spells `word` mid-sentence, or None when it takes several
    tokens, none, or only the unknown token."""
    return word_token_ids(tokenizer, [word])[0]


def single_token_words(words: list[str], tokenizer: Any) -> tuple[list[str], list[int]]:
    """The words that are exactly one token of `tokenizer`, with their token ids (first spelling wins)."""
    kept, ids, seen = [], [], set()
    for w, tid in zip(words, word_token_ids(tokenizer, words), strict=True):
        if tid is not None and tid not in seen:
            seen.add(tid)
            kept.append(w)
            ids.append(tid)
    return kept, ids
