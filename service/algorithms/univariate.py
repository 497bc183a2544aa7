"""Univariate tests of a feature against the class: scikit-learn's ``f_classif`` (ANOVA F) and
``chi2``, exact on a stream.

Both are functions of the class statistics OCFS keeps (``ClassStatisticsMethod``: the class
counts ``n_j`` and class sums ``S_j``, and for ANOVA every class's sum of squared deviations
``M2_j``, Chan, Golub & LeVeque 1979, eq. 2.1), so any chunking, merge or partition gives the
same scores up to rounding. With ``k`` classes seen and ``n`` rows:

* ANOVA F (one-way analysis of variance; Fisher 1925; scikit-learn's ``f_oneway``):
  ``SSB = sum_j n_j (S_j / n_j - S / n)^2``, ``SSW = sum_j M2_j``,
  ``F = (SSB / (k - 1)) / (SSW / (n - k))``, p = ``P(F_{k-1, n-k} > F)``;
* chi-squared (Pearson 1900, on the features as counts or frequencies, which must be
  nonnegative; scikit-learn's ``chi2``): observed ``O_j = S_j``, expected ``E_j = (n_j / n)
  sum_j S_j``, ``chi2 = sum_j (O_j - E_j)^2 / E_j``, p = ``P(chi2_{k-1} > chi2)``.

Where scikit-learn's answer is not a number, so is Sift's: a feature with no spread at all
(ANOVA: ``SSB = SSW = 0``; chi-squared: all zeros) or a stream of one class scores NaN (ranked
last, shown as null), and a feature constant within every class but not across them scores
infinity (ANOVA, p-value 0: it separates the classes perfectly). scikit-learn computes
``SSW`` as ``sum x^2 - sum_j S_j^2 / n_j``, which rounding may leave a few ulps from zero where
the stable ``M2`` is exactly zero; elsewhere the two agree to about 1e-12.

The p-values back scikit-learn's ``SelectFpr``, ``SelectFdr`` and ``SelectFwe`` (``significant``).
"""

from __future__ import annotations

from typing import ClassVar, Literal, TypeVar

import numpy as np
import scipy.sparse as sp
from scipy import special

from service.algorithms.base import State
from service.algorithms.class_moments import M2_FIELD
from service.algorithms.examples import Example
from service.algorithms.labels import COUNTS_FIELD, LabelledRows
from service.algorithms.ocfs import SUMS_FIELD, ClassStatisticsMethod
from service.algorithms.statistics import StatisticsMethod
from service.algorithms.subsamples import ResampledParams
from service.errors import Inconsistent, InvalidInput

__all__ = [
    "ANOVA",
    "P_VALUES_FIELD",
    "Chi2",
    "Correction",
    "StatisticalTest",
    "UnivariateTest",
    "significant",
]

#: The state field holding every feature's p-value.
P_VALUES_FIELD = "p_values"

#: How ``significant`` selects by p-value: as scikit-learn's ``SelectFpr`` (``none``),
#: ``SelectFdr`` (Benjamini-Hochberg) and ``SelectFwe`` (Bonferroni).
Correction = Literal["none", "fdr", "fwe"]


def significant(p_values: np.ndarray, alpha: float, correction: Correction) -> np.ndarray:
    """The features a test at level ``alpha`` selects (a boolean mask), as scikit-learn's
    ``SelectFpr`` (``p < alpha``), ``SelectFwe`` (``p < alpha / m``) and ``SelectFdr`` (the
    Benjamini-Hochberg procedure: ``p <= p_(i)`` for the largest ``i`` with ``p_(i) <= alpha i
    / m``). A NaN p-value is never selected."""
    p = np.asarray(p_values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        if correction == "none":
            return np.asarray(p < alpha)
        if correction == "fwe":
            return np.asarray(p < alpha / p.size)
        ordered = np.sort(p)
        passing = ordered[ordered <= alpha / p.size * np.arange(1, p.size + 1)]
        if not passing.size:
            return np.zeros(p.size, dtype=bool)
        return np.asarray(p <= passing.max())


def _present(statistics: State) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The counts, sums and (where kept) M2 of the classes with rows."""
    counts = np.asarray(statistics[COUNTS_FIELD], dtype=np.float64)
    sums = np.asarray(statistics[SUMS_FIELD], dtype=np.float64)
    present = counts > 0
    m2 = statistics.get(M2_FIELD)
    spread = np.asarray(m2, dtype=np.float64)[present] if m2 is not None else sums[:0]
    return counts[present], sums[present], spread


def _classes_seen(statistics: State) -> int:
    """``k``: the classes with rows."""
    return int(np.count_nonzero(np.asarray(statistics[COUNTS_FIELD]) > 0))


def anova_degrees(statistics: State) -> tuple[float, float]:
    """F's degrees of freedom, ``(k - 1, n - k)`` (``(0, 0)`` before any row)."""
    k = _classes_seen(statistics)
    n = int(np.asarray(statistics[COUNTS_FIELD]).sum())
    return (float(k - 1), float(n - k)) if k else (0.0, 0.0)


def anova_f(statistics: State) -> np.ndarray:
    """Every feature's F."""
    counts, sums, m2 = _present(statistics)
    k, n = counts.size, counts.sum()
    size = sums.shape[1]
    if not k:
        return np.full(size, np.nan)
    between = (counts[:, None] * (sums / counts[:, None] - sums.sum(axis=0) / n) ** 2).sum(axis=0)
    within = m2.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (between / (k - 1)) / (within / (n - k))
    return np.asarray(f, dtype=np.float64)


def chi_squared(statistics: State) -> np.ndarray:
    """Every feature's chi-squared statistic (``k - 1`` degrees of freedom)."""
    counts, observed, _ = _present(statistics)
    k = counts.size
    if not k:
        return np.full(observed.shape[1], np.nan)
    # scikit-learn's one-class stream: its label binarizer adds an empty class (0 / 0).
    expected = (counts / counts.sum())[:, None] * observed.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = ((observed - expected) ** 2 / expected).sum(axis=0)
    if k == 1:
        chi2 = np.full(observed.shape[1], np.nan)
    return np.asarray(chi2, dtype=np.float64)


class ANOVAParams(ResampledParams):
    """F and its p-values are exact (class counts, sums and M2)."""

    method: ClassVar[str] = "anova"
    unknown_hint: ClassVar[str] = " (the scores are exact)"


class Chi2Params(ResampledParams):
    """Chi-squared and its p-values are exact (class counts and sums)."""

    method: ClassVar[str] = "chi2"
    unknown_hint: ClassVar[str] = " (the scores are exact)"


TP = TypeVar("TP", bound=ResampledParams)


class StatisticalTest(StatisticsMethod[TP]):
    """A test of every feature on statistics that merge exactly: a subclass says its statistic
    and the p-values of it; the state keeps both (``TestsSignificance``), and whatever else
    ``derive`` gives."""

    derived_fields: ClassVar[tuple[str, ...]] = (P_VALUES_FIELD,)
    p_value_field = P_VALUES_FIELD
    p_value_fields: tuple[str, ...] = (P_VALUES_FIELD,)

    def statistic(self, statistics: State, params: TP) -> np.ndarray:
        """Every feature's statistic."""
        raise NotImplementedError

    def p_values(self, statistics: State, statistic: np.ndarray, params: TP) -> np.ndarray:
        """Every feature's p-value of its ``statistic``."""
        raise NotImplementedError

    def scores(self, statistics: State, params: TP) -> np.ndarray:
        return self.statistic(statistics, params)

    def derive(self, statistics: State, scores: np.ndarray, params: TP) -> State:
        return {P_VALUES_FIELD: self.p_values(statistics, scores, params)}

    def check(self, state: State, params: TP) -> None:
        """The statistics' rules, and scores and derived fields that are the test's of them
        (NaN where the test's are: the state's only values that need not be finite)."""
        super().check(state, params)
        if self.score_field not in state:
            return  # a subsample: statistics only
        expected = self.scored(self.statistics_of(state), params)
        for field in (self.score_field, *self.derived_fields):
            given = np.asarray(state[field], dtype=np.float64)
            wanted = np.asarray(expected[field], dtype=np.float64)
            if given.shape != wanted.shape or not np.allclose(
                given, wanted, rtol=1e-9, atol=0.0, equal_nan=True
            ):
                raise Inconsistent(
                    f"a {type(self).__name__} state's {field} are the test's of its "
                    "statistics; this one's disagree"
                )


class UnivariateTest(StatisticalTest[TP], ClassStatisticsMethod[TP]):
    """A test of every feature against the class on the class statistics."""


class ANOVA(UnivariateTest[ANOVAParams]):
    """scikit-learn's ``f_classif`` on labelled row chunks: the class counts, sums and ``M2``,
    scored by F, with p-values.

    >>> import numpy as np
    >>> from service.algorithms.labels import labelled
    >>> method = ANOVA()
    >>> params = method.resolve_params({}, size=2)
    >>> rows = labelled(np.array([[1.0, 5], [3, 6], [5, 5], [7, 6]]), ["a", "a", "b", "b"])
    >>> method.weights(method.update(method.initial_state(params), params, rows), params)
    array([8., 0.])
    """

    name = "anova"
    paper = (
        'Fisher, "Statistical Methods for Research Workers", 1925 (the one-way analysis of '
        "variance F): scikit-learn's f_classif, on Chan, Golub & LeVeque's moments (1979, eq. "
        "2.1)"
    )
    params_model = ANOVAParams
    examples: tuple[Example, ...] = (Example({"n_features": 4}, items=10),)
    score_field = "f"
    stability_estimate = (
        "the class counts, sums and M2 of K interleaved subsamples of the rows (K - 1 stored, "
        "the last the whole stream's minus theirs), scored by F, their spread scaled to "
        "resamples of every row seen"
    )

    def keeps_spread(self, params: ANOVAParams) -> bool:
        return True

    def statistic(self, statistics: State, params: ANOVAParams) -> np.ndarray:
        return anova_f(statistics)

    def p_values(self, statistics: State, statistic: np.ndarray, params: ANOVAParams) -> np.ndarray:
        dfb, dfw = anova_degrees(statistics)
        return np.asarray(special.fdtrc(dfb, dfw, statistic), dtype=np.float64)


class Chi2(UnivariateTest[Chi2Params]):
    """scikit-learn's ``chi2`` on labelled row chunks of nonnegative values: the class counts
    and sums, scored by chi-squared, with p-values.

    >>> import numpy as np
    >>> from service.algorithms.labels import labelled
    >>> method = Chi2()
    >>> params = method.resolve_params({}, size=2)
    >>> rows = labelled(np.array([[4.0, 1], [0, 1]]), ["a", "b"])
    >>> method.weights(method.update(method.initial_state(params), params, rows), params)
    array([4., 0.])
    """

    name = "chi2"
    paper = (
        'Pearson, "On the criterion that a given system of deviations ...", 1900 (the '
        "chi-squared statistic): scikit-learn's chi2, on class counts and sums"
    )
    params_model = Chi2Params
    examples: tuple[Example, ...] = (Example({"n_features": 4}, items=10, low=0.0),)
    score_field = "chi2"
    stability_estimate = (
        "the class counts and sums of K interleaved subsamples of the rows (K - 1 stored, the "
        "last the whole stream's minus theirs), scored by chi-squared, their spread scaled to "
        "resamples of every row seen"
    )

    def keeps_spread(self, params: Chi2Params) -> bool:
        return False

    def statistic(self, statistics: State, params: Chi2Params) -> np.ndarray:
        return chi_squared(statistics)

    def p_values(self, statistics: State, statistic: np.ndarray, params: Chi2Params) -> np.ndarray:
        df = max(_classes_seen(statistics) - 1, 1)
        return np.asarray(special.chdtrc(df, statistic), dtype=np.float64)

    def fold(self, statistics: State, params: Chi2Params, chunk: LabelledRows) -> State:
        """The class counts and sums with the chunk's folded in, if its values are counts."""
        self.refuse_values(chunk)
        return super().fold(statistics, params, chunk)

    def fold_dealt(
        self, statistics: list[State], params: Chi2Params, chunk: LabelledRows, dealt: np.ndarray
    ) -> list[State]:
        self.refuse_values(chunk)
        return super().fold_dealt(statistics, params, chunk, dealt)

    def refuse_values(self, chunk: LabelledRows) -> None:
        """InvalidInput naming the first negative value (row and feature), as scikit-learn's
        ``chi2`` refuses any."""
        rows = chunk.rows
        if sp.issparse(rows):
            csr = sp.csr_matrix(rows)
            negative = np.flatnonzero(csr.data < 0)
            if not negative.size:
                return
            at = int(negative[0])
            row = int(np.searchsorted(csr.indptr, at, side="right") - 1)
            feature, value = int(csr.indices[at]), float(csr.data[at])
        else:
            dense = np.asarray(rows)
            where = np.argwhere(dense < 0)
            if not where.size:
                return
            row, feature = (int(i) for i in where[0])
            value = float(dense[row, feature])
        raise InvalidInput(
            f"chi2 takes nonnegative values (counts or frequencies); got {value:g} at row {row}, "
            f"feature {feature}"
        )

    def check(self, state: State, params: Chi2Params) -> None:
        if np.any(np.asarray(state[SUMS_FIELD]) < 0):
            raise Inconsistent("a chi2 state's class sums are of nonnegative values")
        super().check(state, params)
