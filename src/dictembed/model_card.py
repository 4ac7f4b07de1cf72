"""The Hugging Face model card (`README.md`) of a saved model folder, written from its run record.

The card has YAML front matter for the Hub, then the base model, the method and its paper (with BibTeX), the
entry space, the dictionary (the definitions and any descriptions trained on, counted apart), the training settings,
the figures the run measured and usage snippets. Every section is optional: a plain `Encoder.save` records only the
encoder settings, and its card says just that. Where a run departs from its paper (DefSent's word-embedding
fallback, GR-BERT's new MLM head), the card says so beside the paper.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dictembed.base_model import base_hub_name, local_base, record_base_model
from dictembed.card_metadata import (
    BASE_MODELS_WITHOUT_MLM_HEAD,
    base_licence,
    description_corpus,
    dictionary_metadata,
    dictionary_parts,
    dictionary_source,
    model_index,
    sts_test_figures,
    yaml_lines,
)
from dictembed.card_usage import usage_lines
from dictembed.model_folder import CARD_FILE, space_summary, weightless_export_graph
from dictembed.offline_models import MODELS as OFFLINE_MODELS
from dictembed.paths import public_name
from dictembed.recipes.papers import card_keys, citation, paper
from dictembed.record import RunRecord
from dictembed.texts import is_whole_number


# ----------------------------------------------------------------- helpers
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _settings(record: dict[str, Any]) -> dict[str, Any]:
    """Every run setting by name: the shared options and the method's own (`RunConfig.flat`)."""
    return RunRecord(config=_dict(record.get("config"))).settings


def _label(key: str) -> str:
    """A setting's name in the card: the method's temperature (entry logits or InfoNCE) is "temperature"."""
    return "temperature" if key.endswith("_temperature") else key


def _fmt(value: Any) -> str:
    """A table cell: floats to 4 significant decimals, None as a dash, containers as compact JSON."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}".rstrip("0").rstrip(".")
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return str(value).replace("|", "\\|")


def _table(rows: list[tuple[str, Any]], header: tuple[str, str] = ("setting", "value")) -> list[str]:
    if not rows:
        return []
    lines = [f"| {header[0]} | {header[1]} |", "|---|---|"]
    lines += [f"| {name} | {_fmt(value)} |" for name, value in rows]
    return lines + [""]


def _flatten(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested metric dicts as (`a/b`, value) rows."""
    rows: list[tuple[str, Any]] = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _flatten(value, name + "/")
        else:
            rows.append((name, value))
    return rows


def _saved_space(folder: Path | None) -> dict[str, Any]:
    """Kind, entry count, similarity and temperature of the folder's saved entry space, if it has one."""
    return space_summary(folder) if folder is not None else {}


def _count(value: Any) -> int | None:
    """A count the record holds (a whole number from 0, never true/false: `texts.is_whole_number`), or None."""
    return int(value) if is_whole_number(value, 0) else None


def _descriptions(record: dict[str, Any]) -> tuple[int, str | None]:
    """How many descriptions a DefSent/DefSent+ run trained on beside its definitions (`details["descriptions"]`,
    counted among `train_examples`) and the corpus it took them from (its `descriptions` setting: `everyday`, a
    file's public name), or (0, None) when it trained on none."""
    count = _count(_dict(record.get("details")).get("descriptions")) or 0
    if count <= 0:
        return 0, None
    spec = _settings(record).get("descriptions")
    return count, str(spec) if spec else None


def word_embedding_fallback(record: dict[str, Any]) -> bool:
    """Whether a DefSent model was trained against the frozen input word embeddings (`kind: word-embeddings`)
    instead of the paper's frozen MLM head."""
    return record.get("method") == "defsent" and record.get("entry_space") == "word-embeddings"


def new_mlm_head(record: dict[str, Any]) -> bool | None:
    """Whether a GR-BERT model's base model had no MLM head, so that MLM trained a newly initialised one: as the
    record's details say (`new_mlm_head`), else as known of its base model (`BASE_MODELS_WITHOUT_MLM_HEAD`); None
    when not known (or not GR-BERT)."""
    if record.get("method") != "gr-bert":
        return None
    said = _dict(record.get("details")).get("new_mlm_head")
    if isinstance(said, bool):
        return said
    return True if base_hub_name(record) in BASE_MODELS_WITHOUT_MLM_HEAD else None


# ----------------------------------------------------------------- sections
def _dictionary_spec(record: dict[str, Any]) -> str | None:
    """The dictionaries a model folder holds, as its record names them (`wordnet`, `wordnet,mine.tsv`): the one it
    was trained on, and the second dictionary whose definitions its entry space keeps (`details`), or None."""
    spec = _settings(record).get("dictionary") or record.get("data")
    details = record.get("details")
    second = details.get("second_dictionary") if isinstance(details, dict) else None
    name = second.get("name") if isinstance(second, dict) else None
    if spec and isinstance(name, str) and name and name not in str(spec).split(","):
        spec = f"{spec},{name}"
    return str(spec) if spec else None


def front_matter(record: dict[str, Any], name: str = "dictembed model") -> str:
    """YAML front matter for the Hub: library, tags, base model, the weights' `license` (omitted when the base
    model's is not known), the dictionary's `language`, `datasets` and `dictionary_licenses`, and `model-index`
    (`name` is the model's name there). Written by hand: every scalar is JSON, which YAML reads as is."""
    method = record.get("method")
    tags = ["dictembed", "sentence-transformers", "sentence-similarity", "feature-extraction"]
    if method and str(method) not in tags:
        tags.append(str(method))
    lines = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:"]
    lines += [f"- {json.dumps(tag)}" for tag in tags]
    hub_name = base_hub_name(record)
    if hub_name:
        lines.append(f"base_model: {json.dumps(hub_name)}")
    licence = base_licence(hub_name)
    meta: dict[str, Any] = {"license": licence.hub_id} if licence else {}
    if licence and licence.hub_name:
        meta |= {"license_name": licence.hub_name, "license_link": licence.link}
    meta |= dictionary_metadata(_dictionary_spec(record), _descriptions(record)[1])
    if index := model_index(record, name):
        meta["model-index"] = index
    lines += [line for key, value in meta.items() for line in yaml_lines(key, value)]
    return "\n".join([*lines, "---"]) + "\n"


def _title(record: dict[str, Any], name: str) -> list[str]:
    found = paper(record.get("method"))
    what = f"trained with {found.name} " if found else ""
    if found and word_embedding_fallback(record):
        what = f"trained with {found.name} (the word-embedding fallback instead of the paper's MLM head) "
    return [
        f"# {name}",
        "",
        f"A sentence-embedding model {what}using dictembed, which learns sentence embeddings from dictionaries.",
        "",
    ]


def _base_section(record: dict[str, Any]) -> list[str]:
    base = record_base_model(record)
    if not base:
        return []
    hub_name = base_hub_name(record)
    if not hub_name:
        text = f"`{Path(base).name}`, a local folder (not a Hugging Face Hub model)"
    elif hub_name != base and base in OFFLINE_MODELS:
        text = f"{_hub_link(hub_name)} (as `dictembed models prepare {base}` builds it offline)"
    elif hub_name != base or local_base(record, base) == "embedded":
        text = f"{_hub_link(hub_name)} (the copy embedded in dictembed)"
    else:
        text = _hub_link(hub_name)
    return ["## Base model", "", text, ""]


def _hub_link(hub_name: str) -> str:
    """A Markdown link to a model's page on the Hugging Face Hub."""
    return f"[{hub_name}](https://huggingface.co/{hub_name})"


def _method_section(record: dict[str, Any]) -> list[str]:
    method = record.get("method")
    if not method:
        return []
    found = paper(method)
    lines = ["## Method", "", f"`{method}`" if found is None else f"{found.name}: {found.reference}", ""]
    if word_embedding_fallback(record):
        why = (
            "as asked (`--space word-embeddings`)"
            if _settings(record).get("space") == "word-embeddings"
            else "because the base model has no pre-trained MLM head"
        )
        lines += [
            f"**Not the paper's method.** The entry space is dictembed's word-embedding fallback, {why}: the "
            "definitions' vectors were trained to predict their headword through the frozen input word embeddings "
            "of the single-token headwords (`word-embeddings`), not through the model's frozen pre-trained MLM "
            "head as in the paper.",
            "",
        ]
    if new_mlm_head(record):
        lines += [
            "The base model has no MLM head: a new one was initialised for the masked language modelling (its "
            "decoder tied to the input word embeddings) and trained with the encoder, where the paper starts from "
            "a pre-trained head.",
            "",
        ]
    details = record.get("details")
    if isinstance(details, dict) and details.get("teacher"):
        model = details.get("teacher_model") or "its own model"
        projection = f" projected {details['projection']}" if details.get("projection") else ""
        lines += [
            f"A student of `{details['teacher']}` ({model}): trained to encode a query as it does, and searching "
            f"its entry space{projection}.",
            "",
        ]
    return lines


def _space_section(record: dict[str, Any], folder: Path | None) -> list[str]:
    config = _settings(record)
    recorded = record.get("entry_space")
    info = {**_saved_space(folder), **(recorded if isinstance(recorded, dict) else {})}
    if isinstance(recorded, str):
        info.setdefault("kind", recorded)
    if not info:
        return []
    if str(info.get("kind", "")).startswith("definitions") or record.get("method") == "defsent-plus":
        info.setdefault("similarity", config.get("similarity"))
        if info.get("similarity") == "cosine":
            info.setdefault("temperature", config.get("entry_temperature"))
    if info.get("similarity") != "cosine":
        info.pop("temperature", None)  # dot logits have no temperature
    rows = [(key, info[key]) for key in ("kind", "entries", "similarity", "temperature") if info.get(key) is not None]
    if record.get("pst_step") is not None:
        rows.append(("PST step", record["pst_step"]))
    note = (
        "The frozen entry space the encoder was trained against; it is saved in `entry_space/`."
        if record.get("method")
        else "The entry space the encoder built over the dictionary (not trained against); it is saved in "
        "`entry_space/`."
    )
    return ["## Entry space", "", note, "", *_table(rows)]


def _dictionary_section(record: dict[str, Any]) -> list[str]:
    config = _settings(record)
    source = record.get("dictionary")
    stats = _dict(source) or _dict(record.get("dictionary_stats"))
    name = stats.get("name") or (source if isinstance(source, str) else None) or config.get("dictionary")
    name = name or record.get("data")
    if not name and not stats:
        return []
    rows: list[tuple[str, Any]] = [("dictionary", public_name(str(name)))] if name else []
    rows += [(key, stats[key]) for key in ("words", "entries", "headwords", "definitions", "senses") if key in stats]
    rows += _example_rows(record)
    count, spec = _descriptions(record)
    return ["## Dictionary", "", *_table(rows), *([_descriptions_text(count, spec), ""] if count else [])]


TEXT_KINDS = {"definitions": "definitions", "words": "headwords", "descriptions": "descriptions"}


def _example_rows(record: dict[str, Any]) -> list[tuple[str, Any]]:
    """What the run trained on, by kind: a distilled student's texts (`details["texts"]`), GR-BERT's triplets, or
    the definitions and descriptions of DefSent/DefSent+ (`train_examples` counts both)."""
    texts = _dict(_dict(record.get("details")).get("texts"))
    if texts:
        return [(f"training {label} used", texts[key]) for key, label in TEXT_KINDS.items() if _count(texts.get(key))]
    total = _count(record.get("train_examples"))
    if total is None:
        return []
    if record.get("method") == "gr-bert":
        return [("training triplets used (word, example, gloss)", total)]
    count, _ = _descriptions(record)
    rows: list[tuple[str, Any]] = [("training definitions used", max(total - count, 0))]
    return rows + ([("training descriptions used", count)] if count else [])


def _descriptions_text(count: int, spec: str | None) -> str:
    """The sentence naming the description corpus a run trained on beside the dictionary's definitions."""
    corpus = description_corpus(spec)
    if corpus is not None:
        source = f"{corpus.name} (`{spec}`: {corpus.about}; {corpus.licence.name} licence, like dictembed)"
    elif spec:
        source = f"the description file `{public_name(spec)}`"
    else:
        source = "a description corpus"
    return (
        f"Beside the dictionary's definitions, the encoder was trained on {count:,} descriptions of its training "
        f"headwords from {source}, as further queries of their words' entries."
    )


COMMON_KEYS = ("pooling", "pooler", "batch_size", "epochs", "warmup_ratio", "max_length", "limit", "lrs", "seeds")


def _training_keys(record: dict[str, Any], config: dict[str, Any]) -> tuple[str, ...]:
    """The settings that matter for the record's method (its recipe's `card_keys`); the entry temperature only
    where the entry logits are cosine."""
    keys = COMMON_KEYS + card_keys(record.get("method") or config.get("method"))
    if config.get("similarity") != "cosine":
        keys = tuple(k for k in keys if k != "entry_temperature")
    return keys + ("split_seed", "select_on")


def _encoder_value(key: str, value: Any) -> Any:
    """Readable encoder settings: a saved pooler as "dense + <activation>", the modules after pooling by name."""
    if key == "pooler" and isinstance(value, dict):
        return f"dense + {value.get('activation', '?')}"
    if key == "pooler" and value is None:
        return "none"
    if key == "modules" and isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return value


def _training_section(record: dict[str, Any]) -> list[str]:
    config = _settings(record)
    rows: list[tuple[str, Any]] = [(key, record[key]) for key in ("lr", "seed") if record.get(key) is not None]
    if config.get("preset"):
        rows.append(("preset", config["preset"]))
    rows += [(_label(key), config[key]) for key in _training_keys(record, config) if key in config]
    rows += [
        (key, record[key]) for key in ("train_examples", "final_loss", "throughput") if record.get(key) is not None
    ]
    encoder = _dict(record.get("encoder"))
    keys = ("pooling", "pooler", "modules", "max_length", "normalize", "dim")
    rows += [(f"encoder {key}", _encoder_value(key, encoder[key])) for key in keys if key in encoder]
    return ["## Training and encoder settings", "", *_table(rows)] if rows else []


def _results_section(record: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    dev = _dict(record.get("dev"))
    if dev:
        lines += ["## Results", "", _dev_text(dev), ""]
        lines += _table(_flatten(dev), ("metric", "value"))
    selection = _dict(record.get("selection"))
    key = selection.get("selected_on")
    by_lr = _dict(selection.get("by_lr"))
    if key and by_lr:
        lines += [
            f"Selected on `{key}` over the lr x seed grid: lr {_fmt(selection.get('best_lr'))}, "
            f"seed {_fmt(selection.get('best_seed'))}. Mean ± sd over seeds:",
            "",
        ]
        rows = []
        for lr, metrics in by_lr.items():
            stat = _dict(_dict(metrics).get(key))
            if "mean" in stat:
                rows.append((f"lr {lr}", f"{_fmt(stat['mean'])} ± {_fmt(stat.get('sd', 0.0))}"))
        lines += _table(rows, ("learning rate", str(key)))
    for name in ("evaluation", "test"):
        figures = record.get(name)
        if isinstance(figures, dict) and figures:
            lines += [f"Test figures (`{name}`):", "", *_table(_flatten(figures), ("metric", "value"))]
    if lines and lines[0] != "## Results":
        lines = ["## Results", "", *lines]
    if dev and not sts_test_figures(record):
        lines += ["The run measures no test figures; `dictembed evaluate sts --model MODEL` measures STS.", ""]
    return lines


def _names(keys: list[str]) -> str:
    return "/".join(f"`{key}`" for key in keys)


def _dev_text(dev: dict[str, Any]) -> str:
    """What the dev figures the record holds are, naming only those it holds (GR-BERT's are gloss matching and STS,
    DefSent's the reverse dictionary and STS)."""
    keys = [name for name, _ in _flatten(dev)]
    parts: list[str] = []
    if "stsb_dev" in keys:
        parts.append("STS-B dev (`stsb_dev`, Spearman x 100)")
    ranks = [key for key in keys if key == "mrr" or re.fullmatch(r"(top|acc)\d+", key) or key == "median_rank"]
    if ranks:
        percent = [key for key in ranks if key not in ("mrr", "median_rank")]
        said = ["`mrr`"] if "mrr" in ranks else []
        said += [f"{_names(percent)} in %"] if percent else []
        said += ["`median_rank`"] if "median_rank" in ranks else []
        parts.append(f"the reverse dictionary on the dictionary's dev headwords ({', '.join(said)})")
    gloss = [key for key in keys if key in ("gloss_acc", "gloss_loss")]
    if gloss:
        said = ["`gloss_acc`, top-1 accuracy in % among the glosses of its batch"] if "gloss_acc" in gloss else []
        said += ["`gloss_loss`, the InfoNCE loss"] if "gloss_loss" in gloss else []
        parts.append(f"gloss matching on held-out (word, example, gloss) triplets ({'; '.join(said)})")
    others = [key for key in keys if key != "stsb_dev" and key not in ranks and key not in gloss]
    if others:
        parts.append(_names(others))
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Dev figures measured by the run, not test figures: {listed}:"


def _usage_section(record: dict[str, Any], folder: Path | None, model_id: str | None, name: str | None) -> list[str]:
    """The card's usage snippets (`card_usage.usage_lines`) for the folder as its record and files show it."""
    pooling = _dict(record.get("encoder")).get("pooling") or _settings(record).get("pooling") or "mean"
    graph = weightless_export_graph(folder) if folder is not None else None
    has_space = record.get("entry_space") is not None or bool(_saved_space(folder))
    ranking = record.get("ranking")
    model = model_id or (f"path/to/{name}" if name else "PATH")
    return usage_lines(model, str(pooling), graph, has_space, ranking if isinstance(ranking, dict) else None)


def _licence_section(record: dict[str, Any]) -> list[str]:
    """The licences of the weights (the base model's) and of each dictionary source; "not known" where the
    tables of `card_metadata` hold none."""
    rows: list[tuple[str, Any]] = []
    base = base_hub_name(record) or record_base_model(record)
    if base:
        licence = base_licence(base_hub_name(record))
        text = f"[{licence.name}]({licence.link})" if licence else "not known: see the base model's own terms"
        rows.append((f"weights (base model `{public_name(base)}`)", text))
    for part in dictionary_parts(_dictionary_spec(record)):
        source = dictionary_source(part)
        licence = source.licence if source else None
        text = f"[{licence.name}]({licence.link})" if licence else "not known: see the source's own terms"
        rows.append((f"dictionary `{public_name(part)}`", text))
    _, spec = _descriptions(record)
    if spec:
        corpus = description_corpus(spec)
        text = f"[{corpus.licence.name}]({corpus.licence.link})" if corpus else "not known: see the source's own terms"
        rows.append((f"descriptions `{public_name(spec)}`", text))
    return ["## License", "", *_table(rows, ("part", "licence"))] if rows else []


def _citation_section(record: dict[str, Any]) -> list[str]:
    bibtex = citation(record.get("method"))
    if not bibtex:
        return []
    note = (
        [
            "The paper of the method this model adapts: it was trained with the word-embedding fallback, not the "
            "paper's MLM head (see Method).",
            "",
        ]
        if word_embedding_fallback(record)
        else []
    )
    return ["## Citation", "", *note, "```bibtex", bibtex, "```", ""]


# ----------------------------------------------------------------- the card
def render_model_card(
    record: RunRecord | dict[str, Any],
    folder: str | Path | None = None,
    model_id: str | None = None,
    name: str | None = None,
) -> str:
    """The card's Markdown for a run record. `folder`, if given, supplies the saved entry space's size; `name` is the
    model's name in the title and usage lines (default: `model_id`, else the folder's name)."""
    typed = record if isinstance(record, RunRecord) else RunRecord.from_dict(_dict(record))
    data = {**typed.to_dict(), **typed.details}  # keys the record does not know stay readable at the top
    path = Path(folder) if folder is not None else None
    name = name or (path.name if path is not None else None)
    sections = [
        _title(data, model_id or name or "dictembed model"),
        _base_section(data),
        _method_section(data),
        _space_section(data, path),
        _dictionary_section(data),
        _training_section(data),
        _results_section(data),
        _usage_section(data, path, model_id, name),
        _licence_section(data),
        _citation_section(data),
    ]
    body = "\n".join(line for section in sections for line in section).rstrip("\n")
    return front_matter(data, model_id or name or "dictembed model") + "\n" + body + "\n"


def write_model_card(
    folder: str | Path, record: RunRecord | dict[str, Any], model_id: str | None = None, name: str | None = None
) -> Path:
    """Write `README.md` in a saved model folder from its run record; `model_id` names it in the usage snippets,
    `name` in the title (default: the folder's name; a staging folder passes the final one)."""
    path = Path(folder) / CARD_FILE
    path.write_text(render_model_card(record, folder, model_id, name), encoding="utf-8")
    return path
