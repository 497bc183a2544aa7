"""The batch references: Algorithm 1 GENFEATWEIGHT with p = 2, with the cosine affinity and
with the gaussian kernel's random features. Tests and the evaluation compare the streaming
method to them."""

from __future__ import annotations

import numpy as np

from service.algorithms.base import Matrix
from service.algorithms.fsds.weights import (
    _EPS,
    _dense,
    _normalize,
    _ridge_terms,
    _top_left_vectors,
)
from service.algorithms.kernels import RandomFourierFeatures


def gfw_p2_weights(
    rows: Matrix, k: int, alpha_exponent: float = 3.0, normalize_rows: bool = True
) -> np.ndarray:
    """GFW-p2: Algorithm 1 with p = 2 on all rows at once (exact SVD; Lemma 3.3).

    ``alpha = 2**i * sigma_k(Y)``; ``w_f = max_{j<=k} |u_fj| sigma_j / (sigma_j^2 + alpha)``.
    """
    y = _dense(_normalize(rows) if normalize_rows else rows)
    _, sigma, vt = np.linalg.svd(y, full_matrices=False)
    sigma = np.where(sigma > _EPS * max(y.shape) * (sigma[0] if sigma.size else 0.0), sigma, 0.0)
    sig_k = np.zeros(k)
    sig_k[: min(k, sigma.size)] = sigma[:k]
    top = np.zeros((k, y.shape[1]))
    top[: min(k, vt.shape[0])] = vt[:k]
    alpha = float(2.0**alpha_exponent * sig_k[k - 1])
    terms = _ridge_terms(top * sig_k[:, None], sig_k, alpha)
    return np.asarray(terms.max(axis=0))


def gfw_p2_kernel_weights(
    rows: Matrix,
    k: int,
    alpha_exponent: float,
    rff: RandomFourierFeatures,
    normalize_rows: bool = True,
) -> np.ndarray:
    """Exact batch Gaussian-kernel GFW-p2 (see the module docstring) on all rows.

    ``X = (Y Y^T + alpha I)^-1 Y V_k(Z)`` (paper orientation), ``Z = rff(Y)``,
    ``alpha = 2**i * sigma_k(Y)``, ``w = max_j |X_fj|``. Computed from the SVD ``Y = U S W^T``
    (rows orientation) as ``W diag(s / (s^2 + alpha)) U^T V_k(Z)``.
    """
    y = _dense(_normalize(rows) if normalize_rows else rows)
    z = rff.transform(y)
    u, sigma, vt = np.linalg.svd(y, full_matrices=False)
    sigma = np.where(sigma > _EPS * max(y.shape) * (sigma[0] if sigma.size else 0.0), sigma, 0.0)
    sig_k = float(sigma[k - 1]) if sigma.size >= k else 0.0
    alpha = 2.0**alpha_exponent * sig_k
    scale = np.zeros_like(sigma)
    positive = sigma > 0
    scale[positive] = sigma[positive] / (sigma[positive] ** 2 + alpha)
    targets = _top_left_vectors(z, k)  # V_k(Z) in the paper's orientation
    x = vt.T @ (scale[:, None] * (u.T @ targets))
    return np.asarray(np.abs(x).max(axis=1))
