"""A stand-in for a wide-encoder tier's served folder, for timing it where encoding a whole dictionary with that
encoder would take hours (all-mpnet-base-v2 over WordNet's 206,978 definitions: over 2 hours on 2 AVX2 cores).

    dictembed export --model all-mpnet-base-v2 --quantize int8 --keep-ffn-fp32 --output /tmp/mpnet-int8ffn
    python benchmarks/wide_standin.py outputs/minilm-defsent-plus /tmp/mpnet-int8ffn /tmp/quality-standin
    python benchmarks/serve_latency.py /tmp/quality-standin --seconds 30

The output is the export (the wide encoder's query graph and tokenizer) with the narrow folder's entry space,
definitions and headwords lifted isometrically to the export's dimension: each row v becomes [v, Qv] / sqrt(2)
for a seeded orthogonal Q, so every cosine between stored vectors is the narrow space's and a search does the
same work over the same entries as it would over the wide space, with vectors of the wide dimension. Queries come
from the wide encoder, so the results are not meaningful; only the timing is. Refuses an existing output.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from dictembed.dictionary import load_dictionary
from dictembed.model_folder import DEFINITIONS_FILE, RECORD_NAME, SPACE_DIR, SPACE_META, SPACE_TENSORS
from dictembed.search_index import write_search_index


def lifted(rows: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """[v, Qv] / sqrt(2) per row, in the rows' dtype: cosines between rows unchanged, twice the dimension."""
    wide = rows.astype(np.float32)
    return (np.concatenate([wide, wide @ rotation.T], axis=1) / np.sqrt(2.0)).astype(rows.dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("narrow", type=Path, help="a trained folder with an entry space of matrices (DefSent+)")
    parser.add_argument("export", type=Path, help="an export of the wide encoder (twice the narrow dimension)")
    parser.add_argument("output", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.output.exists():
        sys.exit(f"error: {args.output} exists; choose another output")
    tensors = load_file(str(args.narrow / SPACE_DIR / SPACE_TENSORS))
    narrow = tensors["matrix"].shape[1]
    wide = json.loads((args.export / RECORD_NAME).read_text(encoding="utf-8"))["encoder"]["dim"]
    if wide != 2 * narrow:
        sys.exit(f"error: {args.export} encodes {wide} dimensions, not twice the {narrow} of {args.narrow}")
    rotation, _ = np.linalg.qr(np.random.default_rng(args.seed).standard_normal((narrow, narrow)))
    staging = args.output.with_name(args.output.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(args.export, staging)
    (staging / SPACE_DIR).mkdir()
    shutil.copyfile(args.narrow / SPACE_DIR / SPACE_META, staging / SPACE_DIR / SPACE_META)
    save_file(
        {k: lifted(v, rotation) if v.ndim == 2 and v.shape[1] == narrow else v for k, v in tensors.items()},
        str(staging / SPACE_DIR / SPACE_TENSORS),
    )
    shutil.copyfile(args.narrow / DEFINITIONS_FILE, staging / DEFINITIONS_FILE)
    record = json.loads((staging / RECORD_NAME).read_text(encoding="utf-8"))
    record["entry_space"] = json.loads((args.narrow / RECORD_NAME).read_text(encoding="utf-8"))["entry_space"]
    (staging / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    write_search_index(staging, load_dictionary(str(staging / DEFINITIONS_FILE)))
    staging.rename(args.output)
    print(json.dumps({"output": str(args.output), "entries": int(tensors["matrix"].shape[0]), "dim": wide}))


if __name__ == "__main__":
    main()
