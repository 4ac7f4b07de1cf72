"""The ONNX Runtime backend (dictembed.backends.onnx): export, int8 quantisation, loading, the CLI and errors,
on a tiny random BERT sentence-transformers model (conftest's tiny_bert + Pooling(mean) + Normalize)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import BACKEND_SENTENCES, cli_refuses

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from dictembed.backends.onnx.export import export  # noqa: E402
from dictembed.backends.onnx.graph import FP32_FILE, INT8_FILE  # noqa: E402
from dictembed.backends.onnx.runtime import attach, is_exported  # noqa: E402
from dictembed.cli import main  # noqa: E402
from dictembed.encoder import Encoder  # noqa: E402
from dictembed.errors import DictEmbedError, ModelLoadError  # noqa: E402
from dictembed.evaluation.mteb import MtebEncoder  # noqa: E402

SENTENCES = BACKEND_SENTENCES


@pytest.fixture(autouse=True)
def restore_log_level():
    """`main` sets the root logger's level; keep it from leaking into later tests."""
    level = logging.getLogger().level
    yield
    logging.getLogger().setLevel(level)


@pytest.fixture(scope="module")
def st_model(bert_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sentence-transformers folder: the tiny BERT, mean pooling, Normalize."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st

    transformer = st.Transformer(str(bert_path), max_seq_length=64)
    folder = tmp_path_factory.mktemp("tiny-st") / "model"
    modules = [transformer, st.Pooling(transformer.get_embedding_dimension(), "mean"), st.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder), create_model_card=False)
    return folder


@pytest.fixture(scope="module")
def exports(st_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Exports that keep their fp32 weights: `Encoder.load` needs them (the query encoder does not)."""
    root = tmp_path_factory.mktemp("onnx-exports")
    return {
        "fp32": export(st_model, root / "fp32", keep_weights=True),
        "int8": export(st_model, root / "int8", quantize="int8", keep_weights=True),
    }


def _torch_vectors(model: Path) -> np.ndarray:
    return Encoder.load(model, device="cpu", backend="torch").encode(SENTENCES, batch_size=4)


def test_fp32_export_round_trips(st_model: Path, exports: dict[str, Path]) -> None:
    folder = exports["fp32"]
    assert is_exported(folder) and (folder / "onnx" / FP32_FILE).is_file()
    for kept in ("tokenizer.json", "modules.json", "1_Pooling/config.json", "dictembed.json"):
        assert (folder / kept).is_file(), kept
    assert not list(folder.rglob("*.bin")) and not list(folder.rglob("*.pkl"))  # no pickles
    encoder = Encoder.load(folder)  # detected as an export
    assert encoder.onnx is not None and encoder.normalize and encoder.pooling == "mean"
    vectors = encoder.encode(SENTENCES, batch_size=4)
    reference = _torch_vectors(st_model)
    assert vectors.shape == reference.shape
    np.testing.assert_allclose(vectors, reference, atol=1e-3)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)  # Normalize kept
    single = encoder.encode(SENTENCES[3])  # a batch of one, another sequence length
    np.testing.assert_allclose(single, reference[3], atol=1e-3)


def test_backend_onnx_on_a_plain_model(st_model: Path) -> None:
    """`backend="onnx"` on a model that was never exported exports a fp32 graph on the fly."""
    encoder = Encoder.load(st_model, backend="onnx")
    assert encoder.onnx is not None
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=3), _torch_vectors(st_model), atol=1e-3)


def test_auto_precision_is_fp32_on_onnx_runtime(exports: dict[str, Path], monkeypatch) -> None:
    """ONNX Runtime computes its graph's precision: "auto" stays fp32 there even where it means bf16 (AMX)."""
    monkeypatch.setenv("DICTEMBED_CPU_PRECISION", "bf16")
    encoder = Encoder.load(exports["int8"])
    assert encoder.set_precision("auto").compute_precision == "fp32"
    assert encoder.set_precision("bf16").compute_precision == "bf16"  # an explicit choice is kept
    assert Encoder.load(exports["int8"], backend="torch").set_precision("auto").compute_precision == "bf16"


def test_torch_backend_still_loads_an_export(st_model: Path, exports: dict[str, Path]) -> None:
    encoder = Encoder.load(exports["int8"], backend="torch")
    assert encoder.onnx is None
    np.testing.assert_allclose(encoder.encode(SENTENCES), _torch_vectors(st_model), atol=1e-5)


def test_int8_is_close_to_fp32(st_model: Path, exports: dict[str, Path]) -> None:
    folder = exports["int8"]
    assert (folder / "onnx" / INT8_FILE).is_file() and not (folder / "onnx" / FP32_FILE).exists()
    manifest = json.loads((folder / "onnx" / "export.json").read_text())
    assert manifest["quantize"] == "int8" and manifest["settings"]["per_channel"] is True
    assert manifest["settings"]["reduce_range"] is True  # no int16 saturation on CPUs without VNNI
    vectors = Encoder.load(folder).encode(SENTENCES, batch_size=4)
    reference = _torch_vectors(st_model)
    cosine = (vectors * reference).sum(1)  # both normalised
    # measured (7-bit weights): min 0.9997 on this tiny model with VNNI; without reduce_range an AVX2-only CPU
    # gave 0.985 here (int16 saturation), with it the integer arithmetic is the same on both kinds of CPU
    assert cosine.min() >= 0.99, cosine
    assert not np.allclose(vectors, reference, atol=1e-6)  # it really is another graph


def test_keep_ffn_fp32_leaves_the_down_projections_unquantised(
    st_model: Path, exports: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """`export --quantize int8 --keep-ffn-fp32`: the MatMuls fed by a GELU stay fp32 MatMuls (quantised by
    default), the others are quantised, the setting is in the manifest, and the vectors stay near fp32;
    --keep-ffn-fp32 without --quantize int8 is a one-line usage error."""
    import onnx

    from dictembed.backends.onnx.graph import ffn_output_matmuls

    out = tmp_path / "int8-ffn"
    argv = ["export", "--model", str(st_model), "--output", str(out), "--quantize", "int8", "--keep-ffn-fp32"]
    assert main([*argv, "--keep-weights", "-q"]) == 0
    manifest = json.loads((out / "onnx" / "export.json").read_text())
    assert manifest["settings"]["keep_ffn_output"] is True
    kept = {n.name: n.op_type for n in onnx.load(str(out / "onnx" / INT8_FILE)).graph.node}
    default = {n.name: n.op_type for n in onnx.load(str(exports["int8"] / "onnx" / INT8_FILE)).graph.node}
    fp32_graph = tmp_path / "fp32"
    export(st_model, fp32_graph)
    down = ffn_output_matmuls(onnx.load(str(fp32_graph / "onnx" / FP32_FILE)).graph.node)
    assert down and all(kept.get(name) == "MatMul" for name in down)
    assert not any(default.get(name) == "MatMul" for name in down)  # quantised (renamed) by default
    assert any(op == "MatMulInteger" for op in kept.values())  # the rest is int8
    vectors = Encoder.load(out).encode(SENTENCES, batch_size=4)
    assert ((vectors * _torch_vectors(st_model)).sum(1)).min() >= 0.99
    capsys.readouterr()
    argv = ["export", "--model", str(st_model), "--output", str(tmp_path / "x"), "--keep-ffn-fp32"]
    cli_refuses(capsys, argv, "add --quantize int8", code=2)


def test_smoothing_the_down_projections_keeps_the_fp32_function(st_model: Path, tmp_path: Path) -> None:
    """`smooth_matmul_inputs` puts a Mul before each down-projection and scales its weight rows by the inverse: the
    fp32 graph's output is unchanged (to rounding), its weights are not; the ranges are per input channel."""
    import onnx
    import onnxruntime as ort

    from dictembed.backends.onnx.export import calibration_batches
    from dictembed.backends.onnx.graph import ffn_output_matmuls
    from dictembed.backends.onnx.smoothing import SUFFIX, input_ranges, smooth_matmul_inputs

    folder = export(st_model, tmp_path / "fp32")
    model = onnx.load(str(folder / "onnx" / FP32_FILE))
    down = ffn_output_matmuls(model.graph.node)
    encoder = Encoder.load(st_model, backend="torch")
    batches = calibration_batches(encoder, ["input_ids", "attention_mask", "token_type_ids"])
    assert len(batches) == 16 and all(b["input_ids"].shape == b["attention_mask"].shape for b in batches)
    ranges = input_ranges(model, down, batches)
    weights = {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}
    by_name = {n.name: n for n in model.graph.node}
    assert down and all(ranges[name].shape == (weights[by_name[name].input[1]].shape[0],) for name in down)
    assert all((ranges[name] > 0).all() for name in down)
    smoothed = onnx.ModelProto()
    smoothed.CopyFrom(model)
    assert smooth_matmul_inputs(smoothed, ranges, 0.8) == len(down)
    onnx.checker.check_model(smoothed)  # still a valid, topologically ordered graph
    muls = [n for n in smoothed.graph.node if n.name.endswith(SUFFIX)]
    assert [m.name for m in muls] == [name + SUFFIX for name in down] and all(m.op_type == "Mul" for m in muls)
    changed = {init.name: onnx.numpy_helper.to_array(init) for init in smoothed.graph.initializer}
    assert not np.allclose(changed[by_name[down[0]].input[1]], weights[by_name[down[0]].input[1]])

    def run(proto: Any) -> np.ndarray:
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        return session.run(None, {k: v for k, v in batches[0].items() if k in names})[0]

    reference = run(model)
    np.testing.assert_allclose(run(smoothed), reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())


def test_smooth_ffn_export_quantises_the_smoothed_graph(st_model: Path, tmp_path: Path, capsys) -> None:
    """`export --quantize int8 --smooth-ffn`: the down-projections are quantised after their Mul, the strength is
    in the manifest, the vectors stay near fp32; the flag without --quantize int8, beside --keep-ffn-fp32 or
    outside (0, 1] is a one-line usage error, and the library refuses smoothing without calibration."""
    import onnx

    from dictembed.backends.onnx.export import calibration_batches
    from dictembed.backends.onnx.graph import QuantizeSettings, quantize_int8
    from dictembed.backends.onnx.smoothing import SUFFIX
    from dictembed.quantization import SMOOTH_ALPHA

    out = tmp_path / "int8-smooth"
    argv = ["export", "--model", str(st_model), "--output", str(out), "--quantize", "int8", "--smooth-ffn"]
    assert main([*argv, "--keep-weights", "-q"]) == 0
    manifest = json.loads((out / "onnx" / "export.json").read_text())
    assert manifest["settings"]["smooth_ffn"] == SMOOTH_ALPHA and manifest["settings"]["keep_ffn_output"] is False
    nodes = list(onnx.load(str(out / "onnx" / INT8_FILE)).graph.node)
    muls = [n for n in nodes if n.name.endswith(SUFFIX)]
    assert muls and not any(n.op_type == "MatMul" for n in nodes)  # every MatMul quantised, the smoothed ones too
    assert not (out / "onnx" / "model_qint8.smoothed.onnx").exists()
    vectors = Encoder.load(out).encode(SENTENCES, batch_size=4)
    assert ((vectors * _torch_vectors(st_model)).sum(1)).min() >= 0.99
    capsys.readouterr()
    base = ["export", "--model", str(st_model), "--output", str(tmp_path / "x")]
    cli_refuses(capsys, [*base, "--smooth-ffn"], "add --quantize int8", code=2)
    cli_refuses(capsys, [*base, "--quantize", "int8", "--smooth-ffn", "--keep-ffn-fp32"], "choose one", code=2)
    cli_refuses(capsys, [*base, "--quantize", "int8", "--smooth-ffn", "1.5"], "must be > 0 and <= 1", code=2)
    cli_refuses(capsys, [*base, "--quantize", "int8", "--smooth-ffn", "--no-optimize"], "drop --no-optimize", code=2)
    fp32 = export(st_model, tmp_path / "fp32") / "onnx" / FP32_FILE
    with pytest.raises(DictEmbedError, match="needs calibration batches"):
        quantize_int8(fp32, tmp_path / "q.onnx", QuantizeSettings(smooth_ffn=0.8))
    batches = calibration_batches(Encoder.load(st_model, backend="torch"), ["input_ids", "attention_mask"])
    with pytest.raises(DictEmbedError, match="choose one"):
        quantize_int8(fp32, tmp_path / "q.onnx", QuantizeSettings(smooth_ffn=0.8, keep_ffn_output=True), batches)
    unfused = export(st_model, tmp_path / "unfused", optimize=False) / "onnx" / FP32_FILE  # GELU as Erf: no Gelu op
    with pytest.raises(DictEmbedError, match="no feed-forward down-projection"):
        quantize_int8(unfused, tmp_path / "q.onnx", QuantizeSettings(smooth_ffn=0.8), batches)
    assert not list(tmp_path.glob("*.smoothed.onnx")) and not (tmp_path / "q.onnx").exists()


class SessionSpy:
    """Wraps an onnxruntime session: records each run's session, thread, autocast and grad state and rows,
    and how many runs were inside at once (each run lingers 5 ms). `fail`: the first run fails at once, the
    others after 1 s (long enough for the caller to drop the batches not yet started)."""

    def __init__(self, session: Any, name: str, calls: list[tuple], fail: bool = False) -> None:
        self.session, self.name, self.calls, self.fail = session, name, calls, fail
        self.inside, self.most_inside, self.lock = 0, 0, threading.Lock()

    def run(self, outputs: Any, feeds: dict[str, np.ndarray]) -> Any:
        thread, autocast = threading.current_thread().name, torch.is_autocast_enabled("cpu")
        with self.lock:
            self.calls.append((self.name, thread, autocast, torch.is_grad_enabled(), len(feeds["input_ids"])))
            first, self.inside = len(self.calls) == 1, self.inside + 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            time.sleep(0 if self.fail and first else 1.0 if self.fail else 0.005)
            if self.fail:
                raise RuntimeError("the run failed on a worker")
            return self.session.run(outputs, feeds)
        finally:
            with self.lock:
                self.inside -= 1


def _spied(folder: Path, threads: int, calls: list[tuple], fail: bool = False) -> Encoder:
    encoder = attach(Encoder.load(folder, backend="torch"), folder, threads=threads)
    backbone = encoder.onnx
    intra_op = [s.get_session_options().intra_op_num_threads for s in (backbone.session, backbone.single)]
    assert intra_op == [threads, 1]
    backbone.session = SessionSpy(backbone.session, "session", calls)
    backbone.single = SessionSpy(backbone.single, "single", calls, fail)
    return encoder


def test_batches_run_on_several_threads_with_the_results_of_one(exports: dict[str, Path], caplog) -> None:
    """An ONNX encoder runs `threads` single-threaded batches at once on worker threads, with the caller's
    autocast and no gradients: the vectors of one thread bit for bit (the same batches: int8's activation
    scales are per batch) and in order, every sentence cut at max_length (64) counted once; fewer batches
    than threads run one at a time on the caller's thread with every intra-op thread; a worker's error
    reaches the caller and the batches not yet started are dropped."""
    many = [f"{s}, number {i}" + " word" * (3 * (i % 30)) for i, s in enumerate(SENTENCES * 20)]
    results, calls = {}, {1: [], 3: []}
    for threads in (1, 3):
        encoder = _spied(exports["int8"], threads, calls[threads])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="dictembed.encoder"):
            results[threads] = encoder.encode(many, batch_size=8), [r.getMessage() for r in caplog.records]
    np.testing.assert_array_equal(results[3][0], results[1][0])
    too_long = sum(len(encoder.tokenizer(s)["input_ids"]) > 64 for s in many)
    assert 0 < too_long < len(many) and results[3][1] == results[1][1] == [
        f"{too_long} of 120 sentences were longer than 64 tokens and were truncated"
    ]
    assert [c[0] for c in calls[1]] == ["session"] * 15 and {c[1] for c in calls[1]} == {"MainThread"}
    assert [c[0] for c in calls[3]] == ["single"] * 15 and [c[4] for c in calls[3]] == [8] * 15
    workers = {c[1] for c in calls[3]}
    assert len(workers) > 1 and all(name.startswith("dictembed-encode") for name in workers)
    assert encoder.onnx.single.most_inside > 1  # the runs overlapped
    assert not any(c[2] or c[3] for c in calls[3])  # fp32: no autocast, no gradients

    calls[3].clear()
    encoder.encode(SENTENCES * 2, batch_size=6)  # 2 batches for 3 threads
    assert calls[3] == [("session", "MainThread", False, False, 6)] * 2
    calls[3].clear()
    encoder.set_precision("bf16").encode(many, batch_size=8)
    assert len(calls[3]) == 15 and all(c[0] == "single" and c[2] and not c[3] for c in calls[3])

    failed: list[tuple] = []
    broken = _spied(exports["fp32"], 3, failed, fail=True)
    with pytest.raises(RuntimeError, match="failed on a worker"):
        broken.encode(many, batch_size=8)
    # 6 batches (2 x threads) were submitted when the first failed; only the 3 running (+1 racing) ran
    assert 1 <= len(failed) <= 4
    with pytest.raises(DictEmbedError, match="threads must be at least 1"):
        attach(Encoder.load(exports["fp32"], backend="torch"), exports["fp32"], threads=0)


def test_int8_exports_are_their_own_mteb_experiment(exports: dict[str, Path]) -> None:
    kinds = {
        name: MtebEncoder(Encoder.load(path)).mteb_model_meta.experiment_kwargs["backend"]
        for name, path in exports.items()
    }
    assert kinds["int8"].startswith("onnx-int8-") and kinds["fp32"].startswith("onnx-fp32-")


def test_with_pooling_and_definition_space(exports: dict[str, Path], toy_dictionary) -> None:
    from dictembed.entry_space import DefinitionSpace

    encoder = Encoder.load(exports["int8"])
    cls = encoder.with_pooling("cls")
    assert cls.onnx is encoder.onnx
    assert cls.encode(SENTENCES[:2]).shape == (2, encoder.dim)
    space = DefinitionSpace.build(encoder, toy_dictionary, "amp")
    torch_space = DefinitionSpace.build(Encoder.load(exports["int8"], backend="torch"), toy_dictionary, "amp")
    assert len(space) == len(toy_dictionary)
    a, b = space.vectors(), torch_space.vectors()
    assert a.shape == b.shape and np.isfinite(a).all()
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosine.min() >= 0.95


def test_training_is_refused(exports: dict[str, Path]) -> None:
    encoder = Encoder.load(exports["fp32"])
    batch = encoder.tokenize(SENTENCES[:2])
    with pytest.raises(DictEmbedError, match="inference only.*backend='torch'"):
        encoder(batch)  # a forward with gradients: training
    with torch.no_grad():
        assert encoder(batch).shape == (2, encoder.dim)


def test_first_last_avg_is_refused(exports: dict[str, Path]) -> None:
    with pytest.raises(DictEmbedError, match="first_last_avg"):
        Encoder.load(exports["fp32"], pooling="first_last_avg")


def test_unknown_backend(st_model: Path) -> None:
    with pytest.raises(DictEmbedError, match="unknown backend 'tf'"):
        Encoder.load(st_model, backend="tf")


def test_already_exported_is_refused(exports: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(DictEmbedError, match="already an ONNX export"):
        export(Encoder.load(exports["fp32"]), tmp_path / "again")


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / folder.name))


def test_missing_onnx_file_is_one_line_error(exports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(exports["int8"], tmp_path)
    (folder / "onnx" / INT8_FILE).unlink()
    with pytest.raises(ModelLoadError) as caught:
        Encoder.load(folder)
    message = str(caught.value)
    assert INT8_FILE in message and "missing" in message and "\n" not in message


def test_corrupt_onnx_file_is_one_line_error(exports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(exports["fp32"], tmp_path)
    path = folder / "onnx" / FP32_FILE
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ModelLoadError) as caught:
        Encoder.load(folder)
    message = str(caught.value)
    assert str(path) in message and "corrupt" in message and "\n" not in message


def test_corrupt_manifest_is_one_line_error(exports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(exports["fp32"], tmp_path)
    (folder / "onnx" / "export.json").write_text('{"file": "../../model.safetensors"}')
    with pytest.raises(ModelLoadError, match="not a file name in the onnx folder"):
        Encoder.load(folder)
    (folder / "onnx" / "export.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match=r"export\.json is corrupt"):
        Encoder.load(folder)


def test_missing_extra_is_the_one_line_install_hint(st_model: Path, tmp_path: Path, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    with pytest.raises(DictEmbedError, match=r'pip install "dictembed\[onnx\]"'):
        export(st_model, tmp_path / "x")


# --------------------------------------------------------------------------------------------------- CLI
def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("dictembed: error: "), captured.err
    return lines[0]


def test_cli_export_never_replaces_a_folder_that_holds_no_model(st_model: Path, tmp_path: Path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    assert main(["export", "--model", str(st_model), "--output", str(mine), "--overwrite"]) == 1
    assert f"--output {mine} is a non-empty folder that holds no model" in _one_line_error(capsys)
    assert [p.name for p in mine.iterdir()] == ["thesis.txt"] and (mine / "thesis.txt").read_text() == "years of work"


def test_cli_export_and_encode(st_model: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "exported"
    assert (
        main(
            [
                "export",
                "--model",
                str(st_model),
                "--output",
                str(out),
                "--format",
                "onnx",
                "--quantize",
                "int8",
                "--keep-weights",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["file"] == f"onnx/{INT8_FILE}" and report["quantize"] == "int8"
    assert main(["export", "--model", str(st_model), "--output", str(out)]) == 1
    assert "already holds a model; pass --overwrite" in _one_line_error(capsys)

    text = tmp_path / "in.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    reference = _torch_vectors(st_model)
    for model, backend in [(out, None), (st_model, "onnx")]:
        target = tmp_path / f"{backend}.npz"  # .npz: the in-memory path (.npy streams, without "backend")
        args = ["encode", "--model", str(model), "--input", str(text), "--output", str(target), "--json"]
        assert main(args + (["--backend", backend] if backend else [])) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["backend"] == "onnx" and report["device"] == "cpu"
        vectors = np.load(target)["embeddings"]
        assert vectors.shape == reference.shape
        assert ((vectors * reference).sum(1) >= 0.95).all()

    # .npy (the streamed path): --backend torch on the export gives the torch vectors, the default its int8 ones
    for backend in ["torch", None]:
        target = tmp_path / f"streamed-{backend}.npy"
        args = ["encode", "--model", str(out), "--input", str(text), "--output", str(target), "--device", "cpu"]
        assert main(args + (["--backend", backend] if backend else [])) == 0
        vectors = np.load(target)
        close = np.allclose(vectors, reference, atol=1e-5)
        assert close if backend == "torch" else not close and ((vectors * reference).sum(1) >= 0.95).all()


def test_cli_encode_missing_onnx_file(exports: dict[str, Path], tmp_path: Path, capsys) -> None:
    folder = _copy(exports["fp32"], tmp_path)
    (folder / "onnx" / FP32_FILE).unlink()
    text = tmp_path / "in.txt"
    text.write_text("a sentence\n")
    args = ["encode", "--model", str(folder), "--input", str(text), "--output", str(tmp_path / "x.npy")]
    assert main(args) == 1
    assert FP32_FILE in _one_line_error(capsys)


def test_onnx_and_torch_spaces_have_their_own_cache_entries(exports: dict[str, Path], toy_dictionary, tmp_path) -> None:
    """The same folder loaded on ONNX int8 and on torch builds other vectors: neither may reuse the other's."""
    from dictembed.cache import cache_key
    from dictembed.entry_space import DefinitionSpace

    onnx = Encoder.load(exports["int8"])
    torch_encoder = Encoder.load(exports["int8"], backend="torch")
    assert cache_key(onnx, toy_dictionary, "amp", False) != cache_key(torch_encoder, toy_dictionary, "amp", False)
    first = DefinitionSpace.build(onnx, toy_dictionary, "amp", cache_dir=tmp_path)
    second = DefinitionSpace.build(torch_encoder, toy_dictionary, "amp", cache_dir=tmp_path)
    assert len(list(tmp_path.glob("definitions-*.safetensors"))) == 2
    assert not np.allclose(first.vectors(), second.vectors(), atol=1e-6)
