"""`dictembed` command line: train | encode | predict | evaluate | finetune | data | plot | push.

Conventions: every command reports a result. Without --json it is a human-readable table on stdout; with
--json stdout is exactly one JSON document and the human-readable text goes to stderr. Logging always goes
to stderr. Exit status: 0 success, 1 runtime error, 2 usage error, 130 interrupted; an error is one line
`dictembed: error: ...` on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dictembed import __version__
from dictembed.errors import DictEmbedError
from dictembed.recipes import presets
from dictembed.record import read_record

log = logging.getLogger("dictembed")

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")  # as Encoder.encode / sentence-transformers
ARRAY_SUFFIXES = (".npy", ".npz")
EPILOG = """\
output: a human-readable table on stdout; with --json exactly one JSON document on stdout and the table on
stderr. Logging always goes to stderr.
exit status: 0 success, 1 runtime error (one line `dictembed: error: ...` on stderr), 2 usage error,
130 interrupted."""


@dataclass
class Report:
    """What a command reports: `data` is printed as JSON with --json, `text` is for people."""

    data: Any
    text: str


Handler = Callable[[argparse.Namespace], Report]


class UsageError(Exception):
    """Arguments that parse but do not fit together (exit 2, like argparse's own errors)."""


# ------------------------------------------------------------------------ argument types
def _number(convert: Callable[[str], Any], minimum: float, strict: bool, maximum: float | None = None) -> Callable:
    """An argparse `type=` that converts and checks the bounds, with a one-line message on failure."""
    bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
    bound += f" and <= {maximum:g}" if maximum is not None else ""

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


def _list_of(parse_one: Callable[[str], Any]) -> Callable[[str], list]:
    """A comma-separated, non-empty list of `parse_one` values."""

    def parse(text: str) -> list:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError("expected a non-empty comma-separated list")
        return [parse_one(item) for item in items]

    return parse


_positive_int = _number(int, 0, strict=True)
_natural = _number(int, 0, strict=False)
_positive_float = _number(float, 0, strict=True)
_non_negative_float = _number(float, 0, strict=False)
_fraction = _number(float, 0, strict=True, maximum=1.0)
_names = _list_of(str)


def _array_path(text: str) -> Path:
    if Path(text).suffix not in ARRAY_SUFFIXES:
        raise argparse.ArgumentTypeError(f"{text!r} must end in .npy or .npz")
    return Path(text)


def _repo_id(text: str) -> str:
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Hub repository id of the form user/name")
    return text


def _known(names: list[str] | None, allowed: Iterable[str], flag: str) -> None:
    """A UsageError naming the unknown entries of a comma list."""
    allowed = list(allowed)
    if unknown := [n for n in names or [] if n not in allowed]:
        raise UsageError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")


# ---------------------------------------------------------------------------- output
def _table(result: dict[str, Any], title: str) -> str:
    """A title and one aligned `key  value` line per entry (floats with two decimals)."""
    width = max((len(k) for k in result), default=0)
    lines = [title]
    for key, value in result.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        lines.append(f"  {key:<{width}}  {shown}")
    return "\n".join(lines)


def _strict_json(value: Any) -> Any:
    """`value` as strict JSON data: numpy scalars and arrays as Python values, NaN and infinities as null."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict_json(v) for v in value]
    return value


def _emit(report: Report, as_json: bool) -> None:
    """The one place results are printed: see the module docstring."""
    if as_json:
        if report.text:
            print(report.text, file=sys.stderr)
        print(json.dumps(_strict_json(report.data), default=str))
    elif report.text:
        print(report.text)


def _run(args: argparse.Namespace) -> Report:
    """Run the command; with --json anything it prints lands on stderr, so stdout stays one JSON document."""
    if not args.json:
        return args.func(args)
    with contextlib.redirect_stdout(sys.stderr):
        return args.func(args)


# ---------------------------------------------------------------------- shared options
def _model_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    help_text = "hub name or local folder" + ("" if required else " (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--model", required=required, default=None, help=help_text)


def _encoder_args(p: argparse.ArgumentParser) -> None:
    """--model and --pooling: what `_load_encoder` reads."""
    _model_arg(p)
    p.add_argument("--pooling", default=None, help="override the pooling (default: the model's saved pooling)")


def _load_encoder(args: argparse.Namespace) -> Any:
    from dictembed.encoder import Encoder
    from dictembed.paths import default_model

    return Encoder.load(args.model or default_model(), pooling=getattr(args, "pooling", None))


def _limit_arg(p: argparse.ArgumentParser, help_text: str) -> None:
    p.add_argument("--limit", type=_positive_int, default=None, metavar="N", help=f"{help_text} (default: all)")


def _wordnet_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wordnet-dir", default=None, help="WordNet database folder (default: the system's WordNet)")


def _run_args(p: argparse.ArgumentParser, epochs: int, batch_size: int) -> None:
    """--seeds, --epochs and --batch-size of a training command."""
    p.add_argument(
        "--seeds", type=_list_of(_natural), default="0", metavar="SEED,...", help="comma list of seeds, each trained"
    )
    p.add_argument("--epochs", type=_positive_int, default=epochs, help="training epochs")
    p.add_argument("--batch-size", type=_positive_int, default=batch_size, help="training batch size")


def _print_options(suppress: bool) -> argparse.ArgumentParser:
    """-v, -q and --json. Subcommands get them with SUPPRESS defaults, so a value given before the subcommand
    is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p = argparse.ArgumentParser(add_help=False)
    level = p.add_mutually_exclusive_group()
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
    p.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print the result as one JSON document on stdout, the table on stderr (default: a table on stdout)",
    )
    return p


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Appends "(default: ...)" to every option whose help does not already state its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.required or action.default in (None, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


_SUBCOMMAND_OPTIONS = _print_options(suppress=True)


def _command(group: Any, name: str, func: Handler, help_text: str) -> argparse.ArgumentParser:
    """A subcommand with the shared -v/-q/--json options and defaults shown in its help."""
    p = group.add_parser(
        name, help=help_text, description=help_text, formatter_class=_HelpFormatter, parents=[_SUBCOMMAND_OPTIONS]
    )
    p.set_defaults(func=func, parser=p)
    return p


def _group(sub: Any, name: str, help_text: str) -> Any:
    p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_HelpFormatter)
    return p.add_subparsers(dest="task", required=True, metavar="TASK")


# ----------------------------------------------------------------------------- train
# The preset-governed options: RunConfig field -> (flag, argparse keywords, help). Their parser default is
# None, resolved as preset value < explicit flag (dictembed.recipes.presets).
TRAIN_PRESET_OPTIONS: dict[str, tuple[str, dict[str, Any], str]] = {
    "pooling": ("--pooling", {"choices": ["cls", "mean", "max"]}, "pooling of the sentence vector"),
    "pooler": ("--pooler", {"choices": ["none", "model"]}, "apply the model's own dense pooler"),
    "space": (
        "--space",
        {"choices": ["auto", "mlm-head", "word-embeddings"]},
        "defsent entry space; auto falls back to word embeddings when the model has no MLM head",
    ),
    "entries": ("--entries", {"choices": ["ac", "amp"]}, "defsent-plus entries: average [CLS] or mean pooling"),
    "similarity": (
        "--similarity",
        {"choices": ["dot", "cosine"]},
        "defsent-plus entry logits: dot product (the paper) or cosine / --temperature",
    ),
    "temperature": ("--temperature", {"type": _positive_float}, "tau of cosine entry logits and of gr-bert"),
    "pst_steps": ("--pst-steps", {"type": _positive_int}, "defsent-plus progressive separate training steps"),
    "ica": ("--ica", {"choices": ["none", "last"]}, "defsent-plus: ICA-transform the last step's entry space"),
    "arch": ("--arch", {"choices": ["mt", "sc"]}, "gr-bert: one (mt) or two (sc) context encoders"),
    "gloss_weight": ("--gloss-weight", {"type": _non_negative_float}, "gr-bert: weight (lambda) of the gloss loss"),
    "lrs": (
        "--lr-grid",
        {"type": _list_of(_positive_float), "metavar": "LR,..."},
        "comma list of learning rates, each with every seed",
    ),
    "select_on": ("--select-on", {"choices": ["mrr", "stsb_dev"]}, "dev metric that selects lr and seed"),
    "dictionary": ("--dictionary", {}, "comma list: wordnet,gcide,oxford,chang,... or files"),
}


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=presets.METHODS, default=presets.DEFAULT_METHOD, help="training method")
    p.add_argument(
        "--preset",
        choices=presets.PRESETS,
        default=presets.DEFAULT_PRESET,
        help="paper: each paper's settings; best: the settings measured best on MiniLM (benchmarks/RESULTS.md). "
        "Options given explicitly override it",
    )
    _model_arg(p)
    for key, (flag, kwargs, text) in TRAIN_PRESET_OPTIONS.items():
        p.add_argument(flag, dest=key, default=None, help=f"{text} ({presets.default_help(key)})", **kwargs)
    _wordnet_dir_arg(p)
    _run_args(p, epochs=1, batch_size=16)
    _limit_arg(p, "train on a seeded sample of N examples")
    p.add_argument("--output", required=True, help="folder of the selected model")
    p.add_argument("--resume", action="store_true", help="continue interrupted runs from their checkpoints")


def resolve_train_settings(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The --preset settings of --method with the explicitly given options on top, and the keys these changed."""
    given = {key: getattr(args, key) for key in TRAIN_PRESET_OPTIONS}
    if refused := presets.not_settable(args.method, given):
        flags = ", ".join(TRAIN_PRESET_OPTIONS[key][0] for key in refused)
        raise UsageError(f"{flags}: not an option of --method {args.method}")
    return presets.resolve(args.method, args.preset, given)


def cmd_train(args: argparse.Namespace) -> Report:
    settings, overridden = resolve_train_settings(args)
    from dictembed.paths import default_model
    from dictembed.recipes.common import RunConfig

    config = RunConfig(
        method=args.method,
        preset=args.preset,
        model=args.model or default_model(),
        wordnet_dir=args.wordnet_dir,
        seeds=args.seeds,
        batch_size=args.batch_size,
        epochs=args.epochs,
        limit=args.limit,
        output=args.output,
        resume=args.resume,
        **settings,
    )
    changed = f" (set explicitly: {', '.join(overridden)})" if overridden else ""
    log.info("preset %s: %s%s", args.preset, presets.describe(settings), changed)
    log.info(
        "%s on %s: seeds=%s batch_size=%d epochs=%d limit=%s",
        args.method,
        config.model,
        config.seeds,
        config.batch_size,
        config.epochs,
        config.limit,
    )
    if args.method == "defsent":
        from dictembed.recipes.defsent import train_defsent as train
    elif args.method == "defsent-plus":
        from dictembed.recipes.defsent_plus import train_defsent_plus as train
    else:
        from dictembed.recipes.gr_bert import train_gr_bert as train
    path = train(config)
    saved = read_record(path, required=True)
    data = {
        "output": str(path),
        "preset": args.preset,
        "dev": saved.get("dev", {}),
        "config": saved.get("config", {}),
        "selection": saved.get("selection", {}),
    }
    return Report(data, f"saved {path}\n" + _table(data["dev"], "dev metrics of the selected model"))


# ---------------------------------------------------------------------------- encode
def read_sentences(path: Path) -> list[str]:
    """One sentence per line, split on "\\n" only (one trailing "\\r" stripped): one row per line, whatever
    other line-break characters (\\u2028, \\x0c, \\x85, ...) the sentences contain."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DictEmbedError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def save_array(path: Path, array: Any) -> None:
    """Write exactly `path`: .npy (np.save) or .npz (np.savez, key "embeddings")."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        if path.suffix == ".npz":
            np.savez(f, embeddings=array)
        else:
            np.save(f, array)


def cmd_encode(args: argparse.Namespace) -> Report:
    sentences = read_sentences(Path(args.input))
    vectors = _load_encoder(args).encode(
        sentences,
        batch_size=args.batch_size,
        show_progress_bar=args.log_level < logging.WARNING,
        normalize_embeddings=args.normalize,
        precision=args.precision,
    )
    save_array(args.output, vectors)
    rows, dim = vectors.shape
    data = {
        "output": str(args.output),
        "rows": rows,
        "dim": dim,
        "dtype": str(vectors.dtype),
        "precision": args.precision,
    }
    return Report(data, f"wrote {rows} x {dim} {args.precision} embeddings to {args.output}")


# --------------------------------------------------------------------------- predict
def cmd_predict(args: argparse.Namespace) -> Report:
    from dictembed.reverse_dictionary import ReverseDictionary

    ranked = ReverseDictionary.load(args.model).predict(args.definition, top_k=args.top_k)
    text = "\n".join(f"{rank:>3}  {word:<30} {prob:.4f}" for rank, (word, prob) in enumerate(ranked, 1))
    return Report([{"word": w, "probability": p} for w, p in ranked], text)


# -------------------------------------------------------------------------- evaluate
def cmd_eval_sts(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.sts import STS_TASKS, evaluate_sts

    _known(args.tasks, STS_TASKS, "--tasks")
    result = evaluate_sts(
        _load_encoder(args),
        tasks=args.tasks,
        aggregation=args.aggregation,
        per_subset=args.per_subset,
        whitening=args.whiten,
    )
    return Report(result, _table(result, f"STS (Spearman x 100, {args.aggregation})"))


def cmd_eval_senteval(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.senteval import SENTEVAL_TASKS, evaluate_senteval

    _known(args.tasks, SENTEVAL_TASKS, "--tasks")
    result = evaluate_senteval(_load_encoder(args), tasks=args.tasks)
    return Report(result, _table(result, "SentEval transfer (accuracy %)"))


def cmd_eval_reverse_dictionary(args: argparse.Namespace) -> Report:
    from dictembed.dictionary import load_dictionary, split_by_headword
    from dictembed.evaluation.reverse_dictionary import reverse_dictionary_metrics
    from dictembed.reverse_dictionary import ReverseDictionary

    config = read_record(args.model, required=True).get("config", {})
    reverse_dictionary = ReverseDictionary.load(args.model)
    dictionary = load_dictionary(args.dictionary or config.get("dictionary", "wordnet"), wordnet_dir=args.wordnet_dir)
    split = split_by_headword(dictionary, seed=config.get("split_seed", 0))[args.split]
    ranks = reverse_dictionary.ranks(split, limit=args.limit)
    result = {**reverse_dictionary_metrics(ranks), "n": int(len(ranks))}
    return Report(result, _table(result, f"reverse dictionary on the {args.split} headwords"))


def cmd_eval_lexsub(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.lexsub import evaluate_lexsub
    from dictembed.paths import default_model

    result = evaluate_lexsub(
        args.model or default_model(),
        dataset=args.dataset,
        post=[p.lstrip("+") for p in args.post],
        validation_model=args.validation_model,
        limit=args.limit,
        scoring=args.scoring,
        progress=args.log_level < logging.WARNING,
    )
    return Report(result, _table(result, f"{args.dataset} (x 100)"))


def cmd_eval_mteb(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.mteb import evaluate_mteb

    result = evaluate_mteb(_load_encoder(args), tasks=args.tasks, output_folder=args.output_folder)
    return Report(result, _table(result, "MTEB (main score x 100)"))


# ---------------------------------------------------------------------------- finetune
def cmd_finetune_stsb(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.sts_supervised import finetune_stsb_seeds
    from dictembed.paths import default_model

    result = finetune_stsb_seeds(
        args.model or default_model(),
        ratio=args.ratio,
        seeds=args.seeds,
        epochs=args.epochs,
        batch_size=args.batch_size,
        pooling=args.pooling,
        output_dir=args.output,
        limit=args.limit,
    )
    summary = {
        "ratio": args.ratio,
        "test_mean": result["mean"],
        "test_sd": result["sd"],
        "dev_mean": result["dev_mean"],
        "dev_sd": result["dev_sd"],
    }
    return Report(result, _table(summary, f"supervised STS-B, {len(args.seeds)} seed(s), Spearman x 100"))


# ------------------------------------------------------------------------------ data
def cmd_data_stats(args: argparse.Namespace) -> Report:
    from transformers import AutoTokenizer

    from dictembed.dictionary import dictionary_stats, format_stats_table, load_dictionary, split_by_headword
    from dictembed.encoder import load_pretrained
    from dictembed.paths import default_model

    dictionary = load_dictionary(args.dictionary, wordnet_dir=args.wordnet_dir)
    tokenizer = load_pretrained(AutoTokenizer, args.model or default_model())
    rows = dictionary_stats(split_by_headword(dictionary, seed=args.split_seed), tokenizer)
    return Report({"dictionary": args.dictionary, "splits": rows}, format_stats_table(rows))


# ------------------------------------------------------------------------------ plot
def cmd_plot_entries(args: argparse.Namespace) -> Report:
    from dictembed.extras import require

    require("plot", "matplotlib.figure")  # before any work: a missing extra is a one-line hint
    from dictembed.entry_space import EntrySpace
    from dictembed.geometry import isotropy_metrics, plot_entry_spaces, plot_isotropy

    paths: list[tuple[str, Path]] = []
    for model in args.model:
        history = read_record(model, required=True).get("selection", {}).get("pst", [])
        if history and not args.final_only:
            paths += [(f"{Path(model).name} step {h['step']}", Path(h["path"])) for h in history]
        else:
            paths.append((Path(model).name, Path(model)))
    spaces = {name: EntrySpace.load(path).vectors() for name, path in paths}
    written = plot_entry_spaces(spaces, args.output)
    written.append(plot_isotropy({n: isotropy_metrics(m, sample=200_000) for n, m in spaces.items()}, args.output))
    return Report({"written": [str(p) for p in written]}, "\n".join(f"wrote {p}" for p in written))


# ------------------------------------------------------------------------------ push
def cmd_push(args: argparse.Namespace) -> Report:
    from dictembed.hub import push_model

    files = push_model(args.model, args.repo, private=args.private, dry_run=args.dry_run)
    verb = "would upload" if args.dry_run else "uploaded"
    data = {"repo": args.repo, "private": args.private, "dry_run": args.dry_run, "files": list(files)}
    return Report(data, "\n".join([f"{verb} {len(files)} file(s) to {args.repo}", *(f"  {f}" for f in files)]))


# ------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dictembed",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
        parents=[_print_options(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"dictembed {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _train_args(_command(sub, "train", cmd_train, "train DefSent, DefSent+ or GR-BERT"))

    p = _command(sub, "encode", cmd_encode, "encode one sentence per line to a .npy or .npz matrix")
    _encoder_args(p)
    p.add_argument("--input", required=True, help="UTF-8 text, one sentence per line")
    p.add_argument("--output", type=_array_path, required=True, help="the .npy or .npz file to write")
    p.add_argument("--batch-size", type=_positive_int, default=32, help="sentences per forward pass")
    p.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    p.add_argument("--precision", choices=PRECISIONS, default="float32", help="quantise the embeddings")

    p = _command(sub, "predict", cmd_predict, "reverse dictionary: rank entries for a definition")
    _model_arg(p, required=True)
    p.add_argument("definition", help="the definition to look up")
    p.add_argument("--top-k", type=_positive_int, default=10, help="how many entries to list")

    ev = _group(sub, "evaluate", "evaluate a model")
    p = _command(ev, "sts", cmd_eval_sts, "unsupervised STS12-16, STS-B, SICK-R")
    _encoder_args(p)
    p.add_argument("--tasks", type=_names, default=None, help="comma list, e.g. STS12,STSB (default: all seven)")
    p.add_argument("--aggregation", choices=["all", "mean", "wmean"], default="all", help="STS12-16 subsets")
    p.add_argument("--per-subset", action="store_true", help="also report every STS12-16 subset")
    p.add_argument("--whiten", action="store_true", help="BERT-whitening fitted on each task's sentences")
    p = _command(ev, "senteval", cmd_eval_senteval, "SentEval transfer tasks")
    _encoder_args(p)
    p.add_argument("--tasks", type=_names, default=None, help="comma list (default: all seven)")
    p = _command(ev, "reverse-dictionary", cmd_eval_reverse_dictionary, "MRR and top-1/3/10 on held-out headwords")
    _model_arg(p, required=True)
    p.add_argument("--dictionary", default=None, help="default: the dictionary the model was trained on")
    _wordnet_dir_arg(p)
    p.add_argument("--split", choices=["train", "dev", "test"], default="test", help="which headwords")
    _limit_arg(p, "rank the first N definitions")
    p = _command(ev, "lexsub", cmd_eval_lexsub, "lexical substitution: LS07 (all) or the CoInCo trial split")
    _model_arg(p)
    p.add_argument("--dataset", choices=["LS07", "CoInCo"], default="LS07", help="benchmark")
    p.add_argument(
        "--post", nargs="*", default=[], choices=["+emb", "+valid", "emb", "valid"], help="post-processing steps"
    )
    p.add_argument("--validation-model", default=None, help="for +valid (default: the model itself)")
    p.add_argument(
        "--scoring",
        choices=["auto", "head", "embeddings"],
        default="auto",
        help="p(x|s) from the MLM head, or h . E^T (auto: the head when the model has one)",
    )
    _limit_arg(p, "the first N instances")
    p = _command(ev, "mteb", cmd_eval_mteb, "MTEB tasks through the mteb package")
    _encoder_args(p)
    p.add_argument("--tasks", type=_names, required=True, help="comma list of MTEB task names, e.g. STSBenchmark")
    p.add_argument("--output-folder", default=None, help="folder for mteb's result files (default: none written)")

    ft = _group(sub, "finetune", "supervised fine-tuning")
    p = _command(ft, "stsb", cmd_finetune_stsb, "siamese cosine regression on STS-B train, test Spearman mean ± sd")
    _model_arg(p)
    p.add_argument("--ratio", type=_fraction, default=1.0, help="fraction of STS-B train: 1.0, 0.5, 0.2")
    _run_args(p, epochs=4, batch_size=16)
    p.add_argument("--pooling", choices=["cls", "mean", "max"], default="mean", help="pooling")
    _limit_arg(p, "the first N training pairs")
    p.add_argument("--output", default=None, help="keep the fine-tuned models here, one folder a seed (default: none)")

    data = _group(sub, "data", "dictionary data")
    p = _command(data, "stats", cmd_data_stats, "words, definitions and lengths per split (DefSent Table 1)")
    p.add_argument("--dictionary", default="wordnet", help="comma list of dictionaries or files")
    _wordnet_dir_arg(p)
    p.add_argument("--split-seed", type=_natural, default=0, help="seed of the 8:1:1 split by headword")
    _model_arg(p)

    plot = _group(sub, "plot", "figures")
    p = _command(plot, "entries", cmd_plot_entries, "2-D SVD / whitened PCA of entry spaces across PST steps")
    p.add_argument("--model", nargs="+", required=True, help="saved model folder(s)")
    p.add_argument("--final-only", action="store_true", help="plot only the saved model, not every PST step")
    p.add_argument("--output", required=True, help="folder for the figures")

    p = _command(sub, "push", cmd_push, "upload a saved model folder to the Hugging Face Hub")
    p.add_argument("--model", required=True, help="saved model folder")
    p.add_argument("--repo", type=_repo_id, required=True, help="Hub repository id, user/name")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--dry-run", action="store_true", help="list the files that would be uploaded, upload nothing")
    return parser


def _configure_logging(level: int) -> None:
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _error_message(err: BaseException) -> str:
    """One line for a runtime error; file errors name the file."""
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, UnicodeDecodeError):
        return f"input is not {err.encoding} text ({err.reason} at byte {err.start})"
    return " ".join(str(err).split()) or type(err).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, 1 runtime error, 2 usage error, 130 interrupted)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # argparse: --help, --version and usage errors
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    _configure_logging(args.log_level)
    try:
        report = _run(args)
    except UsageError as err:
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = " (train again with --resume to continue)" if args.command == "train" else ""
        print(f"dictembed: interrupted{hint}", file=sys.stderr)
        return 130
    except (DictEmbedError, FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        print(f"dictembed: error: {_error_message(err)}", file=sys.stderr)
        return 1
    _emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
