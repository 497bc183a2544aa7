"""Feature weights from a sketch (steps 5-7 of Algorithm 2, eq. (5)), shared by the method and
the batch references."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.algorithms.sketching import (
    normalize_sparse_rows,
)

_EPS = float(np.finfo(np.float64).eps)


def normalize_rows(rows: Matrix) -> Matrix:
    """Every row scaled to unit L2 norm, zero rows left zero (section 3.1). Same kind as input."""
    if sp.issparse(rows):
        out = normalize_sparse_rows(sp.csr_matrix(rows))
        return out if isinstance(rows, sp.csr_matrix) else sp.csr_array(out)
    dense = np.array(rows, dtype=np.float64, copy=True)
    norms = np.sqrt(np.einsum("ij,ij->i", dense, dense))
    nonzero = norms > 0
    dense[nonzero] /= norms[nonzero, None]
    return dense


# The batch references take a ``normalize_rows`` flag, which shadows the function inside them.
_normalize = normalize_rows


def _dense(rows: Matrix) -> np.ndarray:
    if sp.issparse(rows):
        return np.asarray(cast(sp.csr_matrix, rows).toarray(), dtype=np.float64)
    return np.asarray(rows, dtype=np.float64)


def _ridge_terms(values: np.ndarray, sigma: np.ndarray, alpha: float) -> np.ndarray:
    """``|values_j| / (sigma_j^2 + alpha)`` row-wise, and 0 where ``sigma_j = 0`` (no 0/0)."""
    scale = np.zeros_like(sigma)
    positive = sigma > 0
    scale[positive] = 1.0 / (sigma[positive] ** 2 + alpha)
    return np.asarray(np.abs(values) * scale[:, None])


def _sketch_weights(
    sketch: np.ndarray, s_values: np.ndarray, k: int, exponent: float
) -> tuple[float, np.ndarray]:
    """Steps 5-7 on the sketch (Lemma 3.3 applied to eq. (5))."""
    alpha = float(2.0**exponent * s_values[k - 1])
    terms = _ridge_terms(sketch[:k], s_values[:k], alpha)
    return alpha, terms.max(axis=0)


def _top_left_vectors(mat: np.ndarray, k: int) -> np.ndarray:
    """Top-``k`` left singular vectors of ``mat``; columns with singular value ~0 are set to 0.

    A zero singular value has no well-defined vector (any null direction would do), so both the
    streaming and the batch kernel weights drop it instead of picking an arbitrary one.
    """
    gram = mat @ mat.T
    lam, vec = np.linalg.eigh(gram)
    lam, vec = lam[::-1][:k], vec[:, ::-1][:, :k]
    floor = _EPS * max(gram.shape[0], 1) * max(float(lam[0]) if lam.size else 0.0, 0.0)
    out = np.zeros((mat.shape[0], k))
    live = lam > floor
    out[:, : lam.size][:, live] = vec[:, live]
    return out


def _kernel_sketch_weights(
    sketch: np.ndarray, m: int, k: int, exponent: float
) -> tuple[float, np.ndarray]:
    """``X = S_Y^T (S_Y S_Y^T + alpha I)^+ P_k``, ``alpha = 2**i sigma_k(S_Y)``; ``w = max|X|``."""
    s_y, s_z = sketch[:, :m], sketch[:, m:]
    gram = s_y @ s_y.T
    lam, vec = np.linalg.eigh(gram)
    lam = np.maximum(lam[::-1], 0.0)
    vec = vec[:, ::-1]
    alpha = float(2.0**exponent * math.sqrt(lam[k - 1]))
    floor = _EPS * gram.shape[0] * max(float(lam[0]), 0.0)
    inv = np.zeros_like(lam)
    # Pseudo-inverse: with alpha = 0 (fewer than k rows seen) null directions are dropped.
    live = lam + alpha > floor
    inv[live] = 1.0 / (lam[live] + alpha)
    targets = _top_left_vectors(s_z, k)
    coef = vec @ (inv[:, None] * (vec.T @ targets))
    return alpha, np.abs(s_y.T @ coef).max(axis=1)
