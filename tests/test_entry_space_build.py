"""Building a definition entry space: encoded in parts that are kept beside the cache entry, so an interrupted
build resumes from its last part and ends with the matrix of an uninterrupted build, bit for bit; the size and
an estimate of the time are logged; a cache that cannot be used is named once and the build goes on without it."""

from __future__ import annotations

import builtins
import errno
import io
import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from dictembed import cache, entry_vectors
from dictembed.backends.onnx import runtime
from dictembed.cache import cache_key
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.entry_vectors import encode_in_parts, headword_vectors, part_sizes
from dictembed.errors import DictEmbedError

BATCH = 2


@pytest.fixture()
def encoder(bert_path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean", device="cpu").eval()


@pytest.fixture()
def small_parts(monkeypatch) -> int:
    """Parts of 5 definitions (rounded down to 4, two batches of 2): the 16 toy definitions make 4 parts."""
    monkeypatch.setattr(entry_vectors, "PART_SIZE", 5)
    return 4


@pytest.fixture(autouse=True)
def forget_unusable_caches():
    """Each test sees the warning about an unusable cache afresh (it is said once per process)."""
    cache._UNUSABLE.clear()
    yield
    cache._UNUSABLE.clear()


def _reference_matrix(encoder: Encoder, dictionary, entries: str = "amp") -> torch.Tensor:
    """The matrix as the build made it before parts: one `encode` call over every definition, averaged."""
    pooled = encoder.with_pooling("cls" if entries == "ac" else "mean")
    vectors = pooled.encode([d for _, d in dictionary.pairs()], batch_size=BATCH)
    counts = np.array([len(e.senses) for e in dictionary])
    matrix = np.zeros((len(counts), vectors.shape[1]), dtype=np.float64)
    np.add.at(matrix, np.repeat(np.arange(len(counts)), counts), vectors)
    matrix /= counts[:, None]
    return torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float32))


class Killed(KeyboardInterrupt):
    """What the test injects into a build: a Ctrl-C after some parts."""


def _interrupt_after(monkeypatch, parts: int) -> list[int]:
    """Make `Encoder._embed_chunk` (one call per part) raise `Killed` at its call `parts + 1`; the calls so far."""
    calls: list[int] = []
    real = Encoder._embed_chunk

    def chunk(self, texts, *args, **kwargs):
        calls.append(len(texts))
        if len(calls) > parts:
            raise Killed
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Encoder, "_embed_chunk", chunk)
    return calls


# ---------------------------------------------------------------------------------------------- parts
def test_parts_are_whole_batches() -> None:
    assert part_sizes(0, 4) == []
    assert part_sizes(10, 128) == [10]
    assert part_sizes(25_000, 128) == [9_984, 9_984, 5_032]
    assert all(size % 3 == 0 for size in part_sizes(100_000, 3)[:-1])


@pytest.mark.parametrize("batch_size", [1, 2, 3, 5])
def test_encoding_in_parts_is_one_encode_bit_for_bit(encoder, toy_dictionary, small_parts, batch_size) -> None:
    """Parts start at batch boundaries of the one length-sorted order, so every batch holds the same texts."""
    texts = [d for _, d in toy_dictionary.pairs()] + ["a", "the longest definition of them all, by a long way"]
    expected = encoder.encode(texts, batch_size=batch_size)
    assert len(part_sizes(len(texts), batch_size)) > 1
    assert np.array_equal(encode_in_parts(encoder, texts, batch_size, None, "test"), expected)


def test_a_repeated_definition_is_encoded_once_and_every_repeat_gets_its_vector(
    encoder, toy_dictionary, small_parts, tmp_path, monkeypatch
) -> None:
    """WordNet's synonyms share their synset's gloss (206,978 definitions, 116,697 distinct): each distinct text is
    encoded once, in parts that resume as any build's, and its repeats are its vector bit for bit."""
    texts = [d for _, d in toy_dictionary.pairs()]
    repeated = texts + texts[:3] + [texts[0]]
    encoded: list[str] = []
    real = Encoder._embed_chunk

    def chunk(self, batch, *args, **kwargs):
        encoded.extend(batch)
        return real(self, batch, *args, **kwargs)

    monkeypatch.setattr(Encoder, "_embed_chunk", chunk)
    vectors = encode_in_parts(encoder, repeated, BATCH, tmp_path / "parts", "test")
    assert sorted(encoded) == sorted(set(texts)) and len(set(texts)) == len(texts)
    assert np.array_equal(vectors[: len(texts)], encode_in_parts(encoder, texts, BATCH, None, "test"))
    assert np.array_equal(vectors[len(texts) :], vectors[[0, 1, 2, 0]])
    assert np.array_equal(vectors[: len(texts)], encoder.encode(texts, batch_size=BATCH))


def test_an_interrupted_build_resumes_from_its_last_part_and_equals_an_uninterrupted_one(
    encoder, toy_dictionary, small_parts, tmp_path, monkeypatch, caplog
) -> None:
    straight = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path / "a", batch_size=BATCH)
    assert torch.equal(straight.matrix, _reference_matrix(encoder, toy_dictionary))  # as cached before parts

    folder = tmp_path / "b"
    path = cache.space_path(cache_key(encoder, toy_dictionary, "amp", False), folder)
    parts = cache.parts_folder(path)
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 2)
        with pytest.raises(Killed):
            DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=folder, batch_size=BATCH)
    assert not path.exists() and sorted(p.name for p in parts.glob("part-*")) == ["part-00000.npy", "part-00001.npy"]

    calls = _interrupt_after(monkeypatch, 99)
    with caplog.at_level(logging.INFO, logger="dictembed.entry_vectors"):
        resumed = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=folder, batch_size=BATCH)
    assert calls == [small_parts, small_parts]  # only the two parts that were not kept
    assert "resuming at definition 8 (2 of 4 parts kept" in caplog.text
    assert torch.equal(resumed.matrix, straight.matrix)
    assert path.exists() and not parts.exists()  # the parts are removed once the cache entry is written
    assert path.name == f"definitions-{cache_key(encoder, toy_dictionary, 'amp', False)}.safetensors"


def test_the_size_and_an_estimate_are_logged_after_the_first_part(
    encoder, toy_dictionary, small_parts, tmp_path, caplog
) -> None:
    with caplog.at_level(logging.INFO, logger="dictembed.entry_vectors"):
        DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=tmp_path, batch_size=BATCH)
    lines = [r.getMessage() for r in caplog.records if "about" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert lines[0].startswith("building the ac entry space: 16 definitions of 8 entries, about ")
    assert lines[0].endswith(" definitions/s")
    assert "in 4 parts, kept in" in caplog.text


def test_headword_vectors_are_counted_in_headwords(encoder, toy_dictionary, small_parts, tmp_path, caplog) -> None:
    words = sorted({entry.headword for entry in toy_dictionary})[:8] * 2
    with caplog.at_level(logging.INFO, logger="dictembed.entry_vectors"):
        vectors = entry_vectors.headword_vectors(encoder, words, batch_size=BATCH, cache_dir=tmp_path)
    assert vectors.shape == (len(words), encoder.dim)
    lines = [r.getMessage() for r in caplog.records if "about" in r.getMessage()]
    assert len(lines) == 1 and lines[0].endswith(" headwords/s"), caplog.text
    assert lines[0].startswith(f"building the headword vectors of {len(words)} entries, about ")


def test_parts_of_another_batch_size_are_not_reused(
    encoder, toy_dictionary, small_parts, tmp_path, monkeypatch, caplog
) -> None:
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 1)
        with pytest.raises(Killed):
            DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=BATCH)
    with caplog.at_level(logging.INFO, logger="dictembed.cache"):
        space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=1)
    assert "parts of another build" in caplog.text
    expected = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=None, batch_size=1)
    assert torch.equal(space.matrix, expected.matrix)


def test_a_damaged_part_is_encoded_again(encoder, toy_dictionary, small_parts, tmp_path, monkeypatch) -> None:
    path = cache.space_path(cache_key(encoder, toy_dictionary, "amp", False), tmp_path)
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 3)
        with pytest.raises(Killed):
            DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=BATCH)
    second = cache.parts_folder(path) / "part-00001.npy"
    second.write_bytes(second.read_bytes()[:40])  # truncated: parts from it on are encoded again
    calls = _interrupt_after(monkeypatch, 99)
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=BATCH)
    assert len(calls) == 3 and torch.equal(space.matrix, _reference_matrix(encoder, toy_dictionary))


def test_cache_clear_removes_the_parts_of_an_unfinished_build(
    encoder, toy_dictionary, small_parts, tmp_path, monkeypatch
) -> None:
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 2)
        with pytest.raises(Killed):
            DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=BATCH)
    (tmp_path / "notes.txt").write_text("not dictembed's")
    assert len([p for p in cache.own_files(tmp_path) if p.suffix == ".npy"]) == 2
    removed, _ = cache.clear_cache(tmp_path)
    assert {p.name for p in removed} >= {"part-00000.npy", "part-00001.npy", "manifest.json"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_headword_vectors_cut_short_resume_from_their_parts_and_leave_none(
    encoder, toy_dictionary, small_parts, tmp_path, monkeypatch, caplog
) -> None:
    words = [entry.headword for entry in toy_dictionary]
    words += [word.upper() for word in words]  # 16 distinct words: 4 parts of 4
    straight = headword_vectors(encoder, words, batch_size=BATCH, cache_dir=tmp_path / "a")
    assert not any((tmp_path / "a").iterdir())  # nothing is left in the cache

    folder = tmp_path / "b"
    parts = cache.headword_parts(encoder, words, BATCH, folder)
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 2)
        with pytest.raises(Killed):
            headword_vectors(encoder, words, batch_size=BATCH, cache_dir=folder)
    assert sorted(p.name for p in parts.glob("part-*")) == ["part-00000.npy", "part-00001.npy"]
    assert parts in [p.parent for p in cache.own_files(folder)]  # `cache clear` removes a save's leftovers

    assert cache.headword_parts(encoder, words, 1, folder) != parts  # another batch size, other parts
    assert cache.headword_parts(encoder, words[:-1], BATCH, folder) != parts
    assert cache.headword_parts(encoder.with_pooling("cls"), words, BATCH, folder) != parts  # other vectors
    calls = _interrupt_after(monkeypatch, 99)
    with caplog.at_level(logging.INFO, logger="dictembed.entry_vectors"):
        resumed = headword_vectors(encoder, words, batch_size=BATCH, cache_dir=folder)
    assert calls == [small_parts, small_parts] and "resuming at headword 8 (2 of 4 parts kept" in caplog.text
    assert torch.equal(resumed, straight) and not parts.exists()


# ------------------------------------------------------------------------------ a cache that cannot be used
def test_a_cache_that_is_a_file_is_named_once_and_the_build_goes_on(encoder, toy_dictionary, tmp_path, caplog) -> None:
    file = tmp_path / "cache"
    file.write_text("a file, not a folder")
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        first = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=file, batch_size=BATCH)
        again = DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=file, batch_size=BATCH)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(file) in warnings[0] and "not a folder" in warnings[0], warnings
    assert "\n" not in warnings[0] and "without caching" in warnings[0]
    assert torch.equal(first.matrix, _reference_matrix(encoder, toy_dictionary))
    assert again.kind == "definitions-ac" and file.read_text() == "a file, not a folder"


@pytest.fixture()
def read_only(monkeypatch):
    """Make a folder read-only for this process by fault injection (root ignores file modes): creating, opening
    for writing or renaming anything under it fails with EROFS, as on a read-only filesystem."""
    folders: list[Path] = []

    def inside(path) -> bool:
        try:
            resolved = Path(os.fsdecode(path)).resolve()
        except TypeError:  # a file descriptor
            return False
        return any(resolved == f or f in resolved.parents for f in folders)

    def refuse(path) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    real_open, real_os_open, real_mkdir, real_replace = builtins.open, os.open, os.mkdir, os.replace

    def guarded_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+") and inside(file):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and inside(path):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def guarded_mkdir(path, *args, **kwargs):
        if inside(path) and not os.path.exists(path):
            refuse(path)
        return real_mkdir(path, *args, **kwargs)

    def guarded_replace(src, dst, *args, **kwargs):
        if inside(dst):
            refuse(dst)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(io, "open", guarded_open)  # pathlib's
    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(os, "mkdir", guarded_mkdir)
    monkeypatch.setattr(os, "replace", guarded_replace)
    return folders.append


def test_a_read_only_cache_is_named_once_and_the_build_goes_on(
    encoder, toy_dictionary, small_parts, tmp_path, read_only, caplog
) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    read_only(folder.resolve())
    with pytest.raises(OSError, match="Read-only"):  # the injection holds
        (folder / "probe").write_text("x")
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        first = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=folder, batch_size=BATCH)
        again = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=folder, batch_size=BATCH)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(folder) in warnings[0] and "Read-only" in warnings[0], warnings
    assert torch.equal(first.matrix, again.matrix)
    assert torch.equal(first.matrix, _reference_matrix(encoder, toy_dictionary))
    assert list(folder.iterdir()) == []


def test_a_cache_that_cannot_be_written_keeps_the_built_matrix(
    encoder, toy_dictionary, tmp_path, monkeypatch, caplog
) -> None:
    """The lock is taken but the matrix cannot be written (a full disk): said once, the run goes on."""

    def full(path, data, encoding="utf-8"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(cache, "atomic_write", full)
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path, batch_size=BATCH)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(tmp_path) in warnings[0] and "No space left" in warnings[0], warnings
    assert torch.equal(space.matrix, _reference_matrix(encoder, toy_dictionary))


# Builds on ONNX Runtime: the weights' fp32 graph encodes large builds on the CPU (`build_backend`).


def test_a_build_on_the_graph_gives_the_weights_space(encoder, toy_dictionary, tmp_path, monkeypatch, caplog) -> None:
    """The fp32 graph gives torch's vectors to float rounding, says so, and records it beside the cache entry; the
    encoder the caller holds still runs torch afterwards."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    with caplog.at_level(logging.INFO):  # every logger, onnxruntime's optimizer's too
        on_graph = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    assert "encoding on ONNX Runtime" in caplog.text
    assert "Fused" not in caplog.text and "Optimized operators" not in caplog.text  # nothing below a warning
    assert encoder.onnx is None
    np.testing.assert_allclose(on_graph.vectors(), on_torch.vectors(), atol=1e-5)
    (sidecar,) = tmp_path.glob("definitions-*.json")
    assert json.loads(sidecar.read_text())["backend"] == "onnx"


def test_parts_of_a_build_on_the_other_backend_are_not_reused(encoder, toy_dictionary, small_parts, tmp_path) -> None:
    """Parts a torch build left are not mixed with the graph's rows: they are of another layout, and go."""
    texts = [d for _, d in toy_dictionary.pairs()]
    parts = tmp_path / "parts"
    torch_rows = encode_in_parts(encoder, texts, BATCH, parts, "toy")
    assert len(list(parts.glob("part-*.npy"))) == small_parts
    assert "backend" not in json.loads((parts / "manifest.json").read_text())
    with runtime.graph_twin(encoder) as twin:
        assert twin.onnx is not None
        graph_rows = encode_in_parts(twin, texts, BATCH, parts, "toy")
    assert json.loads((parts / "manifest.json").read_text())["backend"] == "onnx"
    np.testing.assert_allclose(graph_rows, torch_rows, atol=1e-5)


def test_headword_vectors_on_the_graph_are_the_weights_vectors(encoder, tmp_path, monkeypatch) -> None:
    words = [f"word {i}" for i in range(40)]
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = headword_vectors(encoder, words, cache_dir=tmp_path)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    on_graph = headword_vectors(encoder, words, cache_dir=tmp_path)
    assert on_graph.dtype == torch.float16 and on_graph.shape == on_torch.shape
    np.testing.assert_allclose(on_graph.float().numpy(), on_torch.float().numpy(), atol=2e-3)
    assert not list(tmp_path.glob("*.parts"))  # no parts left behind


def test_auto_builds_large_fp32_cpu_builds_on_the_graph(encoder, monkeypatch, caplog) -> None:
    monkeypatch.delenv(runtime.BUILD_BACKEND_VARIABLE, raising=False)
    assert runtime.graph_build_min(encoder) == runtime.GRAPH_BUILD_MIN  # a tiny model: the least
    assert runtime.build_backend(encoder, runtime.GRAPH_BUILD_MIN - 1) == "torch"  # the export would cost more
    assert runtime.build_backend(encoder, runtime.GRAPH_BUILD_MIN) == "onnx"
    monkeypatch.setattr(runtime, "GRAPH_TEXTS_PER_MILLION", 1e9)  # as if the backbone were very large
    assert runtime.build_backend(encoder, runtime.GRAPH_BUILD_MIN) == "torch"
    monkeypatch.undo()
    bf16 = Encoder.load(str(encoder.backbone.name_or_path), pooling="mean", device="cpu").set_precision("bf16")
    assert runtime.build_backend(bf16, runtime.GRAPH_BUILD_MIN) == "openvino"  # bf16: OpenVINO's, where installed
    assert runtime.build_backend(bf16, runtime.GRAPH_BUILD_MIN - 1) == "torch"
    layered = Encoder.load(str(encoder.backbone.name_or_path), pooling="first_last_avg", device="cpu")
    with caplog.at_level(logging.DEBUG, logger="dictembed"):  # no graph for it: torch, and no warning unasked
        assert runtime.build_backend(layered.set_precision("bf16"), runtime.GRAPH_BUILD_MIN) == "torch"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("dictembed")]
    assert "DICTEMBED_BUILD_BACKEND=auto: the build runs as the encoder does" in caplog.text
    monkeypatch.setattr(runtime, "installed", lambda extra: extra != "openvino")
    assert runtime.build_backend(bf16, runtime.GRAPH_BUILD_MIN) == "torch"  # no fp32 graph's vectors: as it is
    assert runtime.build_backend(encoder, runtime.GRAPH_BUILD_MIN) == "onnx"
    monkeypatch.undo()
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    assert runtime.build_backend(encoder, 10**7) == "torch"
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    assert runtime.build_backend(encoder, 1) == "onnx"
    assert runtime.build_backend(bf16, 1) == "torch"  # asked, but bf16 is no fp32 graph's: torch, with a warning


def test_a_build_on_openvino_gives_the_encoders_space(encoder, toy_dictionary, tmp_path, monkeypatch, caplog) -> None:
    """DICTEMBED_BUILD_BACKEND=openvino: the weights' graph compiled by OpenVINO gives torch's vectors, in fp32 to
    float rounding and in bf16 within bf16's rounding, says so, and records it beside the cache entry; the encoder
    the caller holds still runs torch afterwards."""
    bf16 = Encoder.load(str(encoder.backbone.name_or_path), pooling="mean", device="cpu").set_precision("bf16")
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = {e.compute_precision: DefinitionSpace.build(e, toy_dictionary, "amp") for e in (encoder, bf16)}
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "openvino")
    with caplog.at_level(logging.INFO, logger="dictembed"):
        on_openvino = {
            e.compute_precision: DefinitionSpace.build(
                e, toy_dictionary, "amp", cache_dir=tmp_path / e.compute_precision
            )
            for e in (encoder, bf16)
        }
    assert "encoding on OpenVINO, the weights' graph in fp32" in caplog.text
    assert "encoding on OpenVINO, the weights' graph in bf16" in caplog.text
    assert encoder.onnx is None and bf16.onnx is None
    np.testing.assert_allclose(on_openvino["fp32"].vectors(), on_torch["fp32"].vectors(), atol=1e-4)
    theirs, mine = on_openvino["bf16"].vectors(), on_torch["bf16"].vectors()
    cosines = (theirs * mine).sum(1) / np.linalg.norm(theirs, axis=1) / np.linalg.norm(mine, axis=1)
    assert cosines.min() > 0.999
    for precision in ("fp32", "bf16"):
        (sidecar,) = (tmp_path / precision).glob("definitions-*.json")
        assert json.loads(sidecar.read_text())["backend"] == "openvino"


def test_an_openvino_twin_that_disagrees_leaves_the_build_to_torch(
    encoder, toy_dictionary, monkeypatch, caplog
) -> None:
    from dictembed.backends import openvino

    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "openvino")
    monkeypatch.setattr(openvino, "TWIN_AGREEMENT_BF16", 1.01)
    with caplog.at_level(logging.INFO, logger="dictembed"):
        space = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    assert "the build runs on torch: its ONNX graph gives other vectors than its weights (cosine" in caplog.text
    assert "encoding on OpenVINO" not in caplog.text
    assert np.array_equal(space.vectors(), on_torch.vectors())


def test_an_unknown_build_backend_is_a_one_line_error(encoder, toy_dictionary, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "gpu")
    with pytest.raises(DictEmbedError, match=r"DICTEMBED_BUILD_BACKEND='gpu': use auto, torch, onnx, int8"):
        DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)


def test_a_graph_that_cannot_be_exported_leaves_the_build_to_torch(
    encoder, toy_dictionary, tmp_path, monkeypatch, caplog
) -> None:
    def refuse(*args, **kwargs):
        raise RuntimeError("unsupported operator")

    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=None)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    monkeypatch.setattr(runtime, "export_backbone", refuse)
    with caplog.at_level(logging.WARNING, logger="dictembed"):
        space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=None)
    assert "the build runs on torch: no ONNX graph (RuntimeError: unsupported operator)" in caplog.text
    assert np.array_equal(space.vectors(), on_torch.vectors())


def test_a_graph_that_cannot_be_opened_is_named_as_such(encoder, caplog) -> None:
    """An export that works but whose runtime refuses the graph (an OpenVINO compile error, say) says so, not that
    there was no graph; the encoder itself is what the build gets."""

    def refuse(path, threads, manifest):
        assert path.is_file()
        raise RuntimeError("compile failed")

    with caplog.at_level(logging.WARNING, logger="dictembed"):
        with runtime.graph_twin(encoder, ["a dog"], opener=refuse) as runner:
            assert runner is encoder
    assert "the build runs on torch: its graph did not open (RuntimeError: compile failed)" in caplog.text


def test_a_twin_that_disagrees_with_the_weights_leaves_the_build_to_torch(
    encoder, toy_dictionary, tmp_path, monkeypatch, caplog
) -> None:
    """The twin encodes the build's first texts beside the weights before it builds anything; below the agreement
    asked (here more than any graph can give) torch builds, with a warning that says why, and the cache entry's
    sidecar says torch built it."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    monkeypatch.setattr(runtime, "TWIN_AGREEMENT", 1.01)
    with caplog.at_level(logging.INFO, logger="dictembed"):
        space = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    assert "the build runs on torch: its ONNX graph gives other vectors than its weights (cosine" in caplog.text
    assert "encoding on ONNX Runtime" not in caplog.text
    assert np.array_equal(space.vectors(), on_torch.vectors())
    (sidecar,) = tmp_path.glob("definitions-*.json")
    assert json.loads(sidecar.read_text())["backend"] == "torch"


def test_a_twin_holds_its_graph_in_memory_on_torchs_threads(encoder, monkeypatch) -> None:
    with runtime.graph_twin(encoder) as twin:
        assert twin is not encoder and twin.onnx is not None
        assert not twin.onnx.path.exists()  # the temporary folder is gone: the sessions hold the graph
        assert twin.onnx.threads == min(runtime.physical_cores(), torch.get_num_threads())
        assert np.allclose(twin.encode(["a dog"]), encoder.encode(["a dog"]), atol=1e-5)


def test_an_encoder_that_runs_a_graph_builds_on_it_in_its_own_batches(encoder, monkeypatch, caplog) -> None:
    """An export, or an encoder loaded with backend="onnx", is no torch weights to stand in for: it builds as it is,
    in the batches asked for."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    with runtime.graph_twin(encoder) as on_graph:
        with caplog.at_level(logging.WARNING, logger="dictembed"):
            with entry_vectors.builder(on_graph, ["a", "b"], 5) as (runner, size):
                assert runner is on_graph and size == 5
    assert "DICTEMBED_BUILD_BACKEND=onnx: the build runs as the encoder does (it runs a graph already)" in caplog.text


def test_quiet_info_drops_only_the_optimizers_records_below_a_warning(caplog) -> None:
    from dictembed.backends.onnx import graph

    def record(level: int, message: str) -> logging.LogRecord:
        path = str(Path("site-packages", "onnxruntime", "transformers", "fusion_base.py"))
        return logging.makeLogRecord(
            {"name": "fusion_base", "levelno": level, "levelname": "X", "msg": message, "pathname": path}
        )

    with caplog.at_level(logging.INFO), graph.quiet_info():
        logging.getLogger("fusion_base").handle(record(logging.INFO, "Fused Gelu: 6"))
        logging.getLogger("fusion_base").handle(record(logging.WARNING, "a fusion failed"))
        logging.getLogger("dictembed.anything").info("another thread's news")
    logging.getLogger("fusion_base").handle(record(logging.INFO, "after: Fused Attention"))
    assert "Fused Gelu" not in caplog.text
    assert "a fusion failed" in caplog.text and "another thread's news" in caplog.text
    assert "after: Fused Attention" in caplog.text


def test_an_int8_build_is_keyed_apart_and_says_what_built_it(encoder, toy_dictionary, tmp_path, monkeypatch) -> None:
    """DICTEMBED_BUILD_BACKEND=int8 builds on the weights' graph quantised: vectors near the weights' (not theirs),
    cached under a key of their own, so that neither an int8 space nor an fp32 one answers for the other."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "torch")
    on_torch = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    assert runtime.build_backend(encoder, 1) == "int8" and runtime.builds_int8(encoder)
    on_int8 = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    backends = sorted(json.loads(p.read_text())["backend"] for p in tmp_path.glob("definitions-*.json"))
    assert backends == ["onnx-int8", "torch"]  # two entries: the int8 build did not take the fp32 one
    mine, theirs = on_torch.vectors(), on_int8.vectors()
    cosines = (mine * theirs).sum(1) / np.linalg.norm(mine, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cosines.min() >= runtime.TWIN_AGREEMENT_INT8 and not np.allclose(mine, theirs, atol=1e-5)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    assert np.array_equal(DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path).vectors(), mine)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    assert np.array_equal(DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path).vectors(), theirs)
    assert len(list(tmp_path.glob("definitions-*.json"))) == 2


def test_an_int8_build_that_cannot_run_says_so(encoder, monkeypatch, caplog) -> None:
    """int8 asked of an encoder whose graph cannot stand in (bf16 here) builds on torch, with a warning, and keys
    its space as the weights' own."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    bf16 = Encoder.load(str(encoder.backbone.name_or_path), pooling="mean", device="cpu").set_precision("bf16")
    with caplog.at_level(logging.WARNING, logger="dictembed"):
        assert runtime.build_backend(bf16, 10**6) == "torch"
    assert "DICTEMBED_BUILD_BACKEND=int8: the build runs as the encoder does (it computes in bf16)" in caplog.text
    assert not runtime.builds_int8(bf16)


def test_an_int8_build_is_keyed_by_the_encoder_as_it_pools_definitions(
    bert_path, toy_dictionary, tmp_path, monkeypatch
):
    """A first_last_avg encoder has no graph of its own, but an AMP space pools its definitions by the mean, which
    the int8 graph builds: the key says int8 too, so no fp32 request is served those vectors."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    layered = Encoder.load(str(bert_path), pooling="first_last_avg", device="cpu").eval()
    assert not runtime.builds_int8(layered) and entry_vectors.int8_build(layered, "amp")
    DefinitionSpace.build(layered, toy_dictionary, "amp", cache_dir=tmp_path)
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "onnx")
    DefinitionSpace.build(layered, toy_dictionary, "amp", cache_dir=tmp_path)
    backends = sorted(json.loads(p.read_text())["backend"] for p in tmp_path.glob("definitions-*.json"))
    assert backends == ["onnx", "onnx-int8"]


def test_an_int8_build_whose_graph_disagrees_is_a_one_line_error(encoder, toy_dictionary, tmp_path, monkeypatch):
    """int8 was asked for and is cached apart: a twin below the agreement asked is refused with the reason, not
    replaced by torch's fp32 vectors under the int8 key; nothing is cached."""
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    monkeypatch.setattr(runtime, "TWIN_AGREEMENT_INT8", 1.01)
    message = r"DICTEMBED_BUILD_BACKEND=int8: its ONNX graph gives other vectors than its weights \(cosine .*unset it"
    with pytest.raises(DictEmbedError, match=message):
        DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    assert not list(tmp_path.glob("definitions-*.json"))


def test_an_int8_build_across_processes_is_keyed_as_torch_builds_it(encoder, monkeypatch) -> None:
    monkeypatch.setenv(runtime.BUILD_BACKEND_VARIABLE, "int8")
    assert entry_vectors.int8_build(encoder, "amp")
    monkeypatch.setattr(entry_vectors, "process_count", lambda: 2)  # each process encodes a share, on torch
    assert not entry_vectors.int8_build(encoder, "amp")


def test_the_int8_key_follows_the_quantisation_and_onnxruntime(monkeypatch) -> None:
    import importlib.metadata

    from dictembed.backends.onnx import graph

    before = runtime.int8_build_key()
    assert before.startswith("int8-") and runtime.int8_build_key() == before
    settings = graph.QuantizeSettings
    monkeypatch.setattr(graph, "QuantizeSettings", lambda: settings(per_channel=False))
    assert runtime.int8_build_key() != before
    monkeypatch.undo()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1")
    assert runtime.int8_build_key() != before
