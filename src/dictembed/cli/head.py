"""`dictembed head learn`: an MLM head learned over a frozen encoder, written into a copy of its folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_batch_size,
    add_command,
    add_command_group,
    add_dictionary,
    add_limit,
    add_model,
    add_overwrite,
    add_wordnet_dir,
    check_model,
    epochs,
    natural,
    positive_float,
    seed,
)
from dictembed.cli.report import Report
from dictembed.output_folder import check_output_folder, check_outside

COMMANDS = {"head": "MLM heads for models that ship none (learned over the frozen encoder)"}


def register(subparsers: Any) -> None:
    """`head` and its task `learn`."""
    tasks = add_command_group(subparsers, "head", COMMANDS["head"])
    help_text = "learn an MLM head over the frozen encoder and write the model folder as a masked-LM checkpoint"
    p, (shared, _) = add_command(tasks, "learn", run_learn, help_text, check=check_learn)
    add_model(shared)
    shared.add_argument("--output", required=True, help="the folder to write (a copy of the model's, with the head)")
    add_overwrite(shared, "replace a model already in --output (a folder holding anything else is never replaced)")
    add_dictionary(shared, "wordnet", "dictionary whose definitions and examples train the head")
    add_wordnet_dir(shared)
    add_limit(shared, "training texts, a seeded sample of the train split's definitions and examples")
    shared.add_argument("--heldout", type=natural, default=2000, help="held-out texts (dev split) scored")
    shared.add_argument("--epochs", type=epochs, default=1, help="passes over the training texts")
    shared.add_argument("--lr", type=positive_float, default=1e-3, help="AdamW learning rate of the head")
    add_batch_size(shared, 32, "texts per optimizer step")
    shared.add_argument("--seed", type=seed, default=0, help="seed of the sample, order and masking")
    shared.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUTPUT-runs/head")


def check_learn(args: argparse.Namespace) -> None:
    """An --output that would lose something (the head's folder is a model folder), a --model path that is not
    there, a --dictionary that cannot be read: refused before anything loads."""
    from dictembed.dictionary.load import check_sources

    check_output_folder(args.output, args.overwrite)
    check_model(args.model)
    check_outside(args.output, args.model)  # the model's folder is copied into --output
    check_sources(args.dictionary)


def run_learn(args: argparse.Namespace) -> Report:
    from dictembed.dictionary import load_dictionary
    from dictembed.learned_head import (
        HeadSettings,
        check_backbone,
        head_texts,
        learn_head,
        write_masked_lm,
    )
    from dictembed.output_folder import tidy_run_folder
    from dictembed.paths import default_model
    from dictembed.training import discard_checkpoints

    model = args.model or str(default_model())
    check_backbone(model)
    dictionary = load_dictionary(args.dictionary, wordnet_dir=args.wordnet_dir)
    train, heldout = head_texts(dictionary, args.limit, args.heldout, seed=args.seed)
    settings = HeadSettings(lr=args.lr, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed)
    run_dir = Path(f"{args.output}-runs") / "head"
    with tidy_run_folder(run_dir):
        mlm, summary = learn_head(model, train, run_dir, settings, heldout, resume=args.resume)
    folder = write_masked_lm(model, mlm, args.output)
    discard_checkpoints(run_dir)
    data = {"model": model, "output": str(folder), "architecture": type(mlm).__name__, **summary}
    lines = [f"learned a {type(mlm).__name__} head on {len(train):,} texts in {summary['steps']} steps: {folder}"]
    for when in ("before", "after"):
        if when in summary:
            m = summary[when]
            lines.append(f"  held-out {when}: MLM loss {m['mlm_loss']:.3f}, accuracy {100 * m['mlm_accuracy']:.1f} %")
    return Report(data, "\n".join(lines))
