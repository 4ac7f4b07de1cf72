"""What a command reports and how it is printed: a table on stdout, or with --json one JSON document."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Report:
    """What a command reports: `data` is printed as JSON with --json, `text` is for people."""

    data: Any
    text: str


Handler = Callable[[argparse.Namespace], Report]
# A command's checks of its arguments, run before logging is set up and before its handler: they import nothing
# that imports torch, so a bad argument (a missing input, an existing output, a model path that is not there) is
# one line at once, not after the model has loaded. A check may hand what it read on to the handler in `args`.
Check = Callable[[argparse.Namespace], None]


class UsageError(Exception):
    """Arguments that parse but do not fit together (exit 2, like argparse's own errors)."""


def table(result: dict[str, Any], title: str) -> str:
    """A title and one aligned `key  value` line per entry (floats with two decimals)."""
    width = max((len(k) for k in result), default=0)
    lines = [title]
    for key, value in result.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        lines.append(f"  {key:<{width}}  {shown}")
    return "\n".join(lines)


def strict_json(value: Any) -> Any:
    """`value` as strict JSON data: numpy scalars and arrays as Python values, NaN and infinities as null."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def emit(report: Report, as_json: bool) -> None:
    """The one place results are printed: the table on stdout, or with --json the JSON on stdout and the table
    on stderr."""
    if as_json:
        if report.text:
            print(report.text, file=sys.stderr)
        print(json.dumps(strict_json(report.data), default=str))
    elif report.text:
        print(report.text)


def run_command(args: argparse.Namespace) -> Report:
    """Run the command; with --json anything it prints lands on stderr, so stdout stays one JSON document."""
    if not args.json:
        return args.func(args)
    with contextlib.redirect_stdout(sys.stderr):
        return args.func(args)
