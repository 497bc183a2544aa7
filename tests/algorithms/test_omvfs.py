"""OMVFS (Shao et al., Algorithm 1) on seeded data: aggregates, buffer, kernel, monotonicity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import service.algorithms.omvfs as omvfs_module
from service.algorithms.omvfs import OMVFS, median_distance, split_views
from service.errors import InvalidInput, InvalidParams

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


def run(params: dict[str, Any], data: list[sp.csr_matrix]) -> tuple[dict[str, Any], list[Any]]:
    resolved = METHOD.resolve_params({"views": VIEWS, **params}, WIDTH)
    state = METHOD.initial_state(resolved, WIDTH)
    states = []
    for chunk in data:
        state = METHOD.update(state, resolved, chunk)
        states.append(state)
    return resolved, states


def test_a_and_b_equal_the_sums_recomputed_from_the_u_blocks() -> None:
    data = chunks(5, seed=1)
    resolved, states = run({"n_clusters": 3, "max_iter": 30}, data)
    cfg = omvfs_module._resolve(resolved, WIDTH)
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
    resolved, states = run({"n_clusters": 3, "buffer_chunks": buffer_chunks, "max_iter": 5}, data)
    cfg = omvfs_module._resolve(resolved, WIDTH)
    last = states[-1]
    kept = data[-buffer_chunks:]
    assert last["buffer_chunk_rows"].tolist() == [c.shape[0] for c in kept]
    assert last["U_buffer"].shape == (sum(c.shape[0] for c in kept), 3)
    for j, dim in enumerate(VIEWS.values()):
        expected = sp.vstack([split_views(c, cfg)[j] for c in kept]).toarray()
        buffered = omvfs_module._buffer_rows(last, j, dim).toarray()
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


def test_objective_does_not_increase_across_the_iterations_of_a_chunk(monkeypatch) -> None:
    trace: list[float] = []
    original = omvfs_module.objective_terms

    def spy(*args: Any, **kwargs: Any) -> float:
        value = original(*args, **kwargs)
        trace.append(value)
        return value

    monkeypatch.setattr(omvfs_module, "objective_terms", spy)
    resolved = METHOD.resolve_params(
        {"views": VIEWS, "n_clusters": 3, "max_iter": 50, "tol": 1e-14}, WIDTH
    )
    state = METHOD.initial_state(resolved, WIDTH)
    for chunk in chunks(4, seed=3):
        trace.clear()
        state = METHOD.update(state, resolved, chunk)
        values = np.asarray(trace)
        assert len(values) > 10
        increases = np.diff(values) / np.abs(values[:-1])
        assert increases.max() <= 1e-9, f"objective went up by {increases.max():.2e}"
        assert values[-1] < values[0]
        assert state["last_objective"] == pytest.approx(values[-1])


def test_bandwidth_is_the_median_distance_of_the_first_chunk_and_then_fixed() -> None:
    data = chunks(3, seed=4)
    resolved, states = run({"n_clusters": 2, "max_iter": 3}, data)
    cfg = omvfs_module._resolve(resolved, WIDTH)
    for j in range(2):
        expected = median_distance(split_views(data[0], cfg)[j])
        assert [float(s[f"bandwidth{j}"]) for s in states] == [expected] * 3
    _, fixed = run({"n_clusters": 2, "max_iter": 3, "bandwidth": {"text": 0.5, "image": 2.0}}, data)
    assert float(fixed[-1]["bandwidth0"]) == 0.5 and float(fixed[-1]["bandwidth1"]) == 2.0


def test_neighbour_graph_is_sparse_symmetric_and_zero_on_the_diagonal() -> None:
    _, states = run({"n_clusters": 2, "max_iter": 3, "neighbours": 4}, chunks(3, rows=25))
    w = np.asarray(states[-1]["W0"])
    assert np.allclose(w, w.T) and np.all(np.diag(w) == 0) and np.all(w >= 0)
    assert (w > 0).sum(axis=1).max() < w.shape[0] - 1  # far from the dense kernel


def test_same_seed_same_state_and_weights_are_row_norms_of_v() -> None:
    data = chunks(3, seed=5)
    _, first = run({"n_clusters": 3, "max_iter": 10, "seed": 9}, data)
    _, again = run({"n_clusters": 3, "max_iter": 10, "seed": 9}, data)
    for key in ("U_buffer", "V0", "V1", "weights"):
        np.testing.assert_array_equal(first[-1][key], again[-1][key])
    weights = np.concatenate([np.linalg.norm(first[-1][f"V{j}"], axis=1) for j in range(2)])
    np.testing.assert_allclose(METHOD.weights(first[-1], {}), weights)


def test_negative_values_and_bad_params_are_rejected() -> None:
    resolved = METHOD.resolve_params({"views": VIEWS}, WIDTH)
    chunk = chunks(1)[0].toarray()
    chunk[2, 45] = -0.5
    with pytest.raises(InvalidInput, match="view 'image' has negative values"):
        METHOD.update(METHOD.initial_state(resolved, WIDTH), resolved, chunk)
    cases = [
        ({}, 'needs "views"'),
        ({"views": {"a": 10}}, "add up to 10 features; expected 52"),
        ({"views": VIEWS, "alpha": {"text": 1.0}}, "alpha must give every view a value"),
        ({"views": VIEWS, "beta": -1}, "beta must be a finite number >= 0"),
        ({"views": VIEWS, "n_clusters": 0}, "n_clusters must be an integer >= 1"),
        ({"views": VIEWS, "buffer_chunks": 0}, "buffer_chunks must be an integer >= 1"),
        ({"views": VIEWS, "tol": 0}, "tol must be a finite number > 0"),
        ({"views": VIEWS, "bandwidth": 0}, "bandwidth must be > 0"),
        ({"views": VIEWS, "lambda": 1}, "unknown parameter"),
    ]
    for params, message in cases:
        with pytest.raises(InvalidParams) as info:
            METHOD.resolve_params(params, WIDTH)
        assert message in info.value.detail, info.value.detail
    echoed = METHOD.resolve_params({"views": VIEWS, "alpha": {"text": 2, "image": 3}}, WIDTH)
    assert echoed["alpha"] == {"text": 2.0, "image": 3.0} and echoed["gamma"] == 1e7
    assert echoed["buffer_chunks"] == 2 and echoed["max_iter"] == 200
