"""Run configuration: the options every method shares (`RunConfig`) and each method's own options dataclass.

Each option is defined once, with its help, choices and whether it changes a single run's result
(`option(...)`); the command line is generated from these definitions. A method's options class lives in
its recipe file and is registered with the recipe (`dictembed.recipes.registry`).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

from dictembed.devices import resolve_precision
from dictembed.dictionary.sources.table import COLUMNS_HELP, table_columns
from dictembed.errors import DictEmbedError
from dictembed.evaluation.sts_multi import STS_MULTI_LANGUAGES
from dictembed.paths import CACHE_HELP, default_model
from dictembed.recipes.options import MethodOptions, Options, check_options, option
from dictembed.recipes.presets import PRESETS
from dictembed.recipes.registry import get_recipe
from dictembed.record import RunRecord, version_2
from dictembed.text_files import text_encoding
from dictembed.texts import MAX_BATCH_SIZE, MAX_EPOCHS, MAX_SEED

log = logging.getLogger(__name__)


@dataclass
class RunConfig:
    """Everything that defines a training run; saved into every model's dictembed.json.

    `options` holds the method's own options (its recipe's options dataclass); the shared options that a
    method gives its own default (`dictionary`, `lrs`, `select_on`) are None until `__post_init__` resolves them
    from it, so they are typed as resolved.
    Build one with `RunConfig.create(method, **settings)`, which puts each setting where it belongs.
    """

    method: str = option("defsent-plus", "training method", cli=False)
    options: MethodOptions = option(None, "the method's own options", cli=False)
    model: str = option(
        help="hub name or local folder (default: the embedded all-MiniLM-L6-v2)", default_factory=default_model
    )
    dictionary: str = option(None, "comma list: wordnet,gcide,oxford,chang,... or files")
    wordnet_dir: str | None = option(None, "WordNet database folder (default: the system's WordNet)")
    encoding: str = option("utf-8", "encoding of dictionary table files (.tsv, .csv, .jsonl)", parse=text_encoding)
    columns: str | None = option(None, COLUMNS_HELP, parse=table_columns)
    headwords: int | None = option(
        None, "keep the N headwords most frequent in the dictionary's language (wordfreq; default: all)"
    )
    dev_language: str = option(
        "en",
        "language of the STS-B dev split that stsb_dev scores: en (STS-B) or a translation in sts_multi/",
        choices=STS_MULTI_LANGUAGES,
    )
    split_seed: int = option(0, "seed of the 8:1:1 split by headword", positive=False, maximum=MAX_SEED)
    seeds: list[int] = option(
        help="comma list of seeds, each trained",
        run=False,
        positive=False,
        maximum=MAX_SEED,
        default_factory=lambda: [0],
    )
    lrs: list[float] = option(None, "comma list of learning rates, each with every seed", run=False)
    batch_size: int = option(
        16, "training batch size (global: over every process and accumulated micro-batch)", maximum=MAX_BATCH_SIZE
    )
    grad_accum: int = option(1, "gradient accumulation: optimizer steps take batch_size/(N x processes) per pass")
    epochs: int = option(1, "training epochs", maximum=MAX_EPOCHS)
    group_by_length: bool = option(
        False, "batches of definitions of similar length (seeded; less padding, faster, other batches)"
    )
    warmup_ratio: float = option(0.1, "fraction of the steps with a linear warm-up", positive=False, maximum=1.0)
    max_length: int = option(128, "tokens per definition, longer ones are truncated")
    limit: int | None = option(None, "train on a seeded sample of N examples (default: all)")
    dev_limit: int | None = option(2000, "dev definitions scored for selection")
    select_on: str = option(None, "dev metric that selects lr and seed", run=False)
    output: str = option("outputs/model", "folder of the selected model", run=False, cli=False)
    checkpoint_every: int = option(500, "steps between checkpoints", run=False)
    resume: bool = option(False, "continue interrupted runs from their checkpoints", run=False, cli=False)
    cache_dir: str | None = option(None, f"entry-space cache folder (default: {CACHE_HELP})", run=False)
    preset: str | None = option(None, "the preset the settings were resolved from", run=False, cli=False)
    overwrite: bool = option(False, "replace a model already in the output folder", run=False, cli=False)
    device: str = option("auto", "auto (CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps", run=False)
    precision: str = option(
        "auto",
        "compute precision: auto (bf16 on a CUDA GPU that supports it, on a CPU with AMX, and on one with AVX512_BF16 "
        "where bf16 times 1.5x faster; else fp32), fp32, bf16, fp16; saved resolved",
        choices=("auto", "fp32", "bf16", "fp16"),
    )

    def __post_init__(self) -> None:
        recipe = get_recipe(self.method)
        if self.options is None:
            self.options = recipe.options()
        elif isinstance(self.options, dict):
            self.options = recipe.options(**self.options)
        elif not isinstance(self.options, recipe.options):
            raise DictEmbedError(f"{self.method} takes {recipe.options.__name__}, not {type(self.options).__name__}")
        self.options.validate(self.method)
        for key, value in recipe.defaults.items():
            if getattr(self, key) is None:
                setattr(self, key, value)
        check_options(self, self.method, skip=("method", "options"))  # every path: create, a saved config, --resume
        if self.batch_size % self.grad_accum:  # the Trainer splits each optimizer step's batch into micro-batches
            raise DictEmbedError(
                f"{self.method}: batch_size {self.batch_size} does not split into grad_accum={self.grad_accum} "
                "micro-batches; make it a multiple"
            )
        if self.select_on not in recipe.select_choices:
            raise DictEmbedError(
                f"{self.method} selects on one of {', '.join(recipe.select_choices)}, not {self.select_on!r}"
            )
        if self.preset not in (None, *PRESETS):
            raise DictEmbedError(f"the preset {self.preset!r} is not one of {', '.join(PRESETS)}")
        self.precision = resolve_precision(self.precision, self.device)  # "auto" -> what this device runs

    def options_as(self, kind: type[Options]) -> Options:
        """The method's own options, typed as `kind` (its recipe's options class)."""
        if not isinstance(self.options, kind):
            raise DictEmbedError(f"{self.method} has {type(self.options).__name__}, not {kind.__name__}")
        return self.options

    @classmethod
    def create(cls, method: str, **settings: Any) -> RunConfig:
        """A config from flat settings: each goes to the shared options or to `method`'s own; a setting that
        `method` does not take is an error naming it."""
        shared = {f.name for f in fields(cls)}
        own = {f.name for f in fields(get_recipe(method).options)}
        if unknown := sorted(set(settings) - shared - own):
            raise DictEmbedError(f"method {method} does not take {', '.join(unknown)}")
        options = get_recipe(method).options(**{k: v for k, v in settings.items() if k in own})
        return cls(method=method, options=options, **{k: v for k, v in settings.items() if k in shared})

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: shared options flat, the method's under "options"."""
        data = asdict(self)
        data["options"] = asdict(self.options)
        return data

    @property
    def recipe(self) -> Any:
        """The recipe of the method (`registry.get_recipe`)."""
        return get_recipe(self.method)

    @classmethod
    def of_record(cls, record: RunRecord) -> RunConfig | None:
        """The typed configuration a run record holds; None for none, or for one this version does not read (another
        version's method or options: logged, and the record keeps it as read)."""
        if not record.config:
            return None
        try:
            return cls.from_dict(record.config)
        except (DictEmbedError, TypeError, ValueError, AttributeError) as err:
            log.warning("the run configuration is not one this version reads (%s); it is kept as read", err)
            return None

    @classmethod
    def from_dict(cls, data: dict[str, Any], strict: bool = False) -> RunConfig:
        """A config from its JSON form (a record's "config"), version 2 or version 1 (all options flat,
        one `temperature` for both the entry logits and GR-BERT's InfoNCE). An option the method does not have is
        an error naming it; so, with `strict` (a configuration to run again), is a shared setting this version
        does not know, which is otherwise left out."""
        split = {"entry_temperature", "gloss_temperature"} if "temperature" in data else set()  # version 1's one
        data = version_2(data)
        method = data.get("method") or "defsent-plus"
        kind = get_recipe(method).options
        own = {f.name for f in fields(kind)}
        options = dict(data.pop("options", None) or {})
        options.update({k: data.pop(k) for k in list(data) if k in own or k in kind.removed})
        shared = {f.name for f in fields(cls)}
        if unknown := sorted(set(options) - own - set(kind.removed)):
            raise DictEmbedError(f"{method} has no option {', '.join(map(repr, unknown))}")
        if strict and (unknown := sorted(set(data) - shared - split)):
            raise DictEmbedError(f"no setting is named {', '.join(map(repr, unknown))}")
        for name in sorted(set(options) & set(kind.removed)):
            value = options.pop(name)
            if value == kind.removed[name]:
                log.info("%s: the saved option %s=%r of a former version changed nothing; dropped", method, name, value)
            else:
                log.warning(
                    "%s: the model was trained with %s=%r, an option since removed; its configuration loads without it",
                    method,
                    name,
                    value,
                )
        settings = {k: v for k, v in data.items() if k in shared and k != "method"}
        return cls(method=method, options=kind(**options), **settings)

    def run_identity(self) -> dict[str, Any]:
        """The options that determine one (lr, seed) run's weights and dev figures."""
        keep = {f.name for f in fields(self) if f.metadata.get("run", True)} - {"options"}
        data = {k: v for k, v in asdict(self).items() if k in keep}
        data["options"] = {f.name: getattr(self.options, f.name) for f in fields(self.options) if f.metadata["run"]}
        return data

    def flat(self) -> dict[str, Any]:
        """Every setting by name, the method's own options beside the shared ones (what `create` takes)."""
        data = {k: v for k, v in asdict(self).items() if k not in ("method", "options")}
        return {**data, **asdict(self.options)}
