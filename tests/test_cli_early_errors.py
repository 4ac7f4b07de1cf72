"""Bad arguments are refused before anything loads: each command's checks (a missing input, an output that would be
replaced, a model path that is not there, options that do not fit together) run before torch, transformers or
sentence-transformers is imported. The command line runs in a fresh process, where nothing has imported them yet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dictembed.errors import DictEmbedError, ModelLoadError

HEAVY = ("torch", "transformers", "sentence_transformers")

# Runs each argv (given as JSON) through `main` in one process and prints, per argv, its exit status, its stderr
# and the heavy modules imported so far: the first command that imported one shows it, and every one after it.
RUNNER = """
import contextlib, io, json, sys
from dictembed.cli import main
argvs, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for argv in argvs:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv + ["-q"])
    heavy = sorted(m for m in modules if m in sys.modules)
    print(json.dumps({"argv": argv, "code": code, "err": err.getvalue(), "heavy": heavy}))
"""


def run_cli(argvs: list[list[str]], cwd: Path) -> list[dict]:
    """The results of `RUNNER` for `argvs`, run in a fresh Python in `cwd`."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-c", RUNNER, json.dumps(argvs), json.dumps(HEAVY)]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("dictembed: error:") or ": error: " in line]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of inputs and outputs: a text input, an empty one, an existing .npy, a model folder, a folder holding
    a dictembed run record, a folder of a user's own files, fine-tuned models of seed 0."""
    root = tmp_path_factory.mktemp("early")
    (root / "in.txt").write_text("a dog\n")
    (root / "blank.txt").write_text("\n  \n")
    (root / "same.npy").write_text("a dog\n")
    (root / "existing.npy").write_bytes(b"the previous embeddings")
    (root / "model.txt").write_text("not a model")
    (root / "o5-runs").write_text("a user's file where distil's runs folder would go")
    for folder, name, text in [
        ("model", "config.json", "{}"),
        ("model", "model.safetensors", ""),  # config.json beside weights: a transformers model
        ("run", "dictembed.json", '{"version": 2}'),
        ("mine", "thesis.txt", "years of work"),
        ("finetuned/seed0", "modules.json", "[]"),
        ("models/tiny", "config.json", "{}"),
    ]:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_text(text)
    return root


# (argv, exit status, what the one error line names)
CASES: list[tuple[list[str], int, tuple[str, ...]]] = [
    # predict
    (["predict", "--model", "model", "--input", "missing.txt"], 1, ("missing.txt", "not found")),
    (["predict", "--model", "model"], 2, ("give either one definition or --input FILE",)),
    (["predict", "--model", "model", "a pet", "--input", "in.txt"], 2, ("give either one definition or --input",)),
    (["predict", "--model", "model", "--input", "blank.txt"], 1, ("blank.txt", "no queries")),
    (["predict", "--model", "model", "a pet", "--length", "4", "--min-length", "3"], 2, ("--length", "not both")),
    (["predict", "--model", "./no-such-model", "a pet"], 1, ("./no-such-model", "not found")),
    (["predict", "--model", "models/tinyy", "a pet"], 1, ("models/tinyy", "not found")),
    (["predict", "--model", "model", "a pet", "--dictionary", "missing.tsv"], 1, ("missing.tsv", "not found")),
    (["serve", "--model", "/no/such/model"], 1, ("/no/such/model", "not found")),
    # encode and export
    (["encode", "--model", "model", "--input", "missing.txt", "--output", "v.npy"], 1, ("missing.txt", "not found")),
    (["encode", "--model", "model", "--input", "mine", "--output", "v.npy"], 1, ("mine", "folder")),
    (
        ["encode", "--model", "model", "--input", "in.txt", "--output", "existing.npy"],
        1,
        ("existing.npy", "--overwrite"),
    ),
    (["encode", "--model", "model", "--input", "same.npy", "--output", "same.npy"], 2, ("is the --input file",)),
    (["encode", "--model", "model.txt", "--input", "in.txt", "--output", "v.npy"], 1, ("model.txt", "is a file")),
    (  # --overwrite lets the output pass: the model is what is refused next
        ["encode", "--model", "/no/such/model", "--input", "in.txt", "--output", "existing.npy", "--overwrite"],
        1,
        ("/no/such/model",),
    ),
    (["export", "--model", "model", "--output", "model"], 1, ("--output model", "--overwrite")),
    (["export", "--model", "model", "--output", "mine", "--overwrite"], 1, ("mine", "holds no model")),
    (["export", "--model", "model", "--output", "in.txt/x"], 1, ("in.txt", "is a file, not a folder")),
    (["index", "--dictionary", "wordnet", "--output", "in.txt/x"], 1, ("in.txt", "is a file, not a folder")),
    (
        ["encode", "--model", "model", "--input", "in.txt", "--output", "in.txt/v.npy"],
        1,
        ("in.txt", "is a file, not a folder"),
    ),
    # evaluate
    (["evaluate", "sts", "--model", "/no/such/model"], 1, ("/no/such/model",)),
    (["evaluate", "senteval", "--model", "/no/such/model"], 1, ("/no/such/model",)),
    (["evaluate", "senteval", "--jobs", "100000"], 2, ("--jobs must be a whole number from 1 to", "cores")),
    (["evaluate", "mteb", "--model", "/no/such/model", "--tasks", "STSBenchmark"], 1, ("/no/such/model",)),
    (["evaluate", "mteb", "--tasks", "STSBenchmark", "--output-folder", "in.txt"], 1, ("--output-folder in.txt",)),
    (["evaluate", "reverse-dictionary", "--model", "/no/such/model"], 1, ("/no/such/model",)),
    (
        ["evaluate", "reverse-dictionary", "--model", "run", "--queries", "q.tsv", "--leave-one-out"],
        2,
        ("give either --queries oxford|chang|FILE or --leave-one-out",),
    ),
    (
        ["evaluate", "reverse-dictionary", "--model", "run", "--leave-one-out", "--tfidf-analyzer", "char"],
        2,
        ("--tfidf-analyzer needs --baseline tfidf",),
    ),
    (
        ["evaluate", "reverse-dictionary", "--model", "run", "--tfidf-analyzer", "char"],  # alone too, never ignored
        2,
        ("--tfidf-analyzer needs --baseline tfidf",),
    ),
    (["evaluate", "reverse-dictionary", "--model", "run", "--queries", "missing.tsv"], 1, ("missing.tsv",)),
    (["evaluate", "reverse-dictionary", "--model", "run", "--dictionary", "wordnett"], 1, ("wordnett", "unknown")),
    (["evaluate", "lexsub", "--validation-model", "/no/such/model", "--post", "+valid"], 1, ("/no/such/model",)),
    (["evaluate", "lexsub", "--validation-model", "model"], 2, ("--validation-model", "--post +valid")),
    (
        ["evaluate", "reverse-dictionary", "--model", "run", "--queries", "oxford", "--dictionary", "wordnet"],
        2,
        ("--dictionary", "only --baseline tfidf"),
    ),
    (["finetune", "stsb", "--output", "ft", "--seeds", "0,1,0"], 2, ("--seeds", "'0' is listed more than once")),
    # finetune, head, data, plot
    (["finetune", "stsb", "--model", "model", "--output", "finetuned"], 1, ("seed0", "--overwrite")),
    (["finetune", "stsb", "--model", "model", "--output", "in.txt"], 1, ("in.txt", "is a file")),
    (["finetune", "stsb", "--model", "model", "--resume"], 1, ("--resume", "--output")),
    (["finetune", "stsb", "--model", "model", "--overwrite"], 1, ("--overwrite replaces", "name the --output")),
    (["finetune", "stsb", "--model", "/no/such/model", "--output", "finetuned", "--seeds", "1"], 1, ("/no/such",)),
    (["head", "learn", "--model", "model", "--output", "model"], 1, ("--output model", "--overwrite")),
    (["head", "learn", "--model", "model", "--output", "new", "--dictionary", "missing.csv"], 1, ("missing.csv",)),
    (["head", "learn", "--model", "model", "--output", "model/inner"], 1, ("model/inner", "inside the model")),
    (["head", "learn", "--output", "new", "--seed", "4294967296"], 2, ("--seed", "<= 4294967295")),
    (["distil", "run", "--output", "new", "--seed", "-1"], 2, ("--seed", ">= 0")),
    (["distil", "./no-such-teacher", "--output", "new"], 1, ("teacher ./no-such-teacher", "no such model folder")),
    (["distil", "in.txt", "--output", "new"], 1, ("teacher in.txt", "a file, not a model folder")),
    # the student's own folder, a folder inside the teacher, a file where the runs folder goes, epochs past any run
    (["distil", "run", "--model", "model", "--output", "model", "--overwrite"], 1, ("--output model", "inside")),
    (["distil", "run", "--output", "run/sub"], 1, ("--output run/sub", "inside the model folder run")),
    (["distil", "run", "--output", "o5"], 1, ("o5-runs is a file", "move it")),
    (["distil", "run", "--output", "new", "--epochs", "5000"], 2, ("--epochs", "<= 1000")),
    (["head", "learn", "--output", "new", "--epochs", "2000"], 2, ("--epochs", "<= 1000")),
    (["finetune", "stsb", "--output", "ft", "--epochs", "1001"], 2, ("--epochs", "<= 1000")),
    (  # the seed folder replaced would be the model it trains from
        ["finetune", "stsb", "--model", "finetuned/seed0", "--output", "finetuned", "--overwrite"],
        1,
        ("the model folder finetuned/seed0 is inside --output finetuned",),
    ),
    (["finetune", "stsb", "--model", "model", "--output", "model"], 1, ("--output model", "inside the model folder")),
    (
        ["encode", "--input", "in.txt", "--output", "v.npy", "--batch-size", "10" * 10],
        2,
        ("--batch-size", "<= 1000000"),
    ),
    (["finetune", "stsb", "--output", "ft", "--seeds", "0,99999999999"], 2, ("--seeds", "<= 4294967295")),
    (["finetune", "stsb", "--output", "ft", "--limit", "1"], 1, ("limit", ">= 2")),
    (["data", "stats", "--dictionary", "wordnet,missing.jsonl"], 1, ("missing.jsonl", "not found")),
    (["data", "stats", "--model", "/no/such/model"], 1, ("/no/such/model",)),
    (["plot", "entries", "--model", "model", "--output", "figures"], 1, ("model", "dictembed.json")),
    # train: checked before its parser, which the recipes' options (torch) make, is built
    (["train", "--output", "run"], 1, ("--output run", "--overwrite")),
    (["train", "--output", "mine", "--overwrite"], 1, ("mine", "holds no dictembed model")),
    (["train", "--output", "in.txt"], 1, ("in.txt", "is a file")),
    (["train", "--output", "in.txt/x"], 1, ("in.txt", "is a file, not a folder")),
    (["train", "--model", "/no/such/model", "--output", "new"], 1, ("/no/such/model", "not found")),
    (["train", "--dictionary", "wordnet,missing.tsv", "--output", "new"], 1, ("missing.tsv", "not found")),
    (["train", "--dictionary", "words.txt", "--output", "new"], 1, ("words.txt", "unknown dictionary")),
    (["train", "--config", "no-such-run", "--output", "new"], 1, ("no-such-run", "dictembed.json missing")),
    (["train", "--descriptions", "missing.tsv", "--output", "new"], 1, ("missing.tsv", "not found")),
    (["train", "--second-dictionary", "missing.tsv", "--output", "new"], 1, ("missing.tsv", "not found")),
    (["train", "--descriptions", "in.txt", "--output", "new"], 1, ("in.txt", "header")),
    (["-q", "train", "--output=run", "--lr-grid", "1e-5", "--seeds", "0"], 1, ("--output run", "--overwrite")),
]


def test_bad_arguments_are_refused_before_torch_is_imported(files: Path) -> None:
    results = run_cli([argv for argv, _, _ in CASES], files)
    assert len(results) == len(CASES)
    for (argv, code, names), result in zip(CASES, results, strict=True):
        lines = error_lines(result["err"])
        assert "Traceback" not in result["err"], result["err"][-3000:]
        assert result["code"] == code and len(lines) == 1, (argv, result)
        assert all(name in lines[0] for name in names), (argv, lines[0], names)
        assert result["heavy"] == [], (argv, f"{result['heavy']} imported before the error")
    assert (files / "existing.npy").read_bytes() == b"the previous embeddings"
    assert (files / "mine" / "thesis.txt").read_text() == "years of work"
    assert not (files / "new").exists() and not (files / "figures").exists()


def test_the_train_check_also_runs_on_the_parsed_arguments(files: Path, capsys, restore_log_level) -> None:
    """An abbreviated --output (`--out`) is read by the full parser only: the same check then refuses it."""
    from dictembed.cli import main

    assert main(["train", "--out", str(files / "run"), "-q"]) == 1
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "--overwrite" in lines[0]
    assert main(["train", "--output", str(files / "run"), "--help"]) == 0  # --help is never refused
    assert "--overwrite" in capsys.readouterr().out


def test_check_model_refuses_only_what_can_name_no_model(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dictembed.cli.options import check_model

    monkeypatch.chdir(files)
    for name in [
        None,
        "model",
        str(files / "model"),
        "bert-base-uncased",
        "someone/some-model",
    ]:
        check_model(name)  # a folder or a Hub id: what it holds is checked when it loads
    for name in ["/no/such/model", "no/such/model", "models/tinyy", "a/b/c d", "in.txt"]:
        with pytest.raises(ModelLoadError, match="not found|is a file"):
            check_model(name)
    with pytest.raises(ModelLoadError, match="is not prepared"):  # the suite's cache holds no prepared model
        check_model("multilingual-e5-small")


def test_check_readable_names_the_file_and_never_opens_a_pipe(tmp_path: Path) -> None:
    from dictembed.text_files import check_readable, read_bytes

    for path in [tmp_path / "missing.txt", tmp_path]:
        with pytest.raises(DictEmbedError) as checked:
            check_readable(path)
        with pytest.raises(DictEmbedError) as read:
            read_bytes(path)
        assert str(checked.value) == str(read.value)  # the reader's own error
    (tmp_path / "in.txt").write_text("a dog\n")
    check_readable(tmp_path / "in.txt")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        check_readable(tmp_path / "fifo")  # opening a FIFO without a writer would block: it is not opened


def test_check_sources_gives_the_loader_errors(tmp_path: Path) -> None:
    from dictembed.dictionary.load import check_sources

    check_sources("wordnet, gcide")
    (tmp_path / "words.txt").write_text("dog\ta pet\n")
    check_sources(str(tmp_path / "words.txt"), columns="word,definition")  # a .txt is a table with --columns
    for spec, message in [(",", "no dictionary named"), ("wordnett", "unknown dictionary"), ("x.tsv", "x.tsv")]:
        with pytest.raises(DictEmbedError, match=message):
            check_sources(spec)


SERVE_ENVIRONMENT_RUNNER = """
import contextlib, io, os, sys
from dictembed.cli import main
print("numpy" in sys.modules)  # OpenBLAS reads the variable when numpy loads it: not yet
with contextlib.redirect_stderr(io.StringIO()):
    main([sys.argv[1], "--model", "/no/such/model", "-q"] + sys.argv[2:])
print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
"""


@pytest.mark.parametrize(
    ("argv", "preset", "expected"),
    [(["serve"], None, "4"), (["serve"], "20", "20"), (["predict", "a pet"], None, "None")],
)
def test_serve_sets_the_blas_thread_timeout_before_numpy_loads(
    argv: list[str], preset: str | None, expected: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if preset is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = preset
    out = subprocess.run(
        [sys.executable, "-c", SERVE_ENVIRONMENT_RUNNER, *argv], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split() == ["False", expected], out.stderr[-2000:]


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`dictembed ... | head`: the pipe closed before the report is written ends the command quietly, with the
    status of a program SIGPIPE stopped."""
    env = {**os.environ, "DICTEMBED_CACHE": str(tmp_path)}
    command = [sys.executable, "-m", "dictembed", "cache", "list", "--json"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before anything is written
    status, err = process.wait(timeout=120), process.stderr.read().decode()
    assert status == 141 and "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
