"""Weight interpolation of a trained folder toward its base model (WiSE-FT, Wortsman et al., CVPR 2022): each
weight becomes alpha * trained + (1 - alpha) * base, the entry space, definitions and search index kept.

    python experiments/weight_interpolation.py runs/main-desc2 --alphas 0.5,0.7 --output-prefix /tmp/wise

writes `/tmp/wise-0.5`, `/tmp/wise-0.7`: copies of the folder without its query graph (`onnx/`, which names the
trained weights' digest and would be ignored) and with the interpolated `model.safetensors`. The base is the
folder's `base_model` (the embedded all-MiniLM-L6-v2 for the main job). Rank them with `published_terms.py`.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from safetensors.numpy import load_file, save_file

from dictembed.paths import EMBEDDED_MODEL, default_model


def base_weights_path(folder: Path) -> Path:
    """The base model's weights file named by the folder's `dictembed.json` (the embedded model or a local folder)."""
    base = json.loads((folder / "dictembed.json").read_text(encoding="utf-8"))["base_model"]
    root = Path(default_model()) if base == EMBEDDED_MODEL else Path(base)
    path = root / "model.safetensors"
    if not path.is_file():
        raise SystemExit(f"{path}: the base model's weights are not a local safetensors file")
    return path


def interpolate(folder: Path, alpha: float, output: Path) -> None:
    """Write `output`: `folder` with its weights moved toward its base model by 1 - alpha."""
    if output.exists():
        raise SystemExit(f"{output}: exists; choose another --output-prefix")
    trained = load_file(str(folder / "model.safetensors"))
    base = load_file(str(base_weights_path(folder)))
    missing = set(trained) - set(base)  # the base may hold buffers the trained folder no longer saves
    if missing:
        raise SystemExit(f"{folder}: its base model lacks {len(missing)} of its tensors, e.g. {min(missing)}")
    blended = {name: (alpha * value + (1 - alpha) * base[name]).astype(value.dtype) for name, value in trained.items()}
    shutil.copytree(folder, output, ignore=shutil.ignore_patterns("onnx"))
    save_file(blended, str(output / "model.safetensors"), metadata={"format": "pt"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--alphas", default="0.5,0.7", help="comma-separated weights of the trained model")
    parser.add_argument("--output-prefix", required=True, help="each folder is written to PREFIX-ALPHA")
    args = parser.parse_args()
    for alpha in (float(a) for a in args.alphas.split(",")):
        output = Path(f"{args.output_prefix}-{alpha:g}")
        interpolate(args.folder, alpha, output)
        print(f"{output}: alpha {alpha:g}")


if __name__ == "__main__":
    main()
