"""Entry-space geometry: 2-D projections (DefSent+ Figures 1-2) and isotropy metrics.

An *entry space* is a matrix of entry vectors (n_entries x dim): the word vectors of an MLM head, or
the average definition embedding of each headword. DefSent+ compares such spaces across its
progressive-training steps by projecting each to 2-D with an uncentred SVD and with a whitened PCA.
The isotropy metrics summarise the same picture with three numbers per space.

Figures are drawn on bare ``matplotlib.figure.Figure`` objects (saved with the Agg canvas), so this
module never touches pyplot's global state or the user's interactive backend.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Literal

import numpy as np
from scipy.special import logsumexp
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.utils.extmath import svd_flip

from dictembed.errors import DictEmbedError
from dictembed.extras import require
from dictembed.io import atomic_file, atomic_write

logger = logging.getLogger(__name__)

ProjectionMethod = Literal["svd", "pca_whitened"]
PROJECTIONS: dict[ProjectionMethod, tuple[str, str]] = {
    "svd": ("uncentred SVD (top-2 right singular vectors)", "SV"),
    "pca_whitened": ("whitened PCA (centred, top-2 components at unit variance)", "whitened PC"),
}
METRICS: dict[str, str] = {
    "mean_cosine": "mean pairwise cosine",
    "top_pc_share": "variance share of top PC",
    "partition_ratio": "partition ratio I(W)",
}
_CHUNK_ROWS = 8192


def _as_matrix(matrix: np.ndarray, name: str = "matrix", min_rows: int = 2) -> np.ndarray:
    """Validate an entry space and return it as a float64 array."""
    x = np.asarray(matrix, dtype=np.float64)
    if x.ndim != 2:
        raise DictEmbedError(f"{name}: an entry space must be a 2-D array (n_entries x dim), got shape {x.shape}")
    if x.shape[0] < min_rows or x.shape[1] < 1:
        raise DictEmbedError(f"{name}: need at least {min_rows} entries with dim >= 1, got shape {x.shape}")
    bad = int(np.count_nonzero(~np.isfinite(x).all(axis=1)))
    if bad:
        raise DictEmbedError(f"{name}: {bad} of {x.shape[0]} entry vectors contain NaN or infinite values")
    return x


def _pca_solver(x: np.ndarray) -> str:
    """A deterministic exact PCA solver: the d x d covariance when n >= d, else a full SVD."""
    return "covariance_eigh" if x.shape[0] >= x.shape[1] else "full"


def project_2d(matrix: np.ndarray, method: ProjectionMethod) -> np.ndarray:
    """Project an entry space to 2-D (n x 2).

    ``"svd"``: uncentred projection onto the top-2 right singular vectors (X V_2 = U_2 S_2), as
    ``TruncatedSVD`` does; the origin stays put, so a common offset of all entries remains visible.
    ``"pca_whitened"``: centred PCA onto the top-2 components, each scaled to unit variance (ddof=1).
    Signs follow scikit-learn's deterministic ``svd_flip`` convention.
    """
    if method not in PROJECTIONS:
        raise DictEmbedError(f"unknown projection {method!r}; choose one of {', '.join(PROJECTIONS)}")
    x = _as_matrix(matrix, min_rows=3 if method == "pca_whitened" else 1)
    n, d = x.shape
    if method == "svd":
        if min(n, d) <= 2:  # TruncatedSVD needs k < dim; tiny problems are cheap with a full SVD
            u, s, vt = np.linalg.svd(x, full_matrices=False)
            u, _ = svd_flip(u, vt, u_based_decision=False)
            out = np.zeros((n, 2))
            out[:, : s.size] = (u * s)[:, :2]
            return out
        return TruncatedSVD(n_components=2, algorithm="arpack").fit_transform(x)
    if d < 2:
        raise DictEmbedError(f"whitened PCA needs dim >= 2, got shape {x.shape}")
    pca = PCA(n_components=2, whiten=True, svd_solver=_pca_solver(x)).fit(x)
    if pca.explained_variance_[1] <= 1e-12 * max(pca.explained_variance_[0], 1e-300):
        raise DictEmbedError(
            f"cannot whiten: the centred entry space (shape {x.shape}) has rank < 2 "
            f"(component variances {pca.explained_variance_.tolist()})"
        )
    return pca.transform(x)


def mean_pairwise_cosine(matrix: np.ndarray, sample: int | None = None, seed: int = 0) -> float:
    """Mean cosine similarity over pairs i != j; zero vectors are excluded (counted in a warning).

    With ``sample=None`` the mean is exact over all n(n-1) ordered pairs, computed in O(n d) from the
    identity sum_{i!=j} u_i.u_j = |sum_i u_i|^2 - n for unit vectors u_i. With ``sample=k`` it averages
    k pairs drawn uniformly (seeded) without self-pairs, matching the usual sampled estimate.
    """
    x = _as_matrix(matrix)
    norms = np.linalg.norm(x, axis=1)
    zero = norms == 0
    if zero.any():
        logger.warning("mean cosine: excluded %d zero vectors of %d", int(zero.sum()), x.shape[0])
    u = x[~zero] / norms[~zero, None]
    n = u.shape[0]
    if n < 2:
        return math.nan
    if sample is None:
        total = u.sum(axis=0)
        return float((total @ total - n) / (n * (n - 1)))
    if sample < 1:
        raise DictEmbedError(f"sample must be a positive number of pairs, got {sample}")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=sample)
    j = rng.integers(0, n - 1, size=sample)
    j = j + (j >= i)  # uniform over the n-1 indices other than i
    return float(np.einsum("ij,ij->i", u[i], u[j]).mean())


def top_pc_share(matrix: np.ndarray) -> float:
    """Share of the total variance carried by the first principal component (centred PCA).

    NaN (with a warning) when the entries have no variance at all, e.g. all vectors identical.
    """
    x = _as_matrix(matrix)
    if float(np.var(x, axis=0).sum()) <= 1e-24 * max(float(np.abs(x).max()) ** 2, 1e-300):
        logger.warning("top-PC share undefined: the %d entry vectors have zero variance", x.shape[0])
        return math.nan
    pca = PCA(n_components=1, svd_solver=_pca_solver(x)).fit(x)
    return float(pca.explained_variance_ratio_[0])


def partition_ratio(matrix: np.ndarray) -> float:
    """Partition-function isotropy I(W) = min_c Z(c) / max_c Z(c), Z(c) = sum_w exp(c . w).

    Following Mu & Viswanath (2018, "All-but-the-top") after Arora et al. (2016), c ranges over the
    unit eigenvectors of W^T W. An eigenvector's sign is arbitrary, so both c and -c are used (both
    are eigenvectors); this makes the value independent of the eigensolver's sign choice. Vectors are
    used as given (not normalised). Values near 1 mean an isotropic space, near 0 a strongly
    directional one.

    Numerically safe: exp(c . w) overflows for long vectors, so log Z(c) is computed with log-sum-exp
    (accumulated over row chunks to bound memory) and I(W) = exp(min log Z - max log Z), which
    underflows gracefully to 0 instead of giving inf/inf.
    """
    x = _as_matrix(matrix, min_rows=1)
    _, eigvecs = np.linalg.eigh(x.T @ x)
    directions = np.concatenate([eigvecs, -eigvecs], axis=1)
    log_z = np.full(directions.shape[1], -np.inf)
    for start in range(0, x.shape[0], _CHUNK_ROWS):
        chunk = x[start : start + _CHUNK_ROWS] @ directions
        log_z = np.logaddexp(log_z, logsumexp(chunk, axis=0))
    return float(np.exp(log_z.min() - log_z.max()))


def isotropy_metrics(matrix: np.ndarray, sample: int | None = None, seed: int = 0) -> dict[str, float]:
    """The three isotropy metrics of one entry space, plus its size.

    Keys: ``mean_cosine`` (see :func:`mean_pairwise_cosine`; ``sample`` pairs, or exact when None),
    ``top_pc_share`` (explained_variance_ratio_[0] of a centred PCA), ``partition_ratio`` (I(W), see
    :func:`partition_ratio`), ``n_entries`` and ``n_zero_vectors`` (excluded from the cosine mean).
    """
    x = _as_matrix(matrix)
    return {
        "mean_cosine": mean_pairwise_cosine(x, sample=sample, seed=seed),
        "top_pc_share": top_pc_share(x),
        "partition_ratio": partition_ratio(x),
        "n_entries": float(x.shape[0]),
        "n_zero_vectors": float(np.count_nonzero(~x.any(axis=1))),
    }


def _subsample(points: np.ndarray, max_points: int, rng: np.random.Generator) -> np.ndarray:
    """At most ``max_points`` rows, drawn without replacement (order kept)."""
    if points.shape[0] <= max_points:
        return points
    keep = np.sort(rng.choice(points.shape[0], size=max_points, replace=False))
    return points[keep]


def _check_spaces(spaces: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not spaces:
        raise DictEmbedError("no entry spaces to plot")
    return {name: _as_matrix(m, name=f"entry space {name!r}", min_rows=3) for name, m in spaces.items()}


def plot_entry_spaces(
    spaces: dict[str, np.ndarray],
    output_dir: str | Path,
    prefix: str = "entries",
    max_points: int = 5000,
    seed: int = 0,
) -> list[Path]:
    """Scatter each entry space in 2-D, one panel per named space, for both projections.

    Writes ``{prefix}_svd.png`` and ``{prefix}_pca_whitened.png`` in ``output_dir`` and returns their
    paths. Projections use every entry; only the drawn points are subsampled to ``max_points`` with a
    seeded RNG (each panel title says how many of how many are shown).
    """
    if max_points < 1:
        raise DictEmbedError(f"max_points must be positive, got {max_points}")
    checked = _check_spaces(spaces)
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for method, (description, axis_name) in PROJECTIONS.items():
        rng = np.random.default_rng(seed)
        fig = require("plot", "matplotlib.figure").Figure(figsize=(4.2 * len(checked), 4.6), layout="constrained")
        axes = fig.subplots(1, len(checked), squeeze=False)[0]
        for ax, (name, matrix) in zip(axes, checked.items(), strict=True):
            shown = _subsample(project_2d(matrix, method), max_points, rng)
            ax.scatter(shown[:, 0], shown[:, 1], s=3, alpha=0.3, linewidths=0, color="tab:blue")
            ax.set_aspect("equal", adjustable="datalim")
            ax.set_title(f"{name}\n({shown.shape[0]:,} of {matrix.shape[0]:,} entries shown)", fontsize=10)
            ax.set_xlabel(f"{axis_name} 1")
            ax.set_ylabel(f"{axis_name} 2")
            ax.grid(True, linewidth=0.3, alpha=0.5)
        fig.suptitle(f"Entry spaces: {description}")
        path = out_dir / f"{prefix}_{method}.png"
        with atomic_file(path) as f:  # a link at the name is replaced, never written through
            fig.savefig(f, dpi=110, format="png")
        paths.append(path)
    return paths


def figure_names(entries: str = "entries", isotropy: str = "isotropy") -> list[str]:
    """The files `plot_entry_spaces` and `plot_isotropy` write under these prefixes."""
    return [f"{entries}_{method}.png" for method in PROJECTIONS] + [f"{isotropy}.png", f"{isotropy}.json"]


def _json_safe(value: float) -> float | None:
    """Floats for JSON; NaN/inf become null (json.dumps would write invalid NaN tokens)."""
    value = float(value)
    return value if math.isfinite(value) else None


def plot_isotropy(metrics: dict[str, dict[str, float]], output_dir: str | Path, prefix: str = "isotropy") -> Path:
    """Bar charts of the three isotropy metrics across named spaces, plus ``{prefix}.json`` beside them.

    ``metrics`` maps a space name to the dict of :func:`isotropy_metrics`. Returns the PNG path.
    """
    if not metrics:
        raise DictEmbedError("no isotropy metrics to plot")
    for name, values in metrics.items():
        missing = [key for key in METRICS if key not in values]
        if missing:
            raise DictEmbedError(f"isotropy metrics of {name!r} lack {', '.join(missing)}")
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list(metrics)
    width = max(9.0, 1.4 * len(names) * len(METRICS))
    fig = require("plot", "matplotlib.figure").Figure(figsize=(width, 3.8), layout="constrained")
    axes = fig.subplots(1, len(METRICS), squeeze=False)[0]
    positions = np.arange(len(names))
    for ax, (key, label) in zip(axes, METRICS.items(), strict=True):
        heights = np.array([float(metrics[name][key]) for name in names])
        bars = ax.bar(positions, np.nan_to_num(heights), color="tab:blue", alpha=0.8)
        ax.bar_label(bars, labels=[f"{h:.3g}" if math.isfinite(h) else "n/a" for h in heights], fontsize=8)
        ax.set_xticks(positions, names, rotation=20, ha="right")
        ax.set_title(label, fontsize=10)
        ax.set_ylabel(label)
        finite = heights[np.isfinite(heights)]
        if key == "partition_ratio" and finite.size and finite.min() > 0 and finite.max() > 100 * finite.min():
            ax.set_yscale("log")  # I(W) spans orders of magnitude across training steps
        else:
            ax.axhline(0, color="black", linewidth=0.6)
        ax.margins(y=0.15)
    fig.suptitle("Isotropy of entry spaces (cosine/top-PC: lower is more isotropic; I(W): higher)")
    path = out_dir / f"{prefix}.png"
    with atomic_file(path) as f:
        fig.savefig(f, dpi=110, format="png")
    payload = {name: {k: _json_safe(v) for k, v in values.items()} for name, values in metrics.items()}
    atomic_write(out_dir / f"{prefix}.json", json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path
