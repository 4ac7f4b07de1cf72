"""benchmarks/wide_standin.py: the isometric lift that gives a narrow entry space a wide encoder's dimension."""

from __future__ import annotations

import conftest
import numpy as np


def test_lift_doubles_the_dimension_and_keeps_every_cosine() -> None:
    script = conftest.load_script("benchmarks/wide_standin.py")
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((50, 16)).astype(np.float32)
    rotation, _ = np.linalg.qr(rng.standard_normal((16, 16)))
    wide = script.lifted(rows, rotation)
    assert wide.shape == (50, 32) and wide.dtype == np.float32
    np.testing.assert_allclose(wide @ wide.T, rows @ rows.T, rtol=1e-5, atol=1e-5)
    assert not np.allclose(wide[:, 16:], wide[:, :16])  # the second half is rotated, not a copy
    half = script.lifted(rows.astype(np.float16), rotation)
    assert half.dtype == np.float16
