"""Per-feature moments ``(n, mean, M2)`` of row chunks, dense or sparse, and Chan, Golub &
LeVeque's pairwise update of them ("Updating formulae and a pairwise algorithm for computing
sample variances", 1979, eq. 2.1; Welford's 1962 update is its one-row case), forwards
(``combine``) and solved for its second part (``separate``). The variance method is these
moments; OMVFS keeps them per view.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import Inconsistent

__all__ = ["Moments", "chunk_moments", "combine", "grouped_moments", "separate"]


Moments = tuple[int, np.ndarray, np.ndarray]


def chunk_moments(rows: Matrix) -> Moments:
    """``(n, mean, M2)`` of a chunk, per feature; sparse rows stay sparse."""
    return grouped_moments(rows, np.zeros(0, dtype=np.int64), 0)[0]


def grouped_moments(rows: Matrix, groups: np.ndarray, count: int) -> tuple[Moments, list[Moments]]:
    """``(n, mean, M2)`` of a chunk, and of its rows in each of groups ``0 .. count - 1``
    (``groups``: every row's group, or anything else for rows in none), in one pass over the
    chunk's squared deviations.

    The chunk's are the two passes (mean, then deviations). A group's shares them: with the
    chunk's mean ``c``, ``M2_g = sum_g (x - c)^2 - n_g (mean_g - c)^2``, exact in arithmetic
    (the parallel-axis identity behind eq. 2.1) and as accurate as a group's own two passes
    while ``mean_g`` is near ``c``, which a group of interleaved rows is (``(mean_g - c)^2`` is
    about ``M2_g / n``). So a group costs two weighted sums over the chunk, no copy of its rows.
    """
    n = int(rows.shape[0])
    if sp.issparse(rows):
        csr = sp.csr_matrix(rows, dtype=np.float64)
        csr.sum_duplicates()
        mean = np.asarray(csr.sum(axis=0)).ravel() / n
        deviations = (csr.data - mean[csr.indices]) ** 2
        stored = np.bincount(csr.indices, minlength=csr.shape[1])
        m2 = np.bincount(csr.indices, weights=deviations, minlength=csr.shape[1])
        whole = (n, mean, m2 + (n - stored) * mean**2)
        if not count:
            return whole, []
        of_entry = np.asarray(groups)[np.repeat(np.arange(n), np.diff(csr.indptr))]
        parts = []
        for g in range(count):
            n_g = int(np.count_nonzero(groups == g))
            entries = of_entry == g
            indices = csr.indices[entries]
            total = np.bincount(indices, weights=csr.data[entries], minlength=csr.shape[1])
            zeros = n_g - np.bincount(indices, minlength=csr.shape[1])
            around = (
                np.bincount(indices, weights=deviations[entries], minlength=csr.shape[1])
                + zeros * mean**2
            )
            parts.append(_around(n_g, total, around, mean))
        return whole, parts
    dense = np.asarray(rows, dtype=np.float64)
    mean = dense.mean(axis=0)
    squared = (dense - mean) ** 2
    whole = (n, mean, squared.sum(axis=0))
    if not count:
        return whole, []
    # Every group's sums and sums of squared deviations in two products over the chunk.
    members = (np.asarray(groups)[None, :] == np.arange(count)[:, None]).astype(np.float64)
    totals, arounds = members @ dense, members @ squared
    sizes = members.sum(axis=1)
    return whole, [_around(int(sizes[g]), totals[g], arounds[g], mean) for g in range(count)]


def _around(n: int, total: np.ndarray, around: np.ndarray, centre: np.ndarray) -> Moments:
    """A group's ``(n, mean, M2)`` from its sum and its sum of squared deviations from
    ``centre`` (``grouped_moments``); M2 clipped at 0, where rounding could take it below."""
    if n == 0:
        return 0, np.zeros_like(centre), np.zeros_like(centre)
    mean = total / n
    return n, mean, np.maximum(around - n * (mean - centre) ** 2, 0.0)


def combine(a: Moments, b: Moments) -> Moments:
    """Chan, Golub & LeVeque's pairwise update of ``(n, mean, M2)`` (eq. 2.1)."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    if n_a == 0:
        return n_b, mean_b.copy(), m2_b.copy()
    if n_b == 0:
        return n_a, mean_a.copy(), m2_a.copy()
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), m2_a + m2_b + delta**2 * (n_a * n_b / n)


def separate(whole: Moments, a: Moments) -> Moments:
    """The moments ``b`` of the rows of ``whole`` that are not in ``a``: eq. 2.1 solved for its
    second part (``combine(a, separate(whole, a)) == whole`` up to rounding)::

        n_b = n - n_a,   delta = (mean - mean_a) n / n_b,   mean_b = mean_a + delta,
        M2_b = M2 - M2_a - delta^2 n_a n_b / n = M2 - M2_a - (mean - mean_a)^2 n n_a / n_b.

    Numerically: ``mean - mean_a`` loses the digits the two means share, each known to a few
    ulps of ``|mean|``, and ``n / n_b`` (``K`` for balanced subsamples) scales that error; ``M2_b``
    is a difference of ``M2`` and ``M2_a``, so its error is a few ulps of ``M2`` (plus what ``M2``
    and ``M2_a`` carry from their own updates), i.e. relative to ``M2_b`` about ``n / n_b`` times
    theirs. Interleaved subsamples of ``n / K`` rows each keep ``M2_b`` near ``M2 / K``: no
    cancellation beyond a factor ``K``. Where the feature is constant (all three 0 up to
    rounding) the difference may come out a few ulps below 0: it is clipped to 0, which it is.
    """
    n, mean, m2 = whole
    n_a, mean_a, m2_a = a
    n_b = n - n_a
    if n_b < 0:
        raise Inconsistent(f"a part of {n_a} rows cannot be taken out of {n} rows")
    if n_b == 0:
        return 0, np.zeros_like(mean), np.zeros_like(m2)
    if n_a == 0:
        return n, np.array(mean, dtype=np.float64), np.array(m2, dtype=np.float64)
    shift = mean - mean_a
    mean_b = mean_a + shift * (n / n_b)
    m2_b = m2 - m2_a - shift**2 * (n * n_a / n_b)
    return n_b, mean_b, np.maximum(m2_b, 0.0)
