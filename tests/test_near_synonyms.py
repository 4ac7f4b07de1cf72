"""Near-synonym mode (`dictembed.near_synonyms`, `ReverseDictionary.neighbours`): the entry vectors' cosine mixed with
the best pair of senses, on a space whose definition vectors are set by hand, and its two stages on a random one."""

from __future__ import annotations

import numpy as np
import pytest

from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.near_synonyms import SynonymScoring, SynonymSearch
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import CoarseIndex, EntryGroups
from dictembed.search_options import Filters, Ranking
from dictembed.search_space import SearchSpace

DIM = 32  # the tiny BERT's


def axis(i: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.eye(DIM, dtype=np.float32)[i]


SEASON = axis(0)
# word -> [(definition vector, pos)]. `fall` has five senses, one of them `autumn`'s only sense, so its mean sits
# far from `autumn`'s; `harvest` and `summer` are each one sense near that sense, nearer in the mean than `fall`.
SENSES: dict[str, list[tuple[np.ndarray, str]]] = {
    "autumn": [(SEASON, "n")],
    "fall season": [(SEASON, "n")],  # the same senses as autumn: one group
    "fall": [(SEASON, "n"), (axis(1), "v"), (axis(2), "v"), (axis(3), "v"), (axis(4), "n")],
    "harvest": [(axis(0, 0.6) + axis(5, 0.8), "n")],
    "summer": [(axis(0, 0.55) + axis(6, np.sqrt(1 - 0.55**2)), "n")],
    "autumnal": [(axis(0, 0.99) + axis(7, np.sqrt(1 - 0.99**2)), "a")],
    "descend": [(axis(1), "v")],
    "tumble": [(axis(2), "v")],
}
WORDS = list(SENSES)


@pytest.fixture(scope="module")
def rd(bert_path) -> ReverseDictionary:
    """A reverse dictionary over `SENSES` (entry vectors the means of their definition vectors), no frequency prior."""
    dictionary = Dictionary(name="seasons")
    for word, senses in SENSES.items():
        for i, (_, pos) in enumerate(senses):
            dictionary.add(word, f"{word} sense {i}", pos=pos)
    definitions = np.stack([vector for senses in SENSES.values() for vector, _ in senses])
    matrix = np.stack([np.mean([vector for vector, _ in senses], axis=0) for senses in SENSES.values()])
    counts = [len(senses) for senses in SENSES.values()]
    space = DefinitionSpace(WORDS, matrix, "cosine", counts=counts, definitions=definitions)
    encoder = Encoder.load(str(bert_path), pooling="mean")
    return ReverseDictionary(encoder, space, dictionary, name="seasons", ranking=Ranking(frequency_weight=0))


def _words(results) -> list[str]:
    return [word for result in results for word in result.words]


def _amp(rd: ReverseDictionary, a: str, b: str) -> float:
    space = rd.space
    assert isinstance(space, SearchSpace)
    u, v = (np.asarray(space.matrix[space.index[w]], dtype=np.float64) for w in (a, b))
    return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))


def test_a_synonym_of_one_sense_is_found_where_the_entry_vectors_miss_it(rd) -> None:
    before = rd.neighbours("autumn", k=3, scoring=SynonymScoring(sense_weight=0))
    assert _words(before) == ["fall season", "autumnal", "harvest"]  # fall's mean is far: 0.447 < 0.6
    assert _amp(rd, "autumn", "fall") < _amp(rd, "autumn", "harvest")
    now = rd.neighbours("autumn", k=3)
    assert _words(now) == ["fall season", "autumnal", "fall"]
    fall = now[2]
    assert fall.score == pytest.approx((_amp(rd, "autumn", "fall") + 1.0) / 2, abs=1e-3)  # w = 1, the pair is 1
    assert now[0].score == pytest.approx(1.0, abs=1e-3)


def test_a_pair_of_other_parts_of_speech_counts_less(rd) -> None:
    amp = _amp(rd, "autumn", "autumnal")  # its one sense (an adjective's) is 0.99 from autumn's (a noun's)
    plain = rd.neighbours("autumn", k=2, scoring=SynonymScoring(pos_penalty=0))[1]
    penalised = rd.neighbours("autumn", k=2, scoring=SynonymScoring(pos_penalty=0.2))[1]
    assert plain.words == penalised.words == ["autumnal"]
    assert plain.score == pytest.approx((amp + 0.99) / 2, abs=1e-3)
    assert penalised.score == pytest.approx((amp + 0.99 - 0.2) / 2, abs=1e-3)
    heavy = rd.neighbours("autumn", k=3, scoring=SynonymScoring(sense_weight=4, pos_penalty=1.0))
    assert _words(heavy)[1] == "fall"  # the best noun pair now outweighs the adjective's


def test_a_word_the_dictionary_lists_as_similar_ranks_as_sharing_a_sense(rd) -> None:
    """`summer` (cosine .55 to autumn's one sense) ranks below harvest; listed as similar to autumn (as WordNet lists
    a head adjective's satellites), its best pair counts as a shared sense's, 1."""
    assert _words(rd.neighbours("autumn", k=4))[3] == "harvest"
    dictionary = Dictionary(name="seasons")
    for word, senses in SENSES.items():
        for i, (_, pos) in enumerate(senses):
            dictionary.add(word, f"{word} sense {i}", pos=pos, similar=["summer"] if word == "autumn" else ())
    listing = ReverseDictionary(rd.encoder, rd.space, dictionary, name="seasons", ranking=rd.ranking)
    found = listing.neighbours("autumn", k=4)
    assert _words(found) == ["fall season", "autumnal", "summer", "fall"]  # its entry vector is nearer than fall's
    summer = next(r for r in found if r.words == ["summer"])
    assert summer.score == pytest.approx((_amp(rd, "autumn", "summer") + 1.0) / 2, abs=1e-3)
    assert _words(listing.neighbours("autumn", k=4, scoring=SynonymScoring(similar_pair=0)))[3] == "harvest"
    assert "summer" not in _words(listing.neighbours("autumn", k=10, pos="v"))  # filters still apply


def test_antonyms_are_left_out_on_either_path_but_a_word_also_listed_as_similar(rd) -> None:
    """`summer` an antonym of autumn: left out by the mixed score and by the entry vectors' cosine alone; listed as
    similar too (in another sense, as WordNet lists some words both ways), it stays."""

    def listing(antonym_sense: int | None, similar_sense: int | None) -> ReverseDictionary:
        dictionary = Dictionary(name="seasons")
        for word, senses in SENSES.items():
            for i, (_, pos) in enumerate(senses):
                antonyms = ["summer"] if word == "fall" and i == antonym_sense else ()
                similar = ["summer"] if word == "fall" and i == similar_sense else ()
                dictionary.add(word, f"{word} sense {i}", pos=pos, antonyms=antonyms, similar=similar)
        return ReverseDictionary(rd.encoder, rd.space, dictionary, name="seasons", ranking=rd.ranking)

    opposed = listing(0, None)
    assert opposed.antonyms("fall") == ["summer"]
    for scoring in (None, SynonymScoring(sense_weight=0)):
        found = _words(opposed.neighbours("fall", k=10, scoring=scoring))
        assert "summer" not in found and len(found) == len(WORDS) - 2
    both = listing(0, 1)
    assert both.antonyms("fall") == [] and "summer" in _words(both.neighbours("fall", k=10))


def test_filters_apply_and_the_word_is_left_out(rd) -> None:
    every = rd.neighbours("fall", k=10)
    assert "fall" not in _words(every) and sorted(_words(every)) == sorted(set(WORDS) - {"fall"})
    assert _words(rd.neighbours("fall", k=10, pos="v")) == ["descend", "tumble"]
    assert _words(rd.neighbours("fall", k=10, filters=Filters(pattern="s*"))) == ["summer"]
    assert _words(rd.neighbours("autumn", k=4, words="single")) == ["autumnal", "fall", "harvest", "summer"]
    alone = rd.neighbours("harvest", k=10)  # alone in its group: never listed, no empty result
    assert "harvest" not in _words(alone) and all(r.words for r in alone) and len(alone) == len(WORDS) - 2
    assert _words(rd.neighbours("autumn", k=1)) == ["fall season"]  # its own group's other word first
    with pytest.raises(DictEmbedError, match="not an entry"):
        rd.neighbours("spring")


def test_the_two_stages_score_exactly_what_they_keep() -> None:
    """On a random space with a coarse index: every group kept (depth) gives the score computed by hand; a shallow
    rough stage still keeps an entry that shares one sense of a polysemous query."""
    rng = np.random.default_rng(0)
    entries, dim = 600, 48
    query, twin = 0, entries - 1  # the twin's last sense is the query's third
    counts = rng.integers(1, 5, size=entries)
    counts[query] = 4
    first = np.cumsum(counts) - counts
    definitions = rng.normal(size=(int(counts.sum()), dim)).astype(np.float32)
    definitions[first[twin] + counts[twin] - 1] = definitions[first[query] + 2]
    matrix = np.stack([definitions[f : f + c].mean(0) for f, c in zip(first, counts, strict=True)])
    space = SearchSpace([f"w{i}" for i in range(entries)], matrix, counts=counts, definitions=definitions)
    groups = EntryGroups.of(matrix)
    assert len(groups) == entries
    inverse = (1 / np.linalg.norm(matrix, axis=1)).astype(np.float32)
    unit = matrix * inverse[:, None]
    search = SynonymSearch(groups, space, inverse, CoarseIndex.of(unit, 40))
    scoring = SynonymScoring(depth=entries)
    top, scores = search.nearest(query, query, None, 5, scoring, alone=True)
    norm = definitions / np.linalg.norm(definitions, axis=1, keepdims=True)
    senses = norm[first[query] : first[query] + 4]
    pair = np.array([(norm[f : f + c] @ senses.T).max() for f, c in zip(first, counts, strict=True)])
    expected = (unit @ unit[query] + pair) / 2
    expected[query] = -np.inf
    assert top.tolist() == np.argsort(-expected)[:5].tolist()
    np.testing.assert_allclose(scores, expected[top], atol=2e-3)
    assert top[0] == twin
    shallow, _ = search.nearest(query, query, None, 1, SynonymScoring(depth=10), alone=True)
    assert shallow.tolist() == [twin]
    far = np.array([np.argsort(expected)[1]])  # the farthest: a similar word the rough stage never keeps
    found = search.candidates(query, query, None, 10, query, 1.0, far)
    assert len(found.groups) == 11 and found.groups[found.listed].tolist() == far.tolist()  # still scored exactly
    listed, listed_scores = search.nearest(query, query, None, 11, SynonymScoring(depth=10), True, far)
    score = listed_scores[listed.tolist().index(far[0])]
    assert score == pytest.approx((unit[far[0]] @ unit[query] + 1) / 2, abs=2e-3)  # its best pair counted 1
    off, _ = search.nearest(query, query, None, 10, SynonymScoring(depth=10, similar_pair=0), True, far)
    assert far[0] not in off.tolist()  # its own best pair: last


def test_a_bad_scoring_is_one_error() -> None:
    with pytest.raises(DictEmbedError, match="sense_weight: a finite number >= 0"):
        SynonymScoring(sense_weight=-1)
    with pytest.raises(DictEmbedError, match="depth: a whole number >= 1"):
        SynonymScoring(depth=0)
