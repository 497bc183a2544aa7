"""Variance: every feature ranked by its variance, the baseline every user knows.

scikit-learn's ``VarianceThreshold`` and River's ``stats.Var`` rank (or filter) features by
their variance; a feature that barely varies carries little information for any learner. Here
it is streamed exactly, per feature, over row chunks dense or sparse
(``service.algorithms.moments``):

* per chunk ``b`` (``n_b`` rows): its mean and its sum of squared deviations ``M2_b`` in two
  stable passes (for sparse rows, ``M2_b = sum over stored values of (x - mean)^2 + (n_b -
  stored) * mean^2``, so zeros are never materialised);
* folded into the statistics ``(n, mean, M2)`` by Chan, Golub & LeVeque's pairwise update
  ("Updating formulae and a pairwise algorithm for computing sample variances", 1979, eq. 2.1;
  Welford's 1962 update is its one-row case)::

      n = n_a + n_b,  delta = mean_b - mean_a,
      mean = mean_a + delta n_b / n,  M2 = M2_a + M2_b + delta^2 n_a n_b / n;

* the score is ``M2 / (n - ddof)`` (``ddof = 0``: the population variance, as scikit-learn's
  ``VarianceThreshold``; ``ddof = 1``: the sample variance, as River).

The same update merges two selectors' statistics exactly (``plus``), and solved for its second
part takes a subsample's out of the whole stream's (``minus``); the result is independent of
how rows were chunked or coalesced, up to rounding.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from service.algorithms.base import MAX_ABS_VALUE, ChunkKind, Matrix, State
from service.algorithms.examples import Example
from service.algorithms.moments import Moments, chunk_moments, combine, grouped_moments, separate
from service.algorithms.statistics import StatisticsMethod
from service.algorithms.subsamples import ResampledParams
from service.errors import Inconsistent

__all__ = ["Variance", "VarianceParams"]


class VarianceParams(ResampledParams):
    """Per-feature variance, streamed exactly (Chan, Golub & LeVeque 1979)."""

    method: ClassVar[str] = "variance"

    ddof: int = Field(0, ge=0, le=1, description="0: population variance; 1: sample variance.")


def _moments(statistics: State) -> Moments:
    count = statistics["count"]
    return (
        int(count) if isinstance(count, int | np.integer) else int(np.asarray(count)),
        np.asarray(statistics["mean"], dtype=np.float64),
        np.asarray(statistics["m2"], dtype=np.float64),
    )


def _statistics(moments: Moments) -> State:
    n, mean, m2 = moments
    return {"count": n, "mean": mean, "m2": m2}


class Variance(StatisticsMethod[VarianceParams]):
    """Per-feature variance over row chunks: the moments ``(n, mean, M2)`` folded by eq. 2.1,
    scored ``M2 / (n - ddof)``; exact for any chunking, mergeable.

    >>> import numpy as np
    >>> method = Variance()
    >>> params = method.resolve_params({"ddof": 1}, size=2)
    >>> state = method.update(method.initial_state(params), params, np.array([[1.0, 0], [3, 0]]))
    >>> method.weights(state, params).tolist()
    [2.0, 0.0]
    """

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
    statistics_fields: ClassVar[tuple[str, ...]] = ("mean", "m2")
    stability_estimate = (
        "the moments (count, mean, M2) of K interleaved subsamples of the rows: K - 1 stored "
        "(eq. 2.1 on their rows), the last the whole stream's minus theirs (eq. 2.1 solved for "
        "it); their spread scaled to resamples of every row seen"
    )

    def empty(self, params: VarianceParams) -> State:
        return {"count": 0, "mean": np.zeros(params.size), "m2": np.zeros(params.size)}

    def empty_sizes(self, params: VarianceParams) -> dict[str, int]:
        return {"mean": 8 * params.size, "m2": 8 * params.size}

    def fold(self, statistics: State, params: VarianceParams, chunk: Matrix) -> State:
        """Eq. 2.1 with the chunk's moments."""
        return _statistics(combine(_moments(statistics), chunk_moments(chunk)))

    def fold_dealt(
        self, statistics: list[State], params: VarianceParams, chunk: Matrix, dealt: np.ndarray
    ) -> list[State]:
        """Eq. 2.1 with the chunk's moments and with each subsample's rows', from one pass over
        the chunk's squared deviations (``grouped_moments``)."""
        whole, parts = grouped_moments(chunk, dealt, len(statistics) - 1)
        return [
            _statistics(combine(_moments(before), moments))
            for before, moments in zip(statistics, [whole, *parts], strict=True)
        ]

    def scores(self, statistics: State, params: VarianceParams) -> np.ndarray:
        n, _, m2 = _moments(statistics)
        return m2 / (n - params.ddof) if n > params.ddof else np.zeros_like(m2)

    def plus(self, statistics: State, params: VarianceParams, other: State) -> State:
        """Eq. 2.1 with the other statistics' moments."""
        return _statistics(combine(_moments(statistics), _moments(other)))

    def minus(self, whole: State, params: VarianceParams, part: State) -> State:
        """Eq. 2.1 solved for its second part (``moments.separate``)."""
        return _statistics(separate(_moments(whole), _moments(part)))

    def rows_of(self, statistics: State) -> int:
        return _moments(statistics)[0]

    def check(self, state: State, params: VarianceParams) -> None:
        """What eq. 2.1 can produce from rows within ``MAX_ABS_VALUE``: no moments before the
        first row, means within the values' range, ``M2`` between 0 and ``n (2
        MAX_ABS_VALUE)^2`` (each deviation is at most the range), and the variance ``M2 / (n -
        ddof)`` of those moments where the state holds it."""
        n, mean, m2 = _moments(state)
        variance = state.get(self.score_field)
        if n < 0 or (n == 0 and (mean.any() or m2.any() or np.asarray(variance).any())):
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
        expected = self.scores(state, params)
        if variance is not None and not np.allclose(
            np.asarray(variance, dtype=np.float64), expected, rtol=1e-9, atol=0.0
        ):
            raise Inconsistent(
                "a variance state's variance is M2 / (count - ddof) of its own moments; this "
                "one's disagrees"
            )
