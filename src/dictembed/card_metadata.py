"""The Hub metadata of a model card: the licences of the weights and of the dictionary, the languages and datasets
(the dictionary's, and the description corpus's when the run trained on one), and the `model-index` results.
`model_card` writes them into the card's front matter.

The licence data: base models by Hub name (below), dictionaries in their catalogue (`dictionary.catalog`). A base
model or dictionary not in them (a local folder, a table file) has no known licence: the card omits `license`
and says so, and lists the file's dictionary licence as `unknown`.

Beside the licences, the languages each known base model's encoder reads (`base_languages`): `dictembed serve`
routes a description to the folder of a dictionary whose encoder reads its language.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from dictembed.description_corpus import EVERYDAY, EVERYDAY_LONG
from dictembed.dictionary.catalog import CATALOG, NamedDictionary
from dictembed.licences import APACHE_2, MIT, Licence
from dictembed.offline_models import MODELS as OFFLINE_MODELS
from dictembed.paths import public_name

# The weights' licence of each base model whose licence is known, by Hub name.
BASE_MODEL_LICENCES: dict[str, Licence] = {
    "sentence-transformers/all-MiniLM-L6-v2": APACHE_2,
    "sentence-transformers/all-mpnet-base-v2": APACHE_2,
    "intfloat/multilingual-e5-small": MIT,
}
UNKNOWN = "unknown"

# The languages the encoder of each known base model reads (ISO 639-1), by Hub name; None: any (multilingual).
BASE_MODEL_LANGUAGES: dict[str, frozenset[str] | None] = {
    "sentence-transformers/all-MiniLM-L6-v2": frozenset({"en"}),
    "sentence-transformers/all-mpnet-base-v2": frozenset({"en"}),
    "intfloat/multilingual-e5-small": None,
}

# The STS test tasks (`evaluation.sts.STS_TASKS`) as model-index datasets: (name, Hub dataset id).
STS_DATASETS: dict[str, tuple[str, str]] = {
    **{f"STS{year}": (f"STS{year}", f"mteb/sts{year}-sts") for year in range(12, 17)},
    "STSB": ("STS Benchmark", "sentence-transformers/stsb"),
    "SICKR": ("SICK-R", "mteb/sickr-sts"),
}

# The base models whose checkpoints hold no MLM head (saved as a bare encoder), by Hub name: GR-BERT's MLM gives them
# a newly initialised head (`objectives.mlm.load_masked_lm`).
BASE_MODELS_WITHOUT_MLM_HEAD = frozenset(
    {
        "sentence-transformers/all-MiniLM-L6-v2",
        "sentence-transformers/all-mpnet-base-v2",
        "intfloat/multilingual-e5-small",
    }
)


@dataclass(frozen=True)
class DescriptionCorpus:
    """A description corpus a run may train on beside its dictionary: its name in the Hub metadata's `datasets`, its
    name and a line about it in the card, its language (ISO 639-1) and its licence."""

    dataset: str
    name: str
    about: str
    language: str
    licence: Licence


_EVERYDAY = DescriptionCorpus(
    "dictembed-everyday-descriptions",
    "dictembed's everyday description corpus",
    "descriptions of WordNet 3.0 headwords written for dictembed in the words people use when a word escapes "
    "them, shipped with it in `src/dictembed/corpus/`",
    "en",
    MIT,  # the project's licence, as the corpus README says
)

# The description corpora shipped with dictembed, by their `--descriptions` name (`description_corpus`).
DESCRIPTION_CORPORA: dict[str, DescriptionCorpus] = {
    EVERYDAY: _EVERYDAY,
    EVERYDAY_LONG: replace(  # the same dataset, with its long descriptions
        _EVERYDAY,
        name="dictembed's everyday description corpus with its long descriptions",
        about="descriptions of WordNet 3.0 headwords written for dictembed in the words people use when a word "
        "escapes them, and a longer one of each word, shipped with it in `src/dictembed/corpus/`",
    ),
}


def description_corpus(spec: str | None) -> DescriptionCorpus | None:
    """The shipped description corpus `spec` names (`everyday`, `everyday-long`), or None (a file of the user's, or
    none)."""
    return DESCRIPTION_CORPORA.get(spec) if spec else None


def hub_name_of(name: str) -> str:
    """The Hub name of a base model named by its Hub name or its offline name (`dictembed models prepare`)."""
    offline = OFFLINE_MODELS.get(name)
    return offline.original if offline else name


def base_licence(hub_name: str | None) -> Licence | None:
    """The weights' licence of a base model by its Hub name or its offline name (`dictembed models prepare`)."""
    return BASE_MODEL_LICENCES.get(hub_name_of(hub_name)) if hub_name else None


def base_languages(name: str | None) -> frozenset[str] | None:
    """The languages the encoder of a base model reads (`BASE_MODEL_LANGUAGES`), by its Hub name, its offline name
    or the Hub name's last part (`all-MiniLM-L6-v2`, as a folder of it is named); None: any language, that of a
    multilingual model and of a model not known."""
    if not name:
        return None
    hub = hub_name_of(name)
    by_last_part = {known.rpartition("/")[2]: known for known in BASE_MODEL_LANGUAGES}
    return BASE_MODEL_LANGUAGES.get(by_last_part.get(hub, hub))


def dictionary_parts(spec: str | None) -> list[str]:
    """The sources of a dictionary spec (`wordnet,mine.tsv`), as written, without blanks."""
    return [part.strip() for part in (spec or "").split(",") if part.strip()]


def dictionary_source(part: str) -> NamedDictionary | None:
    """The named dictionary `part`, or None (a table file)."""
    return CATALOG.get(part.lower())


def dictionary_metadata(spec: str | None, descriptions: str | None = None) -> dict[str, Any]:
    """`language`, `datasets` and `dictionary_licenses` (source, a file by its file name -> licence key, `unknown`
    when not known) of the dictionary a model was trained on; `descriptions` names the description corpus it was
    also trained on, if any: a shipped one (`everyday`) is listed among the datasets, with its language. Keys
    without a value are left out."""
    parts = dictionary_parts(spec)
    sources = [dictionary_source(part) for part in parts]
    known = {part.lower(): source for part, source in zip(parts, sources, strict=True) if source is not None}
    languages = [source.language for source in known.values()]
    datasets = list(known)
    if (corpus := description_corpus(descriptions)) is not None:
        languages.append(corpus.language)
        datasets.append(corpus.dataset)
    meta: dict[str, Any] = {}
    if datasets:
        meta["language"] = list(dict.fromkeys(languages))
        meta["datasets"] = datasets
    if parts:
        meta["dictionary_licenses"] = {
            public_name(part): source.licence.key if source and source.licence else UNKNOWN
            for part, source in zip(parts, sources, strict=True)
        }
    return meta


def _result(task: tuple[str, str], dataset: tuple[str, str, str], metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """One model-index result: task (type, name), dataset (name, Hub id, split) and its metrics."""
    return {
        "task": {"type": task[0], "name": task[1]},
        "dataset": {"name": dataset[0], "type": dataset[1], "split": dataset[2]},
        "metrics": metrics,
    }


def _metric(kind: str, name: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "value": round(float(value), 4), "name": name}


def sts_test_figures(record: dict[str, Any]) -> dict[str, float]:
    """STS test figures a record holds (`evaluation` or `test`, flat or under `sts`), by task; {} when none."""
    for key in ("evaluation", "test"):
        figures = record.get(key)
        figures = figures.get("sts", figures) if isinstance(figures, dict) else None
        if isinstance(figures, dict):
            found = {task: float(figures[task]) for task in STS_DATASETS if isinstance(figures.get(task), (int, float))}
            if found:
                return found
    return {}


def model_index(record: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The card's `model-index`: any STS test figures the record holds (split `test`), then the run's STS-B dev
    figure (split `validation`); [] when it has neither. The reverse-dictionary dev figures stay in the card's
    body: they rank the dictionary's own dev definitions, a figure no other model reports."""
    similarity = ("sentence-similarity", "Semantic Textual Similarity")
    results = [
        _result(similarity, (*STS_DATASETS[task], "test"), [_metric("spearman_cosine", "Spearman x 100", value)])
        for task, value in sts_test_figures(record).items()
    ]
    dev = record.get("dev")
    if isinstance(dev, dict) and isinstance(dev.get("stsb_dev"), (int, float)):
        metric = _metric("spearman_cosine", "Spearman x 100 (dev)", dev["stsb_dev"])
        dataset = ("STS Benchmark (dev)", "sentence-transformers/stsb", "validation")
        results.append(_result(similarity, dataset, [metric]))
    return [{"name": name, "results": results}] if results else []


_PLAIN_KEY = re.compile(r"^[A-Za-z_][\w-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}  # plain keys YAML reads as non-strings


def yaml_lines(key: str, value: Any, indent: str = "") -> list[str]:
    """`key: value` as block-style YAML lines; every scalar is written as JSON, which YAML reads as is."""
    plain = _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS
    head = f"{indent}{key if plain else json.dumps(key)}:"
    if isinstance(value, dict):
        return [head] + [line for k, v in value.items() for line in yaml_lines(str(k), v, indent + "  ")]
    if isinstance(value, list):
        lines = [head]
        for item in value:
            if isinstance(item, dict):
                block = [line for k, v in item.items() for line in yaml_lines(str(k), v, indent + "  ")]
                lines += [f"{indent}- {block[0][len(indent) + 2 :]}", *block[1:]]
            else:
                lines.append(f"{indent}- {json.dumps(item)}")
        return lines
    return [f"{head} {json.dumps(value)}"]
