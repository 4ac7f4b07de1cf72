"""Speed: encoding against sentence-transformers, the WordNet entry-space build, and DefSent+ training against
a reference loop written the way the DefSent+ authors' scripts do it, with the compute limit of each, on one
device, in one process.

    python benchmarks/speed.py                                   # everything, CPU, fp32
    python benchmarks/speed.py --parts train,reference --space-cache runs/speed-cache
    python benchmarks/speed.py --device cuda --precision bf16    # a GPU
    python benchmarks/speed.py --random-weights                  # MiniLM's architecture, random weights

- peak: a 2048 x 2048 matmul in the compute dtype, repeated: the machine's measured matmul limit (GFLOP/s).
- encode: `Encoder.encode` against `SentenceTransformer.encode` on the same model and sentences (a seeded
  5,000-definition WordNet sample, and the STS-B test sentences), same device and batch size, interleaved
  repeats; median sentences/s, the ratio, and the useful FLOP/s (real token counts) as % of the peak. Under
  `--precision bf16`/`fp16`, sentence-transformers runs with its weights in that dtype and, a third
  contestant, in fp32 (`ratio_to_fp32`: e.g. bf16 autocast on a CPU with AMX against the fp32 default).
- build: the AMP `DefinitionSpace` over every WordNet definition (no cache): sentences/s and minutes
  (`--build-model EXPORT`: with another model, e.g. `dictembed export --quantize int8`'s folder).
- train: DefSent+ (mean pooling, cosine logits over the 148,730-entry AMP space, batch 16, lr 1e-4) through
  the project's Trainer; examples/s and where a step's time goes (tokenise, encoder forward, entry logits and
  loss, backward, clipping, optimizer, the rest: data loading and Python).
- reference: the same model, data and entry matrix in a plain loop as the DefSent+ scripts do it (every
  batch padded to 150 tokens, no length grouping, torch's default AdamW); the same breakdown.

train and reference take the space from the shared entry-space cache (`--space-cache DIR`: another one); the
build part never reads a cache. Prints
one JSON line per measurement, then a summary line with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from dictembed.dictionary import load_dictionary, seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.evaluation.sts import load_stsb
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.paths import default_model
from dictembed.training import Trainer, TrainSettings

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
REFERENCE_LENGTH = 150  # the DefSent+ scripts pad every batch to this many tokens


def random_minilm(folder: Path) -> str:
    """A sentence-transformers folder with MiniLM's architecture, tokenizer, pooling and Normalize but random
    weights."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    source = default_model()
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(source)).save_pretrained(folder / "backbone")
    AutoTokenizer.from_pretrained(source).save_pretrained(folder / "backbone")
    transformer = st.Transformer(str(folder / "backbone"), max_seq_length=256)
    dim = transformer.get_embedding_dimension()
    SentenceTransformer(modules=[transformer, st.Pooling(dim, "mean"), st.Normalize()], device="cpu").save(
        str(folder / "model"), create_model_card=False
    )
    return str(folder / "model")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(run: Callable[[], object], device: str) -> float:
    """Seconds `run` takes, with the device's queue drained before and after."""
    sync(device)
    start = time.perf_counter()
    run()
    sync(device)
    return time.perf_counter() - start


# ---------------------------------------------------------------- the compute limit
def matmul_peak(device: str, precision: str, n: int = 2048, repeats: int = 10) -> float:
    """GFLOP/s of an n x n matmul in the compute dtype, the best of `repeats`."""
    a = torch.randn(n, n, device=device, dtype=DTYPES[precision])
    b = torch.randn(n, n, device=device, dtype=DTYPES[precision])
    torch.matmul(a, b)
    best = min(timed(lambda: torch.matmul(a, b), device) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def forward_flops(config: Any, lengths: list[int]) -> float:
    """FLOPs of a BERT-style encoder's forward over sentences of these token counts: per layer and token the
    four attention projections (4 d^2 multiply-adds), the feed-forward (2 d f) and the attention itself
    (2 L d); embeddings, norms and softmax are left out (under 1%)."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    macs = sum(length * layers * (4 * d * d + 2 * d * f + 2 * length * d) for length in lengths)
    return 2.0 * macs


def token_counts(encoder: Encoder, sentences: list[str]) -> list[int]:
    """The real (unpadded) token count of each sentence under the encoder's truncation."""
    ids = encoder.tokenizer(sentences, truncation=True, max_length=encoder.max_length)["input_ids"]
    return [len(row) for row in ids]


def train_step_flops(config: Any, lengths: list[int], entries: int, batch_size: int) -> float:
    """FLOPs of one training step per example: forward + backward (twice the forward) through the encoder,
    plus the entry logits (h . M^T) and their gradient toward h (the matrix is frozen)."""
    encoder = 3 * forward_flops(config, lengths) / len(lengths)
    logits = 2 * 2 * config.hidden_size * entries
    return (encoder + logits) * batch_size


# ---------------------------------------------------------------- encode
def encode(model: str, sentence_sets: dict[str, list[str]], args: argparse.Namespace, peak: float) -> dict:
    from sentence_transformers import SentenceTransformer

    ours = Encoder.load(model, device=args.device).set_precision(args.precision)
    theirs = {"sentence-transformers": SentenceTransformer(model, device=args.device)}
    if args.precision != "fp32":  # sentence-transformers' own way: the weights in that dtype; and its fp32
        theirs["sentence-transformers-fp32"] = SentenceTransformer(model, device=args.device)
        theirs["sentence-transformers"] = theirs["sentence-transformers"].to(DTYPES[args.precision])
    summary: dict[str, Any] = {"encode_batch_size": args.batch_size}
    for label, sentences in sentence_sets.items():
        contestants: dict[str, Callable[[], object]] = {
            "dictembed": lambda s=sentences: ours.encode(s, batch_size=args.batch_size)
        }
        for name, st_model in theirs.items():
            contestants[name] = lambda s=sentences, m=st_model: m.encode(s, batch_size=args.batch_size)
        for run in contestants.values():  # warm-up: kernels, allocator, tokenizer caches
            run()
        rates: dict[str, list[float]] = {name: [] for name in contestants}
        for repeat in range(args.repeats):
            for name, run in contestants.items():
                rates[name].append(len(sentences) / timed(run, args.device))
                print(
                    json.dumps(
                        {"part": f"encode-{label}", "contestant": name, "repeat": repeat, "per_s": rates[name][-1]}
                    )
                )
        medians = {name: statistics.median(values) for name, values in rates.items()}
        lengths = token_counts(ours, sentences)
        per_sentence = forward_flops(ours.backbone.config, lengths) / len(lengths)
        summary[f"encode_{label}_n"] = len(sentences)
        summary[f"encode_{label}_mean_tokens"] = round(statistics.mean(lengths), 1)
        for name, rate in medians.items():
            summary[f"encode_{label}_{name}_per_s"] = round(rate, 1)
            summary[f"encode_{label}_{name}_pct_of_peak"] = round(100 * rate * per_sentence / 1e9 / peak, 1)
        summary[f"encode_{label}_ratio"] = round(medians["dictembed"] / medians["sentence-transformers"], 3)
        if "sentence-transformers-fp32" in medians:
            fp32 = medians["sentence-transformers-fp32"]
            summary[f"encode_{label}_ratio_to_fp32"] = round(medians["dictembed"] / fp32, 3)
    return summary


# ---------------------------------------------------------------- build
def build(model: str, dictionary, args: argparse.Namespace, peak: float) -> dict[str, float]:
    encoder = Encoder.load(model, device=args.device).set_precision(args.precision)
    seconds = timed(lambda: DefinitionSpace.build(encoder, dictionary, "amp"), args.device)
    n = dictionary.num_definitions()
    lengths = token_counts(encoder, [d for _, d in dictionary.pairs()])
    useful = forward_flops(encoder.backbone.config, lengths) / seconds / 1e9
    print(json.dumps({"part": "build", "definitions": n, "seconds": seconds}))
    return {
        "build_definitions": n,
        "build_per_s": round(n / seconds, 1),
        "build_minutes": round(seconds / 60, 2),
        "build_pct_of_peak": round(100 * useful / peak, 1),
    }


def entry_space(model: str, dictionary, args: argparse.Namespace) -> DefinitionSpace:
    """The base model's AMP space with cosine logits, from `--space-cache` (default: the shared cache)."""
    cache = args.space_cache
    if cache is None:
        from dictembed.cache import default_cache_dir

        cache = default_cache_dir()
    encoder = Encoder.load(model, device=args.device)
    space = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=cache)
    space.similarity = "cosine"
    return space


# ---------------------------------------------------------------- train: phases
class Phases:
    """Accumulated seconds per named phase; `wrap` times a callable (draining the device queue)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            sync(self.device)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                sync(self.device)
                self.seconds[name] += time.perf_counter() - start

        return timed_call

    def per_step(self, total: float, steps: int, order: list[str]) -> dict[str, float]:
        """Milliseconds per step of each phase (nested ones subtracted by the caller) and of the rest."""
        out = {name: round(1000 * self.seconds[name] / steps, 1) for name in order}
        out["other"] = round(1000 * total / steps - sum(out.values()), 1)
        out["total"] = round(1000 * total / steps, 1)
        return out


PHASES = ["tokenise", "encoder forward", "entry logits + loss", "backward", "clipping", "optimizer"]


def step_summary(
    part: str,
    phases: Phases,
    seconds: float,
    encoder: Encoder,
    examples: list[tuple[str, int]],
    space: DefinitionSpace,
    args: argparse.Namespace,
    peak: float,
) -> dict[str, Any]:
    """Examples/s, % of the peak and the per-step breakdown of `--train-steps` timed steps (after the warm-up
    ones) of a training loop; prints the part's JSON line."""
    breakdown = phases.per_step(seconds, args.train_steps, PHASES)
    timed_texts = [text for text, _ in examples[16 * args.warmup_steps :]]
    flops = train_step_flops(encoder.backbone.config, token_counts(encoder, timed_texts), len(space), 16)
    print(json.dumps({"part": part, "steps": args.train_steps, "seconds": seconds, "breakdown_ms": breakdown}))
    return {
        f"{part}_examples_per_s": round(16 * args.train_steps / seconds, 1),
        f"{part}_pct_of_peak": round(100 * flops * args.train_steps / seconds / 1e9 / peak, 1),
        f"{part}_breakdown_ms": breakdown,
    }


def trainer_run(model: str, dictionary, space: DefinitionSpace, args: argparse.Namespace, peak: float) -> dict:
    """The project's Trainer on `--train-steps` steps after `--warmup-steps`; examples/s and the breakdown."""
    encoder = Encoder.load(model, device=args.device)
    examples = seeded_sample(entry_examples(dictionary, space), 16 * (args.warmup_steps + args.train_steps), 0)
    settings = TrainSettings(lr=1e-4, batch_size=16, seed=0, checkpoint_every=10**9, log_every=10**9)
    grouping: dict[str, Any] = {}
    if args.group_by_length:  # (a keyword older versions of the Trainer do not have)
        settings.group_by_length = True
        grouping["lengths"] = token_counts(encoder, [text for text, _ in examples])
    objective = EntryPrediction(encoder, space)
    phases = Phases(args.device)
    collate = phases.wrap("tokenise", entry_collate(encoder))
    with tempfile.TemporaryDirectory() as run_dir:

        def make(part: slice, name: str) -> Trainer:
            run = Path(run_dir) / name
            place = {"device": args.device, "precision": args.precision}
            lengths = {k: v[part] for k, v in grouping.items()}
            return Trainer(objective, examples[part], collate, settings, run, **place, **lengths)

        make(slice(0, 16 * args.warmup_steps), "warm-up").fit()  # kernels, allocator, the entry matrix
        trainer = make(slice(16 * args.warmup_steps, None), "timed")
        phases.seconds.clear()
        encoder.forward = phases.wrap("encoder forward", encoder.forward)
        objective.forward = phases.wrap("objective", objective.forward)
        accelerator = trainer.accelerator
        accelerator.backward = phases.wrap("backward", accelerator.backward)
        accelerator.clip_grad_norm_ = phases.wrap("clipping", accelerator.clip_grad_norm_)
        trainer.optimizer.step = phases.wrap("optimizer", trainer.optimizer.step)
        trainer.optimizer.zero_grad = phases.wrap("zero_grad", trainer.optimizer.zero_grad)
        seconds = timed(trainer.fit, args.device)
    phases.seconds["entry logits + loss"] = phases.seconds.pop("objective") - phases.seconds["encoder forward"]
    phases.seconds["optimizer"] += phases.seconds.pop("zero_grad")
    return {"train_entries": len(space), **step_summary("train", phases, seconds, encoder, examples, space, args, peak)}


def reference_run(model: str, dictionary, space: DefinitionSpace, args: argparse.Namespace, peak: float) -> dict:
    """A plain loop the way the DefSent+ scripts train: every batch padded to 150 tokens, examples in a seeded
    shuffled order without length grouping, torch's default AdamW, linear schedule, clipping at 1.0."""
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(0)
    encoder = Encoder.load(model, device=args.device)
    examples = seeded_sample(entry_examples(dictionary, space), 16 * (args.warmup_steps + args.train_steps), 0)
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(0)).tolist()
    examples = [examples[i] for i in order]
    optimizer = torch.optim.AdamW([p for p in encoder.parameters() if p.requires_grad], lr=1e-4)
    total = args.warmup_steps + args.train_steps
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.1 * total), total)
    unit = F.normalize(space.matrix.to(args.device), dim=-1)
    phases = Phases(args.device)
    encoder.train()

    def step(batch: list[tuple[str, int]]) -> None:
        texts, labels = zip(*batch, strict=True)
        with_phase = phases.wrap
        inputs = with_phase(
            "tokenise",
            lambda: encoder.tokenizer(
                list(texts), padding="max_length", truncation=True, max_length=REFERENCE_LENGTH, return_tensors="pt"
            ),
        )()
        h = with_phase("encoder forward", lambda: encoder(dict(inputs)))()
        target = torch.tensor(labels, device=args.device)
        loss = with_phase(
            "entry logits + loss", lambda: F.cross_entropy(F.normalize(h, dim=-1) @ unit.T / space.temperature, target)
        )()
        with_phase("backward", loss.backward)()
        with_phase("clipping", lambda: torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0))()
        with_phase("optimizer", lambda: (optimizer.step(), scheduler.step(), optimizer.zero_grad()))()

    batches = [examples[i : i + 16] for i in range(0, len(examples), 16)]
    for batch in batches[: args.warmup_steps]:
        step(batch)
    phases.seconds.clear()
    seconds = timed(lambda: [step(batch) for batch in batches[args.warmup_steps :]], args.device)
    return step_summary("reference", phases, seconds, encoder, examples, space, args, peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--parts", default="peak,encode,build,train,reference")
    parser.add_argument("--n", type=int, default=5000, help="WordNet definitions to encode")
    parser.add_argument("--batch-size", type=int, default=32, help="encode batch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=50)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--group-by-length", action="store_true", help="train: batches grouped by length")
    parser.add_argument("--space-cache", default=None, help="entry-space cache for train/reference (default: shared)")
    parser.add_argument("--precision", choices=list(DTYPES), default="fp32", help="compute precision")
    parser.add_argument("--build-model", default=None, help="build: another model, e.g. an int8 ONNX export")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    load_before = os.getloadavg()
    dictionary = load_dictionary("wordnet")
    definitions = [d for _, d in dictionary.pairs()]
    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu x{torch.get_num_threads()}",
        "random_weights": args.random_weights,
        "precision": args.precision,
        "group_by_length": args.group_by_length,
        "load_average_before": [round(x, 2) for x in load_before],
    }
    peak = matmul_peak(args.device, args.precision)
    summary["peak_gflops"] = round(peak, 1)
    with tempfile.TemporaryDirectory() as scratch:
        model = random_minilm(Path(scratch)) if args.random_weights else default_model()
        if "encode" in parts:
            stsb = load_stsb("test")
            sets = {"wordnet": seeded_sample(definitions, args.n, 0), "stsb": stsb.sentences1 + stsb.sentences2}
            summary.update(encode(model, sets, args, peak))
        if "build" in parts:
            summary.update(build(args.build_model or model, dictionary, args, peak))
        if parts & {"train", "reference"}:
            space = entry_space(model, dictionary, args)
            if "train" in parts:
                summary.update(trainer_run(model, dictionary, space, args, peak))
            if "reference" in parts:
                summary.update(reference_run(model, dictionary, space, args, peak))
    if "train" in parts and "reference" in parts:
        summary["train_vs_reference"] = round(summary["train_examples_per_s"] / summary["reference_examples_per_s"], 2)
    summary["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
