"""Progress: one switch for every bar of the package, and `Progress`, a bar on a terminal and a log line at a steady
interval elsewhere. Bars are drawn only when stderr is a terminal: into a log file or a pipe they would write a line
of control characters per update. tqdm's own `TQDM_DISABLE` turns them all off; tqdm reads it once, when imported,
so `bars_turned_off` (`dictembed -q`) also turns off the bars of a library imported before, as the variable would
have; a bar that a caller asks for explicitly still obeys both, which tqdm alone does not."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from tqdm import std as tqdm_std
from tqdm.auto import tqdm

DISABLE_ENV = "TQDM_DISABLE"
INTERVAL_ENV = "DICTEMBED_PROGRESS_INTERVAL"  # seconds between two progress lines when stderr is no terminal
DEFAULT_INTERVAL = 30.0

log = logging.getLogger(__name__)


def bars_off() -> bool:
    """Whether progress bars are turned off for this process (`TQDM_DISABLE` set to 1 or true)."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "true", "yes")


def disable(show: bool | None) -> bool:
    """tqdm's `disable=` for a bar a caller wants shown (`show`: True, or None for the default) or not (False): off
    when stderr is not a terminal (a file, a pipe) or bars are off for the process."""
    return show is False or bars_off() or not terminal()


_turned_off = threading.Lock()  # guards the three below
_off_depth = 0  # how many `bars_turned_off` blocks are open
_env_before: str | None = None  # TQDM_DISABLE before the first of them
_init_before: Any = None  # tqdm's __init__ before the first of them


@contextlib.contextmanager
def bars_turned_off(off: bool = True) -> Iterator[None]:
    """Every progress bar off while inside (when `off`), those of the libraries underneath included; the
    setting before is restored once the last such block ends (blocks may nest, or overlap in threads)."""
    global _off_depth, _env_before, _init_before
    if not off:
        yield
        return
    with _turned_off:
        _off_depth += 1
        if _off_depth == 1:
            _env_before, _init_before = os.environ.get(DISABLE_ENV), tqdm_std.tqdm.__dict__["__init__"]
            os.environ[DISABLE_ENV] = "1"
            # what the variable does when set before tqdm's import: `disable=True` unless a bar passes its own
            tqdm_std.tqdm.__init__ = functools.partialmethod(_init_before, disable=True)
    try:
        yield
    finally:
        with _turned_off:
            _off_depth -= 1
            if _off_depth == 0:
                tqdm_std.tqdm.__init__ = _init_before
                if _env_before is None:
                    os.environ.pop(DISABLE_ENV, None)
                else:
                    os.environ[DISABLE_ENV] = _env_before


def terminal() -> bool:
    """Whether stderr, where bars are drawn, is a terminal (not a file or a pipe)."""
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def interval() -> float:
    """Seconds between two progress lines: $DICTEMBED_PROGRESS_INTERVAL, else 30."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, "") or DEFAULT_INTERVAL)
    except ValueError:
        return DEFAULT_INTERVAL
    return value if math.isfinite(value) and value >= 0 else DEFAULT_INTERVAL


def duration(seconds: float) -> str:
    """A rough duration for people: 45 s, 13 min, 2 h 05 min."""
    if not math.isfinite(seconds):
        return "an unknown time"
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """The progress of a long loop: a tqdm bar when stderr is a terminal; otherwise (a log file, a pipe, a batch
    job) a log line every `every` seconds (default `interval()`): done/total, the rate, the postfix (e.g. the loss)
    and the time left. Nothing at all when `show` is False or bars are off for the process (`-q`).

    `per_unit` and `rate_unit` turn the rate into other units (a training step of 16 examples: 16, "examples")."""

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        unit: str = "it",
        initial: int = 0,
        show: bool | None = None,
        leave: bool = True,
        per_unit: float = 1.0,
        rate_unit: str | None = None,
        logger: logging.Logger | None = None,
        every: float | None = None,
    ) -> None:
        off = bars_off() or show is False
        drawn = not off and terminal()
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=leave, disable=not drawn)
        self.lines = not off and not drawn
        self.total, self.n, self.start_n = total, initial, initial
        self.desc, self.unit, self.per_unit, self.rate_unit = desc, unit, per_unit, rate_unit or f"{unit}s"
        self.logger = logger or log
        self.every = interval() if every is None else every
        self.started = self.last = time.monotonic()
        self.postfix: dict[str, Any] = {}

    def update(self, n: int = 1) -> None:
        """`n` more done; a line is logged when `every` seconds passed since the last one."""
        self.n += n
        self.bar.update(n)
        if self.lines and time.monotonic() - self.last >= self.every and self.n < self.total:
            self.log_line()

    def set_postfix(self, **values: Any) -> None:
        """Figures shown after the count (the bar's postfix, the line's tail), e.g. loss="1.234"."""
        self.postfix = values
        self.bar.set_postfix(values)

    def line(self) -> str:
        """The progress line: `train: step 120/1,000 (12%), 45.3 examples/s, loss 1.234, about 3 min left`."""
        now = time.monotonic()
        done = self.n - self.start_n
        elapsed = max(now - self.started, 1e-9)
        percent = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        parts = [f"{self.desc}: {self.unit} {self.n:,}/{self.total:,}{percent}"]
        parts.append(f"{done * self.per_unit / elapsed:.1f} {self.rate_unit}/s")
        parts += [f"{key} {value}" for key, value in self.postfix.items()]
        if done > 0 and self.total:
            parts.append(f"about {duration((self.total - self.n) * elapsed / done)} left")
        return ", ".join(parts)

    def log_line(self) -> None:
        """Log the progress line now."""
        self.last = time.monotonic()
        self.logger.info("%s", self.line())

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
