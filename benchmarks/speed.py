"""Speed: encoding against sentence-transformers, the WordNet entry-space build, and DefSent+ training, on
one device, in one process.

    python benchmarks/speed.py --device cuda --parts encode,build,train --precision bf16
    python benchmarks/speed.py --random-weights   # MiniLM's architecture with random weights: the same
                                                  # speed, for machines the 88 MB weights cannot reach

- encode: `Encoder.encode` against `SentenceTransformer.encode` on the same model, a seeded sample of WordNet
  definitions, the same device and batch size, interleaved repeats; the median sentences/s and the ratio.
- build: the AMP `DefinitionSpace` over every WordNet definition (no cache): sentences/s and minutes.
- train: DefSent+ (mean pooling, cosine logits against the 148,730-entry AMP space, batch 16) through the
  project's Trainer for `--train-steps` steps after `--warmup-steps`: examples/s.

Prints one JSON line per measurement, then a summary line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from dictembed.dictionary import load_dictionary, seeded_sample
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.objectives.entry_prediction import EntryPrediction, entry_collate, entry_examples
from dictembed.paths import default_model
from dictembed.training import Trainer, TrainSettings


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


def timed(run: Callable[[], object], device: str) -> float:
    """Seconds `run` takes, with the device's queue drained before and after."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def encode(model: str, definitions: list[str], args: argparse.Namespace) -> dict[str, float]:
    from sentence_transformers import SentenceTransformer

    sentences = seeded_sample(definitions, args.n, 0)
    ours = Encoder.load(model, device=args.device).set_precision(args.precision)
    theirs = SentenceTransformer(model, device=args.device)
    if args.precision != "fp32":  # sentence-transformers' own way: the weights in that dtype
        theirs = theirs.to({"bf16": torch.bfloat16, "fp16": torch.float16}[args.precision])
    contestants = {
        "dictembed": lambda: ours.encode(sentences, batch_size=args.batch_size),
        "sentence-transformers": lambda: theirs.encode(sentences, batch_size=args.batch_size),
    }
    for run in contestants.values():  # warm-up: kernels, allocator, tokenizer caches
        run()
    rates: dict[str, list[float]] = {name: [] for name in contestants}
    for repeat in range(args.repeats):
        for name, run in contestants.items():
            rates[name].append(len(sentences) / timed(run, args.device))
            print(json.dumps({"part": "encode", "contestant": name, "repeat": repeat, "per_s": rates[name][-1]}))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "encode_n": len(sentences),
        "encode_batch_size": args.batch_size,
        **{f"encode_{name}_per_s": round(rate, 1) for name, rate in medians.items()},
        "encode_ratio": round(medians["dictembed"] / medians["sentence-transformers"], 3),
    }


def build(model: str, dictionary, args: argparse.Namespace) -> tuple[dict[str, float], DefinitionSpace]:
    encoder = Encoder.load(model, device=args.device).set_precision(args.precision)
    holder: list[DefinitionSpace] = []
    seconds = timed(lambda: holder.append(DefinitionSpace.build(encoder, dictionary, "amp")), args.device)
    n = dictionary.num_definitions()
    print(json.dumps({"part": "build", "definitions": n, "seconds": seconds}))
    return {"build_definitions": n, "build_per_s": round(n / seconds, 1), "build_minutes": round(seconds / 60, 2)}, (
        holder[0]
    )


def train(model: str, dictionary, space: DefinitionSpace, args: argparse.Namespace) -> dict[str, float]:
    space.similarity = "cosine"
    encoder = Encoder.load(model, device=args.device)
    examples = seeded_sample(entry_examples(dictionary, space), 16 * (args.warmup_steps + args.train_steps), 0)
    settings = TrainSettings(lr=1e-4, batch_size=16, seed=0, checkpoint_every=10**9)
    objective, collate = EntryPrediction(encoder, space), entry_collate(encoder)
    with tempfile.TemporaryDirectory() as run_dir:

        def make(part: list, name: str) -> Trainer:
            run = Path(run_dir) / name
            return Trainer(objective, part, collate, settings, run, device=args.device, precision=args.precision)

        make(examples[: 16 * args.warmup_steps], "warm-up").fit()  # kernels, allocator, the entry matrix
        trainer = make(examples[16 * args.warmup_steps :], "timed")
        seconds = timed(trainer.fit, args.device)
    rate = 16 * args.train_steps / seconds
    print(json.dumps({"part": "train", "steps": args.train_steps, "seconds": seconds, "examples_per_s": rate}))
    return {"train_entries": len(space), "train_examples_per_s": round(rate, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--parts", default="encode,build,train")
    parser.add_argument("--n", type=int, default=5000, help="sentences to encode")
    parser.add_argument("--batch-size", type=int, default=32, help="encode batch size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=50)
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32", help="compute precision")
    args = parser.parse_args()
    parts = set(args.parts.split(","))

    dictionary = load_dictionary("wordnet")
    definitions = [d for _, d in dictionary.pairs()]
    summary: dict[str, object] = {
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else f"cpu x{torch.get_num_threads()}",
        "random_weights": args.random_weights,
        "precision": args.precision,
    }
    with tempfile.TemporaryDirectory() as scratch:
        model = random_minilm(Path(scratch)) if args.random_weights else default_model()
        if "encode" in parts:
            summary.update(encode(model, definitions, args))
        if parts & {"build", "train"}:
            measured, space = build(model, dictionary, args)
            summary.update(measured)
            if "train" in parts:
                summary.update(train(model, dictionary, space, args))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
