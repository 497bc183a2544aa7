"""Per-class second moments of labelled rows: what OCFS's ``standardize`` scores read.

``standardize`` scales every feature by its pooled within-class standard deviation before
scoring it (docs/methods/ocfs-ioc.md). The pooled within-class variance of feature ``i`` is the
diagonal of the paper's within-class scatter (section 2.1),

    S_w^ii = 1/n sum_j sum_{x in class j} (x_i - m_j^i)^2 = 1/n sum_j M2_j^i,

so besides the class counts ``n_j`` and sums the state keeps every class's sum of squared
deviations from its own mean, ``M2_j`` (``c x m``, the field ``class_m2``). They are computed
as the variance method computes its moments (Chan, Golub & LeVeque, 1979, eq. 2.1), per class:

* per chunk, the class's mean and its ``M2`` in two stable passes (sparse rows: ``sum over
  stored values of (x - mean)^2 + (rows - stored) mean^2``, zeros never materialised);
* folded into the state by the pairwise update ``M2 = M2_a + M2_b + delta^2 n_a n_b / n`` with
  ``delta`` the difference of the two class means (the means are the class sums over counts);
  the same update merges two selectors, and solved for its second part it takes a subsample out
  of the whole stream (``separate_m2``).

The standardized score is then ``S_b^ii / S_w^ii``: exact for any chunking up to rounding,
unchanged by any rescaling ``x_i -> a x_i + b`` (``a != 0``) of a feature.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import MAX_ABS_VALUE, Matrix
from service.algorithms.labels import Tally
from service.errors import Inconsistent

__all__ = [
    "M2_FIELD",
    "WITHIN_FLOOR",
    "check_class_m2",
    "chunk_class_m2",
    "combine_m2",
    "separate_m2",
    "standardized_scores",
]

#: The state field holding every class's sum of squared deviations from its mean (``c x m``).
M2_FIELD = "class_m2"
#: The least within-class variance a standardized score divides by, as a share of the
#: feature's total variance ``S_b^ii + S_w^ii``: a feature constant within every class but not
#: across them separates the classes perfectly, and scores ``(S_b/S_t) / WITHIN_FLOOR`` (about
#: 1e12, above any feature with within-class spread) instead of infinity; a constant feature
#: scores 0.
WITHIN_FLOOR = 1e-12


def standardized_scores(counts: np.ndarray, sums: np.ndarray, m2: np.ndarray) -> np.ndarray:
    """``S_b^ii / max(S_w^ii, WITHIN_FLOOR * S_t^ii)`` from class counts, sums and ``M2``;
    0 where the feature does not vary at all (``S_t^ii = 0``) and before any row."""
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    n = counts.sum()
    size = sums.shape[1]
    if n == 0:
        return np.zeros(size)
    present = counts > 0
    means = sums[present] / counts[present, None]
    between = ((counts[present] / n)[:, None] * (means - sums.sum(axis=0) / n) ** 2).sum(axis=0)
    within = np.asarray(m2, dtype=np.float64).sum(axis=0) / n
    total = between + within
    scores = np.zeros(size)
    varies = total > 0
    scores[varies] = between[varies] / np.maximum(within, WITHIN_FLOOR * total)[varies]
    return scores


def chunk_class_m2(rows: Matrix, tally: Tally, counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """``M2`` (``c x m``) of the tally's rows of one chunk, per class, around each class's mean
    among them (``counts`` and ``sums``: their ``class_totals_of``): the second of two passes."""
    counts = np.asarray(counts, dtype=np.int64)
    c, m = counts.shape[0], int(rows.shape[1])
    at = np.arange(rows.shape[0]) if tally.among is None else np.asarray(tally.among, np.int64)
    if not c or not at.size:
        return np.zeros((c, m))
    codes = np.asarray(tally.codes)[at]
    means = np.asarray(sums, dtype=np.float64) / np.maximum(counts, 1)[:, None]
    if sp.issparse(rows):
        csr = sp.csr_matrix(rows, dtype=np.float64)
        csr = csr[at] if tally.among is not None else csr.copy()
        csr.sum_duplicates()
        entry_codes = codes[np.repeat(np.arange(at.size), np.diff(csr.indptr))]
        squared = (csr.data - means[entry_codes, csr.indices]) ** 2
        key = entry_codes * m + csr.indices
        m2 = np.bincount(key, weights=squared, minlength=c * m).reshape(c, m)
        stored = np.bincount(key, minlength=c * m).reshape(c, m)
        return np.asarray(m2 + (counts[:, None] - stored) * means**2)
    dense = np.asarray(rows, dtype=np.float64)
    if tally.among is not None:
        dense = dense[at]
    squared = np.subtract(dense, means[codes])
    np.square(squared, out=squared)  # in place: one array of the chunk's size, not two
    indicator = sp.csr_matrix(
        (np.ones(at.size), (np.arange(at.size), codes)), shape=(at.size, c), dtype=np.float64
    )
    return np.asarray(indicator.T @ squared)


def combine_m2(
    n_a: np.ndarray,
    sums_a: np.ndarray,
    m2_a: np.ndarray,
    n_b: np.ndarray,
    sums_b: np.ndarray,
    m2_b: np.ndarray,
) -> np.ndarray:
    """Eq. 2.1 for every class at once: the ``M2`` of classes ``a`` and ``b`` together (the
    same classes, in the same order; a class empty on one side takes the other's ``M2``)."""
    n_a = np.asarray(n_a, dtype=np.float64)[:, None]
    n_b = np.asarray(n_b, dtype=np.float64)[:, None]
    both = (n_a > 0) & (n_b > 0)
    n = np.where(both, n_a + n_b, 1.0)
    delta = np.where(both, sums_b / np.where(both, n_b, 1.0) - sums_a / np.where(both, n_a, 1.0), 0)
    return np.asarray(m2_a + m2_b + delta**2 * (n_a * n_b / n))


def separate_m2(
    n: np.ndarray,
    sums: np.ndarray,
    m2: np.ndarray,
    n_a: np.ndarray,
    sums_a: np.ndarray,
    m2_a: np.ndarray,
) -> np.ndarray:
    """Eq. 2.1 solved for its second part, per class: the ``M2`` of the rows of the whole
    (``n``, ``sums``, ``m2``) that part ``a`` has not seen. As ``moments.separate``: exact up
    to a few ulps of ``M2`` scaled by ``n / n_b``; clipped at 0 where rounding goes below it."""
    n = np.asarray(n, dtype=np.float64)[:, None]
    n_a = np.asarray(n_a, dtype=np.float64)[:, None]
    n_b = n - n_a
    both = (n_a > 0) & (n_b > 0)
    safe_a, safe_b = np.where(both, n_a, 1.0), np.where(both, n_b, 1.0)
    delta = np.where(both, (sums - sums_a) / safe_b - sums_a / safe_a, 0.0)
    rest = m2 - m2_a - delta**2 * (safe_a * safe_b / np.where(both, n, 1.0))
    rest = np.where(n_a > 0, rest, m2)
    return np.asarray(np.where(n_b > 0, np.maximum(rest, 0.0), 0.0))


def check_class_m2(counts: np.ndarray, m2: np.ndarray, sums_shape: tuple[int, ...]) -> None:
    """``Inconsistent`` unless ``M2`` could come from rows within ``MAX_ABS_VALUE``: one row per
    class like the sums, nonnegative, 0 for a class of fewer than two rows, at most
    ``n_j (2 MAX_ABS_VALUE)^2``."""
    counts = np.asarray(counts, dtype=np.int64)
    if m2.shape != sums_shape:
        raise Inconsistent(
            f"{M2_FIELD} has one row per class like the class sums {sums_shape}; got {m2.shape}"
        )
    if np.any(m2 < 0) or np.any(m2[counts < 2] != 0):
        raise Inconsistent(
            f"{M2_FIELD} (squared deviations from a class's mean) is nonnegative, and 0 for a "
            "class of fewer than two rows"
        )
    if np.any(m2 > counts[:, None] * (2 * MAX_ABS_VALUE) ** 2):
        raise Inconsistent(
            f"{M2_FIELD} of n rows within +-{MAX_ABS_VALUE:g} is at most n (2 x "
            f"{MAX_ABS_VALUE:g})^2"
        )
