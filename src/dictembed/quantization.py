"""Output quantisation of sentence vectors (sentence-transformers' `quantize_embeddings`): its names, torch-free
so that the command line offers them without loading a model. The weight quantisation of an ONNX export is
another thing (`dictembed.backends.onnx.graph.WEIGHT_QUANTIZATIONS`)."""

from typing import Literal, get_args

Quantization = Literal["float32", "int8", "uint8", "binary", "ubinary"]  # `encode(quantize=...)`
QUANTIZATIONS: tuple[Quantization, ...] = get_args(Quantization)
