"""`dictembed finetune stsb`: supervised fine-tuning on STS-B, test Spearman over seeds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_batch_size,
    add_command,
    add_command_group,
    add_device,
    add_limit,
    add_model,
    add_overwrite,
    check_model,
    epochs,
    fraction,
    list_of,
    seed,
)
from dictembed.cli.report import Report, table
from dictembed.errors import DictEmbedError
from dictembed.output_folder import check_output_folders, check_outside
from dictembed.pooling_names import STANDARD_POOLINGS

COMMANDS = {"finetune": "supervised fine-tuning"}


def register(subparsers: Any) -> None:
    """`finetune` and its tasks."""
    tasks = add_command_group(subparsers, "finetune", COMMANDS["finetune"])
    text = "siamese cosine regression on STS-B train, test Spearman mean ± sd"
    p, (shared, output) = add_command(tasks, "stsb", run_stsb, text, check=check_stsb)
    p.add_argument("--ratio", type=fraction, default=1.0, help="fraction of STS-B train: 1.0, 0.5, 0.2")
    p.add_argument(
        "--seeds", type=list_of(seed), default="0", metavar="SEED,...", help="comma list of seeds, each trained"
    )
    p.add_argument("--epochs", type=epochs, default=4, help="training epochs")
    p.add_argument("--pooling", choices=STANDARD_POOLINGS, default="mean", help="pooling")
    add_model(shared)
    add_batch_size(shared, 16, "training batch size")
    add_limit(shared, "the first N pairs of each split, train, dev and test (quick checks; at least 2)")
    add_device(shared)
    output.add_argument(
        "--output", default=None, help="keep the fine-tuned models here, one folder a seed (default: none)"
    )
    add_overwrite(
        output, "write over the models already in --output's seed folders (a folder holding anything else: never)"
    )
    output.add_argument(
        "--resume",
        action="store_true",
        help="read back the seeds already finished in --output with the same settings instead of training them",
    )


def seed_folders(seeds: list[int]) -> list[str]:
    """The folders inside --output that the seeds' models are saved to (`finetune_stsb_seeds`' seedN)."""
    return [f"seed{seed}" for seed in seeds]


def check_stsb(args: argparse.Namespace) -> None:
    """An --output whose seed folders would lose something (`check_output_folders`), a --model path that is not
    there: refused before anything loads."""
    if args.resume and args.output is None:
        raise DictEmbedError("--resume reads the finished seeds of --output; name the --output folder")
    if args.overwrite and args.output is None:
        raise DictEmbedError("--overwrite replaces the seed folders of --output; name the --output folder")
    if args.limit is not None and args.limit < 2:
        raise DictEmbedError(f"--limit {args.limit}: a Spearman correlation needs at least 2 pairs (limit >= 2)")
    if args.output is not None:
        check_outside(args.output, args.model)  # a seed folder written into or over the model it trains from
        folders = seed_folders(args.seeds)
        if args.resume:  # a finished seed is read back, or refused at run time if trained otherwise (`finished_seed`)
            folders = [name for name in folders if not (Path(args.output) / name / "results.json").is_file()]
        check_output_folders(args.output, folders, args.overwrite)
    check_model(args.model)


def run_stsb(args: argparse.Namespace) -> Report:
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
        resume=args.resume,
        overwrite=args.overwrite,
    )
    summary = {
        "ratio": args.ratio,
        "test_mean": result["mean"],
        "test_sd": result["sd"],
        "dev_mean": result["dev_mean"],
        "dev_sd": result["dev_sd"],
    }
    return Report(result, table(summary, f"supervised STS-B, {len(args.seeds)} seed(s), Spearman x 100"))
