"""A distilled reverse-dictionary tier: a small student encoder (by default the embedded all-MiniLM-L6-v2) trained to
encode a query as a stronger teacher folder's query encoder does (`objectives.query_distillation`), saved over the
teacher's entry space projected onto the student's dimension. It searches the teacher's entries at the student's
cost.

The projection is the teacher space's leading directions (`principal_projection`: the eigenvectors of X^T X over
its definition and headword vectors, which keep their inner products best), turned by the rotation that best fits
the student's own vectors of the training texts (`rotation_onto`, orthogonal Procrustes), so that training starts
near where the student already is. The training texts are the teacher dictionary's definitions, its headwords and
the everyday descriptions (`distillation_texts`); the teacher's vectors of them are encoded once and kept in the
run folder (an interrupted run resumes them and its training)."""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save

from dictembed.backends.onnx.runtime import int8_build_key
from dictembed.backends.onnx.session import weights_sha256
from dictembed.description_corpus import Description
from dictembed.device_choices import build_choice
from dictembed.devices import loader_device
from dictembed.dictionary.core import Dictionary
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.entry_vectors import builder, encode_in_parts
from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write
from dictembed.model_folder import SPACE_DIR, ModelFolder
from dictembed.objectives.entry_prediction import token_lengths
from dictembed.objectives.query_distillation import QueryDistillation, distillation_collate
from dictembed.record import RunRecord
from dictembed.saved_entry_space import load_entry_space
from dictembed.search_options import saved_ranking
from dictembed.search_space import l2_normalize, open_second
from dictembed.second_dictionary import SecondDefinitions
from dictembed.training import Trainer, TrainSettings

log = logging.getLogger(__name__)
METHOD = "query-distillation"
PROBE = 4096  # texts whose student and teacher vectors fix the rotation


@dataclass
class DistillationSettings:
    """What the student learns from: how many definitions and headwords (0: all), the weight of the ranking term
    (`QueryDistillation`), and the optimisation."""

    definitions: int = 60_000
    words: int = 40_000
    ranking_weight: float = 1.0
    lr: float = 1e-4
    batch_size: int = 64
    epochs: int = 2
    warmup_ratio: float = 0.05
    weight_decay: float = 0.01
    seed: int = 0

    def train_settings(self) -> TrainSettings:
        return TrainSettings(
            lr=self.lr,
            batch_size=self.batch_size,
            epochs=self.epochs,
            warmup_ratio=self.warmup_ratio,
            weight_decay=self.weight_decay,
            seed=self.seed,
            group_by_length=True,
        )


def teacher_space(folder: ModelFolder) -> DefinitionSpace:
    """The teacher's saved definition space, or a one-line error naming the folder when it has none to project."""
    space = load_entry_space(folder.path)
    if not isinstance(space, DefinitionSpace) or space.definitions is None or space.is_ica:
        raise DictEmbedError(
            f"model folder {folder}: a teacher needs a DefSent+ entry space saved with its definitions' vectors "
            "(train it with `dictembed train`, or write one with `dictembed index`)"
        )
    return space


def principal_projection(space: DefinitionSpace, dim: int) -> np.ndarray:
    """The `dim` leading eigenvectors (columns, by falling eigenvalue) of X^T X over the space's definition and
    headword vectors: the `dim`-d projection that best keeps their inner products (uncentred PCA)."""
    width = space.matrix.shape[1]
    if not 0 < dim <= width:
        raise DictEmbedError(f"a student of dimension {dim} cannot hold a {width}-d teacher space")
    gram = np.zeros((width, width), dtype=np.float64)
    parts = [space.definitions, space.headwords]
    for part in (p for p in parts if p is not None):
        for start in range(0, len(part), 65_536):
            rows = part[start : start + 65_536].float().numpy()
            gram += rows.T @ rows
    values, vectors = np.linalg.eigh(gram)
    kept = float(values[::-1][:dim].sum() / values.sum())
    log.info("the %d leading directions keep %.1f %% of the teacher space's energy", dim, 100 * kept)
    return np.ascontiguousarray(vectors[:, ::-1][:, :dim], dtype=np.float32)


def rotation_onto(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The orthogonal matrix R minimising ||source R - target|| (orthogonal Procrustes, through one SVD)."""
    u, _, vt = np.linalg.svd(source.T.astype(np.float64) @ target.astype(np.float64))
    return (u @ vt).astype(np.float32)


def distillation_texts(
    dictionary: Dictionary,
    words: list[str],
    descriptions: list[Description],
    settings: DistillationSettings,
) -> tuple[list[str], dict[str, int]]:
    """The training texts: every description, a seeded sample of `settings.definitions` distinct definitions and
    of `settings.words` headwords (0: all of them), and how many of each."""
    rng = random.Random(settings.seed)
    definitions = sorted({definition for _, definition in dictionary.pairs()})

    def sample(items: list[str], count: int) -> list[str]:
        return items if not count or count >= len(items) else rng.sample(items, count)

    chosen_definitions = sample(definitions, settings.definitions)
    chosen_words = sample(sorted(set(words)), settings.words)
    texts = [d.text for d in descriptions] + chosen_definitions + chosen_words
    counts = {"descriptions": len(descriptions), "definitions": len(chosen_definitions), "words": len(chosen_words)}
    return texts, counts


TEACHER_BATCH = 64  # texts a batch of the teacher's vectors on torch (a build on the graph takes its own)


def texts_fingerprint(texts: list[str]) -> str:
    return hashlib.sha1("\n".join(texts).encode()).hexdigest()[:16]


def teacher_targets(
    folder: ModelFolder, device: str, precision: str, key: str, texts: list[str], run_dir: Path
) -> np.ndarray:
    """The unit vectors of `texts` by the teacher `folder`'s encoder, encoded once (in parts, resumable) and kept
    in `run_dir` under `key` (the teacher's and the texts' fingerprints); the teacher is loaded only to encode.
    They are encoded as a build is (`entry_vectors.builder`): on the CPU in fp32, its weights' graph on ONNX
    Runtime gives the weights' vectors faster; a build asked in int8 (`$DICTEMBED_BUILD_BACKEND=int8`) is kept
    apart."""
    if build_choice() == "int8":
        key = f"{key}-{int8_build_key()}"
    kept = run_dir / f"teacher-{key}.safetensors"
    if kept.is_file():
        return load_file(kept)["vectors"]
    teacher = Encoder.load(folder, device=loader_device(device)).set_precision(precision)
    parts = run_dir / f"teacher-{key}.parts"
    what = f"teacher's vectors of {len(texts):,} texts"
    with builder(teacher, texts, TEACHER_BATCH) as (runner, size):
        encoded = encode_in_parts(runner, texts, size, parts, what, "text")
    vectors = l2_normalize(np.asarray(encoded, dtype=np.float32))
    atomic_write(kept, save({"vectors": np.ascontiguousarray(vectors)}))
    shutil.rmtree(parts, ignore_errors=True)
    return vectors


def fitted_projection(
    space: DefinitionSpace, student: Encoder, texts: list[str], targets: np.ndarray, seed: int
) -> np.ndarray:
    """The teacher space's projection onto the student's dimension, turned to fit the student's own vectors of a
    seeded sample of the texts (the student before training)."""
    projection = principal_projection(space, student.dim)
    probe = np.random.default_rng(seed).choice(len(texts), min(PROBE, len(texts)), replace=False)
    own = l2_normalize(np.asarray(student.encode([texts[i] for i in probe], batch_size=64)))
    rotation = rotation_onto(l2_normalize(targets[probe] @ projection), own)
    fitted = projection @ rotation
    before = float((l2_normalize(targets[probe] @ fitted) * own).sum(1).mean())
    log.info("the student's vectors start at cosine %.3f to the teacher's, projected and turned", before)
    return fitted


def distil(
    teacher_path: str | Path,
    student_path: str | Path,
    descriptions: list[Description],
    settings: DistillationSettings,
    run_dir: Path,
    device: str = "auto",
    precision: str = "auto",
    resume: bool = False,
) -> tuple[Encoder, DefinitionSpace, Dictionary, RunRecord, SecondDefinitions | None]:
    """Train `student_path` on the teacher folder's query vectors; the trained student, the projected space, the
    teacher's dictionary, the record to save them with (`recipes.run.save_model_folder`) and the teacher's second
    dictionary's definitions projected as its space is (`second_dictionary`; None when it keeps none). The last step's
    checkpoint stays in `run_dir` until `training.discard_checkpoints(run_dir)`, once they are saved."""
    folder = ModelFolder.open(teacher_path)
    space = teacher_space(folder)
    second = open_second(folder.path / SPACE_DIR, len(space.words), int(space.matrix.shape[1]))  # before training
    dictionary = folder.dictionary().load()
    student = Encoder.load(student_path, device=loader_device(device)).set_precision(precision)
    texts, counts = distillation_texts(dictionary, space.words, descriptions, settings)
    log.info(
        "distilling %s into %s on %s", folder.name, student_path, ", ".join(f"{v:,} {k}" for k, v in counts.items())
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    key = f"{weights_sha256(folder.path)[:16]}-{texts_fingerprint(texts)}"  # the teacher's weights, the texts
    targets = teacher_targets(folder, device, precision, key, texts, run_dir)
    kept = run_dir / "projection.safetensors"
    if resume and kept.is_file():
        projection = load_file(kept)["projection"]
    else:
        projection = fitted_projection(space, student, texts, targets, settings.seed)
        atomic_write(kept, save({"projection": projection}))
    projected = space.projected(projection)
    objective = QueryDistillation(
        student,
        torch.from_numpy(l2_normalize(targets @ projection)),
        projected.matrix,
        settings.ranking_weight,
        space.temperature,
    )
    identity = {"teacher": str(folder.path), "student": str(student_path), "texts": key}
    trainer = Trainer(
        objective,
        [(text, row) for row, text in enumerate(texts)],
        distillation_collate(student),
        settings.train_settings(),
        run_dir,
        identity={**identity, **asdict(settings)},
        device=device,
        precision=precision,
        lengths=token_lengths(student, texts),
    )
    trainer.fit(resume=resume, keep_final=True)  # the caller discards it once the student is saved
    student.eval()
    teacher_record = folder.record
    record = RunRecord(
        method=METHOD,
        base_model=str(student.base_model),
        lr=settings.lr,
        seed=settings.seed,
        entry_space=space.kind,
        entry_encoder=teacher_record.entry_encoder or teacher_record.base_model,
        data=teacher_record.data,
        throughput=trainer.throughput,
        train_examples=len(texts),
        final_loss=trainer.final_loss,  # a resumed distillation's is an uninterrupted one's
        details={"teacher": folder.name, "teacher_model": teacher_record.base_model, "texts": counts}
        | {"projection": f"{space.matrix.shape[1]} -> {student.dim}", "settings": asdict(settings)},
        ranking=saved_ranking(bool(descriptions)),
    )
    if second is not None:  # projected as the definitions are, named as the teacher's record names it (the card's)
        saved = teacher_record.details.get("second_dictionary")
        name = saved.get("name") if isinstance(saved, dict) else None
        vectors = l2_normalize(np.asarray(second.definitions, dtype=np.float32) @ projection).astype(np.float16)
        second = SecondDefinitions(name if isinstance(name, str) and name else second.name, second.counts, vectors)
    return student, projected, dictionary, record, second
