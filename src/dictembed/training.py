"""The one training loop every method shares, on accelerate.

AdamW, linear warm-up over a fraction of the steps then linear decay, gradient clipping, a seeded
shuffled order with dynamic padding (the collate function pads to the longest in the batch), atomic
checkpoints every `checkpoint_every` steps (safetensors and JSON only, `dictembed.checkpoint`) that
`resume=True` continues from bit-identically when they belong to the same run configuration, progress
(`dictembed.progress.Progress`: a bar on a terminal, a line every 30 s in a log), and metrics appended as
JSON lines.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from accelerate import Accelerator, DistributedDataParallelKwargs
from torch import nn
from torch.utils.data import DataLoader
from transformers import get_linear_schedule_with_warmup

from dictembed.checkpoint import checkpoint_run, load_checkpoint, save_checkpoint
from dictembed.devices import MIXED_PRECISION, device_type, resolve_device, resolve_precision, wait_for_everyone
from dictembed.errors import DictEmbedError
from dictembed.io import atomic_write, settle_swap, staged_dir, swap_paths
from dictembed.progress import Progress as ProgressReport
from dictembed.run_changes import changed_settings
from dictembed.texts import is_real_number, is_whole_number

log = logging.getLogger(__name__)

FINAL_LOSS_STEPS = 50  # a run's final loss is the mean of its last steps' losses (`Trainer.final_loss`)


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
    grad_accum: int = 1  # micro-batches per optimizer step; batch_size stays the global batch of one step
    group_by_length: bool = False  # batches of similar lengths (seeded), see `length_grouped_order`


def set_seed(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Progress:
    """The step counter."""

    def __init__(self) -> None:
        self.step = 0


@contextmanager
def deferred_interrupt() -> Iterator[Callable[[], bool]]:
    """While active, a first Ctrl-C (SIGINT) or SIGTERM (what a batch scheduler sends) only sets a flag that the
    training loop reads after each step; a second one interrupts at once. Outside the main thread, signals are
    left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        log.warning("interrupt received: finishing this step and writing a checkpoint (Ctrl-C again to stop now)")

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: bool(received)
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


def make_accelerator(device: str | torch.device | None = None, precision: str = "fp32") -> Accelerator:
    """An Accelerator on `device` ("auto"/None: CUDA, else MPS, else CPU) with `precision` (fp32, bf16, fp16 or
    auto) as accelerate's mixed precision. Under `accelerate launch` each process keeps the device the launcher
    gave it; in a single process an earlier Accelerator's state (another device or precision) is reset."""
    from accelerate.state import AcceleratorState, PartialState

    processes = PartialState._shared_state.get("num_processes") or int(os.environ.get("WORLD_SIZE", "1"))
    distributed = int(processes) > 1
    if not distributed:
        AcceleratorState._reset_state(reset_partial_state=True)
        chosen = resolve_device(device)
        if chosen.type == "cuda" and chosen.index is not None:
            torch.cuda.set_device(chosen.index)  # accelerate puts a single process on the current CUDA device
        cpu = chosen.type == "cpu"
    else:
        cpu = device_type(device) == "cpu"
    mixed = MIXED_PRECISION[resolve_precision(precision, device)]
    # A backbone's unused parts (BERT's pooler under mean pooling) get no gradient: DDP must allow that.
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if distributed else []
    return Accelerator(cpu=cpu, mixed_precision=mixed, kwargs_handlers=handlers)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The shuffled example order of one epoch, a pure function of (seed, epoch) so resume can replay it."""
    return np.random.default_rng([seed, epoch]).permutation(n).tolist()


def length_grouped_order(lengths: Sequence[int], batch_size: int, seed: int, epoch: int, pool: int = 50) -> list[int]:
    """An epoch order whose consecutive `batch_size` blocks hold examples of similar length, so little of a
    dynamically padded batch is padding: the shuffled order (`epoch_order`) is cut into pools of `pool`
    batches, each pool sorted by length (longest first) and cut into batches, and the full batches are
    shuffled (the one short batch, if any, stays last). A pure function of its arguments, so resume replays it."""
    order = epoch_order(len(lengths), seed, epoch)
    batches: list[list[int]] = []
    for start in range(0, len(order), batch_size * pool):
        chunk = sorted(order[start : start + batch_size * pool], key=lambda i: -lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    short = [b for b in batches if len(b) < batch_size]
    full = [b for b in batches if len(b) == batch_size]
    shuffled = np.random.default_rng([seed, epoch, 1]).permutation(len(full))
    return [i for j in shuffled for i in full[j]] + [i for b in short for i in b]


def make_optimizer(params: list[nn.Parameter], lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW, fused into one kernel per step where torch has one for these parameters (float32 or lower on the
    CPU or CUDA; 4-5x faster than the per-tensor loop on the CPU, the same update to the last bit or two)."""
    fusable = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fusable or None)


def checkpoint_dir(run_dir: Path) -> Path:
    """The folder of a run's checkpoint (`Trainer.save_checkpoint`)."""
    return run_dir / "checkpoint"


def discard_checkpoints(run_dir: Path) -> None:
    """Remove a run's checkpoint, with a swap's staging folder or set-aside copy: once what the run trained is
    saved (after `Trainer.fit(keep_final=True)`), by the one process that saves it."""
    for folder in swap_paths(checkpoint_dir(run_dir)):
        shutil.rmtree(folder, ignore_errors=True)


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
        device: str | torch.device | None = None,
        precision: str = "fp32",
        lengths: Sequence[int] | None = None,
    ) -> None:
        """`identity` is the configuration the run belongs to: a checkpoint is resumed only under the same.
        Without an `accelerator`, one is made on `device` ("auto"/None: the best one) with `precision`
        (`make_accelerator`). `settings.batch_size` is the global batch of one optimizer step: each process
        takes batch_size / (grad_accum x processes) examples a forward pass. `lengths` (one per example, e.g.
        token counts) is what `settings.group_by_length` groups batches by."""
        if not examples:
            raise DictEmbedError("no training examples")
        self.settings = settings
        self.identity = identity or {}
        # The run's bookkeeping, kept in its checkpoints so that a resumed run records what an uninterrupted one
        # does: the losses of its last `FINAL_LOSS_STEPS` steps (`final_loss`), and the examples its steps took and
        # the seconds they took, over every process (`fit` call, resume) that trained it (`throughput`).
        self.recent_losses: deque[float] = deque(maxlen=FINAL_LOSS_STEPS)
        self.trained_examples = 0
        self.trained_seconds = 0.0
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.accelerator = accelerator or make_accelerator(device, precision)
        self.accelerator.gradient_accumulation_steps = settings.grad_accum
        self.examples = list(examples)
        self.collate = collate
        if settings.group_by_length and (lengths is None or len(lengths) != len(self.examples)):
            raise DictEmbedError("group_by_length needs one length per training example")
        self.lengths = list(lengths) if settings.group_by_length and lengths is not None else None
        passes = settings.grad_accum * self.accelerator.num_processes
        if settings.grad_accum < 1 or settings.batch_size % passes:
            raise DictEmbedError(
                f"batch size {settings.batch_size} does not split into {settings.grad_accum} accumulation step(s) "
                f"x {self.accelerator.num_processes} process(es)"
            )
        self.micro_batch = settings.batch_size // passes
        set_seed(settings.seed)
        self.steps_per_epoch = -(-len(self.examples) // settings.batch_size)
        self.total_steps = self.steps_per_epoch * settings.epochs
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(params, settings.lr, settings.weight_decay)
        scheduler = get_linear_schedule_with_warmup(
            optimizer, int(settings.warmup_ratio * self.total_steps), self.total_steps
        )
        # The scheduler stays unwrapped: it steps once per optimizer step, whatever the processes and accumulation.
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.scheduler = scheduler
        self.progress = Progress()

    @property
    def final_loss(self) -> float | None:
        """The mean loss of the run's last `FINAL_LOSS_STEPS` steps, whichever processes trained them (a resumed run's
        figure is an uninterrupted one's); None before any step."""
        return float(np.mean(self.recent_losses)) if self.recent_losses else None

    @property
    def throughput(self) -> float | None:
        """Examples per second of the run's training: the examples its steps took (a short last batch counts what it
        holds) over the seconds from each process's start of training to its last step, all the processes that
        trained the run added up (the steps a kill lost after the last checkpoint are not counted); None before any
        step, or for a run resumed at its end from a checkpoint that kept no such count (an older version's)."""
        if not self.trained_examples or self.trained_seconds <= 0:
            return None
        return self.trained_examples / self.trained_seconds

    def step_examples(self, step: int) -> int:
        """How many examples the optimizer step after `step` steps takes: a batch, or what the epoch has left."""
        offset = step % self.steps_per_epoch
        return min(self.settings.batch_size, len(self.examples) - offset * self.settings.batch_size)

    @property
    def unwrapped(self) -> nn.Module:
        """The objective module without accelerate's wrappers (DDP, mixed precision)."""
        return self.accelerator.unwrap_model(self.model)

    @property
    def checkpoint_dir(self) -> Path:
        return checkpoint_dir(self.run_dir)

    def _loader(self, epoch: int) -> DataLoader:
        s = self.settings
        if self.lengths is not None:
            order = length_grouped_order(self.lengths, s.batch_size, s.seed, epoch)
        else:
            order = epoch_order(len(self.examples), s.seed, epoch)
        data = [self.examples[i] for i in order]
        # Its own generator: creating an iterator must not draw from the global RNG that dropout uses.
        generator = torch.Generator().manual_seed(self.settings.seed)
        loader: DataLoader[Any] = DataLoader(
            data,  # type: ignore[arg-type]  # a list is a map-style dataset; torch's stubs ask for a Dataset
            batch_size=self.micro_batch,
            shuffle=False,
            collate_fn=self.collate,
            generator=generator,
        )
        return self.accelerator.prepare_data_loader(loader)

    def save_checkpoint(self) -> None:
        """Write the full training state to a staging folder, then swap it in (a kill never corrupts it)."""
        wait_for_everyone()
        if self.accelerator.is_main_process:
            run = {
                "step": self.progress.step,
                "identity": self.identity,
                "losses": list(self.recent_losses),
                "trained_examples": self.trained_examples,
                "trained_seconds": self.trained_seconds,
            }
            with staged_dir(self.checkpoint_dir, owned=True) as staging:
                scaler = getattr(self.accelerator, "scaler", None)  # fp16 on a GPU
                save_checkpoint(staging, self.unwrapped, self.optimizer, self.scheduler, run, scaler)

    def _checkpoint(self) -> Path | None:
        """The newest complete checkpoint: the folder itself, or, after a kill between the two renames of a
        swap, the finished staging folder or the previous checkpoint set aside."""
        for folder in swap_paths(self.checkpoint_dir):
            if checkpoint_run(folder) is not None:
                return folder
        return None

    def discard_checkpoints(self) -> None:
        """Remove this run's checkpoints: by the main process, once every process is here (under DDP the
        main one may still be writing the checkpoint of the last step when another process gets here)."""
        wait_for_everyone()
        if self.accelerator.is_main_process:
            discard_checkpoints(self.run_dir)

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
        elif saved.get("identity") != self.identity:  # kept: the user may still resume it with its own options
            raise DictEmbedError(
                f"--resume: the checkpoint in {folder} was trained with another configuration"
                f"{changed_settings(saved.get('identity'), self.identity)}; resume it with the options it was trained "
                "with, or run without --resume to discard it and start over"
            )
        else:
            if folder != self.checkpoint_dir:  # a swap a kill interrupted: finished before the next checkpoint
                wait_for_everyone()
                if self.accelerator.is_main_process:
                    settle_swap(folder, self.checkpoint_dir)
                wait_for_everyone()
                folder = self.checkpoint_dir if self.checkpoint_dir.is_dir() else folder
            scaler = getattr(self.accelerator, "scaler", None)
            saved_run = load_checkpoint(folder, self.unwrapped, self.optimizer, self.scheduler, scaler)
            self.progress.step = int(saved_run["step"])
            self._restore_bookkeeping(saved_run, folder)
            log.info("resumed from %s at step %d", folder, self.progress.step)
            return
        self.discard_checkpoints()

    def _restore_bookkeeping(self, saved: dict[str, Any], folder: Path) -> None:
        """The recent losses and the examples and seconds trained that a checkpoint's run.json holds; one without
        them (an older version's, or damaged) leaves them to what this process trains, said so."""
        losses, examples, seconds = saved.get("losses"), saved.get("trained_examples"), saved.get("trained_seconds")
        if (
            isinstance(losses, list)
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in losses)  # inf: a skipped fp16 step
            and is_whole_number(examples, 0)
            and is_real_number(seconds, 0)
        ):
            self.recent_losses.extend(float(x) for x in losses)
            self.trained_examples, self.trained_seconds = int(cast(int, examples)), float(cast(float, seconds))
        else:
            log.warning(
                "%s keeps no losses or example counts: the final loss and throughput recorded are of the steps "
                "trained from here on only",
                folder / "run.json",
            )

    def _trim_metrics(self) -> None:
        """Keep the lines of `metrics.jsonl` up to the step training starts from: a resumed run's log goes on from
        its checkpoint (the steps a kill lost are not logged twice), a run started over begins a new log."""
        path = self.run_dir / "metrics.jsonl"
        if not self.accelerator.is_main_process or not path.is_file():
            return
        kept = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                step = json.loads(line).get("step")
            except (ValueError, AttributeError):
                continue  # a line a kill cut short
            if isinstance(step, int) and step <= self.progress.step:
                kept.append(line + "\n")
        atomic_write(path, "".join(kept))

    def _log(self, record: dict[str, Any]) -> None:
        if self.accelerator.is_main_process:
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def fit(self, resume: bool = False, max_steps: int | None = None, keep_final: bool = False) -> list[float]:
        """Run to the end (or to `max_steps`, as if killed there); returns the per-step losses of this call.

        Ctrl-C finishes the step under way, writes a checkpoint at it, then raises KeyboardInterrupt, so
        `--resume` continues from there; a second Ctrl-C stops at once. The checkpoints are removed at the end,
        unless `keep_final`: then the last step's checkpoint stays until `discard_checkpoints` (called once
        what the training made is saved), so that a failure after the training (scoring, saving) resumes at
        the end instead of training again."""
        with deferred_interrupt() as interrupted:
            return self._fit(resume, max_steps, interrupted, keep_final)

    def _fit(
        self, resume: bool, max_steps: int | None, interrupted: Callable[[], bool], keep_final: bool = False
    ) -> list[float]:
        self._start(resume)
        self._trim_metrics()
        s = self.settings
        losses: list[float] = []
        bar = ProgressReport(
            self.total_steps,
            "train",
            unit="step",
            initial=self.progress.step,
            per_unit=len(self.examples) * s.epochs / self.total_steps,  # the mean examples of a step
            rate_unit="examples",
            logger=log,
            show=None if self.accelerator.is_main_process else False,  # one process reports
        )
        start, done_at_start, seconds_before = time.time(), self.progress.step, self.trained_seconds
        self.model.train()
        while self.progress.step < self.total_steps:
            epoch, offset = divmod(self.progress.step, self.steps_per_epoch)
            loader = self.accelerator.skip_first_batches(self._loader(epoch), offset * s.grad_accum)
            accumulated: list[float] = []
            for batch in loader:
                with self.accelerator.accumulate(self.model):
                    out = self.model(batch)
                    self.accelerator.backward(out["loss"])
                    accumulated.append(float(out["loss"].detach()))
                    if not self.accelerator.sync_gradients:
                        continue  # the gradients of this micro-batch are added to the next ones
                    if s.max_grad_norm:
                        self.accelerator.clip_grad_norm_(self.model.parameters(), s.max_grad_norm)
                    self.optimizer.step()
                    if not self.optimizer.step_was_skipped:  # fp16: a step with inf/NaN gradients is skipped
                        self.scheduler.step()
                    self.optimizer.zero_grad()
                self.trained_examples += self.step_examples(self.progress.step)
                self.trained_seconds = seconds_before + time.time() - start
                self.progress.step += 1
                losses.append(float(np.mean(accumulated)))
                self.recent_losses.append(losses[-1])
                accumulated = []
                if not math.isfinite(losses[-1]) and not self.optimizer.step_was_skipped:
                    bar.close()  # the weights are lost to it: nothing is saved, the last checkpoint is kept
                    raise DictEmbedError(
                        f"training diverged: the loss is {losses[-1]} at step {self.progress.step} (learning rate "
                        f"{self.scheduler.get_last_lr()[0]:g}); nothing was saved from it: lower the learning rate"
                    )
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
                bar.update(1)
                if self.progress.step % s.log_every == 0 or self.progress.step == self.total_steps:
                    record = {**{k: float(v.detach()) for k, v in out.items()}, "loss": losses[-1]}
                    rate = self.trained_examples / max(self.trained_seconds, 1e-9)  # the run's, as `throughput`
                    lr = self.scheduler.get_last_lr()[0]
                    self._log({"step": self.progress.step, "epoch": epoch, "lr": lr, "examples_per_s": rate, **record})
                    if self.progress.step == self.total_steps:  # before: a progress line every 30 s, or the bar
                        log.info(
                            "step %d/%d loss %.4f, %.1f examples/s",
                            self.progress.step,
                            self.total_steps,
                            losses[-1],
                            rate,
                        )
                if self.progress.step % s.checkpoint_every == 0:
                    self.save_checkpoint()
                if interrupted():
                    bar.close()
                    self.save_checkpoint()
                    log.warning("interrupted: checkpoint written at step %d in %s", self.progress.step, self.run_dir)
                    raise KeyboardInterrupt
                if max_steps is not None and self.progress.step >= max_steps:
                    bar.close()
                    self.save_checkpoint()
                    return losses
        bar.close()
        if not keep_final:
            self.discard_checkpoints()
        elif self.progress.step > done_at_start and self.progress.step % s.checkpoint_every:
            self.save_checkpoint()  # the last step, unless its checkpoint is written already
        return losses
