"""OMVFS (Shao et al., Algorithm 1) on seeded data: aggregates, buffer, kernel, kNN graph, the
running moments and the three scores (the objective's descent and the iterates against the first
version: test_omvfs_reference.py; the rankings' quality: test_omvfs_quality.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.base import check_state
from service.algorithms.omvfs import GAMMA_SCALE, OMVFS, OMVFSParams, median_distance, split_views
from service.algorithms.omvfs.graph import buffer_rows, similarity_blocks
from service.errors import Inconsistent, InvalidInput, InvalidParams
from tests.support.states import array_field

METHOD = OMVFS()
VIEWS = {"text": 40, "image": 12}
WIDTH = sum(VIEWS.values())


def chunks(count: int, rows: int = 30, seed: int = 0) -> list[sp.csr_matrix]:
    """Nonnegative chunks: a sparse 'text' view and a dense 'image' view side by side."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        text = sp.random(rows, VIEWS["text"], density=0.2, random_state=rng) * 3
        image = rng.random((rows, VIEWS["image"]))
        out.append(sp.hstack([text, sp.csr_matrix(image)], format="csr"))
    return out


def run(params: dict[str, Any], data: list[sp.csr_matrix]) -> tuple[OMVFSParams, list[Any]]:
    resolved = METHOD.resolve_params({"views": VIEWS, **params}, WIDTH)
    state = METHOD.initial_state(resolved)
    states = []
    for chunk in data:
        state = METHOD.update(state, resolved, chunk)
        states.append(state)
    return resolved, states


def test_a_and_b_equal_the_sums_recomputed_from_the_u_blocks() -> None:
    data = chunks(5, seed=1)
    resolved, states = run({"n_clusters": 3, "max_iter": 30}, data)
    cfg = resolved
    a = np.zeros((3, 3))
    b = [np.zeros((dim, 3)) for dim in VIEWS.values()]
    for chunk, state in zip(data, states, strict=True):
        u_t = np.asarray(state["U_buffer"])[-chunk.shape[0] :]  # the chunk's final U_t
        a += u_t.T @ u_t
        for j, view in enumerate(split_views(chunk, cfg)):
            b[j] += view.T @ u_t
        np.testing.assert_allclose(state["A"], a, rtol=1e-10, atol=1e-14)
        for j in range(2):
            np.testing.assert_allclose(state[f"B{j}"], b[j], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("buffer_chunks", [1, 2, 3])
def test_buffer_holds_exactly_the_last_s_chunks_and_their_kernel(buffer_chunks: int) -> None:
    data = chunks(5, rows=20, seed=2)
    data[3] = data[3][:13]  # chunks of different sizes
    resolved, states = run(
        {"n_clusters": 3, "buffer_chunks": buffer_chunks, "max_iter": 5, "neighbours": None}, data
    )
    cfg = resolved
    last = states[-1]
    kept = data[-buffer_chunks:]
    assert last["buffer_chunk_rows"].tolist() == [c.shape[0] for c in kept]
    assert last["U_buffer"].shape == (sum(c.shape[0] for c in kept), 3)
    for j, dim in enumerate(VIEWS.values()):
        expected = sp.vstack([split_views(c, cfg)[j] for c in kept]).toarray()
        buffered = buffer_rows(last, j, dim).toarray()
        np.testing.assert_allclose(buffered, expected, rtol=1e-12)
        # The incrementally assembled similarity blocks equal the kernel on the buffer.
        sigma = float(last[f"bandwidth{j}"])
        diff = ((expected[:, None, :] - expected[None, :, :]) ** 2).sum(axis=2)
        kernel = np.exp(-diff / (2 * sigma**2))
        np.fill_diagonal(kernel, 0.0)
        np.testing.assert_allclose(last[f"W{j}"], kernel, rtol=1e-9, atol=1e-12)


def test_factors_stay_nonnegative_and_finite() -> None:
    _, states = run({"n_clusters": 4, "max_iter": 40, "alpha": 10.0, "beta": 0.1}, chunks(4))
    for state in states:
        for key in ("U_buffer", "V0", "V1", "A", "B0", "B1", "weights"):
            value = np.asarray(state[key])
            assert np.all(np.isfinite(value)) and np.all(value >= 0), key


def test_bandwidth_is_the_median_distance_of_the_first_chunk_and_then_fixed() -> None:
    data = chunks(3, seed=4)
    resolved, states = run({"n_clusters": 2, "max_iter": 3}, data)
    cfg = resolved
    for j in range(2):
        expected = median_distance(split_views(data[0], cfg)[j])
        assert [float(s[f"bandwidth{j}"]) for s in states] == [expected] * 3
    _, fixed = run({"n_clusters": 2, "max_iter": 3, "bandwidth": {"text": 0.5, "image": 2.0}}, data)
    assert float(fixed[-1]["bandwidth0"]) == 0.5 and float(fixed[-1]["bandwidth1"]) == 2.0


def test_neighbour_graph_is_stored_sparse_symmetric_and_zero_on_the_diagonal() -> None:
    """The kNN graph is kept as CSR parts: about 2 k entries per buffered row, not (s m)^2."""
    _, states = run({"n_clusters": 2, "max_iter": 3, "neighbours": 4}, chunks(3, rows=25))
    last = states[-1]
    assert "W0" not in last and "W1" not in last
    for j in range(2):
        w = similarity_blocks(last, j, sparse=True)
        assert isinstance(w, sp.csr_matrix) and w.shape == (50, 50)
        assert np.asarray(last[f"W{j}_data"]).size == w.nnz <= 2 * 4 * 50
        dense = w.toarray()
        assert np.allclose(dense, dense.T) and np.all(np.diag(dense) == 0) and np.all(dense >= 0)
        # Each row of the newest chunk keeps its k neighbours (older rows may have lost some
        # with the chunk that left the buffer).
        assert (dense[25:] > 0).sum(axis=1).min() >= 4
        assert (dense > 0).sum(axis=1).max() < 49  # far from the dense kernel


def test_the_default_graph_is_knn_and_null_keeps_the_dense_kernel() -> None:
    """Selectors created before the kNN default hold ``neighbours: null`` in their resolved
    params: that still means the dense kernel, stored as one array per view."""
    data = chunks(2, rows=20, seed=6)
    default, states = run({"n_clusters": 2, "max_iter": 3}, data)
    assert default.neighbours == 10 and "W0_indptr" in states[-1]
    dense, states = run({"n_clusters": 2, "max_iter": 3, "neighbours": None}, data)
    assert dense.neighbours is None
    assert METHOD.resolve_params(dense.as_params(), WIDTH).as_params() == dense.as_params()
    assert np.asarray(states[-1]["W0"]).shape == (40, 40) and "W0_indptr" not in states[-1]


def test_same_seed_same_state_and_the_paper_score_is_the_row_norms_of_v() -> None:
    data = chunks(3, seed=5)
    paper = {"n_clusters": 3, "max_iter": 10, "seed": 9, "score": "paper"}
    resolved, first = run(paper, data)
    _, again = run(paper, data)
    for key in ("U_buffer", "V0", "V1", "weights"):
        np.testing.assert_array_equal(first[-1][key], again[-1][key])
    weights = np.concatenate([np.linalg.norm(first[-1][f"V{j}"], axis=1) for j in range(2)])
    np.testing.assert_allclose(METHOD.weights(first[-1], resolved), weights)


def test_negative_values_and_bad_params_are_rejected() -> None:
    resolved = METHOD.resolve_params({"views": VIEWS}, WIDTH)
    chunk = chunks(1)[0].toarray()
    chunk[2, 45] = -0.5
    with pytest.raises(InvalidInput, match="view 'image' has negative values"):
        METHOD.update(METHOD.initial_state(resolved), resolved, chunk)
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, 'needs "views"'),
        ({"views": {"a": 10}}, "add up to 10 features; expected 52"),
        ({"views": VIEWS, "alpha": {"text": 1.0}}, "alpha must give every view a value"),
        ({"views": VIEWS, "beta": -1}, "beta must be a finite number >= 0"),
        ({"views": VIEWS, "n_clusters": 0}, "n_clusters must be an integer >= 1"),
        ({"views": VIEWS, "buffer_chunks": 0}, "buffer_chunks must be an integer >= 1"),
        ({"views": VIEWS, "tol": 0}, "tol must be a finite number > 0"),
        ({"views": VIEWS, "bandwidth": 0}, "bandwidth must be a finite number > 0"),
        ({"views": VIEWS, "lambda": 1}, "unknown parameter"),
        ({"views": VIEWS, "score": "norm"}, "score must be one of 'explained', 'scaled', 'paper'"),
        ({"views": VIEWS, "gamma": "fast"}, "gamma must be a finite number >= 0, or 'auto'"),
        ({"views": VIEWS, "gamma": -1}, "gamma must be a finite number >= 0, or 'auto'; got -1"),
    ]
    for params, message in cases:
        with pytest.raises(InvalidParams) as info:
            METHOD.resolve_params(params, WIDTH)
        assert message in info.value.detail, info.value.detail
    echoed = METHOD.resolve_params(
        {"views": VIEWS, "alpha": {"text": 2, "image": 3}}, WIDTH
    ).as_params()
    assert echoed["alpha"] == {"text": 2.0, "image": 3.0} and echoed["gamma"] == "auto"
    assert echoed["buffer_chunks"] == 2 and echoed["max_iter"] == 200
    assert echoed["tol"] == 1e-3 and echoed["neighbours"] == 10
    assert echoed["score"] == "explained"
    paper = METHOD.resolve_params({"views": VIEWS, "gamma": 1e7, "score": "paper"}, WIDTH)
    assert paper.gamma == 1e7 and paper.score == "paper"
    assert METHOD.resolve_params(paper.as_params(), WIDTH).as_params() == paper.as_params()


def test_params_stored_without_a_score_keep_the_papers_ranking() -> None:
    """Selectors created before ``score`` existed hold params without it (and gamma 1e7): they
    rank as they always did, by the row norms of V; a creation gets the default."""
    stored = METHOD.resolve_params(
        {"views": VIEWS, "gamma": 1e7, "n_clusters": 3}, WIDTH
    ).as_params()
    del stored["score"]
    assert OMVFSParams.resolve(stored, WIDTH, stored=True).score == "paper"
    assert OMVFSParams.resolve({**stored, "score": "scaled"}, WIDTH, stored=True).score == "scaled"
    params = METHOD.resolve_params(stored, WIDTH, stored=True)
    state = METHOD.update(METHOD.initial_state(params), params, chunks(1)[0])
    norms = np.concatenate([np.linalg.norm(array_field(state, f"V{j}"), axis=1) for j in range(2)])
    np.testing.assert_array_equal(state["weights"], norms)


def test_moments_are_those_of_every_row_seen_as_the_factorisation_sees_it() -> None:
    """``(n, mean, M2)`` per feature over all rows, rows scaled to unit norm per view: not just
    the buffer's (s = 2 of the 5 chunks here)."""
    data = chunks(5, seed=11)
    resolved, states = run({"n_clusters": 3, "max_iter": 5}, data)
    cfg = resolved
    seen = np.vstack([sp.hstack(split_views(c, cfg)).toarray() for c in data])
    last = states[-1]
    assert last["feature_rows"] == seen.shape[0] == 150
    np.testing.assert_allclose(last["feature_mean"], seen.mean(axis=0), rtol=1e-12, atol=1e-15)
    m2 = ((seen - seen.mean(axis=0)) ** 2).sum(axis=0)
    np.testing.assert_allclose(last["feature_m2"], m2, rtol=1e-10, atol=1e-14)


def test_each_score_is_its_formula_on_the_rows_seen() -> None:
    """paper: |V_j|; scaled: |V_j| / RMS_j; explained: var_j / (var_j + r_j), with r_j the mean
    squared residual |x_j - U V_j^T|^2 / n over every row seen (each chunk's rows with its final
    U_t, the final V), recomputed here from the rows themselves. The factorisation is the same
    whatever the score: only the ranking differs."""
    data = chunks(4, seed=12)
    by_score = {
        score: run({"n_clusters": 3, "max_iter": 30, "score": score}, data)[1]
        for score in ("paper", "scaled", "explained")
    }
    for key in ("U_buffer", "V0", "V1", "A", "feature_mean", "feature_m2"):
        np.testing.assert_array_equal(by_score["paper"][-1][key], by_score["explained"][-1][key])
    cfg = METHOD.resolve_params({"views": VIEWS}, WIDTH)
    seen = np.vstack([sp.hstack(split_views(c, cfg)).toarray() for c in data])
    chunk_u = [
        state["U_buffer"][-c.shape[0] :] for state, c in zip(by_score["paper"], data, strict=True)
    ]
    state = by_score["paper"][-1]
    v = np.vstack([state["V0"], state["V1"]])
    residual = ((seen - np.vstack(chunk_u) @ v.T) ** 2).mean(axis=0)
    mean, variance = seen.mean(axis=0), seen.var(axis=0)
    norms = np.linalg.norm(v, axis=1)
    np.testing.assert_allclose(by_score["paper"][-1]["weights"], norms, rtol=1e-12)
    rms = np.sqrt(mean**2 + variance)
    np.testing.assert_allclose(by_score["scaled"][-1]["weights"], norms / rms, rtol=1e-10)
    explained = variance / (variance + residual)
    np.testing.assert_allclose(by_score["explained"][-1]["weights"], explained, rtol=1e-8)
    assert np.all((explained > 0) & (explained < 1))
    # The rankings differ: the paper's follows the features' size, the others do not.
    assert not np.array_equal(np.argsort(-norms), np.argsort(-explained))


def test_scale_free_scores_are_zero_before_any_row_and_for_constant_features() -> None:
    resolved = METHOD.resolve_params({"views": VIEWS, "n_clusters": 2}, WIDTH)
    state = METHOD.initial_state(resolved)
    np.testing.assert_array_equal(METHOD.weights(state, resolved), np.zeros(WIDTH))
    chunk = chunks(1, seed=13)[0].toarray()
    chunk[:, 3] = 0.0  # a text feature never seen
    state = METHOD.update(state, resolved, chunk)
    weights = METHOD.weights(state, resolved)
    assert weights[3] == 0.0 and np.all(np.isfinite(weights))
    assert np.count_nonzero(weights) == WIDTH - 1, weights


def test_gamma_auto_is_tied_to_the_fit_term_of_each_chunks_buffer() -> None:
    """``gamma: "auto"`` is GAMMA_SCALE |X_[s,t]|_F^2 / K: the same iterates as that number given
    explicitly, chunk by chunk (the buffer grows from one chunk to s = 2)."""
    data = chunks(3, rows=20, seed=14)
    resolved = METHOD.resolve_params({"views": VIEWS, "n_clusters": 4}, WIDTH)
    auto = METHOD.initial_state(resolved)
    cfg = resolved
    for t, chunk in enumerate(data):
        buffered = sp.vstack([sp.hstack(split_views(c, cfg)) for c in data[max(0, t - 1) : t + 1]])
        gamma = GAMMA_SCALE * buffered.multiply(buffered).sum() / 4
        given = METHOD.resolve_params({**resolved.as_params(), "gamma": gamma}, WIDTH)
        expected = METHOD.update(auto, given, chunk)
        auto = METHOD.update(auto, resolved, chunk)
        assert auto["last_iterations"] == expected["last_iterations"]
        np.testing.assert_allclose(
            array_field(auto, "U_buffer"), array_field(expected, "U_buffer"), rtol=1e-12
        )
        assert 1e-3 < gamma < 1e3  # rows of unit norm per view: a few per row, not 1e7


def test_check_state_accepts_a_state_the_method_reached_and_checks_the_moments() -> None:
    resolved, states = run({"n_clusters": 3, "max_iter": 5}, chunks(3, seed=15))
    last = states[-1]
    check_state(METHOD, last, resolved)
    tampered: list[tuple[str, Any]] = [
        ("feature_rows", 10),  # fewer rows than the buffer holds
        ("feature_m2", np.full(WIDTH, -1.0)),
        ("feature_mean", np.full(WIDTH, -0.5)),
    ]
    for field, value in tampered:
        with pytest.raises(Inconsistent, match="moments"):
            check_state(METHOD, {**last, field: value}, resolved)
