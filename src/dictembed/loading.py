"""Model folders: loading pretrained models and sentence-transformers folders by hub name or path, with one-line
errors naming the folder or file (the one home of these checks), and writing the pieces of an `Encoder` back as a
sentence-transformers folder. `Encoder.load` and `Encoder.save` put the pieces together."""

from __future__ import annotations

import copy
import json
import logging
import pickle
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, cast

import torch
from safetensors import SafetensorError, safe_open
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import modules as st_modules
from tokenizers import Tokenizer
from torch import nn
from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from dictembed.devices import resolve_device
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.model_folder import (
    WEIGHTS_FILE,
    ModelFolder,
    has_weights,
    is_exported,
    outside_reference,
    record_path,
    vocabulary_problem,
)
from dictembed.model_window import declared_length, default_max_length, fit_max_length, position_limit, read_json_key
from dictembed.pooling import ACTIVATIONS
from dictembed.record import RunRecord
from dictembed.search_options import check_count

log = logging.getLogger(__name__)

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")  # weights saved by pickle, never loaded
SAFE_WEIGHTS = (WEIGHTS_FILE, WEIGHTS_FILE + ".index.json")  # what transformers and sentence-transformers read first
SMALL_FILES = ["*.json", "*.txt", "*.model", "*/*.json", "*/*.txt", "*/*.model"]  # configs, tokenizers, vocabularies
SAFE_LOAD = {"use_safetensors": True}  # what every load passes to transformers, over any module config's model_args


def reads_weights(loader: Any) -> bool:
    """Whether `loader` (an Auto class or a model class) loads a model's weights, not a tokenizer or a config."""
    name = getattr(loader, "__name__", "")
    return name.startswith("AutoModel") or (isinstance(loader, type) and issubclass(loader, PreTrainedModel))


def load_pretrained(loader: Any, name_or_path: str, **kwargs: Any) -> Any:
    """Call `loader.from_pretrained`, turning hub/offline/missing-file failures into a ModelLoadError. The name of
    an offline model (`dictembed models prepare`) loads its prepared folder. A model's weights load from safetensors
    only (`use_safetensors=True`): never from a pickle. A Hub name loads the snapshot `ModelFolder.open` fetches,
    which fails at once offline where transformers' own download retries for most of a minute."""
    folder = Path(name_or_path)
    if not folder.exists():  # a Hub name or a prepared model; a tokenizer or a config fetches its small files alone
        folder = ModelFolder.open(name_or_path, only=None if reads_weights(loader) else SMALL_FILES).path
    if reads_weights(loader):
        refuse_weightless_export(folder)
        kwargs["use_safetensors"] = True  # never a pickle (`pytorch_model.bin`), whatever else the folder holds
    try:
        with torch.random.fork_rng(devices=[]):  # weights the checkpoint lacks (an unused pooler) start alike
            torch.manual_seed(0)  # in every process, so a rerun or a resumed run saves the same bytes
            return loader.from_pretrained(str(folder), **kwargs)
    except (OSError, ValueError, KeyError, SafetensorError) as err:  # a truncated or empty weights file too
        if folder.is_dir() and not (folder / "config.json").is_file():  # no model at all: the cause is noise
            what = "is empty" if not any(folder.iterdir()) else "has no config.json"
            raise ModelLoadError(f"model folder {name_or_path} holds no model: it {what}") from err
        hint = " (the folder holds no complete model)" if folder.is_dir() else ""
        cause = " ".join(str(err).split())
        cause = cause if len(cause) <= 300 else cause[:297] + "..."
        raise ModelLoadError(f"cannot load model {name_or_path!r}{hint}: {cause}") from err  # as the user named it


def missing_head_keys(model: PreTrainedModel, missing: list[str]) -> list[str]:
    """The missing checkpoint keys of a *ForMaskedLM that belong to its MLM head, not its base model:
    non-empty when the checkpoint has no pre-trained head."""
    prefix = model.base_model_prefix + "."
    return sorted(k for k in missing if not k.startswith(prefix))


def load_masked_lm_info(name_or_path: str) -> tuple[PreTrainedModel, list[str]]:
    """A *ForMaskedLM and the missing keys of its MLM head (empty when the checkpoint has a pre-trained head)."""
    model, info = load_pretrained(AutoModelForMaskedLM, name_or_path, output_loading_info=True)
    return model, missing_head_keys(model, info.get("missing_keys", []))


def module_paths(folder: Path) -> list[str]:
    """The module paths of a sentence-transformers folder's modules.json; a corrupt list, or a path leading outside
    the folder, is a one-line error naming the file."""
    try:
        declared = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        paths = [str(module["path"]) for module in declared]
    except (OSError, ValueError, TypeError, KeyError, RecursionError) as err:
        raise ModelLoadError(f"{folder / 'modules.json'}: corrupt module list ({type(err).__name__}: {err})") from None
    if not paths:
        raise ModelLoadError(f"{folder / 'modules.json'}: corrupt module list (no modules)")
    root = folder.resolve()
    for path in paths:
        if not (folder / path).resolve().is_relative_to(root):
            raise ModelLoadError(f"{folder / 'modules.json'}: module path {path!r} leads outside the model folder")
    return paths


def module_folders(folder: Path, paths: list[str]) -> list[Path]:
    """The folders a load reads weights and module configs from: the model folder itself, and each module's folder
    (`paths`, from modules.json) with the folders inside it (a Router's modules)."""
    found, root = [folder], folder.resolve()
    for path in paths:
        base = folder / path
        if base.resolve() == root or not base.is_dir():
            continue
        found += [base, *sorted(p for p in base.rglob("*") if p.is_dir())]
    return list(dict.fromkeys(found))


def load_sentence_transformer(folder: Path) -> Any:
    """`SentenceTransformer(folder)` on the CPU from local files only and safetensors weights only, its failures as
    a ModelLoadError (its module list checked first: `load_parts`)."""
    try:
        model = SentenceTransformer(str(folder), device="cpu", local_files_only=True, model_kwargs=dict(SAFE_LOAD))
    except Exception as err:  # noqa: BLE001 - the loaders raise many types on garbage (tokenizers a bare Exception)
        raise load_error(folder, err) from err
    first = model[0] if len(model) else None
    if not isinstance(first, st_modules.Transformer) or first.tokenizer is None:
        raise ModelLoadError(
            f"model folder {folder}: its first module is {type(first).__name__}, not a Transformer with a tokenizer"
        )
    return model


def corrupt_file(folder: Path) -> ModelLoadError | None:
    """A one-line error naming the first JSON, tokenizer or safetensors file in a model folder (or in its module
    folders) that does not parse; None when every one does."""
    candidates = [*folder.glob("*.json"), *folder.glob("*/*.json"), *folder.glob("*.safetensors")]
    candidates += folder.glob("*/*.safetensors")
    for path in sorted(p for p in candidates if p.parent.name != "entry_space"):
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))
                if path.name == "tokenizer.json":  # valid JSON can still be no tokenizer
                    Tokenizer.from_file(str(path))
            else:
                with safe_open(str(path), "pt") as weights:
                    weights.keys()
        except Exception as bad:  # noqa: BLE001 - RecursionError (deep nesting), tokenizers' bare Exception, ...
            detail = " ".join(str(bad).split()) or type(bad).__name__
            return ModelLoadError(f"cannot load model folder {folder}: {path} is corrupt or truncated ({detail})")
    return None


def load_error(folder: Path, err: BaseException) -> ModelLoadError:
    """A one-line error for a model folder that failed to load: the file that does not parse (`corrupt_file`),
    the usual cause; else the loader's own first line."""
    corrupt = corrupt_file(folder)
    if corrupt is not None:
        return corrupt
    lines = str(err).strip().splitlines() or [type(err).__name__]
    if isinstance(err, pickle.UnpicklingError):
        pickled = ", ".join(sorted(p.name for p in folder.glob("*.bin"))) or "a pickled weights file"
        return ModelLoadError(f"cannot load model folder {folder}: {pickled} was refused ({lines[0]})")
    return ModelLoadError(f"cannot load model folder {folder}: {lines[0]}")


def check_tokenizer(tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel, folder: Path) -> None:
    """Refuse a tokenizer far smaller than the model's vocabulary, or one with ids past the embedding matrix
    (`model_folder.vocabulary_problem`)."""
    embeddings = backbone.get_input_embeddings()
    rows = int(getattr(embeddings, "num_embeddings", 0) or 0)
    top = max(tokenizer.get_vocab().values(), default=-1)
    if problem := vocabulary_problem(len(tokenizer), top, rows):
        raise ModelLoadError(f"model folder {folder}: {problem}")


def model_pooler(backbone: PreTrainedModel, name_or_path: str) -> nn.Module:
    """A copy of the model's own pooler as a sentence-transformers Dense module: BERT's `pooler.dense` + tanh,
    or for RoBERTa-style models (whose pooler is untrained) the MLM head's `lm_head.dense` + GELU, as DefSent+
    does."""
    dense = getattr(getattr(backbone, "pooler", None), "dense", None)
    activation = "tanh"
    if dense is None or "roberta" in backbone.config.model_type:
        mlm = load_pretrained(AutoModelForMaskedLM, name_or_path)
        dense = getattr(getattr(mlm, "lm_head", None), "dense", None)
        activation = "gelu"
        if dense is None:
            raise ModelLoadError(f"model {name_or_path!r} has neither a pooler nor an lm_head.dense to build one")
    return st_modules.Dense(
        dense.in_features,
        dense.out_features,
        activation_function=ACTIVATIONS[activation](),
        init_weight=dense.weight.detach().clone(),
        init_bias=dense.bias.detach().clone(),
    )


class Parts(NamedTuple):
    """What a model folder holds: the pieces an `Encoder` is made of."""

    tokenizer: PreTrainedTokenizerBase
    backbone: PreTrainedModel
    pooling: st_modules.Pooling | None  # a sentence-transformers Pooling module, when the folder declares one
    modules: list[nn.Module]  # the sentence-transformers modules after the pooling (Dense, Normalize, ...)
    prompts: dict[str, str]
    default_prompt: str | None
    max_length: int
    similarity_fn_name: str | None = None  # the folder's `SentenceTransformer.similarity` (None: cosine)
    truncate_dim: int | None = None  # the folder's sentence-transformers truncation, kept on save


def declared_pooling(module: nn.Module | None) -> str | None:
    """The mode of a sentence-transformers Pooling module; None for none, or for several concatenated modes
    (kept in the module, not nameable)."""
    mode = getattr(module, "pooling_mode", None)
    return mode if isinstance(mode, str) else None


class Opened(NamedTuple):
    """What `Encoder.load` builds an encoder from (`open_encoder_parts`)."""

    folder: ModelFolder
    record: RunRecord  # a copy, which the encoder owns
    parts: Parts
    device: torch.device  # where a torch backbone runs


def refuse_weightless_export(folder: Path) -> None:
    """Refuse an ONNX export saved without its fp32 weights where the weights themselves are to load."""
    if is_exported(folder) and not has_weights(folder):
        from dictembed.backends.onnx.session import exported_file

        exported_file(folder)  # a manifest that does not parse or names no graph is the fault to name first
        raise ModelLoadError(
            f"model folder {folder} is an ONNX export without its fp32 weights ({WEIGHTS_FILE}), which "
            "training, distil, head, lexsub and Encoder.load need; predict, serve, encode and evaluate "
            "sts/sts-multi/senteval run its graph (in Python: OnnxQueryEncoder); or export again with --keep-weights"
        )


def open_encoder_parts(
    name_or_path: str | Path | ModelFolder, pooler: str | None, max_length: int | None, device: Any
) -> Opened:
    """The folder of a hub name or local path, its record and its parts (`load_parts`), and the device, for
    `Encoder.load`: its arguments checked in one line each before the weights load (the path's type, the `pooler`,
    `max_length`, a `device` this machine has not), an export without its fp32 weights refused, and a `max_length`
    beyond the model's positions refused once its config is read."""
    if not isinstance(name_or_path, str | Path | ModelFolder):
        raise DictEmbedError(f"Encoder.load: a model folder or a Hub name, not {type(name_or_path).__name__}")
    if pooler not in (None, "none", "model"):
        raise DictEmbedError(f"unknown pooler {pooler!r}; choose from model, none")
    check_count("max_length", max_length, none=True)
    target = resolve_device(device)
    folder = ModelFolder.open(name_or_path)
    refuse_weightless_export(folder.path)
    record = copy.deepcopy(folder.record)
    parts = load_parts(folder.path, record.encoder.get("max_length"))
    positions = position_limit(parts.backbone)  # RoBERTa-style models hold fewer than they declare
    if max_length is not None and positions is not None and max_length > positions:
        raise DictEmbedError(f"max_length {max_length} is more than the {positions} positions of model {folder.path}")
    return Opened(folder, record, parts, target)


def load_parts(folder: Path, saved_length: object = None) -> Parts:
    """Load a local model folder: a sentence-transformers folder through sentence-transformers itself (so its
    Pooling, Dense, Normalize and other standard modules are honoured), else a plain HF model. `saved_length`
    (the run record's encoder.max_length) takes precedence over the folder's own; both are checked against the
    model's positions (`fit_max_length`)."""
    sentence_transformer = (folder / "modules.json").is_file()
    folders = module_folders(folder, module_paths(folder) if sentence_transformer else [])
    refuse_pickles(folder, folders)
    check_module_configs(folder, folders)
    if not sentence_transformer:
        with warnings_logged():
            tokenizer, backbone = load_plain(folder)
        check_tokenizer(tokenizer, backbone, folder)
        length = default_max_length(tokenizer, backbone)
        pooling, rest, prompts, default_prompt = None, [], {}, None
        similarity_fn_name, truncate_dim = None, None
    else:
        with warnings_logged():
            model = load_sentence_transformer(folder)
        first, *rest = list(model)
        pooling = None
        if rest and isinstance(rest[0], st_modules.Pooling):
            pooling, *rest = rest
        refuse_unpooled(folder, pooling, rest)
        tokenizer, backbone = first.tokenizer, first.auto_model
        check_tokenizer(tokenizer, backbone, folder)
        declared = first.max_seq_length  # the tokenizer's model_max_length, which a corrupt file can make any JSON
        if declared is None:
            length = default_max_length(tokenizer, backbone)
        else:
            length = fit_max_length(declared, position_limit(backbone), declared_length(folder, declared))
        prompts, default_prompt = dict(model.prompts or {}), model.default_prompt_name
        similarity_fn_name, truncate_dim = model._similarity_fn_name, model.truncate_dim
        if truncate_dim is not None:
            log.warning(
                "%s: sentence-transformers cuts its vectors to %d dimensions (truncate_dim); dictembed's Encoder "
                "gives all %d (kept in the folder it saves)",
                folder,
                truncate_dim,
                backbone.config.hidden_size,
            )
    check_weights(folder, backbone)
    if saved_length is not None:
        length = fit_max_length(saved_length, position_limit(backbone), f"{record_path(folder)}: encoder.max_length")
    return Parts(tokenizer, backbone, pooling, rest, prompts, default_prompt, length, similarity_fn_name, truncate_dim)


def refuse_unpooled(folder: Path, pooling: nn.Module | None, rest: list[nn.Module]) -> None:
    """Refuse a sentence-transformers folder whose pooling `Encoder` cannot run as the folder declares it: a module
    between the Transformer and its Pooling (WeightedLayerPooling, an LSTM: `Encoder` pools the Transformer's token
    states itself), or a Pooling that concatenates several modes (`Encoder` pools with one)."""
    if any(isinstance(module, st_modules.Pooling) for module in rest):
        between = type(rest[0]).__name__ if rest else "a module"
        raise ModelLoadError(
            f"{folder}: a {between} module sits between the Transformer and its Pooling, which dictembed's Encoder "
            "does not run; load this folder with sentence-transformers"
        )
    if pooling is not None and declared_pooling(pooling) is None:
        modes = getattr(pooling, "pooling_mode", None)
        raise ModelLoadError(
            f"{folder}: its Pooling joins several modes ({modes}) into one vector, and dictembed's Encoder pools with "
            "one; load this folder with sentence-transformers"
        )


def read_pickles(directory: Path) -> list[Path]:
    """The pickled weight files (`PICKLE_SUFFIXES`) in `directory` that a loader would read: all of them where no
    safetensors weights (`SAFE_WEIGHTS`) sit beside them (sentence-transformers' modules fall back to
    `pytorch_model.bin`), else the one config.json names (`transformers_weights`: transformers reads
    `adapter_model.bin` so); safetensors are read first, and transformers is never let read a pickle
    (`SAFE_LOAD`)."""
    try:
        pickles = sorted(p for p in directory.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES and p.is_file())
    except OSError:
        return []
    if not pickles or not any((directory / name).is_file() for name in SAFE_WEIGHTS):
        return pickles
    named = read_json_key(directory / "config.json", "transformers_weights")
    return [p for p in pickles if p.name == named]


def refuse_pickles(folder: Path, folders: list[Path]) -> None:
    """Refuse a model folder whose weights, or the weights of a module (`folders`: `module_folders`), would load
    from a pickle (`read_pickles`): dictembed never unpickles a file of a model folder, so such weights are a
    one-line error naming them, before any loader sees them."""
    pickled = [p for directory in folders for p in read_pickles(directory)]
    if pickled:
        names = ", ".join(str(p.relative_to(folder)) for p in pickled)
        raise ModelLoadError(
            f"model folder {folder}: its weights {names} are a pickle, which dictembed never loads; save them as "
            "safetensors (model.save_pretrained(folder) writes model.safetensors)"
        )


def check_module_configs(folder: Path, folders: list[Path]) -> None:
    """Refuse a module config (`sentence_*_config.json`) in `folders` (`module_folders`) that names files outside
    the model folder (a tokenizer by path or Hub name: `model_folder.outside_reference`) or asks for weights other
    than safetensors; one that does not parse is left to the loader, whose error names it (`corrupt_file`)."""
    for directory in folders:
        for path in sorted(directory.glob("sentence_*_config.json")):
            try:
                config = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                continue
            if isinstance(config, dict) and (problem := outside_reference(folder, config)):
                raise ModelLoadError(f"{path}: {problem}")


@contextmanager
def warnings_logged() -> Iterator[None]:
    """Python warnings raised inside (a loader's own, with its source line) go to the log at debug level: what the
    user sees of a refused or damaged folder is the one-line error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for warning in caught:
                log.debug("%s: %s", warning.category.__name__, warning.message)


def check_weights(folder: Path, backbone: PreTrainedModel) -> None:
    """Refuse a model whose saved weights do not match its config, naming the tensors: saved ones the model has no
    place for (a config with fewer layers than the weights) or places no saved tensor fills (more layers). The
    weights of a head saved with the model (an MLM head) and a missing pooler (unused by mean pooling; it starts
    from a fixed seed) are allowed."""
    saved: set[str] = set()
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), "pt") as weights:
            saved |= set(weights.keys())
    if not saved:
        return
    prefix = backbone.base_model_prefix + "."
    if any(key.startswith(prefix) for key in saved):  # a model with a head: the base model's keys carry the prefix
        saved = {key.removeprefix(prefix) for key in saved if key.startswith(prefix)}
    places = set(backbone.state_dict()) | {name for name, _ in backbone.named_buffers()}
    unused = sorted(saved - places)
    missing = sorted(key for key in set(backbone.state_dict()) - saved if not key.startswith("pooler."))
    if unused:
        raise ModelLoadError(
            f"model folder {folder}: {len(unused)} saved tensor(s) have no place in the model config.json describes "
            f"({_listed(unused)}); the weights and config.json do not belong together"
        )
    if missing:
        raise ModelLoadError(
            f"model folder {folder}: config.json asks for {len(missing)} tensor(s) the saved weights lack "
            f"({_listed(missing)}); the weights and config.json do not belong together"
        )


def _listed(names: list[str]) -> str:
    """The first three of `names`, and how many more."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def load_plain(folder: Path) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """The tokenizer and model of a plain Hugging Face folder, a failure naming the file that does not parse."""
    try:
        return load_pretrained(AutoTokenizer, str(folder)), load_pretrained(AutoModel, str(folder))
    except ModelLoadError as err:
        corrupt = corrupt_file(folder)
        if corrupt is None:
            raise
        raise corrupt from err
    except Exception as err:  # noqa: BLE001 - the loaders raise many types on garbage (tokenizers a bare Exception)
        raise load_error(folder, err) from err


def save_parts(folder: Path, parts: Parts) -> None:
    """Write `parts` as a sentence-transformers folder (mean pooling declared where `parts.pooling` is None)."""
    parts.backbone.save_pretrained(folder)
    parts.tokenizer.save_pretrained(folder)
    pooling = copy.deepcopy(parts.pooling) if parts.pooling is not None else None
    modules = [
        st_modules.Transformer(str(folder), max_seq_length=parts.max_length),
        pooling or st_modules.Pooling(int(parts.backbone.config.hidden_size), "mean"),
        *(copy.deepcopy(m).cpu() for m in parts.modules),
    ]
    model = SentenceTransformer(
        modules=modules,
        device="cpu",
        prompts=parts.prompts or None,
        default_prompt_name=parts.default_prompt,
        similarity_fn_name=cast(Any, parts.similarity_fn_name),  # a name sentence-transformers itself read
        truncate_dim=parts.truncate_dim,
    )
    with below_warnings_unsaid("sentence_transformers"):  # "Saving model to" names the staging folder
        model.save(str(folder), create_model_card=False)


@contextmanager
def below_warnings_unsaid(name: str) -> Iterator[None]:
    """While inside, the logger `name` and those under it that set no level of their own say only warnings and
    errors."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)
