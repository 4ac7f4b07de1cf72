"""The layout of a folder `OnnxQueryEncoder` runs (`QueryLayout.read`): the sentence-transformers files an export
or a trained folder's query graph comes with (modules.json, the Pooling module's config, Normalize, the prompts of
config_sentence_transformers.json, the tokenizer's files), the record's pooling and max_length, and the graph that
answers (`_graph`: an export's, else a query graph of the weights as they are). Reads JSON files only; what it
cannot run is an `Unsupported` error saying why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dictembed.backends.onnx.session import exported_file, query_graph
from dictembed.errors import ModelLoadError
from dictembed.model_folder import ONNX_DIR, ONNX_MANIFEST, QUERY_MANIFEST, ModelFolder, is_exported, outside_reference

log = logging.getLogger(__name__)

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# sentence-transformers' older Pooling configs: one flag per mode, in the order it concatenates them
LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
NO_LIMIT = 10**30  # transformers' model_max_length of a tokenizer without a limit


class Unsupported(ModelLoadError):
    """A folder the ONNX query encoder cannot run (`Encoder.load` can)."""


class NoGraph(Unsupported):
    """A folder the ONNX query encoder could run, but with neither an export nor a query graph of its weights."""


@dataclass(frozen=True)
class QueryLayout:
    """What an exported folder declares for encoding a query: its graph, tokenizer, window, prompts and pooling."""

    folder: Path
    graph: Path
    manifest: dict[str, Any]
    tokenizer_file: Path
    tokenizer_config: dict[str, Any]
    modes: tuple[str, ...]
    hidden_size: int
    include_prompt: bool
    normalize: bool
    max_length: int
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    embedding_rows: int = 0  # the rows of the graph's token embeddings (config.json's vocab_size; 0: not known)

    @classmethod
    def read(cls, model_folder: ModelFolder) -> QueryLayout:
        """The layout of `model_folder` (its record read once): an `Unsupported` error for what the query encoder
        does not run, a `ModelLoadError` for a file that does not parse; neither opens the graph or the tokenizer."""
        folder = model_folder.path
        modules = _modules(folder)
        first, rest = modules[0], modules[1:]
        if _kind(first) != "Transformer":
            raise Unsupported(f"{folder / 'modules.json'}: its first module is {first['type']}, not a Transformer")
        base = _inside(folder, first["path"])
        transformer = _json(base / "sentence_bert_config.json", required=False)
        if problem := outside_reference(folder, transformer):
            raise ModelLoadError(f"{base / 'sentence_bert_config.json'}: {problem}")
        if transformer.get("do_lower_case"):
            raise Unsupported(f"model folder {folder}: its Transformer module lower-cases the input (do_lower_case)")
        config = _json(base / "config.json", required=False)
        pooling: dict[str, Any] = {}
        if rest and _kind(rest[0]) == "Pooling":
            pooling, rest = _json(_inside(folder, rest[0]["path"]) / "config.json"), rest[1:]
        for module in rest:
            if _kind(module) != "Normalize":
                raise Unsupported(
                    f"model folder {folder}: module {module.get('path') or module['type']} ({module['type']}) "
                    "follows the pooling, which the ONNX query encoder does not run; load it with Encoder.load"
                )
        record = model_folder.record
        modes = _pooling_modes(folder, pooling, record.encoder.get("pooling"))
        hidden = pooling.get("embedding_dimension", pooling.get("word_embedding_dimension", config.get("hidden_size")))
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden <= 0:
            raise ModelLoadError(f"model folder {folder}: no embedding dimension in its Pooling config or config.json")
        prompts, default = _prompts(base / "config_sentence_transformers.json")
        tokenizer_file = base / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise Unsupported(f"model folder {folder}: no tokenizer.json (the tokenizers library reads only that)")
        tokenizer_config = _json(base / "tokenizer_config.json", required=False)
        length = _max_length(folder, record.encoder.get("max_length"), transformer, tokenizer_config, config)
        graph, manifest = _graph(folder)  # last: what else it would refuse comes first (`write_query_graph`)
        rows = config.get("vocab_size")
        return cls(
            folder=folder,
            graph=graph,
            manifest=manifest,
            tokenizer_file=tokenizer_file,
            tokenizer_config=tokenizer_config,
            modes=modes,
            hidden_size=hidden,
            include_prompt=bool(pooling.get("include_prompt", True)),
            normalize=any(_kind(m) == "Normalize" for m in rest),
            max_length=length,
            prompts=prompts,
            default_prompt_name=default,
            embedding_rows=rows if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0 else 0,
        )


def _graph(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The graph and manifest of an export, else of a trained folder's query graph made from its weights as they
    are; `NoGraph` for a folder with neither."""
    if is_exported(folder):
        return exported_file(folder)
    if (graph := query_graph(folder)) is not None:
        return graph
    if (folder / ONNX_DIR / QUERY_MANIFEST).is_file():  # `query_graph` logged why
        raise NoGraph(f"model folder {folder}: its query graph is not known to be the graph of its weights as they are")
    raise NoGraph(
        f"model folder {folder} holds no ONNX export ({ONNX_DIR}/{ONNX_MANIFEST}); write one with `dictembed export`"
    )


def _json(path: Path, required: bool = True) -> dict[str, Any]:
    """The JSON object in `path` ({} for a missing file that is not `required`); a one-line error otherwise."""
    if not path.is_file() and not required:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ModelLoadError(f"{path} is missing or corrupt ({type(err).__name__}: {err})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} is corrupt (not a JSON object)")
    return data


def _modules(folder: Path) -> list[dict[str, Any]]:
    """The module list of modules.json, each with a "type" and a "path"."""
    path = folder / "modules.json"
    if not path.is_file():
        raise Unsupported(f"model folder {folder} has no modules.json (not a sentence-transformers folder)")
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
        listed = [{"type": str(m["type"]), "path": str(m.get("path", ""))} for m in modules]
    except (OSError, ValueError, RecursionError, TypeError, KeyError) as err:
        raise ModelLoadError(f"{path}: corrupt module list ({type(err).__name__}: {err})") from None
    if not listed:
        raise ModelLoadError(f"{path}: corrupt module list (no modules)")
    return listed


def _kind(module: dict[str, Any]) -> str:
    """A sentence-transformers module's class name ("Pooling"); "" for a class of another package."""
    kind = str(module["type"])
    return kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else ""


def _inside(folder: Path, path: str) -> Path:
    """A module's folder, refused when it leads outside the model folder."""
    target = folder / path
    if not target.resolve().is_relative_to(folder.resolve()):
        raise ModelLoadError(f"{folder / 'modules.json'}: module path {path!r} leads outside the model folder")
    return target


def _pooling_modes(folder: Path, config: dict[str, Any], saved: object) -> tuple[str, ...]:
    """The pooling modes `Encoder.load` uses: the record's pooling (`saved`), else the Pooling config's single
    mode, else mean (sentence-transformers' modes; dictembed's own poolings are `Unsupported`)."""
    declared: object = config.get("pooling_mode")
    if declared is None:
        flags = [mode for key, mode in LEGACY_POOLING_KEYS.items() if config.get(key)]
        declared = flags[0] if len(flags) == 1 else flags or None
    if isinstance(declared, list) and len(declared) == 1:
        declared = declared[0]
    name = saved or (declared if isinstance(declared, str) else None) or "mean"
    if name in ("prompt", "first_last_avg"):
        raise Unsupported(f"model folder {folder}: {name} pooling is dictembed's own; load it with Encoder.load")
    if name not in POOLING_MODES:
        raise ModelLoadError(f"model folder {folder}: unknown pooling {name!r}")
    return (str(name),)


def _prompts(path: Path) -> tuple[dict[str, str], str | None]:
    """The prompts and the default prompt's name of config_sentence_transformers.json."""
    config = _json(path, required=False)
    prompts = config.get("prompts") or {}
    default = config.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise ModelLoadError(f"{path}: prompts is not an object of texts")
    if default is not None and default not in prompts:
        raise ModelLoadError(f"{path}: default_prompt_name {default!r} is not one of its prompts")
    return {str(k): v for k, v in prompts.items()}, default


def _max_length(
    folder: Path, saved: object, transformer: dict[str, Any], tokenizer: dict[str, Any], config: dict[str, Any]
) -> int:
    """The window `Encoder.load` uses: the record's encoder.max_length (`saved`), else the Transformer module's
    max_seq_length, else the tokenizer's model_max_length within the model's positions; at most the positions."""
    positions = config.get("max_position_embeddings")
    positions = positions if isinstance(positions, int) and not isinstance(positions, bool) else None
    declared = transformer.get("max_seq_length")
    if declared is None:
        declared = tokenizer.get("model_max_length", NO_LIMIT)
        if positions is not None and positions != -1 and isinstance(declared, int | float):
            declared = min(declared, positions)
    value = saved if saved is not None else declared
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelLoadError(f"model folder {folder}: max_seq_length {value!r} is not a positive whole number")
    limit = positions if positions is not None and positions > 0 else None
    if limit is not None and "roberta" in str(config.get("model_type", "")):
        limit -= int(config.get("pad_token_id") or 0) + 1
    if limit is not None and value > limit:
        log.warning("model folder %s: max_seq_length is %d, more than the model's %d positions", folder, value, limit)
        return limit
    return value


def config_token(config: dict[str, Any], key: str) -> str | None:
    """A special token's text in tokenizer_config.json (a string or an {"content": ...} object)."""
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None
