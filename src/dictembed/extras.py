"""Optional features and the extra that installs each: a missing one is a one-line error with the fix."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from dictembed.errors import DictEmbedError

# extra -> (the modules it provides, what needs it)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "plot": (("matplotlib",), "plotting"),
    "gcide": (("dictionary",), "the GCIDE dictionary"),
    "lexsub": (("lemminflect",), "lexical substitution and GR-BERT triplets"),
    "finetune": (("datasets",), "supervised STS-B fine-tuning"),
    "onnx": (("onnxruntime", "onnx"), "the ONNX backend"),
    "openvino": (("openvino",), "the OpenVINO backend"),
    "mteb": (("mteb",), "MTEB evaluation"),
    "serve": (("fastapi", "uvicorn"), "the web server"),
    "zh": (("pypinyin",), "the pinyin filter"),
    "experiments": (("bm25s", "Stemmer"), "BM25 in experiments/reverse_dictionary_ranking.py"),
}


# extras whose packages need a newer Python than dictembed does (`pyproject.toml`'s markers): installing them on an
# older one installs nothing
MIN_PYTHON: dict[str, tuple[int, int]] = {"fr": (3, 11)}


def install_hint(extra: str) -> str:
    """The `pip install "dictembed[extra]"` that adds `extra`, or, on a Python its packages do not support, what it
    needs instead."""
    needed = MIN_PYTHON.get(extra)
    if needed is not None and sys.version_info[:2] < needed:
        have = ".".join(map(str, sys.version_info[:2]))
        return f'pip install "dictembed[{extra}]" on Python {needed[0]}.{needed[1]} or later (this is {have})'
    return f'pip install "dictembed[{extra}]"'


class MissingExtraError(DictEmbedError):
    """An optional dependency is not installed; the message names the `pip install` that adds it."""


def require(extra: str, module: str | None = None) -> ModuleType:
    """Import `module` (default: the extra's first module), or raise naming `pip install "dictembed[extra]"`."""
    modules, feature = EXTRAS[extra]
    name = module or modules[0]
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise MissingExtraError(
            f"{feature} needs the optional package {err.name or name!r}: {install_hint(extra)}"
        ) from err


def installed(extra: str) -> bool:
    """Whether every module of `extra` can be imported (found, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRAS[extra][0])


def package_file(package: str, patterns: tuple[str, ...], extra: str, feature: str, distribution: str) -> Path:
    """The first file matching one of `patterns` (globs in the folder of the installed module `package`), found
    without importing it; else MissingExtraError naming `distribution` and `pip install "dictembed[extra]"`."""
    spec = importlib.util.find_spec(package)
    for folder in list(spec.submodule_search_locations or []) if spec else []:
        for pattern in patterns:
            if found := sorted(Path(folder).glob(pattern)):
                return found[0]
    raise MissingExtraError(f"{feature} needs the optional package {distribution}: {install_hint(extra)}")
