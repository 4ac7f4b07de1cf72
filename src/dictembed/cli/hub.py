"""`dictembed push`: upload a saved model folder to the Hugging Face Hub."""

from __future__ import annotations

import argparse
from typing import Any

from dictembed.cli.options import add_command, add_model, repo_id
from dictembed.cli.report import Report

COMMANDS = {"push": "upload a saved model folder to the Hugging Face Hub"}


def register(subparsers: Any) -> None:
    """`push`."""
    p, (shared, _) = add_command(subparsers, "push", run_push, COMMANDS["push"])
    p.add_argument("--repo", type=repo_id, required=True, help="Hub repository id, user/name")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--dry-run", action="store_true", help="list the files that would be uploaded, upload nothing")
    add_model(shared, required=True, help_text="saved model folder")


def run_push(args: argparse.Namespace) -> Report:
    from dictembed.hub import push_model

    files = push_model(args.model, args.repo, private=args.private, dry_run=args.dry_run)
    verb = "would upload" if args.dry_run else "uploaded"
    data = {"repo": args.repo, "private": args.private, "dry_run": args.dry_run, "files": list(files)}
    return Report(data, "\n".join([f"{verb} {len(files)} file(s) to {args.repo}", *(f"  {f}" for f in files)]))
