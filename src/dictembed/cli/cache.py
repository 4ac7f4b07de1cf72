"""`dictembed cache list | clear`: the entry-space cache."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dictembed.cli.options import add_command, add_command_group
from dictembed.cli.report import Report, UsageError
from dictembed.paths import CACHE_HELP

COMMANDS = {"cache": f"the entry-space cache ({CACHE_HELP})"}


def register(subparsers: Any) -> None:
    """`cache` and its tasks."""
    tasks = add_command_group(subparsers, "cache", COMMANDS["cache"])
    for name, func, help_text in [
        ("list", run_list, "the cached entry spaces (file, size, date and what built them) and search indexes"),
        ("clear", run_clear, "remove the cached entry spaces and search indexes (only files dictembed wrote)"),
    ]:
        p, (shared, _) = add_command(tasks, name, func, help_text)
        shared.add_argument(
            "--cache-dir", type=folder_name, default=None, help=f"the cache folder (default: {CACHE_HELP})"
        )
    p.add_argument("--yes", action="store_true", help="remove without asking")


def folder_name(text: str) -> str:
    """A --cache-dir that names a folder there: an empty one would mean the default cache, which `clear` empties;
    one that is not there (a typo) would list and clear nothing, as if the cache were empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder; leave --cache-dir out for the default cache")
    if not Path(text).expanduser().exists():  # a file is refused as the cache's reader says it
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    return text


def run_list(args: argparse.Namespace) -> Report:
    from dictembed.cache import cache_folder, cached_indexes, human_size, list_cache

    folder = cache_folder(args.cache_dir)
    spaces = list_cache(folder)
    lines = [f"{len(spaces)} cached entry space(s) in {folder}, {human_size(sum(s.size for s in spaces))}"]
    for space in spaces:
        row = space.to_dict()
        src = space.source
        built = ", ".join(
            f"{key} {src[key]}" for key in ("model", "dictionary", "entries", "ica", "entry_count") if key in src
        )
        lines.append(f"  {space.path.name}  {human_size(space.size):>9}  {row['modified']}  {built or '(no sidecar)'}")
    indexes: list[dict[str, Any]] = []
    for index, files in cached_indexes(folder):
        modified = max((p.stat().st_mtime for p in files), default=index.stat().st_mtime)
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(modified))
        indexes.append({"folder": str(index), "size": sum(p.stat().st_size for p in files), "modified": when})
    size = human_size(sum(i["size"] for i in indexes))
    lines.append(f"{len(indexes)} cached search index(es) of model folders saved without one, {size}")
    lines += [f"  {Path(i['folder']).name}  {human_size(i['size']):>9}  {i['modified']}" for i in indexes]
    data = {"cache_dir": str(folder), "spaces": [s.to_dict() for s in spaces], "search_indexes": indexes}
    return Report(data, "\n".join(lines))


def run_clear(args: argparse.Namespace) -> Report:
    from dictembed.cache import cache_folder, clear_cache, human_size, own_files

    folder = cache_folder(args.cache_dir)
    files = own_files(folder)
    total = sum(p.stat().st_size for p in files if p.exists())
    if files and not args.yes:
        what = f"{len(files)} file(s), {human_size(total)}, from {folder}"
        if not sys.stdin.isatty():
            raise UsageError(f"this removes {what}: pass --yes to confirm")
        print(f"remove {what}? [y/N] ", end="", file=sys.stderr, flush=True)
        try:
            answer = input()
        except EOFError:  # Ctrl-D: no answer is no
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            return Report({"cache_dir": str(folder), "removed": [], "freed": 0}, "nothing removed")
    removed, freed = clear_cache(folder)
    data = {"cache_dir": str(folder), "removed": [str(p) for p in removed], "freed": freed}
    return Report(data, f"removed {len(removed)} file(s) from {folder}, freed {human_size(freed)}")
