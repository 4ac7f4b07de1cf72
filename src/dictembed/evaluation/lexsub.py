"""Lexical substitution with a masked language model, scored on LS07 and CoInCo (GR-BERT's protocol).

Candidates come from the full-context distribution p(x|s): the sentence is fed unmasked and the MLM
logits are read at the target word's first sub-token. A checkpoint without an MLM head (e.g. a sentence
encoder such as all-MiniLM-L6-v2) is scored with its final hidden state dotted with the input word
embeddings, h . E^T, instead of a randomly initialised head. Post-processing, in order: lemmatise each
candidate (lemminflect, with the target's part of speech; the word itself when unknown), drop the
target's lemma, keep the first (highest scoring) candidate of each lemma, keep candidates that WordNet
allows with the target's part of speech (``dictembed.wordnet_pos``), drop non-alphabetic ones; keep 10.

Optional post-processes (``post``):

* ``+emb`` (Arefyev et al., 2020, "BERT+embs"): the MLM distribution is multiplied by a distribution
  proportional to exp(cos(e_x, e_t) / T), where e are input embeddings, e_t the mean over the target's
  sub-tokens and T = 1/15. Per instance this ranks by log p(x|s) + 15 * cos(e_x, e_t).
* ``+valid`` (Zhou et al., 2019): the top 50 candidates are re-scored with the validation score
  v = sum_i w_i * cos(h_i(original), h_i(substituted)), where h_i is word i's vector (the mean of its
  sub-tokens' concatenated last-4-layer states) and w_i the attention from the target word to word i in
  the original sentence, averaged over all layers and heads and normalised over the sentence's words.
  The final score is v + 0.01 * proposal score, Zhou et al.'s alpha.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import cast

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer, PreTrainedModel

from dictembed.errors import DictEmbedError, MissingHeadError, ModelLoadError
from dictembed.evaluation.lexsub_metrics import LexSubInstance, load_lexsub, score_ranked
from dictembed.extras import require
from dictembed.loading import load_masked_lm_info, load_pretrained
from dictembed.model_folder import resolve_model
from dictembed.progress import disable
from dictembed.texts import check_batch_size, is_whole_number
from dictembed.wordnet_pos import WordNetPOS, load_wordnet_pos

logger = logging.getLogger(__name__)

UPOS = {"n": "NOUN", "v": "VERB", "a": "ADJ", "r": "ADV"}
EMB_TEMPERATURE = 1 / 15
VALIDATION_ALPHA = 0.01
VALIDATION_TOP = 50
TOP_K = 10
MAX_WORDS = 200  # longer sentences are cropped to a window around the target
SCORINGS = ("auto", "head", "embeddings")
LOADED = {"model": "SubstituteScorer", "validation_model": "SubstituteValidator"}  # what each argument takes loaded


def candidate_vocabulary(tokenizer) -> tuple[list[int], list[str]]:
    """Ids and lower-cased words of the whole-word, alphabetic vocabulary entries.

    Special tokens and WordPiece '##' continuations are skipped; for byte-level BPE (SentencePiece)
    vocabularies only word-initial 'Ġword' ('▁word') entries are kept, without the marker.
    """
    vocab = tokenizer.get_vocab()
    special = set(tokenizer.all_special_ids)
    starts = Counter(token[0] for token in vocab if token)
    marker = next((m for m in ("Ġ", "▁") if starts[m] > len(vocab) // 4), None)
    ids, words = [], []
    for token, idx in sorted(vocab.items(), key=lambda item: item[1]):
        if idx in special or (marker is None and token.startswith("##")):
            continue
        if marker is not None:
            if not token.startswith(marker):
                continue
            token = token[len(marker) :]
        if token.isalpha():
            ids.append(idx)
            words.append(token.lower())
    return ids, words


def check_scoring(scoring: object) -> None:
    """Refuse a substitute scoring other than auto, head or embeddings (`SubstituteScorer.from_pretrained`)."""
    if scoring not in SCORINGS:
        raise DictEmbedError(f"unknown lexsub scoring {scoring!r}; choose {', '.join(SCORINGS)}")


def local_model(name_or_path: object, label: str = "model") -> str:
    """The local folder of a model named by a path or name, as `Encoder.load` finds it (`resolve_model`: a path
    that is not there is "not found", not a Hub lookup); anything but a str or path is refused naming `label`."""
    if not isinstance(name_or_path, str | os.PathLike):
        raise DictEmbedError(
            f"{label} must be a model folder or name (a str or path) or a loaded {LOADED[label]}, "
            f"got {type(name_or_path).__name__}"
        )
    return str(resolve_model(name_or_path if isinstance(name_or_path, str) else Path(name_or_path)))


def _crop(tokens: Sequence[str], index: int, max_words: int = MAX_WORDS) -> tuple[list[str], int]:
    start = max(0, min(index - max_words // 2, len(tokens) - max_words))
    return list(tokens[start : start + max_words]), index - start


def _fast_tokenizer(name_or_path: str):
    """The model's tokenizer, which must be a fast one (word alignment reads its word ids)."""
    tokenizer = load_pretrained(AutoTokenizer, name_or_path)
    if not tokenizer.is_fast:
        raise ModelLoadError(f"model {name_or_path!r} has no fast tokenizer (needed for word alignment)")
    return tokenizer


class WordAligner:
    """A model and its fast tokenizer that map whitespace tokens to sub-tokens, with the target word's
    sub-token positions (what the substitute scorer and validator share)."""

    def __init__(self, model: PreTrainedModel, tokenizer, device: str | torch.device | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.device = torch.device(device) if device else next(model.parameters()).device
        self.model.to(self.device)  # type: ignore[arg-type]  # transformers' @wraps'd `to` types as unbound

    def encode(self, sentences: Sequence[Sequence[str]], targets: Sequence[int]):
        """Batch encoding and, per sentence, the sub-token positions of each word (word -> positions)."""
        cropped = [_crop(tokens, index) for tokens, index in zip(sentences, targets, strict=True)]
        enc = self.tokenizer(
            [c[0] for c in cropped],
            is_split_into_words=True,
            padding=True,
            truncation=True,
            return_tensors="pt",
        )
        word_positions = []
        for row, (words, index) in enumerate(cropped):
            positions: dict[int, list[int]] = {}
            for pos, word in enumerate(enc.word_ids(row)):
                if word is not None:
                    positions.setdefault(word, []).append(pos)
            if index not in positions:
                why = "was cut off at the model's window" if index > max(positions, default=-1) else "reads as nothing"
                context = " ".join(words[max(0, index - 5) : index + 1])[-80:]
                raise DictEmbedError(
                    f"the target word {words[index]!r} ('... {context}') {why} to the model's tokenizer: no "
                    "sub-token to score; correct its line in the data"
                )
            word_positions.append((positions, index))
        return enc.to(self.device), word_positions


class SubstituteScorer(WordAligner):
    """log p(x|s) of every vocabulary word x at a target position, from an MLM head or h . E^T."""

    def __init__(self, model: PreTrainedModel, tokenizer, use_mlm_head: bool = True, device=None) -> None:
        super().__init__(model, tokenizer, device)
        self.use_mlm_head = use_mlm_head
        ids, self.words = candidate_vocabulary(tokenizer)
        if not ids:
            raise DictEmbedError(f"the vocabulary of {type(tokenizer).__name__} has no whole alphabetic word")
        self.vocab_ids = torch.tensor(ids, dtype=torch.long, device=self.device)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | os.PathLike[str], device: str | None = None, scoring: str = "auto"
    ) -> SubstituteScorer:
        """Load an MLM from a local path or cached name; score with its head, or with h . E^T when the head is
        missing (``scoring="auto"``). ``scoring="embeddings"`` always uses h . E^T; ``"head"`` requires a head."""
        check_scoring(scoring)
        folder = local_model(name_or_path)
        model, head_missing = load_masked_lm_info(folder)
        tokenizer = _fast_tokenizer(folder)
        if head_missing and scoring == "head":
            raise MissingHeadError(f"model {name_or_path!r} has no trained MLM head (missing {head_missing[0]}, ...)")
        if head_missing and scoring == "auto":
            logger.warning(
                "model %r has no trained MLM head (missing %s); scoring substitutes with the "
                "final hidden state dotted with the input word embeddings (h . E^T) instead",
                name_or_path,
                ", ".join(sorted(head_missing)[:3]),
            )
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return cls(model, tokenizer, use_mlm_head=not head_missing and scoring != "embeddings", device=device)

    @torch.no_grad()
    def scores(self, sentences: Sequence[Sequence[str]], targets: Sequence[int], emb: bool = False):
        """[batch, n_candidate_words] log p(x|s) (+ cos(e_x, e_target) / T with ``emb``)."""
        enc, word_positions = self.encode(sentences, targets)
        first = torch.tensor([pos[index][0] for pos, index in word_positions], device=self.device)
        rows = torch.arange(len(first), device=self.device)
        # transformers types the embedding layer as an nn.Module, whose attributes read as Tensor | Module
        embeddings = cast(torch.Tensor, self.model.get_input_embeddings().weight)
        with _inference(self.model):
            if self.use_mlm_head:
                logits = self.model(**enc).logits[rows, first]
            else:
                hidden = self.model.base_model(**enc).last_hidden_state[rows, first]
                logits = hidden @ embeddings.T
        scores = F.log_softmax(logits.float(), dim=-1)[:, self.vocab_ids]
        if emb:
            ids = enc["input_ids"]
            target = torch.stack([embeddings[ids[r, pos[i]]].mean(0) for r, (pos, i) in enumerate(word_positions)])
            cos = F.normalize(target.float(), dim=-1) @ F.normalize(embeddings[self.vocab_ids].float(), dim=-1).T
            scores = scores + cos / EMB_TEMPERATURE
        return scores.cpu()


@contextlib.contextmanager
def _inference(model: PreTrainedModel, eager: bool = False) -> Iterator[None]:
    """Eval mode (and eager attention, the only kind that returns attention weights) for one call.

    The model's previous mode and attention kind are restored, so a model in training can be scored.
    """
    training, attention = model.training, model.config._attn_implementation
    switch = eager and attention != "eager"
    model.eval()
    if switch:
        model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(training)
        if switch:
            model.set_attn_implementation(attention)


class SubstituteValidator(WordAligner):
    """Zhou et al.'s (2019) validation score: attention-weighted similarity of contextual word vectors."""

    layers = 4

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike[str], device: str | None = None) -> SubstituteValidator:
        folder = local_model(name_or_path)
        model = load_pretrained(AutoModel, folder, attn_implementation="eager")
        tokenizer = _fast_tokenizer(folder)
        return cls(model, tokenizer, device or ("cuda" if torch.cuda.is_available() else "cpu"))

    @torch.no_grad()
    def score(self, tokens: Sequence[str], index: int, candidates: Sequence[str]) -> torch.Tensor:
        """Validation score of each candidate substituted for ``tokens[index]`` (in [-1, 1])."""
        sentences = [list(tokens)] + [[*tokens[:index], cand, *tokens[index + 1 :]] for cand in candidates]
        enc, word_positions = self.encode(sentences, [index] * len(sentences))
        with _inference(self.model, eager=True):
            out = self.model(**enc, output_hidden_states=True, output_attentions=True)
        states = torch.cat(out.hidden_states[-self.layers :], dim=-1).float()
        n_words = max(max(positions) for positions, _ in word_positions) + 1
        pool = torch.zeros(len(sentences), n_words, states.shape[1], device=self.device)
        for row, (positions, _) in enumerate(word_positions):
            for word, pos in positions.items():
                pool[row, word, pos] = 1.0 / len(pos)
        words = pool @ states
        similarity = F.cosine_similarity(words[1:], words[:1], dim=-1)
        attention = torch.stack([layer[0] for layer in out.attentions]).float().mean(dim=(0, 1))
        target = word_positions[0][1]
        token_weights = attention[word_positions[0][0][target]].mean(0)
        weights = (pool[0] > 0).float() @ token_weights
        return ((similarity * weights / weights.sum()).sum(-1)).cpu()


@functools.lru_cache(maxsize=200_000)
def lemmatise(word: str, pos: str) -> str:
    """lemminflect's first lemma of ``word`` as WordNet part of speech ``pos``; the word if it has none."""
    lemmas = require("lexsub").getAllLemmas(word, UPOS[pos]).get(UPOS[pos])
    return lemmas[0].lower() if lemmas else word.lower()


def filter_candidates(
    candidates: Iterable[tuple[str, float]], instance: LexSubInstance, lexicon: WordNetPOS, keep: int = TOP_K
) -> list[tuple[str, float]]:
    """Lemmatise, drop the target, deduplicate lemmas, keep WordNet-compatible words; the top ``keep``."""
    target_forms = {instance.lemma, instance.tokens[instance.index].lower()}
    kept: list[tuple[str, float]] = []
    seen: set[str] = set()
    for word, score in candidates:
        lemma = lemmatise(word, instance.pos)
        if lemma in target_forms or word in target_forms or lemma in seen:
            continue
        seen.add(lemma)
        if lemma.isalpha() and (lexicon.base_forms(lemma, instance.pos) or lexicon.base_forms(word, instance.pos)):
            kept.append((lemma, score))
            if len(kept) == keep:
                break
    return kept


def _rank_batch(
    scorer: SubstituteScorer,
    batch: Sequence[LexSubInstance],
    lexicon: WordNetPOS,
    emb: bool,
    validator: SubstituteValidator | None,
) -> list[list[str]]:
    scores = scorer.scores([i.tokens for i in batch], [i.index for i in batch], emb=emb)
    ranked = []
    for instance, row in zip(batch, scores, strict=True):
        order = torch.argsort(row, descending=True).tolist()
        pairs = ((scorer.words[j], float(row[j])) for j in order)
        kept = filter_candidates(pairs, instance, lexicon, VALIDATION_TOP if validator else TOP_K)
        if validator and kept:
            valid = validator.score(instance.tokens, instance.index, [w for w, _ in kept])
            rescored = [(w, float(v) + VALIDATION_ALPHA * s) for (w, s), v in zip(kept, valid, strict=True)]
            kept = sorted(rescored, key=lambda pair: -pair[1])
        ranked.append([w for w, _ in kept[:TOP_K]])
    return ranked


def _post_flags(post: str | Iterable[str]) -> set[str]:
    """The post-processes of `post` ("+emb", "+valid"; one name alone is one, not its letters) without their +."""
    items = [post] if isinstance(post, str) else post
    if not isinstance(items, Iterable) or not all(isinstance(p, str) for p in items):
        raise DictEmbedError(f"post must be a name or a list of names ('+emb', '+valid'), got {post!r}")
    flags = {p.strip().lstrip("+").lower() for p in items}
    if flags - {"emb", "valid"}:
        unknown = sorted(flags - {"emb", "valid"})
        raise DictEmbedError(f"unknown lexical substitution post-process(es) {unknown}; use '+emb' and/or '+valid'")
    return flags


def generate_substitutes(
    scorer: SubstituteScorer,
    instances: Sequence[LexSubInstance],
    post: str | Iterable[str] = (),
    validator: SubstituteValidator | None = None,
    batch_size: int = 32,
    wordnet_dir: str | Path | None = None,
    progress: bool = False,
) -> dict[str, list[str]]:
    """Instance id -> up to 10 substitutes, best first (``+valid`` defaults to the scorer's encoder)."""
    flags = _post_flags(post)
    batch_size = check_batch_size(batch_size)
    if "valid" in flags and validator is None:
        base = cast(PreTrainedModel, scorer.model.base_model)  # a transformers model, typed nn.Module there
        validator = SubstituteValidator(base, scorer.tokenizer, scorer.device)
    lexicon, emb = load_wordnet_pos(wordnet_dir), "emb" in flags
    # Sort by length so that batches need little padding; answers are keyed by id, so order is irrelevant.
    ordered = sorted(instances, key=lambda inst: len(inst.tokens))
    answers: dict[str, list[str]] = {}
    batches = range(0, len(ordered), batch_size)
    for start in tqdm(batches, desc="lexical substitution", unit="batch", disable=disable(progress)):
        batch = ordered[start : start + batch_size]
        ranked = _rank_batch(scorer, batch, lexicon, emb, validator if "valid" in flags else None)
        answers.update(zip((inst.instance_id for inst in batch), ranked, strict=True))
    short = sum(1 for ranked in answers.values() if len(ranked) < TOP_K)
    if short:
        logger.warning("%d of %d instances got fewer than %d substitutes", short, len(answers), TOP_K)
    return answers


def evaluate_lexsub(
    model: str | os.PathLike[str] | SubstituteScorer,
    dataset: str = "LS07",
    post: str | Iterable[str] = (),
    validation_model: str | os.PathLike[str] | SubstituteValidator | None = None,
    limit: int | None = None,
    batch_size: int = 32,
    data_dir: str | Path | None = None,
    wordnet_dir: str | Path | None = None,
    progress: bool = True,
    scoring: str = "auto",
    device: str | None = None,
) -> dict[str, float]:
    """best, best_mode, oot, oot_mode, p_at_1, p_at_3 (x 100) of ``model`` on LS07 or CoInCo, plus counts.

    ``model`` is a local path / cached name or an in-memory :class:`SubstituteScorer`. With ``+valid`` the
    validation model defaults to the proposal model's own encoder. ``scoring``: see
    :meth:`SubstituteScorer.from_pretrained`. ``device``: where a model named by path runs (default: CUDA
    when available, else the CPU). ``post`` may be one name ("+emb"). Arguments that cannot be right (a
    ``limit`` or ``batch_size`` under 1, a model folder that is not there) are refused before anything loads.
    """
    _post_flags(post)
    check_batch_size(batch_size)
    if limit is not None and not is_whole_number(limit):
        raise DictEmbedError(f"limit must be a whole number >= 1 (instances) or None (all), got {limit!r}")
    check_scoring(scoring)
    folder = None if isinstance(model, SubstituteScorer) else local_model(model)
    validator_folder = None
    if validation_model is not None and not isinstance(validation_model, SubstituteValidator):
        validator_folder = local_model(validation_model, "validation_model")
    started = time.perf_counter()
    data = load_lexsub(dataset, data_dir).head(limit)
    scorer = (
        SubstituteScorer.from_pretrained(folder, device=device, scoring=scoring)
        if folder is not None
        else cast(SubstituteScorer, model)
    )
    validator = cast(SubstituteValidator | None, validation_model)
    if validator_folder is not None:
        validator = SubstituteValidator.from_pretrained(validator_folder, device=str(scorer.device))
    answers = generate_substitutes(scorer, data.instances, post, validator, batch_size, wordnet_dir, progress)
    result = score_ranked(data.gold, answers)
    result.update(
        n_instances=len(data.instances),
        n_without_gold=data.n_without_gold,
        n_short_lists=sum(1 for ranked in answers.values() if len(ranked) < TOP_K),
        seconds=round(time.perf_counter() - started, 1),
    )
    return result
