"""The reliability sweep: a fixed list of bad-input, fault and security cases run against the command line and
the Python API, each classified as

- handled: a clear one-line error naming the file, line or model; a counted or logged skip; or correct behaviour;
- lost: data silently lost or a silently wrong result (a changed row count, a user file deleted, a bad value used);
- executed: code ran from a data or run folder (a planted pickle, a model folder's Python file);
- traceback: an uncaught stack trace.

    python benchmarks/reliability.py            # a table (case, category, detail) and the totals
    python benchmarks/reliability.py --json     # one JSON document

Everything is built in a temporary folder: a tiny random BERT (tests/conftest.py's `tiny_bert`), a dictembed save
of it, and a tiny DefSent+ model trained on a toy dictionary. No network is used (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import pickle
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dictembed.cli import main  # noqa: E402
from dictembed.errors import DictEmbedError  # noqa: E402

HANDLED, LOST, EXECUTED, TRACEBACK = "handled", "lost", "executed", "traceback"
CATEGORIES = (HANDLED, LOST, EXECUTED, TRACEBACK)
Verdict = tuple[str, str]
CASES: list[tuple[str, Callable[[Workspace], Verdict]]] = []
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = importlib.util.module_from_spec(
    spec := importlib.util.spec_from_file_location("dictembed_test_fixtures", ROOT / "tests" / "conftest.py")  # type: ignore[arg-type]
)
spec.loader.exec_module(FIXTURES)  # type: ignore[union-attr]  # tiny_bert and the toy words of the test suite
PAIRS = [(word, definition) for word, definitions in FIXTURES.TOY_WORDS.items() for definition in definitions]


def case(name: str) -> Callable[[Callable[[Workspace], Verdict]], Callable[[Workspace], Verdict]]:
    """Register a case under `name`, in the order of definition."""

    def register(function: Callable[[Workspace], Verdict]) -> Callable[[Workspace], Verdict]:
        CASES.append((name, function))
        return function

    return register


class _StderrHandler(logging.Handler):
    """Logging to whatever sys.stderr is at the time (so each case's log lands in its own capture)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"{record.levelname} {record.name}: {record.getMessage()}\n")


@dataclass
class Outcome:
    """What one command line run did: its exit status, output, and any exception that escaped `main`."""

    code: int | None
    out: str
    err: str
    escaped: str | None = None

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.startswith("dictembed: error:") or ": error: " in line]


@dataclass
class Workspace:
    """The temporary folder and the models every case starts from."""

    root: Path
    bert: Path
    saved: Path
    trained: Path
    toy_tsv: Path

    @property
    def marker(self) -> Path:
        """The file a planted payload creates when it runs."""
        return self.root / "EXECUTED"

    def path(self, name: str, content: bytes | str | None = None) -> Path:
        """A fresh path under a per-case folder, written with `content` when given."""
        path = self.root / "cases" / f"{len(list((self.root / 'cases').glob('*')))}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        elif content is not None:
            path.write_bytes(content)
        return path

    def copy(self, model: Path) -> Path:
        """A copy of a model folder, to damage."""
        return Path(shutil.copytree(model, self.path(model.name)))


def cli(*args: str) -> Outcome:
    """Run `dictembed ARGS` in this process, capturing its output and any exception that escapes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*args, "-q"])
        except BaseException:  # noqa: BLE001 - an escaping exception is exactly what the sweep looks for
            return Outcome(None, out.getvalue(), err.getvalue(), traceback.format_exc())
    return Outcome(code, out.getvalue(), err.getvalue())


def refused(outcome: Outcome, *names: str, code: int = 1) -> Verdict:
    """The verdict on a run that should stop with exit `code` and one error line naming each of `names`."""
    if outcome.escaped or "Traceback" in outcome.err:
        text = outcome.escaped or outcome.err
        return TRACEBACK, text.strip().splitlines()[-1][:200]
    lines = outcome.error_lines
    if outcome.code != code or len(lines) != 1:
        shown = " | ".join((outcome.err.strip() or outcome.out.strip()).splitlines()[-2:])
        return LOST, f"exit {outcome.code} (expected {code}): {' '.join(shown.split())[:200]}"
    missing = [name for name in names if name not in lines[0]]
    note = f" [does not name {', '.join(missing)}]" if missing else ""
    return HANDLED, lines[0][:220] + note


def raises(call: Callable[[], object], *names: str) -> Verdict:
    """The verdict on an API call that should raise a one-line DictEmbedError naming each of `names`."""
    try:
        result = call()
    except DictEmbedError as err:
        message = str(err)
        missing = [name for name in names if name not in message]
        note = f" [does not name {', '.join(missing)}]" if missing or "\n" in message else ""
        return HANDLED, f"{type(err).__name__}: {message}"[:220] + note
    except Exception as err:  # noqa: BLE001
        return TRACEBACK, f"{type(err).__name__}: {' '.join(str(err).split())}"[:220]
    return LOST, f"accepted, returned {type(result).__name__}"


def judged(ok: bool, good: str, bad: str, category: str = LOST) -> Verdict:
    """HANDLED with `good` when `ok`, else `category` with `bad`."""
    return (HANDLED, good) if ok else (category, bad)


def digest(path: Path) -> str:
    """A hash of a file or of every file in a folder, to see whether a run changed it."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()


def damage(path: Path, how: str) -> Path:
    """Remove ("rm"), truncate to half ("half"), or overwrite with the text `how`."""
    size = path.stat().st_size
    actions = {"rm": path.unlink, "half": lambda: os.truncate(path, size // 2)}
    actions.get(how, lambda: path.write_text(how, encoding="utf-8"))()
    return path


# ------------------------------------------------------------------------------------------------ dictionaries
def table(suffix: str, rows: list[tuple[str, str]] | None = None) -> str:
    """The toy dictionary as a .tsv, .csv or .jsonl text."""
    rows = PAIRS if rows is None else rows
    if suffix == "jsonl":
        return "".join(json.dumps({"word": w, "definition": d}, ensure_ascii=False) + "\n" for w, d in rows)
    sep = "\t" if suffix == "tsv" else ","
    return f"word{sep}definition\n" + "".join(f"{w}{sep}{d}\n" for w, d in rows)


def dictionary_case(ws: Workspace, name: str, content: bytes | str, pairs: int | None, *names: str) -> Verdict:
    """Load a dictionary file through the API and `data stats`: `pairs` rows expected, or (None) an error naming
    the file (and `names`)."""
    from dictembed.dictionary import load_dictionary

    path = ws.path(name, content)
    if pairs is None:
        api = raises(lambda: load_dictionary(str(path)), name, *names)
        if api[0] != HANDLED:
            return api
        return refused(cli("data", "stats", "--dictionary", str(path), "--model", str(ws.bert)), name, *names)
    try:
        loaded = len(load_dictionary(str(path)).pairs())
    except DictEmbedError as err:
        return HANDLED, f"{err} [refuses a valid file]"[-220:]
    except Exception as err:  # noqa: BLE001
        return TRACEBACK, f"{type(err).__name__}: {err}"[:220]
    return judged(loaded == pairs, f"{loaded} definitions, as written", f"{loaded} definitions read, {pairs} written")


for _fmt in ("tsv", "csv", "jsonl"):
    _latin = table(_fmt, [*PAIRS, ("café", "a small restaurant")]).encode("latin-1")
    _line = len(PAIRS) + (1 if _fmt == "jsonl" else 2)
    for _label, _content, _pairs, _names in [
        ("invalid UTF-8 bytes", _latin, None, (f":{_line}:", "--encoding")),
        ("UTF-16 file", table(_fmt).encode("utf-16"), None, (":1:",)),
        ("empty file", b"", None, ()),
        ("header only" if _fmt != "jsonl" else "blank lines only", table(_fmt, []) or "\n\n", None, ()),
        ("1 MB definition", table(_fmt, [*PAIRS, ("huge", "x " * 500_000)]), len(PAIRS) + 1, ()),
        ("CRLF line endings and a BOM", "\ufeff" + table(_fmt).replace("\n", "\r\n"), len(PAIRS), ()),
        ("NUL byte in a definition", table(_fmt, [*PAIRS, ("nul", "a \x00 b")]), len(PAIRS) + 1, ()),
        (
            "U+2028 and form feed inside a definition",
            table(_fmt, [*PAIRS, ("ls", "a\u2028b\x0cc")]),
            len(PAIRS) + 1,
            (),
        ),
    ]:
        case(f"dictionary {_fmt}: {_label}")(
            lambda ws, f=_fmt, c=_content, p=_pairs, n=_names: dictionary_case(ws, f"d.{f}", c, p, *n)
        )


@case("dictionary tsv: commas instead of tabs")
def _tsv_commas(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.tsv", table("csv"), None)


@case("dictionary csv: semicolons instead of commas")
def _csv_semicolons(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.csv", table("csv").replace(",", ";"), None)


@case("dictionary csv: unterminated quote")
def _csv_quote(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.csv", table("csv").replace("cat,a small", 'cat,"a small'), None, ":")


@case("dictionary csv: quoted comma and doubled quotes")
def _csv_quoted(ws: Workspace) -> Verdict:
    rows = 'word,definition\ncat,"a feline, small"\ndog,"a ""good"" dog"\n' + table("csv").split("\n", 1)[1]
    return dictionary_case(ws, "d.csv", rows, len(PAIRS) + 2)


@case("dictionary tsv: a quote character is text")
def _tsv_quote(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.tsv", table("tsv", [*PAIRS, ("q", '"a quoted" definition "')]), len(PAIRS) + 1)


@case("dictionary tsv: a row with an extra column")
def _tsv_extra(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.tsv", table("tsv") + "owl\ta bird\tsurplus\n", None, ":18:")


@case("dictionary tsv: no definition column")
def _tsv_columns(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.tsv", table("tsv").replace("definition", "meaning", 1), None, "definition")


@case("dictionary tsv: empty headword and definition rows")
def _tsv_empty_cells(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.tsv", table("tsv") + "\ta lost definition\nowl\t \n", len(PAIRS))


@case("dictionary jsonl: a line that is not JSON")
def _jsonl_broken(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.jsonl", table("jsonl") + '{"word": "owl", \n', None, ":17")


@case("dictionary jsonl: values that are not strings")
def _jsonl_types(ws: Workspace) -> Verdict:
    extra = '{"word": 1984, "definition": "a novel"}\n{"word": "owl", "definition": ["a", "bird"]}\n'
    return dictionary_case(ws, "d.jsonl", table("jsonl") + extra, len(PAIRS))


@case("dictionary jsonl: a line that is a list")
def _jsonl_list(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.jsonl", table("jsonl") + "[1, 2]\n", None, ":17")


@case("dictionary: unknown extension")
def _dict_extension(ws: Workspace) -> Verdict:
    return dictionary_case(ws, "d.txt", table("tsv"), None)


@case("dictionary: missing file")
def _dict_missing(ws: Workspace) -> Verdict:
    return refused(cli("data", "stats", "--dictionary", str(ws.root / "nope.tsv"), "--model", str(ws.bert)), "nope")


@case("dictionary: a folder named like a file")
def _dict_folder(ws: Workspace) -> Verdict:
    path = ws.path("folder.tsv")
    path.mkdir()
    return refused(cli("data", "stats", "--dictionary", str(path), "--model", str(ws.bert)), "folder.tsv")


@case("dictionary: too few headwords for the split")
def _dict_small(ws: Workspace) -> Verdict:
    path = ws.path("small.tsv", table("tsv", PAIRS[:6]))
    return refused(cli("data", "stats", "--dictionary", str(path), "--model", str(ws.bert)), "small")


@case("dictionary: empty --dictionary list")
def _dict_empty_list(ws: Workspace) -> Verdict:
    return refused(cli("data", "stats", "--dictionary", ",", "--model", str(ws.bert)), "dictionary")


# ------------------------------------------------------------------------------------------------ encode inputs
def encode_rows(ws: Workspace, content: bytes, rows: int, *extra: str) -> Verdict:
    """Encode a text file: one output row per \\n-separated line expected."""
    source = ws.path("in.txt", content)
    output = source.with_name("v.npy")
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(output), *extra)
    if outcome.code != 0:
        return refused(outcome, "in.txt", code=0)
    shape = np.load(output).shape
    warned = " (a truncation warning)" if "truncated" in outcome.err else ""
    return judged(shape[0] == rows, f"{shape[0]} rows, as many as lines{warned}", f"{shape[0]} rows for {rows} lines")


for _label, _content, _rows in [
    ("U+2028, form feed, NEL and CR inside lines", "a\u2028b\nc\x0cd\ne\x85f\ng\rh\n".encode(), 4),
    ("empty lines", b"a dog\n\n\na cat\n", 4),
    ("NUL bytes", b"a \x00 dog\n\x00\n", 2),
    ("CRLF file with a BOM, no final newline", "\ufeffa dog\r\na cat".encode(), 2),
    ("only a newline", b"\n", 1),
]:
    case(f"encode: {_label}")(lambda ws, c=_content, r=_rows: encode_rows(ws, c, r))


@case("encode: a 1 MB line")
def _enc_huge(ws: Workspace) -> Verdict:
    verdict = encode_rows(ws, b"word " * 200_000 + b"\nshort\n", 2)
    return verdict if "warning" in verdict[1] or verdict[0] != HANDLED else (LOST, "truncated without a warning")


@case("encode: empty file")
def _enc_empty_file(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", b"")
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(source) + ".npy")
    if outcome.code == 0:
        shape = np.load(str(source) + ".npy").shape
        return judged(shape[0] == 0, f"an empty array {shape}", f"{shape} for an empty file")
    return refused(outcome, "in.txt")


@case("encode: binary file")
def _enc_binary(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", bytes(range(256)) * 4)
    return refused(
        cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", f"{source}.npy"), "in.txt"
    )


@case("encode: Latin-1 file without --encoding")
def _enc_latin(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", "café\n".encode("latin-1"))
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", f"{source}.npy")
    return refused(outcome, "in.txt:1", "--encoding")


@case("encode: input is a folder")
def _enc_folder(ws: Workspace) -> Verdict:
    source = ws.path("in.txt")
    source.mkdir()
    return refused(
        cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", f"{source}.npy"), "in.txt"
    )


@case("encode: missing input")
def _enc_missing(ws: Workspace) -> Verdict:
    source = ws.root / "missing.txt"
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(ws.root / "x.npy"))
    return refused(outcome, "missing.txt")


@case("encode: output is a folder")
def _enc_out_folder(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", b"a dog\n")
    target = source.with_name("out.npy")
    target.mkdir()
    return refused(cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(target)), "out.npy")


@case("encode: output with another extension")
def _enc_out_ext(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", b"a dog\n")
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(source))
    verdict = refused(outcome, "--output", code=2)
    return verdict if source.read_bytes() == b"a dog\n" else (LOST, "the input file was overwritten")


@case("encode: output folder does not exist")
def _enc_out_parent(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", b"a dog\n")
    target = source.parent / "new" / "v.npy"
    outcome = cli("encode", "--model", str(ws.saved), "--input", str(source), "--output", str(target))
    if outcome.code == 0:
        return judged(np.load(target).shape[0] == 1, "the folder is created", "wrong rows")
    return refused(outcome, "new")


@case("encode: batch size 0")
def _enc_batch(ws: Workspace) -> Verdict:
    source = ws.path("in.txt", b"a dog\n")
    args = ["--input", str(source), "--output", f"{source}.npy", "--batch-size", "0"]
    return refused(cli("encode", "--model", str(ws.saved), *args), "--batch-size", code=2)


@case("API: encode a non-string sentence")
def _api_nonstr(ws: Workspace) -> Verdict:
    return raises(lambda: ws_encoder(ws).encode(["a dog", 3]), "sentence 1")


@case("API: encode None")
def _api_none(ws: Workspace) -> Verdict:
    return raises(lambda: ws_encoder(ws).encode(None))


@case("API: encode an empty list")
def _api_empty(ws: Workspace) -> Verdict:
    shape = ws_encoder(ws).encode([]).shape
    return judged(shape == (0, 32), f"shape {shape}", f"shape {shape}")


@case("API: encode with batch_size 0 or an unknown precision")
def _api_options(ws: Workspace) -> Verdict:
    first = raises(lambda: ws_encoder(ws).encode(["a"], batch_size=0), "batch_size")
    return first if first[0] != HANDLED else raises(lambda: ws_encoder(ws).encode(["a"], precision="int4"), "int4")


@case("API: a 120-sentence batch with long sentences warns with the count")
def _api_long(ws: Workspace) -> Verdict:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ws_encoder(ws).encode(["word " * 300] * 3 + ["short"] * 117)
    expected = "3 of 120 sentences were longer than 128 tokens and were truncated"
    return judged(expected in err.getvalue(), expected, "no truncation warning")


_ENCODER: dict[str, object] = {}


def ws_encoder(ws: Workspace):  # noqa: ANN201 - an Encoder (imported lazily)
    """The saved tiny model, loaded once."""
    from dictembed.encoder import Encoder

    if "saved" not in _ENCODER:
        _ENCODER["saved"] = Encoder.load(str(ws.saved), device="cpu")
    return _ENCODER["saved"]


# ------------------------------------------------------------------------------------------------ model folders
def encode_with(ws: Workspace, model: Path | str, *names: str) -> Verdict:
    """Encode one sentence with `model`: an error naming `names` expected, and no planted payload run."""
    source = ws.path("in.txt", b"a dog barks\n")
    outcome = cli("encode", "--model", str(model), "--input", str(source), "--output", f"{source}.npy")
    if ws.marker.exists():
        ws.marker.unlink()
        return EXECUTED, "a payload planted in the model folder ran"
    return refused(outcome, *names)


def ignored(ws: Workspace, model: Path, good: str) -> Verdict:
    """Encode with `model`, expecting success and no planted payload run."""
    source = ws.path("in.txt", b"a dog barks\n")
    outcome = cli("encode", "--model", str(model), "--input", str(source), "--output", f"{source}.npy")
    if ws.marker.exists():
        return EXECUTED, "a payload planted in the model folder ran"
    return refused(outcome, code=0) if outcome.code != 0 else (HANDLED, good)


def damaged(ws: Workspace, name: str, how: str, model: Path | None = None) -> Path:
    """A copy of the saved model (or `model`) with `name` damaged."""
    folder = ws.copy(model or ws.saved)
    damage(folder / name, how)
    return folder


@case("model: missing folder")
def _model_missing(ws: Workspace) -> Verdict:
    return encode_with(ws, ws.root / "no-such-model", "no-such-model")


@case("model: a file instead of a folder")
def _model_file(ws: Workspace) -> Verdict:
    return encode_with(ws, ws.path("model.txt", "not a model"), "model.txt")


@case("model: an empty folder")
def _model_empty(ws: Workspace) -> Verdict:
    folder = ws.path("empty-model")
    folder.mkdir()
    return encode_with(ws, folder, "empty-model")


@case("model: hub name, offline")
def _model_hub(ws: Workspace) -> Verdict:
    return encode_with(ws, "no-such-user/no-such-model", "no-such-user/no-such-model")


@case("model: a name that is neither a folder nor a hub id")
def _model_bad_id(ws: Workspace) -> Verdict:
    return encode_with(ws, "a/b/c d", "a/b/c d")


for _name, _how, _names in [
    ("tokenizer.json", "rm", ("tokenizer",)),
    ("model.safetensors", "half", ("model.safetensors",)),
    ("model.safetensors", "", ("model.safetensors",)),
    ("model.safetensors", "rm", ()),
    ("config.json", "{oops", ("config.json",)),
    ("config.json", "rm", ()),
    ("modules.json", "{oops", ("modules.json",)),
    ("modules.json", "[]", ("modules.json",)),
    ("1_Pooling/config.json", "{oops", ("1_Pooling/config.json",)),
    ("sentence_bert_config.json", "{oops", ("sentence_bert_config.json",)),
    ("tokenizer.json", "[1, 2", ("tokenizer.json",)),
    ("tokenizer_config.json", "{oops", ("tokenizer_config.json",)),
    ("dictembed.json", "{oops", ("dictembed.json",)),
    ("config_sentence_transformers.json", "{oops", ("config_sentence_transformers.json",)),
]:
    _label = {"rm": "missing", "half": "truncated to half", "": "empty", "[]": "an empty list"}.get(_how, "corrupt")
    case(f"model: {_name} {_label}")(lambda ws, n=_name, h=_how, m=_names: encode_with(ws, damaged(ws, n, h), *m))
    if _name in ("model.safetensors", "tokenizer.json") and _how in ("half", "rm"):
        case(f"model: plain HF folder, {_name} {_label}")(
            lambda ws, n=_name, h=_how, m=_names: encode_with(ws, damaged(ws, n, h, ws.bert), *m)
        )


@case("model: config.json with another hidden size")
def _model_shape(ws: Workspace) -> Verdict:
    folder = ws.copy(ws.saved)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"hidden_size": 64, "intermediate_size": 128}))
    return encode_with(ws, folder, str(folder.name))


def modules_pointing(ws: Workspace, path: str, make_link: bool = False) -> Path:
    """A copy of the saved model whose Pooling module path is `path` (a symlink to the root when `make_link`)."""
    folder = ws.copy(ws.saved)
    if make_link:
        (folder / path).symlink_to(ws.root, target_is_directory=True)
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = path
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


@case("model: modules.json path ../../outside")
def _modules_dotdot(ws: Workspace) -> Verdict:
    return encode_with(ws, modules_pointing(ws, "../../outside"), "modules.json")


@case("model: modules.json absolute path")
def _modules_abs(ws: Workspace) -> Verdict:
    return encode_with(ws, modules_pointing(ws, str(ws.saved / "1_Pooling")), "modules.json")


@case("model: modules.json path through a symlink outside")
def _modules_link(ws: Workspace) -> Verdict:
    return encode_with(ws, modules_pointing(ws, "escape", make_link=True), "modules.json")


class Planted:
    """A pickle that, when loaded, creates the marker file (harmless proof that it ran)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (self.marker, "w")


def _payload(marker: Path) -> bytes:
    return pickle.dumps(Planted(marker))


@case("model: planted pytorch_model.bin pickle instead of safetensors")
def _model_pickle(ws: Workspace) -> Verdict:
    folder = damaged(ws, "model.safetensors", "rm")
    (folder / "pytorch_model.bin").write_bytes(_payload(ws.marker))
    return encode_with(ws, folder)


@case("model: planted pickle beside the safetensors")
def _model_pickle_beside(ws: Workspace) -> Verdict:
    folder = ws.copy(ws.saved)
    for name in ("pytorch_model.bin", "training_args.bin", "optimizer.pt"):
        (folder / name).write_bytes(_payload(ws.marker))
    return ignored(ws, folder, "the planted pickles are never loaded")


def planted_code(ws: Workspace, json_name: str, change: Callable[[object], object]) -> Path:
    """A copy of the saved model holding `evil.py` (importing it creates the marker), referred to by its
    `json_name` file as edited by `change`."""
    folder = ws.copy(ws.saved)
    (folder / "evil.py").write_text(f"open({str(ws.marker)!r}, 'w')\nfrom transformers import BertModel as Evil\n")
    path = folder / json_name
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return folder


@case("model: config.json auto_map to a Python file in the folder")
def _model_remote_code(ws: Workspace) -> Verdict:
    folder = planted_code(ws, "config.json", lambda config: config | {"auto_map": {"AutoModel": "evil.Evil"}})
    return ignored(ws, folder, "auto_map is not followed without trust_remote_code")


@case("model: modules.json type naming a Python file in the folder")
def _modules_code(ws: Workspace) -> Verdict:
    folder = planted_code(ws, "modules.json", lambda modules: [modules[0], modules[1] | {"type": "evil.Evil"}])
    return encode_with(ws, folder, str(folder))


# ------------------------------------------------------------------------------------------------ entry spaces
def predict_with(ws: Workspace, model: Path, *names: str) -> Verdict:
    return refused(cli("predict", "--model", str(model), "a pet that barks"), *names)


for _label, _name, _how in [
    ("space.json corrupt", "space.json", "{oops"),
    ("space.json without a type", "space.json", '{"words": []}'),
    ("tensors.safetensors truncated", "tensors.safetensors", "half"),
    ("tensors.safetensors missing", "tensors.safetensors", "rm"),
]:
    case(f"entry space: {_label}")(
        lambda ws, n=_name, h=_how: predict_with(ws, damaged(ws, f"entry_space/{n}", h, ws.trained), n)
    )


@case("entry space: fewer words than vectors")
def _space_mismatch(ws: Workspace) -> Verdict:
    folder = ws.copy(ws.trained)
    meta = json.loads((folder / "entry_space/space.json").read_text())
    (folder / "entry_space/space.json").write_text(json.dumps(meta | {"words": meta["words"][:-1]}))
    return predict_with(ws, folder, "entry_space")


@case("entry space: none saved")
def _space_none(ws: Workspace) -> Verdict:
    return predict_with(ws, ws.saved, "entry_space")


@case("entry space: a planted pickle in entry_space/")
def _space_pickle(ws: Workspace) -> Verdict:
    folder = ws.copy(ws.trained)
    (folder / "entry_space/tensors.pt").write_bytes(_payload(ws.marker))
    outcome = cli("predict", "--model", str(folder), "a pet that barks")
    if ws.marker.exists():
        return EXECUTED, "the planted pickle ran"
    return judged(outcome.code == 0, "ignored; predict works", f"exit {outcome.code}: {outcome.err[-200:]}")


# ------------------------------------------------------------------------------------------------ train options
def train_args(ws: Workspace, output: Path | str, *extra: str) -> list[str]:
    base = ["train", "--model", str(ws.bert), "--dictionary", str(ws.toy_tsv), "--output", str(output)]
    return [*base, "--lr-grid", "1e-3", *extra]


for _flag, _value in [
    ("--limit", "0"),
    ("--limit", "-5"),
    ("--batch-size", "0"),
    ("--epochs", "0"),
    ("--pst-steps", "0"),
    ("--lr-grid", ""),
    ("--lr-grid", "fast"),
    ("--seeds", ""),
    ("--seeds", ",,"),
    ("--entry-temperature", "0"),
    ("--entry-temperature", "-1"),
]:
    case(f"train: {_flag} {_value!r}")(
        lambda ws, f=_flag, v=_value: refused(cli(*train_args(ws, ws.root / "never"), f, v), f, code=2)
    )


@case("train: --entries with --method defsent")
def _train_foreign(ws: Workspace) -> Verdict:
    return refused(
        cli(*train_args(ws, ws.root / "never", "--method", "defsent", "--entries", "amp")), "entries", code=2
    )


@case("train: --pooling with --method gr-bert")
def _train_foreign_gr(ws: Workspace) -> Verdict:
    return refused(
        cli(*train_args(ws, ws.root / "never", "--method", "gr-bert", "--pooling", "cls")), "pooling", code=2
    )


@case("train: --output onto a user file")
def _train_onto_file(ws: Workspace) -> Verdict:
    thesis = ws.path("thesis.txt", "years of work")
    verdict = refused(cli(*train_args(ws, thesis)), "thesis.txt")
    return verdict if thesis.read_text() == "years of work" else (LOST, "the user's file was changed")


@case("train: --output onto a folder of user files")
def _train_onto_folder(ws: Workspace) -> Verdict:
    thesis = ws.path("thesis.txt", "years of work")
    verdict = refused(cli(*train_args(ws, thesis.parent)))
    return verdict if thesis.read_text() == "years of work" else (LOST, "the user's folder was changed")


@case("train: --output onto our model without --overwrite")
def _train_onto_model(ws: Workspace) -> Verdict:
    folder = ws.copy(ws.trained)
    before = digest(folder)
    verdict = refused(cli(*train_args(ws, folder)), "--overwrite")
    return verdict if digest(folder) == before else (LOST, "the saved model was changed")


@case("train: --resume without a checkpoint")
def _train_resume(ws: Workspace) -> Verdict:
    output = ws.path("fresh")
    outcome = cli(*train_args(ws, output, "--resume", "--limit", "6"))
    if outcome.code != 0:
        return refused(outcome, code=0)
    return judged((output / "dictembed.json").is_file(), "trains from step 0", "no model written")


@case("train: a rerun with another --limit")
def _train_limit(ws: Workspace) -> Verdict:
    from dictembed.record import RunRecord

    output = ws.path("limits")
    first = cli(*train_args(ws, output, "--limit", "4"))
    second = cli(*train_args(ws, output, "--limit", "6", "--overwrite"))
    if first.code != 0 or second.code != 0:
        return refused(second if first.code == 0 else first, code=0)
    record = RunRecord.load(output)
    ok = record.config.get("limit") == 6 and record.train_examples == 6
    return judged(ok, "retrained with limit 6", f"kept limit {record.config.get('limit')}, {record.train_examples} ex.")


@case("train: a planted pickle in a run's checkpoint, then --resume")
def _train_checkpoint_pickle(ws: Workspace) -> Verdict:
    output = ws.path("planted")
    runs = Path(f"{output}-runs")
    for sub in ("step1/lr0.001-seed0/checkpoint", "step1/lr0.001-seed0/checkpoint/optimizer"):
        (runs / sub).mkdir(parents=True, exist_ok=True)
    for name in ("optimizer.pt", "state.pt", "checkpoint.pt", "rng_state.pth", "scheduler.pt", "optimizer/state.pkl"):
        (runs / "step1/lr0.001-seed0/checkpoint" / name).write_bytes(_payload(ws.marker))
    outcome = cli(*train_args(ws, output, "--resume", "--limit", "6"))
    if ws.marker.exists():
        return EXECUTED, "a pickle planted in the checkpoint ran"
    return judged(outcome.code in (0, 1) and "Traceback" not in outcome.err, "never unpickled", outcome.err[-200:])


@case("train: --dictionary missing")
def _train_dict_missing(ws: Workspace) -> Verdict:
    args = train_args(ws, ws.root / "never")
    args[args.index("--dictionary") + 1] = str(ws.root / "missing.tsv")
    return refused(cli(*args), "missing.tsv")


@case("train: --model missing")
def _train_model_missing(ws: Workspace) -> Verdict:
    args = train_args(ws, ws.root / "never")
    args[args.index("--model") + 1] = str(ws.root / "missing-model")
    return refused(cli(*args), "missing-model")


@case("train: --config corrupt")
def _train_config(ws: Workspace) -> Verdict:
    config = ws.path("dictembed.json", "{oops")
    return refused(cli("train", "--config", str(config), "--output", str(ws.root / "never")), "dictembed.json")


@case("train: a dictionary too small for the split")
def _train_small(ws: Workspace) -> Verdict:
    args = train_args(ws, ws.root / "never")
    args[args.index("--dictionary") + 1] = str(ws.path("small.tsv", table("tsv", PAIRS[:4])))
    return refused(cli(*args), "small")


# ------------------------------------------------------------------------------------------------ predict
@case("predict: empty query")
def _predict_empty(ws: Workspace) -> Verdict:
    return refused(cli("predict", "--model", str(ws.trained), ""), code=1)


@case("predict: 100,000-character query")
def _predict_long(ws: Workspace) -> Verdict:
    outcome = cli("predict", "--model", str(ws.trained), "water " * 16_667, "--json")
    if outcome.code == 0:
        return judged("truncated" in outcome.err, "answered, with a truncation warning", "truncated silently")
    return refused(outcome)


@case("predict: --top-k 0")
def _predict_k0(ws: Workspace) -> Verdict:
    return refused(cli("predict", "--model", str(ws.trained), "a pet", "--top-k", "0"), "--top-k", code=2)


@case("predict: --top-k larger than the entries")
def _predict_kbig(ws: Workspace) -> Verdict:
    outcome = cli("predict", "--model", str(ws.trained), "a pet", "--top-k", "100000", "--json")
    if outcome.code != 0:
        return refused(outcome, code=0)
    return judged(len(json.loads(outcome.out)) <= 8, "all entries listed", "more results than entries")


@case("predict: --input with blank lines and invalid UTF-8")
def _predict_input(ws: Workspace) -> Verdict:
    source = ws.path("queries.txt", b"a pet\n\n\xff\xfe bad\n")
    return refused(cli("predict", "--model", str(ws.trained), "--input", str(source)), "queries.txt")


@case("predict: a bad regular expression")
def _predict_regex(ws: Workspace) -> Verdict:
    return refused(cli("predict", "--model", str(ws.trained), "a pet", "--pattern", "/[/"), "/[/", code=2)


@case("predict: an unknown part of speech")
def _predict_pos(ws: Workspace) -> Verdict:
    return refused(cli("predict", "--model", str(ws.trained), "a pet", "--pos", "x"), "x", code=2)


# ------------------------------------------------------------------------------------------------ serve
_CLIENT: dict[str, object] = {}


def client(ws: Workspace):  # noqa: ANN201 - a FastAPI TestClient
    """A TestClient over the trained model, built once."""
    if "client" not in _CLIENT:
        from fastapi.testclient import TestClient

        from dictembed.serve import create_app

        _CLIENT["client"] = TestClient(create_app(ws.trained), raise_server_exceptions=False)
    return _CLIENT["client"]


def answered(response: object, status: int) -> Verdict:
    """A JSON error with `status` expected (and never a 500)."""
    code = response.status_code  # type: ignore[attr-defined]
    try:
        body = response.json()  # type: ignore[attr-defined]
    except ValueError:
        body = {"error": f"not JSON: {response.text[:80]}"}  # type: ignore[attr-defined]
    detail = f"{code} {str(body.get('error', body) if isinstance(body, dict) else body)[:160]}"
    if code >= 500:
        return TRACEBACK, detail
    return judged(code == status, detail, f"{detail} (expected {status})")


for _label, _query, _status in [
    ("empty q", "q=", 422),
    ("blank q", "q=%20%20", 422),
    ("missing q", "", 422),
    ("invalid UTF-8 in q", "q=%ff%fe", 400),
    ("NUL in q", "q=a%00pet", 200),
    ("k=0", "q=pet&k=0", 422),
    ("k=101", "q=pet&k=101", 422),
    ("k=-1", "q=pet&k=-1", 422),
    ("k=abc", "q=pet&k=abc", 422),
    ("bad regex", "q=pet&pattern=/[/", 422),
    ("unknown words", "q=pet&words=many", 422),
    ("unknown pos", "q=pet&pos=x", 422),
]:
    case(f"serve: /api/reverse {_label}")(
        lambda ws, q=_query, s=_status: answered(client(ws).get(f"/api/reverse?{q}"), s)
    )

for _label, _body, _status in [
    ("invalid JSON", "{oops", 422),
    ("no sentences", "{}", 422),
    ("sentences not a list", '{"sentences": "a pet"}', 422),
    ("257 sentences", json.dumps({"sentences": ["a"] * 257}), 422),
    ("a 2,001-character sentence", json.dumps({"sentences": ["a" * 2001]}), 422),
    ("a number among the sentences", json.dumps({"sentences": ["a", 3]}), 422),
]:
    case(f"serve: /api/encode {_label}")(
        lambda ws, b=_body, s=_status: answered(
            client(ws).post("/api/encode", content=b, headers={"content-type": "application/json"}), s
        )
    )


@case("serve: a 100,000-character q through a real server")
def _serve_long(ws: Workspace) -> Verdict:
    import urllib.error
    import urllib.request

    from dictembed.serve import background_server

    with background_server(client(ws).app) as url:
        try:
            with urllib.request.urlopen(f"{url}/api/reverse?q={'a' * 100_000}", timeout=60) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read()
    detail = f"{status} {body[:120].decode('utf-8', 'replace')}"
    return (TRACEBACK, detail) if status >= 500 else judged(status == 422, detail, f"{detail} (expected 422)")


@case("serve: unknown path and wrong method")
def _serve_paths(ws: Workspace) -> Verdict:
    first = answered(client(ws).get("/etc/passwd"), 404)
    return first if first[0] != HANDLED else answered(client(ws).post("/api/reverse?q=pet"), 405)


@case("serve: still healthy after the bad requests")
def _serve_health(ws: Workspace) -> Verdict:
    return answered(client(ws).get("/health"), 200)


# ------------------------------------------------------------------------------------------------ network
@case("network: save and reload with every connection refused")
def _network(ws: Workspace) -> Verdict:
    from dictembed.encoder import Encoder

    attempts: list[str] = []
    saved = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(repr(args[1:2]))
        raise OSError("network disabled by the sweep")

    socket.socket.connect = socket.socket.connect_ex = refuse  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]
    previous = os.environ.pop("HF_HUB_OFFLINE")
    target = ws.path("net-model")
    try:
        Encoder.load(str(ws.bert), device="cpu").save(target)
        Encoder.load(str(target), device="cpu").encode(["a"])
    except Exception as err:  # noqa: BLE001
        return TRACEBACK, f"{type(err).__name__}: {err}"[:220]
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = saved  # type: ignore[method-assign]
        os.environ["HF_HUB_OFFLINE"] = previous
    return judged(not attempts, "no connection attempted", f"{len(attempts)} attempts: {attempts[:2]}")


# ------------------------------------------------------------------------------------------------ the sweep
def build_workspace(root: Path) -> Workspace:
    """The tiny BERT, its dictembed save, and a tiny DefSent+ model trained on the toy dictionary."""
    from dictembed.encoder import Encoder

    bert = FIXTURES.tiny_bert(root / "tiny-bert")
    saved = Encoder.load(str(bert), device="cpu").save(root / "saved")
    toy = root / "toy.tsv"
    toy.write_text(table("tsv"))
    ws = Workspace(root, bert, saved, root / "trained", toy)
    outcome = cli(*train_args(ws, ws.trained))
    if outcome.code != 0:
        raise SystemExit(f"could not train the tiny model: {outcome.escaped or outcome.err[-2000:]}")
    return ws


def run_sweep(ws: Workspace) -> list[dict[str, object]]:
    """Run every case in order; an exception from a case itself is a traceback."""
    rows = []
    for name, function in CASES:
        start = time.perf_counter()
        try:
            category, detail = function(ws)
        except Exception as err:  # noqa: BLE001
            category, detail = TRACEBACK, f"{type(err).__name__}: {' '.join(str(err).split())}"[:220]
        ws.marker.unlink(missing_ok=True)
        seconds = round(time.perf_counter() - start, 2)
        rows.append({"case": name, "category": category, "detail": detail, "seconds": seconds})
    return rows


def report(rows: list[dict[str, object]], seconds: float) -> dict[str, object]:
    totals = {category: sum(row["category"] == category for row in rows) for category in CATEGORIES}
    return {"cases": len(rows), "totals": totals, "seconds": round(seconds, 1), "results": rows}


def print_table(result: dict[str, object]) -> None:
    rows = result["results"]
    width = max(len(str(row["case"])) for row in rows)  # type: ignore[union-attr]
    for row in rows:  # type: ignore[union-attr]
        print(f"{row['case']:<{width}}  {row['category']:<9}  {row['detail']}")
    totals = ", ".join(f"{k} {v}" for k, v in result["totals"].items())  # type: ignore[union-attr]
    print(f"\n{result['cases']} cases in {result['seconds']} s: {totals}")


def main_sweep(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    root_logger = logging.getLogger()
    root_logger.addHandler(_StderrHandler())
    root_logger.setLevel(logging.WARNING)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dictembed-reliability-") as tmp:
        with contextlib.redirect_stderr(io.StringIO()):
            ws = build_workspace(Path(tmp))
        rows = run_sweep(ws)
    result = report(rows, time.perf_counter() - start)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main_sweep())
