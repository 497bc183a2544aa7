"""The first version of OMVFS (section III-C as first written), kept as the reference the
current one is checked against (``tests/algorithms/test_omvfs_reference.py``) and timed
against (``benchmarks/bench_omvfs.py``)."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix, State
from service.algorithms.omvfs import (
    GAMMA_SCALE,
    OMVFS,
    TINY,
    ZERO_ROW,
    OMVFSParams,
    median_distance,
    new_similarities,
    split_views,
)
from service.algorithms.omvfs.graph import buffer_rows


def reference_update(
    state: State,
    params: OMVFSParams,
    rows: Matrix,
    stop: StopRule = "change",
    trace: list[float] | None = None,
) -> State:
    """Steps 5-19 of Algorithm 1 for one chunk, literally; ``trace`` collects the objective
    after every iteration (and before the first)."""
    cfg = params
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
        old = buffer_rows(state, j, cfg.view_dims[j][1])[drop:]
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
    m_plus = sum(cfg.alphas[j] * w[j].sum(axis=1) for j in range(len(views)))
    m_minus = sum(cfg.alphas[j] * w[j] for j in range(len(views)))

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
            denom = v[j] @ a_hat + 0.5 * cfg.betas[j] * inverse_norms[:, None] * v[j]
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


def reference_initial_state(params: OMVFSParams, n_features: int) -> State:
    """The first version's initial state: the similarities as one dense ``W{j}`` per view, no
    feature moments."""
    state = METHOD.initial_state(params)
    for field in MOMENTS:
        del state[field]
    for j in range(len(params.view_dims)):
        for field in ("_data", "_indices", "_indptr"):
            state.pop(f"W{j}{field}", None)
        state[f"W{j}"] = np.zeros((0, 0))
    return state


METHOD = OMVFS()


#: The moments the first version did not keep.
MOMENTS = ("feature_rows", "feature_mean", "feature_m2")


#: ``objective``: stop when the objective's relative change is below ``tol`` (the first rule);
#: ``change``: stop when U and every V^(v) move by less than ``tol`` (relative, Frobenius).
StopRule = Literal["objective", "change"]


def literal_gamma(x_buffer: list[Any], params: OMVFSParams) -> float:
    """The paper's number, or for ``"auto"`` GAMMA_SCALE |X_[s,t]|_F^2 / K over all views."""
    given = params.as_params()
    if given["gamma"] != "auto":
        return float(given["gamma"])
    squared = sum(float(np.sum(np.asarray(sp.csr_matrix(x).toarray()) ** 2)) for x in x_buffer)
    return GAMMA_SCALE * squared / int(given["n_clusters"])


def literal_objective(
    x_buffer: list[np.ndarray],
    w: list[np.ndarray],
    u: np.ndarray,
    v: list[np.ndarray],
    a_hat: np.ndarray,
    b_hat: list[np.ndarray],
    params: OMVFSParams,
) -> float:
    """Eq. (10) on the buffer plus eq. (13)-(14) through A^ and B^, term by term."""
    gamma = literal_gamma(x_buffer, params)
    given = params.as_params()
    names = list(given["views"])
    k = u.shape[1]
    total = gamma * float(np.linalg.norm(u.T @ u - np.eye(k)) ** 2)
    for j, name in enumerate(names):
        alpha, beta = float(given["alpha"][name]), float(given["beta"][name])
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
    params: OMVFSParams,
) -> float:
    """The first version's per-iteration objective (without forming ``U V^T``), verbatim."""
    cfg = params
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
        total += float(fit) + cfg.alphas[j] * graph + history + cfg.betas[j] * sparsity
    return total
