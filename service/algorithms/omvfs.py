"""OMVFS: online unsupervised multi-view feature selection (Shao et al., Algorithm 1).

Every chunk ``X_t`` has the same rows in every view ``v`` (``m x D_v``, nonnegative). The state
between chunks (section III-C, Fig. 2), all small and all persisted:

* ``A_t = sum_i U_i^T U_i`` (``K x K``, eq. (16)) and ``B_t^(v) = sum_i X_i^(v)T U_i``
  (``D_v x K``, eq. (17)): everything the past contributes to the V update;
* ``V^(v)`` (``D_v x K``), warm-started from chunk to chunk (step 1 initialises it once);
* the buffer of the last ``s`` chunks: their rows ``X_[s,t]^(v)`` (kept sparse), their cluster
  indicators ``U_[s,t]`` and their similarity blocks ``W_[s,t]^(v)``, so that a new chunk only
  adds the ``m x sm`` new similarities (Fig. 2). A kNN graph is stored as CSR parts
  (``W{j}_data``, ``W{j}_indices``, ``W{j}_indptr``: at most about ``2 k s m`` entries per
  view), the dense kernel as one ``sm x sm`` array ``W{j}``; states stored before the graph
  was kept sparse (dense ``W{j}`` with ``neighbours`` set) are read and rewritten sparse.

Per chunk (steps 5-17): slide the buffer, initialise ``U_t`` (seeded, nonnegative), then
alternate until U and every V^(v) settle (below) or ``max_iter``:

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

How one iteration is computed (the iterates are those of the formulas above, up to the order of
floating-point sums): what does not change within a chunk is formed once (``_Buffer``: the
views side by side, mostly-dense views as plain arrays since BLAS beats a CSR product from about
10 % nonzeros on, ``M^-`` and ``M^+``, ``|X|_F^2``); the products ``sum_v X^(v) V^(v)``,
``sum_v V^(v)T V^(v)``, ``U^T U``, ``M^- U`` and the row norms of V are formed once per
iteration (``_Iterate``) and serve the next U and V updates, the stopping rule and the
objective; eq. (19) runs on all views at once (``A^`` is shared, ``beta_v`` is per row).

Stopping rule: after each iteration, the relative change ``max(|U' - U|_F / |U|_F,
max_v |V'^(v) - V^(v)|_F / |V^(v)|_F) <= tol`` (default 1e-3). The first rule, the relative
change of the objective below 1e-4, was never reached: the objective is dominated by the
orthogonality penalty ``gamma |U^T U - I|_F^2`` (gamma = 1e7), which keeps creeping down by
about 1 % per iteration at iteration 200 (still 1e-5 at iteration 1000, on UCI mfeat) while
the rankings no longer move; every chunk ran the full ``max_iter``. At tol 1e-3 the chunks of
the quality test stop after 54-121 iterations (72 on average) with the top-10 of every view in
the same order as after 1000 iterations and 99.7 % of the top-50 sets the same.

The objective (reported as ``last_objective``) is the sum of the two sub-problems each update
descends (eq. (10) on the buffer for U, eq. (13)-(14) through A and B for V)::

    sum_v ( |X_[s,t] - U V^T|_F^2 + alpha_v tr(U^T L U) + tr(V A^ V^T) - 2 tr(V^T B^)
            + beta_v |V|_{2,1} ) + gamma |U^T U - I|_F^2

with ``A^ = A_{t-1} + U_t^T U_t`` and ``B^ = B_{t-1} + X_t^T U_t``, formed from the cached
products (``|X - U V^T|_F^2 = |X|_F^2 - 2 tr(V^T X^T U) + tr(V^T V U^T U)``).

Similarity (the paper: "we used the Gaussian kernel", no bandwidth given): ``W_ij =
exp(-|x_i - x_j|^2 / (2 sigma^2))`` with ``sigma`` per view, by default the median distance
between the rows of the first chunk (stored with the state, so every chunk uses the same
kernel: a data-driven scale, not a silent constant). By default (``neighbours = 10``) each new
row keeps only its 10 most similar buffer rows (symmetrically): the Gaussian-weighted kNN graph
of graph-regularised NMF (Cai et al., the paper's reference [21]); ``neighbours: null`` keeps
the dense kernel. On UCI mfeat both give the same NMI at every budget of the quality test: at
gamma = 1e7 the graph moves U by about 0.1 % (alpha = 0 does the same), while the dense blocks
cost ``(s m)^2`` doubles per view of state.
Rows are scaled to unit L2 norm per view by default (``normalize_rows``), so that no view
dominates the shared U by its scale alone.

Ranking (``score``). Step 19 ranks by the row norm of ``V^(v)``. On nonnegative data that norm
follows each feature's column mean (Spearman 0.997 on UCI mfeat): ``V`` must reproduce the
magnitude of a feature before anything else, so the paper's ranking favours large-valued
features and clusters no better than random subsets (``tests/algorithms/test_omvfs_quality.py``).
Two scale-free scores use a few running numbers per feature kept in the state (its count, mean
and M2 as the factorisation sees it, Welford/Chan as in ``service.algorithms.variance``):

* ``explained`` (default): the share of a feature's variance that the cluster model explains,
  ``var_j / (var_j + r_j)`` with ``r_j = |x_j - U V_j^T|^2 / n`` the mean squared residual over
  all rows seen, each chunk with its final ``U_t``, computed from ``A_t`` and ``B_t`` (steps
  16-17) without the rows: ``r_j = (|x_j|^2 - 2 B_j . V_j + V_j A_t V_j^T) / n``;
* ``scaled``: the row norm of ``V^(v)`` over the feature's root mean square;
* ``paper``: the row norm of ``V^(v)`` (step 19), kept for fidelity.

Orthogonality weight (``gamma``). At the paper's gamma = 1e7 the penalty ``gamma |U^T U -
I|_F^2`` dwarfs the fit term (``|X|_F^2`` is the number of rows with unit rows), so U hardly
leaves its random start and the clusters barely inform V. ``gamma: "auto"`` (default) ties it
to the scale of the fit term of each chunk: ``0.1 |X_[s,t]|_F^2 / K`` (``GAMMA_SCALE``).
Selectors created before these defaults keep the ``gamma`` their params were resolved to and
rank by ``paper`` (their params have no ``score``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import ChunkKind, Matrix, MethodBase, State
from service.algorithms.params import (
    boolean,
    integer,
    integer_param,
    number,
    one_of,
    params_object,
    per_view,
    real_param,
    require_known,
)
from service.algorithms.variance import chunk_moments, combine
from service.errors import Inconsistent, InvalidInput, InvalidParams

__all__ = ["OMVFS"]

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
    "score",
    "seed",
)
#: Floor of the denominators of the multiplicative updates (they are sums of nonnegatives).
TINY = 1e-300
#: Row norm of V below which ``D_jj`` is taken as ``1 / ZERO_ROW``.
ZERO_ROW = 1e-12
#: A view at least this dense is multiplied as a plain array: on a 400 x 240 view at K = 10,
#: BLAS beats scipy's CSR product from about 10 % nonzeros on (and is 5x faster at 60 %).
DENSE_FROM = 0.1
#: ... unless its dense copy would exceed this many entries (256 MiB).
DENSE_AT_MOST = 2**25
#: Default k of the similarity graph (``neighbours``; null keeps the dense kernel).
NEIGHBOURS = 10
#: Default ``tol``: the relative change of U and of each V^(v) per iteration to stop at.
TOL = 1e-3
#: ``gamma: "auto"`` is this times ``|X_[s,t]|_F^2 / K``, the scale of the fit term (below).
GAMMA_SCALE = 0.1
#: The rankings ``score`` offers (module docstring); the first is the default.
SCORES = ("explained", "scaled", "paper")
#: The ranking of selectors whose stored params have no ``score`` (created before it existed).
SCORE_BEFORE_CHOICE = "paper"


@dataclass(frozen=True)
class _Config:
    views: list[tuple[str, int]]
    n_clusters: int
    buffer_chunks: int
    alpha: list[float]
    beta: list[float]
    #: None: ``"auto"``, tied to the fit term per chunk (``gamma_for``).
    gamma: float | None
    max_iter: int
    tol: float
    bandwidth: list[float] | None
    neighbours: int | None
    normalize_rows: bool
    score: str
    seed: int

    def gamma_for(self, squared_norm: float) -> float:
        """The orthogonality weight of a chunk whose buffer holds ``|X_[s,t]|_F^2``."""
        if self.gamma is not None:
            return self.gamma
        return GAMMA_SCALE * squared_norm / self.n_clusters

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
            "gamma": "auto" if self.gamma is None else self.gamma,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "bandwidth": None
            if self.bandwidth is None
            else {name: b for (name, _), b in zip(self.views, self.bandwidth, strict=True)},
            "neighbours": self.neighbours,
            "normalize_rows": self.normalize_rows,
            "score": self.score,
            "seed": self.seed,
        }


def _number(name: str, value: Any, minimum: float = 0.0, strict: bool = False) -> float:
    bound = f"> {minimum}" if strict else f">= {minimum}"
    try:
        number = real_param(name, value)
    except InvalidParams:
        number = math.nan
    if not number >= minimum or (strict and number == minimum):
        raise InvalidParams(f"{name} must be a finite number {bound}; got {value!r}")
    return number


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


def _resolve(
    params: Mapping[str, Any], n_features: int, score_if_absent: str = SCORE_BEFORE_CHOICE
) -> _Config:
    """The configuration of stored (resolved) params; ``score_if_absent`` is what params
    without ``score`` rank by: stored ones were created before the choice existed and keep the
    paper's ranking, a creation (``resolve_params``) gets the default."""
    # "views" is filled in by the service from the selector's views: not listed to users.
    params = require_known(params, _PARAMS, "omvfs", _PARAMS[1:])
    raw_views = params.get("views")
    if not isinstance(raw_views, Mapping) or not raw_views:
        raise InvalidParams(
            'omvfs needs "views": {"<view name>": <number of features>, ...} (at least one)'
        )
    views = [
        (str(name), integer_param(f"views[{name!r}]", dim, 1)) for name, dim in raw_views.items()
    ]
    if sum(dim for _, dim in views) != n_features:
        raise InvalidParams(
            f"the views add up to {sum(d for _, d in views)} features; expected {n_features}"
        )
    k = integer_param("n_clusters", params.get("n_clusters", 10), 1)
    bandwidth = params.get("bandwidth")
    # Absent: the default kNN graph; null: the dense kernel (what selectors created before
    # the kNN default hold in their resolved params, so they keep their kernel).
    neighbours = params.get("neighbours", NEIGHBOURS)
    normalize = params.get("normalize_rows", True)
    if not isinstance(normalize, bool):
        raise InvalidParams(f"normalize_rows must be true or false; got {normalize!r}")
    seed = params.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, Integral) or not 0 <= int(seed) < 2**63:
        raise InvalidParams(f"seed must be an integer in [0, 2**63); got {seed!r}")
    score = params.get("score", score_if_absent)
    if score not in SCORES:
        raise InvalidParams(f"score must be one of {', '.join(SCORES)}; got {score!r}")
    gamma = params.get("gamma", "auto")
    widths = None
    if bandwidth is not None:
        widths = _per_view("bandwidth", bandwidth, views, 0.0)
        if any(w <= 0 for w in widths):
            raise InvalidParams(f"bandwidth must be > 0 for every view; got {bandwidth!r}")
    return _Config(
        views=views,
        n_clusters=k,
        buffer_chunks=integer_param("buffer_chunks", params.get("buffer_chunks", 2), 1),
        alpha=_per_view("alpha", params.get("alpha"), views, 1.0),
        beta=_per_view("beta", params.get("beta"), views, 1.0),
        gamma=None if gamma == "auto" else _number('gamma ("auto" or a number)', gamma),
        max_iter=integer_param("max_iter", params.get("max_iter", 200), 1),
        tol=_number("tol", params.get("tol", TOL), strict=True),
        bandwidth=widths,
        neighbours=None if neighbours is None else integer_param("neighbours", neighbours, 1),
        normalize_rows=normalize,
        score=str(score),
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
    if _is_dense(a) and _is_dense(b):  # BLAS: several times faster than a CSR product here
        cross = a.toarray() @ b.toarray().T
    else:
        cross = np.asarray((a @ b.T).toarray())
    return np.asarray(np.maximum(aa[:, None] + bb[None, :] - 2 * cross, 0.0))


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


def _similarity_blocks(state: State, j: int, sparse: bool) -> np.ndarray | sp.csr_matrix:
    """The buffer's similarity matrix ``W_[s,t-1]^(v)`` as the state holds it.

    A kNN graph is kept as CSR parts (``W{j}_data``, ``W{j}_indices``, ``W{j}_indptr``), the
    dense kernel as one array ``W{j}``; states written before the kNN graph was stored sparse
    hold ``W{j}`` dense in both cases, and are read (and rewritten) in the current layout.
    """
    if f"W{j}_indptr" in state:
        indptr = np.asarray(state[f"W{j}_indptr"], dtype=np.int64)
        size = indptr.size - 1
        blocks = sp.csr_matrix(
            (
                np.asarray(state[f"W{j}_data"], dtype=np.float64),
                np.asarray(state[f"W{j}_indices"], dtype=np.int64),
                indptr,
            ),
            shape=(size, size),
        )
        return blocks if sparse else blocks.toarray()
    dense = np.asarray(state[f"W{j}"], dtype=np.float64)
    return sp.csr_matrix(dense) if sparse else dense


def _similarity_fields(w: np.ndarray | sp.csr_matrix, j: int) -> State:
    """The state fields of one view's similarity matrix (see ``_similarity_blocks``)."""
    if isinstance(w, np.ndarray):
        return {f"W{j}": w}
    return {
        f"W{j}_data": w.data,
        f"W{j}_indices": w.indices.astype(np.int64),
        f"W{j}_indptr": w.indptr.astype(np.int64),
    }


@dataclass(frozen=True)
class _Buffer:
    """What the iterations of one chunk read and never change (the ``[s,t]`` quantities).

    The features of all views are stacked into one "work" order, the mostly-dense views first
    and then the sparse ones, so that ``sum_v X^(v) V^(v)`` is one dense product plus one
    sparse product (not one per view), and the V update (19), which is row-wise with a shared
    ``A^``, runs on all views at once. ``V`` and ``B`` are stacked in the same order.
    """

    #: The buffer's mostly-dense views side by side (``n x D_dense``, plain arrays: BLAS on a
    #: 60 %-dense view is several times faster than a CSR product).
    dense: np.ndarray
    #: The remaining, sparse, views side by side (``n x D_sparse``, CSR).
    sparse: sp.csr_matrix
    #: The chunk's rows ``X_t`` of the dense views and ``X_t^T`` of the sparse ones, for
    #: ``B^ = B_{t-1} + X_t^T U_t``.
    dense_new: np.ndarray
    sparse_new_t: sp.csr_matrix
    #: ``M^- = sum_v alpha_v W^(v)`` (dense, or CSR for a kNN graph) and the diagonal of
    #: ``M^+ = sum_v alpha_v D^(v)`` as a column.
    similarities: np.ndarray | sp.csr_matrix
    degrees: np.ndarray
    #: ``sum_v |X_[s,t]^(v)|_F^2``: the constant of the fit term.
    squared_norm: float
    #: ``beta_v`` of the view every work row belongs to, and half of it (eq. (19)).
    beta: np.ndarray
    half_beta: np.ndarray
    #: First work row of every view, in work order (``views`` gives their view indices).
    starts: np.ndarray
    views: list[int]

    def times(self, v: np.ndarray) -> np.ndarray:
        """``sum_v X_[s,t]^(v) V^(v)``."""
        split = self.dense.shape[1]
        if not self.sparse.shape[1]:
            return np.asarray(self.dense @ v)
        if not split:
            return np.asarray(self.sparse @ v)
        return np.asarray(self.dense @ v[:split] + self.sparse @ v[split:])

    def new_t_times(self, u_t: np.ndarray) -> np.ndarray:
        """``X_t^T U_t`` of every view, stacked in work order."""
        parts = []
        if self.dense_new.shape[1]:
            parts.append((u_t.T @ self.dense_new).T)  # BLAS is faster this way round
        if self.sparse_new_t.shape[0]:
            parts.append(np.asarray(self.sparse_new_t @ u_t))
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    def stack(self, per_view: list[np.ndarray]) -> np.ndarray:
        """Per-view ``D_v x K`` matrices (``V``, ``B``) stacked in work order."""
        return np.vstack([per_view[j] for j in self.views])

    def unstack(self, stacked: np.ndarray) -> list[np.ndarray]:
        """The inverse of ``stack``: one ``D_v x K`` matrix per view, in view order."""
        out: list[np.ndarray] = [np.zeros(0)] * len(self.views)
        ends = [*self.starts[1:].tolist(), stacked.shape[0]]
        for j, start, end in zip(self.views, self.starts.tolist(), ends, strict=True):
            out[j] = np.array(stacked[start:end])
        return out


def _is_dense(view: sp.csr_matrix) -> bool:
    """Multiply this view as a plain array: at least ``DENSE_FROM`` nonzero, and not huge."""
    entries = view.shape[0] * view.shape[1]
    return bool(entries <= DENSE_AT_MOST and view.nnz >= DENSE_FROM * entries)


def _chunk_buffer(
    x_buffer: list[sp.csr_matrix],
    w: list[np.ndarray | sp.csr_matrix],
    new_rows: int,
    cfg: _Config,
) -> _Buffer:
    dense_views = [j for j, x in enumerate(x_buffer) if _is_dense(x)]
    sparse_views = [j for j in range(len(x_buffer)) if j not in dense_views]
    n = x_buffer[0].shape[0]
    dense = (
        np.hstack([x_buffer[j].toarray() for j in dense_views]) if dense_views else np.zeros((n, 0))
    )
    sparse = (
        sp.hstack([x_buffer[j] for j in sparse_views], format="csr")
        if sparse_views
        else sp.csr_matrix((n, 0))
    )
    views = dense_views + sparse_views
    dims = [x_buffer[j].shape[1] for j in views]
    similarities = cfg.alpha[0] * w[0]
    degrees = cfg.alpha[0] * np.asarray(w[0].sum(axis=1)).ravel()
    for j in range(1, len(w)):
        similarities = similarities + cfg.alpha[j] * w[j]
        degrees = degrees + cfg.alpha[j] * np.asarray(w[j].sum(axis=1)).ravel()
    beta = np.repeat([cfg.beta[j] for j in views], dims)
    return _Buffer(
        dense=dense,
        sparse=sparse,
        dense_new=dense[-new_rows:],
        sparse_new_t=sparse[-new_rows:].T.tocsr(),
        similarities=similarities,
        degrees=degrees[:, None],
        squared_norm=float(np.sum(dense * dense) + sparse.data @ sparse.data),
        beta=beta,
        half_beta=0.5 * beta,
        starts=np.cumsum([0, *dims[:-1]]),
        views=views,
    )


@dataclass(frozen=True)
class _Iterate:
    """``U_[s,t]`` and the stacked ``V`` with the products of them both updates and the
    objective read, formed once per iteration."""

    u: np.ndarray
    v: np.ndarray
    #: ``sum_v X^(v) V^(v)``, ``sum_v V^(v)T V^(v)``, ``U^T U``, ``M^- U``, row norms of V.
    xv: np.ndarray
    vtv: np.ndarray
    utu: np.ndarray
    mu: np.ndarray
    norms: np.ndarray

    @classmethod
    def of(cls, buffer: _Buffer, u: np.ndarray, v: np.ndarray) -> _Iterate:
        return cls(
            u=u,
            v=v,
            xv=buffer.times(v),
            vtv=v.T @ v,
            utu=u.T @ u,
            mu=np.asarray(buffer.similarities @ u),
            norms=np.sqrt(np.einsum("ij,ij->i", v, v)),
        )


def _relative_change(before: _Iterate, after: _Iterate, buffer: _Buffer) -> float:
    """``max(|dU|_F / |U|_F, max_v |dV^(v)|_F / |V^(v)|_F)`` of one iteration (a factor
    that is zero stays zero under the multiplicative updates and counts as unchanged)."""
    du = float(np.linalg.norm(after.u - before.u))
    u_norm = float(np.linalg.norm(before.u))
    change = du / u_norm if u_norm > 0 else 0.0
    dv = after.v - before.v
    moved = np.add.reduceat(np.einsum("ij,ij->i", dv, dv), buffer.starts)
    size = np.add.reduceat(before.norms * before.norms, buffer.starts)
    ratios = np.sqrt(np.divide(moved, size, out=np.zeros_like(moved), where=size > 0))
    return max(change, float(ratios.max()))


def _objective(
    it: _Iterate, buffer: _Buffer, a_hat: np.ndarray, b_hat: np.ndarray, gamma: float
) -> float:
    """The monitored objective (module docstring) from the products the iterations form:
    ``|X - U V^T|_F^2 = |X|_F^2 - 2 tr(V^T X^T U) + tr(V^T V U^T U)`` and
    ``tr(U^T M U) = sum_i M^+_ii |u_i|^2 - tr(U^T M^- U)``, summed over the views."""
    ortho = gamma * float(np.sum((it.utu - np.eye(it.utu.shape[0])) ** 2))
    fit = buffer.squared_norm - 2 * float(np.sum(it.xv * it.u)) + float(np.sum(it.vtv * it.utu))
    graph = float(np.sum(buffer.degrees * it.u * it.u) - np.sum(it.u * it.mu))
    history = float(np.sum((it.v @ a_hat) * it.v) - 2 * np.sum(it.v * b_hat))
    sparsity = float(buffer.beta @ it.norms)
    return ortho + fit + graph + history + sparsity


@dataclass(frozen=True)
class _Solution:
    u: np.ndarray
    v: np.ndarray
    a: np.ndarray
    b: np.ndarray
    iterations: int
    objective: float


def _solve(
    buffer: _Buffer,
    u: np.ndarray,
    v: np.ndarray,
    a_prev: np.ndarray,
    b_prev: np.ndarray,
    new_rows: int,
    cfg: _Config,
) -> _Solution:
    """Steps 11-15: eqs. (20) and (19) in turn until U and every V^(v) settle (or max_iter)."""
    gamma = cfg.gamma_for(buffer.squared_norm)
    it = _Iterate.of(buffer, u, v)
    a_hat, b_hat = a_prev, b_prev
    iterations = 0
    while iterations < cfg.max_iter:
        iterations += 1
        # Eq. (20) on the buffer.
        numerator = it.xv + gamma * it.u + it.mu
        denominator = it.u @ it.vtv + gamma * (it.u @ it.utu) + buffer.degrees * it.u
        u = it.u * np.sqrt(numerator / np.maximum(denominator, TINY))
        # Eq. (19), all views at once, with A^ and B^ from the chunk's current U_t.
        u_t = u[-new_rows:]
        a_hat = a_prev + u_t.T @ u_t
        b_hat = b_prev + buffer.new_t_times(u_t)
        inverse_norms = 1.0 / np.maximum(it.norms, ZERO_ROW)
        denom = it.v @ a_hat + (buffer.half_beta * inverse_norms)[:, None] * it.v
        v = it.v * np.sqrt(b_hat / np.maximum(denom, TINY))
        after = _Iterate.of(buffer, u, v)
        change = _relative_change(it, after, buffer)
        it = after
        if change <= cfg.tol:
            break
    return _Solution(
        u=it.u,
        v=it.v,
        a=a_hat,
        b=b_hat,
        iterations=iterations,
        objective=_objective(it, buffer, a_hat, b_hat, gamma),
    )


class OMVFS(MethodBase):
    """Online multi-view feature selection (Algorithm 1) over chunks of rows of every view.

    A chunk is the views side by side (``m x sum_v D_v``, in the order of ``params["views"]``);
    the applier gives one log entry at a time (``coalesces = False``): the buffer holds chunks
    as the producers sent them.
    """

    name = "omvfs"
    paper = (
        'Shao, He, Lu, Wei & Yu, "Online Unsupervised Multi-view Feature Selection" (Algorithm 1)'
    )
    chunk_kind: ChunkKind = "views"
    params_schema = params_object(
        "Shao et al., Algorithm 1 (see the README's OMVFS section).",
        n_clusters=integer(1, doc="K (default 10)."),
        buffer_chunks=integer(1, doc="s: chunks kept in the buffer (default 2)."),
        alpha=per_view(number(0), doc="Graph weight, one for all views or per view (1)."),
        beta=per_view(number(0), doc="Sparsity weight, one for all views or per view (1)."),
        gamma={
            "anyOf": [number(0), one_of("auto")],
            "description": 'Orthogonality weight: "auto" (default: 0.1 |X|_F^2 / K of the buffer) '
            "or a number (the paper's: 1e7).",
        },
        max_iter=integer(1, doc="Iterations per chunk at most (default 200)."),
        tol=number(above=0, doc="Relative change of U and of each V to stop at (1e-3)."),
        bandwidth=per_view(number(above=0), doc="Gaussian sigma (default: median distance)."),
        neighbours=integer(
            1, nullable=True, doc="kNN graph: buffer rows kept per new row (10; null: dense)."
        ),
        normalize_rows=boolean("Scale rows to unit norm per view (default true)."),
        score=one_of(
            *SCORES,
            doc="explained (default): the share of each feature's variance the clusters explain; "
            "scaled: the row norm of V over the feature's root mean square; paper: the row norm "
            "of V (step 19).",
        ),
        seed=integer(0, below=2**63, doc="Seed of the random starts."),
    )
    score_field = "weights"
    coalesces = False
    chunking_invariant = False

    def resolve_params(self, params: Mapping[str, Any], n_features: int) -> dict[str, Any]:
        return _resolve(params, n_features, score_if_absent=SCORES[0]).as_params()

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
            # The running moments of every feature as the factorisation sees it (rows scaled),
            # which the scale-free scores divide by.
            "feature_rows": 0,
            "feature_mean": np.zeros(n_features),
            "feature_m2": np.zeros(n_features),
        }
        factors = []
        for j, (_, dim) in enumerate(cfg.views):
            v = rng.random((dim, k))  # step 1: V initialised randomly (nonnegative)
            factors.append(v)
            state[f"V{j}"] = v
            state[f"B{j}"] = np.zeros((dim, k))
            empty = np.zeros((0, 0))
            state.update(
                _similarity_fields(empty if cfg.neighbours is None else sp.csr_matrix(empty), j)
            )
            state[f"X{j}_data"] = np.zeros(0)
            state[f"X{j}_indices"] = np.zeros(0, dtype=np.int64)
            state[f"X{j}_indptr"] = np.zeros(1, dtype=np.int64)
            state[f"bandwidth{j}"] = 0.0 if cfg.bandwidth is None else cfg.bandwidth[j]
        no_rows = (0, np.zeros(n_features), np.zeros(n_features))
        sums = [np.zeros_like(v) for v in factors]
        state["weights"] = feature_scores(factors, np.zeros((k, k)), sums, no_rows, cfg.score)
        return state

    def state_sizes(self, params: Mapping[str, Any], n_features: int) -> dict[str, int]:
        cfg = _resolve(params, n_features)
        k = cfg.n_clusters
        sizes = {
            "A": 8 * k * k,
            "weights": 8 * n_features,
            "feature_mean": 8 * n_features,
            "feature_m2": 8 * n_features,
        }
        for j, (_, dim) in enumerate(cfg.views):
            sizes[f"V{j}"] = sizes[f"B{j}"] = 8 * dim * k
            sizes[f"X{j}_indptr"] = 8  # the empty buffer's CSR row pointers
            if cfg.neighbours is not None:
                sizes[f"W{j}_indptr"] = 8
        return sizes  # the buffer (rows, U, similarities) grows with the chunks

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
        w: list[np.ndarray | sp.csr_matrix] = []
        widths: list[float] = []
        for j, view in enumerate(views):
            old = _buffer_rows(state, j, cfg.views[j][1])[drop:]
            sigma = float(np.asarray(state[f"bandwidth{j}"])) or median_distance(view)
            widths.append(sigma)
            to_old, among = new_similarities(view, old, sigma, cfg.neighbours)
            w_old = _similarity_blocks(state, j, sparse=cfg.neighbours is not None)[drop:, drop:]
            if isinstance(w_old, np.ndarray):
                w.append(np.block([[w_old, to_old.T], [to_old, among]]))
            else:  # the kNN graph stays sparse: no (s m)^2 matrix is ever formed
                new_to_old = sp.csr_matrix(to_old)
                w.append(
                    sp.bmat([[w_old, new_to_old.T], [new_to_old, sp.csr_matrix(among)]], "csr")
                )
            x_buffer.append(sp.vstack([old, view], format="csr"))

        moments = combine(_moments_so_far(state, cfg), chunk_moments(sp.hstack(views, "csr")))

        # Step 6: U_t initialised randomly (seeded per chunk), the rest of the buffer warm.
        u_new = np.random.default_rng([cfg.seed, t]).random((m, k)) / math.sqrt(sum(sizes))
        u = np.vstack([np.asarray(state["U_buffer"])[drop:], u_new])
        buffer = _chunk_buffer(x_buffer, w, m, cfg)
        solution = _solve(
            buffer,
            u,
            buffer.stack([np.asarray(state[f"V{j}"], dtype=np.float64) for j in range(len(views))]),
            np.asarray(state["A"]),
            buffer.stack([np.asarray(state[f"B{j}"]) for j in range(len(views))]),
            m,
            cfg,
        )

        # Steps 16-17: A^ and B^ of the last iteration are A_t and B_t (U_t is final).
        v, b = buffer.unstack(solution.v), buffer.unstack(solution.b)
        new: State = dict(state)
        new["chunks_seen"] = t
        new["A"] = solution.a
        new["U_buffer"] = solution.u
        new["buffer_chunk_rows"] = np.asarray(sizes, dtype=np.int64)
        new["last_iterations"] = solution.iterations
        new["last_objective"] = solution.objective
        for j in range(len(views)):
            new[f"V{j}"] = v[j]
            new[f"B{j}"] = b[j]
            for field in (f"W{j}", f"W{j}_data", f"W{j}_indices", f"W{j}_indptr"):
                new.pop(field, None)  # an older layout's fields do not linger
            new.update(_similarity_fields(w[j], j))
            new[f"X{j}_data"] = x_buffer[j].data
            new[f"X{j}_indices"] = x_buffer[j].indices.astype(np.int64)
            new[f"X{j}_indptr"] = x_buffer[j].indptr.astype(np.int64)
            new[f"bandwidth{j}"] = widths[j]
        new["feature_rows"], new["feature_mean"], new["feature_m2"] = moments
        new["weights"] = feature_scores(v, solution.a, b, moments, cfg.score)  # step 19
        return new

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        """Every feature's score (``feature_scores``), the views side by side."""
        return np.array(state["weights"], dtype=np.float64)

    def growing_axes(self, params: Mapping[str, Any], size: int) -> dict[str, tuple[int, ...]]:
        """``ChecksState``: the buffer's CSR row pointers grow from their one initial entry."""
        views = _resolve(params, size).views
        return {f"{part}{j}_indptr": (0,) for j in range(len(views)) for part in ("X", "W")}

    def check_consistency(
        self,
        state: State,
        params: Mapping[str, Any],
        size: int,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the buffer's parts (U, W and the rows of every view) hold the same
        buffered rows, at most ``buffer_chunks`` chunks of them."""
        cfg = _resolve(params, size)
        sizes = np.asarray(state["buffer_chunk_rows"])
        rows = int(sizes.sum())
        if (
            sizes.shape[0] > cfg.buffer_chunks
            or np.any(sizes < 1)
            or int(np.asarray(state["chunks_seen"])) < sizes.shape[0]
            or np.asarray(state["U_buffer"]).shape[0] != rows
        ):
            raise Inconsistent(
                f"an omvfs buffer holds at most buffer_chunks={cfg.buffer_chunks} chunks of at "
                f"least one row, U for each of its rows; got chunk sizes {sizes.tolist()[:10]} "
                f"and U of shape {np.asarray(state['U_buffer']).shape}"
            )
        # The buffered rows were counted into the moments (the views are nonnegative).
        if (
            int(np.asarray(state["feature_rows"])) < rows
            or np.any(np.asarray(state["feature_mean"]) < 0)
            or np.any(np.asarray(state["feature_m2"]) < 0)
        ):
            raise Inconsistent(
                "the feature moments count at least the buffered rows, with nonnegative means "
                f"and squared deviations; got {int(np.asarray(state['feature_rows']))} rows for "
                f"a buffer of {rows}"
            )
        for j, (view, dim) in enumerate(cfg.views):
            _check_csr(state, f"X{j}", rows, dim, f"view '{view}': the buffer's rows")
            if f"W{j}_indptr" in state:
                _check_csr(state, f"W{j}", rows, rows, f"view '{view}': the similarities W")
            elif np.asarray(state[f"W{j}"]).shape != (rows, rows):
                raise Inconsistent(f"view '{view}': the similarities W must be {rows} x {rows}")
            if float(np.asarray(state[f"bandwidth{j}"])) < 0:
                raise Inconsistent(f"view '{view}': the bandwidth must not be negative")


def feature_scores(
    v: list[np.ndarray],
    a: np.ndarray,
    b: list[np.ndarray],
    moments: tuple[int, np.ndarray, np.ndarray],
    score: str,
) -> np.ndarray:
    """The ranking of step 19 by ``score`` (module docstring), the views side by side.

    ``v`` are the ``V^(v)``, ``a`` and ``b`` are ``A_t`` and the ``B_t^(v)``, ``moments`` the
    running ``(n, mean, M2)`` of every feature; the scale-free scores are 0 while no row was
    seen and for a feature that has been constant.
    """
    norms = np.concatenate([np.linalg.norm(vj, axis=1) for vj in v])
    if score == "paper":
        return norms
    rows, mean, m2 = moments
    scores = np.zeros_like(norms)
    if rows == 0:
        return scores
    if score == "scaled":
        rms = np.sqrt(mean * mean + m2 / rows)
        return np.asarray(np.divide(norms, rms, out=scores, where=rms > 0))
    # The mean squared residual of every feature over all rows seen, each chunk's rows with its
    # final U_t: |x_j - U V_j^T|^2 / n = (|x_j|^2 - 2 B_j . V_j + V_j A V_j^T) / n.
    stacked, sums = np.vstack(v), np.vstack(b)
    fitted = np.einsum("ij,jk,ik->i", stacked, a, stacked)
    crossed = np.einsum("ij,ij->i", stacked, sums)
    variance = m2 / rows
    residual = np.maximum(mean * mean + variance + (fitted - 2 * crossed) / rows, 0.0)
    total = variance + residual
    return np.asarray(np.divide(variance, total, out=scores, where=total > 0))


def _moments_so_far(state: State, cfg: _Config) -> tuple[int, np.ndarray, np.ndarray]:
    """The running ``(n, mean, M2)`` of every feature before this chunk.

    A state stored before they were kept (a selector created before ``score`` existed, whose
    params say nothing of it and so rank by the paper's score) has none: they start from the
    rows its buffer holds, the last chunks of what it saw.
    """
    if "feature_m2" in state:
        return (
            int(np.asarray(state["feature_rows"])),
            np.asarray(state["feature_mean"], dtype=np.float64),
            np.asarray(state["feature_m2"], dtype=np.float64),
        )
    held = sp.hstack(
        [_buffer_rows(state, j, dim) for j, (_, dim) in enumerate(cfg.views)], format="csr"
    )
    if held.shape[0] == 0:
        return 0, np.zeros(held.shape[1]), np.zeros(held.shape[1])
    return chunk_moments(held)


def _check_csr(state: State, prefix: str, rows: int, columns: int, what: str) -> None:
    """``Inconsistent`` unless ``<prefix>_data``, ``_indices`` and ``_indptr`` make a CSR
    matrix of ``rows x columns``."""
    indptr = np.asarray(state[f"{prefix}_indptr"])
    data, indices = np.asarray(state[f"{prefix}_data"]), np.asarray(state[f"{prefix}_indices"])
    if (
        indptr.shape[0] != rows + 1
        or indptr[0] != 0
        or np.any(np.diff(indptr) < 0)
        or not indptr[-1] == data.shape[0] == indices.shape[0]
        or np.any((indices < 0) | (indices >= columns))
    ):
        raise Inconsistent(f"{what} must be a CSR matrix of {rows} x {columns}")


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
