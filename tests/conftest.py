"""Shared fixtures: tiny random masked-LM models (BERT with the real uncased vocabulary, RoBERTa with a
BPE tokenizer trained here), a toy dictionary of single-token words, a dictembed save of the tiny BERT, a tiny
DefSent+ reverse dictionary trained once per test run, and the helpers that check the command line's errors."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from dictembed.dictionary.core import Dictionary
    from dictembed.encoder import Encoder
    from dictembed.reverse_dictionary import ReverseDictionary

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["DICTEMBED_CPU_PRECISION"] = "fp32"  # "auto" computes alike on every CPU kind, AMX or not

TOY_WORDS = {
    "dog": ["a domesticated animal that barks", "a loyal pet that chases cats"],
    "cat": ["a small pet that purrs and catches mice", "a feline animal kept at home"],
    "car": ["a vehicle with four wheels and an engine", "a machine you drive on roads"],
    "rain": ["water that falls from clouds", "drops of water from the sky"],
    "king": ["a man who rules a country", "the male ruler of a kingdom"],
    "bread": ["food made of baked flour", "a baked loaf eaten at breakfast"],
    "river": ["a large natural stream of water", "water flowing to the sea"],
    "book": ["pages bound together for reading", "a written work you read"],
}

# The served reverse dictionary's words (word, definition, pos): `car`, `automobile` and `motor car` share exactly
# the same definitions, so they are one result.
CAR = ["a vehicle with four wheels and an engine", "a machine you drive on roads"]
SERVED_WORDS: list[tuple[str, str, str]] = [
    ("dog", "a domesticated animal that barks", "n"),
    ("dog", "a loyal pet that chases cats", "n"),
    ("cat", "a small pet that purrs and catches mice", "n"),
    ("cat", "a feline animal kept at home", "n"),
    *[(word, definition, "n") for word in ("car", "automobile", "motor car") for definition in CAR],
    ("rain", "water that falls from clouds", "n"),
    ("rain", "to fall as drops of water from the sky", "v"),
    ("king", "a man who rules a country", "n"),
    ("bread", "food made of baked flour", "n"),
    ("river", "a large natural stream of water", "n"),
    ("run", "to move fast on foot", "v"),
    ("quick", "moving or able to move fast", "a"),
    ("quickly", "with speed, in a fast way", "r"),
    ("ice cream", "a sweet frozen food made from milk", "n"),
]
HEADWORDS = list(dict.fromkeys(word for word, _, _ in SERVED_WORDS))


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from intra-op threads; on a busy 2-core machine two threads are many times slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def entry_space_cache(tmp_path_factory: pytest.TempPathFactory):
    """$DICTEMBED_CACHE in a temporary folder for the whole suite: no test reads or writes the user's cache."""
    before = os.environ.get("DICTEMBED_CACHE")
    os.environ["DICTEMBED_CACHE"] = str(tmp_path_factory.mktemp("dictembed-cache"))
    yield Path(os.environ["DICTEMBED_CACHE"])
    if before is None:
        os.environ.pop("DICTEMBED_CACHE", None)
    else:
        os.environ["DICTEMBED_CACHE"] = before


@pytest.fixture(scope="session", autouse=True)
def temporary_files(tmp_path_factory: pytest.TempPathFactory):
    """$TMPDIR (and this process's tempfile folder) in the suite's temporary folder: what the tests and the
    processes they start leave in the system's temporary folder (torchrun's log folders, one per launch) goes
    with the suite's folders."""
    import tempfile

    folder = str(tmp_path_factory.mktemp("tmp"))
    before, before_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = folder, folder
    yield Path(folder)
    tempfile.tempdir = before_tempdir
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before


REPO = Path(__file__).resolve().parents[1]


def modules_after(imports: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with one of `prefixes` that a fresh interpreter holds after `imports` (Python source)."""
    import subprocess

    code = f"import sys\n{imports}\nprint(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return [name.strip(" '") for name in out.strip().strip("[]").split(",") if name.strip()]


def load_script(relative: str) -> ModuleType:
    """A script of the repository (`benchmarks/x.py`, `experiments/y.py`) imported as a module, for its helpers."""
    path = REPO / relative
    if str(path.parent) not in sys.path:  # its neighbours importable, as `python benchmarks/x.py` makes them
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def tiny_bert(path: Path, head: bool = True, dropout: float = 0.1, hidden: int = 32) -> Path:
    """A random 2-layer BERT of hidden size `hidden` with the standard uncased vocabulary; with or without an MLM
    head."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from dictembed.paths import default_model

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model())  # the standard uncased BERT vocabulary
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=128,
        initializer_range=0.2,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    (BertForMaskedLM if head else BertModel)(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def tiny_roberta(path: Path) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizerFast

    torch.manual_seed(0)
    corpus = [d for defs in TOY_WORDS.values() for d in defs] + [" " + " ".join(TOY_WORDS)] * 20
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        corpus, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    path.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(path))
    tokenizer = RobertaTokenizerFast(vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"))
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        initializer_range=0.2,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    RobertaForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def toy_tsv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TOY_WORDS as a `word<TAB>definition` table, one per test module."""
    path = tmp_path_factory.mktemp("toy") / "toy.tsv"
    path.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, defs in TOY_WORDS.items() for d in defs))
    return path


@pytest.fixture(scope="session")
def bert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def roberta_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_roberta(tmp_path_factory.mktemp("tiny-roberta"))


@pytest.fixture(scope="session")
def saved_bert(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT saved by dictembed (a sentence-transformers folder with dictembed.json); copy it to damage it."""
    from dictembed.encoder import Encoder

    return Encoder.load(str(bert_path), device="cpu").save(tmp_path_factory.mktemp("saved") / "m")


@pytest.fixture(scope="session")
def served_model(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny DefSent+ reverse dictionary (with its entry space) trained by `dictembed train` on SERVED_WORDS, once
    per test run; copy it to damage it."""
    import contextlib
    import io

    from dictembed.cli import main

    root = tmp_path_factory.mktemp("served")
    tsv = root / "served.tsv"
    tsv.write_text("word\tdefinition\tpos\n" + "".join(f"{w}\t{d}\t{p}\n" for w, d, p in SERVED_WORDS))
    out = root / "toy-reverse-dictionary"
    argv = ["train", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(out)]
    argv += ["--descriptions", "none"]  # definitions alone: the default ranking (tests/test_saved_ranking.py)
    level = logging.getLogger().level
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--lr-grid", "1e-3", "-q"]) == 0
    logging.getLogger().setLevel(level)
    return out


# Two tiny dictionaries of two languages for a server of several: English words, and Chinese words with English
# glosses (as CC-CEDICT defines them), served from folders `dictembed index` writes (`language_folders`).
EN_WORDS = {word: definitions[0] for word, definitions in TOY_WORDS.items()}
ZH_WORDS = {
    "狗": "a domesticated animal that barks",
    "猫": "a small pet that purrs and catches mice",
    "汽车": "a vehicle with four wheels and an engine",
    "雨": "water that falls from clouds",
    "国王": "a man who rules a country",
    "面包": "food made of baked flour",
    "河": "a large natural stream of water",
    "书": "pages bound together for reading",
}


@pytest.fixture(scope="session")
def language_folders(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`dictembed index` folders of the tiny BERT over EN_WORDS (`en.tsv`) and ZH_WORDS (`zh.tsv`), by language."""
    import contextlib
    import io

    from dictembed.cli import main

    root = tmp_path_factory.mktemp("languages")
    folders = {}
    for language, words in (("en", EN_WORDS), ("zh", ZH_WORDS)):
        tsv = root / f"{language}.tsv"
        tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in words.items()), encoding="utf-8")
        folders[language] = root / f"{language}-folder"
        argv = ["index", "--model", str(bert_path), "--dictionary", str(tsv), "--output", str(folders[language])]
        level = logging.getLogger().level
        with contextlib.redirect_stdout(io.StringIO()):
            assert main([*argv, "-q"]) == 0
        logging.getLogger().setLevel(level)
    return folders


@pytest.fixture()
def restore_log_level():
    """`dictembed.cli.main` sets the root logger's level (-v/-q); keep it from leaking into later tests."""
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


def error_lines(err: str) -> list[str]:
    """The error lines of the command line's stderr: its own (`dictembed: error: ...`) and argparse's
    (`dictembed train: error: argument ...`)."""
    return [line for line in err.splitlines() if line.startswith("dictembed: error:") or ": error: " in line]


def cli_refuses(capsys: pytest.CaptureFixture[str], argv: list[str], *names: str, code: int = 1) -> str:
    """Run `dictembed ARGV -q` in this process and check that it stops with exit `code` (1: a runtime error, 2: a
    usage error) and exactly one error line, without a traceback, naming each of `names`; the line is returned."""
    from dictembed.cli import main

    status = main([*argv, "-q"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err[-3000:]
    lines = error_lines(captured.err)
    assert status == code and len(lines) == 1, f"exit {status}: {captured.err[-3000:]}"
    missing = [name for name in names if name not in lines[0]]
    assert not missing, f"{lines[0]!r} does not name {missing}"
    return lines[0]


def cli_succeeds(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    """Run `dictembed ARGV -q` in this process, check that it exits 0 without a traceback; (stdout, stderr)."""
    from dictembed.cli import main

    status = main([*argv, "-q"])
    captured = capsys.readouterr()
    assert status == 0 and "Traceback" not in captured.err, f"exit {status}: {captured.err[-3000:]}"
    return captured.out, captured.err


# Sentences of several lengths that the backend tests encode on every backend.
BACKEND_SENTENCES = [
    "a domesticated animal that barks",
    "water that falls from clouds",
    "the male ruler of a kingdom",
    "pages bound together for reading, a written work you read at home or in a library",
    "food",
    "a vehicle with four wheels and an engine that you drive on roads to work every day",
]


def predict_in_a_process(model: Path, query: str, k: int = 3) -> tuple[list[list[str]], list[str]]:
    """`dictembed predict --json` of `query` in a fresh Python: each result's words, and which of torch,
    transformers and sentence_transformers it imported."""
    import json
    import subprocess

    code = (
        "import json, sys\n"
        "from dictembed.cli import main\n"
        f"assert main(['predict', '--model', {str(model)!r}, {query!r}, '--top-k', '{k}', '--json']) == 0\n"
        "print(json.dumps([m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    return [row["words"] for row in json.loads("\n".join(out[:-1]))], json.loads(out[-1])


def torch_reverse_dictionary(path: Path) -> ReverseDictionary:
    """The folder searched with its torch weights (what `ReverseDictionary.load` ran before query graphs)."""
    from dictembed.encoder import Encoder
    from dictembed.folder_search import saved_space
    from dictembed.model_folder import ModelFolder
    from dictembed.reverse_dictionary import ReverseDictionary  # noqa: F811

    folder = ModelFolder.open(path)
    source = folder.dictionary()
    space, index = saved_space(folder, source)
    return ReverseDictionary(Encoder.load(path, device="cpu"), space, source, folder.name, index=index)


def dictionary_of(name: str, senses: dict[str, list[str]], pos: str | None = None) -> Dictionary:
    """A dictionary of each word's definitions, in order, all of part of speech `pos`."""
    from dictembed.dictionary.core import Dictionary

    d = Dictionary(name=name)
    for word, definitions in senses.items():
        for definition in definitions:
            d.add(word, definition, pos=pos)
    return d


@pytest.fixture()
def toy_dictionary():
    return dictionary_of("toy", TOY_WORDS)


@pytest.fixture(scope="module")
def mean_encoder(bert_path: Path) -> Encoder:
    """The tiny BERT with mean pooling."""
    from dictembed.encoder import Encoder

    return Encoder.load(str(bert_path), pooling="mean")


def _hypothesis_profiles() -> None:
    """The fuzz suite's profiles (tests/test_fuzz.py): quick by default, `--hypothesis-profile=long` for depth.
    Registered here because Hypothesis selects the profile before test modules are imported."""
    from hypothesis import HealthCheck, settings

    for name, examples in [("fuzz", 40), ("long", 2000)]:
        settings.register_profile(
            name,
            max_examples=examples,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )


_hypothesis_profiles()


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """All of stderr is one `dictembed: error: ...` line, without a traceback; that line."""
    err = capsys.readouterr().err.strip()
    assert err.startswith("dictembed: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def damage(path: Path, how: str) -> Path:
    """Remove the file ("rm"), truncate it to half ("half") or overwrite it with the text `how`."""
    if how == "rm":
        path.unlink()
    elif how == "half":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_text(how)
    return path


def damaged_copy(model: Path, target: Path, name: str | None = None, how: str = "rm") -> Path:
    """A copy of the model folder `model` at `target`, with its file `name` damaged (see `damage`)."""
    import shutil

    folder = Path(shutil.copytree(model, target))
    if name is not None:
        damage(folder / name, how)
    return folder


class PlantedPickle:
    """A pickle that, when loaded, creates the file `marker`: harmless proof that code from a data file ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (self.marker, "w")

    def dumps(self) -> bytes:
        import pickle

        return pickle.dumps(self)
