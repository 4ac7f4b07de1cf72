"""Progress bars: one switch for every bar of the package. tqdm's own `TQDM_DISABLE` turns them all off (`dictembed
-q` sets it); a bar that a caller asks for explicitly still obeys it, which tqdm alone does not."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

DISABLE_ENV = "TQDM_DISABLE"


def bars_off() -> bool:
    """Whether progress bars are turned off for this process (`TQDM_DISABLE` set to 1 or true)."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() in ("1", "true", "yes")


def disable(show: bool | None) -> bool | None:
    """tqdm's `disable=` for a bar a caller wants shown (`show`: True, False, or None for tqdm's own choice: off
    when stderr is not a terminal), unless bars are off for the process."""
    if bars_off():
        return True
    return None if show is None else not show


@contextlib.contextmanager
def bars_turned_off(off: bool = True) -> Iterator[None]:
    """Every progress bar off while inside (when `off`), those of the libraries underneath included; the
    setting before is restored after."""
    before = os.environ.get(DISABLE_ENV)
    if off:
        os.environ[DISABLE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = before
