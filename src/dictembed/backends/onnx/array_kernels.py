"""A search's array work on ONNX Runtime's kernels, where numpy's are slower: float16 widened to float32 by its
Cast, eight values an instruction where numpy converts one (a search's few thousand float16 rows in about a tenth
of the time of a table look-up in numpy; what `astype` gives, bit for bit but for a signalling NaN's payload), and
the product of queries with a constant matrix, packed once for its GEMM (the coarse stage of a search: about half
the time of numpy's BLAS on 2 cores). The one-node graphs are written here as protobuf bytes, so that using them
imports `onnxruntime` only, not the `onnx` package (0.2 s of a cold `predict`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

FLOAT, FLOAT16 = 1, 10  # onnx.TensorProto.DataType
INT_ATTRIBUTE = 2  # onnx.AttributeProto.AttributeType.INT
EXTERNAL = 1  # onnx.TensorProto.DataLocation
OPSET = 13
IR_VERSION = 7  # what ONNX Runtime 1.8 and later read


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint (an int) or a length-delimited run (bytes: a string or a message)."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _value(name: str, elem_type: int, dims: tuple[str | int, ...]) -> bytes:
    """A ValueInfoProto: a tensor `name` of `elem_type` whose `dims` are sizes (int) or named free sizes (str)."""
    shape = b"".join(_field(1, _field(2, d.encode()) if isinstance(d, str) else _field(1, d)) for d in dims)
    tensor = _field(1, elem_type) + _field(2, shape)  # TypeProto.Tensor
    return _field(1, name.encode()) + _field(2, _field(1, tensor))


def _model(node: bytes, name: str, inputs: list[bytes], output: bytes, initializers: tuple[bytes, ...] = ()) -> bytes:
    """The ModelProto of a graph of one `node`."""
    graph = _field(1, node) + _field(2, name.encode()) + b"".join(_field(5, i) for i in initializers)
    graph += b"".join(_field(11, i) for i in inputs) + _field(12, output)
    return _field(1, IR_VERSION) + _field(7, graph) + _field(8, _field(1, b"") + _field(2, OPSET))


def cast_model() -> bytes:
    """The ModelProto of y = Cast<to=float>(x), x a 1-D float16 tensor."""
    to = _field(1, b"to") + _field(3, FLOAT) + _field(20, INT_ATTRIBUTE)
    node = _field(1, b"x") + _field(2, b"y") + _field(4, b"Cast") + _field(5, to)
    return _model(node, "half_to_single", [_value("x", FLOAT16, ("n",))], _value("y", FLOAT, ("n",)))


def product_model(rows: int, dim: int) -> bytes:
    """The ModelProto of y = q @ m.T, q [b, dim] float32 and m [rows, dim] a constant whose values the session
    takes from memory (an external initializer: `constant_product`)."""
    transposed = _field(1, b"transB") + _field(3, 1) + _field(20, INT_ATTRIBUTE)
    node = _field(1, b"q") + _field(1, b"m") + _field(2, b"y") + _field(4, b"Gemm") + _field(5, transposed)
    outside = _field(13, _field(1, b"location") + _field(2, b"memory")) + _field(14, EXTERNAL)
    tensor = _field(1, rows) + _field(1, dim) + _field(2, FLOAT) + _field(8, b"m") + outside
    inputs = [_value("q", FLOAT, ("b", dim))]
    return _model(node, "constant_product", inputs, _value("y", FLOAT, ("b", rows)), (tensor,))


def _session(ort: Any, model: bytes, options: Any) -> Any:
    """A CPU session of `model`, or None (logged) where this onnxruntime cannot open it: numpy does the work."""
    try:
        return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own types (Fail, InvalidGraph, ...)
        from dictembed.backends.onnx.session import clipped

        log.warning("onnxruntime cannot run a search kernel (%s); numpy does the work", clipped(str(err), err))
        return None


@functools.cache
def half_cast() -> Callable[[np.ndarray], np.ndarray] | None:
    """A function widening a float16 array to float32 on ONNX Runtime (one thread, safe to call from several), or
    None where onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from dictembed.backends.onnx.session import session_options

    options = session_options(1)
    options.enable_cpu_mem_arena = False  # an arena keeps the largest cast's output: 84 MB after 20 million values
    session = _session(ort, cast_model(), options)
    if session is None:
        return None

    def cast(rows: np.ndarray) -> np.ndarray:
        flat = np.ascontiguousarray(rows).reshape(-1)
        return session.run(None, {"x": flat})[0].reshape(rows.shape)

    return cast


def constant_product(matrix: np.ndarray, threads: int) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function of float32 queries [b, dim] giving `queries @ matrix.T` [b, rows] on ONNX Runtime with `threads`
    intra-op threads (the float32 `matrix` read from where it lies, a memory map included, and packed once when the
    session opens; safe to call from several threads), or None where onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from dictembed.backends.onnx.session import session_options

    if matrix.dtype != np.float32 or not matrix.flags.c_contiguous:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    value = ort.OrtValue.ortvalue_from_numpy(matrix)
    options = session_options(threads)  # its arena holds a batch's scores at most: 26 MB for 64 queries of WordNet
    options.add_external_initializers(["m"], [value])
    session = _session(ort, product_model(*matrix.shape), options)
    if session is None:
        return None

    def product(queries: np.ndarray) -> np.ndarray:
        _ = value  # the session may read the matrix through it
        return session.run(None, {"q": np.ascontiguousarray(queries, dtype=np.float32)})[0]

    return product
