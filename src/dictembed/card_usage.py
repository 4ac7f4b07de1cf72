"""The usage snippets of a model card: how to load a saved folder with sentence-transformers (where it reproduces the
folder's pooling) or dictembed, a weightless ONNX export through its graph, and the reverse dictionary of a folder
with an entry space."""

from __future__ import annotations

import json
from typing import Any

ST_POOLINGS = ("cls", "mean", "max")  # the poolings SentenceTransformer(path) reproduces


def _export_usage(model: str, graph: str, pooling: str) -> list[str]:
    """How to load a weightless export: sentence-transformers' ONNX backend on its graph, dictembed's query
    encoder; no torch weights (`Encoder.load` needs an export made with --keep-weights)."""
    lines = []
    if pooling in ST_POOLINGS:
        lines += [
            "With sentence-transformers' ONNX backend (its `onnx` extra, `optimum-onnx[onnxruntime]`), on the graph "
            f"`onnx/{graph}`; this folder holds no torch weights:",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            f'model = SentenceTransformer({json.dumps(model)}, backend="onnx", model_kwargs='
            + json.dumps({"file_name": graph})
            + ")",
            'embeddings = model.encode(["a dog barks", "a cat purrs"])',
            "```",
            "",
        ]
    return lines + [
        "With dictembed (ONNX Runtime, no torch):",
        "",
        "```python",
        "from dictembed.backends.onnx.query import OnnxQueryEncoder",
        "",
        f"encoder = OnnxQueryEncoder.open({json.dumps(model)})",
        'embeddings = encoder.encode(["a dog barks", "a cat purrs"])',
        "```",
        "",
    ]


def usage_lines(
    model: str, pooling: str, graph: str | None, has_space: bool, ranking: dict[str, Any] | None
) -> list[str]:
    """The card's Usage section for the folder `model` (a Hub id or a placeholder path) that pools by `pooling`: a
    weightless export's loads through its `graph`, else sentence-transformers' (where it reproduces the pooling)
    and dictembed's, then `predict` where the folder `has_space`, searched with its saved `ranking`."""
    lines = ["## Usage", ""]
    if graph is not None:
        lines += _export_usage(model, graph, pooling)
    elif pooling in ST_POOLINGS:
        lines += [
            "With sentence-transformers:",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            "",
            f'model = SentenceTransformer("{model}")',
            'embeddings = model.encode(["a dog barks", "a cat purrs"])',
            "```",
            "",
            "With dictembed:",
            "",
        ]
    else:
        lines += [
            f"This model pools by `{pooling}`, which sentence-transformers cannot reproduce: "
            "`SentenceTransformer(path)` would silently use mean pooling. Load it with dictembed:",
            "",
        ]
    if graph is None:
        lines += [
            "```python",
            "from dictembed.encoder import Encoder",
            "",
            f'encoder = Encoder.load("{model}")',
            'embeddings = encoder.encode(["a dog barks", "a cat purrs"])',
            "```",
            "",
        ]
    if has_space:
        lines += [
            "Reverse dictionary (definition -> ranked entries, with the saved entry space):",
            "",
            "```bash",
            f'dictembed predict --model {model} "a long-necked African animal"',
            "```",
            "",
        ]
        if ranking:
            settings = ", ".join(f"`{name}` {value}" for name, value in ranking.items())
            lines += [f"It is searched with {settings} unless `predict` or `serve` is told otherwise.", ""]
    return lines
