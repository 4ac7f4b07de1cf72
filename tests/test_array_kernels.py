"""A search's array work on ONNX Runtime's kernels (`backends/onnx/array_kernels.py`): the hand-written graphs are
valid ONNX, the float16 cast is numpy's bit for bit, the constant product is numpy's product (a memory map
included), everything falls back to numpy without onnxruntime, and `ReverseDictionary.prepare` moves the coarse
stage onto ONNX Runtime only beside an ONNX Runtime encoder, with the same results."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import modules_after

from dictembed import search_space
from dictembed.backends.onnx import array_kernels
from dictembed.backends.onnx.array_kernels import cast_model, constant_product, half_cast, product_model
from dictembed.reverse_dictionary import ReverseDictionary
from dictembed.search_index import CoarseIndex, SearchIndex
from dictembed.search_space import HALF_CAST_MIN, as_float32

EVERY_HALF = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


@pytest.fixture()
def no_onnxruntime(monkeypatch) -> None:
    """onnxruntime unimportable, and the cached cast forgotten (before and after)."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    half_cast.cache_clear()
    yield
    half_cast.cache_clear()


def test_the_hand_written_graphs_are_valid_onnx() -> None:
    onnx = pytest.importorskip("onnx")
    onnx.checker.check_model(onnx.load_from_string(cast_model()), full_check=True)
    product = onnx.load_from_string(product_model(7, 3))
    weights = product.graph.initializer[0]
    assert [n.op_type for n in product.graph.node] == ["Gemm"] and list(weights.dims) == [7, 3]
    assert weights.data_location == onnx.TensorProto.EXTERNAL  # the session takes the values from memory
    weights.data_location = onnx.TensorProto.DEFAULT
    del weights.external_data[:]
    weights.raw_data = np.zeros((7, 3), dtype="<f4").tobytes()
    onnx.checker.check_model(product, full_check=True)  # valid, its values aside


def test_the_cast_is_astype_bit_for_bit_for_every_half_value() -> None:
    cast = half_cast()
    assert cast is not None
    expected = EVERY_HALF.astype(np.float32)
    for halves in (EVERY_HALF, EVERY_HALF.reshape(256, 256), EVERY_HALF.reshape(256, 256)[::2]):
        converted = cast(halves)
        assert converted.dtype == np.float32 and converted.shape == halves.shape
        np.testing.assert_array_equal(converted, halves.astype(np.float32))  # NaNs equal
        assert np.array_equal(np.signbit(converted), np.signbit(halves))
    finite = ~np.isnan(expected)
    assert np.array_equal(cast(EVERY_HALF).view(np.uint32)[finite], expected.view(np.uint32)[finite])


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident size from Linux's /proc")
def test_the_cast_keeps_no_memory_after_a_large_array() -> None:
    def resident_mb() -> float:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096 / 2**20

    cast = half_cast()
    assert cast is not None
    large = np.ones(20_000_000, dtype=np.float16)
    before = resident_mb()
    for _ in range(3):
        converted = cast(large)
        assert converted[-1] == 1.0
        del converted
    assert resident_mb() - before < 40  # an arena would keep the 80 MB output


def test_as_float32_gives_the_same_bits_above_and_below_the_cast_threshold() -> None:
    small = EVERY_HALF[: HALF_CAST_MIN - 1]  # the table
    large = EVERY_HALF[:HALF_CAST_MIN]  # onnxruntime
    assert np.array_equal(as_float32(small).view(np.uint32), as_float32(large)[: len(small)].view(np.uint32))


def test_the_constant_product_is_numpys_product_also_from_a_memory_map(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((300, 20)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)  # unit rows and queries, as the coarse stage's: products
    queries = rng.standard_normal((5, 20)).astype(np.float32)  # at most 1, float32's rounding far under the 1e-5
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    np.save(tmp_path / "m.npy", matrix)
    mapped = np.load(tmp_path / "m.npy", mmap_mode="r")
    for source in (matrix, mapped, matrix.astype(np.float64), np.asfortranarray(matrix)):
        product = constant_product(source, threads=2)
        assert product is not None
        expected = queries.astype(np.float64) @ matrix.T.astype(np.float64)
        np.testing.assert_allclose(product(queries), expected, atol=1e-5)
        np.testing.assert_allclose(product(queries[:1]), expected[:1], atol=1e-5)


def test_without_onnxruntime_numpy_does_the_work(no_onnxruntime) -> None:
    assert half_cast() is None
    assert constant_product(np.eye(3, dtype=np.float32), threads=1) is None
    np.testing.assert_array_equal(as_float32(EVERY_HALF), EVERY_HALF.astype(np.float32))
    unit = np.eye(6, dtype=np.float32)
    index = CoarseIndex.of(unit, 6)
    assert index.run_on_onnx_runtime(1) is False and index.product is None
    np.testing.assert_allclose(index.scores(unit[:2]), unit[:2] @ unit.T, atol=1e-6)


def test_a_kernel_onnxruntime_cannot_open_leaves_the_work_to_numpy(monkeypatch, caplog) -> None:
    import onnxruntime

    def refuse(*args, **kwargs):
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : no such kernel")

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    half_cast.cache_clear()
    try:
        assert half_cast() is None and constant_product(np.eye(3, dtype=np.float32), threads=1) is None
        np.testing.assert_array_equal(as_float32(EVERY_HALF), EVERY_HALF.astype(np.float32))
    finally:
        half_cast.cache_clear()
    assert "numpy does the work" in caplog.text


def test_the_coarse_stage_on_onnx_runtime_scores_as_numpy_and_takes_empty_batches() -> None:
    rng = np.random.default_rng(1)
    unit = rng.standard_normal((500, 24)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    queries = unit[:4] + 0.1 * rng.standard_normal((4, 24)).astype(np.float32)
    index = CoarseIndex.of(unit, 8)
    expected = index.scores(queries)
    assert index.run_on_onnx_runtime(2) is True and index.product is not None
    product = index.product
    assert index.run_on_onnx_runtime(2) is True and index.product is product  # built once
    np.testing.assert_allclose(index.scores(queries), expected, atol=1e-5)
    np.testing.assert_allclose(index.scores(queries[:1]), expected[:1], atol=1e-5)
    assert index.scores(queries[:0]).shape == (0, 500)


def _coarse_results(rd: ReverseDictionary, queries: list[str]) -> list[list[tuple[list[str], float]]]:
    return [[(r.words, r.score) for r in results] for results in rd.search_many(queries, k=5)]


def test_prepare_moves_the_coarse_stage_to_onnx_runtime_beside_its_encoder_only(served_model: Path) -> None:
    queries = ["a domestic animal that barks", "a large body of water", "to move fast on foot"]
    rd = ReverseDictionary.load(served_model)
    assert type(rd.encoder).__module__.startswith("dictembed.backends.onnx")  # the folder's query graph
    index = rd.index
    assert index is not None and rd.space is not None
    index.coarse = CoarseIndex.of(index.unit(rd.space), 8)  # the tiny space has too few groups for one
    numpy_results = _coarse_results(rd, queries)
    rd.prepare()
    assert index.coarse.product is not None
    runtime_results = _coarse_results(rd, queries)
    assert [[w for w, _ in r] for r in runtime_results] == [[w for w, _ in r] for r in numpy_results]
    scores = [s for r in runtime_results for _, s in r]
    assert scores == pytest.approx([s for r in numpy_results for _, s in r], abs=1e-6)

    from dictembed.encoder import Encoder

    torch_index = SearchIndex.build(rd.space, with_frequencies=False, with_stems=False)
    torch_index.coarse = CoarseIndex.of(torch_index.unit(rd.space), 8)
    ReverseDictionary(Encoder.load(str(served_model)), rd.space, None, index=torch_index).prepare()
    assert torch_index.coarse.product is None  # beside torch's spinning threads numpy's one BLAS thread scores


def test_the_module_imports_neither_onnx_nor_onnxruntime_until_used() -> None:
    imports = "import dictembed.backends.onnx.array_kernels, dictembed.search_space"
    assert [m for m in modules_after(imports, ("onnx",)) if m.split(".")[0] in ("onnx", "onnxruntime")] == []
    assert array_kernels.IR_VERSION <= 7 and search_space.HALF_CAST_MIN > 0
