"""OMVFS's views and similarity graph: a chunk split into its views, the Gaussian kernel between
rows (section III-B; the paper gives no bandwidth: the median distance by default), the kNN graph
of graph-regularised NMF (the paper's reference [21]), and how the state holds the buffer's rows
and similarities (CSR parts, or one dense array for the dense kernel)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix, State
from service.algorithms.omvfs.params import OMVFSParams
from service.errors import InvalidInput

#: A view at least this dense is multiplied as a plain array: from about this density on, BLAS
#: beats scipy's CSR product (BENCHMARKS.md, OMVFS).
DENSE_FROM = 0.1
#: ... unless its dense copy would exceed this many entries (256 MiB).
DENSE_AT_MOST = 2**25


def split_views(rows: Matrix, cfg: OMVFSParams) -> list[sp.csr_matrix]:
    """The chunk's views (``m x D_v`` each, CSR), rows scaled to unit norm if configured."""
    csr = sp.csr_matrix(rows, dtype=np.float64)
    offsets = cfg.offsets
    out = []
    for j in range(len(cfg.view_dims)):
        view = csr[:, offsets[j] : offsets[j + 1]].tocsr()
        if view.nnz and view.data.min() < 0:
            raise InvalidInput(f"view '{cfg.view_dims[j][0]}' has negative values; NMF needs >= 0")
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
    if is_dense(a) and is_dense(b):  # BLAS: several times faster than a CSR product here
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


def similarity_blocks(state: State, j: int, sparse: bool) -> np.ndarray | sp.csr_matrix:
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


def similarity_fields(w: np.ndarray | sp.csr_matrix, j: int) -> State:
    """The state fields of one view's similarity matrix (see ``similarity_blocks``)."""
    if isinstance(w, np.ndarray):
        return {f"W{j}": w}
    return {
        f"W{j}_data": w.data,
        f"W{j}_indices": w.indices.astype(np.int64),
        f"W{j}_indptr": w.indptr.astype(np.int64),
    }


def is_dense(view: sp.csr_matrix) -> bool:
    """Multiply this view as a plain array: at least ``DENSE_FROM`` nonzero, and not huge."""
    entries = view.shape[0] * view.shape[1]
    return bool(entries <= DENSE_AT_MOST and view.nnz >= DENSE_FROM * entries)


def buffer_rows(state: State, j: int, dim: int) -> sp.csr_matrix:
    indptr = np.asarray(state[f"X{j}_indptr"], dtype=np.int64)
    return sp.csr_matrix(
        (
            np.asarray(state[f"X{j}_data"], dtype=np.float64),
            np.asarray(state[f"X{j}_indices"], dtype=np.int64),
            indptr,
        ),
        shape=(indptr.size - 1, dim),
    )
