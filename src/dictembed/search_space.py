"""The saved entry space as a search reads it: the words and the arrays of a matrix space (DefSent+'s definition
spaces, the word-embedding fallback) memory-mapped from `entry_space/tensors.safetensors`, in numpy, without torch.

A search touches a few thousand rows of the matrix and of the definition vectors, so mapping them (rather than
reading 270 MB) is what lets a one-query `predict` answer in about a second. `SearchSpace.of` views a space in
memory the same way, and `entry_space.matrix_space` gives the torch `MatrixSpace` back for the model's own logits.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from dictembed.errors import DictEmbedError
from dictembed.model_folder import SECOND_TENSORS, SPACE_DIR, SPACE_META, SPACE_TENSORS
from dictembed.second_dictionary import SecondDefinitions, second_problem
from dictembed.texts import is_real_number

if TYPE_CHECKING:
    from dictembed.entry_space import MatrixSpace

MATRIX_SPACES = ("DefinitionSpace", "WordEmbeddingSpace")  # the saved space types with an entry matrix
DTYPES = {
    "F16": np.float16,
    "F32": np.float32,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "U64": np.uint64,
}
SAVED_DTYPES = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}  # space.json's dtype names
MAX_HEADER = 100 * 2**20  # safetensors' own limit on the JSON header


def mapped_tensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as read-only memory maps (its format: an 8-byte little-endian header
    length, a JSON header of dtype, shape and byte range per tensor, then the data); a file whose header does
    not describe its data is a one-line error naming it: as the safetensors library checks, each tensor's byte
    range holds its dtype times its shape, and the ranges follow one another without overlap or gap over the
    whole data (overlapping tensors would alias one another's bytes)."""
    try:
        size, length, header = _header(path)
        tensors: dict[str, Any] = {}
        ranges: list[tuple[int, int, str]] = []
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = DTYPES.get(str(info.get("dtype"))) if isinstance(info, dict) else None
            if dtype is None:
                raise ValueError(f"tensor {name!r} has an unsupported dtype")
            shape = tuple(_whole(n) for n in info["shape"])
            begin, end = (_whole(n) for n in info["data_offsets"])
            if not 0 <= begin <= end <= size - 8 - length or end - begin != math.prod(shape) * dtype().itemsize:
                raise ValueError(f"tensor {name!r}: its byte range does not fit its shape or the file")
            ranges.append((begin, end, name))
            tensors[name] = (dtype, shape, 8 + length + begin)
        _check_ranges(ranges, size - 8 - length)
        identity = file_identity(path.stat())
        for begin, end, name in ranges:
            dtype, shape, offset = tensors[name]
            if end > begin:
                mapped = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
                mapped.file_identity = identity  # type: ignore[attr-defined]  # what `all_finite` reads is this file
                tensors[name] = np.asarray(mapped)  # a plain array over the map: slicing a np.memmap costs 6 us
            else:
                tensors[name] = np.zeros(shape, dtype=dtype)
        return tensors
    except FileNotFoundError:
        raise DictEmbedError(f"{path}: missing from its model folder") from None
    except (OSError, ValueError, TypeError, KeyError, struct.error, RecursionError) as err:
        raise DictEmbedError(f"{path}: corrupt or truncated ({type(err).__name__}: {err})") from None


def _header(path: Path) -> tuple[int, int, dict[str, Any]]:
    """A safetensors file's size, header length and JSON header (its first 8 + length bytes); a ValueError (or an
    OSError, struct.error) where they do not read."""
    size = path.stat().st_size
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        if not 2 <= length <= min(MAX_HEADER, size - 8):
            raise ValueError(f"header length {length} does not fit the file's {size} bytes")
        header = json.loads(f.read(length))
    if not isinstance(header, dict):
        raise ValueError("the header is no JSON object")
    return size, length, header


def tensor_metadata(path: Path) -> dict[str, str]:
    """The string metadata a safetensors file's header records (`__metadata__`); empty where it records none or
    its header does not read (`mapped_tensors` names a corrupt file)."""
    try:
        metadata = _header(path)[2].get("__metadata__")
    except (OSError, ValueError, TypeError, struct.error, RecursionError):
        return {}
    if not isinstance(metadata, dict):
        return {}
    return {key: value for key, value in metadata.items() if isinstance(key, str) and isinstance(value, str)}


def _whole(value: object) -> int:
    """A non-negative whole number of a safetensors header (a shape or an offset), else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r:.40} is no size or offset")
    return value


def _check_ranges(ranges: list[tuple[int, int, str]], data: int) -> None:
    """Refuse tensors' byte ranges that overlap, leave a gap or do not end where the `data` bytes end (what the
    safetensors library refuses)."""
    ordered = sorted(ranges)
    for (_, before, other), (begin, end, name) in zip(ordered, ordered[1:], strict=False):
        if begin < before:
            raise ValueError(f"tensor {name!r}: its byte range {begin}-{end} overlaps the bytes of tensor {other!r}")
    position = 0
    for begin, end, name in ordered:
        if begin != position:
            raise ValueError(f"tensor {name!r}: its byte range starts at {begin}, after a gap from {position}")
        position = end
    if position != data:
        raise ValueError(f"the tensors' bytes end at {position}, the file's data at {data}")


HALF_TO_SINGLE = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


HALF_CAST_MIN = 8192  # elements: below, ONNX Runtime's call overhead costs more than the table's look-ups


def as_float32(rows: np.ndarray) -> np.ndarray:
    """`rows` in float32 as `astype` gives them (a signalling NaN aside); float16 through ONNX Runtime's Cast where
    it is installed (`half_cast`: a search's 1,000 exact rows in 0.05 ms against 0.35 ms), or for small arrays
    through a table of every half value (256 KB), about half the time of numpy's own conversion."""
    if rows.dtype == np.float16:
        if rows.size >= HALF_CAST_MIN:
            from dictembed.backends.onnx.array_kernels import half_cast

            if (cast := half_cast()) is not None:
                return cast(rows)
        return np.take(HALF_TO_SINGLE, rows.view(np.uint16))
    return np.asarray(rows, dtype=np.float32)


def row_norms(rows: np.ndarray) -> np.ndarray:
    """The L2 norm of each row of a 2-D float array (half the time of `np.linalg.norm` on a search's rows)."""
    return np.sqrt(np.einsum("ij,ij->i", rows, rows))


def l2_normalize(rows: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (at least 1e-12, as torch's `F.normalize`: a zero row stays zero)."""
    return rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)


@dataclass
class SearchSpace:
    """A matrix space's words and arrays in numpy (memory maps when opened from a folder): `matrix` [entries, dim]
    (float16 or float32), `counts` and `definitions` (a definition space's per-entry definition counts and float16
    definition vectors, or None), `headwords` (its float16 vector of each entry's word, or None) and `second` (a
    second dictionary's definition vectors of its words, `second_dictionary`, or None)."""

    words: list[str]
    matrix: np.ndarray
    similarity: Literal["dot", "cosine"] = "dot"
    temperature: float = 0.05
    kind: str = "definitions"
    type_name: str = "DefinitionSpace"
    counts: np.ndarray | None = None
    definitions: np.ndarray | None = None
    headwords: np.ndarray | None = None
    second: SecondDefinitions | None = None

    def __len__(self) -> int:
        return len(self.words)

    @cached_property
    def index(self) -> dict[str, int]:
        """Each word's entry."""
        return {word: i for i, word in enumerate(self.words)}

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @classmethod
    def of(cls, space: MatrixSpace) -> SearchSpace:
        """The view of a space in memory (its tensors as numpy arrays, shared)."""
        counts = getattr(space, "counts", None)
        definitions = getattr(space, "definitions", None)
        headwords = getattr(space, "headwords", None)
        return cls(
            space.words,
            space.matrix.detach().cpu().numpy(),
            space.similarity,
            space.temperature,
            space.kind,
            type(space).__name__,
            None if counts is None else counts.numpy(),
            None if definitions is None else definitions.numpy(),
            None if headwords is None else headwords.numpy(),
        )

    @staticmethod
    def saved_type(folder: str | Path) -> str | None:
        """The type of the entry space saved in `folder` (its space.json), or None when it has none readable."""
        try:
            meta = json.loads((Path(folder) / SPACE_DIR / SPACE_META).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return meta.get("type") if isinstance(meta, dict) and isinstance(meta.get("type"), str) else None

    @classmethod
    def open(cls, folder: str | Path) -> SearchSpace:
        """The matrix space saved in `folder`, mapped; what `load_entry_space` would refuse is refused here too, as a
        one-line error naming the file."""
        space_dir = Path(folder) / SPACE_DIR
        meta_path = space_dir / SPACE_META
        if not meta_path.exists():
            raise DictEmbedError(f"{folder} holds no saved entry space ({SPACE_DIR}/{SPACE_META} missing)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            type_name, words = meta["type"], meta["words"]
            if type_name not in MATRIX_SPACES:
                raise ValueError(f"{type_name!r} is no matrix space")
            if not isinstance(words, list):
                raise TypeError("words is no list")
        except (OSError, ValueError, TypeError, KeyError, RecursionError) as err:
            raise DictEmbedError(f"{meta_path}: corrupt entry space ({type(err).__name__}: {err})") from None
        tensors = mapped_tensors(space_dir / SPACE_TENSORS)
        problem = _problem(meta, words, tensors)
        if problem:
            raise DictEmbedError(f"{space_dir}: the saved entry space cannot be trusted: {problem}")
        return cls(
            words,
            tensors["matrix"],
            cast(Literal["dot", "cosine"], meta.get("similarity", "dot")),
            float(meta.get("temperature", 0.05)),
            str(meta.get("kind") or "definitions"),
            type_name,
            tensors.get("counts"),
            tensors.get("definitions"),
            tensors.get("headwords"),
            open_second(space_dir, len(words), int(tensors["matrix"].shape[1])),
        )

    def unit_rows(self, rows: np.ndarray, inverse_norms: np.ndarray) -> np.ndarray:
        """The float32 rows `rows` of the matrix scaled to unit length by their `inverse_norms`."""
        return as_float32(self.matrix[rows]) * inverse_norms[:, None]

    def unit_cosines(self, rows: np.ndarray, inverse_norms: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The dot products of `query` with the rows `rows` of the matrix scaled to unit length by their
        `inverse_norms` (`unit_rows`), each scaled after its product: one multiplication a row, not one a value."""
        return (as_float32(self.matrix[rows]) @ query) * inverse_norms

    @cached_property
    def first_definitions(self) -> np.ndarray:
        """The row of `definitions` where each entry's rows start (computed once)."""
        counts = np.asarray(self.counts)
        return np.cumsum(counts) - counts

    def definition_rows(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of `definitions` of each of `entries` (`definition_rows`)."""
        return definition_rows(self.first_definitions, np.asarray(self.counts), entries)

    def definition_cosines(self, entries: np.ndarray, query: np.ndarray) -> list[np.ndarray] | None:
        """Per entry of `entries`, its definition vectors, in dictionary order, scaled to unit length, times `query`
        (their cosines to it, all scaled alike by its norm; several query rows: the best of them), from one
        product; None for a space that keeps no definition vectors."""
        if self.definitions is None or self.counts is None:
            return None
        if not len(entries):
            return []
        rows, starts = self.definition_rows(entries)
        chosen = as_float32(self.definitions[rows])
        products = chosen @ query.T if query.ndim == 2 else chosen @ query
        best = products.max(axis=1) if query.ndim == 2 else products
        return np.split(best / np.maximum(row_norms(chosen), 1e-12), starts[1:])


def open_second(space_dir: Path, entries: int, dim: int) -> SecondDefinitions | None:
    """The second dictionary's definition vectors saved in `space_dir` (`second_dictionary`), mapped, or None when
    it holds none; tensors that do not fit a space of `entries` entries of `dim` dimensions, or that hold NaN or
    infinite values, are a one-line error naming the file."""
    path = space_dir / SECOND_TENSORS
    if not path.exists():
        return None
    tensors = mapped_tensors(path)
    counts, definitions = tensors.get("counts"), tensors.get("definitions")
    if counts is None or definitions is None:
        problem: str | None = "it needs counts and definitions"
    else:
        problem = second_problem(counts, definitions, entries, dim)
        if problem is None and not all_finite(definitions):
            problem = "its definitions hold NaN or infinite values"
    if problem or counts is None or definitions is None:
        raise DictEmbedError(f"{path}: the second dictionary's definitions cannot be trusted: {problem}")
    return SecondDefinitions(saved_name(path), counts, definitions)


MAX_NAME = 200  # characters of a second dictionary's recorded name (a dictionary name or a file path)


def saved_name(path: Path) -> str:
    """The name of the dictionary whose definitions a second dictionary's file holds, as `SecondDefinitions.save`
    records it (JSON in the header's metadata), else "second"."""
    try:
        name = json.loads(tensor_metadata(path).get("dictionary", "null"))
    except (ValueError, RecursionError):
        name = None
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        return "second"  # a name the card and one-line errors could not show as it is
    return name


def definition_rows(first: np.ndarray, counts: np.ndarray, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The definition rows of each of `entries`, one after another, and where each entry's rows start among them
    (for `np.maximum.reduceat`), of a space whose entry i has `counts[i]` rows from row `first[i]`."""
    sizes = counts[entries]
    starts = np.cumsum(sizes) - sizes
    return np.repeat(first[entries] - starts, sizes) + np.arange(int(sizes.sum())), starts


def ranges_fit(starts: np.ndarray, length: int) -> bool:
    """Whether `starts` cut `length` rows into runs (run i is rows `starts[i]:starts[i + 1]`): from 0 to `length`,
    never decreasing."""
    return bool(starts[0] == 0 and starts[-1] == length and not (np.diff(starts) < 0).any())


# The unsigned integer of each float width and its exponent bits: a value is finite unless they are all set
EXPONENT_BITS = {2: (np.uint16, 0x7C00), 4: (np.uint32, 0x7F800000), 8: (np.uint64, 0x7FF0000000000000)}
FINITE_CHUNK = 1 << 18  # values a pass of `all_finite` reads: its buffer (at most 2 MB) stays in the CPU's cache


def all_finite(values: np.ndarray) -> bool:
    """Whether every value of `values` is finite (no NaN, no infinity): for float arrays their exponent bits, a
    chunk at a time, so that a whole saved space is checked at every load (a 148,730 x 384 float16 matrix in about
    15 ms; `np.isfinite` widens each float16 first, about 140 ms). An array mapped from a file whole is read from
    the file into one chunk's buffer: touching every page of the map would keep the whole file in the process's
    resident memory (a one-query `predict` took 667 MB instead of 392)."""
    bits = EXPONENT_BITS.get(values.dtype.itemsize) if values.dtype.kind == "f" and values.dtype.isnative else None
    if bits is None:
        return bool(np.isfinite(values).all())
    kind, exponent = bits
    buffer = np.empty(min(values.size, FINITE_CHUNK), kind)

    def finite(part: np.ndarray) -> bool:
        return bool(np.bitwise_and(part, kind(exponent), out=buffer[: part.size]).max() != exponent)

    if (mapped := _mapped_file(values)) is not None:
        try:
            with open(mapped[0], "rb") as file:
                if file_identity(os.fstat(file.fileno())) == mapped[2]:  # still the file mapped
                    file.seek(mapped[1])
                    chunk = np.empty(buffer.size, kind)
                    left = values.size
                    while left:
                        part = chunk[: min(left, chunk.size)]
                        if file.readinto(part.view(np.uint8).data) != part.nbytes:
                            break
                        if not finite(part):
                            return False
                        left -= part.size
                    if not left:
                        return True
        except OSError:
            pass  # replaced or gone since it was mapped: the map itself is read below
    flat = np.ascontiguousarray(values).reshape(-1).view(kind)
    return all(finite(flat[start : start + FINITE_CHUNK]) for start in range(0, flat.size, FINITE_CHUNK))


def file_identity(stat: os.stat_result) -> tuple[int, ...]:
    """What tells one file from another at one path: device, inode, size and modification time."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _mapped_file(values: np.ndarray) -> tuple[str, int, tuple[int, ...]] | None:
    """The file, offset and `file_identity` of a C-contiguous array that is a whole memory map of `mapped_tensors`,
    else None."""
    base = values.base
    identity = getattr(base, "file_identity", None)
    if not isinstance(base, np.memmap) or base.filename is None or identity is None or values.size == 0:
        return None
    if not values.flags.c_contiguous or values.ctypes.data != base.ctypes.data or values.nbytes != base.nbytes:
        return None
    return str(base.filename), int(base.offset), identity


def temperature_problem(meta: dict[str, Any]) -> str | None:
    """What makes space.json's temperature (when it records one) unusable, or None: anything but a positive finite
    number (the cosine logits divide by it)."""
    if "temperature" not in meta:
        return None
    value = meta["temperature"]
    if not is_real_number(value, 0, above=True):
        return f"space.json: temperature {json.dumps(value)[:40]} is not a positive number"
    return None


def saved_problem(
    meta: dict[str, Any], words: list, tensors: dict[str, np.ndarray], finite: Collection[str] | None = None
) -> str | None:
    """What makes a saved space untrustworthy, or None: words that are not non-empty strings, a temperature that is
    no positive number, a matrix whose dtype is not the one space.json records, NaN or infinite values in the
    tensors `finite` names (default: every floating one: the matrix, and a definition space's definition and
    headword vectors, which a search's reranking reads). `load_entry_space` and `SearchSpace.open` both ask it."""
    if not all(isinstance(word, str) and word.strip() for word in words):
        return "space.json: every word must be a non-empty string"
    if problem := temperature_problem(meta):
        return problem
    matrix = tensors.get("matrix")
    if matrix is not None:
        recorded = meta.get("dtype")  # older saves record none: any float
        expected = SAVED_DTYPES.get(recorded, matrix.dtype) if recorded is not None else matrix.dtype
        if matrix.dtype != expected or matrix.dtype.kind != "f":
            return f"tensors.safetensors holds a {matrix.dtype} matrix, space.json says {recorded or 'float'}"
    names = finite if finite is not None else [name for name, t in tensors.items() if t.dtype.kind == "f"]
    bad = sorted(name for name in names if name in tensors and not all_finite(tensors[name]))
    return f"tensors.safetensors: {', '.join(bad)} holds NaN or infinite values" if bad else None


def _problem(meta: dict[str, Any], words: list, tensors: dict[str, np.ndarray]) -> str | None:
    """`saved_problem` (every floating tensor checked for NaN), a similarity other than dot or cosine, and shapes
    that do not fit the words (the torch space classes check those)."""
    if problem := saved_problem(meta, words, tensors):
        return problem
    if meta.get("similarity", "dot") not in ("dot", "cosine"):
        return f"unknown entry similarity {meta.get('similarity')!r}"
    matrix = tensors.get("matrix")
    if matrix is None or matrix.ndim != 2:
        return "tensors.safetensors holds no entry matrix"
    if matrix.shape[0] != len(words):
        return f"{len(words)} entries but {matrix.shape[0]} vectors"
    counts, definitions = tensors.get("counts"), tensors.get("definitions")
    if counts is not None and (counts.shape != (len(words),) or (len(counts) and counts.min() < 1)):
        return f"{len(words)} entries need as many positive counts, got {counts.shape}"
    if definitions is not None:
        expected = (int(counts.sum()) if counts is not None else -1, matrix.shape[1])
        if tuple(definitions.shape) != expected:
            return f"{tuple(definitions.shape)} definition vectors do not fit the entries' counts {expected}"
    headwords = tensors.get("headwords")
    if headwords is not None and tuple(headwords.shape) != tuple(matrix.shape):
        return f"{tuple(headwords.shape)} headword vectors do not fit the entries {tuple(matrix.shape)}"
    return None
