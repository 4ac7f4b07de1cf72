"""Query distillation (`dictembed distil`): a small student encoder trained to encode as a teacher folder's query
encoder does, saved over the teacher's entry space projected onto the student's dimension."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SERVED_WORDS, cli_refuses, cli_succeeds, tiny_bert

from dictembed.entry_space import DefinitionSpace
from dictembed.model_folder import read_record
from dictembed.query_distillation import principal_projection, rotation_onto


def test_the_principal_projection_keeps_the_inner_products_of_a_space_of_lower_rank() -> None:
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(3, 8))
    definitions = rng.normal(size=(40, 3)) @ basis  # rank 3 in 8 dimensions
    space = DefinitionSpace([f"w{i}" for i in range(20)], definitions[::2], counts=np.full(20, 2))
    space.definitions = torch.from_numpy(definitions).half()
    projection = principal_projection(space, 3)
    assert projection.shape == (8, 3)
    np.testing.assert_allclose(projection.T @ projection, np.eye(3), atol=1e-5)
    rows = space.definitions.float().numpy()
    kept = rows @ projection
    np.testing.assert_allclose(kept @ kept.T, rows @ rows.T, rtol=1e-3, atol=1e-2)


def test_rotation_onto_recovers_a_rotation() -> None:
    rng = np.random.default_rng(1)
    turn, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    source = rng.normal(size=(50, 5))
    np.testing.assert_allclose(rotation_onto(source, source @ turn), turn, atol=1e-5)


def test_a_projected_entry_is_the_mean_of_its_projected_unit_definitions() -> None:
    rng = np.random.default_rng(2)
    definitions = rng.normal(size=(5, 6)).astype(np.float32)
    definitions /= np.linalg.norm(definitions, axis=1, keepdims=True)
    counts = np.array([2, 3])
    matrix = np.stack([definitions[:2].mean(0), definitions[2:].mean(0)])
    heads = rng.normal(size=(2, 6))
    space = DefinitionSpace(["a", "b"], matrix, "cosine", counts=counts, definitions=definitions, headwords=heads)
    projection = rng.normal(size=(6, 4)).astype(np.float32)
    projected = space.projected(projection)
    kept = space.definitions.float().numpy() @ projection  # the space keeps its definitions in float16
    kept /= np.linalg.norm(kept, axis=1, keepdims=True)
    expected = np.stack([kept[:2].mean(0), kept[2:].mean(0)])
    np.testing.assert_allclose(projected.matrix.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(projected.definitions.float().numpy(), kept, atol=2e-3)  # float16
    assert projected.headwords is not None and projected.headwords.shape == (2, 4)
    assert projected.words == ["a", "b"] and projected.counts.tolist() == [2, 3]
    with pytest.raises(Exception, match="does not fit 6-d"):
        space.projected(projection.T)


@pytest.fixture(scope="module")
def student_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny BERT of hidden size 16, half the served teacher's 32."""
    return tiny_bert(tmp_path_factory.mktemp("student"), head=False, dropout=0.0, hidden=16)


def student_cosine(student: str | Path, teacher: Path, projection: np.ndarray, texts: list[str]) -> float:
    from dictembed.encoder import Encoder

    own = Encoder.load(str(student), device="cpu").encode(texts, normalize_embeddings=True)
    wanted = Encoder.load(str(teacher), device="cpu").encode(texts) @ projection
    wanted /= np.linalg.norm(wanted, axis=1, keepdims=True)
    return float((own * wanted).sum(1).mean())


def test_distil_writes_a_student_that_encodes_closer_to_the_teacher(
    served_model, student_path, tmp_path, capsys
) -> None:
    from safetensors.numpy import load_file

    from dictembed.reverse_dictionary import ReverseDictionary

    out = tmp_path / "distilled"
    argv = ["distil", str(served_model), "--model", str(student_path), "--output", str(out)]
    argv += ["--descriptions", "none", "--definitions", "0", "--words", "0", "--epochs", "30", "--lr", "1e-3"]
    cli_succeeds(capsys, [*argv, "--batch-size", "4", "--device", "cpu", "--precision", "fp32"])
    projection = load_file(Path(f"{out}-runs") / "distil" / "projection.safetensors")["projection"]
    assert projection.shape == (32, 16)
    texts = [definition for _, definition, _ in SERVED_WORDS]
    before = student_cosine(student_path, served_model, projection, texts)
    after = student_cosine(out, served_model, projection, texts)
    assert 1 - after < (1 - before) / 2, (before, after)  # the cosine loss at least halved
    record = read_record(out, required=True)
    assert record.method == "query-distillation" and record.details["teacher"] == served_model.name
    assert record.details["projection"] == "32 -> 16" and record.entry_space == "definitions-amp"
    assert record.ranking == {}  # taught no descriptions: searched with the defaults
    assert f"A student of `{served_model.name}`" in (out / "README.md").read_text()
    rd = ReverseDictionary.load(out, device="cpu")
    assert rd.space.matrix.shape[1] == 16 and rd.space.headwords is not None
    results = rd.search("a domesticated animal that barks", k=3)
    assert len(results) == 3 and all(r.definitions for r in results)
    assert "dog" in [w for r in results for w in r.words]


def test_a_student_taught_descriptions_saves_the_described_headword_weight(
    served_model, student_path, tmp_path, capsys
) -> None:
    from dictembed.search_options import DESCRIBED_HEADWORD_WEIGHT

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("description\tword\n" + "".join(f"the {w} you know\t{w}\n" for w, _, _ in SERVED_WORDS))
    out = tmp_path / "distilled"
    argv = ["distil", str(served_model), "--model", str(student_path), "--output", str(out), "--epochs", "1"]
    cli_succeeds(capsys, [*argv, "--descriptions", str(corpus), "--device", "cpu", "--precision", "fp32"])
    assert read_record(out, required=True).ranking == {"headword_weight": DESCRIBED_HEADWORD_WEIGHT}


def test_a_teacher_without_an_entry_space_is_a_one_line_error(saved_bert, student_path, tmp_path, capsys) -> None:
    argv = ["distil", str(saved_bert), "--model", str(student_path), "--output", str(tmp_path / "out")]
    cli_refuses(capsys, [*argv, "--descriptions", "none", "--device", "cpu"], str(saved_bert))


def test_a_missing_teacher_is_refused_before_anything_loads(tmp_path, capsys) -> None:
    cli_refuses(capsys, ["distil", str(tmp_path / "nothing"), "--output", str(tmp_path / "o")], "nothing")
    assert not (tmp_path / "o").exists() and not (tmp_path / "o-runs").exists()


def test_the_student_never_goes_over_its_teacher(served_model, tmp_path, capsys) -> None:
    argv = ["distil", str(served_model), "--output", str(served_model), "--overwrite"]
    cli_refuses(capsys, argv, "--output", "the teacher's folder", code=2)
    assert (served_model / "dictembed.json").is_file()


class FixedVectors(torch.nn.Module):
    """An encoder stand-in whose vectors are given (the inputs are ignored)."""

    def __init__(self, vectors: torch.Tensor) -> None:
        super().__init__()
        self.vectors = torch.nn.Parameter(vectors)

    def forward(self, inputs: dict) -> torch.Tensor:
        return self.vectors


def test_the_distillation_loss_matches_a_hand_computed_value() -> None:
    from dictembed.objectives.query_distillation import QueryDistillation

    student = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    teacher = torch.tensor([[0.0, 1.0], [0.6, 0.8]])
    entries = torch.tensor([[1.0, 0.0], [0.0, 2.0]])  # unit rows once normalised
    objective = QueryDistillation(FixedVectors(student), teacher, entries, ranking_weight=0.5, temperature=0.5)
    out = objective(({}, torch.tensor([0, 1])))

    def log_softmax(row: np.ndarray) -> np.ndarray:
        return row - np.log(np.exp(row).sum())

    unit_entries = np.array([[1.0, 0.0], [0.0, 1.0]])
    kl = 0.0
    for s, t in zip(student.numpy(), teacher.numpy(), strict=True):
        p, q = log_softmax(unit_entries @ s / 0.5), log_softmax(unit_entries @ t / 0.5)
        kl += float((np.exp(q) * (q - p)).sum())
    cosine_loss = ((1 - 0.0) + (1 - 1.0)) / 2
    assert out["ranking"].item() == pytest.approx(kl / 2, rel=1e-5)
    assert out["loss"].item() == pytest.approx(cosine_loss + 0.5 * kl / 2, rel=1e-5)
    out["loss"].backward()
    assert objective.encoder.vectors.grad[1].abs().max() < 1e-6  # the second already agrees with its teacher
    assert objective.encoder.vectors.grad[0].abs().max() > 0.1


def test_without_entries_the_loss_is_the_cosine_loss_alone() -> None:
    from dictembed.objectives.query_distillation import QueryDistillation

    student = torch.tensor([[3.0, 4.0]])
    objective = QueryDistillation(FixedVectors(student), torch.tensor([[1.0, 0.0]]), None, ranking_weight=1.0)
    out = objective(({}, torch.tensor([0])))
    assert out["loss"].item() == pytest.approx(1 - 0.6) and "ranking" not in out


def test_a_second_run_reuses_the_teachers_vectors_and_gives_the_same_weights(
    served_model, student_path, tmp_path, capsys
) -> None:
    from safetensors.numpy import load_file

    out = tmp_path / "again"
    argv = ["distil", str(served_model), "--model", str(student_path), "--output", str(out), "--descriptions", "none"]
    argv += ["--epochs", "3", "--batch-size", "4", "--device", "cpu", "--precision", "fp32"]
    cli_succeeds(capsys, argv)
    kept = list((Path(f"{out}-runs") / "distil").glob("teacher-*.safetensors"))
    assert len(kept) == 1 and not list(kept[0].parent.glob("*.parts"))
    first, when = load_file(out / "model.safetensors"), kept[0].stat().st_mtime_ns
    cli_succeeds(capsys, [*argv, "--overwrite", "--resume"])
    assert kept[0].stat().st_mtime_ns == when  # not encoded again
    second = load_file(out / "model.safetensors")
    assert first.keys() == second.keys() and all(np.array_equal(first[k], second[k]) for k in first)


def test_a_distil_that_fails_while_saving_resumes_at_its_end(
    served_model, student_path, tmp_path, capsys, monkeypatch
) -> None:
    """The last step's checkpoint outlives a failed save: `--resume` trains nothing and writes the weights an
    uninterrupted run writes; the checkpoint goes once the student is saved."""
    from safetensors.numpy import load_file

    import dictembed.recipes.run as run_module
    from dictembed.training import Trainer

    argv = ["distil", str(served_model), "--model", str(student_path), "--descriptions", "none"]
    argv += ["--epochs", "3", "--batch-size", "4", "--device", "cpu", "--precision", "fp32"]
    cli_succeeds(capsys, [*argv, "--output", str(tmp_path / "straight")])
    saving = run_module.save_model_folder

    def fail_once(*args, **kwargs):
        monkeypatch.setattr(run_module, "save_model_folder", saving)
        raise OSError("No space left on device")

    monkeypatch.setattr(run_module, "save_model_folder", fail_once)
    out = tmp_path / "late"
    checkpoint = Path(f"{out}-runs") / "distil" / "checkpoint"
    cli_refuses(capsys, [*argv, "--output", str(out)], "No space left")
    assert checkpoint.is_dir() and not out.exists()
    steps: list[int] = []
    monkeypatch.setattr(Trainer, "save_checkpoint", lambda self: steps.append(self.progress.step))
    stdout, _ = cli_succeeds(capsys, [*argv, "--output", str(out), "--resume"])
    assert steps == [] and not checkpoint.exists() and f"wrote {out}" in stdout
    ours, theirs = load_file(out / "model.safetensors"), load_file(tmp_path / "straight" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(np.array_equal(ours[k], theirs[k]) for k in ours)


def test_the_teachers_vectors_on_its_graph_are_its_weights_vectors_and_int8_ones_are_kept_apart(
    served_model, tmp_path, monkeypatch, caplog
) -> None:
    """On the CPU in fp32 the teacher encodes as a build does: its weights' graph on ONNX Runtime, whose vectors
    are torch's to float rounding; vectors asked in int8 are kept under another name."""
    import logging

    from dictembed.device_choices import BUILD_BACKEND_VARIABLE
    from dictembed.model_folder import ModelFolder
    from dictembed.query_distillation import teacher_targets

    folder, texts = ModelFolder.open(served_model), [d for _, d, _ in SERVED_WORDS] * 3
    monkeypatch.setenv(BUILD_BACKEND_VARIABLE, "torch")
    on_torch = teacher_targets(folder, "cpu", "fp32", "k", texts, tmp_path / "torch")
    monkeypatch.setenv(BUILD_BACKEND_VARIABLE, "onnx")
    with caplog.at_level(logging.INFO, logger="dictembed"):
        on_graph = teacher_targets(folder, "cpu", "fp32", "k", texts, tmp_path / "graph")
    assert "encoding on ONNX Runtime" in caplog.text
    np.testing.assert_allclose(on_graph, on_torch, atol=1e-5)
    assert np.allclose(np.linalg.norm(on_graph, axis=1), 1, atol=1e-5)
    monkeypatch.setenv(BUILD_BACKEND_VARIABLE, "int8")
    teacher_targets(folder, "cpu", "fp32", "k", texts, tmp_path / "graph")
    names = {p.name for p in (tmp_path / "graph").glob("teacher-*.safetensors")} - {"teacher-k.safetensors"}
    assert len(names) == 1 and next(iter(names)).startswith("teacher-k-int8-")
