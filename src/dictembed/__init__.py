"""dictembed: sentence embeddings learned from dictionaries (DefSent, DefSent+, GR-BERT)."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Encoder", "__version__"]


def __getattr__(name: str) -> Any:
    """`dictembed.Encoder` without importing torch for `import dictembed` alone."""
    if name == "Encoder":
        from dictembed.encoder import Encoder

        return Encoder
    raise AttributeError(f"module 'dictembed' has no attribute {name!r}")
