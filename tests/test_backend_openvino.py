"""The OpenVINO backend (dictembed.backends.openvino) on the tiny BERT: its vectors against torch fp32, the bf16
precision hint, an export's graph, the refusals, the CLI, and the one-line install hint without openvino. The
suite pins DICTEMBED_CPU_PRECISION=fp32 (conftest), so "auto" is the f32 hint on any CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import BACKEND_SENTENCES

from dictembed.backends.openvino import OpenVinoBackbone
from dictembed.encoder import Encoder
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.extras import MissingExtraError

SENTENCES = BACKEND_SENTENCES
INSTALL = "the OpenVINO backend needs the optional package 'openvino': pip install \"dictembed[openvino]\""


@pytest.fixture()
def openvino() -> Any:
    """openvino, and the onnx extra that exports the graph it reads; the test is skipped without them."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    return pytest.importorskip("openvino")


@pytest.fixture(scope="module")
def exports(saved_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 and int8 exports of the tiny BERT that keep their weights (`Encoder.load` needs them)."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from dictembed.backends.onnx.export import export

    root = tmp_path_factory.mktemp("openvino-exports")
    return {
        name: export(saved_bert, root / name, quantize=q, keep_weights=True)
        for name, q in [("fp32", None), ("int8", "int8")]
    }


@pytest.fixture(scope="module")
def reference(saved_bert: Path) -> np.ndarray:
    """The torch fp32 vectors of SENTENCES."""
    return np.asarray(Encoder.load(saved_bert, device="cpu", backend="torch").encode(SENTENCES, batch_size=4))


def backbone_of(encoder: Encoder) -> OpenVinoBackbone:
    """The encoder's backbone, which must be OpenVINO's."""
    assert isinstance(encoder.onnx, OpenVinoBackbone), type(encoder.onnx)
    return encoder.onnx


def hint_of(compiled: Any) -> str:
    """The INFERENCE_PRECISION_HINT a compiled model runs with: "f32" or "bf16"."""
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())


def test_plain_folder_matches_torch_fp32(openvino: Any, saved_bert: Path, reference: np.ndarray) -> None:
    """A folder that is no export: its fp32 graph is exported now and compiled with the f32 hint (one batch: a
    direct call, not the streams)."""
    encoder = Encoder.load(saved_bert, backend="openvino")
    backbone = backbone_of(encoder)
    assert encoder.compute_precision == "fp32" and not backbone.models  # compiled at the first forward
    vectors = encoder.encode(SENTENCES, batch_size=8)
    assert list(backbone.models) == ["f32"] and hint_of(backbone.models["f32"]) == "f32"
    assert vectors.shape == reference.shape
    np.testing.assert_allclose(vectors, reference, atol=1e-4)
    np.testing.assert_allclose(encoder.encode(SENTENCES[3]), reference[3], atol=1e-4)  # a batch of one
    assert list(backbone.models) == ["f32"]


def test_export_graph_is_its_own_backend(
    openvino: Any, exports: dict[str, Path], reference: np.ndarray, toy_dictionary: Any
) -> None:
    """An export's fp32 graph on OpenVINO: torch's vectors, and a cache key and MTEB name of its own (not ONNX
    Runtime's, which runs the same graph)."""
    from dictembed.cache import cache_key
    from dictembed.evaluation.mteb import MtebEncoder

    encoder = Encoder.load(exports["fp32"], backend="openvino")
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=4), reference, atol=1e-4)
    onnx = Encoder.load(exports["fp32"])
    assert onnx.onnx is not None and not isinstance(onnx.onnx, OpenVinoBackbone)
    assert cache_key(encoder, toy_dictionary, "amp", False) != cache_key(onnx, toy_dictionary, "amp", False)
    backend = MtebEncoder(encoder).mteb_model_meta.experiment_kwargs["backend"]
    assert backend.startswith("openvino-fp32-") and backend != onnx.onnx.identity


def test_bf16_hint(openvino: Any, exports: dict[str, Path], reference: np.ndarray, monkeypatch, caplog) -> None:
    """DICTEMBED_CPU_PRECISION=bf16: the bf16 hint and compute precision, vectors close to fp32, and a warning
    where OpenVINO runs f32 instead (a CPU without native bf16); `set_precision` fp32 then runs the f32-hinted
    model, with fp32's vectors."""
    from dictembed.devices import cpu_has_amx

    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "bf16")
    encoder = Encoder.load(exports["fp32"], backend="openvino")
    models = backbone_of(encoder).models
    assert encoder.compute_precision == "bf16" and not models
    vectors = encoder.encode(SENTENCES, batch_size=8)
    assert list(models) == ["bf16"]
    if cpu_has_amx():  # elsewhere OpenVINO may fall back to f32 (no native bf16): the hint asked is checked above
        assert hint_of(models["bf16"]) == "bf16"
    fell_back = hint_of(models["bf16"]) != "bf16"
    assert ("not the bf16 asked, on this CPU" in caplog.text) == fell_back, caplog.text
    cosine = (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() > 0.99, cosine
    assert list(models) == ["bf16"]

    encoder.set_precision("fp32")
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=8), reference, atol=1e-4)
    assert sorted(models) == ["bf16", "f32"] and hint_of(models["f32"]) == "f32"

    fp32 = Encoder.load(exports["fp32"], backend="openvino").set_precision("fp32")  # `encode --precision fp32`
    np.testing.assert_allclose(fp32.encode(SENTENCES, batch_size=8), reference, atol=1e-4)
    assert list(backbone_of(fp32).models) == ["f32"]  # one model compiled, not the load's bf16 as well


def test_int8_export(openvino: Any, exports: dict[str, Path], reference: np.ndarray) -> None:
    """onnxruntime's int8 graph (com.microsoft.QAttention): a one-line error naming the folder while OpenVINO
    cannot convert it; should a version read it, its vectors must be int8's, close to fp32."""
    try:
        encoder = Encoder.load(exports["int8"], backend="openvino")
    except ModelLoadError as err:
        message = str(err)
        assert str(exports["int8"]) in message and "backend='onnx'" in message and "\n" not in message
    else:
        vectors = encoder.encode(SENTENCES, batch_size=4)
        cosine = (vectors * reference).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(reference, axis=1)
        assert cosine.min() > 0.95, cosine


def test_inference_only_and_thread_count(openvino: Any, exports: dict[str, Path]) -> None:
    from dictembed.backends.openvino import attach

    encoder = Encoder.load(exports["fp32"], backend="openvino")
    batch = encoder.tokenize(SENTENCES[:2])
    with pytest.raises(DictEmbedError, match="inference only.*backend='torch'"):
        encoder(batch)  # a forward with gradients: training
    with torch.no_grad():
        assert encoder(batch).shape == (2, encoder.dim)
    backbone = backbone_of(encoder)
    assert backbone.threads == backbone.inference_threads  # `Encoder.encode` runs that many batches at once
    assert backbone.models["f32"].get_property("INFERENCE_NUM_THREADS") == backbone.inference_threads >= 1
    with pytest.raises(DictEmbedError, match="threads must be at least 1"):
        attach(Encoder.load(exports["fp32"], backend="torch"), exports["fp32"], threads=0)


def test_batches_run_on_streams_with_the_vectors_of_direct_calls(
    openvino: Any, exports: dict[str, Path], reference: np.ndarray
) -> None:
    """An encode of more batches than threads runs them on the streams model, a batch per worker thread; its
    vectors are those of one-batch encodes (direct calls on every thread) and torch's."""
    from dictembed.backends.openvino import attach

    encoder = attach(Encoder.load(exports["fp32"], backend="torch"), exports["fp32"], threads=2)
    backbone = backbone_of(encoder)
    streamed = encoder.encode(SENTENCES, batch_size=1)
    assert list(backbone.stream_models) == ["f32"] and not backbone.models
    assert int(backbone.stream_models["f32"].get_property("NUM_STREAMS")) == 2
    direct = np.concatenate([encoder.encode([sentence]) for sentence in SENTENCES])
    assert list(backbone.models) == ["f32"]
    np.testing.assert_allclose(streamed, direct, atol=1e-5)
    np.testing.assert_allclose(streamed, reference, atol=1e-4)


def test_nncf_int8_quantises_the_network_and_keeps_the_vectors_near_fp32(
    openvino: Any, exports: dict[str, Path], reference: np.ndarray
) -> None:
    """`nncf_int8`: FakeQuantize nodes in the network, an identity of its own, vectors near fp32 on the streams and
    direct calls alike; a second quantisation, no calibration text and another backend are one-line errors."""
    pytest.importorskip("nncf")
    from dictembed.backends.openvino import nncf_int8

    encoder = Encoder.load(exports["fp32"], backend="openvino")
    fp32_identity = backbone_of(encoder).identity
    assert nncf_int8(encoder, SENTENCES * 4) is encoder
    backbone = backbone_of(encoder)
    assert any(op.get_type_name() == "FakeQuantize" for op in backbone.network.get_ops())
    assert backbone.manifest["quantize"] == "int8-nncf" and backbone.manifest["calibration"].startswith("24:")
    assert backbone.identity.startswith("openvino-int8-nncf-") and backbone.identity != fp32_identity
    streamed = encoder.encode(SENTENCES, batch_size=1)
    direct = encoder.encode(SENTENCES, batch_size=8)
    np.testing.assert_allclose(streamed, direct, atol=1e-5)
    cosine = (streamed * reference).sum(1) / np.linalg.norm(streamed, axis=1) / np.linalg.norm(reference, axis=1)
    assert cosine.min() > 0.9, cosine
    with pytest.raises(DictEmbedError, match="already quantised"):
        nncf_int8(encoder, SENTENCES)
    with pytest.raises(DictEmbedError, match="needs calibration sentences"):
        nncf_int8(Encoder.load(exports["fp32"], backend="openvino"), ["", "  "])
    with pytest.raises(DictEmbedError, match="backend='openvino'"):
        nncf_int8(Encoder.load(exports["fp32"], backend="torch"), SENTENCES)


def test_missing_openvino_is_the_one_line_extra_message(saved_bert: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino -> ImportError
    with pytest.raises(MissingExtraError) as raised:
        Encoder.load(saved_bert, backend="openvino")
    assert str(raised.value) == INSTALL


def test_cli_missing_openvino(saved_bert: Path, tmp_path: Path, capsys, monkeypatch, restore_log_level) -> None:
    from conftest import cli_refuses

    monkeypatch.setitem(sys.modules, "openvino", None)
    text = tmp_path / "in.txt"
    text.write_text("a sentence\n")
    argv = ["encode", "--model", str(saved_bert), "--input", str(text), "--output", str(tmp_path / "x.npz")]
    cli_refuses(capsys, [*argv, "--backend", "openvino"], INSTALL)


def test_cli_encode_writes_the_api_vectors(
    openvino: Any, exports: dict[str, Path], tmp_path: Path, capsys, restore_log_level
) -> None:
    """`encode --backend openvino`: the vectors of `Encoder.load(backend="openvino").encode`, in memory (.npz) and
    streamed (.npy), and "backend": "openvino" in the report."""
    from dictembed.cli import main

    model = exports["fp32"]
    expected = Encoder.load(model, backend="openvino").encode(SENTENCES)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    for target in (tmp_path / "out.npz", tmp_path / "out.npy"):
        argv = ["encode", "--model", str(model), "--input", str(text), "--output", str(target), "--json", "-q"]
        assert main([*argv, "--backend", "openvino"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["backend"], report["precision"], report["device"]) == ("openvino", "fp32", "cpu")
        vectors = np.load(target)["embeddings"] if target.suffix == ".npz" else np.load(target)
        np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_cli_encode_int8_calibrates_on_the_input(
    openvino: Any, exports: dict[str, Path], tmp_path: Path, capsys, restore_log_level
) -> None:
    """`encode --backend openvino --int8`: the vectors of `nncf_int8` calibrated on the input's lines, in memory and
    streamed; --int8 on another backend is a one-line usage error before the model loads."""
    pytest.importorskip("nncf")
    from conftest import cli_refuses

    from dictembed.backends.openvino import nncf_int8
    from dictembed.cli import main

    model = exports["fp32"]
    expected = nncf_int8(Encoder.load(model, backend="openvino"), SENTENCES).encode(SENTENCES)
    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    for target in (tmp_path / "out.npz", tmp_path / "out.npy"):
        argv = ["encode", "--model", str(model), "--input", str(text), "--output", str(target), "-q"]
        assert main([*argv, "--backend", "openvino", "--int8"]) == 0
        vectors = np.load(target)["embeddings"] if target.suffix == ".npz" else np.load(target)
        np.testing.assert_allclose(vectors, expected, atol=1e-5)
    capsys.readouterr()
    argv = ["encode", "--model", str(model), "--input", str(text), "--output", str(tmp_path / "x.npz"), "--int8"]
    cli_refuses(capsys, argv, "--backend openvino", code=2)
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # a pipe is read once: the streamed encode would have lost the calibration's lines
    argv = ["encode", "--model", str(model), "--input", str(fifo), "--output", str(tmp_path / "p.npy"), "--int8"]
    cli_refuses(capsys, [*argv, "--backend", "openvino"], str(fifo), "not a file", code=2)
    assert not (tmp_path / "p.npy").exists()


def test_a_signal_after_two_openvino_encoders_are_released_in_order(openvino: Any, saved_bert: Path) -> None:
    """Two encoders released first-in first-out, then Ctrl-C: the signal reaches its handler. Each with its own
    `openvino.Core`, the second Core's release put back the first one's unmapped alternate signal stack and the
    signal was a segmentation fault (run in a fresh process, which that would kill)."""
    import subprocess

    code = (
        "import gc, os, signal\n"
        "from dictembed.encoder import Encoder\n"
        f"first, second = (Encoder.load({str(saved_bert)!r}, backend='openvino') for _ in range(2))\n"
        "first.encode(['a word']); second.encode(['a word'])\n"
        "del first; gc.collect(); del second; gc.collect()\n"
        "received = []\n"
        "signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "print('received', received)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "received [2]"
