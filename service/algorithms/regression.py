"""Univariate tests of a feature against a numeric target: scikit-learn's ``f_regression`` (the
F-test of a one-feature linear regression) and ``r_regression`` (Pearson's correlation), exact
on a stream of rows with a target (``TargetRows``).

Both are functions of the moments of the features and the target and of their co-moments,
which a stream keeps exactly for any chunking: ``n``, the means of every feature and of the
target, their sums of squared deviations ``M2`` and every feature's co-moment with the target
``C = sum (x - mean_x)(y - mean_y)``. Chan, Golub & LeVeque's pairwise update (1979, eq. 2.1,
``service.algorithms.moments``) folds a chunk's ``M2``, and its bivariate form folds the
co-moments (Pébay, "Formulas for robust, one-pass parallel computation of covariances", 2008,
eq. 3.17)::

    C = C_a + C_b + (mean_x,b - mean_x,a)(mean_y,b - mean_y,a) n_a n_b / n.

A chunk's own co-moment is ``X^T (y - mean_y) - mean_x sum (y - mean_y)``: sparse rows stay
sparse. Then, as scikit-learn (``center=True``)::

    r = C / sqrt(M2_x M2_y),   F = r^2 / (1 - r^2) (n - 2),   p = P(F_{1, n-2} > F).

With ``force_finite`` (scikit-learn's default), a feature or target with no spread has
``r = 0``, ``F = 0`` and ``p = 1``, and a perfect (anti-)correlation ``F`` the largest float and
``p = 0``; without it they are NaN and infinity, as scikit-learn's. ``r`` is clipped to
``[-1, 1]`` where rounding takes it past. scikit-learn computes ``M2_x`` as ``sum x^2 - n
mean^2``, which rounding may leave a few ulps from zero for a constant feature where the stable
``M2`` is exactly zero (and then divides the rounding of ``C`` by it: its ``r`` of a nonzero
constant feature may come out infinite); elsewhere the two agree to about 1e-12.

``correlation`` ranks by ``|r|`` (the strength of the linear relation, whatever its sign) and
keeps the signed ``r``; scikit-learn's ``SelectKBest(r_regression)`` ranks by the signed ``r``,
which keeps the most positive and drops the most negative.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field
from scipy import special

from service.algorithms.base import MAX_ABS_VALUE, ChunkKind, State
from service.algorithms.examples import Example
from service.algorithms.moments import (
    Moments,
    chunk_moments,
    combine,
    grouped_moments,
    separate,
)
from service.algorithms.subsamples import ResampledParams
from service.algorithms.targets import TargetRows
from service.algorithms.univariate import P_VALUES_FIELD, StatisticalTest
from service.errors import Inconsistent

__all__ = ["Correlation", "FRegression"]

#: ``(n, means, M2, co-moments)``: the means and M2 of every feature then of the target.
Joint = tuple[int, np.ndarray, np.ndarray, np.ndarray]
#: The state field of every feature's signed correlation with the target.
R_FIELD = "r"


def chunk_joint(chunk: TargetRows) -> Joint:
    """A chunk's moments of the features and the target, and its co-moments."""
    return _with_target(chunk, chunk_moments(chunk.rows))


def _with_target(chunk: TargetRows, moments: Moments) -> Joint:
    """The chunk's joint moments, from its features' ``moments``."""
    n, mean_x, m2_x = moments
    y = chunk.targets
    mean_y = float(y.mean())
    centred = y - mean_y
    rows = chunk.rows
    product = rows.T @ centred if sp.issparse(rows) else centred @ np.asarray(rows)
    m2_y = float(centred @ centred)
    comoment = np.asarray(product, dtype=np.float64).ravel() - mean_x * float(centred.sum())
    # A feature (or a target) constant in the chunk co-varies with nothing: exactly 0, not the
    # rounding of the two terms above.
    comoment[(m2_x == 0) | (m2_y == 0)] = 0.0
    return n, np.append(mean_x, mean_y), np.append(m2_x, m2_y), comoment


def grouped_joint(chunk: TargetRows, groups: np.ndarray, count: int) -> tuple[Joint, list[Joint]]:
    """A chunk's ``chunk_joint``, and that of its rows in each of groups ``0 .. count - 1``
    (``groups``: every row's group), from one product over the chunk: around the chunk's means
    ``c``, ``C_g = sum_g (x - c_x)(y - c_y) - n_g (mean_x,g - c_x)(mean_y,g - c_y)``, the
    bivariate form of ``moments.grouped_moments``' identity (as accurate while a group's means
    are near the chunk's, which interleaved rows' are)."""
    x_whole, x_parts = grouped_moments(chunk.rows, groups, count)
    whole = _with_target(chunk, x_whole)
    centre = whole[1]
    around = chunk.targets - centre[-1]
    member = np.asarray(groups)[:, None] == np.arange(count)[None, :]
    weighted = member * around[:, None]
    rows = chunk.rows
    products = np.asarray(rows.T @ weighted if sp.issparse(rows) else weighted.T @ rows)
    products = products.T if sp.issparse(rows) else products
    parts = []
    for g, (n_g, mean_x, m2_x) in enumerate(x_parts):
        if not n_g:
            parts.append((0, np.zeros(centre.size), np.zeros(centre.size), np.zeros(m2_x.size)))
            continue
        y_g = chunk.targets[member[:, g]]
        mean_y = float(y_g.mean())
        m2_y = float(((y_g - mean_y) ** 2).sum())
        shift_y = mean_y - centre[-1]
        comoment = (
            np.asarray(products[g]).ravel()
            - centre[:-1] * float(weighted[:, g].sum())
            - n_g * (mean_x - centre[:-1]) * shift_y
        )
        comoment[(m2_x == 0) | (m2_y == 0)] = 0.0
        parts.append((n_g, np.append(mean_x, mean_y), np.append(m2_x, m2_y), comoment))
    return whole, parts


def combine_joint(a: Joint, b: Joint) -> Joint:
    """Eq. 2.1 on the moments, and its bivariate form on the co-moments."""
    n_a, mean_a, _, c_a = a
    n_b, mean_b, _, c_b = b
    n, mean, m2 = combine(a[:3], b[:3])
    if not n_a or not n_b:
        return n, mean, m2, (c_b if not n_a else c_a).copy()
    delta = mean_b - mean_a
    return n, mean, m2, c_a + c_b + delta[:-1] * delta[-1] * (n_a * n_b / n)


def separate_joint(whole: Joint, a: Joint) -> Joint:
    """The moments and co-moments of the rows of ``whole`` not in ``a``: both updates solved
    for their second part (``moments.separate``)."""
    n, mean, _, c = whole
    n_a, mean_a, _, c_a = a
    n_b, mean_b, m2_b = separate(whole[:3], a[:3])
    if not n_b:
        return 0, mean_b, m2_b, np.zeros_like(c)
    if not n_a:
        return n_b, mean_b, m2_b, np.array(c, dtype=np.float64)
    shift = mean - mean_a
    return n_b, mean_b, m2_b, c - c_a - shift[:-1] * shift[-1] * (n * n_a / n_b)


def _joint(statistics: State) -> Joint:
    count = statistics["count"]
    return (
        int(count) if isinstance(count, int | np.integer) else int(np.asarray(count)),
        np.asarray(statistics["mean"], dtype=np.float64),
        np.asarray(statistics["m2"], dtype=np.float64),
        np.asarray(statistics["comoment"], dtype=np.float64),
    )


def _statistics(joint: Joint) -> State:
    n, mean, m2, comoment = joint
    return {"count": n, "mean": mean, "m2": m2, "comoment": comoment}


def pearson_r(statistics: State, force_finite: bool) -> np.ndarray:
    """Every feature's correlation with the target (0 where either has no spread, with
    ``force_finite``; else NaN)."""
    _, _, m2, comoment = _joint(statistics)
    spread = np.sqrt(m2[:-1] * m2[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.clip(comoment / spread, -1.0, 1.0)
    r[spread == 0] = np.nan
    if force_finite:
        r[np.isnan(r)] = 0.0
    return np.asarray(r, dtype=np.float64)


def f_test(statistics: State, r: np.ndarray, force_finite: bool) -> tuple[np.ndarray, np.ndarray]:
    """F of every feature's one-feature regression on the target, and its p-value."""
    degrees = _joint(statistics)[0] - 2
    squared = r**2
    with np.errstate(divide="ignore", invalid="ignore"):
        f = squared / (1 - squared) * degrees
        p = np.asarray(special.fdtrc(1.0, float(degrees), f), dtype=np.float64)
    if force_finite:
        f[np.isinf(f)] = np.finfo(np.float64).max
        undefined = np.isnan(f)
        f[undefined] = 0.0
        p[undefined] = 1.0
    return np.asarray(f, dtype=np.float64), p


def _force_finite() -> Any:
    return Field(
        True,
        description="As scikit-learn: a feature or target with no spread scores 0 (p-value 1), "
        "a perfect correlation the largest float (p-value 0); false: NaN and infinity.",
    )


class FRegressionParams(ResampledParams):
    """F and its p-values are exact (moments and co-moments)."""

    method: ClassVar[str] = "f_regression"
    unknown_hint: ClassVar[str] = " (the scores are exact)"

    force_finite: bool = _force_finite()


class CorrelationParams(ResampledParams):
    """r and its p-values are exact (moments and co-moments)."""

    method: ClassVar[str] = "correlation"
    unknown_hint: ClassVar[str] = " (the scores are exact)"

    force_finite: bool = _force_finite()


TT = TypeVar("TT", bound=ResampledParams)


class TargetTest(StatisticalTest[TT]):
    """A test of every feature against the target on the moments and co-moments."""

    name: str
    chunk_kind: ChunkKind = "rows with a target"
    statistics_fields: ClassVar[tuple[str, ...]] = ("mean", "m2", "comoment")
    describe_fields: tuple[str, ...] = ("mean", "m2")

    def empty(self, params: TT) -> State:
        size = params.size
        return _statistics((0, np.zeros(size + 1), np.zeros(size + 1), np.zeros(size)))

    def empty_sizes(self, params: TT) -> dict[str, int]:
        size = params.size
        return {"mean": 8 * (size + 1), "m2": 8 * (size + 1), "comoment": 8 * size}

    def fold(self, statistics: State, params: TT, chunk: TargetRows) -> State:
        return _statistics(combine_joint(_joint(statistics), chunk_joint(chunk)))

    def fold_dealt(
        self, statistics: list[State], params: TT, chunk: TargetRows, dealt: np.ndarray
    ) -> list[State]:
        """The chunk's moments and co-moments for the whole stream and for each subsample's
        rows, from one product over the chunk (``grouped_joint``)."""
        whole, parts = grouped_joint(chunk, dealt, len(statistics) - 1)
        return [
            _statistics(combine_joint(_joint(before), joint))
            for before, joint in zip(statistics, [whole, *parts], strict=True)
        ]

    def plus(self, statistics: State, params: TT, other: State) -> State:
        return _statistics(combine_joint(_joint(statistics), _joint(other)))

    def minus(self, whole: State, params: TT, part: State) -> State:
        return _statistics(separate_joint(_joint(whole), _joint(part)))

    def rows_of(self, statistics: State) -> int:
        return _joint(statistics)[0]

    def check(self, state: State, params: TT) -> None:
        """What the updates can produce from rows within ``MAX_ABS_VALUE``: no moments before
        the first row, means within the values' bound, ``M2`` nonnegative, and co-moments
        within Cauchy-Schwarz's bound ``sqrt(M2_x M2_y)``."""
        n, mean, m2, comoment = _joint(state)
        shapes = (mean.shape, m2.shape, comoment.shape)
        if shapes != ((params.size + 1,), (params.size + 1,), (params.size,)):
            raise Inconsistent(
                f"a {self.name} state of {params.size} features holds {params.size + 1} means "
                f"and M2 (the features', then the target's) and {params.size} co-moments; got "
                f"{[s[0] for s in shapes]}"
            )
        if n < 0 or (n == 0 and (mean.any() or m2.any() or comoment.any())):
            raise Inconsistent(f"a {self.name} state that counts no rows has zero moments")
        if np.any(np.abs(mean) > MAX_ABS_VALUE) or np.any(m2 < 0):
            raise Inconsistent(
                f"a {self.name} state's means lie within the values' bound ({MAX_ABS_VALUE:g}) "
                "and its squared deviations M2 are nonnegative"
            )
        # Up to rounding, which is a few ulps of the raw second moments.
        raw = (m2 + n * mean**2) * (1 + 1e-9)
        bound = np.sqrt(m2[:-1] * m2[-1]) + 1e-9 * np.sqrt(raw[:-1] * raw[-1])
        if np.any(np.abs(comoment) > bound):
            raise Inconsistent(
                f"a {self.name} state's co-moments are at most sqrt(M2_x M2_y) in size "
                "(Cauchy-Schwarz)"
            )
        super().check(state, params)

    def describe(self, state: State) -> dict[str, Any]:
        """The target's mean and (population) variance."""
        n = int(np.asarray(state["count"]))
        mean = np.asarray(state["mean"], dtype=np.float64)
        m2 = np.asarray(state["m2"], dtype=np.float64)
        return {"target": {"mean": float(mean[-1]), "variance": float(m2[-1] / n) if n else 0.0}}


class FRegression(TargetTest[FRegressionParams]):
    """scikit-learn's ``f_regression`` on rows with a target: the moments and co-moments,
    scored by F, with p-values.

    >>> import numpy as np
    >>> from service.algorithms.targets import TargetRows
    >>> method = FRegression()
    >>> params = method.resolve_params({}, size=2)
    >>> rows = TargetRows(np.array([[1.0, 0], [2, 1], [3, 0], [4, 1]]), np.array([1.0, 3, 2, 4]))
    >>> method.weights(method.update(method.initial_state(params), params, rows), params).round(3)
    array([3.556, 8.   ])
    """

    name = "f_regression"
    paper = (
        "The F-test of a one-feature linear regression (scikit-learn's f_regression), on Chan, "
        "Golub & LeVeque's moments (1979, eq. 2.1) and Pébay's co-moments (\"Formulas for "
        'robust, one-pass parallel computation of covariances", 2008, eq. 3.17)'
    )
    params_model = FRegressionParams
    examples: tuple[Example, ...] = (
        Example({"n_features": 4}, items=10),
        Example({"n_features": 4}, {"force_finite": False}, items=10),
    )
    score_field = "f"
    stability_estimate = (
        "the moments and co-moments of K interleaved subsamples of the rows (K - 1 stored, the "
        "last the whole stream's minus theirs), scored by F, their spread scaled to resamples "
        "of every row seen"
    )

    def statistic(self, statistics: State, params: FRegressionParams) -> np.ndarray:
        r = pearson_r(statistics, params.force_finite)
        return f_test(statistics, r, params.force_finite)[0]

    def p_values(
        self, statistics: State, statistic: np.ndarray, params: FRegressionParams
    ) -> np.ndarray:
        r = pearson_r(statistics, params.force_finite)
        return f_test(statistics, r, params.force_finite)[1]


class Correlation(TargetTest[CorrelationParams]):
    """scikit-learn's ``r_regression`` on rows with a target: the moments and co-moments,
    ranked by ``|r|``, with the signed ``r`` and the F-test's p-values.

    >>> import numpy as np
    >>> from service.algorithms.targets import TargetRows
    >>> method = Correlation()
    >>> params = method.resolve_params({}, size=2)
    >>> rows = TargetRows(np.array([[1.0, 1], [2, 0], [3, 1], [4, 0]]), np.array([1.0, 3, 2, 4]))
    >>> state = method.update(method.initial_state(params), params, rows)
    >>> state["r"].round(3), method.weights(state, params).round(3)
    (array([ 0.8  , -0.894]), array([0.8  , 0.894]))
    """

    name = "correlation"
    paper = (
        "Pearson's correlation of every feature with the target (scikit-learn's r_regression), "
        "on Chan, Golub & LeVeque's moments (1979, eq. 2.1) and Pébay's co-moments (2008, eq. "
        "3.17)"
    )
    params_model = CorrelationParams
    examples: tuple[Example, ...] = (Example({"n_features": 4}, items=10),)
    score_field = "abs_r"
    derived_fields: ClassVar[tuple[str, ...]] = (R_FIELD, P_VALUES_FIELD)
    stability_estimate = (
        "the moments and co-moments of K interleaved subsamples of the rows (K - 1 stored, the "
        "last the whole stream's minus theirs), ranked by |r|, their spread scaled to resamples "
        "of every row seen"
    )

    def statistic(self, statistics: State, params: CorrelationParams) -> np.ndarray:
        return pearson_r(statistics, params.force_finite)

    def scores(self, statistics: State, params: CorrelationParams) -> np.ndarray:
        return np.asarray(np.abs(self.statistic(statistics, params)))

    def p_values(
        self, statistics: State, statistic: np.ndarray, params: CorrelationParams
    ) -> np.ndarray:
        return f_test(statistics, statistic, params.force_finite)[1]

    def derive(self, statistics: State, scores: np.ndarray, params: CorrelationParams) -> State:
        r = self.statistic(statistics, params)
        return {R_FIELD: r, P_VALUES_FIELD: self.p_values(statistics, r, params)}
