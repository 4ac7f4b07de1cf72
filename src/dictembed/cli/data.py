"""`dictembed data stats` (dictionary sizes per split) and `dictembed plot entries` (entry-space figures)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_command,
    add_command_group,
    add_dictionary,
    add_encoding,
    add_model,
    add_overwrite,
    add_wordnet_dir,
    check_model,
    natural,
)
from dictembed.cli.report import Report
from dictembed.errors import DictEmbedError
from dictembed.model_folder import read_record

COMMANDS = {"data": "dictionary data", "plot": "figures"}


def register(subparsers: Any) -> None:
    """`data` and `plot` with their tasks."""
    from dictembed.dictionary.sources.table import COLUMNS_HELP, table_columns  # numpy: imported as `data` runs

    tasks = add_command_group(subparsers, "data", COMMANDS["data"])
    text = "words, definitions and lengths per split (DefSent Table 1)"
    p, (shared, _) = add_command(tasks, "stats", run_stats, text, check=check_stats)
    p.add_argument("--split-seed", type=natural, default=0, help="seed of the 8:1:1 split by headword")
    add_dictionary(shared, "wordnet", "comma list of dictionaries or files")
    add_encoding(shared, "utf-8", "encoding of the dictionary files")
    shared.add_argument("--columns", type=table_columns, default=None, help=COLUMNS_HELP)
    add_wordnet_dir(shared)
    add_model(shared)

    tasks = add_command_group(subparsers, "plot", COMMANDS["plot"])
    text = "2-D SVD / whitened PCA of entry spaces across PST steps"
    p, (shared, output) = add_command(tasks, "entries", run_plot_entries, text, check=check_plot_entries)
    p.add_argument("--final-only", action="store_true", help="plot only the saved model, not every PST step")
    add_model(shared, required=True, help_text="saved model folder(s)", many=True)
    output.add_argument("--output", required=True, help="folder for the figures")
    add_overwrite(output, "replace the figures and isotropy.json already in --output")


def check_stats(args: argparse.Namespace) -> None:
    """A --dictionary that cannot be read, a --model path that is not there: refused before anything loads."""
    from dictembed.dictionary.load import check_sources

    check_sources(args.dictionary, args.columns)
    check_model(args.model)


def run_stats(args: argparse.Namespace) -> Report:
    from transformers import AutoTokenizer

    from dictembed.dictionary import dictionary_stats, format_stats_table, load_dictionary, split_by_headword
    from dictembed.loading import load_pretrained
    from dictembed.paths import default_model

    tokenizer = load_pretrained(AutoTokenizer, args.model or default_model())  # a Hub name fails before the parse
    dictionary = load_dictionary(
        args.dictionary, wordnet_dir=args.wordnet_dir, encoding=args.encoding, columns=args.columns
    )
    rows = dictionary_stats(split_by_headword(dictionary, seed=args.split_seed), tokenizer)
    return Report({"dictionary": args.dictionary, "splits": rows}, format_stats_table(rows))


def step_folder(model: str | Path, path: str) -> Path:
    """The folder of a PST step's model as a record names it: a published record, relative to the model folder's
    own folder (`RunRecord.portable`); an older one, absolute or relative to where it was trained."""
    beside = Path(model).parent / path
    return beside if not Path(path).is_absolute() and beside.exists() else Path(path)


def check_plot_entries(args: argparse.Namespace) -> None:
    """The plot extra installed, every --model a dictembed model folder given once, an --output folder that can be
    written, outside every model folder, whose figures are replaced only with --overwrite: checked before anything
    loads."""
    from dictembed.extras import require
    from dictembed.geometry import figure_names
    from dictembed.output_folder import check_not_a_file, check_outside, check_writable_place

    require("plot", "matplotlib.figure")  # a missing extra is a one-line hint
    seen: set[Path] = set()
    for model in args.model:
        if not Path(model).is_dir():
            raise DictEmbedError(f"--model {model}: no such model folder")
        read_record(model, required=True)
        if Path(model).resolve() in seen:
            raise DictEmbedError(f"--model {model} is given twice")
        seen.add(Path(model).resolve())
        check_outside(args.output, model)
    check_not_a_file(args.output)
    there = [Path(args.output) / name for name in figure_names()]
    if not args.overwrite and (found := [p for p in there if p.exists() or p.is_symlink()]):
        raise DictEmbedError(f"--output {found[0]} already exists; pass --overwrite to replace it")
    check_writable_place(Path(args.output) / "figure.png")


def model_labels(models: list[str]) -> dict[str, str]:
    """Each model's name in the figures and isotropy.json: its folder's, with the folder above it where two share
    a name, the whole path where those are shared too."""
    names = [Path(m).name for m in models]
    parents = [f"{Path(m).parent.name}/{Path(m).name}" for m in models]
    return {
        m: n if names.count(n) == 1 else p if parents.count(p) == 1 else m
        for m, n, p in zip(models, names, parents, strict=True)
    }


def run_plot_entries(args: argparse.Namespace) -> Report:
    from dictembed.geometry import isotropy_metrics, plot_entry_spaces, plot_isotropy
    from dictembed.saved_entry_space import load_entry_space

    label = model_labels(args.model)
    paths: list[tuple[str, Path]] = []
    for model in args.model:
        history = read_record(model, required=True).selection.get("pst", [])
        if history and not args.final_only:
            steps = [(f"{label[model]} step {h['step']}", step_folder(model, h["path"])) for h in history]
            if missing := [path for _, path in steps if not path.is_dir()]:
                raise DictEmbedError(
                    f"{model}: its PST step folder {missing[0]} is not there (moved away from its runs folder?); "
                    "--final-only plots the folder's own entry space"
                )
            paths += steps
        else:
            paths.append((label[model], Path(model)))
    spaces = {name: load_entry_space(path).vectors() for name, path in paths}
    written = plot_entry_spaces(spaces, args.output)
    figure = plot_isotropy({n: isotropy_metrics(m, sample=200_000) for n, m in spaces.items()}, args.output)
    written += [figure, figure.with_suffix(".json")]  # the metrics beside their figure
    return Report({"written": [str(p) for p in written]}, "\n".join(f"wrote {p}" for p in written))
