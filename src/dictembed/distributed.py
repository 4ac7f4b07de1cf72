"""Encoding shared across the processes of a distributed launch (`torchrun`, `accelerate launch`).

In one process everything here is a plain `Encoder.encode`. Under a launcher (WORLD_SIZE > 1) the sentences
are split into contiguous shares (accelerate's `PartialState.split_between_processes`), each process encodes
its share, and the shares are gathered back in the original order (`torch.distributed.all_gather` of
padded float32 tensors), so every process ends with the same full matrix. Every process must call these
functions, in the same order, with the same sentences: they are collective operations.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
from sentence_transformers import quantize_embeddings

from dictembed.errors import DictEmbedError
from dictembed.quantization import Quantization


def process_count() -> int:
    """The number of processes of this run: 1 outside a distributed launcher."""
    from accelerate.state import PartialState

    return int(PartialState._shared_state.get("num_processes") or os.environ.get("WORLD_SIZE", "1"))


def _state(cpu: bool) -> Any:
    """accelerate's PartialState, which joins the launcher's process group (gloo on the CPU) if not yet joined."""
    from accelerate.state import PartialState

    return PartialState(cpu=cpu)


def _collective_device(state: Any) -> torch.device:
    """Where tensors of a collective operation live: the GPU under nccl, the CPU under gloo."""
    return state.device if state.backend == "nccl" else torch.device("cpu")


def _gather_rows(state: Any, rows: torch.Tensor) -> torch.Tensor:
    """The row blocks of every process stacked in process order (the blocks may differ in length)."""
    import torch.distributed as dist

    device = _collective_device(state)
    count = torch.tensor([rows.shape[0]], dtype=torch.long, device=device)
    counts = [torch.zeros_like(count) for _ in range(state.num_processes)]
    dist.all_gather(counts, count)
    sizes = [int(c.item()) for c in counts]
    padded = torch.zeros((max(sizes), *rows.shape[1:]), dtype=rows.dtype, device=device)
    padded[: rows.shape[0]] = rows.to(device)
    blocks = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(blocks, padded)
    return torch.cat([block[:size].cpu() for block, size in zip(blocks, sizes, strict=True)])


def encode_across_processes(
    encoder: Any,
    sentences: Sequence[str],
    batch_size: int = 32,
    show_progress_bar: bool | None = None,
    normalize_embeddings: bool = False,
    quantize: Quantization = "float32",
) -> np.ndarray:
    """`encoder.encode(sentences, ...)` (an (n, dim) array), with the work split across the processes of a
    distributed launch and the result, identical on every process, in the order of `sentences`.

    Quantisation (`quantize` int8/uint8/binary/ubinary) is applied to the gathered float32 matrix, so its
    calibration sees every row, as in one process. Only the main process shows a progress bar."""
    sentences = list(sentences)
    if process_count() <= 1:
        return encoder.encode(
            sentences,
            batch_size=batch_size,
            show_progress_bar=show_progress_bar,
            normalize_embeddings=normalize_embeddings,
            quantize=quantize,
        )
    state = _state(cpu=encoder.device.type == "cpu")
    with state.split_between_processes(sentences) as share:
        if share:
            vectors = encoder.encode(
                share,
                batch_size=batch_size,
                show_progress_bar=bool(show_progress_bar) and state.is_main_process,
                normalize_embeddings=normalize_embeddings,
            )
        else:  # fewer sentences than processes
            vectors = np.zeros((0, encoder.dim), dtype=np.float32)
    gathered = _gather_rows(state, torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))).numpy()
    if gathered.shape[0] != len(sentences):
        raise DictEmbedError(f"gathered {gathered.shape[0]} vectors for {len(sentences)} sentences")
    if quantize != "float32":
        return cast(np.ndarray, quantize_embeddings(gathered, precision=quantize))  # an array in, an array out
    return gathered


def broadcast_int(value: int, cpu: bool = True) -> int:
    """The main process's `value` on every process (the value itself in one process); `cpu`: whether the
    process group, if it is not joined yet, is the CPU's (gloo)."""
    if process_count() <= 1:
        return value
    import torch.distributed as dist

    tensor = torch.tensor([value], dtype=torch.long, device=_collective_device(_state(cpu=cpu)))
    dist.broadcast(tensor, src=0)
    return int(tensor.item())
