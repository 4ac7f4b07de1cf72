"""`dictembed` commands: train | encode | export | index | distil | predict | serve | evaluate | finetune | head |
data | plot | dictionaries | push | cache | models.

Conventions: every command reports a result. Without --json it is a human-readable table on stdout; with
--json stdout is exactly one JSON document and the human-readable text goes to stderr. Logging always goes
to stderr. Exit status: 0 success, 1 runtime error, 2 usage error, 130 interrupted, 141 output pipe closed; an
error is one line `dictembed: error: ...` on stderr.

Layout: one module per command group (`train`, `encode`, `index`, `distil`, `predict`, `evaluate`, `finetune`, `head`,
`data`, `dictionaries`, `hub`, `cache`, `models`), each with `COMMANDS` (name -> one-line help), `register(subparsers)`
adding its parsers and options, and the `run_*` handlers beside them; `options` holds the options several commands
share, `report` the printing. Registration is lazy: `main` registers in full only the command its arguments name,
and every other command by name and help alone, so `dictembed --help` and `--version` import neither torch nor
transformers. For that reason the command modules import the torch-heavy parts of the package inside their handlers
(and `train`, whose options come from the recipes, inside its `register`), the one deliberate place for
function-local imports in the package. Before a handler runs, its command's `check` (given to `options.add_command`)
checks the arguments without importing torch: inputs that cannot be read, outputs that would be replaced, model
paths that are not there, options that do not fit together are refused at once, before logging is set up (which
imports transformers). `train`'s checks also run before its parser is built (`train.check_command_line`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import signal
import sys
import threading
from collections.abc import Iterable

from dictembed import __version__
from dictembed.cli import (
    cache,
    data,
    dictionaries,
    distil,
    encode,
    evaluate,
    finetune,
    head,
    hub,
    index,
    models,
    predict,
    train,
)
from dictembed.cli.encode import read_sentences
from dictembed.cli.options import HelpFormatter, add_output_options
from dictembed.cli.report import UsageError, emit, run_command
from dictembed.cli.train import train_options
from dictembed.device_choices import check_environment
from dictembed.errors import DictEmbedError
from dictembed.io import as_os_error
from dictembed.progress import bars_turned_off

__all__ = ["build_parser", "main", "read_sentences", "train_options"]

# In the order --help lists them.
COMMAND_MODULES = (
    train,
    encode,
    index,
    distil,
    predict,
    evaluate,
    finetune,
    head,
    data,
    dictionaries,
    hub,
    cache,
    models,
)
EPILOG = """\
output: a human-readable table on stdout; with --json exactly one JSON document on stdout and the table on
stderr. Logging always goes to stderr.
exit status: 0 success, 1 runtime error (one line `dictembed: error: ...` on stderr), 2 usage error,
130 interrupted."""
INTERRUPT_HINTS = {
    "train": " (train again with --resume to continue)",
    "distil": " (run it again with --resume to continue)",
    "head": " (run head learn again with --resume to continue)",
    "encode": " (a .npy output of float32, binary or ubinary vectors from a file continues when run again; others "
    "start over)",
}
# `train`'s parser is generated from the recipes' options, which import torch: its checks run on the arguments
# after the command's name before that parser is built.
CHECKS_BEFORE_PARSING = {"train": train.check_command_line}
# OpenBLAS's idle threads spin for 2^28 cycles (about 0.1 s) after each call before they sleep; a server's searches
# come more often than that, so its second BLAS thread spun through every gap and took a core from the requests
# (2 cores, 8 clients: 22 ms of CPU a query, 14 ms at 2^4 cycles, and 84-89 -> 96-99 queries/s). Read once, when
# numpy loads OpenBLAS: set here, before any import of numpy; a value the user set is kept.
SERVE_ENVIRONMENT = {"OPENBLAS_THREAD_TIMEOUT": "4"}
BROKEN_PIPE = 141  # the status of a program killed by SIGPIPE (128 + 13), as `yes | head` leaves `yes`


def build_parser(full: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: the commands named in `full` (None: every command) with all their options,
    the others with their name and one-line help only (which needs neither torch nor transformers)."""
    parser = argparse.ArgumentParser(
        prog="dictembed", description=__doc__.split("\n\n")[0], epilog=EPILOG, formatter_class=HelpFormatter
    )
    add_output_options(parser, suppress=False)
    parser.add_argument("--version", action="version", version=f"dictembed {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = None if full is None else set(full)
    for module in COMMAND_MODULES:
        if wanted is None or wanted & set(module.COMMANDS):
            module.register(subparsers)
        else:
            for name, help_text in module.COMMANDS.items():
                subparsers.add_parser(name, help=help_text)
    return parser


def versions() -> dict[str, str | None]:
    """The versions `dictembed --version --json` prints: dictembed's, Python's and those of the libraries under it
    (None for one not installed), read from the installed packages' metadata, importing none of them."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"dictembed": __version__, "python": platform.python_version()}
    for package in ("torch", "transformers", "sentence-transformers", "huggingface_hub"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def named_command(argv: list[str]) -> str | None:
    """The command the arguments name: the first that is not an option (the top level's take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def configure_logging(level: int) -> None:
    """Logging on stderr at `level`; transformers' own messages and progress bars off: through the environment
    variables they read when imported, so that a command that never loads transformers does not import it."""
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger().setLevel(level)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    else:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def error_message(err: BaseException) -> str:
    """One line for a runtime error; file errors (a full disk, a read-only filesystem...) name the file."""
    if isinstance(err, OSError):
        err = as_os_error(err) or err  # a failed copy (shutil.Error): its first file
        if err.filename is not None:
            return f"{err.filename}: {err.strerror or err}"
        if err.strerror:
            return err.strerror
    if isinstance(err, UnicodeDecodeError):
        return f"input is not {err.encoding} text ({err.reason} at byte {err.start})"
    return " ".join(str(err).split()) or type(err).__name__


def runtime_error(err: BaseException) -> int:
    """Print a runtime error as one line on stderr; its exit status, 1."""
    print(f"dictembed: error: {error_message(err)}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, 1 runtime error, 2 usage error, 130 interrupted, 141 the
    reader of stdout gone)."""
    as_program = argv is None  # `dictembed ...`, not a caller's `main([...])`
    argv = sys.argv[1:] if argv is None else list(argv)
    command = named_command(argv)
    if command == "serve":
        for name, value in SERVE_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
    top_level = argv[: argv.index(command)] if command else argv
    if "--version" in top_level and "--json" in argv:  # argparse's own --version prints plain text
        print(json.dumps(versions()))
        return 0
    try:  # a Ctrl-C while the libraries the parser names are imported (a few seconds for train): no traceback
        if command in CHECKS_BEFORE_PARSING and not {"-h", "--help"} & set(argv):
            try:
                CHECKS_BEFORE_PARSING[command](argv[argv.index(command) + 1 :])
            except (DictEmbedError, OSError) as err:
                return runtime_error(err)
        try:
            args = build_parser(full=[command] if command else []).parse_args(argv)
        except SystemExit as stop:  # argparse: --help, --version and usage errors
            return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    except KeyboardInterrupt:
        print("dictembed: interrupted before it began", file=sys.stderr)
        return 130
    try:
        if hasattr(args, "precision"):  # a command that runs a model: what the variables choose for it
            check_environment()
        if args.check is not None:  # before anything loads: the checks import no torch
            args.check(args)
        configure_logging(args.log_level)
        with bars_turned_off(args.log_level >= logging.WARNING):  # -q: no progress bars
            report = run_command(args)
    except UsageError as err:
        args.parser.print_usage(sys.stderr)
        print(f"{args.parser.prog}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"dictembed: interrupted{INTERRUPT_HINTS.get(args.command, '')}", file=sys.stderr)
        return 130
    except (DictEmbedError, OSError, UnicodeDecodeError) as err:
        return runtime_error(err)
    except Exception as err:  # a library's own error for a failed write (safetensors'), else a bug: raised
        disk = as_os_error(err)
        if disk is None:
            raise
        return runtime_error(disk)
    from dictembed.device_choices import is_main_process

    if as_program and threading.current_thread() is threading.main_thread():
        # the work is done and kept: a Ctrl-C while the result prints or the interpreter shuts down (joining the
        # libraries' threads) would make a success look like an interruption (status 130 after "wrote ...")
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if is_main_process():  # a distributed launch reports once
        try:
            emit(report, args.json)
        except BrokenPipeError:  # the reader stopped early (`| head`): quiet, as a program killed by SIGPIPE
            stop_writing_stdout()
            return BROKEN_PIPE
    return 0


def stop_writing_stdout() -> None:
    """Point stdout at the null device, so that Python's last flush at exit finds no closed pipe."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # a stdout without a file descriptor (tests)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
