"""Random Fourier features (Rahimi & Recht, NIPS 2007 -- reference [24] of the FSDS paper).

``z(x) = sqrt(2 / D) * cos(x Omega + b)`` with ``Omega ~ N(0, 1 / bandwidth^2)`` (``m x D``) and
``b ~ U[0, 2 pi)`` gives ``E[z(x) . z(y)] = exp(-||x - y||^2 / (2 bandwidth^2))``.

FSDS section 5.1 uses "the same random projection basis and offset" at every timestep. The map
is therefore a pure function of ``(seed, m, D, bandwidth)``: it is regenerated from the seed
whenever needed and never stored in a selector's state, and a small per-process cache avoids
redrawing it for every chunk.
"""

from __future__ import annotations

import functools
import math
from numbers import Real
from typing import cast

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.algorithms.params import integer_param
from service.errors import InvalidInput, InvalidParams

__all__ = ["RandomFourierFeatures", "median_pairwise_distance"]


@functools.lru_cache(maxsize=4)
def _draws(seed: int, n_features: int, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal projection (``m x D``) and offsets (``D``) for one seed.

    The bandwidth only rescales the projection, so it is applied in :meth:`transform` and one
    cache entry serves every bandwidth. Entries are read-only because they are shared.
    At m = 1024, D = 512 an entry is 4 MB (m = 26k: 107 MB), hence the small cache.
    """
    rng = np.random.default_rng(seed)
    gaussian = rng.standard_normal((n_features, n_components))
    offset = rng.uniform(0.0, 2.0 * math.pi, size=n_components)
    gaussian.setflags(write=False)
    offset.setflags(write=False)
    return gaussian, offset


class RandomFourierFeatures:
    """The random Fourier feature map of the Gaussian kernel with the given bandwidth."""

    n_features: int
    n_components: int
    bandwidth: float
    seed: int

    def __init__(self, n_features: int, n_components: int, bandwidth: float, seed: int = 0):
        self.n_features = integer_param("n_features", n_features, 1)
        self.n_components = integer_param("n_components", n_components, 1)
        if (
            isinstance(bandwidth, bool)
            or not isinstance(bandwidth, Real)
            or not math.isfinite(float(bandwidth))
            or float(bandwidth) <= 0.0
        ):
            raise InvalidParams(f"bandwidth must be a finite number > 0; got {bandwidth!r}")
        self.bandwidth = float(bandwidth)
        self.seed = integer_param("seed", seed, 0)

    @property
    def omega(self) -> np.ndarray:
        """The projection ``Omega`` (``m x D``), entries ``N(0, 1 / bandwidth^2)``."""
        return _draws(self.seed, self.n_features, self.n_components)[0] / self.bandwidth

    @property
    def offset(self) -> np.ndarray:
        """The offsets ``b`` (``D``), uniform on ``[0, 2 pi)``."""
        return _draws(self.seed, self.n_features, self.n_components)[1]

    def transform(self, rows: Matrix) -> np.ndarray:
        """``z(x)`` for every row (dense ``n x D``); sparse rows are never densified."""
        if rows.ndim != 2 or rows.shape[1] != self.n_features:
            raise InvalidInput(
                f"rows must be 2-D with {self.n_features} columns; got shape {rows.shape}"
            )
        gaussian, offset = _draws(self.seed, self.n_features, self.n_components)
        if sp.issparse(rows):
            proj = np.asarray(sp.csr_matrix(rows, dtype=np.float64) @ gaussian)
        else:
            proj = np.asarray(rows, dtype=np.float64) @ gaussian
        proj *= 1.0 / self.bandwidth
        proj += offset
        np.cos(proj, out=proj)
        proj *= math.sqrt(2.0 / self.n_components)
        return proj

    def kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The exact Gaussian kernel this map approximates (for tests and diagnostics)."""
        sq = np.sum(a * a, axis=1)[:, None] + np.sum(b * b, axis=1)[None, :] - 2.0 * (a @ b.T)
        return np.asarray(np.exp(-np.maximum(sq, 0.0) / (2.0 * self.bandwidth**2)))


def median_pairwise_distance(rows: Matrix, max_rows: int = 1000) -> float:
    """Median Euclidean distance over pairs of the first ``max_rows`` rows (0.0 if < 2 rows).

    The usual bandwidth heuristic for the Gaussian kernel. Taking the *first* rows keeps it
    deterministic; distances come from one Gram product (sparse input stays sparse).
    """
    max_rows = integer_param("max_rows", max_rows, 1)
    head = rows[:max_rows]
    count = head.shape[0]
    if count < 2:
        return 0.0
    if sp.issparse(head):
        gram = cast(sp.csr_matrix, head @ head.T).toarray()
    else:
        head = np.asarray(head, dtype=np.float64)
        gram = head @ head.T
    sq_norms = np.diagonal(gram)
    sq = sq_norms[:, None] + sq_norms[None, :] - 2.0 * gram
    upper = sq[np.triu_indices(count, k=1)]
    return float(np.sqrt(max(float(np.median(upper)), 0.0)))
