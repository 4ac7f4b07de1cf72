"""How much of a dictionary a model's tokenizer cannot read: the share of [UNK] tokens.

    python experiments/unk_rate.py ../shared/data/dictionaries/cwn_chinese/valid.txt --columns word,-,definition

Prints one JSON document: over the definitions (each sense once) and over the headwords, the tokens that
are the tokenizer's unknown token / all tokens (no special tokens), the share of texts with at least one,
and the distinct characters (spaces aside) that tokenize to the unknown token alone.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from dictembed.dictionary import load_dictionary
from dictembed.paths import default_model


def unk_rate(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> dict[str, Any]:
    """[UNK] tokens / tokens, and texts with >= 1 [UNK] / texts."""
    unk = tokenizer.unk_token_id
    tokens = unknown = with_unknown = 0
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        n = sum(i == unk for i in ids)
        tokens, unknown, with_unknown = tokens + len(ids), unknown + n, with_unknown + (n > 0)
    return {
        "texts": len(texts),
        "tokens": tokens,
        "unk_tokens": unknown,
        "unk_token_rate": unknown / max(tokens, 1),
        "texts_with_unk": with_unknown,
        "texts_with_unk_rate": with_unknown / max(len(texts), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dictionary", help="a dictionary spec (load_dictionary)")
    parser.add_argument("--columns", default=None, help="columns of a headerless table, e.g. word,-,definition")
    parser.add_argument("--model", default=None, help="tokenizer's model (default: the embedded MiniLM)")
    args = parser.parse_args()
    dictionary = load_dictionary(args.dictionary, columns=args.columns)
    tokenizer = AutoTokenizer.from_pretrained(args.model or default_model())
    definitions = [sense.definition for entry in dictionary for sense in entry.senses]
    characters = sorted({c for text in definitions for c in text if not c.isspace()})
    unknown = [
        c for c in characters if tokenizer.convert_tokens_to_ids(tokenizer.tokenize(c)) == [tokenizer.unk_token_id]
    ]
    result = {
        "dictionary": args.dictionary,
        "model": args.model or default_model(),
        "definitions": unk_rate(tokenizer, definitions),
        "headwords": unk_rate(tokenizer, dictionary.headwords),
        "distinct_characters": len(characters),
        "unknown_characters": len(unknown),
    }
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
