"""Supervised STS-B fine-tuning: the siamese cosine-regression protocol of SBERT, used by GR-BERT.

A bi-encoder is fine-tuned on (a seeded fraction of) STS-B train with `CosineSimilarityLoss`
(gold scores 0-5 scaled to 0-1), AdamW with linear warm-up over 10% of the steps, then scored by
the cosine Spearman x 100 on STS-B dev and test. Everything runs offline (local files only).
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from safetensors import SafetensorError

from dictembed import progress
from dictembed.devices import autocast, resolve_device, resolve_precision
from dictembed.errors import DataFormatError, DictEmbedError, ModelLoadError
from dictembed.evaluation._common import MAX_SCORE, MAX_SEED, mean_sd
from dictembed.evaluation.sts import load_stsb
from dictembed.extras import require
from dictembed.io import staged_dir
from dictembed.model_folder import resolve_model
from dictembed.output_folder import check_not_a_file, check_output_folder
from dictembed.pooling import STANDARD_POOLINGS as POOLINGS
from dictembed.texts import MAX_EPOCHS, check_batch_size, is_real_number, is_whole_number

logger = logging.getLogger(__name__)
RESULTS = "results.json"  # a seed's scores and settings, written last into its folder


@dataclass(frozen=True)
class StsPairs:
    """Aligned sentence pairs with gold similarity scores normalised to 0-1."""

    sentences1: list[str]
    sentences2: list[str]
    scores: list[float]

    def __len__(self) -> int:
        return len(self.scores)

    def take(self, indices: Sequence[int]) -> StsPairs:
        """The pairs at `indices`, in that order."""
        return StsPairs(
            [self.sentences1[i] for i in indices],
            [self.sentences2[i] for i in indices],
            [self.scores[i] for i in indices],
        )


def load_stsb_pairs(split: str, data_dir: str | Path | None = None, limit: int | None = None) -> StsPairs:
    """STS-B `split` (train, dev or test) read by `dictembed.evaluation.sts.load_stsb`, scores divided by 5.

    A score outside 0-5 raises `DataFormatError` naming the file and line; `limit` keeps the first pairs.
    """
    check_limit(limit)
    subset = load_stsb(split, data_dir)  # scores within 0-5, at least two pairs
    keep = slice(0, limit)
    return StsPairs(subset.sentences1[keep], subset.sentences2[keep], (subset.scores[keep] / MAX_SCORE).tolist())


def check_limit(limit: object) -> None:
    """Refuse a `limit` that is not None or a whole number of pairs >= 2 (a Spearman correlation needs two)."""
    if limit is not None and not is_whole_number(limit, 2):
        raise DictEmbedError(f"limit must be a whole number of pairs >= 2 or None (all), got {limit!r}")


def check_ratio(ratio: object) -> None:
    """Refuse a `ratio` that is not a number in (0, 1]."""
    if not is_real_number(ratio, 0, 1, above=True):
        raise DictEmbedError(f"ratio must be in (0, 1], got {ratio!r}")


def check_seed(seed: object) -> None:
    """Refuse a `seed` that is not a whole number from 0 to `MAX_SEED` (what the Trainer seeds numpy with)."""
    if not is_whole_number(seed, 0, MAX_SEED):
        raise DictEmbedError(f"seed must be a whole number from 0 to {MAX_SEED}, got {seed!r}")


def check_pooling(pooling: object) -> None:
    """Refuse a pooling other than cls, mean or max."""
    if pooling not in POOLINGS:
        raise DictEmbedError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLINGS)}")


def check_settings(
    ratio: object, seed: object, epochs: object, batch_size: object, lr: object, pooling: object, limit: object
) -> None:
    """Refuse, in one line naming the argument and its value, a setting of `finetune_stsb` that cannot train:
    before anything loads."""
    check_ratio(ratio)
    check_seed(seed)
    if not is_whole_number(epochs, 1, MAX_EPOCHS):
        raise DictEmbedError(f"epochs must be a whole number from 1 to {MAX_EPOCHS}, got {epochs!r}")
    check_batch_size(batch_size)
    if not is_real_number(lr, 0, above=True):
        raise DictEmbedError(f"lr must be a finite number > 0, got {lr!r}")
    check_pooling(pooling)
    check_limit(limit)


def check_seed_output(folder: str | Path, overwrite: bool, resume: bool = False) -> None:
    """Refuse a seed's `output_dir` that would lose something (`check_output_folder`: a file, a non-empty folder
    holding no model, one holding a model unless `overwrite`); with `resume`, a folder holding a seed's results
    passes: `finished_seed` reads it back or refuses it, and one trained again is checked then."""
    if not (resume and (Path(folder) / RESULTS).is_file()):
        check_output_folder(folder, overwrite, label="output_dir", remedy="pass overwrite=True")


def subsample(pairs: StsPairs, ratio: float, seed: int) -> StsPairs:
    """A seeded random `ratio` of the pairs (ratio * n rounded half up, at least 1), in file order."""
    check_ratio(ratio)
    size = max(1, math.floor(ratio * len(pairs) + 0.5))
    if size == len(pairs):
        return pairs
    chosen = np.sort(np.random.default_rng(seed).choice(len(pairs), size=size, replace=False))
    return pairs.take(chosen.tolist())


def load_bi_encoder(model_name_or_path: str | Path, pooling: str = "mean", device: str | None = None) -> Any:
    """A SentenceTransformer: a sentence-transformers folder as saved (its own pooling), or a plain
    Hugging Face encoder wrapped as Transformer + Pooling(`pooling`, one of cls|mean|max); on `device`
    ("auto"/None: CUDA, else MPS, else CPU)."""
    device = str(resolve_device(device))
    check_pooling(pooling)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    folder = resolve_model(model_name_or_path)
    try:
        if (folder / "modules.json").is_file():
            logger.info("%s is a sentence-transformers model; using its own pooling", folder)
            return SentenceTransformer(str(folder), local_files_only=True, device=device)
        if not (folder / "config.json").is_file():
            raise ModelLoadError(f"model {str(model_name_or_path)!r}: {folder} has no config.json or modules.json")
        offline = {"local_files_only": True}
        encoder = Transformer(str(folder), model_kwargs=offline, config_kwargs=offline, processor_kwargs=offline)
        pooler = Pooling(encoder.get_embedding_dimension(), pooling_mode=pooling)
        return SentenceTransformer(modules=[encoder, pooler], local_files_only=True, device=device)
    except ModelLoadError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        raise ModelLoadError(f"could not load model {str(model_name_or_path)!r}: {exc}") from None


def evaluate_pairs(model: Any, pairs: StsPairs, name: str = "sts", batch_size: int = 64) -> float:
    """Cosine Spearman x 100 of `model` on `pairs`."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    evaluator = EmbeddingSimilarityEvaluator(
        pairs.sentences1,
        pairs.sentences2,
        pairs.scores,
        batch_size=batch_size,
        main_similarity="cosine",
        similarity_fn_names=["cosine"],
        name=name,
        show_progress_bar=not progress.disable(None),
        write_csv=False,
    )
    return 100.0 * float(evaluator(model)[evaluator.primary_metric])


def _training_args(
    output_dir: str, epochs: int, batch_size: int, lr: float, seed: int, device: str = "cpu", precision: str = "fp32"
) -> Any:
    """SBERT's recipe: AdamW, weight decay 0.01, linear schedule with warm-up over 10% of the steps; on the CPU
    when `device` is, with `precision` (fp32, bf16, fp16) as the mixed precision."""
    import torch
    from sentence_transformers import SentenceTransformerTrainingArguments

    return SentenceTransformerTrainingArguments(
        output_dir=output_dir,
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=lr,
        weight_decay=0.01,
        lr_scheduler_type="linear",
        warmup_steps=0.1,  # a float < 1 is a fraction of the total steps
        max_grad_norm=1.0,
        seed=seed,
        data_seed=seed,
        logging_strategy="steps",
        logging_steps=0.05,  # log the training loss 20 times per run
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        push_to_hub=False,
        disable_tqdm=progress.disable(None),
        dataloader_pin_memory=torch.cuda.is_available() and device.startswith("cuda"),
        use_cpu=device == "cpu",
        bf16=precision == "bf16",
        fp16=precision == "fp16",
    )


def _train(model: Any, train: StsPairs, args: Any) -> tuple[list[tuple[int, float]], int]:
    """Fine-tune in place with CosineSimilarityLoss; returns the logged (step, loss) history and steps."""
    Dataset = require("finetune").Dataset
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import CosineSimilarityLoss
    from transformers.trainer_callback import PrinterCallback, TrainerCallback

    class LossLines(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
            if logs and "loss" in logs:
                logger.info("finetune: step %d/%d, loss %.4f", state.global_step, state.max_steps, logs["loss"])

    dataset = Dataset.from_dict({"sentence1": train.sentences1, "sentence2": train.sentences2, "score": train.scores})
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=dataset, loss=CosineSimilarityLoss(model)
    )
    trainer.remove_callback(PrinterCallback)  # with its bar off the Trainer prints each log dict on stdout
    if args.disable_tqdm:  # no terminal (a log file): the logged losses as lines on stderr instead of a bar
        trainer.add_callback(LossLines())
    trainer.train()
    history = [(int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e]
    return history, int(trainer.state.global_step)


def finetune_stsb(
    model_name_or_path: str | Path,
    ratio: float = 1.0,
    seed: int = 0,
    epochs: int = 4,
    batch_size: int = 16,
    lr: float = 2e-5,
    pooling: str = "mean",
    output_dir: str | Path | None = None,
    limit: int | None = None,
    data_dir: str | Path | None = None,
    device: str | None = None,
    precision: str | None = "auto",
    resume: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Fine-tune on a seeded `ratio` of STS-B train and score dev and test (cosine Spearman x 100).

    `device` ("auto"/None: CUDA, else MPS, else CPU) and `precision` (auto: `devices.resolve_precision`'s
    bf16 or fp32) are where and how it trains and evaluates.

    `limit` keeps only the first `limit` pairs of each split (quick checks). Without `output_dir`
    nothing is written (a temporary folder is used and removed); with it, the fine-tuned model and
    `results.json` are saved there (no intermediate checkpoints). Returns `test_spearman`,
    `dev_spearman`, `n_train`, `steps`, `loss_history` [(step, loss)], `train_seconds` and
    `wall_seconds` (training + evaluation) besides the settings. With `resume`, the result `output_dir` holds
    already, finished with the same settings, is read back instead (`finished_seed`; `overwrite`: one finished
    with other settings is trained again). Arguments that cannot train (`check_settings`) and an `output_dir` that
    would lose something (`check_seed_output`: a file, a non-empty folder holding no model, one holding a model
    unless `overwrite`) are refused before anything loads.
    """
    check_settings(ratio, seed, epochs, batch_size, lr, pooling, limit)
    if output_dir is not None:
        check_seed_output(output_dir, overwrite, resume)
    chosen = resolve_device(device)
    if chosen.type == "cuda" and chosen.index and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        raise DictEmbedError(
            f"device {device!r}: finetune trains through the Hugging Face Trainer, which takes the first visible GPU "
            f"in a single process; run it as CUDA_VISIBLE_DEVICES={chosen.index} dictembed finetune ... --device cuda"
        )
    precision = resolve_precision(precision, chosen)
    settings = seed_settings(model_name_or_path, ratio, seed, epochs, batch_size, lr, pooling, limit, precision)
    if resume and output_dir is not None and (done := finished_seed(Path(output_dir), settings, overwrite)):
        return done
    if resume and output_dir is not None:  # trained again: the folder as any other
        check_seed_output(output_dir, overwrite)
    train = subsample(load_stsb_pairs("train", data_dir, limit), ratio, seed)
    dev = load_stsb_pairs("dev", data_dir, limit)
    test = load_stsb_pairs("test", data_dir, limit)
    model = load_bi_encoder(model_name_or_path, pooling, str(chosen))
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dictembed-stsb-") as scratch:
        args = _training_args(scratch, epochs, batch_size, lr, seed, str(chosen), precision)
        losses, steps = _train(model, train, args)
    train_time = time.perf_counter() - start
    result: dict[str, Any] = {
        "model": str(model_name_or_path),
        "ratio": ratio,
        "seed": seed,
        "settings": settings,
        "n_train": len(train),
        "epochs": epochs,
        "steps": steps,
        "loss_history": losses,
        "precision": precision,
    }
    with autocast(chosen, precision):
        result["dev_spearman"] = evaluate_pairs(model, dev, "sts-dev")
        result["test_spearman"] = evaluate_pairs(model, test, "sts-test")
    result |= {
        "train_seconds": train_time,
        "wall_seconds": time.perf_counter() - start,
    }
    if output_dir is not None:
        check_seed_output(output_dir, overwrite)  # again: another run may have written there meanwhile
        with staged_dir(output_dir) as staging:  # whole or absent: results.json marks a finished seed
            model.save(str(staging))
            (staging / RESULTS).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def seed_settings(
    model: str | Path,
    ratio: float,
    seed: int,
    epochs: int,
    batch_size: int,
    lr: float,
    pooling: str,
    limit: int | None,
    precision: str | None,
) -> dict[str, Any]:
    """What determines one seed's fine-tuned model and scores (the precision as resolved), as its results.json
    keeps it: a seed finished with the same settings is reused (`finetune_stsb(resume=True)`)."""
    return {
        "model": str(model),
        "ratio": ratio,
        "seed": seed,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "pooling": pooling,
        "limit": limit,
        "precision": precision,
    }


def finished_seed(folder: Path, settings: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """The result a seed folder holds when it finished with `settings`; None when it holds none (or, with
    `overwrite`, another run's, which is then trained again); a one-line error when it holds another run's."""
    try:
        saved = json.loads((folder / RESULTS).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise DataFormatError(folder / RESULTS, f"not a finished seed's results ({err})") from None
    if isinstance(saved, dict) and saved.get("settings") == settings:
        logger.info("reusing the finished seed %s", folder)
        return cast(dict[str, Any], saved)
    if overwrite:
        return None
    theirs = saved.get("settings") if isinstance(saved, dict) else None
    changed = sorted(k for k in settings if (theirs or {}).get(k) != settings[k]) or ["(no saved settings)"]
    raise DictEmbedError(
        f"--output {folder} holds a seed trained with other settings ({', '.join(changed)}); "
        "pass --overwrite to replace it"
    )


def finetune_stsb_seeds(
    model_name_or_path: str | Path, ratio: float, seeds: Sequence[int], **kw: Any
) -> dict[str, Any]:
    """`finetune_stsb` once per seed; `mean`/`sd` (sample sd, ddof=1) of the test Spearman, and
    `dev_mean`/`dev_sd` of the dev Spearman. `output_dir`, if given, gets one sub-folder per seed (with `resume`,
    a seed already finished there with the same settings is read back). Every seed, and its folder, is checked
    before the first trains (`check_seed`, `check_seed_output`)."""
    output_dir = kw.pop("output_dir", None)
    if isinstance(seeds, str) or not isinstance(seeds, Sequence) or not seeds:
        raise DictEmbedError(f"seeds must be a non-empty list of whole numbers, got {seeds!r}")
    if output_dir is not None:
        check_not_a_file(output_dir, "output_dir")
    for seed in seeds:
        check_seed(seed)
        if output_dir is not None:
            check_seed_output(Path(output_dir) / f"seed{seed}", kw.get("overwrite", False), kw.get("resume", False))
    runs = []
    for seed in seeds:
        out = Path(output_dir) / f"seed{seed}" if output_dir is not None else None
        runs.append(finetune_stsb(model_name_or_path, ratio=ratio, seed=seed, output_dir=out, **kw))
    mean, sd = mean_sd([r["test_spearman"] for r in runs])
    dev_mean, dev_sd = mean_sd([r["dev_spearman"] for r in runs])
    return {
        "ratio": ratio,
        "seeds": list(seeds),
        "runs": runs,
        "mean": mean,
        "sd": sd,
        "dev_mean": dev_mean,
        "dev_sd": dev_sd,
        "wall_seconds": sum(r["wall_seconds"] for r in runs),
    }
