"""Dictionaries: the sources DefSent learns from, merged, split by headword, filtered and described."""

from defsent.dictionary.builder import DictionaryBuilder, LoadReport, clean_text
from defsent.dictionary.core import Dictionary, Entry, Sense
from defsent.dictionary.filter import FilterReport, single_token_filter
from defsent.dictionary.load import SOURCES, load_dictionary, load_source
from defsent.dictionary.merge import MergeReport, merge_dictionaries, normalize_key
from defsent.dictionary.sources import (
    load_chang,
    load_gcide,
    load_oxford,
    load_oxford_autodict,
    load_table,
    load_wordnet,
    load_wordnet_examples,
    split_gloss,
)
from defsent.dictionary.split import seeded_sample, split_by_headword, split_sizes
from defsent.dictionary.stats import dictionary_stats, format_stats_table
from defsent.dictionary.triplets import Triplet, TripletReport, build_triplets, find_target

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
