"""Shared fixtures: tiny random masked-LM models (BERT with the real uncased vocabulary, RoBERTa with a
BPE tokenizer trained here) and a toy dictionary of single-token words."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOY_WORDS = {
    "dog": ["a domesticated animal that barks", "a loyal pet that chases cats"],
    "cat": ["a small pet that purrs and catches mice", "a feline animal kept at home"],
    "car": ["a vehicle with four wheels and an engine", "a machine you drive on roads"],
    "rain": ["water that falls from clouds", "drops of water from the sky"],
    "king": ["a man who rules a country", "the male ruler of a kingdom"],
    "bread": ["food made of baked flour", "a baked loaf eaten at breakfast"],
    "river": ["a large natural stream of water", "water flowing to the sea"],
    "book": ["pages bound together for reading", "a written work you read"],
}


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads; on a busy 2-core machine two threads are many times slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def entry_space_cache(tmp_path_factory: pytest.TempPathFactory):
    """$DICTEMBED_CACHE in a temporary folder for the whole suite: no test reads or writes the user's cache."""
    before = os.environ.get("DICTEMBED_CACHE")
    os.environ["DICTEMBED_CACHE"] = str(tmp_path_factory.mktemp("dictembed-cache"))
    yield Path(os.environ["DICTEMBED_CACHE"])
    if before is None:
        os.environ.pop("DICTEMBED_CACHE", None)
    else:
        os.environ["DICTEMBED_CACHE"] = before


def tiny_bert(path: Path, head: bool = True, dropout: float = 0.1) -> Path:
    """A random 2-layer BERT (hidden 32) with the standard uncased vocabulary; with or without an MLM head."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from dictembed.paths import default_model

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model())  # the standard uncased BERT vocabulary
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.2,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    (BertForMaskedLM if head else BertModel)(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_roberta(path: Path) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    torch.manual_seed(0)
    corpus = [d for defs in TOY_WORDS.values() for d in defs] + [" " + " ".join(TOY_WORDS)] * 20
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        corpus, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    path.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(path))
    tokenizer = RobertaTokenizerFast(vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"))
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        initializer_range=0.2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    RobertaForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def bert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def roberta_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture()
def toy_dictionary():
    from dictembed.dictionary.core import Dictionary

    d = Dictionary(name="toy")
    for word, definitions in TOY_WORDS.items():
        for definition in definitions:
            d.add(word, definition)
    return d


def _hypothesis_profiles() -> None:
    """The fuzz suite's profiles (tests/test_fuzz.py): quick by default, `--hypothesis-profile=long` for depth.
    Registered here because Hypothesis selects the profile before test modules are imported."""
    from hypothesis import HealthCheck, settings

    for name, examples in [("fuzz", 40), ("long", 2000)]:
        settings.register_profile(
            name,
            max_examples=examples,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )


_hypothesis_profiles()
