"""Quantisation names, torch-free so that the command line offers them without loading a model: the output
quantisation of sentence vectors (sentence-transformers' `quantize_embeddings`), and the weight quantisation of
an ONNX export (`WEIGHT_QUANTIZATIONS`, `dictembed.backends.onnx.graph`), another thing."""

from typing import Literal, get_args

Quantization = Literal["float32", "int8", "uint8", "binary", "ubinary"]  # `encode(quantize=...)`
QUANTIZATIONS: tuple[Quantization, ...] = get_args(Quantization)
# per row, so a .npy of them is written chunk by chunk (`dictembed.streaming`); int8 and uint8 calibrate their ranges
# over every row
STREAMABLE: tuple[Quantization, ...] = ("float32", "binary", "ubinary")
CALIBRATED: tuple[Quantization, ...] = ("int8", "uint8")  # scaled to the ranges of the rows quantised together
WEIGHT_QUANTIZATIONS = ("int8",)  # of an exported graph
# the strength of `--smooth-ffn` (`dictembed.backends.onnx.smoothing`): all-mpnet-base-v2 queries' cosine to fp32
# (300 Oxford definitions): 0.831 at 0.5, 0.987 at 0.8, 0.980 at 1.0
SMOOTH_ALPHA = 0.8
