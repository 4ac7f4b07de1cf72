"""Cold start of the reverse dictionary: a one-query `dictembed predict` as a fresh process, and where its time goes.

    python benchmarks/cold_predict.py                                        # outputs/minilm-defsent-plus, 5 runs
    python benchmarks/cold_predict.py --model outputs/A --model outputs/B --runs 9 --json cold.json
    python benchmarks/cold_predict.py --int8-from outputs/minilm-defsent-plus   # and its int8 export
    python benchmarks/cold_predict.py --quick                                # 1 run, 5 searches: a smoke test

Per model folder:
- predict: `dictembed predict -q --model M QUERY` run `--runs` times, each a fresh interpreter (`python -c` calling
  `dictembed.cli.main`); its wall time and peak RSS (`os.wait4`'s rusage of that child): min/median/max, and
  whether `torch` was in `sys.modules` when it exited.
- in process, in one more fresh interpreter: seconds to `import dictembed.reverse_dictionary`, to
  `ReverseDictionary.load(M)`, of the first `search` after the load, and the median of `--searches` following
  searches (everyday descriptions from tests/data, one at a time).
`--int8-from M` first writes M's int8 export (`dictembed export --quantize int8`) to a scratch folder, with M's
`entry_space/` and `definitions.jsonl` copied in where the export lacks them, and measures it too. Prints the
CPU, versions and load average (benchmarks/machine.py) and one JSON document; `--json FILE` writes it too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import finish, machine

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = "outputs/minilm-defsent-plus"
DESCRIPTIONS = ROOT / "tests" / "data" / "everyday_descriptions.tsv"
TORCH_MARK = "cold_predict: torch imported:"

PREDICT = f"""
import atexit, sys
atexit.register(lambda: print({TORCH_MARK!r}, "torch" in sys.modules, file=sys.stderr))
from dictembed.cli import main
sys.exit(main(sys.argv[1:]))
"""

PROBE = """
import json, statistics, sys, time
start = time.perf_counter()
from dictembed.reverse_dictionary import ReverseDictionary
imported = time.perf_counter()
rd = ReverseDictionary.load(sys.argv[1])
loaded = time.perf_counter()
rd.search(sys.argv[2])
first = time.perf_counter()
seconds = []
for query in json.loads(sys.argv[3]):
    begin = time.perf_counter()
    rd.search(query)
    seconds.append(time.perf_counter() - begin)
print(json.dumps({
    "import_s": imported - start, "load_s": loaded - imported, "first_search_s": first - loaded,
    "search_median_ms": 1000 * statistics.median(seconds) if seconds else None, "searches": len(seconds),
}))
"""


def descriptions(n: int) -> list[str]:
    """The first `n` everyday descriptions of tests/data (the TSV's first column, after its header)."""
    rows = DESCRIPTIONS.read_text(encoding="utf-8").splitlines()[1:]
    return [row.split("\t", 1)[0] for row in rows[:n]]


def predict_once(model: str, query: str) -> dict[str, Any]:
    """One `dictembed predict` in a fresh interpreter: wall seconds, peak RSS (MB), exit status, torch imported."""
    with tempfile.TemporaryFile() as err:
        command = [sys.executable, "-c", PREDICT, "predict", "-q", "--model", model, query]
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").splitlines()
    marks = [line.rsplit(" ", 1)[-1] == "True" for line in lines if line.startswith(TORCH_MARK)]
    run: dict[str, Any] = {"wall_s": wall, "max_rss_mb": usage.ru_maxrss / 1024, "returncode": process.returncode}
    run["torch_imported"] = marks[-1] if marks else None
    if process.returncode:
        run["error"] = " | ".join(line for line in lines if not line.startswith(TORCH_MARK))[-500:]
    return run


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    return {k: round(f(values), digits) for k, f in (("min", min), ("median", statistics.median), ("max", max))}


def probe(model: str, query: str, searches: int) -> dict[str, Any]:
    """`PROBE` in a fresh interpreter: import, load, first search and the median later search."""
    queries = json.dumps(descriptions(searches + 1)[1:])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, model, query, queries], capture_output=True, text=True, check=False
    )
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def int8_export(source: str, scratch: Path) -> str:
    """`dictembed export --quantize int8` of `source` into `scratch`, with the source's entry space and
    definitions copied in where the export has none (so that `predict` can run on it)."""
    output = scratch / (Path(source).name + "-int8")
    command = [sys.executable, "-m", "dictembed.cli", "export", "-q", "--quantize", "int8"]
    subprocess.run([*command, "--model", source, "--output", str(output)], check=True)
    for name in ("entry_space", "definitions.jsonl"):
        if (Path(source) / name).exists() and not (output / name).exists():
            copy = shutil.copytree if (Path(source) / name).is_dir() else shutil.copyfile
            copy(Path(source) / name, output / name)
    return str(output)


def measure(model: str, args: argparse.Namespace) -> dict[str, Any]:
    runs = []
    for repeat in range(args.runs):
        runs.append(predict_once(model, args.query))
        print(json.dumps({"model": model, "repeat": repeat, **runs[-1]}), file=sys.stderr, flush=True)
    good = [run for run in runs if run["returncode"] == 0]
    result: dict[str, Any] = {"runs": len(runs), "failed": len(runs) - len(good)}
    if good:
        result["wall_s"] = spread([run["wall_s"] for run in good])
        result["max_rss_mb"] = spread([run["max_rss_mb"] for run in good], 1)
        result["torch_imported"] = sorted({str(run["torch_imported"]) for run in good})
    else:
        result["error"] = runs[-1].get("error")
    result["in_process"] = probe(model, args.query, args.searches)
    print(json.dumps({"model": model, "in_process": result["in_process"]}), file=sys.stderr, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help=f"model folder, repeatable (default: {DEFAULT_MODEL})")
    parser.add_argument("--int8-from", default=None, help="also measure this folder's int8 export (made here)")
    parser.add_argument("--runs", type=int, default=5, help="fresh predict processes per model (default: 5)")
    parser.add_argument("--searches", type=int, default=20, help="timed searches after the first (default: 20)")
    parser.add_argument("--query", default="a large body of water", help="the one query")
    parser.add_argument("--quick", action="store_true", help="a smoke test: 1 run, 5 searches")
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the result here")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.searches = 1, 5
    models = {model: model for model in args.model or ([] if args.int8_from else [DEFAULT_MODEL])}
    result: dict[str, Any] = {"benchmark": "cold_predict", **machine(), "query": args.query, "models": {}}
    with tempfile.TemporaryDirectory() as scratch:
        if args.int8_from:
            start = time.perf_counter()
            models[args.int8_from] = args.int8_from
            models[f"{args.int8_from} (int8 export)"] = int8_export(args.int8_from, Path(scratch))
            result["int8_export_s"] = round(time.perf_counter() - start, 1)
        for label, model in models.items():
            result["models"][label] = measure(model, args)
    finish(result, args.json)


if __name__ == "__main__":
    main()
