"""OMVFS's iterations for one chunk (steps 11-15 of Algorithm 1): eq. (20) for U on the buffer and
eq. (19) for every V^(v) through A and B, until U and every V settle (or ``max_iter``), and the
monitored objective (the package docstring says how an iteration is computed)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from service.algorithms.omvfs.graph import is_dense
from service.algorithms.omvfs.params import OMVFSParams

#: Floor of the denominators of the multiplicative updates (they are sums of nonnegatives).
TINY = 1e-300
#: Row norm of V below which ``D_jj`` is taken as ``1 / ZERO_ROW``.
ZERO_ROW = 1e-12


@dataclass(frozen=True)
class Buffer:
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


def chunk_buffer(
    x_buffer: list[sp.csr_matrix],
    w: list[np.ndarray | sp.csr_matrix],
    new_rows: int,
    cfg: OMVFSParams,
) -> Buffer:
    dense_views = [j for j, x in enumerate(x_buffer) if is_dense(x)]
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
    similarities = cfg.alphas[0] * w[0]
    degrees = cfg.alphas[0] * np.asarray(w[0].sum(axis=1)).ravel()
    for j in range(1, len(w)):
        similarities = similarities + cfg.alphas[j] * w[j]
        degrees = degrees + cfg.alphas[j] * np.asarray(w[j].sum(axis=1)).ravel()
    beta = np.repeat([cfg.betas[j] for j in views], dims)
    return Buffer(
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
class Iterate:
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
    def of(cls, buffer: Buffer, u: np.ndarray, v: np.ndarray) -> Iterate:
        return cls(
            u=u,
            v=v,
            xv=buffer.times(v),
            vtv=v.T @ v,
            utu=u.T @ u,
            mu=np.asarray(buffer.similarities @ u),
            norms=np.sqrt(np.einsum("ij,ij->i", v, v)),
        )


def relative_change(before: Iterate, after: Iterate, buffer: Buffer) -> float:
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


def objective(
    it: Iterate, buffer: Buffer, a_hat: np.ndarray, b_hat: np.ndarray, gamma: float
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
class Solution:
    u: np.ndarray
    v: np.ndarray
    a: np.ndarray
    b: np.ndarray
    iterations: int
    objective: float


def solve(
    buffer: Buffer,
    u: np.ndarray,
    v: np.ndarray,
    a_prev: np.ndarray,
    b_prev: np.ndarray,
    new_rows: int,
    cfg: OMVFSParams,
) -> Solution:
    """Steps 11-15: eqs. (20) and (19) in turn until U and every V^(v) settle (or max_iter)."""
    gamma = cfg.gamma_for(buffer.squared_norm)
    it = Iterate.of(buffer, u, v)
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
        after = Iterate.of(buffer, u, v)
        change = relative_change(it, after, buffer)
        it = after
        if change <= cfg.tol:
            break
    return Solution(
        u=it.u,
        v=it.v,
        a=a_hat,
        b=b_hat,
        iterations=iterations,
        objective=objective(it, buffer, a_hat, b_hat, gamma),
    )
