"""int8 inference backends against sentence-transformers fp32: sentences/s on the same sentences with the same
threads, in one process, and the quality each keeps.

    python benchmarks/int8_backends.py                                  # all-MiniLM-L6-v2 (embedded), STS-B test
    python benchmarks/int8_backends.py --model all-mpnet-base-v2 --sts-avg --json mpnet.json
    python benchmarks/int8_backends.py --quick                          # a smoke test (128 sentences, 50 pairs)

Contestants (each one that cannot run, e.g. a package not installed, is reported with the reason and skipped):
- `st_fp32`: `SentenceTransformer.encode`, torch fp32: the baseline of every ratio;
- `onnx_fp32`, `onnx_int8_dynamic`: dictembed's export (`dictembed.backends.onnx.export`: fused graph; dynamic
  int8 of MatMul/Attention with the export's settings), run through `Encoder` on ONNX Runtime;
- `onnx_int8_smooth`: the export's `--smooth-ffn` (the down-projections' input outliers moved into their weights,
  `backends.onnx.smoothing`, strength `SMOOTH_ALPHA`, ranges over the export's calibration descriptions), then
  the same dynamic int8;
- `onnx_int8_static`: the same fused fp32 graph through `onnxruntime.quantization.quantize_static` (QDQ, MatMul,
  per-channel 7-bit weights, MinMax ranges over `--calibration` sentences: WordNet definitions, no STS file),
  the feed-forward down-projections kept fp32; `onnx_int8_static_all`: every MatMul quantised;
- `openvino_fp32`, `openvino_int8`: the fused fp32 graph read by OpenVINO (`INFERENCE_PRECISION_HINT` f32, so no
  bf16 on AMX CPUs), and its `nncf.quantize` (transformer preset, the same calibration sentences), run through
  `Encoder` as well (its tokenisation, length-sorted batches and pooling; only the backbone forward differs);
- `st_openvino`: `SentenceTransformer(backend="openvino")` (optimum-intel; it needs transformers < 5.6);
- on a CPU that computes bf16 natively (AMX or AVX512_BF16) two native-format contestants: `torch_bf16`, dictembed's
  `Encoder` under bf16 autocast (what `--precision auto` runs on AMX), `openvino_bf16`, the fused fp32 graph with
  OpenVINO's `INFERENCE_PRECISION_HINT` bf16, and `openvino_int8_bf16`, the nncf model with that hint (its
  unquantised operations in bf16).
Speed: `--limit` STS-B test sentences, one warm-up and `--repeats` interleaved timed encodes, the median
sentences/s and its ratio to `st_fp32`. Quality: STS-B dev cosine Spearman x 100 (the first `--dev-pairs`
pairs), the cosine of each contestant's vectors to `st_fp32`'s, and with `--sts-avg` the 7-task STS avg
(`dictembed.evaluation.sts.evaluate_sts`). Prints the CPU, versions and load average (benchmarks/machine.py);
one JSON document on stdout, progress on stderr; `--json FILE` writes it too.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from machine import cpu, finish, has_fast_bf16, load_average, machine

from dictembed.backends.onnx.export import calibration_batches, feed_batches
from dictembed.backends.onnx.graph import QuantizeSettings, ffn_output_matmuls, quantize_int8
from dictembed.backends.onnx.runtime import OnnxBackbone, exported_file, physical_cores
from dictembed.backends.openvino import OpenVinoBackbone, nncf_int8, openvino_core
from dictembed.dictionary import load_dictionary, seeded_sample
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.evaluation.sts import evaluate_sts, load_stsb, predict_similarities, spearman100
from dictembed.paths import EMBEDDED_MODEL, default_model
from dictembed.quantization import SMOOTH_ALPHA

Encode = Callable[[list[str]], np.ndarray]


class Contestant:
    """An `encode(sentences) -> array` for the timing loop and `evaluate_sts`."""

    def __init__(self, run: Encode) -> None:
        self.run = run

    def encode(self, sentences: list[str], **_: Any) -> np.ndarray:
        return self.run(list(sentences))


def resolve(name: str) -> str:
    """A local folder for `name`: the embedded MiniLM for its Hub name, a prepared offline model
    (`dictembed models prepare`) for its name, else `name` itself."""
    if name == EMBEDDED_MODEL:
        return default_model()
    from dictembed.offline_models import local_folder

    try:
        folder = local_folder(name.removeprefix("sentence-transformers/"))
    except DictEmbedError as err:  # an offline model not prepared: the message says how
        raise SystemExit(f"int8_backends: {err}") from None
    return str(folder) if folder is not None else name


def with_graph(model: str, graph: Path, threads: int) -> Encoder:
    """The model's encoder (its tokenizer and pooling) running `graph` on ONNX Runtime with `threads` threads."""
    encoder = Encoder.load(model, device="cpu", backend="torch").eval()
    encoder.onnx = OnnxBackbone(graph, threads, {"file": graph.name})
    return encoder


def static_int8(fp32: Path, target: Path, feeds: list[dict], keep_ffn_out: bool) -> Path:
    """`quantize_static` of the fp32 graph (after onnxruntime's symbolic shape inference, which knows the fused
    ops, so every MatMul's input gets a range): QDQ, MatMul only, per-channel 7-bit QInt8 weights, QUInt8
    activations with MinMax ranges over `feeds`. `keep_ffn_out`: the MatMuls fed by a GELU (the feed-forward
    down-projections, whose inputs have outliers) stay fp32; quantised, the vectors' cosine to fp32 falls to
    about 0.94 on MiniLM."""
    import onnx
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self.rows = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self.rows, None)

    inferred = target.with_suffix(".inferred.onnx")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # one warning per tensor otherwise
    try:
        quant_pre_process(str(fp32), str(inferred), skip_optimization=True)
        nodes = onnx.load(str(inferred), load_external_data=False).graph.node
        keep = ffn_output_matmuls(nodes) if keep_ffn_out else []
        q.quantize_static(
            str(inferred),
            str(target),
            Reader(),
            quant_format=q.QuantFormat.QDQ,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=keep,
            per_channel=True,
            reduce_range=True,
            activation_type=q.QuantType.QUInt8,
            weight_type=q.QuantType.QInt8,
            calibrate_method=q.CalibrationMethod.MinMax,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        root.setLevel(level)
    note(quantized=target.stem, matmuls_kept_fp32=len(keep))
    return target


def openvino_encoder(model: str, backbone: OpenVinoBackbone, precision: str = "f32") -> Encoder:
    """The model's encoder running `backbone` with OpenVINO's inference precision hint `precision` (f32 or bf16,
    which the encoder's compute precision selects), compiled now, not in the first encode."""
    encoder = Encoder.load(model, device="cpu", backend="torch").eval()
    backbone.compiled(precision)
    encoder.onnx = backbone
    return encoder.set_precision("bf16" if precision == "bf16" else "fp32")


def contestants(path: str, scratch: Path, args: argparse.Namespace) -> tuple[dict[str, Contestant], dict[str, str]]:
    """Each contestant that can run, and for the others the reason they were skipped."""
    from sentence_transformers import SentenceTransformer

    size = args.batch_size
    ready: dict[str, Contestant] = {}
    skipped: dict[str, str] = {}
    st = SentenceTransformer(path, device="cpu")
    ready["st_fp32"] = Contestant(lambda s: st.encode(s, batch_size=size, show_progress_bar=False))

    def of(encoder: Encoder) -> Contestant:
        return Contestant(lambda s: encoder.encode(s, batch_size=size, show_progress_bar=False))

    native_bf16 = has_fast_bf16(cpu())
    if native_bf16:
        ready["torch_bf16"] = of(Encoder.load(path, device="cpu", backend="torch").eval().set_precision("bf16"))
    else:
        emulated = "this CPU emulates bf16 (no AMX, no AVX512_BF16)"
        skipped |= dict.fromkeys(("torch_bf16", "openvino_bf16", "openvino_int8_bf16"), emulated)

    try:
        from dictembed.backends.onnx.export import export

        folder = export(path, scratch / "onnx_fp32")
    except (ImportError, DictEmbedError) as err:  # `require` names the missing extra
        reason = f"not installed ({' '.join(str(err).split())[:160]})"
        return ready, dict.fromkeys(
            ("onnx_fp32", "onnx_int8_dynamic", "onnx_int8_smooth", "onnx_int8_static", "openvino"), reason
        )
    fp32, manifest = exported_file(folder)
    ready["onnx_fp32"] = of(with_graph(path, fp32, args.threads))
    dynamic = scratch / "dynamic.onnx"
    quantize_int8(fp32, dynamic, QuantizeSettings())
    ready["onnx_int8_dynamic"] = of(with_graph(path, dynamic, args.threads))
    smooth = scratch / "smooth.onnx"  # the export's `--smooth-ffn`: the same calibration as the product's
    tokenizing = Encoder.load(path, device="cpu", backend="torch")  # its tokenizer and prompt, for calibration
    quantize_int8(
        fp32, smooth, QuantizeSettings(smooth_ffn=SMOOTH_ALPHA), calibration_batches(tokenizing, manifest["inputs"])
    )
    ready["onnx_int8_smooth"] = of(with_graph(path, smooth, args.threads))
    calibration = seeded_sample([d for _, d in load_dictionary("wordnet").pairs()], args.calibration, 1)
    feeds = feed_batches(tokenizing, manifest["inputs"], calibration)
    for name, keep_ffn_out in (("onnx_int8_static", True), ("onnx_int8_static_all", False)):
        try:
            static = static_int8(fp32, scratch / f"{name}.onnx", feeds, keep_ffn_out)
            ready[name] = of(with_graph(path, static, args.threads))
        except Exception as err:  # onnxruntime's quantiser on a graph it cannot handle
            skipped[name] = f"failed ({type(err).__name__}: {' '.join(str(err).split())[:160]})"
    try:
        import nncf  # noqa: F401
        import openvino  # noqa: F401
    except ImportError as err:
        skipped["openvino_fp32"] = skipped["openvino_int8"] = f"not installed ({err.name}): pip install openvino nncf"
    else:
        graph = OpenVinoBackbone(openvino_core().read_model(str(fp32)), args.threads)
        ready["openvino_fp32"] = of(openvino_encoder(path, graph))
        start = time.perf_counter()
        int8 = nncf_int8(openvino_encoder(path, graph), calibration)  # the product's (`backends.openvino`)
        ready["openvino_int8"] = of(int8)
        note(quantized="openvino_int8", seconds=round(time.perf_counter() - start, 1))
        if native_bf16:  # the same networks, compiled with the bf16 hint
            ready["openvino_bf16"] = of(openvino_encoder(path, graph, "bf16"))
            ready["openvino_int8_bf16"] = of(openvino_encoder(path, int8.onnx, "bf16"))
    try:
        config = {"INFERENCE_NUM_THREADS": args.threads, "INFERENCE_PRECISION_HINT": "f32"}
        ov_st = SentenceTransformer(path, device="cpu", backend="openvino", model_kwargs={"ov_config": config})
        ready["st_openvino"] = Contestant(lambda s: ov_st.encode(s, batch_size=size, show_progress_bar=False))
    except Exception as err:  # optimum-intel missing, or one that does not import with these transformers
        skipped["st_openvino"] = f"not available ({type(err).__name__}: {' '.join(str(err).split())[:160]})"
    return ready, skipped


def note(**fields: Any) -> None:
    print(json.dumps(fields), file=sys.stderr, flush=True)


def cosine_to(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1)
    return {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="Hub name, offline model or folder (default: MiniLM)")
    parser.add_argument("--limit", type=int, default=None, help="STS-B test sentences to time (default: all 2,758)")
    parser.add_argument("--dev-pairs", type=int, default=None, help="STS-B dev pairs for quality (default: all)")
    parser.add_argument("--calibration", type=int, default=300, help="WordNet definitions to calibrate static int8")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=physical_cores(), help="threads of every backend")
    parser.add_argument("--sts-avg", action="store_true", help="also the 7-task STS avg of each contestant")
    parser.add_argument("--quick", action="store_true", help="smoke test: 128 sentences, 50 dev pairs, 1 repeat")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the result here")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.dev_pairs, args.calibration, args.repeats = 128, 50, 16, 1
    result: dict[str, Any] = {"benchmark": "int8_backends", **machine(), "model": args.model, "threads": args.threads}
    torch.set_num_threads(args.threads)
    test, dev = load_stsb("test"), load_stsb("dev")
    sentences = (test.sentences1 + test.sentences2)[: args.limit]
    pairs = slice(0, args.dev_pairs)
    dev.sentences1, dev.sentences2, dev.scores = dev.sentences1[pairs], dev.sentences2[pairs], dev.scores[pairs]
    with tempfile.TemporaryDirectory() as scratch:
        ready, skipped = contestants(resolve(args.model), Path(scratch), args)
        vectors = {name: c.encode(sentences) for name, c in ready.items()}  # warm-up; compared below
        rates: dict[str, list[float]] = {name: [] for name in ready}
        for repeat in range(args.repeats):
            for name, contestant in ready.items():
                start = time.perf_counter()
                contestant.encode(sentences)
                rates[name].append(len(sentences) / (time.perf_counter() - start))
                note(contestant=name, repeat=repeat, per_s=round(rates[name][-1], 1))
        result["load_average_after_speed"] = load_average()
        table: dict[str, Any] = {}
        base = statistics.median(rates["st_fp32"])
        for name, contestant in ready.items():
            rate = statistics.median(rates[name])
            (predicted,) = predict_similarities(contestant, [dev])
            row: dict[str, Any] = {"per_s": round(rate, 1), "ratio_to_st_fp32": round(rate / base, 2)}
            row["stsb_dev"] = round(spearman100(predicted, dev.scores), 2)
            row["cosine_to_st_fp32"] = cosine_to(vectors[name], vectors["st_fp32"])
            if args.sts_avg:
                row["sts"] = {k: round(v, 2) for k, v in evaluate_sts(contestant).items()}
            table[name] = row
            note(contestant=name, **row)
    result |= {"sentences": len(sentences), "dev_pairs": len(dev), "batch_size": args.batch_size}
    result |= {"calibration": args.calibration, "contestants": table, "skipped": skipped}
    finish(result, args.json)


if __name__ == "__main__":
    main()
