"""`dictembed evaluate sts | sts-multi | senteval | reverse-dictionary | lexsub | mteb`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_command,
    add_command_group,
    add_device,
    add_dictionary,
    add_encoder,
    add_encoding,
    add_limit,
    add_model,
    add_tasks,
    add_wordnet_dir,
    check_known,
    check_model,
    load_encoder,
    names,
)
from dictembed.cli.report import Report, UsageError, table
from dictembed.errors import DictEmbedError

COMMANDS = {"evaluate": "evaluate a model"}


def register(subparsers: Any) -> None:
    """`evaluate` and its tasks."""
    tasks = add_command_group(subparsers, "evaluate", COMMANDS["evaluate"])

    p, (shared, _) = add_command(tasks, "sts", run_sts, "unsupervised STS12-16, STS-B, SICK-R", check=check_sts)
    add_tasks(p, "comma list, e.g. STS12,STSB (default: all seven)")
    p.add_argument("--aggregation", choices=["all", "mean", "wmean"], default="all", help="STS12-16 subsets")
    p.add_argument("--per-subset", action="store_true", help="also report every STS12-16 subset")
    p.add_argument("--whiten", action="store_true", help="BERT-whitening fitted on each task's sentences")
    add_encoder(shared)

    text = "STS-B machine-translated into ten languages, plus English"
    p, (shared, _) = add_command(tasks, "sts-multi", run_sts_multi, text, check=check_sts_multi)
    p.add_argument(
        "--languages", type=names, default=None, help="comma list, e.g. fr,de,ru,zh,ja (default: all eleven)"
    )
    p.add_argument("--split", choices=["dev", "test"], default="test", help="choose models on dev")
    add_encoder(shared)

    p, (shared, _) = add_command(tasks, "senteval", run_senteval, "SentEval transfer tasks", check=check_senteval)
    add_tasks(p, "comma list (default: all seven)")
    p.add_argument("--jobs", type=int, default=1, help="processes fitting the classifiers' folds (-1: all cores)")
    add_encoder(shared)

    text = "MRR and top-1/3/10 on held-out headwords"
    p, (shared, _) = add_command(
        tasks, "reverse-dictionary", run_reverse_dictionary, text, check=check_reverse_dictionary
    )
    p.add_argument("--split", choices=["train", "dev", "test"], default="test", help="which headwords")
    p.add_argument(
        "--queries",
        default=None,
        metavar="oxford|chang|FILE",
        help="score ANOTHER dictionary's definitions against the model's entries (default: none)",
    )
    p.add_argument(
        "--leave-one-out",
        action="store_true",
        help="the split's own definitions, each left out of its gold entry (default: off)",
    )
    p.add_argument(
        "--baseline", choices=["tfidf"], default=None, help="TF-IDF of definitions instead of the model (default: none)"
    )
    p.add_argument(
        "--tfidf-analyzer",
        choices=["auto", "word", "char"],
        default=None,
        help="TF-IDF terms: words, or character 1-3-grams (char); auto: char n-grams for Chinese or Japanese "
        "definitions, else words (default: auto)",
    )
    add_model(shared, required=True)
    add_dictionary(shared, None, "default: the dictionary the model was trained on")
    add_encoding(shared, None, "encoding of dictionary table files (default: as trained)")
    add_wordnet_dir(shared)
    add_limit(shared, "rank the first N definitions")
    add_device(shared)

    text = "lexical substitution: LS07 (all) or the CoInCo trial split"
    p, (shared, _) = add_command(tasks, "lexsub", run_lexsub, text, check=check_lexsub)
    p.add_argument("--dataset", choices=["LS07", "CoInCo"], default="LS07", help="benchmark")
    p.add_argument(
        "--post", nargs="*", default=[], choices=["+emb", "+valid", "emb", "valid"], help="post-processing steps"
    )
    p.add_argument("--validation-model", default=None, help="for +valid (default: the model itself)")
    p.add_argument(
        "--scoring",
        choices=["auto", "head", "embeddings"],
        default="auto",
        help="p(x|s) from the MLM head, or h . E^T (auto: the head when the model has one)",
    )
    add_model(shared)
    add_limit(shared, "the first N instances")
    add_device(shared)

    text = "MTEB tasks through the mteb package"
    p, (shared, output) = add_command(tasks, "mteb", run_mteb, text, check=check_mteb)
    add_tasks(p, "comma list of MTEB task names, e.g. STSBenchmark", required=True)
    add_encoder(shared)
    output.add_argument(
        "--output-folder",
        default=None,
        help="folder for mteb's result files, whose finished tasks a rerun reads back (default: none written)",
    )


def check_encoder(args: argparse.Namespace) -> None:
    """The --model of a command that loads an encoder, checked before anything loads."""
    check_model(args.model)


def check_mteb(args: argparse.Namespace) -> None:
    """An --output-folder that is a file or cannot be made, then the --model: before anything loads."""
    from dictembed.output_folder import check_not_a_file, check_writable_place

    if args.output_folder is not None:
        check_not_a_file(args.output_folder, "--output-folder")
        check_writable_place(Path(args.output_folder) / "results.json", "--output-folder")
    check_encoder(args)


def check_sts(args: argparse.Namespace) -> None:
    """--tasks that are STS tasks, then the --model."""
    if args.tasks:
        from dictembed.evaluation.sts import STS_TASKS  # numpy and scipy, no torch

        check_known(args.tasks, STS_TASKS, "--tasks")
    check_model(args.model)


def check_sts_multi(args: argparse.Namespace) -> None:
    """--languages that are STS-B languages, their files there, then the --model."""
    from dictembed.evaluation.sts_multi import STS_MULTI_LANGUAGES, sts_multi_path  # numpy and scipy, no torch

    check_known(args.languages, STS_MULTI_LANGUAGES, "--languages")
    for language in args.languages or STS_MULTI_LANGUAGES:
        sts_multi_path(language, args.split)
    check_model(args.model)


def check_senteval(args: argparse.Namespace) -> None:
    """--tasks that are SentEval tasks, --jobs this machine can run, then the --model."""
    from dictembed.evaluation.senteval import SENTEVAL_TASKS, check_jobs  # numpy and scikit-learn, no torch

    if args.tasks:
        check_known(args.tasks, SENTEVAL_TASKS, "--tasks")
    try:
        check_jobs(args.jobs)
    except DictEmbedError as err:
        raise UsageError(f"--{err}") from None
    check_model(args.model)


def run_sts(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.sts import evaluate_sts

    encoder = load_encoder(args)
    with encoder.autocast():
        result = evaluate_sts(
            encoder, tasks=args.tasks, aggregation=args.aggregation, per_subset=args.per_subset, whitening=args.whiten
        )
    return Report(result, table(result, f"STS (Spearman x 100, {args.aggregation})"))


def run_sts_multi(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.sts_multi import evaluate_sts_multi

    encoder = load_encoder(args)
    with encoder.autocast():
        result = evaluate_sts_multi(encoder, languages=args.languages, split=args.split)
    return Report(result, table(result, f"multilingual STS-B {args.split} (Spearman x 100)"))


def run_senteval(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.senteval import evaluate_senteval

    encoder = load_encoder(args)
    with encoder.autocast():
        result = evaluate_senteval(encoder, tasks=args.tasks, jobs=args.jobs)
    return Report(result, table(result, "SentEval transfer (accuracy %)"))


def check_reverse_dictionary(args: argparse.Namespace) -> None:
    """The leak-free evaluation's options that go together, then the --model, and the --queries and --dictionary
    (their names, and their files readable)."""
    from dictembed.dictionary.load import check_sources

    if args.tfidf_analyzer is not None and args.baseline != "tfidf":
        raise UsageError("--tfidf-analyzer needs --baseline tfidf")
    if args.queries or args.leave_one_out or args.baseline:
        if bool(args.queries) == bool(args.leave_one_out):
            raise UsageError("give either --queries oxford|chang|FILE or --leave-one-out")
    if args.queries and not args.baseline and (given := [o for o in ("dictionary", "wordnet_dir") if getattr(args, o)]):
        option = "--" + given[0].replace("_", "-")
        raise UsageError(
            f"{option} names the model's own definitions, which --queries scores nothing from (only "
            "--baseline tfidf reads them): leave it out"
        )
    check_model(args.model)
    for spec in (args.queries, args.dictionary):
        if spec:
            check_sources(spec)


def run_reverse_dictionary(args: argparse.Namespace) -> Report:
    """The model's own held-out definitions, or with --queries / --leave-one-out / --baseline the leak-free
    evaluation (`dictembed.evaluation.leak_free`)."""
    if args.queries or args.leave_one_out or args.baseline:
        return run_leak_free(args)
    from dictembed.dictionary import split_by_headword
    from dictembed.evaluation.ranking import reverse_dictionary_metrics
    from dictembed.model_folder import ModelFolder
    from dictembed.reverse_dictionary import ReverseDictionary

    folder = ModelFolder.open(args.model)
    source = folder.dictionary(args.dictionary, args.wordnet_dir, args.encoding)
    reverse_dictionary = ReverseDictionary.load(folder, args.device, args.precision, dictionary=args.dictionary)
    split = split_by_headword(source.load(), seed=source.split_seed)[args.split]
    ranks = reverse_dictionary.ranks(split, limit=args.limit)
    result = {**reverse_dictionary_metrics(ranks), "n": int(len(ranks))}
    return Report(result, table(result, f"reverse dictionary on the {args.split} headwords"))


def run_leak_free(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.leak_free import evaluate_leak_free

    result = evaluate_leak_free(
        args.model,
        queries=args.queries,
        leave_one_out=args.leave_one_out,
        baseline=args.baseline,
        analyzer=args.tfidf_analyzer or "auto",
        split=args.split,
        limit=args.limit,
        dictionary=args.dictionary,
        wordnet_dir=args.wordnet_dir,
        encoding=args.encoding,
        device=args.device,
        precision=args.precision,
    )
    if args.queries:
        title = f"reverse dictionary: {args.queries} definitions against the model's entries"
    else:
        title = f"reverse dictionary, leave-one-out, on the {args.split} headwords"
    title += " (TF-IDF baseline)" if args.baseline == "tfidf" else ""
    return Report(result, table(result, title))


def check_lexsub(args: argparse.Namespace) -> None:
    """The --model and --validation-model, checked before anything loads; a --validation-model only with +valid."""
    if args.validation_model and "valid" not in [step.lstrip("+") for step in args.post]:
        raise UsageError("--validation-model scores the +valid step: add --post +valid, or leave it out")
    check_model(args.model)
    check_model(args.validation_model)


def run_lexsub(args: argparse.Namespace) -> Report:
    from dictembed.devices import autocast, resolve_device
    from dictembed.evaluation.lexsub import evaluate_lexsub
    from dictembed.paths import default_model

    device = resolve_device(args.device)
    with autocast(device, args.precision):
        result = evaluate_lexsub(
            args.model or default_model(),
            dataset=args.dataset,
            post=[p.lstrip("+") for p in args.post],
            validation_model=args.validation_model,
            limit=args.limit,
            scoring=args.scoring,
            progress=args.log_level < logging.WARNING,
            device=str(device),
        )
    return Report(result, table(result, f"{args.dataset} (x 100)"))


def run_mteb(args: argparse.Namespace) -> Report:
    from dictembed.evaluation.mteb import evaluate_mteb

    encoder = load_encoder(args, export=False)  # MTEB's model card reads the torch network
    with encoder.autocast():
        result = evaluate_mteb(encoder, tasks=args.tasks, output_folder=args.output_folder)
    return Report(result, table(result, "MTEB (main score x 100)"))
