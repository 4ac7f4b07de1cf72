"""Tests for entry-space projections, isotropy metrics and their figures."""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from scipy.spatial.distance import pdist

from dictembed.errors import DictEmbedError
from dictembed.geometry import (
    isotropy_metrics,
    mean_pairwise_cosine,
    partition_ratio,
    plot_entry_spaces,
    plot_isotropy,
    project_2d,
    top_pc_share,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(42)


def _rank2(rng: np.random.Generator, n: int = 60, d: int = 12) -> np.ndarray:
    """A rank-2 matrix with a common offset (so centring would change its geometry)."""
    coefficients = rng.normal(size=(n, 2)) + np.array([4.0, 0.0])
    return coefficients @ rng.normal(size=(2, d))


# --- projections -------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 12])  # numpy path (dim <= 2) and TruncatedSVD path
def test_svd_of_rank2_matrix_preserves_geometry(rng: np.random.Generator, d: int) -> None:
    x = _rank2(rng, d=d)
    projected = project_2d(x, "svd")
    assert projected.shape == (60, 2)
    np.testing.assert_allclose(pdist(projected), pdist(x), rtol=1e-8, atol=1e-8)
    # Uncentred: distances to the origin are kept too, which a centred projection would not do.
    np.testing.assert_allclose(np.linalg.norm(projected, axis=1), np.linalg.norm(x, axis=1), rtol=1e-8)


def test_svd_pads_a_one_dimensional_space(rng: np.random.Generator) -> None:
    x = rng.normal(size=(5, 1))
    projected = project_2d(x, "svd")
    np.testing.assert_allclose(np.abs(projected[:, 0]), np.abs(x[:, 0]))
    np.testing.assert_array_equal(projected[:, 1], 0.0)


def test_whitened_pca_has_zero_mean_unit_variance_and_no_correlation(rng: np.random.Generator) -> None:
    x = rng.normal(size=(200, 8)) * np.array([10, 3, 1, 1, 1, 1, 1, 1]) + 7.0
    projected = project_2d(x, "pca_whitened")
    assert projected.shape == (200, 2)
    np.testing.assert_allclose(projected.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(projected.std(axis=0, ddof=1), 1.0, rtol=1e-10)
    np.testing.assert_allclose(np.corrcoef(projected.T)[0, 1], 0.0, atol=1e-10)
    # The first axis follows the dominant direction (feature 0), whatever its sign.
    assert abs(np.corrcoef(projected[:, 0], x[:, 0])[0, 1]) > 0.95


def test_whitening_a_rank1_space_is_refused(rng: np.random.Generator) -> None:
    x = np.outer(rng.normal(size=30), [1.0, 2.0, 3.0])
    with pytest.raises(DictEmbedError, match="rank < 2"):
        project_2d(x, "pca_whitened")


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.ones(5), "2-D"),
        (np.array([[1.0, np.nan], [0.0, 1.0], [1.0, 1.0]]), "1 of 3 entry vectors contain NaN"),
        (np.ones((2, 3)), "at least 3 entries"),
    ],
)
def test_bad_matrices_raise_clear_errors(matrix: np.ndarray, message: str) -> None:
    with pytest.raises(DictEmbedError, match=message):
        project_2d(matrix, "pca_whitened")


def test_unknown_projection_is_named() -> None:
    with pytest.raises(DictEmbedError, match="'tsne'"):
        project_2d(np.eye(3), "tsne")  # type: ignore[arg-type]


# --- isotropy metrics --------------------------------------------------------------------------


def test_mean_cosine_by_hand() -> None:
    # Pairs: (1,0)-(0,1): 0; (1,0)-(1,1): 1/sqrt2; (0,1)-(1,1): 1/sqrt2.
    x = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]])
    assert mean_pairwise_cosine(x) == pytest.approx(math.sqrt(2) / 3, abs=1e-12)


def test_sampled_cosine_excludes_self_pairs_and_matches_exact(rng: np.random.Generator) -> None:
    two_orthogonal = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert mean_pairwise_cosine(two_orthogonal, sample=1000) == 0.0  # a self-pair would add 1
    x = rng.normal(size=(300, 5)) + 0.5
    exact = mean_pairwise_cosine(x)
    assert mean_pairwise_cosine(x, sample=40_000, seed=1) == pytest.approx(exact, abs=0.01)
    assert mean_pairwise_cosine(x, sample=500, seed=3) == mean_pairwise_cosine(x, sample=500, seed=3)


def test_identical_vectors(caplog: pytest.LogCaptureFixture) -> None:
    x = np.tile([3.0, 4.0], (10, 1))
    with caplog.at_level(logging.WARNING, logger="dictembed.geometry"):
        metrics = isotropy_metrics(x)
    assert metrics["mean_cosine"] == pytest.approx(1.0)
    assert math.isnan(metrics["top_pc_share"])
    assert "zero variance" in caplog.text
    # Eigenvectors: +-(0.6, 0.8) with Z = 10 e^{+-5}, and the orthogonal pair with Z = 10: I = e^-10.
    assert metrics["partition_ratio"] == pytest.approx(math.exp(-10), rel=1e-9)


def test_orthonormal_basis() -> None:
    d = 4
    metrics = isotropy_metrics(np.eye(d))
    assert metrics["mean_cosine"] == pytest.approx(0.0, abs=1e-12)
    # Z(e_i) = e + (d-1), Z(-e_i) = 1/e + (d-1).
    assert metrics["partition_ratio"] == pytest.approx((d - 1 + math.exp(-1)) / (d - 1 + math.e), rel=1e-9)
    assert metrics["top_pc_share"] == pytest.approx(1 / (d - 1))  # centred simplex: d-1 equal variances
    assert partition_ratio(np.vstack([np.eye(d), -np.eye(d)])) == pytest.approx(1.0, rel=1e-12)


def test_strongly_anisotropic_space(rng: np.random.Generator) -> None:
    direction = rng.normal(size=16)
    direction /= np.linalg.norm(direction)
    x = np.outer(rng.normal(5.0, 3.0, size=400), direction) + 0.01 * rng.normal(size=(400, 16))
    metrics = isotropy_metrics(x)
    assert metrics["top_pc_share"] > 0.999
    assert metrics["partition_ratio"] < 1e-3
    assert metrics["mean_cosine"] > 0.8
    assert metrics["n_entries"] == 400.0
    # The same number of points drawn isotropically scores the other way on all three.
    isotropic = isotropy_metrics(rng.normal(size=(400, 16)))
    assert isotropic["top_pc_share"] < 0.15
    assert isotropic["partition_ratio"] > 0.3
    assert abs(isotropic["mean_cosine"]) < 0.02


def test_partition_ratio_survives_huge_norms() -> None:
    # Z(+1) = e^800 + e^-799, Z(-1) = e^-800 + e^799: I = e^-1, though e^800 overflows a float.
    x = np.array([[800.0], [-799.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert partition_ratio(x) == pytest.approx(math.exp(-1), rel=1e-12)


def test_zero_vectors_are_counted_and_left_out_of_the_cosine(caplog: pytest.LogCaptureFixture) -> None:
    x = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [2.0, 0.1]])
    with caplog.at_level(logging.WARNING, logger="dictembed.geometry"):
        metrics = isotropy_metrics(x)
    assert metrics["n_zero_vectors"] == 1.0
    assert "excluded 1 zero vectors of 4" in caplog.text
    assert metrics["mean_cosine"] == pytest.approx(mean_pairwise_cosine(x[[0, 2, 3]]))
    assert top_pc_share(x) == pytest.approx(top_pc_share(x.copy()))


# --- figures -----------------------------------------------------------------------------------


def _read_png(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return matplotlib.image.imread(path)


def test_plot_entry_spaces_writes_one_panel_per_space(tmp_path: Path, rng: np.random.Generator) -> None:
    spaces = {"step 1": rng.normal(size=(80, 6)) + 3.0, "ICA": rng.normal(size=(50, 6))}
    paths = plot_entry_spaces(spaces, tmp_path / "figs", prefix="toy", max_points=20, seed=0)
    assert [p.name for p in paths] == ["toy_svd.png", "toy_pca_whitened.png"]
    for path in paths:
        image = _read_png(path)
        assert image.shape[:2] == (round(4.6 * 110), round(2 * 4.2 * 110))  # two panels side by side
        assert image[..., :3].std() > 0.05  # something was drawn
    # Subsampling is seeded: same seed, same picture; another seed draws other points.
    again = plot_entry_spaces(spaces, tmp_path / "again", prefix="toy", max_points=20, seed=0)
    other = plot_entry_spaces(spaces, tmp_path / "other", prefix="toy", max_points=20, seed=1)
    assert again[0].read_bytes() == paths[0].read_bytes()
    assert other[0].read_bytes() != paths[0].read_bytes()


def test_plot_entry_spaces_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(DictEmbedError, match="no entry spaces"):
        plot_entry_spaces({}, tmp_path)
    with pytest.raises(DictEmbedError, match="'broken'"):
        plot_entry_spaces({"broken": np.ones((4, 3, 2))}, tmp_path)


def test_plot_isotropy_writes_png_and_json(tmp_path: Path, rng: np.random.Generator) -> None:
    metrics = {
        "step 1": isotropy_metrics(rng.normal(size=(40, 5)) + 2.0),
        "step 2": isotropy_metrics(rng.normal(size=(40, 5))),
        "constant": isotropy_metrics(np.ones((5, 3))),
    }
    path = plot_isotropy(metrics, tmp_path, prefix="iso")
    assert path == tmp_path / "iso.png"
    image = _read_png(path)
    assert image.shape[0] == round(3.8 * 110) and image.shape[1] >= 9 * 110
    saved = json.loads((tmp_path / "iso.json").read_text())
    assert saved["step 1"] == pytest.approx(metrics["step 1"])
    assert saved["constant"]["top_pc_share"] is None  # NaN becomes JSON null, not an invalid token


def test_plot_isotropy_names_missing_metrics(tmp_path: Path) -> None:
    with pytest.raises(DictEmbedError, match="'step 1' lack partition_ratio"):
        plot_isotropy({"step 1": {"mean_cosine": 0.1, "top_pc_share": 0.2}}, tmp_path)
