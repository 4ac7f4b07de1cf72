"""`dictembed train`: its options are generated from `RunConfig` and each method's options dataclass."""

from __future__ import annotations

import argparse
import logging
from dataclasses import Field, fields
from pathlib import Path
from typing import Any, NoReturn

from dictembed.cli.options import (
    add_command,
    add_overwrite,
    check_model,
    list_of,
    natural,
    non_negative_float,
    positive_float,
    positive_int,
)
from dictembed.cli.report import Report, UsageError, table
from dictembed.model_folder import read_record
from dictembed.output_folder import check_outside, check_run_output

log = logging.getLogger("dictembed")

COMMANDS = {"train": "train DefSent, DefSent+ or GR-BERT"}
FLAG_NAMES = {"lrs": "--lr-grid"}  # flags whose name is not the option's own


def flag(name: str) -> str:
    """The command-line flag of a setting."""
    return FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def option_type(f: Field) -> dict[str, Any]:
    """argparse keywords for an option field, from its type and its `option(...)` metadata."""
    if f.metadata.get("choices"):
        return {"choices": f.metadata["choices"]}
    if f.metadata.get("parse"):
        return {"type": f.metadata["parse"]}
    kind = str(f.type)
    if kind == "bool":
        return {"action": argparse.BooleanOptionalAction}
    positive = f.metadata.get("positive", True)
    number = {
        "int": positive_int if positive else natural,
        "float": positive_float if positive else non_negative_float,
    }
    for name, parse in number.items():
        if kind.startswith(f"list[{name}]"):
            return {"type": list_of(parse), "metavar": f"{name.upper()},..."}
        if kind.startswith(name):
            return {"type": parse}
    return {}


def method_options() -> dict[str, list[Field]]:
    """Per method, the fields of its own options dataclass."""
    from dictembed.recipes import presets
    from dictembed.recipes.registry import get_recipe

    return {method: list(fields(get_recipe(method).options)) for method in presets.METHODS}


def train_options() -> dict[str, Field]:
    """Every command-line option of `train`: the shared RunConfig fields, then each method's own (a name
    two methods share is defined by the first)."""
    from dictembed.recipes.config import RunConfig

    options = {f.name: f for f in fields(RunConfig) if f.metadata.get("cli", True)}
    for own in method_options().values():
        options.update({f.name: f for f in own if f.name not in options})
    return options


def add_option(group: Any, f: Field, governed: set[str]) -> None:
    """One option field as a flag whose default is None (unset: the preset's or the dataclass's)."""
    from dictembed.recipes import presets

    keywords = option_type(f)
    text = f.metadata["help"]
    if f.name in governed:
        text += f" ({presets.default_help(f.name)})"
    elif "default" not in text:
        text += f" (default: {f.default_factory() if callable(f.default_factory) else f.default})"
    group.add_argument(flag(f.name), dest=f.name, default=None, help=text, **keywords)


def register(subparsers: Any) -> None:
    """`train` with every option: the run's, each method's own, the output's."""
    from dictembed.recipes import presets
    from dictembed.recipes.config import RunConfig

    own = method_options()
    groups = ["shared options", *(f"{method} options" for method in own)]
    p, (shared, *by_method, output) = add_command(subparsers, "train", run, COMMANDS["train"], groups, check_train)
    p.add_argument("--method", choices=presets.METHODS, default=None, help="training method (default: defsent-plus)")
    p.add_argument(
        "--preset",
        choices=presets.PRESETS,
        default=None,
        help="paper: each paper's settings; best: the settings measured best on MiniLM (docs/results.md). "
        f"Options given explicitly override it; not with --config (default: {presets.DEFAULT_PRESET})",
    )
    p.add_argument(
        "--config",
        default=None,
        help="re-run the configuration saved in this dictembed.json or model folder (default: none)",
    )
    p.add_argument("--resume", action="store_true", help="continue interrupted runs from their checkpoints")
    governed = {name for method in presets.METHODS for name in presets.preset_settings(method, "paper")}
    for f in fields(RunConfig):
        if f.metadata.get("cli", True):
            add_option(shared, f, governed)
    shown: set[str] = set()  # options already listed in an earlier method's group
    for (method, options), group in zip(own.items(), by_method, strict=True):
        listed = [flag(f.name) for f in options if f.name in shown]
        group.description = f"options of --method {method}" + (f", and {', '.join(listed)} above" if listed else "")
        for f in options:
            if f.name not in shown:
                shown.add(f.name)
                add_option(group, f, governed)
    output.add_argument("--output", required=True, help="folder of the selected model")
    add_overwrite(output, "replace a model already in --output")


def check_train(args: argparse.Namespace) -> None:
    """What `train` checks before the training code loads: a --config that is not there, an --output that would
    lose something (`check_run_output`) or lies inside --model (`check_outside`), a --model path that is not there,
    a --dictionary or --second-dictionary that cannot be read (a name whose package is missing too), a
    --descriptions corpus that cannot be read."""
    from dictembed.description_corpus import load_descriptions
    from dictembed.dictionary.load import check_sources
    from dictembed.second_dictionary import second_choice

    if args.config and not Path(args.config).exists():
        read_record(Path(args.config), required=True)  # the error of a missing saved configuration
    if args.output is not None:
        check_outside(args.output, args.model)
        check_run_output(args.output, args.overwrite)
    check_model(args.model)
    if args.dictionary is not None:
        check_sources(args.dictionary, args.columns)
    second = getattr(args, "second_dictionary", None)
    if second and second_choice(second):  # none is no second dictionary, as the option reads it
        check_sources(second)
    if getattr(args, "descriptions", None):
        load_descriptions(args.descriptions)  # read in full: a bad line is refused before the model loads


class LenientParser(argparse.ArgumentParser):
    """A parser that raises ArgumentError where argparse would print its usage and exit."""

    def error(self, message: str) -> NoReturn:
        raise argparse.ArgumentError(None, message)


def check_command_line(argv: list[str]) -> None:
    """`check_train` on the arguments after `train`, read before its parser is built (the recipes' options it is
    generated from import torch): only the options the checks read, spelled in full; arguments this reading cannot
    make sense of are left to the parser, which reports them."""
    parser = LenientParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    from dictembed.description_corpus import corpus_choice

    for name in ("--output", "--config", "--model", "--dictionary", "--columns", "--second-dictionary"):
        parser.add_argument(name)
    parser.add_argument("--descriptions", type=corpus_choice)  # as the full parser reads it: none is no corpus
    parser.add_argument("--overwrite", action="store_true")
    try:
        args, _ = parser.parse_known_args(argv)
    except argparse.ArgumentError:
        return
    check_train(args)


def run(args: argparse.Namespace) -> Report:
    from dictembed.recipes import presets
    from dictembed.recipes.resolve import ConfigError, record_config, resolve_train_config
    from dictembed.recipes.run import train

    given = {name: getattr(args, name) for name in train_options() if getattr(args, name) is not None}
    try:
        resolved = resolve_train_config(
            args.method,
            args.preset,
            given,
            output=args.output,
            saved=args.config,
            resume=args.resume,
            overwrite=args.overwrite,
            name=flag,
        )
    except ConfigError as err:
        raise UsageError(str(err)) from None
    config = resolved.config
    if resolved.settings:
        changed = f" (set explicitly: {', '.join(resolved.overridden)})" if resolved.overridden else ""
        log.info("preset %s: %s%s", config.preset, presets.describe(resolved.settings), changed)
    log.info(
        "%s on %s: seeds=%s batch_size=%d epochs=%d limit=%s",
        config.method,
        config.model,
        config.seeds,
        config.batch_size,
        config.epochs,
        config.limit,
    )
    path = train(config)
    saved = read_record(path, required=True)
    data: dict[str, Any] = {
        "output": str(path),
        "preset": config.preset,
        "dev": saved.dev,
        "config": record_config(saved),
        "selection": saved.selection,
    }
    return Report(data, f"saved {path}\n" + table(saved.dev, "dev metrics of the selected model"))
