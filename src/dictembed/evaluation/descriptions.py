"""Description sets: people's descriptions of words with the words they describe (`load_description_pairs`), the
queries of the reverse dictionary's evaluation on descriptions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dictembed.errors import DataFormatError, DictEmbedError

if TYPE_CHECKING:
    from dictembed.reverse_dictionary import ReverseDictionary


DESCRIPTION_SPLITS = ("dev", "test")  # the optional third column of a description-pairs TSV


def load_description_pairs(path: str | Path, split: str | None = None) -> list[tuple[str, list[str]]]:
    """A TSV with a header and the columns `description`, `expected` (alternatives split by `|`) and, optionally,
    `split` (`dev` or `test`), e.g. `a long-necked African animal<TAB>giraffe|camelopard<TAB>test`:
    (description, expected words) pairs, in file order; only the rows of `split` when one is given (None: all).

    Asking for a split of a file without the `split` column is an error, not every row."""
    if split is not None and split not in DESCRIPTION_SPLITS:
        raise DictEmbedError(f"split must be one of {', '.join(DESCRIPTION_SPLITS)} or None, not {split!r}")
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    if header not in (["description", "expected"], ["description", "expected", "split"]):
        raise DataFormatError(
            path, "the header must be `description<TAB>expected` or `description<TAB>expected<TAB>split`", 1
        )
    with_split = len(header) == 3
    if split is not None and not with_split:
        raise DataFormatError(path, f"no `split` column to select the {split!r} rows from", 1)
    shape = (
        "a description, a tab, word|word|..., a tab and dev or test"
        if with_split
        else "a description, a tab and word|word|..."
    )
    pairs = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        words = [w.strip() for w in fields[1].split("|") if w.strip()] if len(fields) == len(header) else []
        if not fields[0].strip() or not words:
            raise DataFormatError(path, f"expected {shape}", number)
        if with_split:
            row_split = fields[2].strip()
            if row_split not in DESCRIPTION_SPLITS:
                raise DataFormatError(
                    path, f"split {row_split!r} is not one of {', '.join(DESCRIPTION_SPLITS)}", number
                )
            if split is not None and row_split != split:
                continue
        pairs.append((fields[0].strip(), words))
    return pairs


def hit_ranks(reverse: ReverseDictionary, pairs: list[tuple[str, list[str]]], k: int = 10) -> list[int | None]:
    """For each (description, expected words) pair: the 1-based rank of the first of the top-k results of
    `reverse` that holds an expected word, or None when none does."""
    found = reverse.search_many([description for description, _ in pairs], k=k, max_definitions=0)
    ranks: list[int | None] = []
    for (_, expected), results in zip(pairs, found, strict=True):
        hits = [rank for rank, r in enumerate(results, 1) if set(r.words) & set(expected)]
        ranks.append(hits[0] if hits else None)
    return ranks
