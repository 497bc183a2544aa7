"""OMVFS's update against the first version's code and the literal formulas (Shao et al.).

``reference_update`` is the update as it was first written: one product per view, the
similarity blocks kept dense, the objective recomputed every iteration (``first_objective``,
checked here against ``literal_objective``, which forms ``U V^T`` and ``L = D - W``) and, with
``stop="objective"``, its first stopping rule. It keeps that version's state layout (dense
``W{j}``), so it also stands for the selectors stored before the similarity graph was kept
sparse. ``service.algorithms.omvfs`` reuses products between the two updates, stacks the views
and keeps the kNN graph sparse: the iterates must be the same up to floating-point
reassociation. ``benchmarks/bench_omvfs.py`` times this reference as "old".

The first version had the paper's gamma (1e7) and ranking (the row norms of V) and kept no
feature moments: the tests here run with those settings (``PAPER``), and with ``gamma: "auto"``
computed literally from the buffer (``GAMMA_SCALE |X_[s,t]|_F^2 / K``), on states without the
moments; the scale-free scores are checked in test_omvfs.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pytest
import scipy.sparse as sp

import service.algorithms.omvfs as omvfs_module
from service.algorithms.base import Matrix, State
from service.algorithms.omvfs import (
    GAMMA_SCALE,
    OMVFS,
    TINY,
    ZERO_ROW,
    median_distance,
    new_similarities,
    split_views,
)
from service.algorithms.variance import chunk_moments

METHOD = OMVFS()
#: The paper's orthogonality weight and ranking, the first version's only ones.
PAPER: dict[str, Any] = {"gamma": 1e7, "score": "paper"}
#: The moments the first version did not keep.
MOMENTS = ("feature_rows", "feature_mean", "feature_m2")
VIEWS = {"text": 40, "image": 12, "tags": 6}
WIDTH = sum(VIEWS.values())

#: ``objective``: stop when the objective's relative change is below ``tol`` (the first rule);
#: ``change``: stop when U and every V^(v) move by less than ``tol`` (relative, Frobenius).
StopRule = Literal["objective", "change"]


def literal_gamma(x_buffer: list[Any], params: Mapping[str, Any]) -> float:
    """The paper's number, or for ``"auto"`` GAMMA_SCALE |X_[s,t]|_F^2 / K over all views."""
    if params["gamma"] != "auto":
        return float(params["gamma"])
    squared = sum(float(np.sum(np.asarray(sp.csr_matrix(x).toarray()) ** 2)) for x in x_buffer)
    return GAMMA_SCALE * squared / int(params["n_clusters"])


def literal_objective(
    x_buffer: list[np.ndarray],
    w: list[np.ndarray],
    u: np.ndarray,
    v: list[np.ndarray],
    a_hat: np.ndarray,
    b_hat: list[np.ndarray],
    params: Mapping[str, Any],
) -> float:
    """Eq. (10) on the buffer plus eq. (13)-(14) through A^ and B^, term by term."""
    gamma = literal_gamma(x_buffer, params)
    names = list(params["views"])
    k = u.shape[1]
    total = gamma * float(np.linalg.norm(u.T @ u - np.eye(k)) ** 2)
    for j, name in enumerate(names):
        alpha, beta = float(params["alpha"][name]), float(params["beta"][name])
        laplacian = np.diag(w[j].sum(axis=1)) - w[j]
        total += float(np.linalg.norm(x_buffer[j] - u @ v[j].T) ** 2)
        total += alpha * float(np.trace(u.T @ laplacian @ u))
        total += float(np.trace(v[j] @ a_hat @ v[j].T) - 2 * np.trace(v[j].T @ b_hat[j]))
        total += beta * float(np.linalg.norm(v[j], axis=1).sum())
    return total


def first_objective(
    x_buffer: list[sp.csr_matrix],
    w: list[np.ndarray],
    u: np.ndarray,
    v: list[np.ndarray],
    a_hat: np.ndarray,
    b_hat: list[np.ndarray],
    params: Mapping[str, Any],
) -> float:
    """The first version's per-iteration objective (without forming ``U V^T``), verbatim."""
    cfg = omvfs_module._resolve(params, sum(x.shape[1] for x in x_buffer))
    utu = u.T @ u
    ortho = literal_gamma(x_buffer, params) * float(np.sum((utu - np.eye(utu.shape[0])) ** 2))
    total = ortho
    for j, view in enumerate(x_buffer):
        xv = np.asarray(view @ v[j])
        fit = view.multiply(view).sum() - 2 * np.sum(xv * u) + np.sum((v[j].T @ v[j]) * utu)
        degree = w[j].sum(axis=1)
        graph = float(np.sum(degree[:, None] * u * u) - np.sum(u * (w[j] @ u)))
        history = float(np.sum((v[j] @ a_hat) * v[j]) - 2 * np.sum(v[j] * b_hat[j]))
        sparsity = float(np.linalg.norm(v[j], axis=1).sum())
        total += float(fit) + cfg.alpha[j] * graph + history + cfg.beta[j] * sparsity
    return total


def literal_objective_of(state: State, params: Mapping[str, Any]) -> float:
    """``literal_objective`` at a state's final iterate (its A and B are that iterate's A^, B^)."""
    dims = list(params["views"].values())
    return literal_objective(
        [omvfs_module._buffer_rows(state, j, dim).toarray() for j, dim in enumerate(dims)],
        [similarities(state, j) for j in range(len(dims))],
        np.asarray(state["U_buffer"]),
        [np.asarray(state[f"V{j}"]) for j in range(len(dims))],
        np.asarray(state["A"]),
        [np.asarray(state[f"B{j}"]) for j in range(len(dims))],
        params,
    )


def reference_update(
    state: State,
    params: Mapping[str, Any],
    rows: Matrix,
    stop: StopRule = "change",
    trace: list[float] | None = None,
) -> State:
    """Steps 5-19 of Algorithm 1 for one chunk, literally; ``trace`` collects the objective
    after every iteration (and before the first)."""
    cfg = omvfs_module._resolve(params, rows.shape[1])
    views = split_views(rows, cfg)
    m, k = views[0].shape[0], cfg.n_clusters
    t = int(np.asarray(state["chunks_seen"])) + 1
    sizes = [int(s) for s in np.asarray(state["buffer_chunk_rows"])]
    drop = sizes[0] if len(sizes) == cfg.buffer_chunks else 0
    sizes = (sizes[1:] if drop else sizes) + [m]

    x_buffer: list[sp.csr_matrix] = []
    w: list[np.ndarray] = []
    widths: list[float] = []
    for j, view in enumerate(views):
        old = omvfs_module._buffer_rows(state, j, cfg.views[j][1])[drop:]
        sigma = float(np.asarray(state[f"bandwidth{j}"])) or median_distance(view)
        widths.append(sigma)
        to_old, among = new_similarities(view, old, sigma, cfg.neighbours)
        w_old = np.asarray(state[f"W{j}"])[drop:, drop:]
        w.append(np.block([[w_old, to_old.T], [to_old, among]]))
        x_buffer.append(sp.vstack([old, view], format="csr"))

    gamma = literal_gamma(x_buffer, params)
    u_new = np.random.default_rng([cfg.seed, t]).random((m, k)) / math.sqrt(sum(sizes))
    u = np.vstack([np.asarray(state["U_buffer"])[drop:], u_new])
    a_prev = np.asarray(state["A"])
    b_prev = [np.asarray(state[f"B{j}"]) for j in range(len(views))]
    v = [np.array(state[f"V{j}"], dtype=np.float64) for j in range(len(views))]
    m_plus = sum(cfg.alpha[j] * w[j].sum(axis=1) for j in range(len(views)))
    m_minus = sum(cfg.alpha[j] * w[j] for j in range(len(views)))

    def a_b_hat(u_t: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        return a_prev + u_t.T @ u_t, [
            b_prev[j] + np.asarray(views[j].T @ u_t) for j in range(len(views))
        ]

    def objective(a_hat: np.ndarray, b_hat: list[np.ndarray]) -> float:
        return first_objective(x_buffer, w, u, v, a_hat, b_hat, params)

    previous = objective(*a_b_hat(u[-m:]))
    if trace is not None:
        trace.append(previous)
    iterations = 0
    current = previous
    while iterations < cfg.max_iter:
        iterations += 1
        u_before, v_before = u, [vj.copy() for vj in v]
        # Eq. (20) on the buffer.
        numerator = sum(np.asarray(x_buffer[j] @ v[j]) for j in range(len(views)))
        numerator = numerator + gamma * u + m_minus @ u
        vtv = sum(v[j].T @ v[j] for j in range(len(views)))
        denominator = u @ vtv + gamma * (u @ (u.T @ u)) + m_plus[:, None] * u
        u = u * np.sqrt(numerator / np.maximum(denominator, TINY))
        # Eq. (19) per view.
        a_hat, b_hat = a_b_hat(u[-m:])
        for j in range(len(views)):
            inverse_norms = 1.0 / np.maximum(np.linalg.norm(v[j], axis=1), ZERO_ROW)
            denom = v[j] @ a_hat + 0.5 * cfg.beta[j] * inverse_norms[:, None] * v[j]
            v[j] = v[j] * np.sqrt(b_hat[j] / np.maximum(denom, TINY))
        current = objective(a_hat, b_hat)
        if trace is not None:
            trace.append(current)
        if stop == "objective":
            if abs(previous - current) <= cfg.tol * max(abs(previous), TINY):
                break
        else:
            moved = [np.linalg.norm(u - u_before) / np.linalg.norm(u_before)]
            moved += [
                np.linalg.norm(v[j] - v_before[j]) / np.linalg.norm(v_before[j])
                for j in range(len(views))
            ]
            if max(moved) <= cfg.tol:
                break
        previous = current

    a_new, b_new = a_b_hat(u[-m:])
    new: State = dict(state)
    new["chunks_seen"] = t
    new["A"] = a_new
    new["U_buffer"] = u
    new["buffer_chunk_rows"] = np.asarray(sizes, dtype=np.int64)
    new["last_iterations"] = iterations
    new["last_objective"] = float(current)
    for j in range(len(views)):
        for field in ("_data", "_indices", "_indptr"):
            new.pop(f"W{j}{field}", None)
        new[f"V{j}"] = v[j]
        new[f"B{j}"] = b_new[j]
        new[f"W{j}"] = w[j]
        new[f"X{j}_data"] = x_buffer[j].data
        new[f"X{j}_indices"] = x_buffer[j].indices.astype(np.int64)
        new[f"X{j}_indptr"] = x_buffer[j].indptr.astype(np.int64)
        new[f"bandwidth{j}"] = widths[j]
    new["weights"] = np.concatenate([np.linalg.norm(vj, axis=1) for vj in v])
    return new


def reference_initial_state(params: Mapping[str, Any], n_features: int) -> State:
    """The first version's initial state: the similarities as one dense ``W{j}`` per view, no
    feature moments."""
    state = METHOD.initial_state(params, n_features)
    for field in MOMENTS:
        del state[field]
    for j in range(len(params["views"])):
        for field in ("_data", "_indices", "_indptr"):
            state.pop(f"W{j}{field}", None)
        state[f"W{j}"] = np.zeros((0, 0))
    return state


def chunks(count: int, rows: int = 30, seed: int = 0) -> list[sp.csr_matrix]:
    """Nonnegative chunks: a sparse 'text' view, a dense 'image' view, a half-empty 'tags'."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        text = sp.random(rows, VIEWS["text"], density=0.05, random_state=rng) * 3
        image = rng.random((rows, VIEWS["image"]))
        tags = rng.random((rows, VIEWS["tags"])) * (rng.random((rows, VIEWS["tags"])) < 0.5)
        out.append(sp.hstack([text, sp.csr_matrix(image), sp.csr_matrix(tags)], format="csr"))
    return out


def similarities(state: State, j: int) -> np.ndarray:
    """``W{j}`` as a dense matrix, whichever layout the state holds."""
    if f"W{j}_indptr" in state:
        return np.asarray(omvfs_module._similarity_blocks(state, j, sparse=False))
    return np.asarray(state[f"W{j}"])


def assert_same_iterates(ours: State, reference: State) -> None:
    assert ours["last_iterations"] == reference["last_iterations"]
    for key in ("U_buffer", "A", "weights", *(f"{p}{j}" for p in "VB" for j in range(3))):
        np.testing.assert_allclose(
            np.asarray(ours[key]), np.asarray(reference[key]), rtol=1e-9, atol=1e-13, err_msg=key
        )
    for j in range(3):
        np.testing.assert_allclose(similarities(ours, j), similarities(reference, j), rtol=1e-12)
    assert ours["last_objective"] == pytest.approx(reference["last_objective"], rel=1e-9)


@pytest.mark.parametrize(
    "params",
    [
        {**PAPER, "neighbours": None, "max_iter": 40, "tol": 1e-12},
        {**PAPER, "neighbours": 5, "max_iter": 40, "tol": 1e-12},
        {**PAPER, "neighbours": 5, "alpha": {"text": 0.5, "image": 2.0, "tags": 1.0}, "beta": 0.3},
        {**PAPER, "neighbours": None, "buffer_chunks": 3},
        PAPER,
        {"score": "paper", "gamma": "auto"},
        {"score": "paper", "gamma": "auto", "neighbours": None, "max_iter": 40, "tol": 1e-12},
    ],
    ids=["dense-cap", "knn-cap", "knn-per-view", "dense-stops", "paper", "auto", "auto-cap"],
)
def test_iterates_equal_the_first_version_chunk_after_chunk(params: dict[str, Any]) -> None:
    """Same U, V, A, B (rtol 1e-9) after every one of 5 chunks, and the same number of
    iterations: at a cap, or where the stopping rule (relative change of U and of every V)
    ends the chunk, which at the paper's settings and the default tol is before the cap and not
    at once. ``"auto"``: the same with gamma computed from each chunk's buffer (on this
    structureless data U keeps moving, and some chunks reach the cap)."""
    resolved = METHOD.resolve_params({"views": VIEWS, "n_clusters": 4, **params}, WIDTH)
    ours = METHOD.initial_state(resolved, WIDTH)
    reference = reference_initial_state(resolved, WIDTH)
    iterations = []
    for chunk in chunks(5, seed=7):
        ours = METHOD.update(ours, resolved, chunk)
        reference = reference_update(reference, resolved, chunk)
        assert_same_iterates(ours, reference)
        iterations.append(int(np.asarray(ours["last_iterations"])))
    if "tol" not in params and params["gamma"] != "auto":
        assert all(1 < n < resolved["max_iter"] for n in iterations), iterations


def test_states_stored_in_the_first_layout_are_read_and_rewritten() -> None:
    """A kNN selector stored before the graph was kept sparse holds dense ``W{j}``, no feature
    moments, and params without ``score`` (gamma 1e7): the update reads it, continues exactly
    as the first version would (the paper's ranking), writes the sparse layout and starts the
    moments from the rows its buffer held."""
    resolved = METHOD.resolve_params({"views": VIEWS, "n_clusters": 3, "neighbours": 4}, WIDTH)
    resolved = {**resolved, "gamma": 1e7}
    del resolved["score"]
    data = chunks(4, seed=8)
    stored = reference_initial_state(resolved, WIDTH)
    for chunk in data[:2]:
        stored = reference_update(stored, resolved, chunk)
    assert not set(MOMENTS) & set(stored)
    ours = METHOD.update(stored, resolved, data[2])
    reference = reference_update(stored, resolved, data[2])
    assert_same_iterates(ours, reference)
    assert "W0" not in ours and np.asarray(ours["W0_indptr"]).shape == (61,)
    assert set(ours) == set(METHOD.initial_state(resolved, WIDTH))
    cfg = omvfs_module._resolve(resolved, WIDTH)
    held = np.vstack([sp.hstack(split_views(chunk, cfg)).toarray() for chunk in data[:3]])
    rows, mean, m2 = chunk_moments(held)
    assert ours["feature_rows"] == rows == 90
    np.testing.assert_allclose(ours["feature_mean"], mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ours["feature_m2"], m2, rtol=1e-10, atol=1e-14)
    assert_same_iterates(
        METHOD.update(ours, resolved, data[3]), reference_update(reference, resolved, data[3])
    )


@pytest.mark.parametrize("neighbours", [None, 6])
def test_objective_is_the_literal_one_and_never_increases(neighbours: int | None) -> None:
    resolved = METHOD.resolve_params(
        {
            "views": VIEWS,
            "n_clusters": 3,
            "max_iter": 60,
            "tol": 1e-14,
            "neighbours": neighbours,
            **PAPER,
        },
        WIDTH,
    )
    ours = METHOD.initial_state(resolved, WIDTH)
    reference = reference_initial_state(resolved, WIDTH)
    for chunk in chunks(4, seed=3):
        trace: list[float] = []
        reference = reference_update(reference, resolved, chunk, trace=trace)
        ours = METHOD.update(ours, resolved, chunk)
        values = np.asarray(trace)
        assert values.size == 61
        increases = np.diff(values) / np.abs(values[:-1])
        assert increases.max() <= 1e-9, f"objective went up by {increases.max():.2e}"
        assert values[-1] < values[0]
        literal = literal_objective_of(reference, resolved)
        assert values[-1] == pytest.approx(literal, rel=1e-9)
        assert ours["last_objective"] == pytest.approx(
            literal_objective_of(ours, resolved), rel=1e-9
        )
        assert ours["last_objective"] == pytest.approx(literal, rel=1e-9)


def test_the_first_stopping_rule_ends_chunks_where_the_objective_settles() -> None:
    """``stop="objective"`` is the first rule; on data where the objective does settle it ends
    chunks early, so the benchmark's "old" column is that rule, not a cap written in."""
    resolved = METHOD.resolve_params(
        {
            "views": VIEWS,
            "n_clusters": 3,
            "gamma": 10.0,
            "tol": 1e-4,
            "neighbours": None,
            "score": "paper",
        },
        WIDTH,
    )
    state = reference_initial_state(resolved, WIDTH)
    for chunk in chunks(2, seed=5):
        state = reference_update(state, resolved, chunk, stop="objective")
        assert 1 < int(np.asarray(state["last_iterations"])) < 200
