"""IOC numerics: Table 1 step by step, chunking, convergence to the batch OC solution."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits, load_iris

from service.algorithms.ioc import IOC, feature_scores, projection
from service.algorithms.labels import labelled
from service.algorithms.ocfs import between_class_scatter, exact_directions, oc_directions
from service.errors import InvalidParams
from service.store.codec import decode_state, encode_state

METHOD = IOC()


def run(x: Any, labels: list[Any], given: dict[str, Any], cuts: list[int] | None = None) -> Any:
    params = METHOD.resolve_params(given, x.shape[1])
    state = METHOD.initial_state(params)
    bounds = [0, *sorted(set(cuts or [])), x.shape[0]]
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            state = METHOD.update(state, params, labelled(x[lo:hi], labels[lo:hi]))
            state = decode_state(encode_state(state))
    return state


def table_1(x: np.ndarray, labels: list[int], p: int) -> np.ndarray:
    """Table 1 written out literally: every class known from the start (an absent class has
    N_i = 0, a zero mean and p_i = 0), means updated as m(n) = ((n-1) m(n-1) + x(n)) / n."""
    c, d = max(labels) + 1, x.shape[1]
    counts, means, mean = np.zeros(c), np.zeros((c, d)), np.zeros(d)
    v = np.zeros((p, d))
    for n, (row, label) in enumerate(zip(x, labels, strict=True), start=1):
        mean = ((n - 1) * mean + row) / n
        counts[label] += 1
        means[label] = ((counts[label] - 1) * means[label] + row) / counts[label]
        phi = means - mean
        for j in range(1, min(p, n) + 1):
            if j == n:
                v[j - 1] = row
                continue
            alpha = phi @ v[j - 1] / np.linalg.norm(v[j - 1])
            v[j - 1] = (n - 1) / n * v[j - 1] + (alpha * counts / n) @ phi / n
            vj = v[j - 1]
            phi = phi - np.outer(phi @ vj, vj) / (vj @ vj)
    return v


def test_every_step_follows_table_1():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 7)) + np.repeat(rng.standard_normal((4, 7)) * 3, 30, axis=0)
    labels = [int(v) for v in np.repeat(np.arange(4), 30)]
    order = rng.permutation(120)
    x, labels = x[order], [labels[i] for i in order]
    state = run(x, labels, {"n_components": 3})
    np.testing.assert_allclose(state["vectors"], table_1(x, labels, 3), rtol=1e-10, atol=1e-12)
    assert state["samples"] == 120 and state["vectors_started"] == 3


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    p=st.integers(1, 4),
)
def test_chunking_does_not_change_the_result(seed, cuts, p):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((80, 6))
    x[rng.random((80, 6)) < 0.5] = 0.0
    labels: list[Any] = [["a", 1, "c", 2, "e"][int(i)] for i in rng.integers(0, 5, 80)]
    whole = run(x, labels, {"n_components": p})
    chunked = run(x, labels, {"n_components": p}, cuts)
    np.testing.assert_array_equal(whole["vectors"], chunked["vectors"])
    sparse = run(sp.csr_matrix(x), labels, {"n_components": p}, cuts)
    np.testing.assert_allclose(sparse["vectors"], whole["vectors"], rtol=1e-10, atol=1e-13)


def inner_products(state: Any, target: np.ndarray) -> np.ndarray:
    """|u^j . e_j| for every learned vector against the batch eigenvector (signs are free)."""
    # numpy's stubs type a sum along an axis as Any: asarray makes the result an array again.
    return np.asarray(np.abs(np.sum(projection(np.asarray(state["vectors"])) * target, axis=0)))


def toy(seed: int) -> tuple[np.ndarray, list[int]]:
    """The paper's synthetic set (Fig. 3a): two 2-D Gaussian classes, 50 samples each."""
    rng = np.random.default_rng(seed)
    cov = [[1.0, 0.5], [0.5, 1.0]]
    x = np.vstack(
        [rng.multivariate_normal([0, 0], cov, 50), rng.multivariate_normal([3, 1.5], cov, 50)]
    )
    order = rng.permutation(100)
    return x[order], [int(v) for v in (np.arange(100) >= 50)[order]]


def test_toy_set_converges_to_the_batch_oc_direction():
    """Fig. 3b: the inner product with the batch solution approaches 1 within ~40 samples."""
    at_40, at_100 = [], []
    for seed in range(20):
        x, y = toy(seed)
        target, _ = oc_directions(x, y, 1)
        state = run(x[:40], y[:40], {"n_components": 1})
        at_40.append(inner_products(state, target)[0])
        state = run(x, y, {"n_components": 1}, [40])
        at_100.append(inner_products(state, target)[0])
    assert np.median(at_40) > 0.99
    assert min(at_100) > 0.99


def digits_order(seed: int = 0) -> tuple[np.ndarray, list[int]]:
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(y))
    return x[order], [int(v) for v in y[order]]


def test_digits_converge_and_the_amnesic_average_converges_faster():
    x, y = digits_order()
    target, _ = oc_directions(x, y, 3)
    found = {}
    for amnesia in (0.0, 2.0):
        state = run(x, y, {"n_components": 3, "amnesia": amnesia})
        one_pass = inner_products(state, target)
        state = METHOD.update(
            state,
            METHOD.resolve_params({"n_components": 3, "amnesia": amnesia}, 64),
            labelled(x, y),
        )
        found[amnesia] = (one_pass, inner_products(state, target))
    paper_one, paper_two = found[0.0]
    assert paper_one[0] > 0.9 and paper_two[0] > paper_one[0]
    amnesic_one, amnesic_two = found[2.0]
    assert np.all(amnesic_one > paper_one) and np.all(amnesic_two > paper_two)
    assert amnesic_two[0] > 0.99


def test_feature_scores_with_all_directions_approach_the_ocfs_scores():
    """With p = c - 1, sum_j lambda_j (u_i^j)^2 is the diagonal of S_b: the OCFS score."""
    x, y = load_iris(return_X_y=True)
    labels = [int(v) for v in y]
    order = np.random.default_rng(1).permutation(150)
    stream_x = np.vstack([x[order]] * 20)
    stream_y = [labels[i] for i in order] * 20
    state = run(stream_x, stream_y, {"n_components": 2, "amnesia": 4.0})
    ocfs = np.diag(between_class_scatter(x, labels))
    np.testing.assert_allclose(state["weights"], ocfs, rtol=0.05)
    assert list(np.argsort(-np.asarray(state["weights"]))) == list(np.argsort(-ocfs))
    _, eigenvalues = oc_directions(x, labels, 2)
    np.testing.assert_allclose(state["eigenvalues"], eigenvalues, rtol=0.05)


def test_a_vector_starts_at_the_first_nonzero_row():
    x = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 2.0], [3.0, 1.0], [0.0, 1.0]])
    state = run(x, [0, 1, 0, 1, 1], {"n_components": 2})
    assert state["vectors_started"] == 2
    assert np.all(np.isfinite(state["vectors"]))
    early = run(x[:3], [0, 1, 0], {"n_components": 2})
    assert early["vectors_started"] == 1
    np.testing.assert_array_equal(early["vectors"][0], [1.0, 2.0])
    assert not np.any(early["vectors"][1])


def test_feature_scores_ignore_vectors_not_started():
    vectors = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(feature_scores(vectors), [9 / 5, 16 / 5])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_components": 0}, "n_components"),
        ({"n_components": 5}, r"\[1, n_features=4\]"),
        ({"n_components": True}, "n_components"),
        ({"amnesia": -1}, "amnesia"),
        ({"amnesia": "2"}, "amnesia"),
        ({"learning_rate": 1}, "unknown parameter"),
    ],
)
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(InvalidParams, match=message):
        METHOD.resolve_params(params, 4)


def test_defaults_are_the_papers():
    assert METHOD.resolve_params({}, 4).as_params() == {
        "n_components": 1,
        "amnesia": 0.0,
        "resamples": 4,
    }


def test_the_exact_oc_solution_follows_from_class_counts_and_sums():
    x, y = digits_order()
    state = run(x, y, {"n_components": 4}, [500, 1000])
    vectors, values = exact_directions(state["class_counts"], state["class_sums"], 4)
    reference, reference_values = oc_directions(x, y, 4)
    np.testing.assert_allclose(np.abs(np.sum(vectors * reference, axis=0)), 1.0, rtol=1e-10)
    np.testing.assert_allclose(values, reference_values, rtol=1e-10)
    # More directions than S_b has (rank c - 1 = 9): the extra ones are zero, not noise.
    vectors, values = exact_directions(state["class_counts"], state["class_sums"], 12)
    assert not np.any(vectors[:, 10:]) and not np.any(values[10:])
