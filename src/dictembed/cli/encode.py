"""`dictembed encode` (sentences to a .npy/.npz matrix) and `dictembed export` (a model for ONNX Runtime)."""

from __future__ import annotations

import argparse
import itertools
import logging
from pathlib import Path
from typing import Any

from dictembed.cli.options import (
    add_batch_size,
    add_command,
    add_encoder,
    add_encoding,
    add_model,
    add_overwrite,
    array_path,
    check_model,
    input_file,
    load_encoder,
    number,
    positive_int,
)
from dictembed.cli.report import Report, UsageError
from dictembed.io import atomic_file
from dictembed.output_folder import check_output_file, check_output_folder, check_outside
from dictembed.quantization import CALIBRATED, QUANTIZATIONS, SMOOTH_ALPHA, STREAMABLE, WEIGHT_QUANTIZATIONS
from dictembed.text_files import (
    ENCODING_HINT,
    check_readable,
    is_regular_file,
    lone_carriage_return,
    read_lines,
    refuse_carriage_returns,
)

CALIBRATION_LINES = 300  # lines of --input that set an --int8 network's activation ranges
COMMANDS = {
    "encode": "encode one sentence per line to a .npy or .npz matrix",
    "export": "export a model for ONNX Runtime inference (optionally int8)",
}


def read_sentences(path: Path, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> list[str]:
    """One sentence per line, split on "\\n" only (one trailing "\\r" stripped): one row per line, whatever
    other line-break characters (\\u2028, \\x0c, \\x85, ...) the sentences contain (`dictembed.text_files.read_lines`:
    a missing file, a folder or bytes that are not `encoding` are a one-line error naming file:line, with `hint`)."""
    return read_lines(path, encoding, hint=hint)


def read_input(path: str, encoding: str = "utf-8", hint: str | None = ENCODING_HINT) -> list[str]:
    """The lines of the --input of `encode` or `predict` (`read_sentences`); a carriage return left inside a line
    (old Mac line ends: texts run together) is a one-line error naming file:line (`refuse_carriage_returns`)."""
    lines = read_sentences(Path(path), encoding, hint)
    refuse_carriage_returns(path, lines)
    return lines


def save_array(path: Path, array: Any) -> None:
    """Write exactly `path`: .npy (np.save) or .npz (np.savez, key "embeddings"), atomically (`atomic_file`):
    a full disk leaves no file behind, and an existing `path` as it was."""
    import io

    import numpy as np

    with atomic_file(path) as f:
        if path.suffix == ".npz":
            np.savez(f, embeddings=array)
        else:  # through Python's write, not numpy's `tofile`, whose short write on a full disk says no cause
            buffer = io.BytesIO()
            np.save(buffer, array)
            f.write(buffer.getbuffer())


def register(subparsers: Any) -> None:
    """`encode` and `export`."""
    p, (shared, output) = add_command(subparsers, "encode", run_encode, COMMANDS["encode"], check=check_encode)
    p.add_argument(
        "--input",
        type=input_file,
        required=True,
        help="text, one sentence per line (split on \\n or \\r\\n; a lone \\r is refused)",
    )
    add_encoding(p, "utf-8", "encoding of --input")
    p.add_argument(
        "--chunk-size",
        type=positive_int,
        default=10_000,
        help="lines read, encoded and saved at a time to a .npy (float32, binary, ubinary): a run killed "
        "midway continues after its last saved chunk when run again",
    )
    p.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    p.add_argument(
        "--quantize",
        choices=[q for q in QUANTIZATIONS if q != "float32"],
        default=None,
        help="quantise the embeddings (sentence-transformers' quantize_embeddings; default: none, float32)",
    )
    add_encoder(shared)
    add_batch_size(shared, 32, "sentences per forward pass")
    shared.add_argument(
        "--backend",
        choices=["torch", "onnx", "openvino"],
        default=None,
        help="run the backbone with torch, ONNX Runtime (CPU) or OpenVINO (CPU; bf16 with AMX; pip install "
        '"dictembed[openvino]") (default: onnx for an exported folder, else torch)',
    )
    shared.add_argument(
        "--int8",
        action="store_true",
        help=f"with --backend openvino: quantise the network to int8 (nncf), its ranges from the first "
        f"{CALIBRATION_LINES} lines of --input (default: fp32 weights)",
    )
    output.add_argument("--output", type=array_path, required=True, help="the .npy or .npz file to write")
    add_overwrite(output, "replace an existing --output file")

    p, (shared, output) = add_command(subparsers, "export", run_export, COMMANDS["export"], check=check_export)
    p.add_argument("--format", choices=["onnx"], default="onnx", help="export format")
    p.add_argument(
        "--quantize", choices=WEIGHT_QUANTIZATIONS, default=None, help="dynamic int8 quantisation (default: fp32)"
    )
    p.add_argument(
        "--keep-ffn-fp32",
        action="store_true",
        help="with --quantize int8: keep the feed-forward down-projections in fp32 (vectors nearer fp32, slower; "
        "all-mpnet-base-v2's cosine to fp32 0.91 -> 0.99)",
    )
    p.add_argument(
        "--smooth-ffn",
        type=number(float, 0, strict=True, maximum=1),
        nargs="?",
        const=SMOOTH_ALPHA,
        default=0.0,
        metavar="ALPHA",
        help="with --quantize int8: move the feed-forward down-projections' input outliers into their weights "
        f"(SmoothQuant, strength ALPHA in (0, 1], default {SMOOTH_ALPHA}) before quantising them: near "
        "--keep-ffn-fp32's vectors at plain int8's speed (all-mpnet-base-v2's queries, each alone: cosine to fp32 "
        "0.90 -> 0.99)",
    )
    p.add_argument("--no-optimize", action="store_true", help="skip onnxruntime's attention/LayerNorm fusions")
    p.add_argument(
        "--keep-weights",
        action="store_true",
        help="keep the fp32 weights (model.safetensors) beside the graph, for Encoder.load and the torch backend "
        "(default: left out; predict and serve run the graph without them)",
    )
    add_model(shared)
    output.add_argument(
        "--output", required=True, help="folder to write (the model's save, its entry space and definitions, and onnx/)"
    )
    add_overwrite(output, "replace a model already in --output (a folder holding anything else is never replaced)")


def encode_streamed(args: argparse.Namespace) -> Report:
    """`encode` to .npy: chunk by chunk into a memory map, resumable after a kill (`dictembed.streaming`)."""
    from dictembed.streaming import encode_to_npy

    encoder = encoder_of(args)
    quantize = args.quantize or "float32"
    done = encode_to_npy(
        encoder,
        Path(args.input),
        args.output,
        encoding=args.encoding,
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        normalize=args.normalize,
        quantize=quantize,
        show_progress=args.log_level < logging.WARNING,
    )
    rows, dim = done["rows"], done["dim"]
    data = {
        "output": str(args.output),
        "rows": rows,
        "dim": dim,
        "dtype": done["dtype"],
        "quantize": quantize,
        "precision": encoder.compute_precision,
        "device": str(encoder.device),
        "backend": encoder.backend,
        "resumed_from": done["resumed_from"],
    }
    return Report(data, f"wrote {rows} x {dim} {quantize} embeddings to {args.output}")


def encoder_of(args: argparse.Namespace) -> Any:
    """`load_encoder`, with --int8 its OpenVINO network quantised on the first `CALIBRATION_LINES` of --input."""
    encoder = load_encoder(args)
    if args.int8:
        from dictembed.backends.openvino import nncf_int8
        from dictembed.streaming import iter_lines

        read = getattr(args, "sentences", None)  # read by check_encode unless streamed
        lines = read if read is not None else iter_lines(Path(args.input), args.encoding)
        nncf_int8(encoder, list(itertools.islice(lines, CALIBRATION_LINES)))
    return encoder


def streamed(args: argparse.Namespace) -> bool:
    """Whether `encode` writes its --output chunk by chunk (`dictembed.streaming`): a .npy of a per-row quantisation
    (int8/uint8 calibrate over every row: encoded in memory)."""
    return bool(args.output.suffix == ".npy" and (args.quantize or "float32") in STREAMABLE)


def check_encode(args: argparse.Namespace) -> None:
    """An --output that is the --input or would replace a file without --overwrite, an --input that cannot be read
    or holds a carriage return inside a line (encoded in memory: read here, once, `args.sentences`; streamed: a plain
    file searched a chunk at a time), a --model path that is not there: refused before anything loads."""
    if args.output.exists() and Path(args.input).exists() and args.output.samefile(args.input):
        raise UsageError(f"--output {args.output} is the --input file; name another file")
    check_output_file(args.output, args.overwrite)
    if args.int8 and args.backend != "openvino":
        raise UsageError("--int8 quantises an OpenVINO network: add --backend openvino")
    if streamed(args):
        check_readable(args.input)  # read chunk by chunk once the model has loaded
        if is_regular_file(args.input) and (error := lone_carriage_return(args.input, args.encoding)) is not None:
            raise error  # a pipe or FIFO can be read only once: by the encode (`dictembed.streaming`)
        if args.int8 and not Path(args.input).is_file():  # calibration would take lines the encode never sees
            raise UsageError(
                f"--int8 calibrates on the first lines of --input, then reads it again: {args.input} is not a file "
                "(a pipe?); save it to a file first"
            )
    else:
        args.sentences = read_input(args.input, args.encoding)
        if args.quantize in CALIBRATED and len(args.sentences) < 2:
            raise UsageError(f"--quantize {args.quantize} scales to the range of the lines encoded: give two or more")
    check_model(args.model)


def run_encode(args: argparse.Namespace) -> Report:
    if streamed(args):
        return encode_streamed(args)
    sentences = args.sentences  # read by check_encode
    encoder = encoder_of(args)
    quantize = args.quantize or "float32"
    with encoder.autocast():
        vectors = encoder.encode(
            sentences,
            batch_size=args.batch_size,
            show_progress_bar=args.log_level < logging.WARNING,
            normalize_embeddings=args.normalize,
            quantize=quantize,
        )
    save_array(args.output, vectors)
    rows, dim = vectors.shape
    data = {
        "output": str(args.output),
        "rows": rows,
        "dim": dim,
        "dtype": str(vectors.dtype),
        "quantize": quantize,
        "precision": encoder.compute_precision,
        "device": str(encoder.device),
        "backend": encoder.backend,
    }
    return Report(data, f"wrote {rows} x {dim} {quantize} embeddings to {args.output}")


def check_export(args: argparse.Namespace) -> None:
    """An --output that would lose something (an export is a model folder: no other folder is replaced), a --model
    path that is not there: refused before anything loads."""
    if args.keep_ffn_fp32 and args.quantize != "int8":
        raise UsageError("--keep-ffn-fp32 chooses what --quantize int8 leaves in fp32: add --quantize int8")
    if args.smooth_ffn and args.quantize != "int8":
        raise UsageError("--smooth-ffn prepares the down-projections for --quantize int8: add --quantize int8")
    if args.smooth_ffn and args.keep_ffn_fp32:
        raise UsageError("--smooth-ffn and --keep-ffn-fp32 treat the same MatMuls: choose one")
    if args.smooth_ffn and args.no_optimize:
        raise UsageError("--smooth-ffn finds the down-projections in the optimised graph: drop --no-optimize")
    check_output_folder(args.output, args.overwrite)
    check_model(args.model)
    check_outside(args.output, args.model)  # the model's folder is read as the export is written


def run_export(args: argparse.Namespace) -> Report:
    from dictembed.backends.onnx.export import export
    from dictembed.backends.onnx.graph import QuantizeSettings
    from dictembed.backends.onnx.session import exported_file
    from dictembed.model_folder import WEIGHTS_FILE
    from dictembed.paths import default_model

    output = Path(args.output)
    path = export(
        args.model or default_model(),
        output,
        quantize=args.quantize,
        optimize=not args.no_optimize,
        keep_weights=args.keep_weights,
        settings=QuantizeSettings(keep_ffn_output=args.keep_ffn_fp32, smooth_ffn=args.smooth_ffn)
        if args.quantize
        else None,
    )
    file, manifest = exported_file(path)
    data = {"output": str(path), "format": args.format, **manifest, "file": file.relative_to(path).as_posix()}
    data["weights"] = (path / WEIGHTS_FILE).is_file()
    size = file.stat().st_size / 1e6
    return Report(data, f"wrote {path} ({data['file']}, {size:.1f} MB, {args.quantize or 'fp32'})")
