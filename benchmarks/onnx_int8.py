"""ONNX Runtime int8 against torch fp32 on the CPU, in one process, interleaved repeats.

    python benchmarks/onnx_int8.py                       # 3,000 WordNet definitions + STS-B test, STS avg
    python benchmarks/onnx_int8.py --sts-tasks STSB      # a quicker STS check
    python benchmarks/onnx_int8.py --variants            # also time other quantisation settings
    python benchmarks/onnx_int8.py --profile             # where an int8 encode's time goes

Contestants, all on the same sentences with the same batch size and threads: `Encoder` torch fp32,
`SentenceTransformer` fp32, the ONNX fp32 export and the ONNX int8 export (both through `Encoder`, so the
tokenisation and length-sorted batching are the torch encoder's and only the backbone forward differs).
Reports the median sentences/s per contestant and sentence set, the ratios to torch and to
sentence-transformers, the mean/min cosine of int8 (and fp32 ONNX) to torch fp32, the STS avg of torch fp32
and ONNX int8 (`dictembed.evaluation.sts.evaluate_sts`) and the load average before and after. Progress
goes to stderr; stdout is one JSON summary line.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dictembed.backends.onnx.export import QuantizeSettings, export
from dictembed.backends.onnx.runtime import attach, physical_cores
from dictembed.dictionary import load_dictionary, seeded_sample
from dictembed.encoder import Encoder
from dictembed.evaluation.sts import evaluate_sts, load_stsb
from dictembed.paths import default_model

VARIANTS = {  # quantisation settings compared with --variants (the export's defaults are QuantizeSettings())
    "matmul": QuantizeSettings(op_types=["MatMul"], per_channel=False, reduce_range=False),
    "matmul_per_channel": QuantizeSettings(op_types=["MatMul"], per_channel=True, reduce_range=False),
    "matmul_per_channel_reduce_range": QuantizeSettings(op_types=["MatMul"], per_channel=True, reduce_range=True),
    "matmul_per_channel_quint8": QuantizeSettings(
        op_types=["MatMul"], per_channel=True, weight_type="QUInt8", reduce_range=False
    ),
    "matmul_attention": QuantizeSettings(op_types=["MatMul", "Attention"], per_channel=False, reduce_range=False),
    "matmul_attention_per_channel_8bit": QuantizeSettings(op_types=["MatMul", "Attention"], reduce_range=False),
    "matmul_attention_per_channel_fp32_last": QuantizeSettings(
        op_types=["MatMul", "Attention"], per_channel=True, exclude_last_layers=1
    ),
}


def note(**fields: Any) -> None:
    print(json.dumps(fields), file=sys.stderr, flush=True)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def onnx_encoder(folder: Path, threads: int) -> Encoder:
    """The exported folder loaded like `Encoder.load(folder)`, with `threads` ONNX Runtime threads (a lone
    batch's intra-op threads, and how many single-threaded batches `encode` runs at once)."""
    return attach(Encoder.load(folder, device="cpu", backend="torch"), folder, threads=threads)


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1)
    return {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)}


def profile_int8(folder: Path, sentences: list[str], batch_size: int, threads: int) -> dict[str, Any]:
    """Where one int8 encode of `sentences` goes: the main thread's share of the wall time spent tokenising,
    the worker threads' busy share (ONNX Runtime's run, summed over the `threads` workers, over `threads` x
    the wall time), and the run's time per operator type from onnxruntime's own profiler (its share of the
    summed node times)."""
    import onnxruntime as ort

    from dictembed.backends.onnx.session import session_options

    encoder = onnx_encoder(folder, threads)
    backbone = encoder.onnx
    options = session_options(1)  # the single-threaded session, which encode's worker threads run
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "ort_profile")
    backbone.single = ort.InferenceSession(str(backbone.path), sess_options=options, providers=["CPUExecutionProvider"])
    if backbone.threads == 1:  # encode then runs its batches one at a time on `session`
        backbone.session = backbone.single
    encoder.encode(sentences[:256], batch_size=batch_size, show_progress_bar=False)  # warm-up (in the op shares)
    seconds: dict[str, float] = {"tokenise": 0.0, "onnxruntime run": 0.0}
    lock = threading.Lock()  # the runs time themselves on several threads

    def timed_call(name: str, function: Callable) -> Callable:
        def call(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                with lock:
                    seconds[name] += time.perf_counter() - start

        return call

    encoder.tokenize = timed_call("tokenise", encoder.tokenize)
    run = backbone.single.run
    backbone.single.run = timed_call("onnxruntime run", run)  # type: ignore[method-assign]
    start = time.perf_counter()
    encoder.encode(sentences, batch_size=batch_size, show_progress_bar=False)
    total = time.perf_counter() - start
    trace = json.loads(Path(backbone.single.end_profiling()).read_text())
    by_op: dict[str, float] = {}
    for event in trace:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            op = event.get("args", {}).get("op_name", "?")
            by_op[op] = by_op.get(op, 0.0) + event.get("dur", 0) / 1e6
    node_total = sum(by_op.values()) or 1.0
    return {
        "sentences": len(sentences),
        "per_s": round(len(sentences) / total, 1),
        "wall_ms": round(1000 * total, 1),
        "threads": backbone.threads,
        "tokenise_share_of_wall": round(seconds["tokenise"] / total, 3),
        "onnxruntime_run_share_of_thread_time": round(seconds["onnxruntime run"] / (total * backbone.threads), 3),
        "operator_share_of_node_time": {
            op: round(value / node_total, 3) for op, value in sorted(by_op.items(), key=lambda kv: -kv[1])
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: the embedded all-MiniLM-L6-v2")
    parser.add_argument("--n", type=int, default=3000, help="WordNet definitions to encode")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    threads_help = "torch threads; ONNX Runtime: a lone batch's intra-op threads, and batches run at once"
    parser.add_argument("--threads", type=int, default=physical_cores(), help=threads_help)
    parser.add_argument("--sts-tasks", default="all", help="comma list for the STS avg, 'all' or 'none'")
    parser.add_argument("--variants", action="store_true", help="also time the quantisation settings in VARIANTS")
    parser.add_argument("--no-optimize", action="store_true", help="skip onnxruntime's transformer fusions")
    parser.add_argument(
        "--profile", action="store_true", help="only profile the int8 export on the WordNet sample (profile_int8)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    model = args.model or default_model()
    torch.set_num_threads(args.threads)
    load_before = load_average()

    dictionary = load_dictionary("wordnet")
    stsb = load_stsb("test")
    sets = {
        "wordnet": seeded_sample([d for _, d in dictionary.pairs()], args.n, 0),
        "stsb": stsb.sentences1 + stsb.sentences2,
    }
    scratch = tempfile.TemporaryDirectory()
    if args.profile:
        folder = export(model, Path(scratch.name) / "int8", quantize="int8", optimize=not args.no_optimize)
        found = profile_int8(folder, sets["wordnet"], args.batch_size, args.threads)
        print(json.dumps({"benchmark": "onnx_int8 --profile", **found, "load_average": [load_before, load_average()]}))
        return
    exports: dict[str, tuple[str | None, QuantizeSettings | None]] = {
        "onnx_fp32": (None, None),
        "onnx_int8": ("int8", None),
    }
    if args.variants:
        exports |= {f"int8_{name}": ("int8", settings) for name, settings in VARIANTS.items()}
    encoders: dict[str, Any] = {"torch": Encoder.load(model, device="cpu", backend="torch")}
    from sentence_transformers import SentenceTransformer

    encoders["sentence_transformers"] = SentenceTransformer(model, device="cpu")
    for name, (quantize, settings) in exports.items():
        start = time.perf_counter()
        folder = export(
            model, Path(scratch.name) / name, quantize=quantize, optimize=not args.no_optimize, settings=settings
        )
        encoders[name] = onnx_encoder(folder, args.threads)
        note(export=name, seconds=round(time.perf_counter() - start, 1))

    runs: dict[tuple[str, str], Callable[[], Any]] = {}
    for set_name, sentences in sets.items():
        for name, encoder in encoders.items():
            runs[(set_name, name)] = lambda e=encoder, s=sentences: e.encode(
                s, batch_size=args.batch_size, show_progress_bar=False
            )
    vectors = {key: run() for key, run in runs.items()}  # warm-up, and the vectors compared below
    rates: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    for repeat in range(args.repeats):
        for (set_name, name), run in runs.items():
            start = time.perf_counter()
            run()
            rates[(set_name, name)].append(len(sets[set_name]) / (time.perf_counter() - start))
            note(set=set_name, contestant=name, repeat=repeat, per_s=round(rates[(set_name, name)][-1], 1))

    speed: dict[str, Any] = {}
    for set_name in sets:
        median = {name: statistics.median(rates[(set_name, name)]) for name in encoders}
        speed[set_name] = {
            "n": len(sets[set_name]),
            "per_s": {name: round(rate, 1) for name, rate in median.items()},
            "vs_torch": {name: round(rate / median["torch"], 2) for name, rate in median.items()},
            "vs_sentence_transformers": {
                name: round(rate / median["sentence_transformers"], 2) for name, rate in median.items()
            },
            "cosine_to_torch": {
                name: cosines(vectors[(set_name, name)], vectors[(set_name, "torch")])
                for name in encoders
                if name.startswith(("onnx", "int8"))
            },
            "int8_cosine_to_onnx_fp32": cosines(vectors[(set_name, "onnx_int8")], vectors[(set_name, "onnx_fp32")]),
        }
    load_after_speed = load_average()

    sts: dict[str, Any] = {}
    if args.sts_tasks != "none":
        tasks = None if args.sts_tasks == "all" else args.sts_tasks.split(",")
        for name in ("torch", "onnx_int8"):
            sts[name] = {k: round(v, 2) for k, v in evaluate_sts(encoders[name], tasks=tasks).items()}
            note(sts=name, **sts[name])
        sts["avg_change"] = round(sts["onnx_int8"]["avg"] - sts["torch"]["avg"], 2)

    summary = {
        "benchmark": "onnx_int8",
        "model": str(args.model or "all-MiniLM-L6-v2 (embedded)"),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "optimized": not args.no_optimize,
        "int8_settings": vars(QuantizeSettings()),
        "fused": encoders["onnx_fp32"].onnx.manifest.get("optimized"),
        "speed": speed,
        "sts": sts,
        "load_average": {"before": load_before, "after_speed": load_after_speed, "after": load_average()},
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "onnxruntime": encoders["onnx_int8"].onnx.manifest.get("onnxruntime"),
    }
    print(json.dumps(summary))
    scratch.cleanup()


if __name__ == "__main__":
    main()
