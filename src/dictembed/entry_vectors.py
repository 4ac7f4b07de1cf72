"""The vectors of a DefSent+ definition space (`entry_space.DefinitionSpace.build`), cached (`space_tensors`): every
definition encoded, in parts kept on disk so that an interrupted build resumes (`encode_in_parts`), averaged per
headword (`definition_tensors`), DefSent+'s ICA transform of the averages (`ica_transform`), and each headword's own
vector as a query's (`headword_vectors`), which the reverse dictionary mixes into its ranking."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from dictembed.backends.onnx.runtime import GRAPH_BUILD_BATCH, build_backend, builds_int8, graph_twin, int8_build_key
from dictembed.cache import PartialBuild, cache_key, cached_tensors, headword_parts, space_path
from dictembed.device_choices import BUILD_BACKEND_VARIABLE, build_choice
from dictembed.dictionary.core import Dictionary
from dictembed.distributed import encode_across_processes, process_count
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError
from dictembed.progress import duration
from dictembed.texts import unique_index

log = logging.getLogger(__name__)
ICA_SUFFIX = "-ica"  # ends the kind of an ICA-transformed definition space ("definitions-amp-ica")
# Definitions a part of a resumable build holds (rounded down to whole batches): a part is kept on disk as soon
# as it is encoded, so an interrupted build loses at most one part (about 40 s of WordNet on 2 CPU cores).
PART_SIZE = 10_000
PROBE_TEXTS = 8  # texts of a build its ONNX Runtime twin must encode as the weights do (`builder`)


def space_tensors(
    encoder: Encoder,
    dictionary: Dictionary,
    counts: np.ndarray,
    entries: Literal["ac", "amp"],
    ica: bool,
    cache_dir: str | Path | None,
    batch_size: int,
) -> dict[str, torch.Tensor]:
    """The tensors of a definition space (`DefinitionSpace.build`): the float32 entry `matrix` and, for a plain
    space, the float16 `definitions`; `counts`: the definitions of each entry.

    With `cache_dir` they are cached there, keyed by `cache.cache_key`; concurrent builds of one space are
    serialised by a file lock, and the definitions are encoded in parts kept beside the cache entry until it is
    written, so that an interrupted build resumes from its last part (`encode_in_parts`). The backend that encoded
    them (`builder`: torch, the weights' fp32 graph on ONNX Runtime, or that graph on OpenVINO) is recorded beside
    the entry, not keyed: in one compute precision they give the same vectors, as torch does on any CPU, to float
    (or bf16) rounding, and the precision is keyed; a build asked in int8
    (`$DICTEMBED_BUILD_BACKEND=int8`, `builds_int8`), whose vectors are not the weights', is keyed apart."""
    source: dict[str, Any] = {
        "model": str(getattr(encoder.backbone, "name_or_path", "") or encoder.base_model),
        "base_model": encoder.base_model,
        "dictionary": dictionary.name,
        "entries": entries,
        "ica": ica,
        "entry_count": len(dictionary),
        "definitions": int(counts.sum()),
        "precision": encoder.compute_precision,
    }

    def computed(parts: Path | None) -> dict[str, torch.Tensor]:
        """The tensors computed (no cache lookup of their own); `parts`: where to keep the encoded definitions
        until the space is cached."""
        if ica:  # the ICA space transforms the plain one, which is itself cached
            plain = space_tensors(encoder, dictionary, counts, entries, False, cache_dir, batch_size)["matrix"]
            matrix = ica_transform(plain.double().numpy())
            return {"matrix": torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float32))}
        return definition_tensors(encoder, dictionary, counts, entries, batch_size, parts, source)

    if cache_dir is None:
        return computed(None)
    build = int8_build_key() if int8_build(encoder, entries) else ""
    path = space_path(cache_key(encoder, dictionary, entries, ica, build), cache_dir)
    return cached_tensors(path, computed, source, needs=() if ica else ("definitions",))


def definition_tensors(
    encoder: Encoder,
    dictionary: Dictionary,
    counts: np.ndarray,
    entries: Literal["ac", "amp"],
    batch_size: int,
    parts: Path | None,
    source: dict[str, Any] | None = None,
) -> dict[str, torch.Tensor]:
    """The float32 entry `matrix` of a plain (non-ICA) space, each entry the mean of its definitions' vectors
    ([CLS] for `ac`, mean pooling for `amp`), and the float16 vector of every definition (`definitions`);
    `counts`: the definitions of each entry; `parts`: where to keep the encoded definitions until the space is
    cached (`encode_in_parts`). `batch_size` for torch; a build on the graph (`builder`) takes its own. The
    backend that encoded them goes into `source["backend"]`."""
    definitions = [d for _, d in dictionary.pairs()]
    pooled = entry_encoder(encoder, entries)
    if process_count() > 1:  # each process encodes a share; all end with every vector, in order
        if build_choice() == "int8":
            log.warning("%s=int8: a build across processes runs on torch", BUILD_BACKEND_VARIABLE)
        texts, (back,) = unique_index(definitions)
        with pooled.autocast():  # the encoder's compute precision (fp32: none); vectors come back float32
            vectors = encode_across_processes(pooled, texts, batch_size, show_progress_bar=True)[back]
        backend = pooled.backend
    else:
        what = f"{entries} entry space: {len(definitions):,} definitions of {len(counts):,} entries"
        with builder(pooled, definitions, batch_size) as (runner, size), runner.autocast():
            vectors = encode_in_parts(runner, definitions, size, parts, what)
            backend = build_name(runner)
    if source is not None:
        source["backend"] = backend
    return {
        "matrix": torch.from_numpy(entry_means(vectors, counts)),
        "definitions": torch.from_numpy(np.asarray(vectors, dtype=np.float32)).to(torch.float16),
    }


def entry_encoder(encoder: Encoder, entries: Literal["ac", "amp"]) -> Encoder:
    """`encoder` pooling as an `entries` space's definitions are pooled: [CLS] for AC, the mean for AMP."""
    return encoder.with_pooling("cls" if entries == "ac" else "mean")


def int8_build(encoder: Encoder, entries: Literal["ac", "amp"]) -> bool:
    """Whether an `entries` space built by `encoder` encodes its definitions on the int8 graph (`builds_int8` of the
    encoder as it pools them; a build across processes runs on torch): what its cache entry is keyed by."""
    return process_count() == 1 and builds_int8(entry_encoder(encoder, entries))


def entry_means(vectors: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The float32 mean of each entry's definition vectors (`counts[i]` rows for entry i, one after another),
    summed in float64."""
    owner = np.repeat(np.arange(len(counts)), counts)
    matrix = np.zeros((len(counts), vectors.shape[1]), dtype=np.float64)
    np.add.at(matrix, owner, vectors)
    matrix /= counts[:, None]
    return np.ascontiguousarray(matrix, dtype=np.float32)


def headword_vectors(
    encoder: Encoder, words: list[str], batch_size: int = 256, cache_dir: str | Path | None = None
) -> torch.Tensor:
    """The float16 vector of each of `words` encoded as a description is (the query encoder's own pooling and
    prompt): the reverse dictionary compares a description with the word itself as well as with its definitions
    (`search_options.Ranking.headword_weight`). Encoded in this process alone (a model folder is saved by the main
    one) and not cached, a trained encoder's being its own; while they are encoded their parts are kept in the
    cache (`cache.headword_parts`), so that a save cut short resumes from its last part, and removed after.
    `batch_size` for torch; a build on the graph (`builder`) takes its own."""
    with builder(encoder, words, batch_size) as (runner, size), runner.autocast():
        parts = headword_parts(encoder, words, size, cache_dir)
        vectors = encode_in_parts(runner, words, size, parts, f"headword vectors of {len(words):,} entries", "headword")
    shutil.rmtree(parts, ignore_errors=True)
    return torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)).to(torch.float16)


@contextlib.contextmanager
def builder(encoder: Encoder, texts: list[str], batch_size: int) -> Iterator[tuple[Encoder, int]]:
    """What encodes a build of `texts` by `encoder`, and in batches of how many: `encoder` in batches of
    `batch_size`, or where `build_backend` says "onnx" (or "int8") its twin running the weights' fp32 graph (or
    that graph quantised) on ONNX Runtime (`graph_twin`), and where it says "openvino" its twin running that graph
    compiled by OpenVINO in the encoder's compute precision (`openvino_twin`): checked on the first `PROBE_TEXTS`
    texts (the encoder itself where the export fails or the twin disagrees), in batches of `GRAPH_BUILD_BATCH`,
    logged."""
    backend = build_backend(encoder, len(texts))
    if backend == "torch":
        yield encoder, batch_size
        return
    if backend == "openvino":
        from dictembed.backends.openvino import openvino_twin

        twin_of = openvino_twin(encoder, texts[:PROBE_TEXTS])
        graph = f"OpenVINO, the weights' graph in {encoder.compute_precision}"
    else:
        twin_of = graph_twin(encoder, texts[:PROBE_TEXTS], int8=backend == "int8")
        graph = "the weights' graph quantised to int8" if backend == "int8" else "the weights' fp32 graph"
        graph = f"ONNX Runtime, {graph} ({BUILD_BACKEND_VARIABLE}=torch: on torch)"
    with twin_of as twin:
        if twin is encoder:
            yield encoder, batch_size
            return
        log.info("encoding on %s", graph)
        yield twin, GRAPH_BUILD_BATCH


def build_name(encoder: Encoder) -> str:
    """What a build by `encoder` ran, as the cache's sidecar and a kept build's parts record it: its backend (torch,
    onnx, openvino) and a quantised graph's quantisation (onnx-int8; openvino-int8-nncf)."""
    quantize = encoder.onnx.manifest.get("quantize") if encoder.onnx is not None else None
    return f"{encoder.backend}-{quantize}" if quantize else encoder.backend


def part_sizes(count: int, batch_size: int) -> list[int]:
    """The definitions of each part of a build of `count`: `PART_SIZE` rounded down to whole batches, the last
    part shorter. A part starts at a batch boundary, so parts never change which texts share a batch."""
    size = max(1, PART_SIZE // batch_size) * batch_size
    return [min(size, count - start) for start in range(0, count, size)]


def _cost(texts: list[str], max_length: int) -> np.ndarray:
    """A rough encoding cost per text, for the time estimate: its characters, as many as fit `max_length` tokens
    (about 4 characters a token), and a few for the special tokens."""
    return np.minimum([len(t) for t in texts], 4 * max_length) + 8.0


def encode_in_parts(
    encoder: Encoder, texts: list[str], batch_size: int, parts: Path | None, what: str, unit: str = "definition"
) -> np.ndarray:
    """The float32 vectors of `texts`, in order, bit for bit those of `encoder.encode(texts, batch_size)` for
    distinct texts (each text is encoded once, its repeats given its vector), encoded part by part (`part_sizes`)
    and each part kept in `parts` (`PartialBuild`) when given: a build interrupted (Ctrl-C, a kill, a crash)
    resumes from its last kept part.

    `Encoder.embed` sorts texts by length (longest first, stable) and cuts them into batches; here the whole list
    is sorted once, the same way, and the parts are cut at batch boundaries, so every batch holds the texts it
    holds in one `encode` call (within a part the sort keeps the order). After the first part encoded, the size
    of the build (`what`) and its time left are logged, counted in `unit`s."""
    if all(isinstance(text, str) for text in texts):  # else the encoder's check names the one that is not
        unique, (back,) = unique_index(texts)
        if len(unique) < len(texts):  # a text is encoded once: WordNet's synonyms share their synset's gloss
            log.info("%s: %s distinct texts of %s", what, f"{len(unique):,}", f"{len(texts):,}")
            return encode_in_parts(encoder, unique, batch_size, parts, what, unit)[back]
    count = len(texts)
    order = np.argsort([-len(s) if isinstance(s, str) else 0 for s in texts], kind="stable")
    ordered = [texts[i] for i in order]
    sizes = part_sizes(count, batch_size)
    store = None
    if parts is not None and len(sizes) > 1:  # one part: nothing to resume from before it is done
        layout: dict[str, Any] = {"definitions": count, "batch_size": batch_size, "part_sizes": sizes}
        if encoder.onnx is not None:  # rows of one backend only (a torch build's layout as it always was)
            layout["backend"] = build_name(encoder)
        store = PartialBuild(parts, layout)
    done = store.load(sizes) if store is not None else []
    start = sum(sizes[: len(done)])
    if done:
        kept = f"{len(done)} of {len(sizes)} parts kept"
        log.info("building the %s: resuming at %s %s (%s in %s)", what, unit, f"{start:,}", kept, parts)
    elif store is not None:
        log.info("building the %s in %d parts, kept in %s until it is finished", what, len(sizes), parts)
    prompt = encoder.default_prompt
    first, began = len(done), time.monotonic()
    rest = ordered[start:]
    pieces = encoder.embed(rest, batch_size, prompt, show_progress=True, chunk=sizes[0]) if rest else iter([])
    for index, vectors in enumerate(pieces, start=first):
        part = vectors.numpy()
        if store is not None:
            store.save(index, part)
        done.append(part)
        if index == first and index + 1 < len(sizes):  # the rate of the first part, scaled by the cost left
            cost = _cost(ordered, encoder.max_length)
            end = start + sizes[index]
            elapsed = time.monotonic() - began
            total = elapsed * (1 + cost[end:].sum() / cost[start:end].sum())
            left = f", {count - start:,} of them left" if start else ""
            rate = (count - start) / total
            log.info("building the %s%s, about %s at %.0f %ss/s", what, left, duration(total), rate, unit)
    result = np.empty((count, encoder.dim), dtype=np.float32)
    if done:
        result[order] = np.concatenate(done)
    return result


def ica_transform(matrix: np.ndarray, seed: int = 42, scale: float = 100.0) -> np.ndarray:
    """DefSent+'s ICA entry space: FastICA(whiten='unit-variance', max_iter=1000, seed 42), then × 100."""
    from sklearn.decomposition import FastICA

    if matrix.shape[0] < matrix.shape[1]:
        raise DictEmbedError(
            f"ICA needs at least as many entries as dimensions ({matrix.shape[0]} < {matrix.shape[1]})"
        )
    ica = FastICA(n_components=matrix.shape[1], whiten="unit-variance", max_iter=1000, random_state=seed)
    return ica.fit_transform(matrix) * scale
