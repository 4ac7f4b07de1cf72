"""The search index a model folder stores ready to map (`search_index/`), the mapped entry space (`SearchSpace`)
and the entries' senses (`EntrySenses`): results identical to the parsed folder, a stale or damaged index never
used, and a folder without one indexed once into the cache."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dictembed.dictionary import load_dictionary
from dictembed.dictionary.core import Dictionary
from dictembed.entry_senses import EntrySenses
from dictembed.errors import DictEmbedError
from dictembed.lexical_terms import StemSets
from dictembed.model_folder import DEFINITIONS_FILE, SEARCH_DIR, SPACE_DIR, SPACE_TENSORS
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_index import INDEX_META, SearchIndex, cached_index_dir, fingerprint
from dictembed.search_options import Filters
from dictembed.search_space import SearchSpace, as_float32, mapped_tensors

QUERIES = ["a pet that barks", "water from the sky", "something sweet and cold", "to go fast", "a ruler"]


def results(rd: ReverseDictionary, **filters: object) -> list[list[dict]]:
    found = rd.search_many(QUERIES, k=6, filters=Filters(**filters))  # type: ignore[arg-type]
    return [[r.to_dict() for r in rows] for rows in found]


def test_as_float32_is_astype_for_every_half_value_and_passes_float32_through() -> None:
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    converted = as_float32(halves)
    assert converted.dtype == np.float32 and converted.shape == (256, 256)
    np.testing.assert_array_equal(converted, halves.astype(np.float32))  # NaNs equal, signed zeros and infinities
    assert np.array_equal(np.signbit(converted), np.signbit(halves))
    singles = np.array([[1.5, -2.0]], dtype=np.float32)
    assert as_float32(singles[:, ::-1]).tolist() == [[-2.0, 1.5]]


@pytest.fixture()
def model(served_model: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(served_model, tmp_path / "model"))


def test_a_saved_model_folder_stores_its_search_index(served_model: Path) -> None:
    meta = json.loads((served_model / SEARCH_DIR / INDEX_META).read_text())
    assert meta["source"] == fingerprint(served_model)
    index = SearchIndex.open(served_model / SEARCH_DIR, meta["source"], len(SearchSpace.open(served_model)))
    assert index is not None and index.senses is not None and index.senses.pos_names
    # the stem sets of the lexical terms, stored as computed
    words, senses = StemSets.of(SearchSpace.open(served_model).words), StemSets.of_senses(index.senses)
    for stored, computed in ((index.word_stems, words), (index.definition_stems, senses)):
        assert stored is not None and stored.keys.dtype == np.uint64
        assert (stored.starts.tolist(), stored.keys.tolist()) == (computed.starts.tolist(), computed.keys.tolist())


def test_stem_sets_that_do_not_fit_the_entries_are_damage(model: Path, caplog) -> None:
    from safetensors.numpy import load_file, save_file

    path = model / SEARCH_DIR / "index.safetensors"
    source, entries = fingerprint(model), len(SearchSpace.open(model))
    arrays = load_file(path)
    arrays["definition_stem_starts"] = arrays["definition_stem_starts"][:-1]
    save_file(arrays, path)
    with caplog.at_level(logging.WARNING):
        assert SearchIndex.open(model / SEARCH_DIR, source, entries) is None
    assert "the stem sets do not fit the entries" in caplog.text


def test_the_mapped_folder_gives_the_results_of_the_parsed_one(model: Path) -> None:
    """Mapped space and stored index against the torch space and the dictionary parsed from definitions.jsonl."""
    mapped = ReverseDictionary.load(model)
    matrix = mapped.space.matrix if isinstance(mapped.space, SearchSpace) else None
    assert matrix is not None and isinstance(matrix.base, np.memmap) and not matrix.flags.writeable  # mapped
    parsed = ReverseDictionary(mapped.encoder, load_entry_space(model), load_dictionary(str(model / DEFINITIONS_FILE)))
    for filters in ({}, {"pos": "v"}, {"pos": "n", "initial": "c"}):
        assert results(mapped, **filters) == results(parsed, **filters)
    assert mapped.neighbours("car", 4) == parsed.neighbours("car", 4)
    assert mapped.score_kind == parsed.score_kind


def test_a_folder_without_its_index_is_indexed_once_into_the_cache(model: Path, caplog) -> None:
    before = results(ReverseDictionary.load(model))
    shutil.rmtree(model / SEARCH_DIR)
    cached = cached_index_dir(model, fingerprint(model))
    shutil.rmtree(cached, ignore_errors=True)
    with caplog.at_level(logging.INFO, logger="dictembed.search_index"):
        assert results(ReverseDictionary.load(model)) == before
    assert f"{model}: building the search index of its entry space (once: it is cached in {cached})" in caplog.text
    assert (cached / INDEX_META).is_file()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dictembed.search_index"):
        assert results(ReverseDictionary.load(model)) == before  # from the cache, without a word
    assert "search index" not in caplog.text


def test_a_folder_whose_own_index_is_stale_loads_from_the_cache_quietly(model: Path, caplog) -> None:
    """An index of another format (a folder saved by an earlier version) is not used; the cached one is, and only
    its first build is logged at INFO."""
    before = results(ReverseDictionary.load(model))
    meta_path = model / SEARCH_DIR / INDEX_META
    meta_path.write_text(json.dumps(json.loads(meta_path.read_text()) | {"format": 1}) + "\n")
    shutil.rmtree(cached_index_dir(model, fingerprint(model)), ignore_errors=True)
    with caplog.at_level(logging.INFO, logger="dictembed.search_index"):
        assert results(ReverseDictionary.load(model)) == before
    assert caplog.text.count("building the search index") == 1
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dictembed.search_index"):
        assert results(ReverseDictionary.load(model)) == before
    assert caplog.text == ""


def test_a_cached_index_never_answers_for_another_folder_or_an_edit_that_keeps_the_size(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two folders without an index of their own whose files differ only where the fingerprint does not read (here
    it reads 4 bytes a block, as it skips most of a large file) each get their own cached index: the edited copy
    shows its definition and the original its own, whichever loads first; an edit in place that keeps the size
    indexes the folder anew."""
    import dictembed.search_index as search_index

    monkeypatch.setattr(search_index, "SAMPLE_BYTES", 4)
    shutil.rmtree(model / SEARCH_DIR)
    edited = Path(shutil.copytree(model, tmp_path / "edited"))
    definitions = edited / DEFINITIONS_FILE
    text = definitions.read_text(encoding="utf-8")
    original = "a domesticated animal that barks"
    changed = text.replace(original, "a domesticated animal that BARKS", 1)
    assert changed != text
    definitions.write_text(changed, encoding="utf-8")
    assert fingerprint(edited) == fingerprint(model)  # the edit is where the fingerprint does not read

    def shown(folder: Path) -> set[str]:
        rd = ReverseDictionary.load(folder)
        return {d for r in rd.search("a pet that barks", 5) for ds in r.definitions.values() for d in ds}

    assert "a domesticated animal that BARKS" in shown(edited)
    assert original in shown(model) and "a domesticated animal that BARKS" not in shown(model)
    definitions.write_text(changed.replace("BARKS", "HOWLS"), encoding="utf-8")  # in place, the same size
    assert "a domesticated animal that HOWLS" in shown(edited)


def test_an_index_of_other_files_or_a_damaged_one_is_never_used(model: Path, caplog) -> None:
    before = results(ReverseDictionary.load(model))
    # another model's index: the space's words differ, so the fingerprint does
    space = json.loads((model / SPACE_DIR / "space.json").read_text())
    swapped = model / SEARCH_DIR / INDEX_META
    meta = json.loads(swapped.read_text())
    assert SearchIndex.open(model / SEARCH_DIR, "another", len(space["words"])) is None
    # damaged arrays: rebuilt, with a warning naming the folder, and the same results
    (model / SEARCH_DIR / "index.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......")
    with caplog.at_level(logging.WARNING):
        assert results(ReverseDictionary.load(model)) == before
    assert "damaged search index" in caplog.text and str(model / SEARCH_DIR) in caplog.text
    assert meta["source"] == fingerprint(model)


def test_a_changed_entry_space_makes_the_stored_index_stale(model: Path) -> None:
    source = fingerprint(model)
    tensors = model / SPACE_DIR / SPACE_TENSORS
    data = bytearray(tensors.read_bytes())
    data[-2:] = b"\x00\x3c"  # the last float16 of the last tensor becomes 1.0
    tensors.write_bytes(bytes(data))
    assert fingerprint(model) != source
    assert SearchIndex.open(model / SEARCH_DIR, fingerprint(model), len(SearchSpace.open(model))) is None


def test_a_truncated_tensors_file_is_a_one_line_error_naming_it(model: Path) -> None:
    tensors = model / SPACE_DIR / SPACE_TENSORS
    tensors.write_bytes(tensors.read_bytes()[:-100])
    with pytest.raises(DictEmbedError, match="tensors.safetensors: corrupt or truncated") as err:
        mapped_tensors(tensors)
    assert "\n" not in str(err.value)
    with pytest.raises(DictEmbedError, match="corrupt or truncated"):
        ReverseDictionary.load(model)


def test_nan_entry_vectors_are_refused_by_the_mapped_space(model: Path) -> None:
    tensors = model / SPACE_DIR / SPACE_TENSORS
    header = json.loads(tensors.read_bytes()[8 : 8 + int.from_bytes(tensors.read_bytes()[:8], "little")])
    start = 8 + int.from_bytes(tensors.read_bytes()[:8], "little") + header["matrix"]["data_offsets"][0]
    data = bytearray(tensors.read_bytes())
    data[start : start + 2] = b"\x00\x7e"  # a float16 NaN
    tensors.write_bytes(bytes(data))
    with pytest.raises(DictEmbedError, match="cannot be trusted: tensors.safetensors: matrix holds NaN"):
        SearchSpace.open(model)


def test_entry_senses_keep_each_entrys_senses_and_parts_of_speech() -> None:
    dictionary = Dictionary(name="toy")
    dictionary.add("run", "to move fast on foot", pos="v")
    dictionary.add("run", "a score in cricket", pos="noun")
    dictionary.add("quick", "fast", pos="a")
    dictionary.add("café", "a small restaurant ☕")
    senses = EntrySenses.of(["quick", "absent", "run", "café"], dictionary)
    assert senses.check() is None
    assert senses.senses(2) == [("to move fast on foot", "v"), ("a score in cricket", "noun")]
    assert senses.senses(1) == [] and not senses.holds(1) and senses.holds(3)
    assert senses.senses(3) == [("a small restaurant ☕", None)]
    assert senses.with_pos("n").tolist() == [False, False, True, False]  # "noun" is WordNet's n
    assert senses.with_pos("v").tolist() == [False, False, True, False]
    assert senses.with_pos("a").tolist() == [True, False, False, False]
    assert EntrySenses.of(["café"], dictionary).has_pos is False


def test_searching_a_mapped_folder_imports_no_torch(served_model: Path) -> None:
    """The search itself (space, index, senses, scores) is numpy; only the encoder brings torch in."""
    code = (
        "import sys\n"
        "from dictembed.reverse_dictionary import ReverseDictionary\n"
        "from dictembed.search_space import SearchSpace\n"
        "from dictembed.search_index import SearchIndex, fingerprint\n"
        "from dictembed.model_folder import SEARCH_DIR\n"
        f"folder = {str(served_model)!r}\n"
        "space = SearchSpace.open(folder)\n"
        "from pathlib import Path\n"
        "index = SearchIndex.open(Path(folder) / SEARCH_DIR, fingerprint(Path(folder)), len(space))\n"
        "class Fixed:\n"
        "    dim = space.dim\n"
        "    device = 'cpu'\n"
        "    def embed(self, texts, batch_size=32, prompt=None, show_progress=None, chunk=None):\n"
        "        import numpy as np\n"
        "        yield np.asarray(space.matrix[: len(texts)], dtype=np.float32)\n"
        "rd = ReverseDictionary(Fixed(), space, None, index=index)\n"
        "top = rd.search('anything', k=3)\n"
        "print(top[0].words, bool(top[0].definitions), [m for m in ('torch', 'transformers') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("True []"), out


def test_two_processes_index_a_folder_once_into_the_cache(model: Path, tmp_path: Path) -> None:
    shutil.rmtree(model / SEARCH_DIR)
    cache = tmp_path / "cache"
    code = (
        "import json\n"
        "from dictembed.reverse_dictionary import ReverseDictionary\n"
        f"rd = ReverseDictionary.load({str(model)!r})\n"
        "print(json.dumps([r.to_dict() for r in rd.search('a pet that barks', k=4)]))\n"
    )
    env = {**os.environ, "DICTEMBED_CACHE": str(cache)}
    runs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0] and outputs[0] == outputs[1] and json.loads(outputs[0])
    folders = [p.name for p in (cache / "search_index").iterdir() if p.is_dir()]
    cached = cached_index_dir(model, fingerprint(model))
    assert folders == [cached.name]  # one index, no staging or old copy left behind


def test_a_cache_that_cannot_be_written_still_searches(model: Path, tmp_path: Path, monkeypatch, caplog) -> None:
    before = results(ReverseDictionary.load(model))
    shutil.rmtree(model / SEARCH_DIR)
    (tmp_path / "cache-is-a-file").write_text("")
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache-is-a-file"))
    with caplog.at_level(logging.INFO):
        assert results(ReverseDictionary.load(model)) == before
    assert "is not cached" in caplog.text


@settings(max_examples=300, deadline=None)
@given(
    scores=st.lists(st.integers(0, 4), min_size=1, max_size=40),
    k=st.integers(1, 45),
    masked=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_best_k_are_those_a_full_sort_keeps_ties_by_index(scores: list[int], k: int, masked: bool, seed: int):
    """At the k-th score's ties the lowest indices are kept, as a full sort would: a smaller k is a prefix of a larger
    one (argpartition alone kept an arbitrary few of them)."""
    from dictembed.search_index import top_indices

    values = np.asarray(scores, dtype=np.float32)
    allowed = np.random.default_rng(seed).random(len(values)) < 0.7 if masked else None
    index = np.flatnonzero(allowed) if allowed is not None else np.arange(len(values))
    expected = index[np.lexsort((index, -values[index]))][:k]
    np.testing.assert_array_equal(top_indices(values, allowed, k), expected)
