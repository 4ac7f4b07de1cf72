"""The options of a reverse-dictionary search that `dictembed predict` and `dictembed serve` both take, with
their choices and defaults (torch-free, so the command line can build its options without loading a model)."""

from typing import Literal, get_args

WordCount = Literal["any", "single", "phrase"]  # `words`: any, single words only, phrases only
WORD_COUNTS: tuple[WordCount, ...] = get_args(WordCount)
POS_TAGS = ("n", "v", "a", "r")  # `pos`: WordNet's parts of speech (noun, verb, adjective, adverb)
DEFAULT_K = 10  # results a search lists unless asked for more or fewer
