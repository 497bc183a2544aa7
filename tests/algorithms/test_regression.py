"""F-regression and correlation on a stream against scikit-learn's ``f_regression`` and
``r_regression`` on the same rows: any chunking, dense and sparse, merged and with subsamples
taken out; the undefined cases (no spread, perfect correlation) answer as scikit-learn does,
with ``force_finite`` and without."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_diabetes, make_regression
from sklearn.feature_selection import f_regression, r_regression

from service.algorithms import METHODS
from service.algorithms.base import check_state, not_always_finite
from service.algorithms.regression import Correlation, FRegression
from service.algorithms.targets import TargetRows
from service.algorithms.univariate import P_VALUES_FIELD
from service.errors import Inconsistent


def diabetes() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's diabetes data (442 patients, 10 measurements, a disease progression)."""
    x, y = load_diabetes(return_X_y=True)
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)


def sparse_regression() -> tuple[np.ndarray, np.ndarray]:
    """Sparse-ish rows (70% zeros) with a target of a few of them, seeded."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 12)) * (rng.random((300, 12)) < 0.3) * 4 + 0.0
    y = x[:, 0] * 2 - x[:, 3] + rng.standard_normal(300)
    return x, y


def streamed(name: str, x: Any, y: np.ndarray, cuts: list[int], **params: Any) -> dict[str, Any]:
    method = METHODS[name]
    resolved = method.resolve_params(params, x.shape[1])
    state = method.initial_state(resolved)
    for start, stop in itertools.pairwise([0, *cuts, x.shape[0]]):
        state = method.update(state, resolved, TargetRows(x[start:stop], y[start:stop]))
    check_state(method, state, resolved)
    return state


def reference(x: np.ndarray, y: np.ndarray, force_finite: bool = True) -> dict[str, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its constant-feature warnings
        f, p = f_regression(x, y, force_finite=force_finite)
        r = r_regression(x, y, force_finite=force_finite)
    return {"f": f, "p": p, "r": r}


def assert_as_reference(
    states: dict[str, dict[str, Any]], x: np.ndarray, y: np.ndarray, force_finite: bool = True
) -> None:
    expected = reference(x, y, force_finite)
    f_state, r_state = states["f_regression"], states["correlation"]
    for given, wanted in (
        (f_state["f"], expected["f"]),
        (f_state[P_VALUES_FIELD], expected["p"]),
        (r_state["r"], expected["r"]),
        (r_state["abs_r"], np.abs(expected["r"])),
        (r_state[P_VALUES_FIELD], expected["p"]),
    ):
        np.testing.assert_allclose(given, wanted, rtol=1e-9, atol=1e-300, equal_nan=True)


def subset(state: dict[str, Any], features: int) -> dict[str, Any]:
    """The per-feature fields of ``state`` for its first ``features`` features."""
    return {k: np.asarray(v)[:features] for k, v in state.items() if np.ndim(v) == 1}


def both(x: Any, y: np.ndarray, cuts: list[int], **params: Any) -> dict[str, dict[str, Any]]:
    return {name: streamed(name, x, y, cuts, **params) for name in ("f_regression", "correlation")}


@pytest.mark.parametrize("data", [diabetes, sparse_regression])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cuts", [[], [1], [7, 8, 100], list(range(10, 290, 10))])
def test_scores_and_p_values_are_scikit_learns_for_any_chunking(
    data: Any, sparse: bool, cuts: list[int]
) -> None:
    x, y = data()
    states = both(sp.csr_matrix(x) if sparse else x, y, cuts)
    assert_as_reference(states, x, y)


def test_make_regression_selects_the_informative_features() -> None:
    x, y, coef = make_regression(
        n_samples=2000, n_features=30, n_informative=5, noise=5.0, coef=True, random_state=2
    )
    state = streamed("f_regression", x, y, list(range(100, 2000, 100)))
    assert_as_reference(both(x, y, [333, 1000]), x, y)
    top = set(np.argsort(-np.asarray(state["f"]))[:5].tolist())
    assert top == set(np.flatnonzero(coef).tolist())


@pytest.mark.parametrize("name", ["f_regression", "correlation"])
def test_a_merge_and_a_subsample_taken_out_are_exact(name: str) -> None:
    method: Any = FRegression() if name == "f_regression" else Correlation()
    x, y = diabetes()
    params = method.resolve_params({}, x.shape[1])
    half = 200
    first = streamed(name, x[:half], y[:half], [20])
    second = streamed(name, x[half:], y[half:], [])
    merged = method.merge(first, params, second)
    expected = reference(x, y)
    field, wanted = ("f", expected["f"]) if name == "f_regression" else ("r", expected["r"])
    np.testing.assert_allclose(merged[field], wanted, rtol=1e-9)
    np.testing.assert_allclose(merged[P_VALUES_FIELD], expected["p"], rtol=1e-9)
    whole = method.statistics_of(streamed(name, x, y, [50]))
    rest = method.scored(method.minus(whole, params, method.statistics_of(first)), params)
    rest_expected = reference(x[half:], y[half:])
    wanted = rest_expected["f"] if name == "f_regression" else rest_expected["r"]
    np.testing.assert_allclose(rest[field], wanted, rtol=1e-9)


@pytest.mark.parametrize("force_finite", [True, False])
def test_the_undefined_cases_answer_as_scikit_learn(force_finite: bool) -> None:
    """A feature with no spread has no correlation (0, or NaN without ``force_finite``); one
    equal to the target correlates perfectly (F the largest float, or infinity); a target
    with no spread leaves every feature undefined."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 50, 40).astype(np.float64)
    x = np.column_stack([rng.random(40), np.zeros(40), y, -3 * y, np.full(40, 2.5)])
    states = both(x, y, [4, 17], force_finite=force_finite)
    # scikit-learn's F of a perfect correlation is its rounding of 1 - r^2 (huge, or negative
    # where r rounds past 1), and its r of a nonzero constant feature that rounding divided by 0:
    # Sift's r is clipped to [-1, 1] and undefined for a constant feature, as for the zero one.
    assert_as_reference({k: subset(v, 2) for k, v in states.items()}, x[:, :2], y, force_finite)
    np.testing.assert_allclose(
        states["correlation"]["r"][2:4], reference(x, y)["r"][2:4], rtol=1e-9
    )
    for name, state in states.items():
        field = METHODS[name].score_field
        assert state[field][4] == state[field][1] or np.isnan(state[field][1])
    f, p = states["f_regression"]["f"], states["f_regression"][P_VALUES_FIELD]
    if force_finite:
        assert f[1] == 0.0 and p[1] == 1.0 and states["correlation"]["r"][1] == 0.0
        assert f[2] == np.finfo(np.float64).max and p[2] == 0.0
    else:
        assert np.isnan(f[1]) and np.isnan(states["correlation"]["r"][1])
        assert f[2] == np.inf
    assert f[3] > 1e15 and p[3] < 1e-290  # -3 y: r is -1 to rounding
    assert states["correlation"]["r"][2] == 1.0
    flat = both(x, np.full(40, 7.0), [9], force_finite=force_finite)
    assert_as_reference(flat, x, np.full(40, 7.0), force_finite)


def test_correlation_ranks_by_strength_whatever_the_sign() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((500, 3))
    y = -4 * x[:, 1] + 0.5 * x[:, 2] + rng.standard_normal(500)
    method = METHODS["correlation"]
    params = method.resolve_params({}, 3)
    state = streamed("correlation", x, y, [250])
    assert state["r"][1] < -0.9
    assert np.argsort(-method.weights(state, params)).tolist()[0] == 1


def test_a_state_whose_tests_or_moments_disagree_is_refused() -> None:
    x, y = diabetes()
    for name in ("f_regression", "correlation"):
        method = METHODS[name]
        params = method.resolve_params({}, x.shape[1])
        state = streamed(name, x, y, [])
        for field in (method.score_field, P_VALUES_FIELD):
            tampered = dict(state)
            tampered[field] = np.array(state[field]) * 1.5
            with pytest.raises(Inconsistent, match=r"test.s of its statistics"):
                check_state(method, tampered, params)
        tampered = dict(state)
        tampered["comoment"] = np.array(state["comoment"]) * 1e6
        with pytest.raises(Inconsistent, match="Cauchy-Schwarz"):
            check_state(method, tampered, params)
        assert "r" in not_always_finite(method) or name == "f_regression"
