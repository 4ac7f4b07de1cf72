"""Dictionary sources: each loader returns a `Dictionary`."""

from dictembed.dictionary.sources.cwn import load_cwn
from dictembed.dictionary.sources.gcide import load_gcide
from dictembed.dictionary.sources.oxford import load_chang, load_oxford, load_oxford_autodict
from dictembed.dictionary.sources.table import load_table
from dictembed.dictionary.sources.wordnet import load_wordnet, load_wordnet_examples, split_gloss

__all__ = [
    "load_chang",
    "load_cwn",
    "load_gcide",
    "load_oxford",
    "load_oxford_autodict",
    "load_table",
    "load_wordnet",
    "load_wordnet_examples",
    "split_gloss",
]
