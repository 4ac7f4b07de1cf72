"""`dictembed predict` (the words for a definition) and `dictembed serve` (the same as a web page and API)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dictembed.cli.encode import read_sentences
from dictembed.cli.options import add_command, add_device, add_model, add_pos, add_top_k, add_words, port
from dictembed.cli.report import Report, UsageError
from dictembed.errors import DictEmbedError

COMMANDS = {
    "predict": "reverse dictionary: the words for a definition (or a file of them)",
    "serve": "serve the reverse dictionary: a web page and a JSON API",
}


def register(subparsers: Any) -> None:
    """`predict` and `serve`."""
    p, (shared, _) = add_command(subparsers, "predict", run_predict, COMMANDS["predict"])
    p.add_argument("definition", nargs="?", default=None, help="the definition to look up (or --input)")
    p.add_argument(
        "--input",
        default=None,
        help="UTF-8 text, one definition per line; --json gives a list of {query, results} (default: none)",
    )
    add_top_k(p)
    add_pos(p)
    p.add_argument(
        "--pattern", default=None, help="only words matching a prefix (g), glob (gir*) or /regex/ (default: any)"
    )
    add_words(p)
    add_model(shared, required=True)
    add_device(shared)

    p, (shared, _) = add_command(subparsers, "serve", run_serve, COMMANDS["serve"])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=port, default=8000, help="port to listen on")
    add_model(shared, required=True)
    add_device(shared)


def result_rows(results: list[Any]) -> list[dict[str, Any]]:
    """Search results as JSON rows; `word` (the first of `words`) keeps earlier readers of `predict --json`."""
    return [{"word": r.words[0], **r.to_dict()} for r in results]


def results_table(results: list[Any]) -> str:
    """One line a result: rank, words, score and the first definition."""
    lines = []
    for rank, r in enumerate(results, 1):
        gloss = next((defs[0] for defs in r.definitions.values() if defs), "")
        lines.append(f"{rank:>3}  {', '.join(r.words):<36} {r.score:.4f}  {gloss[:70]}".rstrip())
    return "\n".join(lines) or "  (no results)"


def run_predict(args: argparse.Namespace) -> Report:
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
        return Report(result_rows(found[0]), results_table(found[0]))
    pairs = list(zip(queries, found, strict=True))
    data = [{"query": q, "results": result_rows(results)} for q, results in pairs]
    return Report(data, "\n\n".join(f"{q}\n{results_table(results)}" for q, results in pairs))


def run_serve(args: argparse.Namespace) -> Report:
    from dictembed.serve import run_server

    run_server(args.model, host=args.host, port=args.port, device=args.device, precision=args.precision)
    return Report({"model": args.model, "host": args.host, "port": args.port}, "server stopped")
