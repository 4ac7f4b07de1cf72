"""`dictembed.vocab`: single-token words for WordPiece (MiniLM's BERT vocabulary) and byte-level BPE."""

from __future__ import annotations

import pytest
from tokenizers import ByteLevelBPETokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from dictembed.dictionary import Dictionary, single_token_filter
from dictembed.paths import default_model
from dictembed.vocab import encode_texts, leading_space_matters, word_token_id, word_token_ids

SENTENCES = [
    "zebra runs to the bank",
    "the river bank is steep and the bank is muddy",
    "she went to the bank to deposit money at the bank",
    "zebra sleeps near the river",
]


def byte_level(add_prefix_space: bool = False) -> PreTrainedTokenizerFast:
    """A tiny RoBERTa-style tokenizer trained on four sentences."""
    bpe = ByteLevelBPETokenizer(add_prefix_space=add_prefix_space)
    bpe.train_from_iterator(SENTENCES * 5, vocab_size=300, min_frequency=2, special_tokens=["<unk>", "<pad>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, unk_token="<unk>", pad_token="<pad>")


@pytest.fixture(scope="module")
def bert():
    return AutoTokenizer.from_pretrained(default_model())


def test_wordpiece_words(bert):
    assert not leading_space_matters(bert)
    assert word_token_id(bert, "bank") == bert.convert_tokens_to_ids("bank")
    assert word_token_id(bert, "Bank") == bert.convert_tokens_to_ids("bank")  # uncased vocabulary
    assert word_token_id(bert, "unbelievable") == bert.convert_tokens_to_ids("unbelievable")
    assert bert.tokenize("xqzv") == ["x", "##q", "##z", "##v"]
    for word in ["ice cream", "xqzv", "", " "]:
        assert word_token_id(bert, word) is None


def test_wordpiece_unknown_token_is_not_a_word(bert):
    assert bert.tokenize("\u2603") == ["[UNK]"]  # a snowman: one token, but the unknown one
    assert word_token_id(bert, "\u2603") is None


def test_byte_level_words_carry_the_leading_space():
    tokenizer = byte_level()
    assert leading_space_matters(tokenizer)
    vocab = tokenizer.get_vocab()
    assert "Ġbank" in vocab and "bank" not in vocab
    assert word_token_id(tokenizer, "bank") == vocab["Ġbank"]
    assert word_token_id(tokenizer, "river") == vocab["Ġriver"]
    # "zebra" only ever opens a sentence: the vocabulary has `zebra` but no `Ġzebra`, so mid-sentence
    # it is two tokens (Ġ + zebra) and is not a single-token word.
    assert "zebra" in vocab and "Ġzebra" not in vocab
    assert word_token_id(tokenizer, "zebra") is None
    assert word_token_id(tokenizer, "river bank") is None


def test_byte_level_with_prefix_space_already_on():
    tokenizer = byte_level(add_prefix_space=True)
    assert not leading_space_matters(tokenizer)  # it adds the space itself
    assert word_token_id(tokenizer, "bank") == tokenizer.get_vocab()["Ġbank"]


def test_filter_with_byte_level_tokenizer():
    dictionary = Dictionary(name="toy")
    for word in ["bank", "zebra", "river", "money"]:
        dictionary.add(word, f"definition of {word}")
    kept, report = single_token_filter(dictionary, byte_level())
    assert kept.headwords == ["bank", "river"]
    assert (report.kept_headwords, report.dropped_headwords) == (2, 2)


def test_batched_backend_path_agrees_and_does_not_truncate(bert):
    # MiniLM's tokenizer.json truncates at 128 tokens; over 100 texts go through a plain backend copy.
    fresh = AutoTokenizer.from_pretrained(default_model())
    assert fresh.backend_tokenizer.truncation is not None
    assert {len(ids) for ids in encode_texts(fresh, ["word " * 300] * 101)} == {300}
    assert fresh.backend_tokenizer.truncation is not None  # the copy was changed, not the tokenizer
    assert len(encode_texts(fresh, ["word " * 300])[0]) == 300  # few texts: the ordinary call
    words = ["bank", "ice cream", "xqzv", "river"] * 30
    assert word_token_ids(bert, words) == [word_token_id(bert, w) for w in words]
