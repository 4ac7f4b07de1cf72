"""The saved model folder as one concept: its layout, its run record (read once), the dictionary it uses, and what it
may reference, which is nothing outside itself.

A model folder is a sentence-transformers folder plus dictembed's own files:

    dictembed.json          the run record (`dictembed.record.RunRecord`; `defsent.json` in old saves)
    entry_space/            the entry space: space.json and tensors.safetensors (`dictembed.entry_space`), and
                            second.safetensors: a second dictionary's definitions (`dictembed.second_dictionary`)
    definitions.jsonl       the definitions of the model's dictionary, so that it serves them from anywhere
    search_index/           what a search reads, ready to map: entry groups, the coarse index, the definitions
                            of each entry (`dictembed.search_index`); rebuilt from the two above when missing
    onnx/                   an ONNX export (export.json lists it; `dictembed.backends.onnx`), or in a trained folder
                            its query graph (query.json lists it: `write_query_graph`)
    README.md               the model card (`dictembed.model_card`)

Nothing in the folder is trusted to point elsewhere: a file that is a link leading outside the folder is refused
when the folder is opened, and a record may name its dictionary only by a public name (`wordnet`, `cwn`, ...);
a dictionary file of another machine is used only when the user names it (`--dictionary PATH`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.io import atomic_write
from dictembed.paths import public_name
from dictembed.record import RunRecord

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary

RECORD_NAME = "dictembed.json"
LEGACY_RECORD_NAME = "defsent.json"  # the record of models saved under the package's former name
SPACE_DIR = "entry_space"
SPACE_META = "space.json"
SPACE_TENSORS = "tensors.safetensors"
SECOND_TENSORS = "second.safetensors"  # a second dictionary's definition vectors (`second_dictionary`)
DEFINITIONS_FILE = "definitions.jsonl"
SEARCH_DIR = "search_index"
ONNX_DIR = "onnx"
ONNX_MANIFEST = "export.json"
# A trained folder's own fp32 query graph beside its weights, which `predict` and `serve` run without torch; its
# manifest marks no export, so `Encoder.load` still runs the weights; not model.onnx, the file sentence-transformers
# and optimum would run unchecked
QUERY_MANIFEST = "query.json"
QUERY_FILE = "query.onnx"
CARD_FILE = "README.md"
WEIGHTS_FILE = "model.safetensors"
DEFAULT_DICTIONARY = "wordnet"  # what a run trains on unless told otherwise, and what an untrained model uses

HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# Files a hub snapshot never needs for loading (other frameworks' weights, exported backends).
# what a Hub snapshot leaves out: other frameworks' weights and graphs, and pickles, which a load never reads
HUB_IGNORE = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "onnx/*", "openvino/*", "coreml/*", "tf_model*", "flax_model*"]
HUB_IGNORE += ["rust_model*", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle"]


def is_exported(folder: str | Path) -> bool:
    """Whether `folder` holds an ONNX export (its manifest, `onnx/export.json`)."""
    return (Path(folder) / ONNX_DIR / ONNX_MANIFEST).is_file()


def manifest_graph(manifest: Path) -> tuple[dict[str, Any], str]:
    """An ONNX manifest (`onnx/export.json`, or a trained folder's `onnx/query.json`) and the graph file it names,
    a plain file name of the onnx folder; a ValueError saying why where it does not read or names none."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        file = data["file"]
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as err:
        raise ValueError(f"{manifest} is corrupt ({type(err).__name__}: {' '.join(str(err).split())[:200]})") from None
    if not isinstance(file, str) or Path(file).name != file or file in ("", ".", ".."):
        raise ValueError(f"{manifest}: file {file!r:.100} is not a file name in the onnx folder")
    return data, file


def export_graph_name(manifest: Path) -> str | None:
    """The graph file an export's manifest names (`manifest_graph`), or None where it names none."""
    try:
        return manifest_graph(manifest)[1]
    except ValueError:
        return None


def has_weights(folder: Path) -> bool:
    """Whether `folder` holds torch weights: `*.safetensors` at its top (the weights or their shards), or an older
    sentence-transformers layout's module folder (`0_Transformer/model.safetensors`)."""
    return any(folder.glob("*.safetensors")) or any(folder.glob("*/model*.safetensors"))


def weightless_export_graph(folder: Path) -> str | None:
    """The graph file of a weightless ONNX export (`dictembed export` without --keep-weights: no torch weights, an
    `onnx/export.json` naming its graph), or None."""
    manifest = folder / ONNX_DIR / ONNX_MANIFEST
    return None if has_weights(folder) or not manifest.is_file() else export_graph_name(manifest)


def with_export_graph(repo_id: str, snapshot: Path) -> None:
    """Fetch into a Hub `snapshot` a weightless ONNX export's manifest and the graph it names (`dictembed export`
    without --keep-weights), which the snapshot's `HUB_IGNORE` left out with every other repo's graphs: such a repo
    has no weights but that graph. A repo with weights, without an export, or whose graph is at hand is left as it
    is; a graph its manifest names that cannot be fetched (offline and not cached) is a one-line error."""
    if has_weights(snapshot):
        return
    graph = weightless_export_graph(snapshot)
    if graph is not None and (snapshot / ONNX_DIR / graph).is_file():
        return
    from huggingface_hub import hf_hub_download

    try:
        manifest = Path(hf_hub_download(repo_id, f"{ONNX_DIR}/{ONNX_MANIFEST}", revision=snapshot.name))
    except Exception:  # noqa: BLE001 - no export there (or offline, not cached): the load names what it lacks
        return
    graph = export_graph_name(manifest)
    if graph is None:
        return  # the load names the manifest's fault
    try:
        hf_hub_download(repo_id, f"{ONNX_DIR}/{graph}", revision=snapshot.name)
    except Exception as err:  # noqa: BLE001 - any hub failure (offline, auth, gone) is one message
        raise ModelLoadError(
            f"model {repo_id!r}: its ONNX export's graph {ONNX_DIR}/{graph} could not be fetched from the Hugging Face "
            f"Hub ({type(err).__name__}; offline, it is not in the cache)"
        ) from None


def identifies_encoder(tensor: str) -> bool:
    """Whether a backbone's tensor, by its name in the weights file (`pooler.dense.weight`, or in a wrapped model
    `bert.pooler.dense.weight`), tells one encoder from another: all but the backbone's own pooler, which no vector
    passes through and which a checkpoint without one draws afresh at every load."""
    return not (tensor.startswith("pooler.") or ".pooler." in tensor)


def record_path(folder: str | Path) -> Path | None:
    """The record file of a model folder (the legacy name as a fallback), or None if it has none."""
    for name in (RECORD_NAME, LEGACY_RECORD_NAME):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def read_record(folder: str | Path, required: bool = False) -> RunRecord:
    """The record of a model folder; an empty record when it has none (an error if `required`)."""
    path = record_path(folder)
    if path is None:
        if required:
            raise DictEmbedError(f"{folder} is not a dictembed model folder ({RECORD_NAME} missing)")
        return RunRecord(version=0)
    return RunRecord.read(path)


def write_record(folder: str | Path, record: RunRecord) -> Path:
    """Write `record` as the folder's record file (atomically)."""
    return atomic_write(Path(folder) / RECORD_NAME, record.to_json())


def space_summary(folder: str | Path) -> dict[str, Any]:
    """Kind, entry count, similarity and temperature of a folder's saved entry space (its `space.json`), as far as
    they can be read; {} when it has none."""
    try:
        meta = json.loads((Path(folder) / SPACE_DIR / SPACE_META).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(meta, dict):
        return {}
    info = {k: meta[k] for k in ("kind", "similarity", "temperature") if k in meta}
    if isinstance(meta.get("words"), list):
        info["entries"] = len(meta["words"])
    return info


def write_definitions(folder: str | Path, dictionary: Dictionary) -> Path:
    """Write the definitions and parts of speech of `dictionary` into a model folder (`DEFINITIONS_FILE`, a table
    `load_dictionary` reads), so that the folder serves them from anywhere, needing no file outside it."""
    from dictembed.dictionary.sources.table import jsonl_text

    return atomic_write(Path(folder) / DEFINITIONS_FILE, jsonl_text(dictionary))


def links_outside(top: Path, root: Path | None = None) -> list[Path]:
    """Every link under `top` (files and folders, not followed) whose target lies outside `root` (default `top`),
    dangling ones included: what a folder may not hold."""
    root = (root or top).resolve()
    found = []
    for parent, folders, files in os.walk(top):
        for name in [*folders, *files]:
            path = Path(parent) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                found.append(path)
    return sorted(found)


# The settings of a sentence-transformers module config (`sentence_bert_config.json`) passed on to transformers'
# loaders, old names and new
LOADER_ARGS = ("model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs")
PATH_KEYS = ("_file", "_files", "_path", "_dir", "name_or_path")  # a loader setting ending so names files
# model_args that make transformers read weights other than safetensors (use_safetensors: anything but true)
WEIGHT_FORMAT_ARGS = ("use_safetensors", "from_tf", "from_flax", "gguf_file")


def leads_outside(folder: Path, value: str) -> bool:
    """Whether a path a loader is given (`value`, relative to the working folder as the loader takes it) is no file
    or folder inside `folder` (for a Hub snapshot, its repo's cache folder, whose blobs its files link to):
    elsewhere on this machine, or no path at all (a Hub name, fetched or cached)."""
    target = Path(value).expanduser()
    return not (target.exists() and target.resolve().is_relative_to(hub_repo_root(folder.resolve())))


def outside_reference(folder: Path, config: dict[str, Any]) -> str | None:
    """What in a sentence-transformers module config of `folder` makes its loader read something outside the
    folder, or None: `tokenizer_name_or_path` (or a file setting of the arguments passed on to transformers,
    `tokenizer_file`, ...) naming a path elsewhere or a Hub name, or model arguments asking for weights other than
    safetensors (`use_safetensors: false`, which prefers a pickle)."""
    settings: list[tuple[str, object]] = [("tokenizer_name_or_path", config.get("tokenizer_name_or_path"))]
    for group in LOADER_ARGS:
        args = config.get(group)
        if isinstance(args, dict):
            settings += [(f"{group}.{key}", value) for key, value in args.items() if str(key).endswith(PATH_KEYS)]
            if group in ("model_args", "model_kwargs"):
                for key in WEIGHT_FORMAT_ARGS:
                    value = args.get(key)
                    other = value not in (True, None) if key == "use_safetensors" else bool(value)
                    if other:
                        return (
                            f"{group}.{key} is {json.dumps(value)}, which asks for weights other than safetensors "
                            "(dictembed loads safetensors only)"
                        )
    for name, value in settings:
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and leads_outside(folder, item):
                return (
                    f"{name} {item!r} leads outside the model folder (a model folder holds its own tokenizer and "
                    "files; copy them in)"
                )
    return None


def vocabulary_problem(tokens: int, top: int, rows: int) -> str | None:
    """What makes a tokenizer of `tokens` tokens (ids up to `top`) unfit for a model of `rows` embedding rows (0:
    not known), or None: far fewer tokens than rows (its files are missing or broken, and every word would encode
    as the unknown token), or ids past the embeddings (tokens added without resizing them: the first sentence
    holding one would fail with an index error). `Encoder.load` and the ONNX query encoder both ask it."""
    if rows and tokens < 0.5 * rows:
        return (
            f"the tokenizer has {tokens} tokens for the model's {rows}; its tokenizer files (tokenizer.json, "
            "vocab.txt, ...) are missing or broken"
        )
    if rows and top >= rows:
        return (
            f"the tokenizer has {tokens} tokens, the model's embeddings {rows} rows: ids {rows} to {top} have no "
            "embedding (tokens added without resizing the embeddings)"
        )
    return None


def looks_local(name: str) -> bool:
    """Whether a name that is no folder here still means one: its first part is a folder here (`models/tinyy`
    where `models/` exists), so it is a typo of a local path, not a Hub repo id to ask the network for."""
    first = name.split("/", 1)[0]
    return "/" in name and Path(first).expanduser().is_dir()


def may_be_hub_name(name: str) -> bool:
    """Whether a name that is no folder here may name a Hugging Face Hub repo (`org/name`), not a mistyped path."""
    return bool(HUB_ID.match(name)) and not looks_local(name)


def hub_repo_root(snapshot: Path) -> Path:
    """The cache folder of a Hub repo (`models--org--name`) holding `snapshot`: its files link into the repo's
    `blobs/`, which belong to the same model."""
    parent = snapshot.parent
    return parent.parent if parent.name == "snapshots" else snapshot


def resolve_model(name_or_path: str | Path) -> Path:
    """The local folder of a model: the path itself, the prepared folder of an offline model's name
    (`dictembed models prepare`), or the Hugging Face Hub snapshot of a hub name (read from the local cache when
    offline), so a hub model loads exactly like a folder (dictembed.json, entry_space/)."""
    return ModelFolder.open(name_or_path).path


@dataclass(frozen=True)
class ModelDictionary:
    """The dictionary a model uses: what `load_dictionary` takes and the seed of the model's split by headword."""

    spec: str
    wordnet_dir: str | None = None
    encoding: str = "utf-8"
    columns: str | None = None
    split_seed: int = 0

    def load(self) -> Dictionary:
        """The dictionary itself."""
        from dictembed.dictionary import load_dictionary

        return load_dictionary(self.spec, wordnet_dir=self.wordnet_dir, encoding=self.encoding, columns=self.columns)


def is_public_dictionary(spec: str) -> bool:
    """Whether every part of a comma list names a dictionary by a public name (`wordnet`, `cwn`, ...), no file."""
    from dictembed.dictionary.load import SOURCES

    return all(part.strip().lower() in SOURCES for part in spec.split(","))


class ModelFolder:
    """A saved model folder: where its files are, its record (read once) and the dictionary it uses.

    `root` is what the folder's links may lead into: the folder itself, or for a Hugging Face Hub snapshot the
    repo's cache folder (whose `blobs/` hold the files the snapshot links to)."""

    def __init__(self, path: Path, root: Path | None = None, name: str | None = None) -> None:
        self.path = path
        self.root = root or path
        self.name = name or path.resolve().name
        if outside := links_outside(path, self.root):
            shown = ", ".join(str(p.relative_to(path)) for p in outside[:3]) + (" ..." if len(outside) > 3 else "")
            raise ModelLoadError(
                f"model folder {path}: {shown} {'links' if len(outside) == 1 else 'link'} outside the folder; a "
                "model folder must hold its own files, not links to others (copy them in)"
            )

    @classmethod
    def open(cls, name_or_path: str | Path | ModelFolder, only: list[str] | None = None) -> ModelFolder:
        """The folder of a model folder's path, an offline model's name (`dictembed models prepare`) or a Hub name
        (its snapshot, from the local cache when offline; `only`: the file patterns to fetch, e.g. a tokenizer's,
        else every file but `HUB_IGNORE`); links leading outside it are refused."""
        if isinstance(name_or_path, ModelFolder):
            return name_or_path
        if not isinstance(name_or_path, str | os.PathLike) or not str(name_or_path).strip():
            raise ModelLoadError(f"a model folder's path, an offline model's or a Hub name, not {name_or_path!r}")
        from dictembed.offline_models import local_folder

        path = Path(name_or_path).expanduser()
        if path.is_dir():
            return cls(path)
        if path.exists():
            raise ModelLoadError(f"model {str(name_or_path)!r} is a file, not a model folder")
        if (prepared := local_folder(str(name_or_path))) is not None:
            return cls(prepared, name=str(name_or_path))
        if not may_be_hub_name(str(name_or_path)):
            raise ModelLoadError(f"model folder {str(name_or_path)!r} not found")
        from huggingface_hub import snapshot_download

        try:
            snapshot = Path(snapshot_download(str(name_or_path), ignore_patterns=HUB_IGNORE, allow_patterns=only))
        except Exception as err:  # noqa: BLE001 - any hub failure (offline, unknown repo, auth) is one message
            raise ModelLoadError(
                f"model {str(name_or_path)!r}: no such folder, and the Hugging Face Hub could not provide it "
                f"({type(err).__name__}; offline, pass a local folder)"
            ) from None
        if only is None:
            with_export_graph(str(name_or_path), snapshot)
        return cls(snapshot, hub_repo_root(snapshot), name=str(name_or_path))

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    @cached_property
    def record(self) -> RunRecord:
        """The run record (an empty one when the folder has none), read once."""
        return read_record(self.path)

    def file(self, *parts: str) -> Path:
        """The path of a file of the folder (`file(SPACE_DIR, SPACE_META)`)."""
        return self.path.joinpath(*parts)

    def has(self, *parts: str) -> bool:
        """Whether the folder holds that file."""
        return self.file(*parts).is_file()

    @property
    def definitions(self) -> Path:
        return self.file(DEFINITIONS_FILE)

    @property
    def is_exported(self) -> bool:
        """Whether the folder holds an ONNX export (`is_exported`)."""
        return is_exported(self.path)

    def dictionary(
        self, dictionary: str | None = None, wordnet_dir: str | None = None, encoding: str | None = None
    ) -> ModelDictionary:
        """The dictionary the model uses: `dictionary` when the user names one (any file, read with `encoding`),
        else the folder's own `definitions.jsonl`, else the one its record names (its configuration's, or the
        `data` an `index` folder records) by a public name (`wordnet`, ...;
        with the user's `wordnet_dir`, never one the record names), else `DEFAULT_DICTIONARY` for a model saved
        without training. A record naming a dictionary file (a path of another machine) is a one-line error telling
        the user to pass it."""
        config = self.record.config or {}
        seed = config.get("split_seed", 0)
        seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
        if dictionary is not None:  # the user's: its names and files checked now, not at the first search
            from dictembed.dictionary.load import check_sources

            if isinstance(dictionary, os.PathLike):
                dictionary = os.fspath(dictionary)
            if not isinstance(dictionary, str):
                raise DictEmbedError(f"dictionary: a dictionary's name or a file's path, not {dictionary!r}")
            check_sources(dictionary)
            return ModelDictionary(dictionary, wordnet_dir, encoding or "utf-8", split_seed=seed)
        if self.definitions.is_file():  # the same headwords as the dictionary trained on, so the same split
            return ModelDictionary(str(self.definitions), split_seed=seed)
        named = config.get("dictionary") or self.record.data or DEFAULT_DICTIONARY  # `index` records it as data
        if not isinstance(named, str) or not is_public_dictionary(named):
            where = record_path(self.path) or self.path / RECORD_NAME
            raise DictEmbedError(
                f"{where}: the model names the dictionary {public_name(str(named))!r}, which is not in the model "
                f"folder ({DEFINITIONS_FILE} is missing); pass it with --dictionary PATH"
            )
        return ModelDictionary(named, wordnet_dir, encoding or "utf-8", split_seed=seed)
