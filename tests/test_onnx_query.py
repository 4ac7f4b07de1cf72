"""The torch-free query encoder (`dictembed.backends.onnx.query.OnnxQueryEncoder`) and the complete export folder:
the same vectors as `Encoder.load` (the same graph through `OnnxBackbone`), the torch backend and
sentence-transformers; prompts, pooling modes, truncation, what it refuses; the export's entry space, definitions
and search index, without fp32 weights unless kept; no torch imported."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from conftest import BACKEND_SENTENCES, predict_in_a_process, torch_reverse_dictionary

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from dictembed.backends.onnx.export import drop_weights, export  # noqa: E402
from dictembed.backends.onnx.graph import INT8_FILE  # noqa: E402
from dictembed.backends.onnx.query import OnnxQueryEncoder, pool  # noqa: E402
from dictembed.cli import main  # noqa: E402
from dictembed.encoder import Encoder  # noqa: E402
from dictembed.errors import DictEmbedError, ModelLoadError  # noqa: E402
from dictembed.model_folder import DEFINITIONS_FILE, SEARCH_DIR, SPACE_DIR, WEIGHTS_FILE, read_record  # noqa: E402

SENTENCES = [*BACKEND_SENTENCES, "to move fast on foot"]
MANY = [f"{s}, number {i}" + " word" * (3 * (i % 30)) for i, s in enumerate(SENTENCES * 9)]  # some over 64 tokens
QUERY_LOG = "dictembed.backends.onnx.query"
TRUNCATED = "{} of {} sentences were longer than 64 tokens and were truncated"


def _st_folder(bert_path: Path, folder: Path, pooling: str, include_prompt: bool = True, **prompts: Any) -> Path:
    """The tiny BERT as a sentence-transformers folder: `pooling`, Normalize, and `prompts` (prompts=...,
    default_prompt_name=...)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st

    transformer = st.Transformer(str(bert_path), max_seq_length=64)
    modules = [transformer, st.Pooling(32, pooling, include_prompt=include_prompt), st.Normalize()]
    SentenceTransformer(modules=modules, device="cpu", **prompts).save(str(folder), create_model_card=False)
    return folder


@pytest.fixture(scope="module")
def folders(bert_path: Path, roberta_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Source folders: "plain" (mean pooling, no prompt) and "prompted" (cls pooling that leaves out the default
    prompt "query: "); exports of them with their fp32 weights kept ("fp32", "int8", "prompted-fp32"), a
    weightless int8 export ("int8-light"), and the tiny RoBERTa's (a BPE tokenizer, no token types) max-pooled
    export ("roberta-fp32")."""
    root = tmp_path_factory.mktemp("query")
    plain = _st_folder(bert_path, root / "plain", "mean")
    roberta = _st_folder(roberta_path, root / "roberta", "max")
    prompts = {"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"}
    prompted = _st_folder(bert_path, root / "prompted", "cls", include_prompt=False, **prompts)
    return {
        "plain": plain,
        "prompted": prompted,
        "fp32": export(plain, root / "fp32", keep_weights=True),
        "int8": export(plain, root / "int8", quantize="int8", keep_weights=True),
        "int8-light": export(plain, root / "int8-light", quantize="int8"),
        "prompted-fp32": export(prompted, root / "prompted-fp32", keep_weights=True),
        "roberta": roberta,
        "roberta-fp32": export(roberta, root / "roberta-fp32", keep_weights=True),
    }


def _torch_vectors(folder: Path, **kwargs: Any) -> np.ndarray:
    return Encoder.load(folder, device="cpu", backend="torch").encode(MANY, batch_size=8, **kwargs)


@pytest.mark.parametrize("name", ["fp32", "int8", "prompted-fp32", "roberta-fp32"])
@pytest.mark.parametrize("threads", [1, 3])
def test_the_vectors_of_encoder_load(folders: dict[str, Path], name: str, threads: int) -> None:
    """The same graph through `Encoder.load` (OnnxBackbone): equal within 1e-5, int8 too (the same length-sorted
    batches, so the same per-batch activation scales), one thread or several batches at once."""
    encoder = OnnxQueryEncoder.open(folders[name], threads=threads)
    assert encoder.device == "cpu" and encoder.dim == 32 and encoder.max_length == 64 and encoder.normalize
    assert ("token_type_ids" in encoder.inputs) is (name != "roberta-fp32")
    vectors = encoder.encode(MANY, batch_size=8)
    reference = Encoder.load(folders[name]).encode(MANY, batch_size=8)
    assert vectors.dtype == np.float32 and vectors.shape == (len(MANY), 32)
    np.testing.assert_allclose(vectors, reference, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)  # Normalize


def test_the_worker_threads_start_once_and_outlive_an_error(
    folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches run at once on worker threads started by the first encode and kept for the next (a server's every
    batch of queries would otherwise start and join its own); a worker's error reaches the caller, and the next
    encode gives the same vectors on the same threads."""
    encoder = OnnxQueryEncoder.open(folders["int8"], threads=2)
    first = encoder.encode(MANY, batch_size=8)
    real, ran, failing = encoder._forward, [], [False]

    def forward(session: Any, encodings: list, prompt_length: int) -> np.ndarray:
        ran.append(threading.current_thread())
        if failing[0] and len(ran) == 3:
            raise RuntimeError("a worker failed")
        return real(session, encodings, prompt_length)

    monkeypatch.setattr(encoder, "_forward", forward)
    runs = []
    for _ in range(2):
        ran.clear()
        np.testing.assert_array_equal(encoder.encode(MANY, batch_size=8), first)
        runs.append(set(ran))
    assert runs[0] == runs[1] and len(runs[0]) == 2
    assert all(t.name.startswith("dictembed-encode") and t is not threading.current_thread() for t in runs[0])
    ran.clear()
    failing[0] = True
    with pytest.raises(RuntimeError, match="a worker failed"):
        encoder.encode(MANY, batch_size=8)
    failing[0] = False
    ran.clear()
    np.testing.assert_array_equal(encoder.encode(MANY, batch_size=8), first)
    assert set(ran) == runs[0]


@pytest.mark.parametrize("name,source", [("fp32", "plain"), ("prompted-fp32", "prompted"), ("roberta-fp32", "roberta")])
def test_the_vectors_of_the_torch_backend(folders: dict[str, Path], name: str, source: str) -> None:
    vectors = OnnxQueryEncoder.open(folders[name]).encode(MANY, batch_size=8)
    np.testing.assert_allclose(vectors, _torch_vectors(folders[source]), atol=1e-4, rtol=0)


def test_the_default_prompt_is_prefixed_and_left_out_of_the_pooling(folders: dict[str, Path]) -> None:
    """e5-style: "query: " before every sentence unless a prompt is given ("" for none); with include_prompt=False
    cls pooling takes the first token after the prompt, as `Encoder` and sentence-transformers do."""
    encoder = OnnxQueryEncoder.open(folders["prompted-fp32"])
    assert encoder.default_prompt == "query: " and encoder.prompts == {"query": "query: ", "document": ""}
    assert encoder.pooling == "cls"
    torch_encoder = Encoder.load(folders["prompted"], device="cpu", backend="torch")
    for prompt in (None, "", "passage: "):
        np.testing.assert_allclose(
            encoder.encode(SENTENCES, prompt=prompt),
            torch_encoder.encode(SENTENCES, prompt=prompt),
            atol=1e-4,
            rtol=0,
        )
    default, none = encoder.encode(SENTENCES), encoder.encode(SENTENCES, prompt="")
    assert not np.allclose(default, none, atol=1e-3)


def test_one_string_chunks_and_order(folders: dict[str, Path]) -> None:
    encoder = OnnxQueryEncoder.open(folders["fp32"])
    whole = encoder.encode(MANY, batch_size=8)
    np.testing.assert_allclose(encoder.encode(MANY[3]), whole[3], atol=1e-5)
    assert encoder.encode(MANY[3]).shape == (32,) and encoder.encode([]).shape == (0, 32)
    chunks = list(encoder.embed(MANY, batch_size=8, chunk=20))
    assert [len(c) for c in chunks] == [20, 20, 20, 3]
    np.testing.assert_allclose(np.concatenate(chunks), whole, atol=1e-5)
    raw = OnnxQueryEncoder.open(folders["fp32"]).encode(SENTENCES, normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(raw, axis=1), 1, atol=1e-6)


def test_truncation_is_counted_and_warned_once(folders: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    encoder = OnnxQueryEncoder.open(folders["int8"], threads=2)
    too_long = sum(n > 64 for n in encoder.count_tokens(MANY))
    assert 0 < too_long < len(MANY)
    with caplog.at_level(logging.WARNING):
        list(encoder.embed(MANY, batch_size=8, chunk=25))
    assert [r.getMessage() for r in caplog.records if r.name == QUERY_LOG] == [TRUNCATED.format(too_long, len(MANY))]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Encoder.load(folders["int8"]).encode(MANY, batch_size=8)
    messages = [r.getMessage() for r in caplog.records if r.name == "dictembed.encoder"]
    assert messages == [TRUNCATED.format(too_long, len(MANY))]  # the same words


@pytest.mark.parametrize("mode", ["cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"])
@pytest.mark.parametrize("prompt_length", [0, 2])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pooling_is_sentence_transformers_pooling(mode: str, prompt_length: int, side: str) -> None:
    from sentence_transformers.sentence_transformer import modules as st

    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(4, 7, 5)).astype(np.float32)
    lengths = [7, 5, 3, 4]
    mask = np.zeros((4, 7), np.int64)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        if side == "left":
            mask[row] = mask[row, ::-1]
    features = {"token_embeddings": torch.from_numpy(hidden), "attention_mask": torch.from_numpy(mask)}
    if prompt_length:
        features["prompt_length"] = torch.tensor([prompt_length])
    expected = st.Pooling(5, mode, include_prompt=not prompt_length)(features)["sentence_embedding"].numpy()
    np.testing.assert_allclose(pool(hidden, mask, [mode], prompt_length), expected, atol=1e-6)


# ------------------------------------------------------------------------------------------------- refusals
def _one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def _damaged(folders: dict[str, Path], tmp_path: Path, name: str = "int8-light") -> Path:
    return Path(shutil.copytree(folders[name], tmp_path / name))


def test_a_folder_that_is_no_export(folders: dict[str, Path]) -> None:
    reason = OnnxQueryEncoder.unsupported(folders["plain"])
    assert reason is not None and "holds no ONNX export" in reason and str(folders["plain"]) in reason
    with pytest.raises(ModelLoadError) as caught:
        OnnxQueryEncoder.open(folders["plain"])
    assert _one_line(caught) == reason
    assert OnnxQueryEncoder.unsupported(folders["int8-light"]) is None


def test_a_module_after_the_pooling_is_refused_and_keeps_the_weights(
    folders: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _damaged(folders, tmp_path, "int8")
    modules = json.loads((folder / "modules.json").read_text())
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.base.modules.dense.Dense"}
    (folder / "modules.json").write_text(json.dumps([*modules, dense]))
    reason = OnnxQueryEncoder.unsupported(folder)
    assert reason is not None and "3_Dense" in reason and "Dense" in reason and "Encoder.load" in reason
    with pytest.raises(ModelLoadError) as caught:
        OnnxQueryEncoder.open(folder)
    assert "3_Dense" in _one_line(caught)
    with caplog.at_level(logging.WARNING):
        drop_weights(folder)  # what export does: a folder only Encoder.load runs keeps its weights
    assert (folder / WEIGHTS_FILE).is_file() and "3_Dense" in caplog.text


@pytest.mark.parametrize("pooling", ["prompt", "first_last_avg"])
def test_dictembeds_own_poolings_are_refused(folders: dict[str, Path], tmp_path: Path, pooling: str) -> None:
    folder = _damaged(folders, tmp_path)
    record = json.loads((folder / "dictembed.json").read_text())
    record["encoder"]["pooling"] = pooling
    (folder / "dictembed.json").write_text(json.dumps(record))
    with pytest.raises(ModelLoadError) as caught:
        OnnxQueryEncoder.open(folder)
    assert f"{pooling} pooling" in _one_line(caught) and str(folder) in str(caught.value)


def test_the_records_pooling_wins_as_in_encoder_load(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = _damaged(folders, tmp_path, "int8")
    record = json.loads((folder / "dictembed.json").read_text())
    record["encoder"]["pooling"] = "max"
    (folder / "dictembed.json").write_text(json.dumps(record))
    encoder = OnnxQueryEncoder.open(folder)
    assert encoder.pooling == "max"
    np.testing.assert_allclose(encoder.encode(SENTENCES), Encoder.load(folder).encode(SENTENCES), atol=1e-5)


@pytest.mark.parametrize(
    "file,text,expected",
    [
        ("tokenizer.json", "{not json", "tokenizer.json is corrupt"),
        ("onnx/export.json", "{not json", "export.json is corrupt"),
        ("modules.json", "[{}]", "corrupt module list"),
        ("1_Pooling/config.json", "[1]", "config.json is corrupt"),
        (f"onnx/{INT8_FILE}", "garbage", "was written with (replaced or damaged since)"),
    ],
)
def test_a_corrupt_file_is_a_one_line_error(
    folders: dict[str, Path], tmp_path: Path, file: str, text: str, expected: str
) -> None:
    folder = _damaged(folders, tmp_path)
    (folder / file).write_text(text)
    with pytest.raises(ModelLoadError) as caught:
        OnnxQueryEncoder.open(folder)
    assert expected in _one_line(caught) and str(folder) in str(caught.value)


def test_a_missing_graph_is_named_missing(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = _damaged(folders, tmp_path)
    (folder / "onnx" / INT8_FILE).unlink()  # as a Hub snapshot without its graph has it: not "replaced"
    with pytest.raises(ModelLoadError) as caught:
        OnnxQueryEncoder.open(folder)
    assert f"{INT8_FILE}: missing, though " in _one_line(caught) and "export.json names it" in str(caught.value)


def test_no_torch_is_imported(folders: dict[str, Path]) -> None:
    script = f"""
        import sys
        from dictembed.backends.onnx.query import OnnxQueryEncoder
        encoder = OnnxQueryEncoder.open({str(folders["int8-light"])!r})
        vectors = encoder.encode(["a domesticated animal that barks"] * 40, batch_size=4)
        assert vectors.shape == (40, 32), vectors.shape
        print([m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules])
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------------- the server
def test_the_servers_token_counter_and_encode_step(folders: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    from dictembed.serve_scheduling import TokenCounter, encode_step

    query = OnnxQueryEncoder.open(folders["prompted-fp32"])
    torch_encoder = Encoder.load(folders["prompted"], device="cpu", backend="torch")
    counter = TokenCounter(query)
    counts = counter.count(MANY)
    assert counter.window == 64 and counts == TokenCounter(torch_encoder).count(MANY)
    assert counts[0] == len(torch_encoder.tokenizer("query: " + MANY[0])["input_ids"])  # after the default prompt
    with caplog.at_level(logging.WARNING):
        vectors = encode_step(query, MANY, normalize=True)
    assert not [r for r in caplog.records if r.name == QUERY_LOG]  # held back: the request counts the cut ones
    np.testing.assert_allclose(vectors, torch_encoder.encode(MANY, normalize_embeddings=True), atol=1e-4, rtol=0)


# ------------------------------------------------------------------------------------------------- the export folder
@pytest.fixture(scope="module")
def served_export(served_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The served reverse dictionary with a search index planted in a copy, and its int8 export (no weights)."""
    source = Path(shutil.copytree(served_model, tmp_path_factory.mktemp("served-source") / "model"))
    (source / SEARCH_DIR).mkdir(exist_ok=True)
    (source / SEARCH_DIR / "planted.json").write_text('{"planted": true}\n')
    return source, export(source, tmp_path_factory.mktemp("served-export") / "int8", quantize="int8")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_an_int8_export_is_a_complete_model_folder(served_export: tuple[Path, Path]) -> None:
    from dictembed.saved_entry_space import load_entry_space

    source, exported = served_export
    assert not (exported / WEIGHTS_FILE).exists() and not list(exported.glob("*.safetensors"))
    assert (exported / "onnx" / INT8_FILE).is_file()
    assert (exported / DEFINITIONS_FILE).read_bytes() == (source / DEFINITIONS_FILE).read_bytes()
    for name in (SPACE_DIR, SEARCH_DIR):
        assert _files(exported / name) == _files(source / name) != {}, name
    assert not [p for p in exported.rglob("*") if p.is_symlink()]  # copies, never links
    assert read_record(exported).entry_space == read_record(source).entry_space is not None
    encoder = OnnxQueryEncoder.open(exported)
    assert load_entry_space(exported).words == load_entry_space(source).words
    space = load_entry_space(exported)
    assert encoder.dim == space.vectors().shape[1]
    assert encoder.name == "int8" and encoder.path == exported


def test_a_graph_replaced_since_its_manifest_is_never_run(
    served_export: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each manifest records its graph's size and sampled blocks: an export whose graph was swapped (here for the
    fp32 query graph of its source) is a one-line error naming the file; a trained folder whose query graph was
    swapped (for the int8 graph) is answered by its weights, with one warning, and `write_query_graph` writes
    its graph again."""
    from dictembed.backends.onnx.export import write_query_graph
    from dictembed.reverse_dictionary import ReverseDictionary

    source, exported = served_export
    swapped_export = Path(shutil.copytree(exported, tmp_path / "export"))
    shutil.copyfile(source / "onnx" / "query.onnx", swapped_export / "onnx" / INT8_FILE)
    for opening in (lambda: OnnxQueryEncoder.open(swapped_export), lambda: ReverseDictionary.load(swapped_export)):
        with pytest.raises(ModelLoadError) as caught:
            opening()
        assert _one_line(caught) == (
            f"{swapped_export / 'onnx' / INT8_FILE} is not the graph {swapped_export / 'onnx' / 'export.json'} was "
            "written with (replaced or damaged since); export the model again"
        )
    trained = Path(shutil.copytree(source, tmp_path / "trained"))
    expected = [[r.words for r in ReverseDictionary.load(trained).search(q, 5)] for q in ("a pet", "rain")]
    shutil.copyfile(exported / "onnx" / INT8_FILE, trained / "onnx" / "query.onnx")
    with caplog.at_level(logging.WARNING):
        rd = ReverseDictionary.load(trained)
    assert not isinstance(rd.encoder, OnnxQueryEncoder)
    assert [r.getMessage() for r in caplog.records if "query graph" in r.getMessage()] == [
        f"model folder {trained}: its query graph (onnx/query.onnx) is not the file its manifest was written with; "
        "the weights answer instead"
    ]
    assert [[r.words for r in rd.search(q, 5)] for q in ("a pet", "rain")] == expected
    assert write_query_graph(trained) is not None
    assert isinstance(ReverseDictionary.load(trained).encoder, OnnxQueryEncoder)


def test_an_int8_export_searches_each_query_as_alone_in_any_batch(served_export: tuple[Path, Path]) -> None:
    """An int8 graph's vectors depend on their batch (dynamic quantisation scales by the batch's range, padding
    included), so `search_many` encodes one query a batch there: every query gets exactly what `search` gives it
    alone; the source's fp32 graph is batch-invariant and keeps its batches."""
    from dictembed.reverse_dictionary import ReverseDictionary

    source, exported = served_export
    queries = ["a pet", "a small domesticated animal that purrs and catches mice in the house at night", "rain"]
    int8 = OnnxQueryEncoder.open(exported)
    assert not int8.batch_invariant and OnnxQueryEncoder.open(source).batch_invariant
    batched, alone = int8.encode(queries), np.stack([int8.encode(q) for q in queries])
    assert not np.array_equal(batched, alone)  # what the search must not depend on
    rd = ReverseDictionary.load(exported)
    for query, rows in zip(queries, rd.search_many(queries, k=5), strict=True):
        alone = rd.search(query, 5)
        assert [r.words for r in rows] == [r.words for r in alone] and [r.definitions for r in rows] == [
            r.definitions for r in alone
        ]
        # the same vectors; a product over several rows may round its last bit apart from one over a single row
        np.testing.assert_allclose([r.score for r in rows], [r.score for r in alone], rtol=0, atol=1e-6)


def test_encoder_load_of_a_weightless_export_is_a_one_line_error(served_export: tuple[Path, Path]) -> None:
    """Never a torch backbone without its weights: `Encoder.load` refuses the folder, on either backend."""
    _, exported = served_export
    for backend in (None, "torch", "onnx"):
        with pytest.raises(ModelLoadError) as caught:
            Encoder.load(exported, backend=backend)
        message = _one_line(caught)
        assert str(exported) in message and "OnnxQueryEncoder" in message and "--keep-weights" in message


def test_the_graph_encoders_refuse_what_encoder_encode_refuses(served_export: tuple[Path, Path]) -> None:
    """A string would normalise; an unknown quantisation would fail inside sentence-transformers."""
    from dictembed.backends.onnx.export_encoder import ExportEncoder
    from dictembed.model_folder import ModelFolder

    _, exported = served_export
    query, export = OnnxQueryEncoder.open(exported), ExportEncoder.open(ModelFolder.open(exported))
    raw = query.encode(["a dog barks"])
    assert abs(float(np.linalg.norm(raw)) - 1) > 1e-3  # the tiny model keeps no Normalize module
    for encoder in (query, export):
        for value in ("no", None):
            with pytest.raises(DictEmbedError, match="^normalize_embeddings must be True or False"):
                encoder.encode(["a dog barks"], normalize_embeddings=value)
        with pytest.raises(DictEmbedError, match="^show_progress_bar must be True or False or None"):
            encoder.encode(["a dog barks"], show_progress_bar="x")
    for value in ("fp16", None):
        with pytest.raises(DictEmbedError, match="^unknown quantize"):
            export.encode(["a dog", "a cat"], quantize=value)
    np.testing.assert_array_equal(export.encode(["a dog barks"]), raw)


def test_an_export_or_index_into_its_own_model_folder_is_refused(served_model: Path, capsys) -> None:
    """`export --output MODEL --overwrite` replaced the model's folder with a weightless export of itself."""
    from conftest import cli_refuses

    before = (served_model / WEIGHTS_FILE).read_bytes()
    for argv in (
        ["export", "--model", str(served_model), "--output", str(served_model), "--overwrite"],
        ["export", "--model", str(served_model), "--output", str(served_model / "int8"), "--quantize", "int8"],
        ["index", "--model", str(served_model), "--dictionary", "wordnet", "--output", str(served_model / "sub")],
    ):
        cli_refuses(capsys, argv, "is inside the model folder")
    assert (served_model / WEIGHTS_FILE).read_bytes() == before and not (served_model / "sub").exists()


def test_commands_that_need_the_weights_refuse_a_weightless_export_in_one_line(
    served_export: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The export as a teacher, a student or a head's backbone: named, with the commands that do run it, and no
    empty `OUTPUT-runs` folder left behind."""
    from conftest import cli_refuses

    source, exported = served_export
    out = tmp_path / "out"
    distil = ["--output", str(out), "--descriptions", "none", "--device", "cpu"]
    for argv in (
        ["distil", str(exported), "--model", str(source), *distil],  # the export as the teacher
        ["distil", str(source), "--model", str(exported), *distil],  # as the student
        ["head", "learn", "--model", str(exported), "--output", str(out), "--limit", "10"],
    ):
        line = cli_refuses(capsys, argv, str(exported), "--keep-weights", "predict")
        assert "OnnxQueryEncoder" in line and list(tmp_path.iterdir()) == [], (argv, list(tmp_path.iterdir()))


def test_export_never_removes_a_users_folder_at_its_staging_name(folders: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "ex"
    for name in ("ex.export", "ex.old"):
        mine = tmp_path / name
        mine.mkdir()
        (mine / "precious.txt").write_text("mine")
        with pytest.raises(DictEmbedError, match=f"^{mine} is in the way"):
            export(folders["plain"], out, quantize="int8")
        assert (mine / "precious.txt").read_text() == "mine" and not out.exists()
        shutil.rmtree(mine)
    assert export(folders["plain"], out, quantize="int8") == out and sorted(p.name for p in tmp_path.iterdir()) == [
        "ex"
    ]


def test_cli_export_leaves_the_weights_out_unless_kept(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_log_level: None
) -> None:
    for kept in (False, True):
        out = tmp_path / f"kept-{kept}"
        argv = ["export", "--model", str(folders["plain"]), "--output", str(out), "--quantize", "int8", "--json"]
        assert main(argv + (["--keep-weights"] if kept else [])) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["weights"] is kept and (out / WEIGHTS_FILE).is_file() is kept
        assert report["file"] == f"onnx/{INT8_FILE}"
    np.testing.assert_allclose(
        OnnxQueryEncoder.open(tmp_path / "kept-False").encode(SENTENCES),
        Encoder.load(tmp_path / "kept-True").encode(SENTENCES),
        atol=1e-5,
        rtol=0,
    )


def test_encode_runs_a_weightless_export_and_refuses_what_it_cannot_honour(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_log_level: None
) -> None:
    """`dictembed encode` on an export without torch weights: its graph's vectors, streamed to .npy (resumable: the
    identity it records names the export) or held for a .npz, normalised or quantised as asked; what only the torch
    network can do is one line naming the option, and `evaluate mteb` refuses it as `Encoder.load` does."""
    from conftest import error_lines

    light = folders["int8-light"]
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(MANY) + "\n")
    query = OnnxQueryEncoder.open(light)
    expected = np.concatenate([query.encode(MANY[:50]), query.encode(MANY[50:])])  # int8: batch by batch as encoded
    base = ["encode", "--model", str(light), "--input", str(lines), "--json"]
    assert main([*base, "--output", str(tmp_path / "a.npy"), "--chunk-size", "50"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [report[k] for k in ("precision", "backend", "device", "rows")] == ["int8", "onnx", "cpu", len(MANY)]
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), expected)  # the same graph, the same batches
    assert main([*base, "--output", str(tmp_path / "b.npz"), "--normalize", "--quantize", "binary"]) == 0
    capsys.readouterr()
    from sentence_transformers import quantize_embeddings

    whole = query.encode(MANY)
    unit = whole / np.linalg.norm(whole, axis=1, keepdims=True)
    np.testing.assert_array_equal(np.load(tmp_path / "b.npz")["embeddings"], quantize_embeddings(unit, "binary"))
    assert main([*base, "--output", str(tmp_path / "d.npy"), "--device", "cpu:0"]) == 0
    capsys.readouterr()
    assert (
        main([*base, "--output", str(tmp_path / "c.npy"), "--device", "cuda"]) != 0
    )  # no GPU here, or not its graph's
    (line,) = error_lines(capsys.readouterr().err)
    assert "cuda" in line.lower() and not (tmp_path / "c.npy").exists()
    for option, value in (("--pooling", "cls"), ("--backend", "torch"), ("--precision", "fp32")):
        assert main([*base, "--output", str(tmp_path / "c.npy"), option, value]) == 2
        (line,) = error_lines(capsys.readouterr().err)
        assert f"{option} {value}" in line and str(light) in line and not (tmp_path / "c.npy").exists()
    assert main(["evaluate", "mteb", "--model", str(light), "--tasks", "STSBenchmark"]) == 1
    (line,) = error_lines(capsys.readouterr().err)
    assert "without its fp32 weights" in line and "--keep-weights" in line


def test_an_int8_exports_encode_resumes_only_as_it_was_batched(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An int8 graph's vectors depend on their batch: an interrupted encode resumes with the batch and chunk sizes
    it ran with (its rows then those of a run never interrupted) and starts over with others."""
    from dictembed.backends.onnx.export_encoder import ExportEncoder
    from dictembed.model_folder import ModelFolder
    from dictembed.streaming import PROBES, encode_to_npy

    encoder = ExportEncoder.open(ModelFolder.open(folders["int8-light"]))
    assert not encoder.batch_invariant
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(MANY) + "\n")
    whole = encode_to_npy(encoder, lines, tmp_path / "whole.npy", batch_size=4, chunk_size=20, show_progress=False)
    assert whole["resumed_from"] == 0
    encode = ExportEncoder.encode

    def interrupted(self: ExportEncoder, sentences: list[str], *args: Any, **kwargs: Any) -> np.ndarray:
        if list(sentences) != PROBES and len(chunks) == 1:
            raise KeyboardInterrupt
        chunks.append(len(sentences)) if list(sentences) != PROBES else None
        return encode(self, sentences, *args, **kwargs)

    for batch_size, resumed in ((4, 20), (16, 0)):
        out, chunks = tmp_path / f"b{batch_size}.npy", []
        monkeypatch.setattr(ExportEncoder, "encode", interrupted)
        with pytest.raises(KeyboardInterrupt):
            encode_to_npy(encoder, lines, out, batch_size=4, chunk_size=20, show_progress=False)
        monkeypatch.undo()
        done = encode_to_npy(encoder, lines, out, batch_size=batch_size, chunk_size=20, show_progress=False)
        assert done["resumed_from"] == resumed
        if resumed:
            np.testing.assert_array_equal(np.load(out), np.load(tmp_path / "whole.npy"))


# ---------------------------------------------------------------------------------------------- sentence-transformers
class OrtStandIn:
    """What sentence-transformers' ONNX backend loads (optimum's ORTModelForFeatureExtraction), reduced to a plain
    onnxruntime session: the file is found by sentence-transformers' own rules (`backend_should_export`)."""

    def __init__(self, folder: str, config: Any, **kwargs: Any) -> None:
        import onnxruntime as ort
        from sentence_transformers.backend.utils import backend_should_export

        export_needed, kwargs = backend_should_export(Path(folder), True, kwargs, "model.onnx", "*.onnx", "ONNX")
        assert not export_needed, kwargs
        self.file = Path(folder, kwargs.get("subfolder", ""), kwargs["file_name"])
        self.session = ort.InferenceSession(str(self.file), providers=["CPUExecutionProvider"])
        self.config, self.names = config, [i.name for i in self.session.get_inputs()]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs: Any) -> SimpleNamespace:
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        feeds["token_type_ids"] = kwargs.get("token_type_ids", torch.zeros_like(input_ids))
        (hidden,) = self.session.run(["last_hidden_state"], {n: feeds[n].numpy() for n in self.names})
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden))

    __call__ = forward


def test_sentence_transformers_onnx_backend_reads_the_export(
    folders: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sentence-transformers finds the int8 graph of a weightless export by its file name, without exporting, and
    its tokenizer, default prompt, Pooling and Normalize over that graph give the query encoder's vectors (optimum,
    which its ONNX backend needs, has no release for transformers 5: a stand-in runs the graph)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import transformer

    folder = Path(shutil.copytree(folders["int8-light"], tmp_path / "m"))
    prompts = {"prompts": {"query": "query: "}, "default_prompt_name": "query"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(prompts))

    def stand_in(model_name_or_path: str, config: Any, task_name: str, **kwargs: Any) -> OrtStandIn:
        assert task_name == "feature-extraction"
        return OrtStandIn(model_name_or_path, config, **kwargs)

    monkeypatch.setattr(transformer, "load_onnx_model", stand_in)
    model = SentenceTransformer(str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": INT8_FILE})
    np.testing.assert_allclose(
        model.encode(SENTENCES), OnnxQueryEncoder.open(folder).encode(SENTENCES), atol=1e-4, rtol=0
    )
    with pytest.raises(OSError, match="no file named model.safetensors"):  # the torch backend: no random weights
        SentenceTransformer(str(folder), device="cpu")


def test_sentence_transformers_onnx_backend_with_optimum(folders: dict[str, Path]) -> None:
    """The same through optimum itself, where it is installed."""
    pytest.importorskip("optimum.onnxruntime")
    from sentence_transformers import SentenceTransformer

    folder = folders["int8-light"]
    model = SentenceTransformer(str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": INT8_FILE})
    np.testing.assert_allclose(
        model.encode(SENTENCES), OnnxQueryEncoder.open(folder).encode(SENTENCES), atol=1e-4, rtol=0
    )


def test_predict_on_the_int8_export_answers_without_torch(served_export: tuple[Path, Path]) -> None:
    """`ReverseDictionary.load` of an export queries through `OnnxQueryEncoder`; `predict` never imports torch."""
    from dictembed.reverse_dictionary import ReverseDictionary

    _, exported = served_export
    rd = ReverseDictionary.load(exported)
    assert isinstance(rd.encoder, OnnxQueryEncoder)
    expected = [r.words for r in rd.search("a pet that barks", k=3)]
    assert predict_in_a_process(exported, "a pet that barks") == (expected, [])


def test_serve_on_the_int8_export(served_export: tuple[Path, Path]) -> None:
    from fastapi.testclient import TestClient

    from dictembed.serve import create_app

    _, exported = served_export
    with TestClient(create_app(exported)) as client:
        found = client.get("/api/reverse", params={"q": "a pet that barks", "k": 3})
        assert found.status_code == 200 and found.json()["results"]
        encoded = client.post("/api/encode", json={"sentences": ["a dog barks", "rain"], "normalize": True})
        assert encoded.status_code == 200
        vectors = np.asarray(encoded.json()["embeddings"])
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        expected = OnnxQueryEncoder.open(exported).encode(["a dog barks", "rain"], normalize_embeddings=True)
        np.testing.assert_allclose(vectors, expected, atol=1e-6)


def test_the_fp32_export_ranks_as_its_folder(served_model: Path, tmp_path: Path) -> None:
    """The quality tier's serving path: an fp32 export answers with its folder's results and scores (the headword
    term included), through ONNX Runtime alone."""
    from dictembed.reverse_dictionary import ReverseDictionary

    exported = export(served_model, tmp_path / "fp32")
    folder, fast = torch_reverse_dictionary(served_model), ReverseDictionary.load(exported)
    assert isinstance(fast.encoder, OnnxQueryEncoder) and not isinstance(folder.encoder, OnnxQueryEncoder)
    assert "+headword" in folder.score_kind and fast.score_kind == folder.score_kind
    for query in ("a pet that barks", "water that falls from clouds", "something you sit on"):
        expected, found = folder.search(query, k=5), fast.search(query, k=5)
        assert [r.words for r in found] == [r.words for r in expected], query
        np.testing.assert_allclose([r.score for r in found], [r.score for r in expected], atol=1e-4)


def test_an_export_of_a_folder_with_an_older_index_writes_a_current_one(served_model: Path, tmp_path: Path) -> None:
    from dictembed.search_index import INDEX_FORMAT, INDEX_META, has_current_index

    source = Path(shutil.copytree(served_model, tmp_path / "old"))
    meta_path = source / SEARCH_DIR / INDEX_META
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps(meta | {"format": INDEX_FORMAT - 1}))  # as an older version saved it
    assert not has_current_index(source) and has_current_index(served_model)
    exported = export(source, tmp_path / "fp32")
    assert has_current_index(exported)
    assert json.loads((exported / SEARCH_DIR / INDEX_META).read_text())["format"] == INDEX_FORMAT
    assert json.loads(meta_path.read_text())["format"] == INDEX_FORMAT - 1  # the source is never written to


def test_predict_and_serve_refuse_what_a_weightless_export_cannot_run_before_it_opens(
    served_export: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`predict --precision bf16` on one said that predict runs its graph, and failed: the weights it needs are not
    there. Refused as encode refuses it; fp32 and auto run the graph."""
    from conftest import cli_refuses

    _, exported = served_export
    for command in (["predict", "a pet that barks"], ["serve", "--port", "0"]):
        for option, value in (("--precision", "bf16"), ("--device", "cuda")):
            line = cli_refuses(capsys, [*command, "--model", str(exported), option, value], f"{option} {value}", code=2)
            assert str(exported) in line and "leave the option out" in line
    for precision in ("fp32", "auto"):
        assert main(["predict", "a pet that barks", "--model", str(exported), "--precision", precision, "-q"]) == 0
    capsys.readouterr()
