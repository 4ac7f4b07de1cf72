"""The entry-prediction loss alone: `chunked_cross_entropy` at several block sizes against `F.cross_entropy`
over the full logits, forward and backward, on a WordNet-sized frozen matrix (148,730 x 384), batch 16, with
unit queries and rows scaled by 20 as in the cosine space (wider logits would make exp() underflow to
subnormal floats, which x86 multiplies slowly). Prints one JSON line per contestant: median milliseconds per step.

    python benchmarks/chunked_loss.py                       # the CPU
    python benchmarks/chunked_loss.py --device cuda --precision bf16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from speed import timed  # benchmarks/speed.py: seconds with the device's queue drained

from dictembed.chunked_softmax import chunked_cross_entropy


def _step_ms(step: Callable[[], None], device: torch.device, repeats: int, warmup: int) -> float:
    """Median milliseconds of `step` over `repeats`, after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    return statistics.median(1000 * timed(step, str(device)) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--rows", type=int, default=148_730)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--chunks", default="2048,8192,32768,0", help="block sizes; 0 means one block")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    weights = F.normalize(torch.randn(args.rows, args.dim, generator=generator), dim=1).to(device, dtype)
    q0 = F.normalize(torch.randn(args.batch_size, args.dim, generator=generator), dim=1).to(device)
    labels = torch.randint(0, args.rows, (args.batch_size,), generator=generator).to(device)
    scale = 20.0  # the cosine space's 1 / temperature: unit queries, so the logits stay in [-20, 20]

    def plain() -> None:
        q = q0.clone().requires_grad_()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            logits = scale * (q @ weights.T)
        F.cross_entropy(logits.float(), labels).backward()

    def chunked(chunk: int) -> None:
        q = q0.clone().requires_grad_()
        loss, _ = chunked_cross_entropy(scale * q, weights, labels, chunk=chunk or args.rows)
        loss.backward()

    common = {"device": str(device), "precision": args.precision, "rows": args.rows, "batch_size": args.batch_size}
    common["load_average"] = os.getloadavg()[0]
    ms = _step_ms(plain, device, args.repeats, args.warmup)
    print(json.dumps({**common, "loss": "F.cross_entropy", "ms_per_step": round(ms, 3)}), flush=True)
    for chunk in (int(c) for c in args.chunks.split(",")):
        ms = _step_ms(lambda c=chunk: chunked(c), device, args.repeats, args.warmup)
        print(json.dumps({**common, "loss": "chunked", "chunk": chunk or args.rows, "ms_per_step": round(ms, 3)}))


if __name__ == "__main__":
    main()
