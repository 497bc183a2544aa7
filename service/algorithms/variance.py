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
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms.base import MAX_ABS_VALUE, ChunkKind, Matrix, State
from service.algorithms.resampling import ResampledMergeable, ResampledParams
from service.errors import Inconsistent

__all__ = ["Variance", "chunk_moments", "combine"]


def chunk_moments(rows: Matrix) -> tuple[int, np.ndarray, np.ndarray]:
    """``(n, mean, M2)`` of a chunk, per feature; sparse rows stay sparse."""
    n = int(rows.shape[0])
    if sp.issparse(rows):
        csr = sp.csr_matrix(rows, dtype=np.float64)
        csr.sum_duplicates()
        mean = np.asarray(csr.sum(axis=0)).ravel() / n
        deviations = (csr.data - mean[csr.indices]) ** 2
        stored = np.bincount(csr.indices, minlength=csr.shape[1])
        m2 = np.bincount(csr.indices, weights=deviations, minlength=csr.shape[1])
        return n, mean, m2 + (n - stored) * mean**2
    dense = np.asarray(rows, dtype=np.float64)
    mean = dense.mean(axis=0)
    return n, mean, ((dense - mean) ** 2).sum(axis=0)


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


class VarianceParams(ResampledParams):
    """Per-feature variance, streamed exactly (Chan, Golub & LeVeque 1979)."""

    method: ClassVar[str] = "variance"

    ddof: int = Field(0, ge=0, le=1, description="0: population variance; 1: sample variance.")


def _moments(state: State) -> tuple[int, np.ndarray, np.ndarray]:
    count = state["count"]
    return (
        int(count) if isinstance(count, int | np.integer) else int(np.asarray(count)),
        np.asarray(state["mean"], dtype=np.float64),
        np.asarray(state["m2"], dtype=np.float64),
    )


class Variance(ResampledMergeable):
    """Per-feature variance over row chunks; exact for any chunking, mergeable."""

    name = "variance"
    paper = (
        'Chan, Golub & LeVeque, "Updating Formulae and a Pairwise Algorithm for Computing '
        "Sample Variances\", 1979 (eq. 2.1): the baseline of scikit-learn's VarianceThreshold "
        "and River's stats.Var"
    )
    chunk_kind: ChunkKind = "rows"
    params_model = VarianceParams
    score_field = "variance"
    #: ``Mergeable``: another selector's moments combine exactly.
    summary_fields: tuple[str, ...] = ("mean", "m2")
    stability_estimate = (
        "the moments (count, mean, M2) of each of K interleaved subsamples of the rows (eq. 2.1 "
        "on its rows), their spread scaled to resamples of every row seen"
    )

    def core_initial_state(self, params: Mapping[str, Any], size: int) -> State:
        return {
            "count": 0,
            "mean": np.zeros(size),
            "m2": np.zeros(size),
            "variance": np.zeros(size),
        }

    def core_state_sizes(self, params: Mapping[str, Any], size: int) -> dict[str, int]:
        return {"mean": 8 * size, "m2": 8 * size, "variance": 8 * size}

    def core_update(self, state: State, params: Mapping[str, Any], chunk: Matrix) -> State:
        return self._state(combine(_moments(state), chunk_moments(chunk)), params)

    def core_merge(self, state: State, params: Mapping[str, Any], summary: State) -> State:
        return self._state(combine(_moments(state), _moments(summary)), params)

    def summary_samples(self, summary: State) -> int:
        return _moments(summary)[0]

    def merge_refusal(self, params: Mapping[str, Any]) -> str | None:
        return None  # sums and moments merge for every setting

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        return np.array(state["variance"], dtype=np.float64)

    def core_check_consistency(
        self,
        state: State,
        params: Mapping[str, Any],
        size: int,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: what eq. 2.1 can produce from rows within ``MAX_ABS_VALUE``: no
        moments before the first row, means within the values' range, ``M2`` between 0 and
        ``n (2 MAX_ABS_VALUE)^2`` (each deviation is at most the range), and the variance
        ``M2 / (n - ddof)`` of those moments."""
        n, mean, m2 = _moments(state)
        variance = np.asarray(state["variance"], dtype=np.float64)
        if n == 0 and (mean.any() or m2.any() or variance.any()):
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
        expected = np.asarray(self._state((n, mean, m2), params)["variance"])
        if not np.allclose(variance, expected, rtol=1e-9, atol=0.0):
            raise Inconsistent(
                "a variance state's variance is M2 / (count - ddof) of its own moments; this "
                "one's disagrees"
            )

    def _state(
        self, moments: tuple[int, np.ndarray, np.ndarray], params: Mapping[str, Any]
    ) -> State:
        n, mean, m2 = moments
        ddof = VarianceParams.resolve(params, len(m2), stored=True).ddof
        variance = m2 / (n - ddof) if n > ddof else np.zeros_like(m2)
        return {"count": n, "mean": mean, "m2": m2, "variance": variance}
