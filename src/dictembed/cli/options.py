"""The options several commands share, each defined once (`add_xxx(parser_or_group)`), their argparse types,
and the parser helpers every command module builds its subcommands with."""

from __future__ import annotations

import argparse
import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from dictembed.cli.report import Check, Handler, UsageError
from dictembed.device_choices import COMPUTE_PRECISIONS, DEVICE_HELP, PRECISION_HELP
from dictembed.model_folder import ModelFolder, may_be_hub_name
from dictembed.pooling_names import ENCODER_POOLINGS
from dictembed.search_options import (
    DEFAULT_K,
    DEFINITION_WEIGHT,
    DESCRIBED_HEADWORD_WEIGHT,
    FREQUENCY_WEIGHT,
    HEADWORD_WEIGHT,
    MAX_WEIGHT,
    OVERLAP_WEIGHT,
    POS_TAGS,
    QUERY_WORD_WEIGHT,
    SECOND_DICTIONARY_WEIGHT,
    SECOND_FLOOR,
    WORD_COUNTS,
)
from dictembed.text_files import text_encoding
from dictembed.texts import MAX_BATCH_SIZE, MAX_EPOCHS, MAX_SEED, bounds_in_words

Group = argparse._ActionsContainer  # a parser or an argument group: what `add_argument` is called on

ARRAY_SUFFIXES = (".npy", ".npz")


# ------------------------------------------------------------------------ argument types
def number(convert: Callable[[str], Any], minimum: float, strict: bool, maximum: float | None = None) -> Callable:
    """An argparse `type=` that converts and checks the bounds, with a one-line message on failure."""
    bound = bounds_in_words(convert is int, minimum, strict, maximum)

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {convert.__name__}") from None
        low_ok = value > minimum if strict else value >= minimum
        if not math.isfinite(value) or not low_ok or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value

    parse.__name__ = convert.__name__
    return parse


def list_of(parse_one: Callable[[str], Any]) -> Callable[[str], list]:
    """A comma-separated, non-empty list of `parse_one` values, each once (a seed or a rate listed twice would be
    trained twice and weigh twice in the selection's mean); no empty item."""

    def parse(text: str) -> list:
        items = [item.strip() for item in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError("expected a non-empty comma-separated list")
        if "" in items:
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item between its commas")
        values = [parse_one(item) for item in items]
        if twice := next((item for item, value in zip(items, values, strict=True) if values.count(value) > 1), None):
            raise argparse.ArgumentTypeError(f"{twice!r} is listed more than once in {text!r}")
        return values

    return parse


positive_int = number(int, 0, strict=True)
natural = number(int, 0, strict=False)
batch_size = number(int, 0, strict=True, maximum=MAX_BATCH_SIZE)
epochs = number(int, 0, strict=True, maximum=MAX_EPOCHS)
seed = number(int, 0, strict=False, maximum=MAX_SEED)
positive_float = number(float, 0, strict=True)
non_negative_float = number(float, 0, strict=False)
fraction = number(float, 0, strict=True, maximum=1.0)
port = number(int, 0, strict=False, maximum=65535)
names = list_of(str)


def array_path(text: str) -> Path:
    """A .npy or .npz file name."""
    if Path(text).suffix not in ARRAY_SUFFIXES:
        raise argparse.ArgumentTypeError(f"{text!r} must end in .npy or .npz")
    return Path(text)


def input_file(text: str) -> str:
    """The path of a file to read: an empty one (`--input ""`, an unset shell variable) is refused, not read as the
    current folder."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


def repo_id(text: str) -> str:
    """A Hub repository id, user/name, as the Hub takes it (huggingface_hub's own rules: no `..` or `--`, no name
    starting or ending with `-` or `.`, none ending in `.git`, at most 96 characters a part)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if not re.fullmatch(r"[\w.-]+/[\w.-]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hub repository id of the form user/name")
    try:
        validate_repo_id(text)
    except HFValidationError as err:
        raise argparse.ArgumentTypeError(str(err).rstrip(".")) from None
    return text


def check_known(given: list[str] | None, allowed: Iterable[str], flag: str) -> None:
    """A UsageError naming the unknown entries of a comma list."""
    allowed = list(allowed)
    if unknown := [n for n in given or [] if n not in allowed]:
        raise UsageError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")


# ---------------------------------------------------------------------- parser helpers
class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Appends "(default: ...)" to every option whose help does not already state its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.required or action.default in (None, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


def add_output_options(group: Group, suppress: bool) -> None:
    """-v, -q and --json. Subcommands get them with SUPPRESS defaults, so a value given before the subcommand
    is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    level = group.add_mutually_exclusive_group()
    for flags, const, text in [
        (("-v", "--verbose"), logging.DEBUG, "debug logging on stderr"),
        (("-q", "--quiet"), logging.WARNING, "only warnings and errors on stderr, no progress bars"),
    ]:
        level.add_argument(
            *flags,
            dest="log_level",
            action="store_const",
            const=const,
            default=default(logging.INFO),
            help=f"{text} (default: info)",
        )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the result as one JSON document on stdout, the table on stderr (default: a table on stdout)",
    )


def add_command(
    subparsers: Any,
    name: str,
    func: Handler,
    help_text: str,
    groups: Sequence[str] = ("shared options",),
    check: Check | None = None,
) -> tuple[argparse.ArgumentParser, list[Any]]:
    """A subcommand with defaults shown in its help: the parser (its own options go in its "options"), one
    argument group per title of `groups`, then "output options" with -v, -q and --json (returned last). `check`
    checks the arguments before anything loads (`Check`)."""
    parser = subparsers.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
    parser.set_defaults(func=func, parser=parser, check=check)
    made = [parser.add_argument_group(title) for title in groups]
    output = parser.add_argument_group("output options")
    add_output_options(output, suppress=True)
    return parser, [*made, output]


def add_command_group(subparsers: Any, name: str, help_text: str) -> Any:
    """A command with tasks (`dictembed evaluate sts`): the subparsers its tasks are added to."""
    parser = subparsers.add_parser(name, help=help_text, description=help_text, formatter_class=HelpFormatter)
    return parser.add_subparsers(dest="task", required=True, metavar="TASK")


# ---------------------------------------------------------------------- shared options
def add_model(
    group: Group, required: bool = False, help_text: str | None = None, many: bool = False, repeat: bool = False
) -> None:
    """--model: a hub name or a local folder (optional ones default to the embedded model); `many`: several after
    one flag, `repeat`: one a flag, the flag repeated (a list either way)."""
    if help_text is None:
        help_text = "hub name, local folder or prepared offline model (dictembed models list)"
        help_text += "" if required else " (default: the embedded all-MiniLM-L6-v2)"
    action = "append" if repeat else "store"
    group.add_argument(
        "--model", required=required, default=None, nargs="+" if many else None, action=action, help=help_text
    )


def check_model(name: str | None) -> None:
    """Refuse a --model that can name no model: a file, or a path that is not there and cannot be a Hub id or an
    offline model's name (`/data/no-such-model`, `models/tinyy` beside a folder `models/`), with the one-line
    error of `ModelFolder.open`, and an offline model's name that is not prepared (`dictembed models prepare`). A
    folder or a Hub id passes: what it holds is checked when it loads."""
    if name is None:
        return
    path = Path(name).expanduser()
    if path.is_dir():
        return
    if not path.exists() and may_be_hub_name(name):
        from dictembed.offline_models import local_folder

        local_folder(name)  # an offline model's name that is not prepared: its one-line error, before anything loads
        return
    ModelFolder.open(name)


def add_device(group: Group) -> None:
    """--device and --precision (the compute dtype) of a command that loads a model."""
    group.add_argument("--device", default="auto", help=DEVICE_HELP)
    group.add_argument("--precision", choices=COMPUTE_PRECISIONS, default="auto", help=PRECISION_HELP)


def add_encoder(group: Group) -> None:
    """--model, --pooling, --device and --precision: what `load_encoder` reads."""
    add_model(group)
    group.add_argument(
        "--pooling",
        choices=ENCODER_POOLINGS,
        default=None,
        metavar="POOLING",
        help=f"override the pooling: {', '.join(ENCODER_POOLINGS)} (default: the model's saved pooling)",
    )
    add_device(group)


def load_encoder(args: argparse.Namespace, export: bool = True) -> Any:
    """The encoder on --device with --precision as its compute precision (`Encoder.autocast`); --backend onnx
    (where the command has it) runs the backbone with ONNX Runtime on the CPU. With `export`, an export without
    torch weights runs its graph (`ExportEncoder`, CPU only, in the graph's own precision; no --pooling, no other
    backend); without, it is refused as `Encoder.load` refuses it. --device is checked before the model is read."""
    from dictembed.devices import loader_device
    from dictembed.encoder import Encoder
    from dictembed.model_folder import weightless_export_graph
    from dictembed.paths import default_model

    name = args.model or default_model()
    device = loader_device(getattr(args, "device", "auto"))
    folder = ModelFolder.open(name)
    if export and weightless_export_graph(folder.path) is not None:
        return export_encoder(args, folder, device)
    backend = getattr(args, "backend", None)
    encoder = Encoder.load(name, pooling=getattr(args, "pooling", None), device=device, backend=backend)
    return encoder.set_precision(getattr(args, "precision", "auto"))


def export_encoder(args: argparse.Namespace, folder: ModelFolder, device: Any) -> Any:
    """`load_encoder` of a weightless export: its graph on ONNX Runtime, the options it cannot honour refused
    before the graph opens (`device`: None for auto)."""
    from dictembed.backends.onnx.export_encoder import ExportEncoder, graph_precision

    graph = graph_precision(folder)
    backend, pooling = getattr(args, "backend", None), getattr(args, "pooling", None)
    asked_device, precision = getattr(args, "device", "auto"), getattr(args, "precision", "auto")
    refused = [
        f"--{name} {value}"
        for name, value, fits in (
            ("backend", backend, backend in (None, "onnx")),
            ("pooling", pooling, pooling is None),
            ("device", asked_device, device is None or device.type == "cpu"),
            ("precision", precision, precision in ("auto", graph)),
        )
        if not fits
    ]
    if refused:
        raise weightless_refusal(refused[0], folder)
    return ExportEncoder.open(folder)


def weightless_refusal(option: str, folder: ModelFolder) -> UsageError:
    """The error of an `option` that a weightless export (`model_folder.weightless_export_graph`) cannot honour."""
    from dictembed.backends.onnx.export_encoder import graph_precision

    return UsageError(
        f"{option}: model folder {folder.path} is an ONNX export without its fp32 weights, which runs its own graph "
        f"({graph_precision(folder)}, pooling included) with ONNX Runtime on the CPU; leave the option out, or export "
        "the model again with --keep-weights"
    )


def add_tasks(group: Group, help_text: str, required: bool = False) -> None:
    """--tasks: a comma list of benchmark task names."""
    group.add_argument("--tasks", type=names, required=required, default=None, help=help_text)


def add_batch_size(group: Group, default: int, help_text: str) -> None:
    group.add_argument("--batch-size", type=batch_size, default=default, help=help_text)


def add_limit(group: Group, help_text: str) -> None:
    group.add_argument("--limit", type=positive_int, default=None, metavar="N", help=f"{help_text} (default: all)")


def add_dictionary(group: Group, default: str | None, help_text: str) -> None:
    group.add_argument("--dictionary", default=default, help=help_text)


def wordnet_folder(text: str) -> str:
    """A --wordnet-dir that holds a WordNet database (its data.noun): a typo is refused when it is read, not when a
    dictionary that reads WordNet loads (never, for a command given only table files)."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    if not (path / "data.noun").is_file():
        raise argparse.ArgumentTypeError(f"{text}: no WordNet database there (no data.noun)")
    return text


def add_wordnet_dir(group: Group) -> None:
    group.add_argument(
        "--wordnet-dir",
        type=wordnet_folder,
        default=None,
        help="WordNet database folder (default: the system's WordNet)",
    )


def add_encoding(group: Group, default: str | None, help_text: str) -> None:
    """--encoding: a text encoding Python knows (checked at parse time)."""
    group.add_argument("--encoding", type=text_encoding, default=default, help=help_text)


def add_pos(group: Group) -> None:
    group.add_argument(
        "--pos", default=None, help=f"only words of this part of speech: {', '.join(POS_TAGS)} (default: any)"
    )


def add_words(group: Group) -> None:
    group.add_argument("--words", choices=WORD_COUNTS, default=WORD_COUNTS[0], help="single words, phrases or any")


def number_up_to(text: str, high: float, refusal: str) -> float:
    """`text` as a number from 0 to `high`, else an argparse error: not a number, or `text` followed by `refusal`
    (nan too)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= high:
        raise argparse.ArgumentTypeError(f"{text!r}{refusal}")
    return value


def weight(text: str) -> float:
    """A non-negative number (a ranking weight)."""
    return number_up_to(text, MAX_WEIGHT, f" must be a number from 0 to {MAX_WEIGHT:g}")


RANKING_OPTIONS = (  # (setting, what it does): --frequency-weight ... as `add_ranking` registers them
    (
        "frequency_weight",
        f"word-frequency prior: add WEIGHT x the word's Zipf frequency to the score (wordfreq; English and Chinese "
        f"dictionaries), 0 turns it off (default {FREQUENCY_WEIGHT:g})",
    ),
    (
        "definition_weight",
        "mix the cosine to an entry's best single definition into the score with this weight: (entry cosine + "
        "WEIGHT x definition cosine) / (1 + WEIGHT), for a model whose entry space keeps its definition vectors; "
        f"0 turns it off (default {DEFINITION_WEIGHT:g})",
    ),
    (
        "headword_weight",
        "add WEIGHT x the cosine of the description to the word itself (encoded as a description is) to the "
        "score, for a model whose entry space keeps its headword vectors; 0 turns it off (default: the folder's, "
        f"{DESCRIBED_HEADWORD_WEIGHT:g} for a model trained on descriptions, else {HEADWORD_WEIGHT:g})",
    ),
    (
        "second_dictionary_weight",
        "add WEIGHT x (the best cosine of the description to a second dictionary's definition of the word, less "
        f"{SECOND_FLOOR:g}, floored at 0) to the score, for a model folder that keeps a second dictionary's "
        f"definitions (train --second-dictionary); 0 turns it off (default {SECOND_DICTIONARY_WEIGHT:g})",
    ),
    (
        "query_word_weight",
        "take WEIGHT off the score of a word the description itself uses (a description seldom names its word); "
        f"0 turns it off (default {QUERY_WORD_WEIGHT:g})",
    ),
    (
        "overlap_weight",
        "add WEIGHT x the number of the description's words (the rarer ones, stemmed) that an entry's definitions "
        f"use; 0 turns it off (default {OVERLAP_WEIGHT:g})",
    ),
)


def add_ranking(group: Group) -> None:
    """The reverse dictionary's ranking options (`predict`, `serve`; read back by `ranking_of`). Each one not given
    leaves the setting the model folder saved, else `search_options.Ranking`'s default."""
    for name, help_text in RANKING_OPTIONS:
        group.add_argument("--" + name.replace("_", "-"), type=weight, default=None, metavar="WEIGHT", help=help_text)
    group.add_argument(
        "--min-frequency",
        type=zipf,
        default=None,
        metavar="ZIPF",
        help="list only entries whose word has at least this Zipf frequency (wordfreq: 3 is once per million "
        "words, 0 an unknown word; English and Chinese dictionaries) (default: every entry)",
    )


def zipf(text: str) -> float:
    """A Zipf frequency, 0 to 8."""
    return number_up_to(text, 8, ": a Zipf frequency from 0 to 8")


def ranking_of(args: argparse.Namespace) -> dict[str, float]:
    """The ranking settings given on the command line (`add_ranking`), by name, to set over a folder's own
    (`search_options.ranking_over`)."""
    names = [name for name, _ in RANKING_OPTIONS] + ["min_frequency"]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def add_top_k(group: Group) -> None:
    group.add_argument("--top-k", type=positive_int, default=DEFAULT_K, help="how many results to list")


def add_overwrite(group: Group, help_text: str) -> None:
    group.add_argument("--overwrite", action="store_true", help=help_text)
