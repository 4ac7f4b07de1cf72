"""Substitute generation: vocabulary, scoring, filtering, validation, and end-to-end runs on real data."""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.evaluation.lexsub import (
    EMB_TEMPERATURE,
    SubstituteScorer,
    SubstituteValidator,
    candidate_vocabulary,
    evaluate_lexsub,
    filter_candidates,
    generate_substitutes,
    lemmatise,
)
from dictembed.evaluation.lexsub_metrics import LexSubInstance, load_lexsub
from dictembed.paths import default_model
from dictembed.wordnet_pos import load_wordnet_pos

SCORE_KEYS = ("best", "best_mode", "oot", "oot_mode", "p_at_1", "p_at_3")
BRIGHT = LexSubInstance("x", "bright", "a", ("a", "bright", "boy", "came", "in"), 1)


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizerFast:
    # The MiniLM vocabulary is the standard uncased BERT WordPiece vocabulary.
    return BertTokenizerFast(vocab=os.path.join(default_model(), "vocab.txt"))


@pytest.fixture(scope="module")
def tiny_scorer(tokenizer) -> SubstituteScorer:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    return SubstituteScorer(BertForMaskedLM(config).eval(), tokenizer)


def test_wordpiece_vocabulary_keeps_whole_alphabetic_words(tokenizer):
    ids, words = candidate_vocabulary(tokenizer)
    assert "the" in words and "bright" in words
    assert not any(w.startswith("##") or w.startswith("[") for w in words)
    assert all(w.isalpha() for w in words)
    assert tokenizer.convert_ids_to_tokens(ids[words.index("bright")]) == "bright"
    assert tokenizer.cls_token_id not in ids


def test_byte_level_bpe_vocabulary_strips_the_space_marker():
    vocab = {"<s>": 0, "Ġthe": 1, "the": 2, "ĠCat": 3, "Ġ42": 4, "Ġbig": 5, "ing": 6}
    fake = SimpleNamespace(get_vocab=lambda: vocab, all_special_ids=[0])
    assert candidate_vocabulary(fake) == ([1, 3, 5], ["the", "cat", "big"])


def test_filter_candidates_toy_case():
    lexicon = load_wordnet_pos()
    assert lemmatise("cleverer", "a") == "clever"
    ranked = [
        ("brighter", -1.0),  # lemma "bright" = the target: dropped
        ("clever", -2.0),
        ("cleverer", -3.0),  # lemma "clever" already kept: dropped
        ("run", -4.0),  # not an adjective in WordNet: dropped
        ("xyzzy", -5.0),  # not in WordNet at all: dropped
        ("smart", -6.0),
        ("quickly", -7.0),  # adverb only: dropped
        ("intelligent", -8.0),
    ]
    kept = filter_candidates(ranked, BRIGHT, lexicon)
    assert kept == [("clever", -2.0), ("smart", -6.0), ("intelligent", -8.0)]
    assert filter_candidates(ranked, BRIGHT, lexicon, keep=2) == kept[:2]


def test_fallback_scores_are_log_softmax_of_hidden_dot_embeddings(tiny_scorer):
    scorer = SubstituteScorer(tiny_scorer.model, tiny_scorer.tokenizer, use_mlm_head=False)
    scores = scorer.scores([BRIGHT.tokens], [BRIGHT.index])
    enc = scorer.tokenizer([list(BRIGHT.tokens)], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        hidden = scorer.model.base_model(**enc).last_hidden_state[0, 2]  # [CLS] a bright: position 2
        expected = F.log_softmax(hidden @ scorer.model.get_input_embeddings().weight.T, dim=-1)
    assert torch.allclose(scores[0], expected[scorer.vocab_ids], atol=1e-5)


def test_emb_adds_cosine_over_temperature(tiny_scorer):
    plain = tiny_scorer.scores([BRIGHT.tokens], [BRIGHT.index])
    emb = tiny_scorer.scores([BRIGHT.tokens], [BRIGHT.index], emb=True)
    column = tiny_scorer.words.index("bright")
    # cos(e_bright, e_bright) = 1, so the target's own column moves by exactly 1 / T = 15.
    assert 1 / EMB_TEMPERATURE == pytest.approx(15.0)
    assert float(emb[0, column] - plain[0, column]) == pytest.approx(15.0, abs=1e-4)


def test_validation_score_of_the_unchanged_sentence_is_one(tiny_scorer):
    model = tiny_scorer.model
    model.train()
    validator = SubstituteValidator(model.base_model, tiny_scorer.tokenizer)
    scores = validator.score(BRIGHT.tokens, BRIGHT.index, ["bright", "clever", "unbelievably"])
    assert scores[0] == pytest.approx(1.0, abs=1e-5)  # every cosine is 1 and the weights sum to 1
    assert all(-1.0 <= float(s) < 0.99999 for s in scores[1:])
    # The model's training mode and attention kind are restored after scoring.
    assert model.training and model.config._attn_implementation != "eager"
    model.eval()


def test_end_to_end_tiny_random_bert(tiny_scorer):
    result = evaluate_lexsub(tiny_scorer, "LS07", limit=20, progress=False)
    assert all(0.0 <= result[key] <= 100.0 for key in SCORE_KEYS)
    assert (result["n_instances"], result["n_without_gold"], result["n_scored"]) == (20, 0, 20)
    assert result["n_attempted"] == 20 and result["n_short_lists"] == 0


def test_generate_substitutes_with_emb_and_valid(tiny_scorer):
    lexicon = load_wordnet_pos()
    instances = load_lexsub("CoInCo").instances[:3]
    answers = generate_substitutes(tiny_scorer, instances, post=("+emb", "+valid"), batch_size=2)
    assert set(answers) == {inst.instance_id for inst in instances}
    for inst in instances:
        ranked = answers[inst.instance_id]
        assert len(ranked) == 10 and len(set(ranked)) == 10 and inst.lemma not in ranked
        assert all(word.isalpha() and lexicon.base_forms(word, inst.pos) for word in ranked)


def test_a_target_the_tokenizer_reads_as_nothing_is_named_with_its_context(tiny_scorer):
    tokens = ["the", "boy", "is", "\u200b", "today"]  # a zero-width space where the target word should be
    with pytest.raises(
        DictEmbedError, match=r"^the target word '\\u200b' \('\.\.\. the boy is \u200b'\) reads as nothing"
    ):
        tiny_scorer.encode([tokens], [3])


def test_bad_post_process_and_unknown_model_are_clear_errors(tiny_scorer):
    with pytest.raises(DictEmbedError, match=r"post-process\(es\) \['mask'\]"):
        evaluate_lexsub(tiny_scorer, "LS07", post=["+mask"], limit=1)
    with pytest.raises(ModelLoadError, match="no-such-org/no-such-model"):
        SubstituteScorer.from_pretrained("no-such-org/no-such-model")


def test_minilm_without_mlm_head_falls_back_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="dictembed.evaluation.lexsub"):
        scorer = SubstituteScorer.from_pretrained(default_model(), device="cpu")
    assert not scorer.use_mlm_head
    assert "no trained MLM head" in caplog.text and "h . E^T" in caplog.text
    result = evaluate_lexsub(scorer, "LS07", limit=5, progress=False)
    assert all(0.0 <= result[key] <= 100.0 for key in SCORE_KEYS)
    assert result["n_instances"] == 5


def test_scoring_choice_forces_or_requires_the_head(tmp_path, caplog):
    from dictembed.errors import MissingHeadError

    with pytest.raises(MissingHeadError, match="no trained MLM head"):
        SubstituteScorer.from_pretrained(default_model(), device="cpu", scoring="head")
    with pytest.raises(DictEmbedError, match="unknown lexsub scoring"):
        SubstituteScorer.from_pretrained(default_model(), scoring="softmax")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    BertForMaskedLM(config).save_pretrained(tmp_path)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "bright", "clever"]
    BertTokenizerFast(vocab={t: i for i, t in enumerate(words)}).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING, logger="dictembed.evaluation.lexsub"):
        assert SubstituteScorer.from_pretrained(str(tmp_path), device="cpu").use_mlm_head
        assert not SubstituteScorer.from_pretrained(str(tmp_path), device="cpu", scoring="embeddings").use_mlm_head
    assert "no trained MLM head" not in caplog.text
