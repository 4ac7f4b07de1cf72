"""`dictembed` command line: train | encode | predict | evaluate | finetune | data | plot | push | serve | cache.

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
from dictembed.io import text_encoding
from dictembed.recipes import presets
from dictembed.record import RunRecord

log = logging.getLogger("dictembed")

QUANTIZATIONS = ("int8", "uint8", "binary", "ubinary")  # Encoder.encode(precision=...) / sentence-transformers
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


def _device_args(p: argparse.ArgumentParser) -> None:
    """--device and --precision (compute) of a command that loads a model."""
    from dictembed.devices import COMPUTE_PRECISIONS, DEVICE_HELP, PRECISION_HELP

    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--precision", choices=COMPUTE_PRECISIONS, default="auto", help=PRECISION_HELP)


def _encoder_args(p: argparse.ArgumentParser) -> None:
    """--model, --pooling, --device and --precision: what `_load_encoder` reads."""
    _model_arg(p)
    p.add_argument("--pooling", default=None, help="override the pooling (default: the model's saved pooling)")
    _device_args(p)


def _load_encoder(args: argparse.Namespace) -> Any:
    """The encoder on --device with --precision as its compute precision (`Encoder.autocast`); --backend onnx
    (where the command has it) runs the backbone with ONNX Runtime on the CPU."""
    from dictembed.devices import loader_device
    from dictembed.encoder import Encoder
    from dictembed.paths import default_model

    device = loader_device(getattr(args, "device", "auto"))
    encoder = Encoder.load(
        args.model or default_model(),
        pooling=getattr(args, "pooling", None),
        device=device,
        backend=getattr(args, "backend", None),
    )
    return encoder.set_precision(getattr(args, "precision", "auto"))


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
# Flags whose name is not the option's own.
FLAG_NAMES = {"lrs": "--lr-grid"}


def _option_type(f: Any) -> dict[str, Any]:
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
        "int": _positive_int if positive else _natural,
        "float": _positive_float if positive else _non_negative_float,
    }
    for name, parse in number.items():
        if kind.startswith(f"list[{name}]"):
            return {"type": _list_of(parse), "metadata": f"{name.upper()},..."}
        if kind.startswith(name):
            return {"type": parse}
    return {}


def train_options() -> dict[str, Any]:
    """Every command-line option of `train`: the shared RunConfig fields, then each method's own (a name
    two methods share is defined by the first)."""
    from dataclasses import fields

    from dictembed.recipes.config import RunConfig
    from dictembed.recipes.registry import get_recipe

    options = {f.name: f for f in fields(RunConfig) if f.metadata.get("cli", True)}
    for method in presets.METHODS:
        for f in fields(get_recipe(method).options):
            options.setdefault(f.name, f)
    return options


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=presets.METHODS, default=None, help="training method (default: defsent-plus)")
    p.add_argument(
        "--preset",
        choices=presets.PRESETS,
        default=presets.DEFAULT_PRESET,
        help="paper: each paper's settings; best: the settings measured best on MiniLM (benchmarks/RESULTS.md). "
        "Options given explicitly override it",
    )
    p.add_argument(
        "--config",
        default=None,
        help="re-run the configuration saved in this dictembed.json or model folder (default: none)",
    )
    governed = set(presets.preset_settings(presets.DEFAULT_METHOD, "paper"))
    for method in presets.METHODS:
        governed |= set(presets.preset_settings(method, "paper"))
    for name, f in train_options().items():
        keywords = _option_type(f)
        metavar = keywords.pop("metadata", None)
        text = f.metadata["help"]
        if name in governed:
            text += f" ({presets.default_help(name)})"
        elif "default" not in text:
            text += f" (default: {f.default_factory() if callable(f.default_factory) else f.default})"
        flag = FLAG_NAMES.get(name, "--" + name.replace("_", "-"))
        p.add_argument(flag, dest=name, default=None, metavar=metavar, help=text, **keywords)
    p.add_argument("--output", required=True, help="folder of the selected model")
    p.add_argument("--overwrite", action="store_true", help="replace a model already in --output")
    p.add_argument("--resume", action="store_true", help="continue interrupted runs from their checkpoints")


def resolve_train_config(args: argparse.Namespace) -> Any:
    """The run configuration: a saved one (--config) or the --preset's settings of --method, with the options
    given explicitly on top."""
    from dictembed.errors import DictEmbedError
    from dictembed.recipes.config import RunConfig
    from dictembed.record import RunRecord

    given = {name: getattr(args, name) for name in train_options() if getattr(args, name) is not None}
    if args.config:
        folder = Path(args.config).parent if Path(args.config).is_file() else Path(args.config)
        saved = RunConfig.from_dict(RunRecord.load(folder, required=True).config)
        if args.method not in (None, saved.method):
            raise UsageError(f"--method {args.method} differs from the saved configuration's {saved.method}")
        method, preset, settings = saved.method, saved.preset, {**saved.flat(), **given}
        for key in ("output", "resume", "overwrite", "preset", "device"):  # the device is this machine's choice
            settings.pop(key, None)
    else:
        method, preset = args.method or presets.DEFAULT_METHOD, args.preset
        if refused := presets.not_settable(method, given):
            flags = ", ".join(FLAG_NAMES.get(k, "--" + k.replace("_", "-")) for k in refused)
            raise UsageError(f"{flags}: not an option of --method {method}")
        settings, overridden = presets.resolve(method, preset, given)
        changed = f" (set explicitly: {', '.join(overridden)})" if overridden else ""
        log.info("preset %s: %s%s", preset, presets.describe(settings), changed)
    try:
        return RunConfig.create(
            method, preset=preset, output=args.output, resume=args.resume, overwrite=args.overwrite, **settings
        )
    except DictEmbedError as err:
        raise UsageError(str(err)) from None


def cmd_train(args: argparse.Namespace) -> Report:
    from dictembed.recipes.run import train
    from dictembed.record import RunRecord

    config = resolve_train_config(args)
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
    saved = RunRecord.load(path, required=True)
    data = {
        "output": str(path),
        "preset": config.preset,
        "dev": saved.dev,
        "config": saved.config,
        "selection": saved.selection,
    }
    return Report(data, f"saved {path}\n" + _table(data["dev"], "dev metrics of the selected model"))


# ---------------------------------------------------------------------------- encode
def read_sentences(path: Path, encoding: str = "utf-8") -> list[str]:
    """One sentence per line, split on "\\n" only (one trailing "\\r" stripped): one row per line, whatever
    other line-break characters (\\u2028, \\x0c, \\x85, ...) the sentences contain (`dictembed.io.read_lines`:
    a missing file, a folder or bytes that are not `encoding` are a one-line error naming file:line)."""
    from dictembed.io import read_lines

    return read_lines(path, encoding)


def save_array(path: Path, array: Any) -> None:
    """Write exactly `path`: .npy (np.save) or .npz (np.savez, key "embeddings")."""
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        if path.suffix == ".npz":
            np.savez(f, embeddings=array)
        else:
            np.save(f, array)


def _encode_streamed(args: argparse.Namespace) -> Report:
    """`encode` to .npy: chunk by chunk into a memory map, resumable after a kill (`dictembed.streaming`)."""
    from dictembed.streaming import encode_to_npy

    encoder = _load_encoder(args)
    quantize = args.quantize or "float32"
    done = encode_to_npy(
        encoder,
        Path(args.input),
        args.output,
        encoding=args.encoding,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        normalize=args.normalize,
        quantize=quantize,
        show_progress=args.log_level < logging.WARNING,
    )
    rows, dim = done["rows"], done["dim"]
    data = {
        "output": str(args.output),
        "rows": rows,
        "dim": dim,
        "dtype": done["dtype"],
        "quantize": quantize,
        "precision": encoder.compute_precision,
        "device": str(encoder.device),
        "resumed_from": done["resumed_from"],
    }
    return Report(data, f"wrote {rows} x {dim} {quantize} embeddings to {args.output}")


def cmd_encode(args: argparse.Namespace) -> Report:
    from dictembed.streaming import STREAMABLE

    if args.output.exists() and not args.overwrite:
        raise DictEmbedError(f"--output {args.output} already exists; pass --overwrite to replace it")
    if args.output.suffix == ".npy" and (args.quantize or "float32") in STREAMABLE:
        return _encode_streamed(args)  # int8/uint8 calibrate over every row: encoded in memory below
    sentences = read_sentences(Path(args.input), args.encoding)
    encoder = _load_encoder(args)
    quantize = args.quantize or "float32"
    with encoder.autocast():
        vectors = encoder.encode(
            sentences,
            batch_size=args.batch_size,
            show_progress_bar=args.log_level < logging.WARNING,
            normalize_embeddings=args.normalize,
            precision=quantize,
        )
    save_array(args.output, vectors)
    rows, dim = vectors.shape
    data = {
        "output": str(args.output),
        "rows": rows,
        "dim": dim,
        "dtype": str(vectors.dtype),
        "quantize": quantize,
        "precision": encoder.compute_precision,
        "device": str(encoder.device),
        "backend": "onnx" if encoder.onnx_backbone is not None else "torch",
    }
    return Report(data, f"wrote {rows} x {dim} {quantize} embeddings to {args.output}")


def cmd_export(args: argparse.Namespace) -> Report:
    from dictembed.onnx_backend import export, exported_file
    from dictembed.paths import default_model

    output = Path(args.output)
    if output.exists() and not args.overwrite:
        raise DictEmbedError(f"--output {output} already exists; pass --overwrite to replace it")
    path = export(args.model or default_model(), output, quantize=args.quantize, optimize=not args.no_optimize)
    file, manifest = exported_file(path)
    data = {"output": str(path), "format": args.format, **manifest, "file": file.relative_to(path).as_posix()}
    size = file.stat().st_size / 1e6
    return Report(data, f"wrote {path} ({data['file']}, {size:.1f} MB, {args.quantize or 'fp32'})")


# --------------------------------------------------------------------------- predict
def _result_rows(results: list[Any]) -> list[dict[str, Any]]:
    """Search results as JSON rows; `word` (the first of `words`) keeps earlier readers of `predict --json`."""
    return [{"word": r.words[0], **r.to_dict()} for r in results]


def _results_table(results: list[Any]) -> str:
    """One line a result: rank, words, score and the first definition."""
    lines = []
    for rank, r in enumerate(results, 1):
        gloss = next((defs[0] for defs in r.definitions.values() if defs), "")
        lines.append(f"{rank:>3}  {', '.join(r.words):<36} {r.score:.4f}  {gloss[:70]}".rstrip())
    return "\n".join(lines) or "  (no results)"


def cmd_predict(args: argparse.Namespace) -> Report:
    from dictembed.reverse_dictionary import Filters, ReverseDictionary

    if (args.definition is None) == (args.input is None):
        raise UsageError("give either one definition or --input FILE")
    try:
        Filters(args.pos, args.pattern, args.words)
    except DictEmbedError as err:
        raise UsageError(f"--pos/--pattern/--words: {err}") from None
    queries = [args.definition] if args.input is None else [q for q in read_sentences(Path(args.input)) if q.strip()]
    if not queries:
        raise DictEmbedError(f"{args.input}: no queries (one definition per line)")
    found = ReverseDictionary.load(args.model, device=args.device, precision=args.precision).search_many(
        queries, k=args.top_k, pos=args.pos, pattern=args.pattern, words=args.words
    )
    if args.input is None:
        return Report(_result_rows(found[0]), _results_table(found[0]))
    pairs = list(zip(queries, found, strict=True))
    data = [{"query": q, "results": _result_rows(results)} for q, results in pairs]
    return Report(data, "\n\n".join(f"{q}\n{_results_table(results)}" for q, results in pairs))


# ----------------------------------------------------------------------------- serve
def cmd_serve(args: argparse.Namespace) -> Report:
    from dictembed.serve import run_server

    run_server(args.model, host=args.host, port=args.port, device=args.device, precision=args.precision)
    return Report({"model": args.model, "host": args.host, "port": args.port}, "server stopped")


# -------------------------------------------------------------------------- evaluate
def cmd_eval_sts(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.sts import STS_TASKS, evaluate_sts

    _known(args.tasks, STS_TASKS, "--tasks")
    encoder = _load_encoder(args)
    with encoder.autocast():
        result = evaluate_sts(
            encoder, tasks=args.tasks, aggregation=args.aggregation, per_subset=args.per_subset, whitening=args.whiten
        )
    return Report(result, _table(result, f"STS (Spearman x 100, {args.aggregation})"))


def cmd_eval_senteval(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.senteval import SENTEVAL_TASKS, evaluate_senteval

    _known(args.tasks, SENTEVAL_TASKS, "--tasks")
    encoder = _load_encoder(args)
    with encoder.autocast():
        result = evaluate_senteval(encoder, tasks=args.tasks, jobs=args.jobs)
    return Report(result, _table(result, "SentEval transfer (accuracy %)"))


def cmd_eval_reverse_dictionary(args: argparse.Namespace) -> Report:
    from dictembed.dictionary import load_dictionary, split_by_headword
    from dictembed.evaluation.ranking import reverse_dictionary_metrics
    from dictembed.reverse_dictionary import ReverseDictionary

    if args.queries or args.leave_one_out or args.baseline:
        return _eval_reverse_dictionary_leak_free(args)
    config = RunRecord.load(args.model, required=True).config
    reverse_dictionary = ReverseDictionary.load(args.model, device=args.device, precision=args.precision)
    dictionary = load_dictionary(
        args.dictionary or config.get("dictionary", "wordnet"),
        wordnet_dir=args.wordnet_dir or config.get("wordnet_dir"),
        encoding=args.encoding or config.get("encoding") or "utf-8",
        columns=None if args.dictionary else config.get("columns"),
    )
    split = split_by_headword(dictionary, seed=config.get("split_seed", 0))[args.split]
    ranks = reverse_dictionary.ranks(split, limit=args.limit)
    result = {**reverse_dictionary_metrics(ranks), "n": int(len(ranks))}
    return Report(result, _table(result, f"reverse dictionary on the {args.split} headwords"))


def _eval_reverse_dictionary_leak_free(args: argparse.Namespace) -> Report:
    """--queries (another dictionary's definitions), --leave-one-out (the split's own definitions, each
    left out of its gold entry), --baseline tfidf (TF-IDF instead of the model); see evaluation/leak_free."""
    from dictembed.dictionary import load_dictionary, split_by_headword
    from dictembed.entry_space import DefinitionSpace, EntrySpace
    from dictembed.evaluation import leak_free
    from dictembed.loading import resolve_model

    if bool(args.queries) == bool(args.leave_one_out):
        raise UsageError("give either --queries oxford|chang|FILE or --leave-one-out")
    folder = resolve_model(args.model)
    record = RunRecord.load(folder, required=True)
    config = record.config
    space = EntrySpace.load(folder)
    dictionary = None
    if args.leave_one_out or args.baseline:
        dictionary = load_dictionary(
            args.dictionary or config.get("dictionary", "wordnet"),
            wordnet_dir=args.wordnet_dir or config.get("wordnet_dir"),
            encoding=args.encoding or config.get("encoding") or "utf-8",
            columns=None if args.dictionary else config.get("columns"),
        )
    if args.queries:
        queries = leak_free.cross_dictionary_queries(
            space.words, load_dictionary(args.queries, encoding=args.encoding or "utf-8"), limit=args.limit
        )
        title = f"reverse dictionary: {args.queries} definitions against the model's entries"
    else:
        if not isinstance(space, DefinitionSpace):
            raise DictEmbedError(f"--leave-one-out needs a DefSent+ definition space, not {space.kind!r}")
        split = split_by_headword(dictionary, seed=config.get("split_seed", 0))[args.split]
        queries = leak_free.leave_one_out_queries(space, split, limit=args.limit)
        title = f"reverse dictionary, leave-one-out, on the {args.split} headwords"
    if not queries.definitions:
        raise DictEmbedError(f"no queries to score ({queries.kept} kept, {queries.dropped} dropped)")
    if args.baseline == "tfidf":
        ranks = leak_free.TfidfBaseline(space.words, dictionary).ranks(queries, leave_one_out=args.leave_one_out)
        title += " (TF-IDF baseline)"
    else:
        from dictembed.devices import loader_device
        from dictembed.encoder import Encoder

        encoder = Encoder.load(str(folder), device=loader_device(args.device)).set_precision(args.precision)
        if args.leave_one_out:
            entry_encoder = leak_free.load_entry_encoder(folder, record, args.device, args.precision)
            ranks = leak_free.leave_one_out_ranks(encoder, space, entry_encoder, queries)
        else:
            ranks = leak_free.model_ranks(encoder, space, queries)
    result = leak_free.summary(ranks, queries)
    return Report(result, _table(result, title))


def cmd_eval_lexsub(args: argparse.Namespace) -> Report:
    from dictembed.devices import autocast, resolve_device
    from dictembed.evaluation.lexsub import evaluate_lexsub
    from dictembed.paths import default_model

    device = resolve_device(args.device)
    with autocast(device, args.precision):
        result = evaluate_lexsub(
            args.model or default_model(),
            dataset=args.dataset,
            post=[p.lstrip("+") for p in args.post],
            validation_model=args.validation_model,
            limit=args.limit,
            scoring=args.scoring,
            progress=args.log_level < logging.WARNING,
            device=str(device),
        )
    return Report(result, _table(result, f"{args.dataset} (x 100)"))


def cmd_eval_mteb(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.mteb import evaluate_mteb

    encoder = _load_encoder(args)
    with encoder.autocast():
        result = evaluate_mteb(encoder, tasks=args.tasks, output_folder=args.output_folder)
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
        device=args.device,
        precision=args.precision,
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

    dictionary = load_dictionary(args.dictionary, wordnet_dir=args.wordnet_dir, encoding=args.encoding)
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
        history = RunRecord.load(model, required=True).selection.get("pst", [])
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


# ----------------------------------------------------------------------------- cache
CACHE_HELP = "$DICTEMBED_CACHE, else ~/.cache/dictembed"


def cmd_cache_list(args: argparse.Namespace) -> Report:
    from dictembed.cache import cache_folder, human_size, list_cache

    folder = cache_folder(args.cache_dir or None)
    spaces = list_cache(folder)
    lines = [f"{len(spaces)} cached entry space(s) in {folder}, {human_size(sum(s.size for s in spaces))}"]
    for space in spaces:
        row = space.to_dict()
        src = space.source
        built = ", ".join(
            f"{key} {src[key]}" for key in ("model", "dictionary", "entries", "ica", "entry_count") if key in src
        )
        lines.append(f"  {space.path.name}  {human_size(space.size):>9}  {row['modified']}  {built or '(no sidecar)'}")
    data = {"cache_dir": str(folder), "spaces": [s.to_dict() for s in spaces]}
    return Report(data, "\n".join(lines))


def cmd_cache_clear(args: argparse.Namespace) -> Report:
    from dictembed.cache import cache_folder, clear_cache, human_size, own_files

    folder = cache_folder(args.cache_dir or None)
    files = own_files(folder)
    total = sum(p.stat().st_size for p in files if p.exists())
    if files and not args.yes:
        what = f"{len(files)} file(s), {human_size(total)}, from {folder}"
        if not sys.stdin.isatty():
            raise UsageError(f"this removes {what}: pass --yes to confirm")
        print(f"remove {what}? [y/N] ", end="", file=sys.stderr, flush=True)
        if input().strip().lower() not in ("y", "yes"):
            return Report({"cache_dir": str(folder), "removed": [], "freed": 0}, "nothing removed")
    removed, freed = clear_cache(folder)
    data = {"cache_dir": str(folder), "removed": [str(p) for p in removed], "freed": freed}
    return Report(data, f"removed {len(removed)} file(s) from {folder}, freed {human_size(freed)}")


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
    p.add_argument("--input", required=True, help="text, one sentence per line (split on \\n only)")
    p.add_argument("--encoding", type=text_encoding, default="utf-8", help="encoding of --input")
    p.add_argument("--output", type=_array_path, required=True, help="the .npy or .npz file to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    p.add_argument("--batch-size", type=_positive_int, default=32, help="sentences per forward pass")
    p.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=10_000,
        help="lines read, encoded and saved at a time to a .npy (float32, binary, ubinary): a run killed "
        "midway continues after its last saved chunk when run again",
    )
    p.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    p.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default=None,
        help="quantise the embeddings (sentence-transformers' quantize_embeddings; default: none, float32)",
    )
    p.add_argument(
        "--backend",
        choices=["torch", "onnx"],
        default=None,
        help="run the backbone with torch or ONNX Runtime (CPU) (default: onnx for an exported folder, else torch)",
    )

    p = _command(sub, "export", cmd_export, "export a model for ONNX Runtime inference (optionally int8)")
    _model_arg(p)
    p.add_argument("--output", required=True, help="folder to write (the model's save plus onnx/)")
    p.add_argument("--format", choices=["onnx"], default="onnx", help="export format")
    p.add_argument("--quantize", choices=["int8"], default=None, help="dynamic int8 quantisation (default: fp32)")
    p.add_argument("--no-optimize", action="store_true", help="skip onnxruntime's attention/LayerNorm fusions")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")

    p = _command(sub, "predict", cmd_predict, "reverse dictionary: the words for a definition (or a file of them)")
    _model_arg(p, required=True)
    p.add_argument("definition", nargs="?", default=None, help="the definition to look up (or --input)")
    p.add_argument(
        "--input",
        default=None,
        help="UTF-8 text, one definition per line; --json gives a list of {query, results} (default: none)",
    )
    p.add_argument("--top-k", type=_positive_int, default=10, help="how many results to list")
    p.add_argument("--pos", default=None, help="only words of this part of speech: n, v, a, r (default: any)")
    p.add_argument(
        "--pattern", default=None, help="only words matching a prefix (g), glob (gir*) or /regex/ (default: any)"
    )
    p.add_argument("--words", choices=["any", "single", "phrase"], default="any", help="single words, phrases or any")
    _device_args(p)

    p = _command(sub, "serve", cmd_serve, "serve the reverse dictionary: a web page and a JSON API")
    _model_arg(p, required=True)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=_number(int, 0, strict=False, maximum=65535), default=8000, help="port to listen on")
    _device_args(p)

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
    p.add_argument("--jobs", type=int, default=1, help="processes fitting the classifiers' folds (-1: all cores)")
    p = _command(ev, "reverse-dictionary", cmd_eval_reverse_dictionary, "MRR and top-1/3/10 on held-out headwords")
    _model_arg(p, required=True)
    p.add_argument("--dictionary", default=None, help="default: the dictionary the model was trained on")
    p.add_argument(
        "--encoding", type=text_encoding, default=None, help="encoding of dictionary table files (default: as trained)"
    )
    _wordnet_dir_arg(p)
    p.add_argument("--split", choices=["train", "dev", "test"], default="test", help="which headwords")
    _limit_arg(p, "rank the first N definitions")
    p.add_argument(
        "--queries",
        default=None,
        metavar="oxford|chang|FILE",
        help="score ANOTHER dictionary's definitions against the model's entries (default: none)",
    )
    p.add_argument(
        "--leave-one-out",
        action="store_true",
        help="the split's own definitions, each left out of its gold entry (default: off)",
    )
    p.add_argument(
        "--baseline", choices=["tfidf"], default=None, help="TF-IDF of definitions instead of the model (default: none)"
    )
    _device_args(p)
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
    _device_args(p)
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
    _device_args(p)

    data = _group(sub, "data", "dictionary data")
    p = _command(data, "stats", cmd_data_stats, "words, definitions and lengths per split (DefSent Table 1)")
    p.add_argument("--dictionary", default="wordnet", help="comma list of dictionaries or files")
    p.add_argument("--encoding", type=text_encoding, default="utf-8", help="encoding of the dictionary files")
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

    cache = _group(sub, "cache", f"the entry-space cache ({CACHE_HELP})")
    for name, func, help_text in [
        ("list", cmd_cache_list, "the cached entry spaces: file, size, date and what built them"),
        ("clear", cmd_cache_clear, "remove the cached entry spaces (only files dictembed wrote)"),
    ]:
        p = _command(cache, name, func, help_text)
        p.add_argument("--cache-dir", default=None, help=f"the cache folder (default: {CACHE_HELP})")
    p.add_argument("--yes", action="store_true", help="remove without asking")
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
        hints = {"train": " (train again with --resume to continue)", "encode": " (a .npy continues when run again)"}
        hint = hints.get(args.command, "")
        print(f"dictembed: interrupted{hint}", file=sys.stderr)
        return 130
    except (DictEmbedError, FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        print(f"dictembed: error: {_error_message(err)}", file=sys.stderr)
        return 1
    from dictembed.devices import is_main_process

    if is_main_process():  # a distributed launch reports once
        _emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
