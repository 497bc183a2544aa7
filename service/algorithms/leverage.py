"""Leverage-score numerics shared by OFS: the batch references and the factor updates.

Batch references (Wang, Shen & Li, "Provable Variable Selection for Streaming Features"):

* statistical leverage, eq. (3.1): ``l*_i = a_i^T (A A^T)^+ a_i``;
* ridge leverage, eq. (2.1):       ``l_i  = a_i^T (A A^T + lambda I)^-1 a_i``.

Both are read off the thin SVD ``A = U diag(s) V^T``:
``l_i = sum_j V_ij^2 s_j^2 / (s_j^2 + lambda)`` (with ``lambda = 0`` the sum runs over the
numerically nonzero ``s_j``, i.e. ``l*_i = ||V_k[i]||^2``).

Incremental factor algebra. Adding one column ``x = L p`` to a Gram ``G = L L^T`` (``L`` lower
triangular) gives ``G + x x^T = L (I + p p^T) L^T = (L M)(L M)^T`` where ``M`` is the Cholesky
factor of ``I + p p^T``. With ``t_0 = 1``, ``t_j = 1 + p_1^2 + ... + p_j^2`` it has the closed
form::

    M_jj = d_j = sqrt(t_j / t_{j-1}),  M_ij = p_i beta_j (i > j),  beta_j = p_j / sqrt(t_j t_{j-1})

and its inverse applied to a vector needs only one running sum (``rank_one_solve``)::

    (M^-1 y)_j = y_j / d_j - beta_j (p_1 y_1 + ... + p_{j-1} y_{j-1}).

So when ``W = L^-1 B`` is known for a block of columns, keeping a column only costs ``O(r)`` per
other column of the block (``W <- M^-1 W``) instead of a fresh triangular solve. ``M^-1 p = beta``
and ``p^T (I + p p^T)^-1 p = 1 - 1/t_r`` are the two identities the basis extension of OFS uses.
The factor itself is brought up to date once per block, for all kept columns at once, by the
LAPACK triangular-pentagonal QR ``dtpqrt`` of ``[L^T; V^T]`` (``cholesky_add_columns``, a rank-k
Cholesky update in ``O(r^2 k)``, backward stable: it is a product of Householder reflections).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.linalg.lapack import dtpqrt

__all__ = [
    "RankOneFactor",
    "batch_leverage_scores",
    "cholesky_add_columns",
    "rank_one_factor",
    "rank_one_solve",
]

_EPS = float(np.finfo(np.float64).eps)
#: Block size of the blocked Householder QR in ``dtpqrt`` (32 measured fastest for r = 200-2000).
_QR_BLOCK = 32


def batch_leverage_scores(A: np.ndarray, ridge: float = 0.0) -> np.ndarray:
    """Exact batch leverage of every column of ``A`` (``n x d``): eq. (3.1), or eq. (2.1) if
    ``ridge > 0``.

    With ``ridge = 0`` singular values below ``max(n, d) * eps * s_max`` count as zero (numpy's
    ``matrix_rank`` convention), so a rank-deficient ``A`` gets the pseudo-inverse scores and a
    zero column gets 0. The scores sum to the rank (``ridge = 0``) or to the effective dimension
    ``sum_j s_j^2 / (s_j^2 + ridge)``.
    """
    a = np.asarray(A, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"A must be a 2-D matrix (samples x features); got shape {a.shape}")
    if not np.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a finite number >= 0; got {ridge!r}")
    if a.size == 0:
        return np.zeros(a.shape[1])
    _, s, vt = np.linalg.svd(a, full_matrices=False)
    if ridge > 0:
        weight = s**2 / (s**2 + ridge)
    else:
        weight = (s > max(a.shape) * _EPS * (s[0] if s.size else 0.0)).astype(np.float64)
    scores = np.einsum("ji,j->i", vt**2, weight)
    scores[~np.any(a != 0, axis=0)] = 0.0  # exactly, not the ~1e-30 rounding leaves in vt
    return np.asarray(scores)


class RankOneFactor(NamedTuple):
    """``M = chol(I + p p^T)`` in closed form (module docstring)."""

    p: np.ndarray
    d: np.ndarray
    beta: np.ndarray
    #: ``t_r = 1 + ||p||^2``; ``1 / t_r = 1 - p^T (I + p p^T)^-1 p``.
    t_last: float


def rank_one_factor(p: np.ndarray) -> RankOneFactor:
    """The closed-form Cholesky factor of ``I + p p^T`` (``O(r)``)."""
    p = np.asarray(p, dtype=np.float64)
    t = 1.0 + np.cumsum(p * p)
    t_prev = np.empty_like(t)
    if t.size:
        t_prev[0] = 1.0
        t_prev[1:] = t[:-1]
    return RankOneFactor(
        p=p,
        d=np.sqrt(t / t_prev),
        beta=p / np.sqrt(t * t_prev),
        t_last=float(t[-1]) if t.size else 1.0,
    )


def rank_one_solve(m: RankOneFactor, y: np.ndarray) -> np.ndarray:
    """``M^-1 y`` for ``y`` of shape ``(r,)`` or ``(r, c)``, in ``O(r c)`` (module docstring)."""
    y = np.asarray(y, dtype=np.float64)
    if m.p.size == 0:
        return y.copy()
    if y.ndim == 1:
        return rank_one_solve(m, y[:, None])[:, 0]
    out = y / m.d[:, None]
    if m.p.size > 1:
        # Exclusive running sum sum_{k<j} p_k y_k, accumulated from small to large j.
        running = np.cumsum(m.p[:-1, None] * y[:-1], axis=0)
        out[1:] -= m.beta[1:, None] * running
    return np.asarray(out)


def cholesky_add_columns(lower: np.ndarray, coefs: np.ndarray) -> np.ndarray:
    """Lower ``L'`` with ``L' L'^T = pad(L L^T) + V V^T``, ``V = coefs`` (``r' x k``, ``r' >= r``).

    ``L`` (``r x r`` lower triangular) is zero-padded to ``r' x r'`` first: that is how a basis that
    grew by ``r' - r`` directions enters (each new direction must carry weight in some column of
    ``V``, otherwise ``L'`` is singular there). Computed as the R factor of the QR of
    ``[pad(L)^T; V^T]`` with LAPACK ``dtpqrt``, rows signed so the diagonal is >= 0. The inputs are
    not modified.
    """
    r = lower.shape[0]
    r_new, k = coefs.shape
    if r_new < r or lower.shape != (r, r):
        raise ValueError(f"cannot pad a {lower.shape} factor to {r_new} rows")
    if k == 0:
        out = np.zeros((r_new, r_new))
        out[:r, :r] = lower
        return out
    # -L^T instead of L^T: same Gram, and LAPACK's reflectors (beta = -sign(alpha) * norm) then
    # leave a positive diagonal wherever L had one, so only new (padded) rows need a sign flip.
    # The strictly lower part is never referenced by dtpqrt, so it stays zero.
    upper = np.zeros((r_new, r_new), order="F")
    upper[:r, :r] = -lower.T
    rows = np.array(coefs.T, order="F", dtype=np.float64)  # own copy: dtpqrt overwrites it
    upper, _, _, info = dtpqrt(0, max(1, min(_QR_BLOCK, r_new)), upper, rows, 1, 1)
    if info != 0:  # only for illegal arguments, which would be a bug here
        raise RuntimeError(f"LAPACK dtpqrt failed with info={info}")
    negative = np.flatnonzero(np.diag(upper) < 0)
    upper[negative] *= -1.0
    return np.ascontiguousarray(upper.T)  # F-ordered upper -> C-ordered lower, no copy
