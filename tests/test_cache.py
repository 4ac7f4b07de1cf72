"""The shared entry-space cache ($DICTEMBED_CACHE): location, reuse across runs, two processes building one
space at once, `dictembed cache list|clear`; and entry spaces saved in float16."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dictembed import cache, entry_vectors
from dictembed.cache import cache_key
from dictembed.cli import main
from dictembed.encoder import Encoder
from dictembed.entry_space import SAVE_DTYPE, SPACE_DIR, DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.mlm_head_space import MLMHeadSpace
from dictembed.saved_entry_space import load_entry_space


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    """This test's own empty $DICTEMBED_CACHE."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(folder))
    return folder


@pytest.fixture(autouse=True)
def restore_log_level():
    """`main` sets the root logger's level; keep it from leaking into later tests."""
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


@pytest.fixture()
def encoder(bert_path) -> Encoder:
    return Encoder.load(str(bert_path), pooling="mean", device="cpu").eval()


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------ location
def test_default_cache_dir_is_the_env_then_xdg_then_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(cache.CACHE_ENV)
    assert cache.default_cache_dir() == tmp_path / "xdg" / "dictembed"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_cache_dir() == tmp_path / "home" / ".cache" / "dictembed"


def test_the_suite_never_uses_the_users_cache() -> None:
    assert Path.home() / ".cache" not in cache.default_cache_dir().parents


# ------------------------------------------------------------------------------ reuse
def test_a_second_build_reads_the_cache_and_the_sidecar_says_what_built_it(
    encoder, toy_dictionary, cache_dir, monkeypatch
) -> None:
    first = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache.default_cache_dir())
    key = cache_key(encoder, toy_dictionary, "amp", False)
    assert _names(cache_dir) == [".locks", f"definitions-{key}.json", f"definitions-{key}.safetensors"]
    source = json.loads((cache_dir / f"definitions-{key}.json").read_text())
    assert source["dictionary"] == "toy" and source["entries"] == "amp" and source["ica"] is False
    assert source["entry_count"] == 8 and source["definitions"] == 16 and source["shape"] == [8, 32]
    monkeypatch.setattr(Encoder, "embed", lambda *a, **k: pytest.fail("re-encoded the definitions"))
    again = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache.default_cache_dir())
    assert torch.equal(again.matrix, first.matrix) and again.counts.tolist() == first.counts.tolist()


def test_an_unreadable_cache_file_is_rebuilt(encoder, toy_dictionary, cache_dir, caplog) -> None:
    first = DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=cache_dir)
    path = cache.space_path(cache_key(encoder, toy_dictionary, "ac", False), cache_dir)
    path.write_bytes(path.read_bytes()[:50])
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        again = DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=cache_dir)
    assert "unreadable" in caplog.text and torch.equal(again.matrix, first.matrix)
    from safetensors.torch import load_file

    assert torch.equal(load_file(str(path))["matrix"], first.matrix)  # the rebuilt file replaced the bad one


@pytest.mark.parametrize(
    "damage,named",
    [
        (lambda m: -m, "checksum"),  # a sign-flipped copy: a valid file, other vectors
        (lambda m: m.index_fill(0, torch.tensor([1]), float("nan")), "finite"),
        (lambda m: m[:, :-1].contiguous(), "shape"),
    ],
    ids=["sign-flipped", "NaN row", "narrower"],
)
def test_a_cache_file_that_is_not_what_was_written_is_rebuilt(
    damage, named: str, encoder, toy_dictionary, cache_dir, caplog
) -> None:
    from safetensors.torch import load_file, save_file

    first = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache_dir)
    path = cache.space_path(cache_key(encoder, toy_dictionary, "amp", False), cache_dir)
    save_file({"matrix": damage(load_file(str(path))["matrix"])}, str(path))
    with caplog.at_level(logging.WARNING, logger="dictembed.cache"):
        again = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache_dir)
    assert named in caplog.text and str(path) in caplog.text  # the warning names the file and what is wrong
    assert torch.equal(again.matrix, first.matrix) and torch.equal(load_file(str(path))["matrix"], first.matrix)


def test_a_cache_file_written_before_checksums_still_loads(encoder, toy_dictionary, cache_dir, monkeypatch) -> None:
    first = DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache_dir)
    sidecar = cache.space_path(cache_key(encoder, toy_dictionary, "amp", False), cache_dir).with_suffix(".json")
    info = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({k: v for k, v in info.items() if k != "sha256"}))
    monkeypatch.setattr(Encoder, "embed", lambda *a, **k: pytest.fail("re-encoded the definitions"))
    assert torch.equal(DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache_dir).matrix, first.matrix)


def test_defsent_plus_runs_share_the_cache_in_dictembed_cache(bert_path, toy_dictionary, tmp_path, cache_dir) -> None:
    from dictembed.recipes.config import RunConfig
    from dictembed.recipes.run import train

    tsv = tmp_path / "toy.tsv"
    tsv.write_text("word\tdefinition\n" + "".join(f"{w}\t{d}\n" for w, d in toy_dictionary.pairs()))
    # pooler "none": the tiny checkpoint has no trained pooler, so `--pooler model` would be random on each load
    options = {"model": str(bert_path), "dictionary": str(tsv), "pooler": "none", "lrs": [1e-3], "limit": 8}
    train(RunConfig.create("defsent-plus", output=str(tmp_path / "one"), **options))
    spaces = cache.list_cache()
    assert len(spaces) == 1 and spaces[0].path.parent == cache_dir
    assert not (tmp_path / "one-runs" / "cache").exists()  # no more per-output caches
    built = []
    real = entry_vectors.definition_tensors
    entry_vectors.definition_tensors = lambda *a: built.append(a) or real(*a)
    try:
        train(RunConfig.create("defsent-plus", output=str(tmp_path / "two"), **options))
    finally:
        entry_vectors.definition_tensors = real
    assert built == [] and len(cache.list_cache()) == 1  # the second run never rebuilt
    # --cache-dir still overrides
    train(RunConfig.create("defsent-plus", output=str(tmp_path / "three"), cache_dir=str(tmp_path / "own"), **options))
    assert len(cache.list_cache(tmp_path / "own")) == 1


# ------------------------------------------------------------------------------ two processes
WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import numpy as np, torch
    from dictembed.dictionary.core import Dictionary
    from dictembed.encoder import Encoder
    from dictembed.entry_space import DefinitionSpace

    torch.set_num_threads(1)
    model, words, out, go = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    dictionary = Dictionary(name="toy")
    for word, definitions in words.items():
        for definition in definitions:
            dictionary.add(word, definition)
    encoder = Encoder.load(model, pooling="mean", device="cpu").eval()
    encoded = []
    real = Encoder.embed
    def slow_embed(self, *args, **kwargs):  # a build long enough for the other process to ask meanwhile
        encoded.append(1)
        time.sleep(1.5)
        return real(self, *args, **kwargs)
    Encoder.embed = slow_embed
    out.with_suffix(".ready").touch()
    while not go.exists():  # both processes start building at the same moment
        time.sleep(0.01)
    space = DefinitionSpace.build(encoder, dictionary, "amp", cache_dir=sys.argv[5])
    np.save(out, space.matrix.numpy(), allow_pickle=False)
    out.with_suffix(".json").write_text(json.dumps({"encoded": len(encoded)}))
    """
)


def test_two_processes_building_one_space_build_it_once(bert_path, tmp_path) -> None:
    from conftest import TOY_WORDS

    shared = tmp_path / "cache"
    go = tmp_path / "go"
    outs = [tmp_path / f"worker{i}.npy" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(bert_path), json.dumps(TOY_WORDS), str(out), str(go), str(shared)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    try:
        for out in outs:
            for _ in range(6000):
                if out.with_suffix(".ready").exists() or any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.02)
        go.touch()
        results = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    first, second = (np.load(out, allow_pickle=False) for out in outs)
    assert np.array_equal(first, second)
    encoded = [json.loads(out.with_suffix(".json").read_text())["encoded"] for out in outs]
    assert sorted(encoded) == [0, 1]  # one built it, the other waited and loaded the finished file
    files = _names(shared)
    assert files == [".locks"] + sorted(f for f in files if f != ".locks") and len(files) == 3
    assert [f for f in files if f.endswith(".safetensors")] and not [f for f in files if "partial" in f]
    spaces = cache.list_cache(shared)
    assert len(spaces) == 1
    from safetensors.torch import load_file

    assert np.array_equal(load_file(str(spaces[0].path))["matrix"].numpy(), first)


# ------------------------------------------------------------------------------ CLI
def test_cli_cache_list_and_clear(encoder, toy_dictionary, cache_dir, capsys, monkeypatch) -> None:
    assert main(["cache", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"cache_dir": str(cache_dir), "spaces": [], "search_indexes": []}
    DefinitionSpace.build(encoder, toy_dictionary, "amp", cache_dir=cache_dir)
    DefinitionSpace.build(encoder, toy_dictionary, "ac", cache_dir=cache_dir)
    foreign = [cache_dir / "notes.txt", cache_dir / "definitions-mine.safetensors"]
    for path in foreign:
        path.write_text("not dictembed's")
    index = cache_dir / cache.INDEX_DIR / ("ab" * 20)  # a search index cached for a folder saved without one
    index.mkdir(parents=True)
    (index / "index.json").write_text("{}")
    (index / "index.safetensors").write_bytes(b"0" * 100)
    (index.parent / f"{index.name}.lock").touch()
    (index.parent / "mine").mkdir()  # a user's folder there is none of dictembed's
    (index.parent / "mine" / "index.json").write_text("mine")
    assert main(["cache", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["spaces"]
    assert sorted(s["source"]["entries"] for s in listed) == ["ac", "amp"]
    assert all(Path(s["file"]).parent == cache_dir and s["size"] > 8 * 32 * 4 and s["modified"] for s in listed)
    assert main(["cache", "list", "--json"]) == 0
    (listed_index,) = json.loads(capsys.readouterr().out)["search_indexes"]
    assert listed_index["folder"] == str(index) and listed_index["size"] == 102
    assert main(["cache", "list"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"2 cached entry space(s) in {cache_dir}") and "dictionary toy" in text
    assert "1 cached search index(es)" in text and index.name in text

    assert main(["cache", "clear"]) == 2  # not a terminal: --yes is required
    assert "--yes" in capsys.readouterr().err and len(cache.list_cache()) == 2

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    assert main(["cache", "clear"]) == 0
    assert "nothing removed" in capsys.readouterr().out and len(cache.list_cache()) == 2
    monkeypatch.setattr(sys, "stdin", Terminal(""))  # Ctrl-D at the question: no answer is no
    assert main(["cache", "clear"]) == 0
    captured = capsys.readouterr()
    assert "nothing removed" in captured.out and "Traceback" not in captured.err and len(cache.list_cache()) == 2

    sizes = sum(p.stat().st_size for p in cache.own_files())
    assert main(["cache", "clear", "--yes", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["freed"] == sizes and len(cleared["removed"]) == 4 + 2 + 3  # 2 spaces, 2 sidecars, 2 locks, index
    assert _names(cache_dir) == sorted([*(p.name for p in foreign), cache.INDEX_DIR])  # only dictembed's files went
    assert _names(index.parent) == ["mine"] and (index.parent / "mine" / "index.json").read_text() == "mine"
    assert main(["cache", "clear", "--json"]) == 0  # nothing left to remove: no question asked
    assert json.loads(capsys.readouterr().out)["freed"] == 0


# ------------------------------------------------------------------------------ float16 spaces
def test_fp16_space_halves_the_file_and_scores_within_tolerance(encoder, toy_dictionary, tmp_path) -> None:
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp", similarity="cosine", temperature=0.05)
    space.save(tmp_path / "fp32", dtype="fp32")
    space.save(tmp_path / "fp16", dtype="fp16")
    tensors = {d: tmp_path / d / SPACE_DIR / "tensors.safetensors" for d in ("fp32", "fp16")}
    meta = json.loads((tmp_path / "fp16" / SPACE_DIR / "space.json").read_text())
    assert meta["dtype"] == "fp16"
    from safetensors.torch import load_file

    assert load_file(str(tensors["fp16"]))["matrix"].dtype == torch.float16
    assert load_file(str(tensors["fp16"]))["counts"].dtype == torch.long  # bookkeeping is not cast
    exact, half = load_entry_space(tmp_path / "fp32"), load_entry_space(tmp_path / "fp16")
    assert torch.equal(exact.matrix, space.matrix)
    assert half.matrix.dtype == torch.float32 and half.counts.tolist() == space.counts.tolist()
    assert half.matrix.shape == space.matrix.shape and not torch.equal(half.matrix, space.matrix)
    h = torch.from_numpy(encoder.encode(["an animal that barks", "water from the sky"]))
    # Tolerance: float16 keeps 11 significant bits (relative error <= 2**-11 per entry); a cosine moves by
    # at most about 1e-3, i.e. 0.02 logits at temperature 0.05.
    torch.testing.assert_close(half(h), space(h), rtol=0, atol=0.02)
    assert torch.equal(half(h).topk(3).indices, space(h).topk(3).indices)
    matrix_bytes = space.matrix.numel() * 2
    assert tensors["fp32"].stat().st_size - tensors["fp16"].stat().st_size == matrix_bytes


def test_dot_space_fp16_and_fallbacks(bert_path, encoder, tmp_path, caplog) -> None:
    torch.manual_seed(0)
    matrix = torch.randn(50, 16)
    space = DefinitionSpace([f"w{i}" for i in range(50)], matrix)
    space.save(tmp_path / "half", dtype="fp16")
    h = torch.randn(4, 16)
    scale = float(space(h).abs().max())
    torch.testing.assert_close(load_entry_space(tmp_path / "half")(h), space(h), rtol=0, atol=1e-3 * scale)
    space.save(tmp_path / "default")
    assert json.loads((tmp_path / "default" / SPACE_DIR / "space.json").read_text())["dtype"] == SAVE_DTYPE
    # a matrix beyond float16's range stays float32, and says so
    with caplog.at_level(logging.WARNING, logger="dictembed.entry_space"):
        DefinitionSpace(["a", "b"], torch.tensor([[1e6, 0.0], [0.0, 1.0]])).save(tmp_path / "big", dtype="fp16")
    assert "range" in caplog.text
    assert json.loads((tmp_path / "big" / SPACE_DIR / "space.json").read_text())["dtype"] == "fp32"
    assert load_entry_space(tmp_path / "big").matrix[0, 0] == 1e6
    # an MLM head is saved as it is
    head = MLMHeadSpace.from_pretrained(str(bert_path), ["dog", "cat", "car"], encoder.tokenizer)
    head.save(tmp_path / "head", dtype="fp16")
    assert json.loads((tmp_path / "head" / SPACE_DIR / "space.json").read_text())["dtype"] == "fp32"
    with pytest.raises(DictEmbedError, match="unknown entry-space dtype 'bf8'"):
        space.save(tmp_path / "bad", dtype="bf8")
    meta_path = tmp_path / "half" / SPACE_DIR / "space.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "dtype": "int3"}))
    with pytest.raises(DictEmbedError, match="corrupt entry space.*unknown dtype 'int3'"):
        load_entry_space(tmp_path / "half")


def test_cache_clear_refuses_a_cache_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cache clear` says the cache is not a folder, as `cache list` does, and keeps the file."""
    from conftest import cli_refuses

    cache_file = tmp_path / "cachefile"
    cache_file.write_text("mine")
    cli_refuses(capsys, ["cache", "clear", "--yes", "--cache-dir", str(cache_file)], "not a folder")
    assert cache_file.read_text() == "mine"


def test_an_empty_cache_dir_is_refused_not_read_as_the_default(tmp_path: Path, capsys, monkeypatch) -> None:
    """`--cache-dir ""` meant the default cache: `cache clear --yes` would empty the one the user did not name."""
    from conftest import cli_refuses

    default = tmp_path / "default"
    monkeypatch.setenv("DICTEMBED_CACHE", str(default))
    (default / "spaces").mkdir(parents=True)
    for task in (["list"], ["clear", "--yes"]):
        cli_refuses(capsys, ["cache", *task, "--cache-dir", ""], "--cache-dir", "empty path", code=2)
    assert (default / "spaces").is_dir()


def test_a_cache_dir_that_is_not_there_is_refused_not_listed_empty(tmp_path: Path, capsys) -> None:
    """A typo in --cache-dir listed "0 cached entry space(s)", as if the cache were empty."""
    from dictembed.cli import main

    for command in ("list", "clear"):
        assert main(["cache", command, "--cache-dir", str(tmp_path / "typo")]) == 2
        assert f"argument --cache-dir: {tmp_path / 'typo'}: no such folder" in capsys.readouterr().err
