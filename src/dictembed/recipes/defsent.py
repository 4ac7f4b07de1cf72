"""DefSent (Tsukagoshi et al., 2021): predict the defined word through the frozen MLM head."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from torch import nn

from dictembed.cache import cache_folder
from dictembed.description_corpus import NAMED, corpus_choice, load_descriptions
from dictembed.devices import loader_device
from dictembed.dictionary import load_dictionary, seeded_sample, single_token_filter, split_by_headword
from dictembed.dictionary.catalog import language_of
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import EntrySpace, WordEmbeddingSpace
from dictembed.errors import DictEmbedError, MissingHeadError
from dictembed.evaluation.ranking import reverse_dictionary_metrics
from dictembed.evaluation.sts_multi import evaluate_sts_dev
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.objectives.entry_prediction import (
    EntryPrediction,
    description_examples,
    entry_collate,
    entry_examples,
    token_lengths,
)
from dictembed.output_folder import runs_root
from dictembed.pooling import STANDARD_POOLINGS as POOLINGS
from dictembed.recipes.options import MethodOptions, option
from dictembed.recipes.papers import CARD_KEYS, PAPERS
from dictembed.recipes.run import Built, Recipe, RunResult, Stage, space_fingerprint
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.word_frequency import guess_language, most_frequent

if TYPE_CHECKING:
    from dictembed.recipes.config import RunConfig

log = logging.getLogger(__name__)


@dataclass
class EntryOptions(MethodOptions):
    """The options every entry-prediction method (DefSent, DefSent+) has."""

    pooling: str = option("mean", "pooling of the sentence vector", choices=POOLINGS)
    pooler: str = option("none", "apply the model's own dense pooler", choices=("none", "model"))
    descriptions: str = option(
        "",
        "a description corpus whose descriptions of training headwords are further queries of their entries: "
        "'everyday' (the corpus shipped with dictembed), 'everyday-long' (it and a longer description of each of "
        "its words), a TSV (description, word), or none",
        parse=corpus_choice,
    )
    # 0.25: the best description sets at the least STS cost over 0.25 / 1 / all on 5,000 definitions (docs/results.md)
    description_ratio: float = option(
        0.25, "description examples per definition example (a seeded sample; at most every description)", positive=False
    )
    synonym_targets: bool = option(
        False,
        "a definition several headwords list (a WordNet synset's gloss) has each of their entries as a right answer, "
        "not only its own (the others were negatives)",
    )


@dataclass
class DefSentOptions(EntryOptions):
    space: str = option(
        "auto",
        "entry space; auto falls back to word embeddings when the model has no MLM head",
        choices=("auto", "mlm-head", "word-embeddings"),
    )


def config_dictionary(config: RunConfig) -> Dictionary:
    """The configured dictionary (or merged dictionaries), cut to its most frequent headwords when asked."""
    dictionary = load_dictionary(
        config.dictionary, wordnet_dir=config.wordnet_dir, encoding=config.encoding, columns=config.columns
    )
    if config.headwords:
        cache = cache_folder(config.cache_dir)
        dictionary = most_frequent(dictionary, config.headwords, language_of(config.dictionary), cache)
    return dictionary


def load_splits(config: RunConfig) -> dict[str, Dictionary]:
    """The configured dictionary's seeded 8:1:1 split by headword."""
    return split_by_headword(config_dictionary(config), seed=config.split_seed)


def base_encoder(config: RunConfig) -> Encoder:
    """A fresh copy of the original pre-trained model with the configured pooling and pooler."""
    options = config.options_as(EntryOptions)
    return load_encoder(
        config, config.model, pooling=options.pooling, pooler=options.pooler, max_length=config.max_length
    )


def load_encoder(config: RunConfig, model: str, **settings: Any) -> Encoder:
    """`Encoder.load` on the run's device ("auto": the best one) with the run's compute precision, which the
    entry spaces and dev metrics built from it use."""
    return Encoder.load(model, device=loader_device(config.device), **settings).set_precision(config.precision)


def word_space(config: RunConfig, encoder: Encoder, words: list[str]) -> EntrySpace:
    """The MLM head over single-token words; the word-embedding FALLBACK when asked or when there is no head."""
    space = config.options_as(DefSentOptions).space
    if space == "word-embeddings":
        return WordEmbeddingSpace.from_encoder(encoder, words)
    try:
        return MLMHeadSpace.from_pretrained(config.model, words, encoder.tokenizer)
    except MissingHeadError as err:
        if space == "mlm-head":
            raise
        log.warning("%s -- FALLBACK: using the frozen input word embeddings as the entry space", err)
        return WordEmbeddingSpace.from_encoder(encoder, words)


def entry_dev_metrics(encoder: Encoder, space: EntrySpace, dev: Dictionary, config: RunConfig) -> dict[str, float]:
    """Reverse-dictionary MRR/top-k on dev headwords and STS-B dev Spearman x 100 (in `config.dev_language`)."""
    ranks = ReverseDictionary(encoder, space).ranks(dev, limit=config.dev_limit)
    metrics = {k: float(v) for k, v in reverse_dictionary_metrics(ranks).items()}
    metrics["stsb_dev"] = float(evaluate_sts_dev(encoder, config.dev_language))
    return metrics


def stage_space(stage: Stage) -> EntrySpace:
    """The entry space of an entry recipe's stage (its `stage` always builds one)."""
    return cast(EntrySpace, stage.space)


def describes(corpus: str, dictionary: str, train: Dictionary) -> bool:
    """Whether the description `corpus` applies to the `dictionary` trained on: the shipped corpora (`everyday`,
    `everyday-long`) describe English words, so they are left out (logged) for a dictionary whose headwords are in
    another language (by name, else as its training headwords read: `word_frequency.guess_language`); a corpus file
    always applies."""
    if corpus not in NAMED:
        return True
    languages = {language_of(part.strip()) for part in dictionary.split(",")}
    if "auto" in languages:
        languages = (languages - {"auto"}) | {guess_language(train.headwords) or "unknown"}
    if languages == {"en"}:
        return True
    log.info("the %s descriptions describe English words; %s is not English: trained without them", corpus, dictionary)
    return False


class EntryRecipe(Recipe):
    """What DefSent and DefSent+ share: a frozen entry space, definitions as examples, entry dev metrics."""

    def build(self, config: RunConfig, stage: Stage, seed: int) -> Built:
        encoder = base_encoder(config)
        space = stage_space(stage)
        train = stage.data["splits"]["train"]
        options = config.options_as(EntryOptions)
        examples = seeded_sample(entry_examples(train, space, options.synonym_targets), config.limit, seed)
        if not examples:  # DefSent's words are those its tokenizer reads as one token: a dictionary may have none
            kept = "single-token headword" if config.method == "defsent" else "headword with an entry"
            raise DictEmbedError(
                f"{config.dictionary}: no training definition has a {kept} in the training split; give a dictionary "
                "of more (or more common) words"
            )
        details: dict[str, Any] = {}
        if options.descriptions and describes(options.descriptions, config.dictionary, train):
            described = description_examples(load_descriptions(options.descriptions), train, space)
            described = seeded_sample(described, round(options.description_ratio * len(examples)), seed)
            examples += described
            details["descriptions"] = len(described)
        lengths = token_lengths(encoder, [text for text, _ in examples]) if config.group_by_length else None
        return Built(
            EntryPrediction(encoder, space), examples, entry_collate(encoder), details=details, lengths=lengths
        )

    def extract(self, config: RunConfig, built: Built, objective: nn.Module) -> Encoder:
        return cast(EntryPrediction, objective).encoder  # the objective `build` made, unwrapped

    def dev_metrics(self, config: RunConfig, stage: Stage, built: Built, encoder: Encoder) -> dict[str, float]:
        return entry_dev_metrics(encoder, stage_space(stage), stage.data["splits"]["dev"], config)


class DefSent(EntryRecipe):
    """Filter to single-token headwords; entries are the MLM head (or the word-embedding fallback)."""

    name = "defsent"
    options = DefSentOptions
    paper = PAPERS["defsent"]
    card_keys = CARD_KEYS["defsent"]
    defaults: ClassVar[dict[str, Any]] = {"dictionary": "wordnet", "lrs": [2e-5], "select_on": "mrr"}

    def stage(self, config: RunConfig, step: int, before: Stage | None, best: RunResult | None) -> Stage:
        encoder = base_encoder(config)
        dictionary = config_dictionary(config)
        filtered = {}
        for name, split in split_by_headword(dictionary, seed=config.split_seed).items():
            filtered[name], report = single_token_filter(split, encoder.tokenizer)
            log.info("%s split, single-token filter: %s", name, report)
        space = word_space(config, encoder, [w for split in filtered.values() for w in split.headwords])
        record = {"entry_space": space.kind, "entry_encoder": config.model}
        root = runs_root(config.output)
        data = {"splits": filtered, "dictionary": dictionary}
        return Stage(root, config.select_on, data, space, record, space_fingerprint(space))
