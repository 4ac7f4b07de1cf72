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
    p.add_argument(
        "--include-secrets",
        action="store_true",
        help="also upload the files that look like credentials (id_rsa, *.pem, credentials.json), left out otherwise",
    )
    add_model(shared, required=True, help_text="saved model folder")


def run_push(args: argparse.Namespace) -> Report:
    from dictembed.hub import push_model

    plan = push_model(
        args.model, args.repo, private=args.private, dry_run=args.dry_run, include_secrets=args.include_secrets
    )
    verb = "would upload" if args.dry_run else "uploaded"
    left_out = [{"path": item.path, "reason": item.reason} for item in plan.left_out]
    data = {"repo": args.repo, "private": args.private, "dry_run": args.dry_run, "files": plan.files}
    lines = [
        f"{verb} {len(plan.files)} file(s) to {args.repo}, left out {len(left_out)}",
        *(f"  {f}" for f in plan.files),
    ]
    if left_out:
        lines += ["left out:", *(f"  {item['path']}: {item['reason']}" for item in left_out)]
    if any(item.credential for item in plan.left_out):
        lines.append("(--include-secrets uploads the files that look like credentials)")
    return Report({**data, "left_out": left_out}, "\n".join(lines))
