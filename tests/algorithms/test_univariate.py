"""ANOVA F and chi-squared on a stream against scikit-learn's ``f_classif`` and ``chi2`` on the
same rows: any chunking, dense and sparse, merged and with subsamples taken out; the
undefined cases answer as scikit-learn does; p-value selections as its ``SelectFpr``,
``SelectFdr`` and ``SelectFwe``."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, load_wine
from sklearn.feature_selection import SelectFdr, SelectFpr, SelectFwe, chi2, f_classif

from service.algorithms import METHODS
from service.algorithms.base import check_state, order_by_score
from service.algorithms.labels import labelled
from service.algorithms.univariate import (
    ANOVA,
    P_VALUES_FIELD,
    Chi2,
    Correction,
    UnivariateTest,
    significant,
)
from service.errors import Inconsistent, InvalidInput

REFERENCES = {"anova": f_classif, "chi2": chi2}


def data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Wine (13 measurements, 3 cultivars) for ANOVA; digits (8 x 8 pixel counts, 10 digits)
    for chi-squared: both ship with scikit-learn."""
    x, y = load_wine(return_X_y=True) if name == "anova" else load_digits(return_X_y=True)
    return np.asarray(x, dtype=np.float64), np.asarray(y)


def streamed(name: str, x: Any, y: np.ndarray, cuts: list[int], **params: Any) -> dict[str, Any]:
    method = METHODS[name]
    resolved = method.resolve_params(params, x.shape[1])
    state = method.initial_state(resolved)
    bounds = [0, *cuts, x.shape[0]]
    for start, stop in itertools.pairwise(bounds):
        state = method.update(state, resolved, labelled(x[start:stop], y[start:stop].tolist()))
    check_state(method, state, resolved)
    return state


def reference(name: str, x: Any, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its constant-feature and 0/0 warnings
        scores, p = REFERENCES[name](x, y)
    return np.asarray(scores), np.asarray(p)


def assert_as_reference(state: dict[str, Any], name: str, x: Any, y: np.ndarray) -> None:
    scores, p = reference(name, x, y)
    field = METHODS[name].score_field
    np.testing.assert_allclose(state[field], scores, rtol=1e-9, atol=0, equal_nan=True)
    np.testing.assert_allclose(state[P_VALUES_FIELD], p, rtol=1e-9, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name", ["anova", "chi2"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cuts", [[], [1], [7, 8, 100], list(range(10, 170, 10))])
def test_scores_and_p_values_are_scikit_learns_for_any_chunking(
    name: str, sparse: bool, cuts: list[int]
) -> None:
    x, y = data(name)
    rows: Any = sp.csr_matrix(x) if sparse else x
    state = streamed(name, rows, y, cuts)
    assert_as_reference(state, name, x, y)


@pytest.mark.parametrize("name", ["anova", "chi2"])
def test_a_merge_and_a_subsample_taken_out_are_exact(name: str) -> None:
    method: UnivariateTest[Any] = ANOVA() if name == "anova" else Chi2()
    x, y = data(name)
    params = method.resolve_params({}, x.shape[1])
    half = x.shape[0] // 2
    first = streamed(name, x[:half], y[:half], [20])
    second = streamed(name, x[half:], y[half:], [])
    merged = method.merge(first, params, second)
    assert_as_reference(merged, name, x, y)
    whole = method.statistics_of(streamed(name, x, y, [50]))
    rest = method.minus(whole, params, method.statistics_of(first))
    assert_as_reference(method.scored(rest, params), name, x[half:], y[half:])


def test_the_undefined_cases_answer_as_scikit_learn() -> None:
    """A feature with no spread scores NaN (0/0), one constant within each class but not
    across them separates them perfectly (F infinite, p 0), and a stream of one class has no
    test at all."""
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], 10)
    x = np.column_stack([rng.random(30), np.zeros(30), np.repeat([1.0, 2.0, 3.0], 10)])
    anova = streamed("anova", x, y, [4, 17])
    assert np.isnan(anova["f"][1]) and np.isnan(anova[P_VALUES_FIELD][1])
    assert anova["f"][2] == np.inf and anova[P_VALUES_FIELD][2] == 0.0
    assert_as_reference(anova, "anova", x, y)
    chi = streamed("chi2", x, y, [9])
    assert np.isnan(chi["chi2"][1])
    assert_as_reference(chi, "chi2", x, y)
    for name in ("anova", "chi2"):
        one = streamed(name, x[:10], y[:10], [])
        assert np.isnan(one[METHODS[name].score_field]).all()
        assert_as_reference(one, name, x[:10], y[:10])
    assert order_by_score(anova["f"], 2).tolist() == [2, 0]
    assert order_by_score(np.array([np.nan, 1.0, np.nan, 3.0, 2.0] * 3), 2).tolist() == [3, 8]


def test_a_state_whose_tests_disagree_with_its_statistics_is_refused() -> None:
    method = METHODS["anova"]
    x, y = data("anova")
    state = streamed("anova", x, y, [])
    params = method.resolve_params({}, x.shape[1])
    for field in ("f", P_VALUES_FIELD):
        tampered = dict(state)
        tampered[field] = np.array(state[field]) * 1.5
        with pytest.raises(Inconsistent, match=r"test.s of its statistics"):
            check_state(method, tampered, params)


@pytest.mark.parametrize("sparse", [False, True])
def test_chi2_names_the_first_negative_value(sparse: bool) -> None:
    x = np.ones((4, 3))
    x[2, 1] = -0.5
    rows: Any = sp.csr_matrix(x) if sparse else x
    with pytest.raises(InvalidInput, match=r"got -0.5 at row 2, feature 1"):
        Chi2().refuse_values(labelled(rows, [0, 1, 0, 1]))
    Chi2().refuse_values(labelled(np.abs(rows), [0, 1, 0, 1]))
    # An entry that did not pass through validation (a source's) is refused when applied.
    method = METHODS["chi2"]
    params = method.resolve_params({}, 3)
    with pytest.raises(InvalidInput, match=r"at row 2, feature 1"):
        method.update(method.initial_state(params), params, labelled(rows, [0, 1, 0, 1]))


@pytest.mark.parametrize("alpha", [1e-12, 1e-4, 0.05, 0.5])
def test_selections_by_p_value_are_scikit_learns(alpha: float) -> None:
    x, y = data("chi2")
    _, p = reference("chi2", x, y)
    selectors: list[tuple[Correction, Any]] = [
        ("none", SelectFpr),
        ("fdr", SelectFdr),
        ("fwe", SelectFwe),
    ]
    for correction, selector in selectors:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = selector(chi2, alpha=alpha).fit(x, y).get_support()
        np.testing.assert_array_equal(significant(p, alpha, correction), expected)
