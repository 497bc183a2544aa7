"""OCFS's ``standardize``: scores ``S_b^ii / S_w^ii`` computed exactly from the class counts,
sums and M2 the state keeps, for any chunking, sparse or dense, merged or not; states from
before it load and score as they did; features without within-class spread stay finite."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithms.base import check_state
from service.algorithms.class_moments import M2_FIELD, WITHIN_FLOOR
from service.algorithms.labels import labelled, stored_classes
from service.algorithms.ocfs import OCFS, OCFSParams, between_class_scatter, merge_classes
from service.algorithms.resampling import summary_fields_of
from service.errors import Inconsistent, InvalidInput
from service.store.codec import decode_state, encode_state
from tests.support.datasets import load_mat

METHOD = OCFS()


def params_of(m: int, **given: Any) -> OCFSParams:
    return METHOD.resolve_params({"standardize": True, **given}, m)


def run(
    x: Any, labels: list[Any], cuts: list[int], params: OCFSParams, sparse_every: int = 0
) -> dict[str, Any]:
    """OCFS over ``x`` in chunks split at ``cuts`` (every ``sparse_every``-th chunk as CSR);
    the state goes through the codec each time."""
    state = METHOD.initial_state(params)
    bounds = [0, *sorted({c for c in cuts if 0 < c < x.shape[0]}), x.shape[0]]
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        rows = x[lo:hi]
        if sparse_every and i % sparse_every == 0 and not sp.issparse(rows):
            rows = sp.csr_matrix(rows)
        state = METHOD.update(state, params, labelled(rows, labels[lo:hi]))
        state = decode_state(encode_state(state))
    return state


def reference(x: Any, labels: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batch numpy: ``S_b^ii``, ``S_w^ii`` and the standardized score with its floor."""
    dense = x.toarray() if sp.issparse(x) else np.asarray(x, dtype=np.float64)
    keys = [(type(v), v) for v in labels]
    n = dense.shape[0]
    overall = dense.mean(axis=0)
    between = np.zeros(dense.shape[1])
    within = np.zeros(dense.shape[1])
    for key in dict.fromkeys(keys):
        rows = dense[[k == key for k in keys]]
        mean = rows.mean(axis=0)
        between += rows.shape[0] * (mean - overall) ** 2 / n
        within += ((rows - mean) ** 2).sum(axis=0) / n
    total = between + within
    scores = np.zeros_like(total)
    varies = total > 0
    scores[varies] = between[varies] / np.maximum(within, WITHIN_FLOOR * total)[varies]
    return between, within, scores


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 80),
    m=st.integers(1, 10),
    c=st.integers(1, 5),
    cuts=st.lists(st.integers(0, 80), max_size=6),
    sparse_every=st.sampled_from([0, 1, 2]),
)
def test_streamed_scores_equal_the_batch_reference(seed, n, m, c, cuts, sparse_every):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, m)) * rng.uniform(0.01, 1000, m) + rng.uniform(-50, 50, m)
    x[rng.random((n, m)) < 0.4] = 0.0
    pool: list[Any] = [0, 1, "1", "cat", -7][:c]
    labels = [pool[int(i)] for i in rng.integers(0, c, n)]
    state = run(x, labels, cuts, params_of(m), sparse_every)
    _between, within, scores = reference(x, labels)
    counts = np.asarray(state["class_counts"], dtype=np.float64)
    np.testing.assert_allclose(
        np.asarray(state[M2_FIELD]).sum(axis=0) / counts.sum(), within, rtol=1e-9, atol=1e-9
    )
    np.testing.assert_allclose(state["scores"], scores, rtol=1e-9, atol=1e-12)
    check_state(METHOD, state, params_of(m))


def test_chunked_equals_whole_and_the_reference_on_coil20():
    x, y = load_mat("COIL20.mat")
    labels = [int(v) for v in y]
    order = np.random.default_rng(0).permutation(len(labels))
    x, labels = x[order], [labels[i] for i in order]
    params = params_of(x.shape[1])
    chunked = run(x, labels, list(range(100, 1440, 137)), params)
    whole = run(x, labels, [], params)
    _between, _within, scores = reference(x, labels)
    varies = scores > 0
    assert varies.sum() > 900  # COIL20's border pixels are constant: they score 0
    np.testing.assert_allclose(chunked["scores"], scores, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(chunked["scores"], whole["scores"], rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(chunked["scores"]))


def test_sparse_and_dense_text_give_the_same_standardized_scores():
    x, y = load_mat("PCMAC.mat", dense=False)
    labels = [int(v) for v in y]
    cuts = list(range(250, x.shape[0], 250))
    params = params_of(x.shape[1])
    sparse = run(x, labels, cuts, params)
    dense = run(x.toarray(), labels, cuts, params)
    np.testing.assert_allclose(sparse["scores"], dense["scores"], rtol=1e-9, atol=1e-12)
    _between, _within, scores = reference(x, labels)
    np.testing.assert_allclose(sparse["scores"], scores, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("overlap_classes", [True, False])
def test_a_merge_equals_the_union_with_its_resamples(overlap_classes):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 7)) * [1, 10, 100, 1e-3, 5, 1, 1] + 2.0
    first = [int(v) for v in rng.integers(0, 3, 150)]
    second: list[Any] = [int(v) for v in rng.integers(0 if overlap_classes else 3, 5, 150)]
    params = params_of(7)
    a = run(x[:150], first, [40, 90], params)
    b = run(x[150:], second, [70], params, sparse_every=2)
    fields = summary_fields_of(METHOD, params)
    assert M2_FIELD in fields and f"resample0:{M2_FIELD}" in fields
    summary = {f: v for f, v in b.items() if not isinstance(v, np.ndarray)}
    summary.update({f: b[f] for f in fields})
    merged = METHOD.merge(a, params, decode_state(encode_state(summary)))
    union = run(x, first + second, [150], params)
    assert stored_classes(merged) == stored_classes(union)
    scores = np.asarray(merged["scores"])
    np.testing.assert_allclose(np.asarray(merged[M2_FIELD]), union[M2_FIELD], rtol=1e-12)
    np.testing.assert_allclose(scores, union["scores"], rtol=1e-9)
    np.testing.assert_allclose(scores, reference(x, first + second)[2], rtol=1e-9)
    check_state(METHOD, merged, params)
    # Each resample merged with its own: every class's M2 of the merged subsamples is theirs.
    resampled = METHOD.resample_scores(merged, params)
    assert resampled is not None and np.all(np.isfinite(resampled))
    parts = METHOD.subsamples(merged, params)
    m2 = sum(np.asarray(p[M2_FIELD]).sum(axis=0) for p in parts)
    # The within-class M2 of the parts is at most the whole's (their class means differ).
    assert np.all(m2 <= np.asarray(merged[M2_FIELD]).sum(axis=0) * (1 + 1e-12))


def test_a_standardizing_selector_refuses_a_summary_without_spread():
    params = params_of(3)
    rows = np.random.default_rng(0).random((6, 3))
    ours = run(rows, [0, 1, 0, 1, 0, 1], [], params)
    plain = run(rows, [0, 1, 0, 1, 0, 1], [], METHOD.resolve_params({}, 3))
    with pytest.raises(InvalidInput, match="same standardize"):
        merge_classes(ours, plain)
    # The other way round the spread is not read: a plain selector takes a standardizing one's.
    merged = merge_classes(plain, ours)
    assert M2_FIELD not in merged


def test_rescaling_a_feature_leaves_its_standardized_score_alone():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((400, 4)) + np.repeat(np.arange(4)[None], 400, axis=0) * 0.1
    labels = [int(v) for v in rng.integers(0, 3, 400)]
    x[:, 1] += np.array(labels) * 0.5
    scaled = x * [1.0, 1e4, 1e-3, -7.0] + [0.0, 5e3, -2.0, 1.0]
    standard = params_of(4)
    plain = METHOD.resolve_params({}, 4)
    before = run(x, labels, [100, 250], standard)["scores"]
    after = run(scaled, labels, [100, 250], standard)["scores"]
    np.testing.assert_allclose(after, before, rtol=1e-9)
    raw = np.asarray(run(x, labels, [], plain)["scores"])
    raw_scaled = np.asarray(run(scaled, labels, [], plain)["scores"])
    np.testing.assert_allclose(raw_scaled, raw * np.array([1.0, 1e4, 1e-3, -7.0]) ** 2, rtol=1e-6)


def test_features_without_within_class_spread_stay_finite():
    labels = [0, 0, 1, 1, 2, 2, 0, 1]
    x = np.zeros((8, 4))
    x[:, 0] = 3.0  # constant: no spread at all
    x[:, 1] = [10.0 * c for c in labels]  # constant within each class: separates perfectly
    x[:, 2] = np.arange(8.0)  # spread within classes
    x[:, 3] = [0.1 * c + 0.1 for c in labels]  # as column 1, values that do not divide evenly
    state = run(x, labels, [3, 5], params_of(4))
    scores = np.asarray(state["scores"])
    assert np.all(np.isfinite(scores))
    assert scores[0] == 0.0
    assert scores[1] == pytest.approx(1 / WITHIN_FLOOR, rel=1e-9)
    assert scores[3] == pytest.approx(1 / WITHIN_FLOOR, rel=1e-3)
    assert 0 < scores[2] < 1
    np.testing.assert_allclose(scores, reference(x, labels)[2], rtol=1e-3)
    assert list(np.argsort(-scores)[2:]) == [2, 0]
    # No rows, one class: nothing to score.
    params = params_of(4)
    assert not np.any(METHOD.initial_state(params)["scores"])
    assert not np.any(run(x, [5] * 8, [], params)["scores"])


def test_a_state_saved_before_standardize_loads_and_scores_as_it_did():
    """Stored params without ``standardize`` (nor resamples) resolve to the paper's scores, and
    the state of that time (class counts and sums, no M2) passes the checks and updates."""
    old_params = METHOD.resolve_params({}, 3, stored=True)
    assert old_params.standardize is False
    rng = np.random.default_rng(5)
    x, labels = rng.random((20, 3)), [int(v) for v in rng.integers(0, 2, 20)]
    # The fields an OCFS state had then, written out by hand: no class_m2, no resamples.
    classes = list(dict.fromkeys(labels))
    members = [np.array(labels) == label for label in classes]
    saved: dict[str, Any] = {
        "classes": json.dumps(classes),
        "class_counts": np.array([m.sum() for m in members], dtype=np.int64),
        "class_sums": np.stack([x[m].sum(axis=0) for m in members]),
        "scores": np.diag(between_class_scatter(x, labels)),
    }
    loaded = decode_state(encode_state(saved))
    check_state(METHOD, loaded, old_params)
    more = METHOD.update(loaded, old_params, labelled(x[:5], labels[:5]))
    assert M2_FIELD not in more
    check_state(METHOD, more, old_params)
    again = run(np.vstack([x, x[:5]]), labels + labels[:5], [20], old_params)
    np.testing.assert_allclose(np.asarray(more["scores"]), again["scores"], rtol=1e-12)
    # A standardizing selector's state is not one of them, nor the other way round.
    with pytest.raises(Inconsistent, match=M2_FIELD):
        check_state(METHOD, more, params_of(3, resamples=0))
