"""Errors that name the file, line or model at fault, so users never see a stack trace from deep inside."""

from __future__ import annotations

from pathlib import Path


class DictEmbedError(Exception):
    """Base class of every error this package raises on bad input."""


class DataFormatError(DictEmbedError):
    """A data file is malformed; the message names the file and, where known, the line."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelLoadError(DictEmbedError):
    """A model name or path could not be loaded (unknown name offline, missing files, missing head)."""


class MissingHeadError(ModelLoadError):
    """The checkpoint has no pre-trained word-prediction (MLM) head."""
