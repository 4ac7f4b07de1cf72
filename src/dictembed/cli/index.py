"""`dictembed index`: a model folder that `predict` and `serve` open, for any encoder (trained or not) over any
dictionary, without training: the encoder's save, its entry space over the dictionary (built as `train`'s `best`
preset builds DefSent+'s: mean pooling, AMP entries, cosine logits; in the one entry-space cache), the dictionary's
definitions, the search index, a record naming the dictionary and the model card."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from dictembed.cli.options import add_command, add_device, add_encoding, add_model, add_overwrite, check_model
from dictembed.cli.report import Report
from dictembed.output_folder import check_output_folder, check_outside

COMMANDS = {"index": "a servable reverse-dictionary folder: an encoder, trained or not, over a dictionary"}
log = logging.getLogger("dictembed")


def register(subparsers: Any) -> None:
    """`index`."""
    from dictembed.dictionary.sources.table import COLUMNS_HELP, table_columns  # numpy: only for this command

    p, (shared, output) = add_command(subparsers, "index", run_index, COMMANDS["index"], check=check_index)
    p.add_argument(
        "--dictionary",
        required=True,
        help="the dictionary whose entries the folder serves: a name (dictembed dictionaries lists them) or a "
        ".tsv/.csv/.jsonl file (a headerless .tsv/.csv/.txt with --columns)",
    )
    add_model(shared)
    add_device(shared)
    add_encoding(shared, "utf-8", "encoding of a --dictionary table file (.tsv, .csv, .jsonl)")
    shared.add_argument("--columns", type=table_columns, default=None, help=COLUMNS_HELP)
    shared.add_argument(
        "--second-dictionary",
        default=None,
        help="a second dictionary whose definitions of the entry words the folder keeps for the score: a name or a "
        "file, or none (default: gcide beside a named English dictionary, as train's best preset)",
    )
    output.add_argument(
        "--output",
        required=True,
        help="the folder to write: the model's save, its entry space over the dictionary, the definitions, the "
        "search index and the model card",
    )
    add_overwrite(output, "replace a model already in --output (a folder holding anything else is never replaced)")


def check_index(args: argparse.Namespace) -> None:
    """A --dictionary that is no name and no readable file, an --output that would lose something (a folder that
    holds a model only with --overwrite), a --model path that is not there: refused before anything loads."""
    from dictembed.dictionary.load import check_sources
    from dictembed.second_dictionary import second_choice

    check_sources(args.dictionary, args.columns)
    if args.second_dictionary and second_choice(args.second_dictionary):
        check_sources(args.second_dictionary)
    check_output_folder(args.output, args.overwrite)
    check_model(args.model)
    check_outside(args.output, args.model)  # the model's folder is read as the index is written


def index_folder(
    model: str | None,
    dictionary: str,
    output: str | Path,
    device: str = "auto",
    precision: str = "auto",
    encoding: str = "utf-8",
    columns: str | None = None,
    second_dictionary: str | None = None,
) -> dict[str, Any]:
    """Write the folder `output` (staged: a failure leaves what was there) for `model` (None: the embedded model)
    over `dictionary` (its table files read in `encoding`; headerless ones by `columns`), with the settings of
    `train`'s `best` preset (`recipes.resolve`; an e5 model's entry temperature, 0.01; GCIDE's definitions beside an
    English dictionary, `second_dictionary`); what was written."""
    from dictembed.backends.onnx.export import write_query_graph
    from dictembed.io import staged_dir
    from dictembed.model_card import write_model_card
    from dictembed.model_folder import read_record
    from dictembed.recipes.defsent import base_encoder, config_dictionary
    from dictembed.recipes.defsent_plus import DefSentPlus, definition_space, second_of
    from dictembed.recipes.presets import DEFAULT_PRESET
    from dictembed.recipes.resolve import E5_NAME, E5_TEMPERATURE, resolve_train_config
    from dictembed.recipes.run import save_model_folder
    from dictembed.record import RunRecord

    given: dict[str, Any] = {"model": model, "dictionary": dictionary, "device": device, "precision": precision}
    given |= {"encoding": encoding, "columns": columns}
    if second_dictionary is not None:
        given["second_dictionary"] = second_dictionary
    if model and E5_NAME.search(model):
        given["entry_temperature"] = E5_TEMPERATURE
    config = resolve_train_config(DefSentPlus.name, DEFAULT_PRESET, given, output=str(output)).config
    loaded = config_dictionary(config)
    encoder = base_encoder(config)
    log.info("building the entry space of %s (%s entries) with %s", dictionary, f"{len(loaded):,}", config.model)
    space = definition_space(config, encoder, loaded)
    second = second_of(config, encoder, space)  # the preset's: GCIDE beside an English dictionary, when installed
    record = RunRecord(base_model=config.model, entry_space=space.kind, entry_encoder=config.model, data=dictionary)
    with staged_dir(output) as staging:
        save_model_folder(staging, encoder, record, space, loaded, config.cache_dir, second)
        saved = read_record(staging, required=True)
        write_model_card(staging, saved, name=Path(output).name)  # now with its entry space
        write_query_graph(staging, encoder)
    return {
        "output": str(output),
        "model": saved.base_model,
        "dictionary": saved.data,
        "entries": len(space),
        "definitions": loaded.num_definitions(),
        "entry_space": space.kind,
        "precision": encoder.compute_precision,
    }


def run_index(args: argparse.Namespace) -> Report:
    data = index_folder(
        args.model,
        args.dictionary,
        args.output,
        args.device,
        args.precision,
        args.encoding,
        args.columns,
        args.second_dictionary,
    )
    text = f"wrote {data['output']}: {data['entries']:,} entries of {data['dictionary']} ({data['entry_space']})"
    return Report(data, text)
