"""SmoothQuant's migration (Xiao et al., 2023) for the feed-forward down-projections before dynamic int8: their
inputs, a GELU's outputs, carry a few channels far larger than the rest, so one int8 scale for the whole tensor
rounds the others away. Each input channel j is divided by s_j = max|x_j|^alpha / max|W_j|^(1 - alpha) (a `Mul`
before the MatMul) and the weight's row j multiplied by it: the fp32 graph computes the same function, and the
quantised one sees a flatter input. The channel ranges come from running the fp32 graph on calibration sentences.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dictembed.extras import require
from dictembed.quantization import SMOOTH_ALPHA

FLOOR = 1e-5  # ranges below it count as it (a channel never active, a zero weight row)
SUFFIX = "_smooth"  # the name of a Mul inserted before MatMul `name`: name + SUFFIX


def input_ranges(model: Any, matmuls: list[str], feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per MatMul of `matmuls` in the ONNX `model` (a ModelProto): the largest |value| of each channel of its first
    input over the real tokens (`attention_mask` 1) of the batches `feeds`."""
    onnx = require("onnx", "onnx")
    ort = require("onnx", "onnxruntime")
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    nodes = {node.name: node for node in probe.graph.node}
    wanted = [nodes[name].input[0] for name in matmuls]
    for name in dict.fromkeys(wanted):
        probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    ranges: dict[str, np.ndarray] = {}
    for feed in feeds:
        real = feed["attention_mask"].astype(bool)
        outputs = session.run(wanted, {k: v for k, v in feed.items() if k in inputs})
        for name, values in zip(matmuls, outputs, strict=True):
            peak = np.abs(values[real]).max(axis=0)
            ranges[name] = np.maximum(ranges[name], peak) if name in ranges else peak
    return ranges


def smooth_matmul_inputs(model: Any, ranges: dict[str, np.ndarray], alpha: float = SMOOTH_ALPHA) -> int:
    """Insert before each MatMul named in `ranges` (its weight an initializer [in, out]) a `Mul` by 1/s and scale
    the weight's rows by s, s = range^alpha / max|row|^(1 - alpha), in the ModelProto `model`; returns how many.
    A MatMul whose weight is no initializer, or is shared with another node, is left as it is."""
    onnx = require("onnx", "onnx")
    numpy_helper = require("onnx", "onnx.numpy_helper")
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    ordered = []  # copies of the nodes, each Mul just before its MatMul: the order stays topological
    for original in graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        ordered.append(node)
        if node.name not in ranges or node.input[1] not in initializers or uses[node.input[1]] != 1:
            continue
        weight = numpy_helper.to_array(initializers[node.input[1]])
        rows = np.maximum(np.abs(weight).max(axis=1), FLOOR)
        scale = (np.maximum(ranges[node.name], FLOOR) ** alpha / rows ** (1 - alpha)).astype(np.float32)
        initializers[node.input[1]].CopyFrom(
            numpy_helper.from_array((weight * scale[:, None]).astype(np.float32), node.input[1])
        )
        inverse = node.name + SUFFIX + "_inverse"
        graph.initializer.append(numpy_helper.from_array((1.0 / scale).astype(np.float32), inverse))
        flattened = node.name + SUFFIX + "_output"
        ordered.insert(-1, onnx.helper.make_node("Mul", [node.input[0], inverse], [flattened], name=node.name + SUFFIX))
        node.input[0] = flattened
    del graph.node[:]
    graph.node.extend(ordered)
    return sum(node.name.endswith(SUFFIX) for node in ordered)
