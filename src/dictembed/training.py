"""The one training loop every method shares, on accelerate.

AdamW, linear warm-up over a fraction of the steps then linear decay, gradient clipping, a seeded
shuffled order with dynamic padding (the collate function pads to the longest in the batch), atomic
checkpoints every `checkpoint_every` steps (safetensors and JSON only, `dictembed.checkpoint`) that
`resume=True` continues from bit-identically when they belong to the same run configuration, a tqdm
bar, and metrics appended as JSON lines.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import get_linear_schedule_with_warmup

from dictembed.checkpoint import checkpoint_run, load_checkpoint, save_checkpoint
from dictembed.io import STAGING_SUFFIX, staged_dir

log = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    """Optimisation settings; the defaults are the papers' (1 epoch, batch 16, 10% warm-up)."""

    lr: float = 2e-5
    batch_size: int = 16
    epochs: int = 1
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0
    checkpoint_every: int = 500
    log_every: int = 50


def set_seed(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Progress:
    """The step counter."""

    def __init__(self) -> None:
        self.step = 0


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled example order of one epoch, a pure function of (seed, epoch) so resume can replay it."""
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


class Trainer:
    """Trains the requires_grad parameters of an objective module: `model(batch)` returns a dict with "loss".

    Frozen parts (entry spaces) live outside the module's parameters, so checkpoints hold only what trains.
    """

    def __init__(
        self,
        model: nn.Module,
        examples: Sequence[Any],
        collate: Callable[[list[Any]], Any],
        settings: TrainSettings,
        run_dir: str | Path,
        identity: dict[str, Any] | None = None,
        accelerator: Accelerator | None = None,
    ) -> None:
        """`identity` is the configuration the run belongs to: a checkpoint is resumed only under the same."""
        if not examples:
            raise ValueError("no training examples")
        self.settings = settings
        self.identity = identity or {}
        self.throughput: float | None = None  # examples per second of the last fit()
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.accelerator = accelerator or Accelerator(cpu=not torch.cuda.is_available())
        self.examples = list(examples)
        self.collate = collate
        set_seed(settings.seed)
        self.steps_per_epoch = -(-len(self.examples) // settings.batch_size)
        self.total_steps = self.steps_per_epoch * settings.epochs
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
        scheduler = get_linear_schedule_with_warmup(
            optimizer, int(settings.warmup_ratio * self.total_steps), self.total_steps
        )
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(model, optimizer, scheduler)
        self.progress = Progress()

    @property
    def unwrapped(self) -> nn.Module:
        """The objective module without accelerate's wrappers (DDP, mixed precision)."""
        return self.accelerator.unwrap_model(self.model)

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoint"

    def _loader(self, epoch: int) -> DataLoader:
        order = epoch_order(len(self.examples), self.settings.seed, epoch)
        data = [self.examples[i] for i in order]
        # Its own generator: creating an iterator must not draw from the global RNG that dropout uses.
        generator = torch.Generator().manual_seed(self.settings.seed)
        loader = DataLoader(
            data, batch_size=self.settings.batch_size, shuffle=False, collate_fn=self.collate, generator=generator
        )
        return self.accelerator.prepare_data_loader(loader)

    def save_checkpoint(self) -> None:
        """Write the full training state to a staging folder, then swap it in (a kill never corrupts it)."""
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            run = {"step": self.progress.step, "identity": self.identity}
            with staged_dir(self.checkpoint_dir) as staging:
                save_checkpoint(staging, self.unwrapped, self.optimizer, self.scheduler, run)

    def _checkpoint(self) -> Path | None:
        """The newest complete checkpoint: the folder itself, or, after a kill between the two renames of a
        swap, the finished staging folder or the previous checkpoint set aside."""
        for name in ("", STAGING_SUFFIX, ".old"):
            folder = self.checkpoint_dir.with_name(self.checkpoint_dir.name + name)
            if checkpoint_run(folder) is not None:
                return folder
        return None

    def _discard_checkpoints(self) -> None:
        for name in ("", STAGING_SUFFIX, ".old"):
            shutil.rmtree(self.checkpoint_dir.with_name(self.checkpoint_dir.name + name), ignore_errors=True)

    def _start(self, resume: bool) -> None:
        """Resume from this run's checkpoint when asked and it belongs to the same configuration; otherwise
        start at step 0, saying why an existing checkpoint is not used."""
        folder = self._checkpoint()
        if folder is None:
            if resume:
                log.warning("--resume: no checkpoint in %s; training from step 0", self.run_dir)
            return
        saved = checkpoint_run(folder) or {}
        if not resume:
            log.warning("discarding the checkpoint of an interrupted run in %s (pass --resume to continue it)", folder)
        elif saved.get("identity") != self.identity:
            log.warning("not resuming %s: it was trained with another configuration; training from step 0", folder)
        else:
            self.progress.step = int(load_checkpoint(folder, self.unwrapped, self.optimizer, self.scheduler)["step"])
            log.info("resumed from %s at step %d", folder, self.progress.step)
            return
        self._discard_checkpoints()

    def _log(self, record: dict[str, Any]) -> None:
        if self.accelerator.is_main_process:
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def fit(self, resume: bool = False, max_steps: int | None = None) -> list[float]:
        """Run to the end (or to `max_steps`, as if killed there); returns the per-step losses of this call."""
        self._start(resume)
        s = self.settings
        losses: list[float] = []
        bar = tqdm(total=self.total_steps, initial=self.progress.step, desc="train", disable=None)
        start, done_at_start = time.time(), self.progress.step
        self.model.train()
        while self.progress.step < self.total_steps:
            epoch, offset = divmod(self.progress.step, self.steps_per_epoch)
            loader = self.accelerator.skip_first_batches(self._loader(epoch), offset)
            for batch in loader:
                out = self.model(batch)
                self.accelerator.backward(out["loss"])
                if s.max_grad_norm:
                    self.accelerator.clip_grad_norm_(self.model.parameters(), s.max_grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                self.progress.step += 1
                losses.append(float(out["loss"].detach()))
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                if self.progress.step % s.log_every == 0 or self.progress.step == self.total_steps:
                    record = {k: float(v.detach()) for k, v in out.items()}
                    elapsed = time.time() - start
                    done = self.progress.step - done_at_start
                    self._log(
                        {
                            "step": self.progress.step,
                            "epoch": epoch,
                            "lr": self.scheduler.get_last_lr()[0],
                            "examples_per_s": done * s.batch_size / max(elapsed, 1e-9),
                            **record,
                        }
                    )
                if self.progress.step % s.checkpoint_every == 0:
                    self.save_checkpoint()
                if max_steps is not None and self.progress.step >= max_steps:
                    bar.close()
                    self.save_checkpoint()
                    return losses
        bar.close()
        self.throughput = (self.progress.step - done_at_start) * s.batch_size / max(time.time() - start, 1e-9)
        self._discard_checkpoints()
        return losses
