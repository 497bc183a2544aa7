"""Variance: exact against numpy and scikit-learn, for any chunking, dense or sparse, merged."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_selection import VarianceThreshold

from service.algorithms.base import Matrix, State
from service.algorithms.resampling import summary_fields_of
from service.algorithms.variance import Variance
from service.errors import InvalidParams
from tests.support.datasets import load_mat
from tests.support.states import array_field

METHOD = Variance()


def run(chunks: list[Matrix], m: int, ddof: int = 0) -> State:
    params = METHOD.resolve_params({"ddof": ddof}, m)
    state = METHOD.initial_state(params)
    for chunk in chunks:
        state = METHOD.update(state, params, chunk)
    return state


def split(x: Matrix, sizes: list[int]) -> list[Matrix]:
    out: list[Matrix] = []
    start = 0
    for size in sizes:
        out.append(x[start : start + size])
        start += size
    return out


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(1, 30), min_size=1, max_size=8),
    sparse=st.booleans(),
    ddof=st.sampled_from([0, 1]),
)
def test_equals_numpy_for_any_chunking(seed, cuts, sparse, ddof):
    rng = np.random.default_rng(seed)
    n, m = sum(cuts), 7
    x = rng.standard_normal((n, m)) * rng.uniform(0.01, 100, m) + rng.uniform(-1e3, 1e3, m)
    x[rng.random((n, m)) < 0.5] = 0.0
    rows = sp.csr_matrix(x) if sparse else x
    state = run(split(rows, cuts), m, ddof)
    assert state["count"] == n
    expected = np.var(x, axis=0, ddof=ddof) if n > ddof else np.zeros(m)
    np.testing.assert_allclose(array_field(state, "variance"), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(array_field(state, "mean"), x.mean(axis=0), rtol=1e-12, atol=1e-9)


def test_sparse_and_dense_agree_and_match_variance_threshold_on_real_text():
    x, _ = load_mat("PCMAC.mat", dense=False)
    chunks = [x[i : i + 300] for i in range(0, x.shape[0], 300)]
    sparse_variance = array_field(run(chunks, x.shape[1]), "variance")
    dense_variance = array_field(run([c.toarray() for c in chunks], x.shape[1]), "variance")
    np.testing.assert_allclose(sparse_variance, dense_variance, rtol=1e-12)
    reference = VarianceThreshold().fit(x).variances_
    np.testing.assert_allclose(sparse_variance, reference, rtol=1e-9, atol=1e-15)


def test_merge_equals_one_selector_that_saw_both_streams():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 5)) + 2, 3 * rng.standard_normal((25, 5)) - 1
    params = METHOD.resolve_params({}, 5)
    left, right, both = run([a], 5), run([b], 5), run([a, b], 5)
    fields = ("count", *summary_fields_of(METHOD, params))
    summary = {f: v for f, v in right.items() if f in fields or not isinstance(v, np.ndarray)}
    merged = METHOD.merge(left, params, summary)
    assert METHOD.summary_samples(summary) == 25
    merged_variance = array_field(merged, "variance")
    np.testing.assert_allclose(merged_variance, array_field(both, "variance"), rtol=1e-12)
    np.testing.assert_allclose(merged_variance, np.var(np.vstack([a, b]), axis=0), rtol=1e-12)


def test_constant_and_empty_features_score_zero_and_ranks_follow_the_spread():
    x = np.array([[1.0, 5.0, 0.0, 10.0], [1.0, -5.0, 0.0, 0.0], [1.0, 5.0, 0.0, -10.0]])
    state = run([x[:1], x[1:]], 4)
    np.testing.assert_allclose(array_field(state, "variance"), np.var(x, axis=0))
    population = METHOD.resolve_params({"ddof": 0}, 4)
    assert list(np.argsort(-METHOD.weights(state, population))[:2]) == [3, 1]
    single = run([x[:1]], 4, ddof=1)  # one row: the sample variance is undefined, shown as 0
    assert not array_field(single, "variance").any()


@pytest.mark.parametrize("bad", [{"ddof": 2}, {"ddof": True}, {"ddof": "1"}, {"k": 1}])
def test_parameters_are_checked(bad):
    with pytest.raises(InvalidParams):
        METHOD.resolve_params(bad, 3)
