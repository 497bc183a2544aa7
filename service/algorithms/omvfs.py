"""OMVFS: online unsupervised multi-view feature selection (Shao et al., Algorithm 1).

Every chunk ``X_t`` has the same rows in every view ``v`` (``m x D_v``, nonnegative). The state
between chunks (section III-C, Fig. 2), all small and all persisted:

* ``A_t = sum_i U_i^T U_i`` (``K x K``, eq. (16)) and ``B_t^(v) = sum_i X_i^(v)T U_i``
  (``D_v x K``, eq. (17)): everything the past contributes to the V update;
* ``V^(v)`` (``D_v x K``), warm-started from chunk to chunk (step 1 initialises it once);
* the buffer of the last ``s`` chunks: their rows ``X_[s,t]^(v)`` (kept sparse), their cluster
  indicators ``U_[s,t]`` and their similarity blocks ``W_[s,t]^(v)``, so that a new chunk only
  adds the ``m x sm`` new similarities (Fig. 2).

Per chunk (steps 5-17): slide the buffer, initialise ``U_t`` (seeded, nonnegative), then
alternate until the relative change of the objective is below ``tol`` (or ``max_iter``):

* eq. (20): ``U <- U * sqrt((sum_v X^(v) V^(v) + gamma U + M^- U) /
  (U sum_v V^(v)T V^(v) + gamma U U^T U + M^+ U))`` over the buffer, with
  ``M = sum_v alpha_v L^(v)``, ``L = D - W``, ``M^+ = (|M| + M) / 2``, ``M^- = (|M| - M) / 2``.
  The paper's lambda in the numerator is gamma: it is the ``-2 gamma U`` of the gradient (11).
  ``W`` is nonnegative with a zero diagonal, so ``M^+`` is the diagonal ``sum_v alpha_v D^(v)``
  and ``M^-`` is ``sum_v alpha_v W^(v)`` (no n x n absolute values are formed);
* eq. (19) per view: ``V <- V * sqrt((B_{t-1} + X_t^T U_t) /
  (V (A_{t-1} + U_t^T U_t) + beta / 2 D V))`` with ``D = diag(1 / |v_j|)``; a zero row gets
  ``D_jj = 1 / ZERO_ROW`` (it stays zero, the multiplicative update cannot revive it anyway).

Then ``A_t``, ``B_t`` fold in the chunk with its final ``U_t`` (steps 16-17) and the features of
each view are ranked by the row norms of ``V^(v)`` (step 19).

The objective monitored for ``tol`` is the sum of the two sub-problems each update descends
(eq. (10) on the buffer for U, eq. (13)-(14) through A and B for V)::

    sum_v ( |X_[s,t] - U V^T|_F^2 + alpha_v tr(U^T L U) + gamma |U^T U - I|_F^2 / n_v
            + tr(V A^ V^T) - 2 tr(V^T B^) + beta_v |V|_{2,1} )

with ``A^ = A_{t-1} + U_t^T U_t`` and ``B^ = B_{t-1} + X_t^T U_t``.

Similarity (the paper: "we used the Gaussian kernel", no bandwidth given): ``W_ij =
exp(-|x_i - x_j|^2 / (2 sigma^2))`` with ``sigma`` per view, by default the median distance
between the rows of the first chunk (stored with the state, so every chunk uses the same
kernel: a data-driven scale, not a silent constant); ``neighbours = k`` keeps, for each new
row, only its k most similar buffer rows (symmetrically), as in the usual kNN graph.
Rows are scaled to unit L2 norm per view by default (``normalize_rows``), so that no view
dominates the shared U by its scale alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix, State, Stream
from service.algorithms.params import require_known
from service.errors import InvalidInput, InvalidParams

__all__ = ["OMVFS", "objective_terms"]

_PARAMS = (
    "views",
    "n_clusters",
    "buffer_chunks",
    "alpha",
    "beta",
    "gamma",
    "max_iter",
    "tol",
    "bandwidth",
    "neighbours",
    "normalize_rows",
    "seed",
)
#: Floor of the denominators of the multiplicative updates (they are sums of nonnegatives).
TINY = 1e-300
#: Row norm of V below which ``D_jj`` is taken as ``1 / ZERO_ROW``.
ZERO_ROW = 1e-12


@dataclass(frozen=True)
class _Config:
    views: list[tuple[str, int]]
    n_clusters: int
    buffer_chunks: int
    alpha: list[float]
    beta: list[float]
    gamma: float
    max_iter: int
    tol: float
    bandwidth: list[float] | None
    neighbours: int | None
    normalize_rows: bool
    seed: int

    @property
    def offsets(self) -> list[int]:
        out = [0]
        for _, dim in self.views:
            out.append(out[-1] + dim)
        return out

    def as_params(self) -> dict[str, Any]:
        return {
            "views": {name: dim for name, dim in self.views},
            "n_clusters": self.n_clusters,
            "buffer_chunks": self.buffer_chunks,
            "alpha": {name: a for (name, _), a in zip(self.views, self.alpha, strict=True)},
            "beta": {name: b for (name, _), b in zip(self.views, self.beta, strict=True)},
            "gamma": self.gamma,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "bandwidth": None
            if self.bandwidth is None
            else {name: b for (name, _), b in zip(self.views, self.bandwidth, strict=True)},
            "neighbours": self.neighbours,
            "normalize_rows": self.normalize_rows,
            "seed": self.seed,
        }


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        raise InvalidParams(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _number(name: str, value: Any, minimum: float = 0.0, strict: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(float(value))
    if not ok or float(value) < minimum or (strict and float(value) == minimum):
        bound = f"> {minimum}" if strict else f">= {minimum}"
        raise InvalidParams(f"{name} must be a finite number {bound}; got {value!r}")
    return float(value)


def _per_view(name: str, value: Any, views: list[tuple[str, int]], default: float) -> list[float]:
    """A number for every view, or an object ``{view: number}`` covering every view."""
    if value is None:
        return [default] * len(views)
    if isinstance(value, Mapping):
        names = [v for v, _ in views]
        if set(value) != set(names):
            raise InvalidParams(
                f"{name} must give every view a value: expected keys {names}; got {sorted(value)}"
            )
        return [_number(f"{name}[{v!r}]", value[v]) for v in names]
    return [_number(name, value)] * len(views)


def _resolve(params: Mapping[str, Any], n_features: int) -> _Config:
    # "views" is filled in by the service from the selector's views: not listed to users.
    params = require_known(params, _PARAMS, "omvfs", _PARAMS[1:])
    raw_views = params.get("views")
    if not isinstance(raw_views, Mapping) or not raw_views:
        raise InvalidParams(
            'omvfs needs "views": {"<view name>": <number of features>, ...} (at least one)'
        )
    views = [(str(name), _positive_int(f"views[{name!r}]", dim)) for name, dim in raw_views.items()]
    if sum(dim for _, dim in views) != n_features:
        raise InvalidParams(
            f"the views add up to {sum(d for _, d in views)} features; expected {n_features}"
        )
    k = _positive_int("n_clusters", params.get("n_clusters", 10))
    bandwidth = params.get("bandwidth")
    neighbours = params.get("neighbours")
    normalize = params.get("normalize_rows", True)
    if not isinstance(normalize, bool):
        raise InvalidParams(f"normalize_rows must be true or false; got {normalize!r}")
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= int(seed) < 2**63:
        raise InvalidParams(f"seed must be an integer in [0, 2**63); got {seed!r}")
    widths = None
    if bandwidth is not None:
        widths = _per_view("bandwidth", bandwidth, views, 0.0)
        if any(w <= 0 for w in widths):
            raise InvalidParams(f"bandwidth must be > 0 for every view; got {bandwidth!r}")
    return _Config(
        views=views,
        n_clusters=k,
        buffer_chunks=_positive_int("buffer_chunks", params.get("buffer_chunks", 2)),
        alpha=_per_view("alpha", params.get("alpha"), views, 1.0),
        beta=_per_view("beta", params.get("beta"), views, 1.0),
        gamma=_number("gamma", params.get("gamma", 1e7)),
        max_iter=_positive_int("max_iter", params.get("max_iter", 200)),
        tol=_number("tol", params.get("tol", 1e-4), strict=True),
        bandwidth=widths,
        neighbours=None if neighbours is None else _positive_int("neighbours", neighbours),
        normalize_rows=normalize,
        seed=int(seed),
    )


# -- the pieces of one chunk --------------------------------------------------------------------


def split_views(rows: Matrix, cfg: _Config) -> list[sp.csr_matrix]:
    """The chunk's views (``m x D_v`` each, CSR), rows scaled to unit norm if configured."""
    csr = sp.csr_matrix(rows, dtype=np.float64)
    offsets = cfg.offsets
    out = []
    for j in range(len(cfg.views)):
        view = csr[:, offsets[j] : offsets[j + 1]].tocsr()
        if view.nnz and view.data.min() < 0:
            raise InvalidInput(f"view '{cfg.views[j][0]}' has negative values; NMF needs >= 0")
        if cfg.normalize_rows:
            norms = np.sqrt(np.asarray(view.multiply(view).sum(axis=1)).ravel())
            norms[norms == 0] = 1.0
            view = sp.csr_matrix(sp.diags(1.0 / norms) @ view)
        out.append(view)
    return out


def squared_distances(a: sp.csr_matrix, b: sp.csr_matrix) -> np.ndarray:
    """``|a_i - b_j|^2`` for every pair of rows (sparse-friendly, clipped at 0)."""
    aa = np.asarray(a.multiply(a).sum(axis=1)).ravel()
    bb = np.asarray(b.multiply(b).sum(axis=1)).ravel()
    cross = np.asarray((a @ b.T).toarray())
    return np.maximum(aa[:, None] + bb[None, :] - 2 * cross, 0.0)


def median_distance(rows: sp.csr_matrix) -> float:
    """The default bandwidth: median distance between distinct rows (1.0 if all coincide)."""
    dist = np.sqrt(squared_distances(rows, rows))
    upper = dist[np.triu_indices(rows.shape[0], k=1)]
    positive = upper[upper > 0]
    return float(np.median(positive)) if positive.size else 1.0


def new_similarities(
    new: sp.csr_matrix, old: sp.csr_matrix, sigma: float, neighbours: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian similarities of the new rows to the old buffer rows and among themselves."""
    scale = 2.0 * sigma * sigma
    to_old = (
        np.exp(-squared_distances(new, old) / scale)
        if old.shape[0]
        else np.zeros((new.shape[0], 0))
    )
    among = np.exp(-squared_distances(new, new) / scale)
    np.fill_diagonal(among, 0.0)
    if neighbours is not None:
        both = np.hstack([to_old, among])
        if both.shape[1] > neighbours:
            cut = np.partition(both, -neighbours, axis=1)[:, -neighbours][:, None]
            both = np.where(both >= cut, both, 0.0)
        to_old, among = both[:, : to_old.shape[1]], both[:, to_old.shape[1] :]
        among = np.maximum(among, among.T)  # symmetric within the new rows
    return to_old, among


def objective_terms(
    x_buffer: list[sp.csr_matrix],
    w: list[np.ndarray],
    u: np.ndarray,
    v: list[np.ndarray],
    a_hat: np.ndarray,
    b_hat: list[np.ndarray],
    cfg: _Config,
) -> float:
    """The monitored objective (module docstring), computed without forming ``U V^T``."""
    utu = u.T @ u
    ortho = cfg.gamma * float(np.sum((utu - np.eye(utu.shape[0])) ** 2))
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


class OMVFS:
    """Online multi-view feature selection (Algorithm 1) over chunks of rows of every view.

    A chunk is the views side by side (``m x sum_v D_v``, in the order of ``params["views"]``);
    the applier gives one log entry at a time (``coalesces = False``): the buffer holds chunks
    as the producers sent them.
    """

    name = "omvfs"
    stream: Stream = "rows"
    score_field = "weights"
    coalesces = False
    labelled = False

    def resolve_params(self, params: Mapping[str, Any], n_features: int) -> dict[str, Any]:
        return _resolve(params, n_features).as_params()

    def initial_state(self, params: Mapping[str, Any], n_features: int) -> State:
        cfg = _resolve(params, n_features)
        k = cfg.n_clusters
        rng = np.random.default_rng([cfg.seed, 0])
        state: State = {
            "chunks_seen": 0,
            "A": np.zeros((k, k)),
            "U_buffer": np.zeros((0, k)),
            "buffer_chunk_rows": np.zeros(0, dtype=np.int64),
            "last_iterations": 0,
            "last_objective": 0.0,
        }
        weights = []
        for j, (_, dim) in enumerate(cfg.views):
            v = rng.random((dim, k))  # step 1: V initialised randomly (nonnegative)
            state[f"V{j}"] = v
            state[f"B{j}"] = np.zeros((dim, k))
            state[f"W{j}"] = np.zeros((0, 0))
            state[f"X{j}_data"] = np.zeros(0)
            state[f"X{j}_indices"] = np.zeros(0, dtype=np.int64)
            state[f"X{j}_indptr"] = np.zeros(1, dtype=np.int64)
            state[f"bandwidth{j}"] = 0.0 if cfg.bandwidth is None else cfg.bandwidth[j]
            weights.append(np.linalg.norm(v, axis=1))
        state["weights"] = np.concatenate(weights)
        return state

    def update(self, state: State, params: Mapping[str, Any], rows: Matrix) -> State:
        """Steps 5-19 of Algorithm 1 for one chunk."""
        cfg = _resolve(params, rows.shape[1])
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
            old = _buffer_rows(state, j, cfg.views[j][1])[drop:]
            sigma = float(np.asarray(state[f"bandwidth{j}"])) or median_distance(view)
            widths.append(sigma)
            to_old, among = new_similarities(view, old, sigma, cfg.neighbours)
            w_old = np.asarray(state[f"W{j}"])[drop:, drop:]
            w.append(np.block([[w_old, to_old.T], [to_old, among]]))
            x_buffer.append(sp.vstack([old, view], format="csr"))

        # Step 6: U_t initialised randomly (seeded per chunk), the rest of the buffer warm.
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

        previous = objective_terms(x_buffer, w, u, v, *a_b_hat(u[-m:]), cfg)
        iterations = 0
        current = previous
        while iterations < cfg.max_iter:
            iterations += 1
            # Eq. (20) on the buffer.
            numerator = sum(np.asarray(x_buffer[j] @ v[j]) for j in range(len(views)))
            numerator = numerator + cfg.gamma * u + m_minus @ u
            vtv = sum(v[j].T @ v[j] for j in range(len(views)))
            denominator = u @ vtv + cfg.gamma * (u @ (u.T @ u)) + m_plus[:, None] * u
            u = u * np.sqrt(numerator / np.maximum(denominator, TINY))
            # Eq. (19) per view, with A^ and B^ from the chunk's current U_t.
            a_hat, b_hat = a_b_hat(u[-m:])
            for j in range(len(views)):
                inverse_norms = 1.0 / np.maximum(np.linalg.norm(v[j], axis=1), ZERO_ROW)
                denom = v[j] @ a_hat + 0.5 * cfg.beta[j] * inverse_norms[:, None] * v[j]
                v[j] = v[j] * np.sqrt(b_hat[j] / np.maximum(denom, TINY))
            current = objective_terms(x_buffer, w, u, v, a_hat, b_hat, cfg)
            if abs(previous - current) <= cfg.tol * max(abs(previous), TINY):
                break
            previous = current

        # Steps 16-17 with the final U_t; slide the buffer state.
        a_new, b_new = a_b_hat(u[-m:])
        new: State = dict(state)
        new["chunks_seen"] = t
        new["A"] = a_new
        new["U_buffer"] = u
        new["buffer_chunk_rows"] = np.asarray(sizes, dtype=np.int64)
        new["last_iterations"] = iterations
        new["last_objective"] = float(current)
        for j in range(len(views)):
            new[f"V{j}"] = v[j]
            new[f"B{j}"] = b_new[j]
            new[f"W{j}"] = w[j]
            new[f"X{j}_data"] = x_buffer[j].data
            new[f"X{j}_indices"] = x_buffer[j].indices.astype(np.int64)
            new[f"X{j}_indptr"] = x_buffer[j].indptr.astype(np.int64)
            new[f"bandwidth{j}"] = widths[j]
        new["weights"] = np.concatenate([np.linalg.norm(vj, axis=1) for vj in v])  # step 19
        return new

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        """Row norms of every ``V^(v)``, the views side by side (Algorithm 1, step 19)."""
        return np.array(state["weights"], dtype=np.float64)


def _buffer_rows(state: State, j: int, dim: int) -> sp.csr_matrix:
    indptr = np.asarray(state[f"X{j}_indptr"], dtype=np.int64)
    return sp.csr_matrix(
        (
            np.asarray(state[f"X{j}_data"], dtype=np.float64),
            np.asarray(state[f"X{j}_indices"], dtype=np.int64),
            indptr,
        ),
        shape=(indptr.size - 1, dim),
    )
