"""OCFS numerics: the paper's IRIS example, streaming vs batch for any chunking, merges."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris

from service.algorithms.labels import LabelledRows, join, labelled, stored_classes
from service.algorithms.ocfs import (
    OCFS,
    OCFSParams,
    between_class_scatter,
    ocfs_scores,
    summary_rows,
)
from service.algorithms.subsamples import DEFAULT_RESAMPLES
from service.errors import InvalidParams
from service.store.codec import decode_state, encode_state
from tests.support.datasets import load_mat
from tests.support.states import array_field

METHOD = OCFS()


def stored_params(n_features: int) -> OCFSParams:
    """No parameters, resolved as stored ones are (without resamples)."""
    return METHOD.resolve_params({}, n_features, stored=True)


def run(x: Any, labels: list[Any], cuts: list[int] | None = None) -> dict[str, Any]:
    """OCFS over ``x`` in chunks split at ``cuts``; the state goes through the codec each time."""
    params = stored_params(x.shape[1])
    state = METHOD.initial_state(params)
    bounds = [0, *sorted(set(cuts or [])), x.shape[0]]
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            state = METHOD.update(state, params, labelled(x[lo:hi], labels[lo:hi]))
            state = decode_state(encode_state(state))
    return state


def uci_iris() -> tuple[np.ndarray, list[int]]:
    """IRIS as the UCI repository had it in 2006 (the paper's data).

    scikit-learn ships Fisher's corrected values; the UCI file differed in samples 35 and 38
    (both read 4.9, 3.1, 1.5, 0.1), which is what the paper's class means show.
    """
    x, y = load_iris(return_X_y=True)
    x = x.copy()
    x[34] = x[37] = [4.9, 3.1, 1.5, 0.1]
    return x, [int(v) for v in y]


def test_the_papers_iris_example_section_3_2():
    x, y = uci_iris()
    state = run(x, y)
    scores = np.asarray(state["scores"])
    means = np.asarray(state["class_sums"]) / np.asarray(state["class_counts"])[:, None]
    # Step 1 as printed: m_1 = (5.006, 3.418, 1.464, 0.244), m_3 = (6.588, 2.974, 5.552, 2.026).
    np.testing.assert_allclose(means[0], [5.006, 3.418, 1.464, 0.244], atol=5e-4)
    np.testing.assert_allclose(means[2], [6.588, 2.974, 5.552, 2.026], atol=5e-4)
    # Step 3 as printed: the sums without the n_j/n = 1/3 weights, so 3x our scores; s(4) is
    # misprinted 1.1621 in the paper, the printed means give 1.6121.
    np.testing.assert_allclose(3 * scores, [1.2642, 0.21955, 8.7329, 1.6121], atol=2e-4)
    ranking = [int(i) + 1 for i in np.argsort(-scores)]
    # With the corrected s(4) the ranking is 3, 4, 1, 2: the paper's "keep 3 and 1" follows
    # from the misprint, since s(4) = 1.6121 > s(1) = 1.2642.
    assert ranking == [3, 4, 1, 2]
    # Fisher's corrected data (scikit-learn's) ranks the features the same way.
    fisher_x, fisher_y = load_iris(return_X_y=True)
    fisher = np.asarray(run(fisher_x, [int(v) for v in fisher_y])["scores"])
    assert [int(i) + 1 for i in np.argsort(-fisher)] == [3, 4, 1, 2]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    m=st.integers(1, 12),
    c=st.integers(1, 5),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    sparse=st.booleans(),
)
def test_streaming_scores_equal_batch_scores_for_any_chunking(seed, n, m, c, cuts, sparse):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m)) * rng.uniform(0.1, 10, m) + rng.uniform(-5, 5, m)
    if sparse:
        x[rng.random((n, m)) < 0.6] = 0.0
    # Labels mix integers and strings: 1 and "1" are different classes.
    pool: list[Any] = [0, 1, "1", "cat", -7][:c]
    labels = [pool[int(i)] for i in rng.integers(0, c, n)]
    state = run(sp.csr_matrix(x) if sparse else x, labels, [k for k in cuts if k < n])
    scatter = between_class_scatter(x, labels)
    np.testing.assert_allclose(state["scores"], np.diag(scatter), rtol=1e-9, atol=1e-12)
    # Classes in order of first appearance, counts as in the data.
    expected = list(dict.fromkeys((type(v), v) for v in labels))
    assert [(type(v), v) for v in stored_classes(state)] == expected
    counts = [sum(1 for v in labels if (type(v), v) == key) for key in expected]
    assert list(state["class_counts"]) == counts


def test_sum_of_scores_is_the_trace_of_s_b_on_coil20():
    x, y = load_mat("COIL20.mat")
    labels = [int(v) for v in y]
    order = np.random.default_rng(0).permutation(len(labels))
    state = run(x[order], [labels[i] for i in order], list(range(100, 1440, 137)))
    scatter = between_class_scatter(x, labels)
    assert np.sum(state["scores"]) == pytest.approx(np.trace(scatter), rel=1e-12)
    np.testing.assert_allclose(state["scores"], np.diag(scatter), rtol=1e-9, atol=1e-15)


def test_sparse_and_dense_text_give_the_same_scores():
    x, y = load_mat("PCMAC.mat", dense=False)
    labels = [int(v) for v in y]
    cuts = list(range(250, x.shape[0], 250))
    sparse = run(x, labels, cuts)
    dense = run(x.toarray(), labels, cuts)
    np.testing.assert_allclose(sparse["scores"], dense["scores"], rtol=1e-12, atol=1e-18)
    top = np.argsort(-np.asarray(sparse["scores"]))[:10]
    reference = np.argsort(-np.diag(between_class_scatter(x, labels)))[:10]
    assert list(top) == list(reference)


@pytest.mark.parametrize("overlap_classes", [True, False])
def test_merge_equals_processing_the_union(overlap_classes):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 9)) + 2.0
    first = [int(v) for v in rng.integers(0, 3, 150)]
    second = [int(v) for v in rng.integers(0 if overlap_classes else 3, 5, 150)]
    a = run(x[:150], first, [40, 90])
    b = run(x[150:], ["s" + str(v) if not overlap_classes else v for v in second], [70])
    merged = METHOD.update(a, stored_params(9), summary_rows(b))
    union = run(x, first + ["s" + str(v) if not overlap_classes else v for v in second], [150])
    assert stored_classes(merged) == stored_classes(union)
    np.testing.assert_array_equal(merged["class_counts"], union["class_counts"])
    np.testing.assert_allclose(array_field(merged, "class_sums"), union["class_sums"], rtol=1e-13)
    np.testing.assert_allclose(array_field(merged, "scores"), union["scores"], rtol=1e-12)


def test_joined_chunks_discover_classes_in_log_order():
    x = np.arange(12.0).reshape(6, 2)
    a = labelled(x[:3], ["b", 2, "b"])
    b = labelled(x[3:], [7, "b", 2])
    joined = join([a, b])
    assert joined.classes == ("b", 2, 7)
    assert list(joined.codes) == [0, 1, 0, 2, 0, 1]
    params = stored_params(2)
    one_by_one = METHOD.update(METHOD.update(METHOD.initial_state(params), params, a), params, b)
    at_once = METHOD.update(METHOD.initial_state(params), params, joined)
    np.testing.assert_array_equal(one_by_one["class_sums"], at_once["class_sums"])
    assert stored_classes(one_by_one) == stored_classes(at_once) == ["b", 2, 7]


def test_scores_of_a_single_class_are_zero_and_no_data_scores_nothing():
    assert not np.any(ocfs_scores(np.zeros(0), np.zeros((0, 3))))
    state = run(np.random.default_rng(0).random((5, 3)), ["only"] * 5)
    assert not np.any(state["scores"])


def test_ocfs_takes_standardize_and_how_its_stability_is_estimated():
    plain = {"standardize": False}
    assert METHOD.resolve_params({}, 4).as_params() == {**plain, "resamples": DEFAULT_RESAMPLES}
    assert METHOD.resolve_params({"resamples": 0}, 4).as_params() == {**plain, "resamples": 0}
    # Stored before resamples and standardize existed: neither, the paper's scores.
    assert METHOD.resolve_params({}, 4, stored=True).as_params() == plain
    with pytest.raises(
        InvalidParams, match=r"unknown parameter.*for ocfs.*some of: standardize, resamples"
    ):
        METHOD.resolve_params({"k": 3}, 4)
    with pytest.raises(InvalidParams, match="standardize must be"):
        METHOD.resolve_params({"standardize": 1}, 4)


def test_summary_rows_carry_counts_as_multiplicity():
    state = run(np.eye(4), ["a", "b", "a", "c"])
    summary = summary_rows(state)
    assert isinstance(summary, LabelledRows)
    assert summary.samples == 4
    assert summary.multiplicity is not None
    assert list(summary.multiplicity) == [2, 1, 1]
    np.testing.assert_array_equal(summary.rows[0], [1, 0, 1, 0])
