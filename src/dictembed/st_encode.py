"""`SentenceTransformer.encode`'s contract, as `Encoder.encode` keeps it: the keywords it takes (sentence-transformers'
own options refused unless unset, a misspelt one named), its input (one string or a list), and its output
(L2-normalised, quantised with `quantize_embeddings`, an array or a tensor, one vector for one string)."""

from __future__ import annotations

import warnings
from typing import Any, cast

import numpy as np
import torch
from sentence_transformers import quantize_embeddings

from dictembed.errors import DictEmbedError
from dictembed.quantization import CALIBRATED, QUANTIZATIONS, Quantization

ST_ONLY_OPTIONS = ("truncate_dim", "pool", "chunk_size")  # sentence-transformers' encode options: taken when unset


def encode_keywords(quantize: str, precision: str | None, kwargs: dict[str, Any]) -> Quantization:
    """The output quantisation asked for (`quantize`, or `precision`, its sentence-transformers name, deprecated
    here), after refusing in one line what `Encoder.encode` cannot honour: an `output_value` other than sentence
    embeddings, an unknown keyword, a set sentence-transformers option, an unknown quantisation."""
    if precision is not None:
        warnings.warn("encode(precision=...) is deprecated; use quantize=...", DeprecationWarning, stacklevel=3)
        quantize = precision
    if kwargs.get("output_value", "sentence_embedding") != "sentence_embedding":
        raise DictEmbedError("only output_value='sentence_embedding' is supported")
    if unknown := sorted(set(kwargs) - {"output_value", *ST_ONLY_OPTIONS}):
        raise DictEmbedError(f"encode: unknown keyword argument(s) {', '.join(map(repr, unknown))}")
    if given := [name for name in ST_ONLY_OPTIONS if kwargs.get(name) is not None]:
        raise DictEmbedError(f"encode: {', '.join(given)} (sentence-transformers' options) not supported here")
    if quantize not in QUANTIZATIONS:
        raise DictEmbedError(f"unknown quantize {quantize!r}; choose from {', '.join(QUANTIZATIONS)}")
    return cast(Quantization, quantize)


def encode_output(
    vectors: torch.Tensor, normalize: bool, quantize: Quantization, as_tensor: bool, single: bool
) -> np.ndarray | torch.Tensor:
    """The float32 CPU `vectors` as `encode` returns them: L2-normalised if asked, quantised unless float32 (an array
    in, an array out), a tensor if asked, one row for one string."""
    if normalize:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    result: np.ndarray | torch.Tensor = vectors.numpy()
    if quantize in CALIBRATED and len(result) < 2:
        raise DictEmbedError(
            f"quantize={quantize!r} scales each dimension to the range of the sentences encoded together "
            "(sentence-transformers' quantize_embeddings): it needs at least two; encode them in one call, or use "
            "binary or ubinary"
        )
    if quantize != "float32":
        result = cast(np.ndarray, quantize_embeddings(result, precision=quantize))
    if as_tensor:
        result = torch.from_numpy(np.asarray(result))
    return result[0] if single else result
