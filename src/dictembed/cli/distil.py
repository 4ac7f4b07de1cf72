"""`dictembed distil`: a reverse-dictionary folder whose small student encoder (default: the embedded
all-MiniLM-L6-v2) queries a stronger teacher folder's entry space, trained to encode as the teacher does
(`dictembed.query_distillation`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_batch_size,
    add_command,
    add_device,
    add_model,
    add_overwrite,
    check_model,
    epochs,
    natural,
    non_negative_float,
    positive_float,
    seed,
)
from dictembed.cli.report import Report, UsageError
from dictembed.errors import DictEmbedError
from dictembed.output_folder import check_output_folder, check_outside

log = logging.getLogger(__name__)

COMMANDS = {"distil": "a fast reverse-dictionary folder: a small encoder trained to query a stronger folder's entries"}


def register(subparsers: Any) -> None:
    """`distil`."""
    p, (shared, output) = add_command(subparsers, "distil", run_distil, COMMANDS["distil"], check=check_distil)
    p.add_argument("teacher", help="the teacher: a model folder with a DefSent+ entry space (`train`, `index`)")
    add_model(
        shared,
        help_text="the student: hub name, local folder or prepared offline model (default: the "
        "embedded all-MiniLM-L6-v2)",
    )
    add_device(shared)
    shared.add_argument(
        "--descriptions",
        default="everyday",
        help="a description corpus among the training texts: 'everyday' (the bundled one), 'everyday-long' (it and a "
        "longer description of each of its words), a TSV file, or 'none'",
    )
    shared.add_argument("--definitions", type=natural, default=60_000, help="definitions sampled (0: all)")
    shared.add_argument("--words", type=natural, default=40_000, help="headwords sampled (0: all)")
    shared.add_argument(
        "--ranking-weight",
        type=non_negative_float,
        default=1.0,
        help="weight of the ranking term (the teacher's distribution over the entries) beside the cosine loss",
    )
    shared.add_argument("--epochs", type=epochs, default=2, help="passes over the training texts")
    shared.add_argument("--lr", type=positive_float, default=1e-4, help="AdamW learning rate")
    add_batch_size(shared, 64, "texts per optimizer step")
    shared.add_argument("--seed", type=seed, default=0, help="seed of the samples and the order")
    shared.add_argument("--resume", action="store_true", help="continue from the checkpoint in OUTPUT-runs/distil")
    output.add_argument("--output", required=True, help="the folder to write: the student over the teacher's entries")
    add_overwrite(output, "replace a model already in --output (a folder holding anything else is never replaced)")


def run_folder(output: str | Path) -> Path:
    """Where a distillation into `output` keeps its checkpoint and the teacher's cached vectors."""
    return Path(f"{output}-runs") / "distil"


def check_distil(args: argparse.Namespace) -> None:
    """A teacher or student path that is not there, an --output that would lose something, a --descriptions file
    that cannot be read: refused before anything loads (the descriptions are read here, once:
    `args.description_rows`)."""
    from dictembed.description_corpus import corpus_choice, load_descriptions
    from dictembed.model_folder import may_be_hub_name, read_record

    teacher = Path(args.teacher).expanduser()
    if teacher.exists() or not may_be_hub_name(args.teacher):
        if not teacher.is_dir():  # named as what it is, before what a folder would lack
            what = "a file, not a model folder" if teacher.exists() else "no such model folder"
            raise DictEmbedError(f"teacher {args.teacher}: {what}")
        read_record(teacher, required=True)  # a folder train or index wrote
    # else a Hub name (a folder `dictembed push` published): opened, and checked, once the run starts
    check_model(args.model)
    if Path(args.output).resolve() == Path(args.teacher).resolve():
        raise UsageError(f"--output {args.output} is the teacher's folder: the student goes to another")
    for folder in (args.teacher, args.model):  # read while the output is written, its runs folder beside it
        check_outside(args.output, folder)
        check_outside(run_folder(args.output), folder)
    check_output_folder(args.output, args.overwrite)
    if (runs := run_folder(args.output).parent).exists() and not runs.is_dir():
        raise DictEmbedError(f"{runs} is a file; distil keeps its checkpoint in a folder of that name: move it")
    args.description_rows = load_descriptions(args.descriptions) if corpus_choice(args.descriptions) else []


def run_distil(args: argparse.Namespace) -> Report:
    from dictembed.backends.onnx.export import write_query_graph
    from dictembed.io import staged_dir
    from dictembed.model_card import write_model_card
    from dictembed.model_folder import read_record
    from dictembed.output_folder import tidy_run_folder
    from dictembed.paths import default_model
    from dictembed.query_distillation import DistillationSettings, distil
    from dictembed.recipes.run import save_model_folder
    from dictembed.training import discard_checkpoints

    settings = DistillationSettings(
        definitions=args.definitions,
        words=args.words,
        ranking_weight=args.ranking_weight,
        lr=args.lr,
        batch_size=args.batch_size,
        epochs=args.epochs,
        seed=args.seed,
    )
    student_model = args.model or str(default_model())
    run_dir = run_folder(args.output)
    with tidy_run_folder(run_dir):
        student, space, dictionary, record, second = distil(
            args.teacher,
            student_model,
            args.description_rows,
            settings,
            run_dir,
            args.device,
            args.precision,
            args.resume,
        )
    with staged_dir(args.output) as staging:
        save_model_folder(staging, student, record, space, dictionary, second=second)
        write_model_card(staging, read_record(staging, required=True), name=Path(args.output).name)
        write_query_graph(staging, student)
    discard_checkpoints(run_dir)
    kept = sum(p.stat().st_size for p in run_dir.glob("*") if p.is_file())
    if kept:  # the teacher's vectors: a later run of this teacher over these texts starts from them
        log.info(
            "%s keeps %.0f MB (the teacher's vectors, for another run from them); remove it to free them",
            run_dir,
            kept / 1e6,
        )
    data: dict[str, Any] = {
        "output": str(args.output),
        "teacher": str(args.teacher),
        "student": student_model,
        "entries": len(space),
        "dim": student.dim,
        "texts": record.details["texts"],
        "final_loss": record.final_loss,
        "examples_per_s": record.throughput,
    }
    loss = "" if record.final_loss is None else f", final loss {record.final_loss:.4f}"  # None: resumed at its end
    text = f"wrote {args.output}: {student_model} ({student.dim}-d) over the {len(space):,} entries of {args.teacher}"
    text += loss
    return Report(data, text)
