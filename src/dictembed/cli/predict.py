"""`dictembed predict` (the words for a description) and `dictembed serve` (the same as a web page and API)."""

from __future__ import annotations

import argparse
import logging
import unicodedata
from pathlib import Path
from typing import Any, cast

from dictembed.cli.encode import read_input
from dictembed.cli.options import (
    add_command,
    add_device,
    add_dictionary,
    add_encoding,
    add_model,
    add_pos,
    add_ranking,
    add_top_k,
    add_words,
    check_model,
    input_file,
    port,
    positive_int,
    ranking_of,
    weightless_refusal,
)
from dictembed.cli.report import Report, UsageError
from dictembed.errors import DictEmbedError
from dictembed.search_options import DEFAULT_MODE, FILTER_OPTIONS, SCRIPTS, SEARCH_MODES, Filters
from dictembed.text_files import ENCODING_ADVICE, UndecodableError
from dictembed.texts import is_blank

log = logging.getLogger(__name__)

COMMANDS = {
    "predict": "reverse dictionary: the words for a description (or a file of them)",
    "serve": "serve the reverse dictionary: a web page and a JSON API",
}


def register(subparsers: Any) -> None:
    """`predict` and `serve`."""
    p, (shared, _) = add_command(subparsers, "predict", run_predict, COMMANDS["predict"], check=check_predict)
    p.add_argument("definition", nargs="?", default=None, help="the definition to look up (or --input)")
    p.add_argument(
        "--input",
        type=input_file,
        default=None,
        help="text, one description per line (split on \\n or \\r\\n; a lone \\r is refused); --json gives a list "
        "of {line, query, entry, results} (default: none)",
    )
    add_encoding(p, None, "encoding of the --input file (default: utf-8)")
    add_top_k(p)
    add_pos(p)
    p.add_argument(
        "--pattern", default=None, help="only words matching a prefix (g), glob (gir*) or /regex/ (default: any)"
    )
    add_words(p)
    p.add_argument(
        "--length",
        type=positive_int,
        default=None,
        help="only words of exactly this many letters (default: any length)",
    )
    p.add_argument(
        "--min-length",
        type=positive_int,
        default=None,
        help="only words of at least this many letters (default: no minimum)",
    )
    p.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="only words of at most this many letters (default: no maximum)",
    )
    p.add_argument("--initial", default=None, help="only words starting with these letters (default: any)")
    p.add_argument(
        "--pinyin",
        default=None,
        help="only Chinese words whose syllables start with these letters in order, sc for 使出; needs "
        "dictembed[zh] (default: any)",
    )
    p.add_argument(
        "--script",
        choices=SCRIPTS,
        default="any",
        help="only words written in CJK characters (cjk: the Chinese of a merged dictionary) or in Latin letters "
        "(latin: its English) (default: any)",
    )
    p.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        default=DEFAULT_MODE,
        help="describe: the query is a description; similar: the query is an entry, list its near-synonyms (then "
        "the antonyms they leave out); "
        f"auto: similar when the query is an entry, else describe (default: {DEFAULT_MODE}, as on the web page)",
    )
    add_ranking(p)
    add_served_dictionary(p)
    add_model(shared, required=True)
    add_device(shared)

    p, (shared, _) = add_command(subparsers, "serve", run_serve, COMMANDS["serve"], check=check_serve)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=port, default=8000, help="port to listen on")
    add_ranking(p)
    add_served_dictionary(p)
    p.add_argument(
        "--no-centring",
        dest="centring",
        action="store_false",
        help="with several --model, search a description in another language than the dictionary's as it is, not "
        "centred per language (default: centred)",
    )
    serve_help = "a model folder with its entry space (train, index), a hub name or a prepared offline model; repeat "
    serve_help += "it to serve several dictionaries (one a folder), the first the default"
    add_model(shared, required=True, help_text=serve_help, repeat=True)
    add_device(shared)


def add_served_dictionary(p: argparse.ArgumentParser) -> None:
    """`--dictionary`: the definitions a search shows, in place of the model folder's own."""
    add_dictionary(
        p,
        None,
        "the dictionary whose definitions results show (a name such as wordnet, or a file), in place of the model "
        "folder's own definitions.jsonl; the only way to use a dictionary file outside the folder "
        "(default: the folder's own)",
    )


def result_rows(results: list[Any]) -> list[dict[str, Any]]:
    """Search results as JSON rows; `word` (the first of `words`) keeps earlier readers of `predict --json`."""
    return [{"word": r.words[0], **r.to_dict()} for r in results]


def display_width(text: str) -> int:
    """The columns `text` takes in a terminal: two for each wide or fullwidth character (Chinese, Japanese)."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


WORDS_WIDTH = 36  # the columns of the table's words


def column_words(words: list[str], width: int = WORDS_WIDTH) -> str:
    """`words` joined by commas in at most `width` columns: those that fit, then `+N` for the N left out (the
    first word always, cut with an ellipsis if it alone is wider)."""
    if not words:
        return ""
    for shown in range(len(words), 0, -1):
        left = len(words) - shown
        text = ", ".join(words[:shown]) + (f", +{left}" if left else "")
        if display_width(text) <= width or shown == 1:
            break
    if display_width(text) > width:  # one word wider than the column
        suffix = f", +{left}" if left else ""
        head = words[0]
        while head and display_width(head) + 1 + len(suffix) > width:
            head = head[:-1]
        text = head + "…" + suffix
    return text


def results_table(results: list[Any], entry: str | None = None, opposites: list[str] | None = None) -> str:
    """One line a result: rank, words (as many as the column holds, `column_words`), score and its first
    definition, the sense that matched the description (`ReverseDictionary.search`; after `words like ENTRY:` for
    an entry's near-synonyms, and before a last line of the `opposites` left out of them, if any); `--json` lists
    every word."""
    lines = [] if entry is None else [f"words like {entry}:"]
    for rank, r in enumerate(results, 1):
        gloss = next((defs[0] for defs in r.definitions.values() if defs), "")
        words = column_words(r.words)
        padding = " " * max(WORDS_WIDTH - display_width(words), 0)  # Chinese characters take two columns
        lines.append(f"{rank:>3}  {words}{padding} {r.score:.4f}  {gloss[:70]}".rstrip())
    if not results:
        lines.append("  (no results)")
    if opposites:
        lines.append(f"opposites, left out: {', '.join(opposites)}")
    return "\n".join(lines)


def served_hint(command: str) -> str:
    """What to do with a dictionary or model file of `predict` or `serve` that is not UTF-8: they read it as UTF-8,
    with no --encoding of its own (`UndecodableError.hinted`)."""
    own = ": its --encoding is that of --input" if command == "predict" else ""
    return f"convert the file to UTF-8 ({command} reads it as UTF-8{own})"


def check_served(args: argparse.Namespace) -> None:
    """The --model (one, or each of several) and --dictionary of `predict` and `serve`, checked before anything
    loads."""
    from dictembed.dictionary.load import check_sources

    for model in args.model if isinstance(args.model, list) else [args.model]:
        check_model(model)
        check_weightless(model, args.device, args.precision)
    if args.dictionary is not None:
        check_sources(args.dictionary)


def check_weightless(model: str, device: str | None, precision: str | None) -> None:
    """Refuse, before anything loads, a --device or --precision that a local weightless export (its graph alone, on
    ONNX Runtime on the CPU) cannot run: the torch weights the choice needs are not there."""
    from dictembed.model_folder import ModelFolder, weightless_export_graph

    if not Path(model).is_dir() or weightless_export_graph(Path(model)) is None:
        return
    for name, value, fits in (
        ("device", device, device in (None, "auto", "cpu")),
        ("precision", precision, precision in (None, "auto", "fp32")),
    ):
        if not fits:
            raise weightless_refusal(f"--{name} {value}", ModelFolder.open(model))


def check_serve(args: argparse.Namespace) -> None:
    """The host and port `serve` listens on (`serve.check_port`), then its --model (--dictionary with one only) and
    --dictionary."""
    from dictembed.serve import check_port

    if args.dictionary is not None and len(args.model) > 1:
        raise UsageError("--dictionary replaces the definitions of one model folder; serve several without it")
    check_port(args.host, args.port)
    check_served(args)


def check_predict(args: argparse.Namespace) -> None:
    """One definition or --input (--encoding only with it), filters that fit together (`args.filters`), the queries
    (`args.queries`: --input read here, once, `read_input`), then the --model and --dictionary (`check_served`)."""
    if (args.definition is None) == (args.input is None):
        raise UsageError("give either one definition or --input FILE")
    if args.encoding is not None and args.input is None:
        raise UsageError("--encoding is that of the --input file: give --input FILE, or leave --encoding out")
    options = {name: getattr(args, name) for name in FILTER_OPTIONS}
    try:
        args.filters = Filters.of(**options)
    except DictEmbedError as err:
        given = [name for name in FILTER_OPTIONS if not Filters.none_asked({name: options[name]})] or FILTER_OPTIONS
        message = str(err)
        named = message.split(":", 1)[0]
        message = message[len(named) + 2 :] if named in FILTER_OPTIONS else message  # the option names it instead
        raise UsageError(f"{'/'.join('--' + name.replace('_', '-') for name in given)}: {message}") from None
    if args.input is None:
        args.queries, args.lines = [args.definition], [0]
    else:
        lines = list(enumerate(read_input(args.input, args.encoding or "utf-8", ENCODING_ADVICE), 1))
        kept = [(number, q) for number, q in lines if not is_blank(q)]
        if not kept:
            raise DictEmbedError(f"{args.input}: no queries (one description per line)")
        if blank := [number for number, q in lines if is_blank(q)]:
            shown = ", ".join(map(str, blank[:5])) + (", ..." if len(blank) > 5 else "")
            log.warning("%s: %d blank line(s) skipped (line %s)", args.input, len(blank), shown)
        args.lines, args.queries = [number for number, _ in kept], [q for _, q in kept]
    check_served(args)


def run_predict(args: argparse.Namespace) -> Report:
    """`predict`: a dictionary file that is not UTF-8 (its --input was read by `check_predict`) is an error whose hint
    names no option `predict` lacks (`served_hint`)."""
    try:
        return predict(args)
    except UndecodableError as err:
        raise err.hinted(served_hint("predict")) from None


def predict(args: argparse.Namespace) -> Report:
    """The results of `predict`'s queries, as JSON rows and a table."""
    from dictembed.query_encoder import UnreadableQueryError
    from dictembed.reverse_dictionary import ReverseDictionary

    queries, filters = args.queries, args.filters  # read and checked by check_predict
    rd = ReverseDictionary.load(args.model, args.device, args.precision, ranking_of(args), dictionary=args.dictionary)
    entries = [similar_entry(rd, q, args.mode, args.input, line) for q, line in zip(queries, args.lines, strict=True)]
    descriptions = [q for q, e in zip(queries, entries, strict=True) if e is None]
    try:
        described = iter(rd.search_many(descriptions, args.top_k, filters) if descriptions else [])
    except UnreadableQueryError as err:
        if args.input is None:
            raise
        lines = [line for line, e in zip(args.lines, entries, strict=True) if e is None]  # by its place in the file
        raise err.named(f"{args.input}:{lines[err.index]}") from None
    answers = [None if e is None else rd.similar_words(e, args.top_k, filters) for e in entries]
    found = [next(described) if a is None else a.results for a in answers]
    opposites = [[] if a is None else a.opposites for a in answers]
    if args.input is None:
        return Report(result_rows(found[0]), results_table(found[0], entries[0], opposites[0]))
    rows = list(zip(queries, entries, found, opposites, strict=True))
    data = [
        {"line": line, "query": q, "entry": e, "opposites": o, "results": result_rows(results)}
        for line, (q, e, results, o) in zip(args.lines, rows, strict=True)
    ]
    return Report(data, "\n\n".join(f"{query_heading(q)}\n{results_table(r, e, o)}" for q, e, r, o in rows))


QUERY_WIDTH = 120  # the columns of a query's heading above its results (--json keeps it whole)


def query_heading(query: str, width: int = QUERY_WIDTH) -> str:
    """`query` as the heading of its results: whole when it fits `width` columns, else cut with an ellipsis and
    its length in characters."""
    if display_width(query) <= width:
        return query
    note = f"… ({len(query):,} characters)"
    head = query[: width - len(note)]
    while display_width(head) + len(note) > width:
        head = head[:-1]
    return head.rstrip() + note


def similar_entry(rd: Any, query: str, mode: str, input_file: str | None, line: int) -> str | None:
    """`ReverseDictionary.similar_entry`, its error naming the --input file and line of the query."""
    try:
        return cast(str | None, rd.similar_entry(query, mode))
    except DictEmbedError as err:
        raise DictEmbedError(err if input_file is None else f"{input_file}:{line}: {err}") from None


def run_serve(args: argparse.Namespace) -> Report:
    from dictembed.serve import run_server

    models = args.model  # one or more: --model repeated
    try:
        run_server(
            models,
            host=args.host,
            port=args.port,
            device=args.device,
            precision=args.precision,
            ranking=ranking_of(args),
            dictionary=args.dictionary,
            centring=args.centring,
        )
    except UndecodableError as err:  # a dictionary file that is not UTF-8: no --encoding to suggest
        raise err.hinted(served_hint("serve")) from None
    model = models[0] if len(models) == 1 else models  # one folder: reported as before
    return Report({"model": model, "host": args.host, "port": args.port}, "server stopped")
