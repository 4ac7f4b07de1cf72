"""`ExportEncoder`: a weightless ONNX export (`dictembed export` without --keep-weights, pushed or local) as
`dictembed encode` and the sentence evaluations (`evaluate sts`, `sts-multi`, `senteval`) use an `Encoder`: the
vectors of `OnnxQueryEncoder` (ONNX Runtime and `tokenizers`; the graph computes in its own precision), with
`Encoder.encode`'s output options (L2 normalisation, quantisation of the output) and the identity a resumable
`encode` checks. What needs the torch network (training, MTEB's model, lexical substitution) still needs an export
made with --keep-weights."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from dictembed.backends.onnx.query import OnnxQueryEncoder
from dictembed.model_folder import ModelFolder


def graph_precision(folder: ModelFolder) -> str:
    """What an export's graph computes in, from its manifest (`onnx/export.json`), before the graph opens."""
    from dictembed.backends.onnx.session import exported_file

    return manifest_precision(exported_file(folder.path)[1])  # a manifest that does not parse: its one-line error


def manifest_precision(manifest: dict[str, Any]) -> str:
    """An export manifest's quantisation ("int8"), else fp32."""
    quantize = manifest.get("quantize")
    return str(quantize) if quantize else "fp32"


class ExportEncoder:
    """`Encoder`'s sentence interface over an export's graph, on the CPU."""

    backend = "onnx"

    def __init__(self, query: OnnxQueryEncoder) -> None:
        self.query = query
        self.dim = query.dim
        self.max_length = query.max_length
        self.normalize = query.normalize
        self.pooling = query.pooling
        self.compute_precision = manifest_precision(query.manifest)
        self.batch_invariant = query.batch_invariant  # an int8 graph's vectors depend on their batch

    @classmethod
    def open(cls, folder: ModelFolder) -> ExportEncoder:
        return cls(OnnxQueryEncoder.open(folder))

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cpu")

    @property
    def config(self) -> dict[str, Any]:
        """The settings a resumable encode records (as `Encoder.config`), and the export's manifest."""
        modules = ["Normalize"] if self.normalize else []
        return {
            "pooling": self.pooling,
            "modules": modules,
            "max_length": self.max_length,
            "normalize": self.normalize,
            "dim": self.dim,
            "export": dict(self.query.manifest),
        }

    @property
    def name_or_path(self) -> str:
        return self.query.name

    def autocast(self) -> contextlib.AbstractContextManager:
        """Nothing: the graph computes in the precision it was exported in."""
        return contextlib.nullcontext()

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        quantize: str = "float32",
        prompt: str | None = None,
    ) -> np.ndarray:
        """As `Encoder.encode`: a list gives an (n, dim) array, one string a (dim,) vector, L2-normalised if
        asked and quantised unless `quantize` is float32 (sentence-transformers' `quantize_embeddings`)."""
        import torch

        from dictembed.st_encode import encode_keywords, encode_normalize, encode_output

        quantization = encode_keywords(quantize, None, {})
        normalize = encode_normalize(normalize_embeddings, None)
        single = isinstance(sentences, str)
        vectors = self.query.encode(sentences, batch_size, prompt=prompt, show_progress_bar=show_progress_bar)
        rows = torch.from_numpy(np.atleast_2d(vectors))
        return cast(np.ndarray, encode_output(rows, normalize, quantization, "array", single))
