"""`dictembed` command line: train | encode | predict | evaluate | data | plot | finetune."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dictembed.errors import DictEmbedError
from dictembed.record import read_record

log = logging.getLogger("dictembed")
Handler = Callable[[argparse.Namespace], Any]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _model_arg(p: argparse.ArgumentParser, required: bool = False) -> None:
    help_text = "hub name or local folder" + ("" if required else " (default: the embedded all-MiniLM-L6-v2)")
    p.add_argument("--model", required=required, default=None, help=help_text)


def _load_encoder(args: argparse.Namespace) -> Any:
    from dictembed.encoder import Encoder
    from dictembed.paths import default_model

    return Encoder.load(args.model or default_model(), pooling=getattr(args, "pooling", None))


def _print_result(result: dict[str, Any], as_json: bool, title: str) -> None:
    """A readable table, then (with --json) one JSON object as the last line."""
    width = max(len(k) for k in result)
    print(title)
    for key, value in result.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        print(f"  {key:<{width}}  {shown}")
    if as_json:
        print(json.dumps(result))


# ----------------------------------------------------------------------------- train
def cmd_train(args: argparse.Namespace) -> None:
    from dictembed.paths import default_model
    from dictembed.recipes.common import RunConfig

    method = args.method
    default_dictionary = "oxford,chang,wordnet-examples,wordnet" if method == "gr-bert" else "wordnet"
    config = RunConfig(
        method=method,
        model=args.model or default_model(),
        pooling=args.pooling or ("mean" if method != "defsent-plus" else "cls"),
        pooler=args.pooler or ("model" if method == "defsent-plus" else "none"),
        space=args.space,
        entries=args.entries,
        pst_steps=args.pst_steps,
        ica=args.ica,
        dictionary=args.dictionary or default_dictionary,
        wordnet_dir=args.wordnet_dir,
        seeds=args.seeds,
        lrs=args.lr_grid,
        batch_size=args.batch_size,
        epochs=args.epochs,
        limit=args.limit,
        select_on=args.select_on or ("mrr" if method == "defsent" else "stsb_dev"),
        output=args.output,
        resume=args.resume,
        arch=args.arch,
        similarity=args.similarity,
        temperature=args.temperature,
    )
    if method == "defsent":
        from dictembed.recipes.defsent import train_defsent

        path = train_defsent(config)
    elif method == "defsent-plus":
        from dictembed.recipes.defsent_plus import train_defsent_plus

        path = train_defsent_plus(config)
    elif method == "gr-bert":
        from dictembed.recipes.gr_bert import train_gr_bert

        path = train_gr_bert(config)
    else:
        raise DictEmbedError(f"unknown method {method!r}")
    saved = read_record(path, required=True)
    print(f"saved {path}")
    _print_result(saved["dev"], False, "dev metrics of the selected model")


# ---------------------------------------------------------------------------- encode
def cmd_encode(args: argparse.Namespace) -> None:
    import numpy as np

    path = Path(args.input)
    if not path.exists():
        raise DictEmbedError(f"input file {path} not found")
    sentences = path.read_text(encoding="utf-8").splitlines()
    vectors = _load_encoder(args).encode(
        sentences, batch_size=args.batch_size, normalize=args.normalize, show_progress=True
    )
    np.save(args.output, vectors)
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {args.output}")


# --------------------------------------------------------------------------- predict
def cmd_predict(args: argparse.Namespace) -> None:
    from dictembed.reverse_dictionary import ReverseDictionary

    ranked = ReverseDictionary.load(args.model).predict(args.definition, top_k=args.top_k)
    for rank, (word, prob) in enumerate(ranked, 1):
        print(f"{rank:>3}  {word:<30} {prob:.4f}")
    if args.json:
        print(json.dumps([{"word": w, "probability": p} for w, p in ranked]))


# -------------------------------------------------------------------------- evaluate
def cmd_eval_sts(args: argparse.Namespace) -> None:
    from dictembed.evaluation.sts import evaluate_sts

    result = evaluate_sts(
        _load_encoder(args), aggregation=args.aggregation, per_subset=args.per_subset, whitening=args.whiten
    )
    _print_result(result, args.json, f"STS (Spearman x 100, {args.aggregation})")


def cmd_eval_senteval(args: argparse.Namespace) -> None:
    from dictembed.evaluation.senteval import evaluate_senteval

    result = evaluate_senteval(_load_encoder(args), tasks=args.tasks.split(",") if args.tasks else None)
    _print_result(result, args.json, "SentEval transfer (accuracy %)")


def cmd_eval_reverse_dictionary(args: argparse.Namespace) -> None:
    from dictembed.dictionary import load_dictionary, split_by_headword
    from dictembed.evaluation.reverse_dictionary import reverse_dictionary_metrics
    from dictembed.reverse_dictionary import ReverseDictionary

    saved = read_record(args.model, required=True)
    config = saved.get("config", {})
    dictionary = load_dictionary(args.dictionary or config.get("dictionary", "wordnet"), wordnet_dir=args.wordnet_dir)
    split = split_by_headword(dictionary, seed=config.get("split_seed", 0))[args.split]
    ranks = ReverseDictionary.load(args.model).ranks(split, limit=args.limit)
    result = {**reverse_dictionary_metrics(ranks), "n": int(len(ranks))}
    _print_result(result, args.json, f"reverse dictionary on the {args.split} headwords")


def cmd_eval_lexsub(args: argparse.Namespace) -> None:
    from dictembed.evaluation.lexsub import evaluate_lexsub
    from dictembed.paths import default_model

    result = evaluate_lexsub(
        args.model or default_model(),
        dataset=args.dataset,
        post=[p.lstrip("+") for p in args.post],
        validation_model=args.validation_model,
        limit=args.limit,
        scoring=args.scoring,
    )
    keys = ["best", "best_mode", "oot", "oot_mode", "p_at_1", "p_at_3"]
    table = {k: float(result[k]) for k in keys}
    _print_result({**table, **{k: v for k, v in result.items() if k not in keys}}, False, f"{args.dataset} (x 100)")
    if args.json:
        print(json.dumps(table))


# ---------------------------------------------------------------------------- finetune
def cmd_finetune_stsb(args: argparse.Namespace) -> None:
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
    )
    summary = {
        "ratio": args.ratio,
        "test_mean": result["mean"],
        "test_sd": result["sd"],
        "dev_mean": result["dev_mean"],
        "dev_sd": result["dev_sd"],
    }
    _print_result(summary, args.json, f"supervised STS-B, {len(args.seeds)} seed(s), Spearman x 100")


# ------------------------------------------------------------------------------ data
def cmd_data_stats(args: argparse.Namespace) -> None:
    from transformers import AutoTokenizer

    from dictembed.dictionary import dictionary_stats, format_stats_table, load_dictionary, split_by_headword
    from dictembed.encoder import load_pretrained
    from dictembed.paths import default_model

    dictionary = load_dictionary(args.dictionary, wordnet_dir=args.wordnet_dir)
    tokenizer = load_pretrained(AutoTokenizer, args.model or default_model())
    rows = dictionary_stats(split_by_headword(dictionary, seed=args.split_seed), tokenizer)
    print(format_stats_table(rows))


# ------------------------------------------------------------------------------ plot
def cmd_plot_entries(args: argparse.Namespace) -> None:
    from dictembed.entry_space import EntrySpace
    from dictembed.geometry import isotropy_metrics, plot_entry_spaces, plot_isotropy

    paths: list[tuple[str, Path]] = []
    for model in args.model:
        saved = read_record(model, required=True)
        history = saved.get("selection", {}).get("pst", [])
        if history and not args.final_only:
            paths += [(f"{Path(model).name} step {h['step']}", Path(h["path"])) for h in history]
        else:
            paths.append((Path(model).name, Path(model)))
    spaces = {name: EntrySpace.load(path).vectors() for name, path in paths}
    written = plot_entry_spaces(spaces, args.output)
    written.append(plot_isotropy({n: isotropy_metrics(m, sample=200_000) for n, m in spaces.items()}, args.output))
    for path in written:
        print(f"wrote {path}")


# ------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dictembed", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train DefSent or DefSent+")
    p.add_argument("--method", choices=["defsent", "defsent-plus", "gr-bert"], default="defsent")
    _model_arg(p)
    p.add_argument("--pooling", choices=["cls", "mean", "max"], default=None)
    p.add_argument(
        "--pooler",
        choices=["none", "model"],
        default=None,
        help="apply the model's own dense pooler (default: model for defsent-plus, none for defsent)",
    )
    p.add_argument(
        "--space",
        choices=["auto", "mlm-head", "word-embeddings"],
        default="auto",
        help="DefSent entry space; auto falls back to word embeddings when the model has no MLM head",
    )
    p.add_argument("--entries", choices=["ac", "amp"], default="ac", help="DefSent+ entry embeddings")
    p.add_argument("--pst-steps", type=int, default=1)
    p.add_argument("--ica", choices=["none", "last"], default="none")
    p.add_argument(
        "--similarity",
        choices=["dot", "cosine"],
        default="dot",
        help="defsent-plus entry logits: dot product (the paper) or cosine / --temperature",
    )
    p.add_argument("--temperature", type=float, default=0.05, help="tau of cosine entry logits and of gr-bert")
    p.add_argument("--arch", choices=["mt", "sc"], default="mt", help="gr-bert: one or two context encoders")
    p.add_argument(
        "--dictionary",
        default=None,
        help="comma list: wordnet,gcide,oxford,chang,... or files (default: wordnet; gr-bert: "
        "oxford,chang,wordnet-examples,wordnet)",
    )
    p.add_argument("--wordnet-dir", default=None)
    p.add_argument("--seeds", type=_ints, default=[0])
    p.add_argument("--lr-grid", type=_floats, default=[2e-5])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="train on a seeded sample of N definitions")
    p.add_argument("--select-on", choices=["mrr", "stsb_dev"], default=None)
    p.add_argument("--output", required=True)
    p.add_argument("--resume", action="store_true", help="continue interrupted runs from their checkpoints")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("encode", help="encode one sentence per line to a .npy matrix")
    _model_arg(p)
    p.add_argument("--pooling", default=None)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--normalize", action="store_true")
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser("predict", help="reverse dictionary: rank entries for a definition")
    _model_arg(p, required=True)
    p.add_argument("definition")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)

    ev = sub.add_parser("evaluate", help="evaluate a model").add_subparsers(dest="task", required=True)
    p = ev.add_parser("sts", help="unsupervised STS12-16, STS-B, SICK-R")
    _model_arg(p)
    p.add_argument("--pooling", default=None)
    p.add_argument("--aggregation", choices=["all", "mean", "wmean"], default="all")
    p.add_argument("--per-subset", action="store_true")
    p.add_argument("--whiten", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval_sts)
    p = ev.add_parser("senteval", help="SentEval transfer tasks")
    _model_arg(p)
    p.add_argument("--pooling", default=None)
    p.add_argument("--tasks", default=None, help="comma list, default all seven")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval_senteval)
    p = ev.add_parser("reverse-dictionary", help="MRR and top-1/3/10 on held-out headwords")
    _model_arg(p, required=True)
    p.add_argument("--dictionary", default=None, help="default: the dictionary the model was trained on")
    p.add_argument("--wordnet-dir", default=None)
    p.add_argument("--split", choices=["train", "dev", "test"], default="test")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval_reverse_dictionary)

    p = ev.add_parser("lexsub", help="lexical substitution: LS07 (all) or the CoInCo trial split")
    _model_arg(p)
    p.add_argument("--dataset", choices=["LS07", "CoInCo"], default="LS07")
    p.add_argument("--post", nargs="*", default=[], choices=["+emb", "+valid", "emb", "valid"])
    p.add_argument("--validation-model", default=None, help="for +valid (default: the model itself)")
    p.add_argument(
        "--scoring",
        choices=["auto", "head", "embeddings"],
        default="auto",
        help="p(x|s) from the MLM head, or h . E^T (auto: the head when the model has one)",
    )
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval_lexsub)

    ft = sub.add_parser("finetune", help="supervised fine-tuning").add_subparsers(dest="task", required=True)
    p = ft.add_parser("stsb", help="siamese cosine regression on STS-B train, test Spearman mean ± sd")
    _model_arg(p)
    p.add_argument("--ratio", type=float, default=1.0, help="fraction of STS-B train: 1.0, 0.5, 0.2")
    p.add_argument("--seeds", type=_ints, default=[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--pooling", choices=["cls", "mean", "max"], default="mean")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--output", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_finetune_stsb)

    data = sub.add_parser("data", help="dictionary data").add_subparsers(dest="task", required=True)
    p = data.add_parser("stats", help="words, definitions and lengths per split (DefSent Table 1)")
    p.add_argument("--dictionary", default="wordnet")
    p.add_argument("--wordnet-dir", default=None)
    p.add_argument("--split-seed", type=int, default=0)
    _model_arg(p)
    p.set_defaults(func=cmd_data_stats)

    plot = sub.add_parser("plot", help="figures").add_subparsers(dest="task", required=True)
    p = plot.add_parser("entries", help="2-D SVD / whitened PCA of entry spaces across PST steps, isotropy")
    p.add_argument("--model", nargs="+", required=True, help="saved model folder(s)")
    p.add_argument("--final-only", action="store_true", help="plot only the saved model, not every PST step")
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_plot_entries)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        args.func(args)
    except DictEmbedError as err:
        print(f"dictembed: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dictembed: interrupted (training resumes with --resume)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
