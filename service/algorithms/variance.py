"""Variance: every feature ranked by its variance, the baseline every user knows.

scikit-learn's ``VarianceThreshold`` and River's ``stats.Var`` rank (or filter) features by
their variance; a feature that barely varies carries little information for any learner. Here
it is streamed exactly, per feature, over row chunks dense or sparse:

* per chunk ``b`` (``n_b`` rows): its mean and its sum of squared deviations ``M2_b`` in two
  stable passes (for sparse rows, ``M2_b = sum over stored values of (x - mean)^2 + (n_b -
  stored) * mean^2``, so zeros are never materialised);
* folded into the state ``(n, mean, M2)`` by Chan, Golub & LeVeque's pairwise update ("Updating
  formulae and a pairwise algorithm for computing sample variances", 1979, eq. 2.1; Welford's
  1962 update is its one-row case)::

      n = n_a + n_b,  delta = mean_b - mean_a,
      mean = mean_a + delta n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n;

* the score is ``M2 / (n - ddof)`` (``ddof = 0``: the population variance, as scikit-learn's
  ``VarianceThreshold``; ``ddof = 1``: the sample variance, as River).

The same update merges two selectors' states exactly (``Mergeable``), and makes the result
independent of how rows were chunked or coalesced, up to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms.base import MAX_ABS_VALUE, ChunkKind, Matrix, State
from service.algorithms.examples import Example
from service.algorithms.resampling import ResampledMergeable
from service.algorithms.subsamples import ResampledParams
from service.errors import Inconsistent

__all__ = ["Variance", "chunk_moments", "combine", "grouped_moments", "separate"]


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
    parts = []
    for g in range(count):
        member = (groups == g).astype(np.float64)
        parts.append(_around(int(member.sum()), member @ dense, member @ squared, mean))
    return whole, parts


def _around(n: int, total: np.ndarray, around: np.ndarray, centre: np.ndarray) -> Moments:
    """A group's ``(n, mean, M2)`` from its sum and its sum of squared deviations from
    ``centre`` (``grouped_moments``); M2 clipped at 0, where rounding could take it below."""
    if n == 0:
        return 0, np.zeros_like(centre), np.zeros_like(centre)
    mean = total / n
    return n, mean, np.maximum(around - n * (mean - centre) ** 2, 0.0)


def combine(
    a: tuple[int, np.ndarray, np.ndarray], b: tuple[int, np.ndarray, np.ndarray]
) -> tuple[int, np.ndarray, np.ndarray]:
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


def separate(
    whole: tuple[int, np.ndarray, np.ndarray], a: tuple[int, np.ndarray, np.ndarray]
) -> tuple[int, np.ndarray, np.ndarray]:
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


class VarianceParams(ResampledParams):
    """Per-feature variance, streamed exactly (Chan, Golub & LeVeque 1979)."""

    method: ClassVar[str] = "variance"

    ddof: int = Field(0, ge=0, le=1, description="0: population variance; 1: sample variance.")


def _moment_state(moments: tuple[int, np.ndarray, np.ndarray]) -> State:
    n, mean, m2 = moments
    return {"count": n, "mean": mean, "m2": m2}


def _check_moments(n: int, mean: np.ndarray, m2: np.ndarray) -> None:
    """What eq. 2.1 can produce from rows within ``MAX_ABS_VALUE`` (``check_consistency``)."""
    if n < 0 or (n == 0 and (mean.any() or m2.any())):
        raise Inconsistent("a variance state that counts no rows has zero moments")
    if np.any(np.abs(mean) > MAX_ABS_VALUE) or np.any(m2 < 0):
        raise Inconsistent(
            f"a variance state's means lie within the values' bound ({MAX_ABS_VALUE:g}) and "
            "its squared deviations M2 are nonnegative"
        )
    if np.any(m2 > n * (2 * MAX_ABS_VALUE) ** 2):
        raise Inconsistent(
            f"M2 of {n} rows within +-{MAX_ABS_VALUE:g} is at most n (2 x {MAX_ABS_VALUE:g})^2"
        )


def _moments(state: State) -> tuple[int, np.ndarray, np.ndarray]:
    count = state["count"]
    return (
        int(count) if isinstance(count, int | np.integer) else int(np.asarray(count)),
        np.asarray(state["mean"], dtype=np.float64),
        np.asarray(state["m2"], dtype=np.float64),
    )


class Variance(ResampledMergeable[VarianceParams]):
    """Per-feature variance over row chunks; exact for any chunking, mergeable."""

    name = "variance"
    paper = (
        'Chan, Golub & LeVeque, "Updating Formulae and a Pairwise Algorithm for Computing '
        "Sample Variances\", 1979 (eq. 2.1): the baseline of scikit-learn's VarianceThreshold "
        "and River's stats.Var"
    )
    chunk_kind: ChunkKind = "rows"
    params_model = VarianceParams
    examples: tuple[Example, ...] = (
        Example({"n_features": 5}, items=9),
        Example({"n_features": 5}, {"ddof": 1}),
    )
    score_field = "variance"
    #: ``Mergeable``: another selector's moments combine exactly.
    summary_fields: tuple[str, ...] = ("mean", "m2")
    stability_estimate = (
        "the moments (count, mean, M2) of K interleaved subsamples of the rows: K - 1 stored "
        "(eq. 2.1 on their rows), the last the whole stream's minus theirs (eq. 2.1 solved for "
        "it); their spread scaled to resamples of every row seen"
    )
    #: Moments add exactly (eq. 2.1): the last subsample is the whole stream's minus the others.
    subsample_fields: ClassVar[tuple[str, ...]] = ("mean", "m2")
    derives_last = True
    derived_from: ClassVar[tuple[str, ...]] = ("mean", "m2")

    def core_initial_state(self, params: VarianceParams) -> State:
        return {
            "count": 0,
            "mean": np.zeros(params.size),
            "m2": np.zeros(params.size),
            "variance": np.zeros(params.size),
        }

    def core_state_sizes(self, params: VarianceParams) -> dict[str, int]:
        return {"mean": 8 * params.size, "m2": 8 * params.size, "variance": 8 * params.size}

    def core_update(self, state: State, params: VarianceParams, chunk: Matrix) -> State:
        return self._state(combine(_moments(state), chunk_moments(chunk)), params)

    def core_merge(self, state: State, params: VarianceParams, summary: State) -> State:
        return self._state(combine(_moments(state), _moments(summary)), params)

    # -- the subsamples: their moments (count, mean, M2), no variance field ----------------

    def subsample_initial_state(self, params: VarianceParams) -> State:
        return {"count": 0, "mean": np.zeros(params.size), "m2": np.zeros(params.size)}

    def subsample_state_sizes(self, params: VarianceParams) -> dict[str, int]:
        return {"mean": 8 * params.size, "m2": 8 * params.size}

    def update_with_subsamples(
        self,
        state: State,
        subsamples: list[State],
        params: VarianceParams,
        chunk: Matrix,
        dealt: np.ndarray,
    ) -> tuple[State, list[State]]:
        """Eq. 2.1 with the chunk's moments for the whole stream, and with each stored
        subsample's rows' for it, from one pass over the chunk (``grouped_moments``)."""
        moments, parts = grouped_moments(chunk, dealt, len(subsamples))
        return self._state(combine(_moments(state), moments), params), [
            _moment_state(combine(_moments(subsample), part))
            for subsample, part in zip(subsamples, parts, strict=True)
        ]

    def subsample_scores(self, subsample: State, params: VarianceParams) -> np.ndarray:
        return np.asarray(self._state(_moments(subsample), params)["variance"])

    def subsample_rows(self, subsample: State) -> int:
        return _moments(subsample)[0]

    def subsample_check(self, subsample: State, params: VarianceParams) -> None:
        _check_moments(*_moments(subsample))

    def subsample_merge(self, subsample: State, params: VarianceParams, other: State) -> State:
        return _moment_state(combine(_moments(subsample), _moments(other)))

    def subsample_of_whole(self, whole: State, params: VarianceParams) -> State:
        return _moment_state(_moments(whole))

    def subsample_unmerge(self, whole: State, params: VarianceParams, part: State) -> State:
        return _moment_state(separate(_moments(whole), _moments(part)))

    def summary_samples(self, summary: State) -> int:
        return _moments(summary)[0]

    def merge_refusal(self, params: VarianceParams) -> str | None:
        return None  # sums and moments merge for every setting

    def weights(self, state: State, params: VarianceParams) -> np.ndarray:
        return np.array(state["variance"], dtype=np.float64)

    def core_check_consistency(
        self,
        state: State,
        params: VarianceParams,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: what eq. 2.1 can produce from rows within ``MAX_ABS_VALUE``: no
        moments before the first row, means within the values' range, ``M2`` between 0 and
        ``n (2 MAX_ABS_VALUE)^2`` (each deviation is at most the range), and the variance
        ``M2 / (n - ddof)`` of those moments."""
        n, mean, m2 = _moments(state)
        variance = np.asarray(state["variance"], dtype=np.float64)
        if n == 0 and variance.any():
            raise Inconsistent("a variance state that counts no rows has zero moments")
        _check_moments(n, mean, m2)
        expected = np.asarray(self._state((n, mean, m2), params)["variance"])
        if not np.allclose(variance, expected, rtol=1e-9, atol=0.0):
            raise Inconsistent(
                "a variance state's variance is M2 / (count - ddof) of its own moments; this "
                "one's disagrees"
            )

    def _state(self, moments: tuple[int, np.ndarray, np.ndarray], params: VarianceParams) -> State:
        n, mean, m2 = moments
        ddof = params.ddof
        variance = m2 / (n - ddof) if n > ddof else np.zeros_like(m2)
        return {"count": n, "mean": mean, "m2": m2, "variance": variance}
