"""Dictionaries: the sources DefSent learns from, merged, split by headword, filtered and described."""

from dictembed.dictionary.builder import DictionaryBuilder, LoadReport, clean_text
from dictembed.dictionary.core import Dictionary, Entry, Sense
from dictembed.dictionary.filter import FilterReport, single_token_filter
from dictembed.dictionary.load import SOURCES, load_dictionary, load_source
from dictembed.dictionary.merge import MergeReport, merge_dictionaries, normalize_key
from dictembed.dictionary.sources import (
    load_chang,
    load_cwn,
    load_gcide,
    load_oxford,
    load_oxford_autodict,
    load_table,
    load_wordnet,
    load_wordnet_examples,
    split_gloss,
)
from dictembed.dictionary.split import seeded_sample, split_by_headword, split_sizes
from dictembed.dictionary.stats import dictionary_stats, format_stats_table
from dictembed.dictionary.triplets import Triplet, TripletReport, build_triplets, find_target

__all__ = [
    "SOURCES",
    "Dictionary",
    "DictionaryBuilder",
    "Entry",
    "FilterReport",
    "LoadReport",
    "MergeReport",
    "Sense",
    "Triplet",
    "TripletReport",
    "build_triplets",
    "clean_text",
    "dictionary_stats",
    "find_target",
    "format_stats_table",
    "load_chang",
    "load_cwn",
    "load_dictionary",
    "load_gcide",
    "load_oxford",
    "load_oxford_autodict",
    "load_source",
    "load_table",
    "load_wordnet",
    "load_wordnet_examples",
    "merge_dictionaries",
    "normalize_key",
    "single_token_filter",
    "seeded_sample",
    "split_by_headword",
    "split_gloss",
    "split_sizes",
]
