"""The lexical substitution benchmarks (LS07, CoInCo): their files and their scores.

Files: ``*.preprocessed`` lines are ``target.pos<TAB>id<TAB>token_index<TAB>tokenized sentence``;
``*.gold`` lines are ``target.pos id :: sub1 count;sub2 count;...``.

Scores: those of the SemEval-2007 lexical substitution task (McCarthy & Navigli, 2007) and precision@k.

``gold`` maps an instance id to its gold multiset: substitute -> number of annotators who gave it.
``answers`` maps an instance id to the system's answers for it, best first. As in the official scorer,
instances whose gold multiset is empty are left out of every denominator; an instance the system did not
answer counts against recall but not precision. With |H_i| the total count of gold annotations of item i,
freq_i(s) the count of answer s, and S_i the system's answers:

* best:      score_i = sum_{s in S_i} freq_i(s) / |H_i| / |S_i|        (S_i = the best answer(s))
* oot:       score_i = sum_{s in S_i} freq_i(s) / |H_i|                (S_i = up to 10 answers)
* best-mode: 1 if the first answer is the mode, over items that have a mode (one substitute given
  strictly more often than every other one);
* oot-mode:  1 if the mode is among the (up to 10) answers, over the same items;
* P@k:       |top-k answers that are gold substitutes| / k, averaged over all items with gold
  (an unanswered item scores 0), as in the BERT-era lexical substitution papers.

Precision averages over attempted items, recall over all items with gold; every score is x 100.
Answers and gold substitutes are compared after lower-casing and collapsing whitespace.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.paths import data_dir as default_data_dir
from dictembed.text_files import read_lines
from dictembed.wordnet_pos import to_wordnet_pos

logger = logging.getLogger(__name__)

Gold = Mapping[str, Mapping[str, int]]
Answers = Mapping[str, Sequence[str]]

OOT_SIZE = 10
DATASETS = {
    "LS07": ("lexsub/LS07/all/lst_all.preprocessed", "lexsub/LS07/all/lst_all.gold"),
    "CoInCo": ("lexsub/LS14/trial/coinco_trial.preprocessed", "lexsub/LS14/trial/coinco_trial.gold"),
}


class PR(NamedTuple):
    """Precision (over attempted items) and recall (over all items with gold), both x 100."""

    precision: float
    recall: float


def normalise(text: str) -> str:
    """The form in which answers and gold substitutes are compared."""
    return " ".join(text.lower().split())


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line (`dictembed.text_files.read_lines`); a line that is not UTF-8 is read as
    Latin-1 and logged (LS07's preprocessed files have one)."""
    return enumerate(read_lines(path, fallback="latin-1", hint=None), start=1)


def _parse_substitutes(path: Path, number: int, text: str) -> Counter[str]:
    """``sub1 count;sub2 count;...`` -> Counter (multi-word substitutes allowed)."""
    counts: Counter[str] = Counter()
    for item in text.split(";"):
        if not item.strip():
            continue
        word, _, count = item.strip().rpartition(" ")
        if not word.strip() or not (count.isascii() and count.isdigit()):  # not "²", which int() refuses
            raise DataFormatError(path, f"expected 'substitute count', got {item.strip()!r}", number)
        counts[normalise(word)] += int(count)
    return counts


def read_gold(path: str | Path) -> dict[str, Counter[str]]:
    """Read a ``*.gold`` file (``target.pos id :: sub1 count;sub2 count;...``): id -> gold multiset.

    Instances listed without any substitute are kept with an empty Counter (they are left out of every
    score) and reported with a warning.
    """
    path = Path(path)
    gold: dict[str, Counter[str]] = {}
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        head, sep, rest = line.partition("::")
        fields = head.split()
        if not sep or len(fields) < 2:
            raise DataFormatError(path, "expected 'target.pos id :: sub1 count;sub2 count;...'", number)
        instance_id = fields[-1]
        if instance_id in gold:
            raise DataFormatError(path, f"instance id {instance_id!r} appears twice", number)
        gold[instance_id] = _parse_substitutes(path, number, rest)
    if not gold:
        raise DataFormatError(path, "no gold instances ('target.pos id :: sub1 count;...' lines)")
    empty = sum(1 for counts in gold.values() if not has_gold(counts))
    if empty:
        logger.warning("%s: %d instance(s) have no gold substitute; they are not scored", path, empty)
    return gold


@dataclass(frozen=True)
class LexSubInstance:
    """One target word in context: ``tokens[index]`` is an occurrence of ``lemma`` with WordNet ``pos``."""

    instance_id: str
    lemma: str
    pos: str
    tokens: tuple[str, ...]
    index: int


@dataclass
class LexSubData:
    """A lexical substitution data set: the instances and their gold multisets (id -> Counter)."""

    name: str
    instances: list[LexSubInstance]
    gold: dict[str, Counter[str]]

    @property
    def n_without_gold(self) -> int:
        return sum(1 for inst in self.instances if not has_gold(self.gold.get(inst.instance_id)))

    def head(self, limit: int | None) -> LexSubData:
        """The first ``limit`` instances with their gold (all of them when ``limit`` is None)."""
        if limit is None:
            return self
        instances = self.instances[:limit]
        ids = {inst.instance_id for inst in instances}
        return LexSubData(self.name, instances, {k: v for k, v in self.gold.items() if k in ids})


def read_preprocessed(path: str | Path) -> list[LexSubInstance]:
    """Read ``target.pos<TAB>id<TAB>token_index<TAB>tokenized sentence`` lines."""
    path, instances, seen = Path(path), [], set()
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise DataFormatError(path, f"expected 4 tab-separated fields, got {len(fields)}", number)
        lemma, _, tag = fields[0].rpartition(".")
        tokens = tuple(fields[3].split())
        index = fields[2].strip()
        if not lemma or not (index.isascii() and index.isdigit()) or int(index) >= len(tokens):
            raise DataFormatError(path, f"bad target {fields[0]!r} or index {fields[2]!r}", number)
        if fields[1] in seen:
            raise DataFormatError(path, f"instance id {fields[1]!r} appears twice", number)
        try:
            pos = to_wordnet_pos(tag)
        except DictEmbedError as error:
            raise DataFormatError(path, str(error), number) from error
        seen.add(fields[1])
        instances.append(LexSubInstance(fields[1], lemma.lower(), pos, tokens, int(index)))
    if not instances:
        raise DataFormatError(path, "no instances ('target.pos<TAB>id<TAB>index<TAB>sentence' lines)")
    return instances


def load_lexsub(dataset: str = "LS07", data_dir: str | Path | None = None) -> LexSubData:
    """Load LS07 (SemEval-2007 trial+test) or CoInCo (trial) from the shared data folder."""
    if dataset not in DATASETS:
        raise DictEmbedError(f"unknown lexical substitution data set {dataset!r}; choose one of {list(DATASETS)}")
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    instances = read_preprocessed(root / DATASETS[dataset][0])
    gold = read_gold(root / DATASETS[dataset][1])
    unknown = set(gold) - {inst.instance_id for inst in instances}
    if unknown:
        logger.warning("%s: %d gold instance(s) have no sentence; they count as unanswered", dataset, len(unknown))
    data = LexSubData(dataset, instances, gold)
    if data.n_without_gold:
        logger.warning(
            "%s: %d of %d instances have no gold substitutes and are not scored",
            dataset,
            data.n_without_gold,
            len(instances),
        )
    return data


def mode(counts: Mapping[str, int]) -> str | None:
    """The single most frequent substitute, or None when the top count is tied (or there is no gold)."""
    ranked = Counter(counts).most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def has_gold(counts: Mapping[str, int] | None) -> bool:
    """Whether an instance's gold multiset names a substitute at all (counts of 0 name none): what is scored."""
    return counts is not None and sum(counts.values()) > 0


def _with_gold(gold: Gold) -> dict[str, Mapping[str, int]]:
    return {key: counts for key, counts in gold.items() if has_gold(counts)}


def _pr(total: float, attempted: int, items: int) -> PR:
    return PR(100.0 * total / attempted if attempted else 0.0, 100.0 * total / items if items else 0.0)


def _credit(gold: Gold, answers: Answers, size: int | None, divide: bool) -> PR:
    """best (divide=True) and oot (divide=False) credit: gold frequency of the answers over |H_i|."""
    items = _with_gold(gold)
    total, attempted = 0.0, 0
    for key, counts in items.items():
        guesses = [normalise(g) for g in list(answers.get(key) or [])[:size]]
        if not guesses:
            continue
        attempted += 1
        credit = sum(counts.get(g, 0) for g in guesses) / sum(counts.values())
        total += credit / len(guesses) if divide else credit
    return _pr(total, attempted, len(items))


def best(gold: Gold, answers: Answers) -> PR:
    """SemEval-2007 ``best``: credit of each item divided by its number of answers."""
    return _credit(gold, answers, None, divide=True)


def oot(gold: Gold, answers: Answers, size: int = OOT_SIZE) -> PR:
    """SemEval-2007 ``oot`` (out of ten): undivided credit of the first ``size`` answers."""
    return _credit(gold, answers, size, divide=False)


def _mode_hits(gold: Gold, answers: Answers, size: int) -> PR:
    modes = {key: mode(counts) for key, counts in _with_gold(gold).items()}
    modes = {key: m for key, m in modes.items() if m is not None}
    hits, attempted = 0, 0
    for key, gold_mode in modes.items():
        guesses = [normalise(g) for g in list(answers.get(key) or [])[:size]]
        if guesses:
            attempted += 1
            hits += gold_mode in guesses
    return _pr(hits, attempted, len(modes))


def best_mode(gold: Gold, answers: Answers) -> PR:
    """``best-mode``: the first answer is the item's mode, over items that have a mode."""
    return _mode_hits(gold, answers, 1)


def oot_mode(gold: Gold, answers: Answers, size: int = OOT_SIZE) -> PR:
    """``oot-mode``: the mode is among the first ``size`` answers, over items that have a mode."""
    return _mode_hits(gold, answers, size)


def precision_at_k(gold: Gold, answers: Answers, k: int) -> float:
    """Mean over items with gold of |top-k answers in the gold set| / k, x 100."""
    items = _with_gold(gold)
    if not items:
        return 0.0
    total = 0.0
    for key, counts in items.items():
        guesses = [normalise(g) for g in list(answers.get(key) or [])[:k]]
        total += sum(1 for g in guesses if counts.get(g, 0) > 0) / k
    return 100.0 * total / len(items)


def score_ranked(gold: Gold, ranked: Answers) -> dict[str, float]:
    """All scores for ranked candidate lists: best uses the top-1 answer, oot the top 10 (recall-style)."""
    top1 = {key: list(cands)[:1] for key, cands in ranked.items()}
    top10 = {key: list(cands)[:OOT_SIZE] for key, cands in ranked.items()}
    items = _with_gold(gold)
    return {
        "best": best(gold, top1).recall,
        "best_mode": best_mode(gold, top1).recall,
        "oot": oot(gold, top10).recall,
        "oot_mode": oot_mode(gold, top10).recall,
        "p_at_1": precision_at_k(gold, ranked, 1),
        "p_at_3": precision_at_k(gold, ranked, 3),
        "n_scored": len(items),
        "n_with_mode": sum(1 for counts in items.values() if mode(counts) is not None),
        "n_attempted": sum(1 for key in items if ranked.get(key)),
    }
