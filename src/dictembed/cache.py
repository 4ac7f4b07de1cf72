"""The one entry-space cache shared by every run: `$DICTEMBED_CACHE`, else the user cache folder
(`$XDG_CACHE_HOME/dictembed`, else `~/.cache/dictembed`), like Hugging Face's own cache.

A cached space is `definitions-<key>.safetensors` (its float32 matrix, keyed by `cache_key`, and for a plain
definition space the float16 vector of every definition, for the reverse dictionary's rerank) with a
small JSON sidecar `definitions-<key>.json` saying what it was built from. Building one is serialised by a file
lock in `.locks/` (a second process building the same space waits, then loads the finished file), and the
matrix is written to a temporary name and renamed into place, so the cache never holds a half-written file.

A long build keeps its encoded definitions, part by part, in `definitions-<key>.parts/` (`PartialBuild`): an
interrupted build resumes from its last part, and the folder is removed once the matrix is cached. A cache that
cannot be used (a file, a read-only folder, a full disk) is named once in a warning and the run goes on without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from filelock import FileLock, Timeout
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from dictembed.device_choices import is_main_process
from dictembed.devices import wait_for_everyone
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.io import STAGING_MARK, STAGING_SUFFIX, atomic_write
from dictembed.paths import CACHE_ENV as CACHE_ENV  # re-exported: the variable naming the cache
from dictembed.paths import cache_root

log = logging.getLogger(__name__)

LOCK_DIR = ".locks"
PREFIX = "definitions-"
# Names this project writes in the cache folder (and nothing else is ever listed or removed): the matrix,
# its sidecar, the reverse dictionary's word frequencies (`dictembed.word_frequency`), JMdict's decompressed database
# (`dictionary.sources.jmdict`), a temporary file of an interrupted write (`NAME.<pid>.partial`) and the lock files.
OWN_FILE = re.compile(
    rf"({PREFIX}[0-9a-f]{{16}}\.(safetensors|json)|frequency-[0-9a-f]{{16}}\.npy|jmdict-[0-9a-f]{{16}}\.sqlite)"
    rf"(\.\d+{re.escape(STAGING_SUFFIX)})?"
)
OWN_LOCK = re.compile(rf"{PREFIX}[0-9a-f]{{16}}\.lock")
# The parts of an unfinished build (`PartialBuild`): a folder per space, holding numbered parts and a manifest.
PARTS_SUFFIX = ".parts"
HEADWORD_PARTS = "headwords-"  # the parts of a model's headword vectors being encoded (`headword_parts`)
OWN_PARTS = re.compile(rf"({PREFIX}|{HEADWORD_PARTS})[0-9a-f]{{16}}{re.escape(PARTS_SUFFIX)}")
OWN_PART = re.compile(rf"(part-\d{{5}}\.npy|manifest\.json)(\.\d+{re.escape(STAGING_SUFFIX)})?")
# The search indexes of folders saved without one (`search_index.cached_index_dir`): a folder per model folder,
# named by a 40-digit digest, holding the index's two files, beside its lock.
INDEX_DIR = "search_index"
OWN_INDEX = re.compile(r"[0-9a-f]{40}")
OWN_INDEX_FILE = re.compile(rf"index\.(json|safetensors)|{re.escape(STAGING_MARK)}")
_UNUSABLE: set[str] = set()  # cache folders already named as unusable in this process (said once each)


def default_cache_dir() -> Path:
    """The entry-space cache: $DICTEMBED_CACHE, else $XDG_CACHE_HOME/dictembed, else ~/.cache/dictembed."""
    return cache_root()


def cache_folder(cache_dir: str | Path | None = None) -> Path:
    """`cache_dir` as a path, or `default_cache_dir()` when it is None."""
    return Path(cache_dir) if cache_dir is not None else default_cache_dir()


def space_path(key: str, cache_dir: str | Path | None = None) -> Path:
    """The cache file of the space keyed `key` in `cache_dir` (default: `default_cache_dir()`)."""
    return cache_folder(cache_dir) / f"{PREFIX}{key}.safetensors"


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def _source(path: Path) -> dict[str, Any]:
    """What the sidecar of cache file `path` records ({} when it is missing or unreadable)."""
    try:
        info = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _lock(path: Path) -> FileLock:
    """The lock of one cache file, kept in `.locks/` so the cache folder itself holds only finished files."""
    folder = path.parent / LOCK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(str(folder / f"{path.stem}.lock"))


def _digest(matrix: torch.Tensor) -> str:
    """The SHA-256 of a matrix's bytes: what the sidecar records, so that a cache file changed after it was
    written (a flipped sign, a truncated copy) is noticed and rebuilt instead of used."""
    data = matrix.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    return hashlib.sha256(data.data).hexdigest()  # the array's buffer, not a copy


def _read(path: Path, needs: tuple[str, ...] = ()) -> dict[str, torch.Tensor] | None:
    """The cached tensors (the matrix, and `needs` beside it), or None (logged, naming the file) when the file is
    missing, unreadable, lacks one of `needs` or is not what was written: then it is rebuilt."""
    if not path.exists():
        return None
    try:
        tensors = load_file(str(path))
        matrix = tensors["matrix"]
    except (OSError, SafetensorError, KeyError) as err:
        log.warning("entry-space cache %s is unreadable (%s); rebuilding it", path, " ".join(str(err).split()))
        return None
    info = _source(path)
    digests = info.get("sha256_of", {})
    missing = [name for name in needs if name not in tensors]
    if matrix.ndim != 2 or matrix.dtype != torch.float32 or not torch.isfinite(matrix).all():
        problem = f"not a finite float32 matrix ({matrix.dtype}, shape {list(matrix.shape)})"
    elif "shape" in info and list(matrix.shape) != info["shape"]:
        problem = f"of shape {list(matrix.shape)}, recorded {info['shape']}"
    elif "sha256" in info and _digest(matrix) != info["sha256"]:
        problem = "changed since it was written (its checksum differs)"
    elif missing:
        problem = f"without its {', '.join(missing)} (written by an older version)"
    elif any(name in digests and _digest(tensors[name]) != digests[name] for name in needs):
        problem = "changed since it was written (its checksum differs)"
    else:
        return {name: tensors[name] for name in ("matrix", *needs)}
    log.warning("entry-space cache %s is %s; rebuilding it", path, problem)
    return None


def parts_folder(path: Path) -> Path:
    """The folder of the parts of an unfinished build of the cache file `path`: `definitions-<key>.parts`."""
    return path.with_suffix(PARTS_SUFFIX)


def _without_cache(folder: Path, reason: str) -> None:
    """Say once per folder that the cache cannot be used and that the run goes on without it."""
    if str(folder) in _UNUSABLE:
        return
    _UNUSABLE.add(str(folder))
    log.warning(
        "entry-space cache %s cannot be used (%s); going on without caching entry spaces (set %s to a writable folder)",
        folder,
        reason,
        CACHE_ENV,
    )


def _reason(err: OSError) -> str:
    """An OSError in a few words, without the path that the warning names anyway."""
    return err.strerror or type(err).__name__


def _acquire(path: Path) -> FileLock | None:
    """The lock of cache file `path`, held; None (said once) when the cache folder cannot be used: a file, or a
    folder that cannot be created or written."""
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        _without_cache(folder, "it is a file, not a folder")
        return None
    try:
        lock = _lock(path)
        lock.acquire()
    except OSError as err:
        _without_cache(folder, _reason(err))
        return None
    return lock


def _write(path: Path, tensors: dict[str, torch.Tensor], source: dict[str, Any] | None) -> None:
    """Write the tensors (`matrix` and any beside it) and their sidecar into the cache, then remove the parts of
    its build; a failure of the disk (read-only, full) is said once and the run goes on with them in memory."""
    matrix = tensors["matrix"]
    try:
        atomic_write(path, save({name: t.detach().cpu().contiguous() for name, t in tensors.items()}))
        info = {**(source or {}), "shape": list(matrix.shape), "sha256": _digest(matrix)}
        info["sha256_of"] = {name: _digest(t) for name, t in tensors.items() if name != "matrix"}
        info["created"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        atomic_write(_sidecar(path), json.dumps(info, indent=1))
    except OSError as err:
        _without_cache(path.parent, _reason(err))
        return
    log.info("entry space cached in %s", path)
    shutil.rmtree(parts_folder(path), ignore_errors=True)


def cached_tensors(
    path: Path,
    build: Callable[[Path | None], dict[str, torch.Tensor]],
    source: dict[str, Any] | None = None,
    needs: tuple[str, ...] = (),
) -> dict[str, torch.Tensor]:
    """The tensors cached at `path` (a float32 `matrix` and the `needs` beside it), else `build(parts)` written
    there (with `source` in a JSON sidecar).

    Holds the file's lock while checking, building and writing: two processes asking for the same space
    build it once; the second waits and loads the first one's file. `parts` is the folder where the build may
    keep its work in parts (`PartialBuild`, removed once the tensors are cached); None under a distributed launch
    and when the cache cannot be used, which is said once: then the tensors are built and returned uncached."""
    group = _distributed()
    if not group and (tensors := _read(path, needs)) is not None:
        log.info("entry space loaded from cache %s", path)
        return tensors
    # In a distributed run the processes build together (an encode may be shared among them): the main
    # process holds the lock for all of them and writes; the barriers make every process see one cache state.
    main = is_main_process()
    lock = _acquire(path) if main else None
    usable = lock is not None or not main
    try:
        wait_for_everyone()
        found = _read(path, needs) if usable else None  # built by another process while this one waited
        if found is not None:
            log.info("entry space loaded from cache %s", path)
        else:
            found = build(parts_folder(path) if usable and not group else None)
            if main and usable:
                _write(path, found, source)
        wait_for_everyone()
    finally:
        if lock is not None:
            lock.release()
    return found


class PartialBuild:
    """The encoded rows of a long build, kept in parts in `folder` (`parts_folder`) so that an interrupted build
    resumes from its last finished part. Each part is written atomically as `part-NNNNN.npy`; `manifest.json`
    records what the parts are of (`layout`: e.g. the row count, batch size and part size), and the parts of
    another layout are discarded. A folder that cannot be written is said once; the build then keeps no parts."""

    def __init__(self, folder: Path, layout: dict[str, Any]) -> None:
        self.folder, self.layout = folder, layout
        self.writable = True

    def _part(self, index: int) -> Path:
        return self.folder / f"part-{index:05d}.npy"

    def load(self, sizes: list[int]) -> list[np.ndarray]:
        """The finished parts, in order, whose rows fit `sizes` (the row count of each part): the first missing
        or damaged one ends them. The parts of another layout are removed."""
        try:
            recorded = json.loads((self.folder / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = None
        if recorded != self.layout:
            if recorded is not None:
                log.info("%s holds the parts of another build (%s); starting over", self.folder, recorded)
            self.remove()
            return []
        parts: list[np.ndarray] = []
        for index, size in enumerate(sizes):
            try:
                part = np.load(self._part(index), allow_pickle=False)
            except (OSError, ValueError, EOFError):
                break
            if part.dtype != np.float32 or part.ndim != 2 or part.shape[0] != size or not np.isfinite(part).all():
                break
            parts.append(part)
        return parts

    def save(self, index: int, part: np.ndarray) -> None:
        """Keep part `index`, atomically (the manifest before the first part)."""
        if not self.writable:
            return
        try:
            if not (self.folder / "manifest.json").exists():
                atomic_write(self.folder / "manifest.json", json.dumps(self.layout))
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(part, dtype=np.float32), allow_pickle=False)
            atomic_write(self._part(index), buffer.getvalue())
        except OSError as err:
            self.writable = False
            _without_cache(self.folder.parent, _reason(err))

    def remove(self) -> None:
        """Remove the folder and every part in it."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _distributed() -> bool:
    """Whether this process is one of several in an initialised torch.distributed group."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


@dataclass
class CachedSpace:
    """One cached entry space: its file, size in bytes (sidecar included), modification time and source."""

    path: Path
    size: int
    modified: float
    source: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "size": self.size,
            "modified": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.modified)),
            "source": self.source,
        }


def list_cache(cache_dir: str | Path | None = None) -> list[CachedSpace]:
    """The cached spaces in `cache_dir` (default: `default_cache_dir()`), newest first; a missing folder is empty."""
    folder = cache_folder(cache_dir)
    if folder.exists() and not folder.is_dir():
        raise DictEmbedError(f"{folder}: the entry-space cache is not a folder")
    spaces = []
    for path in sorted(folder.glob(f"{PREFIX}*.safetensors")):
        if not OWN_FILE.fullmatch(path.name):
            continue
        sidecar = _sidecar(path)
        stat = path.stat()
        size = stat.st_size + (sidecar.stat().st_size if sidecar.exists() else 0)
        spaces.append(CachedSpace(path, size, stat.st_mtime, _source(path)))
    return sorted(spaces, key=lambda s: -s.modified)


def cached_indexes(cache_dir: str | Path | None = None) -> list[tuple[Path, list[Path]]]:
    """The search indexes cached in `cache_dir` (`INDEX_DIR`): each one's folder and the files dictembed wrote in it
    (its lock, beside it, included)."""
    root = cache_folder(cache_dir) / INDEX_DIR
    if not root.is_dir():
        return []
    found = []
    for index in sorted(root.iterdir()):
        if index.is_dir() and not index.is_symlink() and OWN_INDEX.fullmatch(index.name):
            files = [p for p in sorted(index.iterdir()) if p.is_file() and OWN_INDEX_FILE.fullmatch(p.name)]
            lock = root / f"{index.name}.lock"
            found.append((index, files + ([lock] if lock.is_file() else [])))
    return found


def own_files(cache_dir: str | Path | None = None) -> list[Path]:
    """Every file this project wrote in the cache folder: spaces, sidecars, leftover temporary files, the parts of
    unfinished builds, locks, and the cached search indexes' files."""
    folder = cache_folder(cache_dir)
    if not folder.is_dir():
        return []
    files = [p for p in folder.iterdir() if p.is_file() and OWN_FILE.fullmatch(p.name)]
    for parts in folder.iterdir():
        if parts.is_dir() and OWN_PARTS.fullmatch(parts.name):
            files += [p for p in parts.iterdir() if p.is_file() and OWN_PART.fullmatch(p.name)]
    locks = folder / LOCK_DIR
    if locks.is_dir():
        files += [p for p in locks.iterdir() if p.is_file() and OWN_LOCK.fullmatch(p.name)]
    files += [p for _, index_files in cached_indexes(folder) for p in index_files]
    return sorted(files)


def clear_cache(cache_dir: str | Path | None = None) -> tuple[list[Path], int]:
    """Remove the files `own_files` lists (nothing else); returns them and the bytes freed. A space that
    another process is building (its lock is held) is left in place."""
    folder = cache_folder(cache_dir)
    if folder.exists() and not folder.is_dir():
        raise DictEmbedError(f"{folder}: the entry-space cache is not a folder")
    by_key: dict[str, list[Path]] = {}
    indexes = cached_indexes(folder)  # removed under their own locks, not the spaces'
    index_files = {p for _, files in indexes for p in files}
    for path in own_files(folder):
        if path in index_files:
            continue
        owner = path.parent if OWN_PARTS.fullmatch(path.parent.name) else path  # a part: its build's folder
        by_key.setdefault(owner.name.split(".")[0], []).append(path)
    # (lock, what it guards, its files, the folder they leave empty): a space with the parts of its unfinished
    # build, and a search index under the lock `search_index.folder_search_index` builds it under
    spaces = [(folder / f"{key}.safetensors", paths) for key, paths in by_key.items()]
    jobs = [(_lock(space), space, paths, parts_folder(space)) for space, paths in spaces]
    jobs += [(FileLock(f"{index}.lock"), index, files, index) for index, files in indexes]
    removed, freed = [], 0
    for lock, guarded, paths, emptied in jobs:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.warning("%s is being built by another process; left in place", guarded)
            continue
        try:
            for path in paths:
                with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                    size = path.stat().st_size
                    path.unlink()
                    removed.append(path)
                    freed += size
            with contextlib.suppress(OSError):  # only when emptied: a folder holding anything else stays
                emptied.rmdir()
            Path(lock.lock_file).unlink(missing_ok=True)  # also the lock the acquire above made, where there was none
        finally:
            lock.release()
    locks = folder / LOCK_DIR
    if locks.is_dir() and not any(locks.iterdir()):
        locks.rmdir()
    with contextlib.suppress(OSError):
        (folder / INDEX_DIR).rmdir()  # only when nothing is left in it
    return removed, freed


def human_size(size: int) -> str:
    """Bytes as a short human-readable size (1.2 MB)."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def cache_key(encoder: Encoder, dictionary: Dictionary, entries: str, ica: bool, build: str = "") -> str:
    """A hash of the encoder's weights (but the backbone's unused pooler), modules and default prompt, the
    dictionary's pairs, the entry type and ICA; and `build`, what encodes it where its vectors differ from the
    encoder's own ("int8": `runtime.builds_int8`; "": none, the older keys)."""
    digest = hashlib.sha1()
    encoder.hash_weights(digest)
    for headword, definition in dictionary.pairs():
        digest.update(f"{headword}\t{definition}\n".encode())
    digest.update(f"{entries}|{ica}|".encode() + _encoding(encoder))
    if build:
        digest.update(f"|build|{build}".encode())
    return digest.hexdigest()[:16]


def _encoding(encoder: Encoder) -> bytes:
    """What besides its weights makes an encoder's vectors: its window, modules, default prompt, compute precision
    and ONNX graph (each of the last three only when set, so that older keys stay valid)."""
    modules = ",".join(type(m).__name__ for m in encoder.post)  # e.g. Normalize, which has no weights to hash
    text = f"{encoder.max_length}|{modules}"
    if encoder.default_prompt:  # the prefix every definition is encoded after (a model without one keeps older keys)
        text += f"|prompt|{encoder.default_prompt}"
    if encoder.compute_precision != "fp32":  # a lower precision builds other vectors (fp32 keeps older keys)
        text += f"|{encoder.compute_precision}"
    if encoder.onnx is not None:  # an ONNX (e.g. int8) graph builds other vectors than the weights
        text += f"|onnx|{json.dumps(encoder.onnx.manifest, sort_keys=True)}"
    return text.encode()


def headword_parts(encoder: Encoder, words: list[str], batch_size: int, cache_dir: str | Path | None = None) -> Path:
    """The folder in `cache_dir` (default: `default_cache_dir()`) where the headword vectors of `words` encoded by
    `encoder` are kept in parts until the model folder holds them, keyed by the weights, the words, the pooling,
    the batch size and what else makes the vectors (`_encoding`): a save cut short resumes there, and another
    encoder never reads them."""
    digest = hashlib.sha1()
    encoder.hash_weights(digest)
    pooling = f"|{encoder.pooling}|{encoder.pooling_module.include_prompt}|{batch_size}|"
    digest.update(b"headwords|" + "\n".join(words).encode() + pooling.encode() + _encoding(encoder))
    return cache_folder(cache_dir) / f"{HEADWORD_PARTS}{digest.hexdigest()[:16]}{PARTS_SUFFIX}"
