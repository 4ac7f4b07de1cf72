"""`SentenceTransformer.encode`'s contract, as `Encoder.encode` keeps it: the keywords it takes (sentence-transformers'
own options refused unless unset, a misspelt one named; `normalize`, the older name of `normalize_embeddings`), its
prompt (`prompt` over `prompt_name`, else the model's default), and its output (L2-normalised, quantised with
`quantize_embeddings`, an array or a tensor, one vector for one string); and `SentenceTransformer.similarity`'s."""

from __future__ import annotations

import logging
import warnings
from typing import Any, Literal, cast

import numpy as np
import torch
from sentence_transformers import SimilarityFunction, quantize_embeddings

from dictembed.errors import DictEmbedError
from dictembed.quantization import CALIBRATED, QUANTIZATIONS, Quantization
from dictembed.texts import check_flag, check_prompt

log = logging.getLogger(__name__)

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


def encode_normalize(normalize_embeddings: object, normalize: object) -> bool:
    """Whether to L2-normalise: `normalize_embeddings`, or `normalize` (its older name) where given; each True or
    False, and the two not contradicting each other."""
    check_flag("normalize_embeddings", normalize_embeddings)
    check_flag("normalize", normalize, none=True)
    if normalize is not None and normalize != normalize_embeddings and normalize_embeddings:
        raise DictEmbedError("normalize (the older name) and normalize_embeddings disagree; give one")
    return bool(normalize if normalize is not None else normalize_embeddings)


# what `encode` returns, as sentence-transformers' flags choose it: one tensor (`convert_to_tensor`), an array
# (`convert_to_numpy`, the default), or neither: a list of one tensor per sentence
Output = Literal["tensor", "array", "tensors"]


def encode_flags(
    show_progress_bar: object, show_progress: object, convert_to_numpy: object, convert_to_tensor: object
) -> tuple[bool | None, Output]:
    """Whether to show a bar (`show_progress_bar`, or `show_progress`, its older name, where given; None: by the
    number of texts) and what to return (`Output`), each flag True or
    False (the bars' None too): "no" would count as true."""
    check_flag("show_progress_bar", show_progress_bar, none=True)
    check_flag("show_progress", show_progress, none=True)
    check_flag("convert_to_numpy", convert_to_numpy)
    check_flag("convert_to_tensor", convert_to_tensor)
    show = show_progress if show_progress is not None else show_progress_bar
    output: Output = "tensor" if convert_to_tensor else "array" if convert_to_numpy else "tensors"
    return cast("bool | None", show), output


def prompt_text(
    prompts: dict[str, str], default_name: str | None, prompt: str | None, prompt_name: str | None
) -> str | None:
    """The prompt to prefix: `prompt` (over a `prompt_name` given too, with a warning, as sentence-transformers
    does), else the one of `prompts` named `prompt_name`, else the default one (`default_name`), else None."""
    check_prompt(prompt)
    if prompt is not None:
        if prompt_name is not None:
            log.warning("encode: both prompt and prompt_name given; prompt_name %r is not used", prompt_name)
        return prompt
    name = prompt_name or default_name
    if name is None:
        return None
    if name not in prompts:
        raise DictEmbedError(f"unknown prompt_name {name!r}; this model has {sorted(prompts) or 'none'}")
    return prompts[name]


def encode_output(
    vectors: torch.Tensor, normalize: bool, quantize: Quantization, output: Output, single: bool
) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
    """The float32 CPU `vectors` as `encode` returns them: L2-normalised if asked, quantised unless float32 (an array
    in, an array out), as `output` asks (an array, one tensor, a list of one tensor per sentence), one row for one
    string."""
    if normalize:
        vectors = torch.nn.functional.normalize(vectors, dim=-1)
    result: np.ndarray | torch.Tensor = vectors.numpy()
    if quantize in CALIBRATED and len(result) < 2:
        raise DictEmbedError(
            f"quantize={quantize!r} scales each dimension to the range of the sentences encoded together "
            "(sentence-transformers' quantize_embeddings): it needs at least two; encode them in one call, or use "
            "binary or ubinary"
        )
    if quantize in CALIBRATED and not np.ptp(result, axis=0).any():
        raise DictEmbedError(
            f"quantize={quantize!r} scales each dimension to the range of the sentences encoded together, and the "
            f"{len(result)} given have one vector (the same sentence each time?): every row would quantise to the same "
            "bucket; encode distinct sentences together, or use binary or ubinary"
        )
    if quantize != "float32":
        result = cast(np.ndarray, quantize_embeddings(result, precision=quantize))
    if output != "array":
        result = torch.from_numpy(np.asarray(result))
    if single:
        return result[0]
    return list(result) if output == "tensors" else result


def similarity(a: object, b: object, function: str = "cosine") -> torch.Tensor:
    """The similarity of every row of `a` with every row of `b` by sentence-transformers' `function`
    (`SimilarityFunction`: cosine, dot, euclidean, manhattan): vectors or matrices of numbers of the same width,
    refused in one line otherwise."""
    rows = [_numeric_rows(x, name) for x, name in ((a, "a"), (b, "b"))]
    if rows[0].shape[-1] != rows[1].shape[-1]:
        raise DictEmbedError(f"similarity: a has {rows[0].shape[-1]} dimensions, b {rows[1].shape[-1]}")
    dtype = torch.promote_types(rows[0].dtype, rows[1].dtype)  # float64 with float32, as numpy would
    dtype = dtype if dtype.is_floating_point else torch.float32  # whole numbers and booleans as float32
    return SimilarityFunction.to_similarity_fn(function)(*(r.to(dtype) for r in rows))


def _numeric_rows(x: object, name: str) -> torch.Tensor:
    """`x` (one vector or a matrix: a tensor, kept as it is, gradient and dtype, or an array or list of numbers) as
    a tensor, refused in one line naming `name` otherwise."""
    if isinstance(x, torch.Tensor):
        rows = x
    else:
        try:
            array = np.asarray(x, dtype=object if isinstance(x, str | bytes) else None)
        except ValueError:  # rows of different lengths
            raise DictEmbedError(f"similarity: {name} has rows of different lengths") from None
        if array.dtype.kind not in "fiub":
            raise DictEmbedError(f"similarity: {name} must be vectors of numbers, not {type(x).__name__}")
        keep = array.dtype.kind == "f" and isinstance(x, np.ndarray)  # an array's float dtype; lists as torch.tensor
        rows = torch.as_tensor(array if keep else array.astype(np.float32))
    if rows.ndim not in (1, 2) or rows.shape[-1] == 0:
        raise DictEmbedError(
            f"similarity: {name} must be one vector or a matrix of them, got shape {tuple(rows.shape)}"
        )
    return rows
