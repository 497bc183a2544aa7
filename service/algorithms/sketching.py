"""Frequent Directions (Liberty 2013) as used by FSDS, Algorithm 2 steps 1-4 (Huang, CIKM 2015).

Orientation: the service receives rows = samples (``n x m``). The paper's sketch ``B`` is
``m x ell`` (features x sketch); we keep its transpose ``sketch_rows`` (``ell x m``) whose row
``j`` is ``s_j * u_j^T`` with orthonormal ``u_j`` and ``s_1 >= ... >= s_ell``.

Two implementations of the same shrink:

* :func:`paper_svd_update` -- the paper, literally: a dense SVD of ``C = [B | Y_t]`` per chunk.
  The reference for tests and the benchmark; it densifies sparse input.
* :func:`frequent_directions_update` -- the production path: the shrink of Algorithm 2 computed
  through the eigenpairs of the *smaller* Gram matrix of the work matrix ``W = [S; X]``, once
  per ``block_rows`` rows, never densifying sparse input.

Why the Gram route keeps the Frequent-Directions guarantee: with ``W W^T = V diag(lam) V^T``
the new rows are ``M W`` with ``M = C V_ell^T`` and ``C = diag(sqrt((lam_j - delta) / lam_j))``,
so ``W^T W - S'^T S' = W^T (I - V_ell C^2 V_ell^T) W``. That is PSD for *any* orthonormal ``V``
and ``0 <= C <= I`` -- the PSD order ``S^T S <= Y^T Y`` does not depend on how accurately the
small eigenproblem is solved -- and its spectral norm is ``delta`` up to rounding. Summed over
shrinks, ``||Y^T Y - S^T S||_2 <= sum(delta) <= ||Y - Y_k||_F^2 / (ell - k)`` for every
``k < ell`` (Liberty 2013; Ghashami & Phillips 2014), whatever the block size.

Exponential forgetting (``decay`` = gamma in (0, 1), FSDS section 3.2's "higher weights on the
recent inputs"). The matrix sketched is ``A_w``, whose row ``i`` is ``gamma**age_i y_i`` (``age_i``
= the rows that arrived after it). Before a shrink that takes ``b`` new rows the sketch is scaled
by ``gamma**b`` and the new rows by ``gamma**(b - 1 - i)``; so with ``E = A_w^T A_w - S^T S`` and
``W = [gamma**b S; D X]``, ``A_w'^T A_w' - W^T W = gamma**(2b) E``, and the shrink adds
``W^T W - S'^T S'`` in ``[0, delta I]``. By induction ``0 <= E <= Delta I`` with the decayed
total ``Delta' = gamma**(2b) Delta + delta``, and since a shrink removes at least ``ell delta``
of squared Frobenius norm while decay scales what was removed before by the same
``gamma**(2b)``, ``||A_w||_F^2 - ||S||_F^2 >= ell Delta``. Weyl on ``S^T S >= A_w^T A_w - Delta I``
gives ``||S||_F^2 >= ||[A_w]_k||_F^2 - k Delta``, hence

    ||A_w^T A_w - S^T S||_2 <= Delta <= ||A_w - [A_w]_k||_F^2 / (ell - k)   for every k < ell,

the Frequent-Directions bound for the weighted matrix. A shrink is homogeneous (the shrink of
``c W`` is ``c`` times the shrink of ``W``, its ``delta`` ``c**2`` times), so the code weights
every row of a call relative to the call's end (``gamma**(n - 1 - i)``, the incoming sketch
``gamma**n``) instead of rescaling before each shrink: the same sketch, one scaling per call.

Performance design (the figures are in BENCHMARKS.md, "FSDS update"):

* Every product touching ``m`` is BLAS-3 through numpy. The small eigenproblems use
  ``numpy.linalg.eigh`` rather than ``scipy.linalg``: numpy and scipy wheels bundle separate
  OpenBLAS builds, and scipy's LAPACK run right after a large numpy GEMM competes with numpy's
  still-spinning BLAS threads.
* Rows are taken in *super-blocks* of several shrink blocks: the Grams ``X S^T`` and ``X X^T`` of
  the whole super-block are formed by one GEMM and one SYRK each, the shrinks inside it are
  carried out exactly on coefficients (``S_j = R_j [S_0; X]``, ``R_j`` small), and the sketch
  rows are recovered once per super-block. The shrinks (and so the sketch, up to rounding) are
  those of a ``2 ell``-row buffer folded block by block; the BLAS calls are fatter and there is
  one recovery per super-block instead of one per block.
* Sparse rows touch only the columns they have entries in (``_on_columns``): ``X S^T`` and the
  rows' share of the recovery are formed on those columns alone, and the sketch stays in its
  own layout (``ell x m``, C order), read once per super-block by the product that recovers
  its share, and once per call by its Gram unless ``singular_values`` gives it.
* The floor is the flops: per row ``2 ell m`` (``X S^T``) + ``2 ell m`` (recovering ``S``) +
  ``(B + 2 ell^2 / B) m``, at least ``6.8 ell m``, plus the small ``eigh`` of each shrink.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import InvalidInput, InvalidParams

__all__ = [
    "SketchUpdate",
    "decay_weights",
    "frequent_directions_update",
    "normalize_sparse_rows",
    "paper_svd_update",
]

_EPS = float(np.finfo(np.float64).eps)
#: Dense input: shrink blocks per super-block: one Gram of several blocks' rows amortises the
#: eigendecomposition (the count that measured fastest, BENCHMARKS.md, FSDS update).
_DENSE_BLOCKS_PER_SUPER = 3


@dataclass(frozen=True)
class SketchUpdate:
    """Result of folding rows into a sketch.

    ``sketch_rows`` is ``ell x m`` (row ``j`` = ``s_j u_j^T``), ``singular_values`` the ``s_j``
    (descending, the last one 0 once anything was shrunk), ``shrinkage`` the sum of the
    ``delta = sigma_ell^2`` subtracted in this call (Algorithm 2, step 3), ``squared_norm`` the
    squared Frobenius norm of the rows folded in (after normalisation, if requested).
    """

    sketch_rows: np.ndarray
    singular_values: np.ndarray
    shrinkage: float
    squared_norm: float = 0.0


def frequent_directions_update(
    sketch_rows: np.ndarray,
    rows: Matrix,
    block_rows: int | None = None,
    *,
    normalize_rows: bool = False,
    decay: float = 1.0,
    singular_values: np.ndarray | None = None,
) -> SketchUpdate:
    """Fold ``rows`` into the sketch: Algorithm 2, steps 1-4, one shrink per ``block_rows`` rows.

    ``block_rows`` defaults to ``ell`` (a ``2 ell``-row work matrix); ``block_rows >= n`` is the
    paper's single shrink per chunk. ``normalize_rows`` scales every row to unit L2 norm first
    (zero rows stay zero; FSDS section 3.1). For dense input the norms are the diagonal of the
    ``X X^T`` block that is formed anyway and the scaling is folded into the small Gram blocks
    and the recovery coefficients, so no scaled copy of the chunk is ever made.

    ``decay`` < 1 forgets exponentially (module docstring): the incoming sketch is scaled by
    ``decay**n`` and row ``i`` (after normalisation) by ``decay**(n - 1 - i)``, folded in the same
    way as the norms; ``shrinkage`` and ``squared_norm`` are then of the weighted rows, in the
    units of the end of this call. ``decay = 1`` runs exactly the code without forgetting.

    Per shrink, with ``S`` the current sketch (``r`` non-zero rows) and ``X`` the next ``b``
    rows:

    * ``ell + b <= m``: eigenpairs of the ``(r + b)``-square ``W W^T = [[S S^T, S X^T],
      [X S^T, X X^T]]``, every block formed explicitly from data; ``delta = lam_ell`` (0 if
      there are fewer than ``ell`` eigenvalues above rounding level); new rows
      ``sqrt(lam_j - delta) u_j^T = sqrt((lam_j - delta) / lam_j) v_j^T W`` for ``j < ell``.
    * ``ell + b > m``: eigenpairs of the ``m``-square ``W^T W = S^T S + X^T X``; the rows are
      ``sqrt(lam_j - delta) u_j^T`` directly.

    ``S S^T`` is computed from ``sketch_rows`` once per call, unless ``singular_values`` says
    what it is: a sketch this function made (or one checked to be one, ``gram = diag(s^2)`` to
    rounding), its rows ``s_j u_j^T`` with the ``s_j > 0`` first, has ``S S^T = diag(s^2)``;
    the rows' rounding (about ``eps`` of each) then stays out of the small eigenproblems, whose
    orthonormal ``V`` keep the guarantee whatever Gram they were solved on. After each shrink
    ``S S^T`` is the Gram ``M (W W^T) M^T`` of the rows just produced, computed (not assumed
    diagonal) from the explicit Gram of the work matrix.
    """
    sketch = np.asarray(sketch_rows, dtype=np.float64)
    if sketch.ndim != 2 or sketch.shape[0] < 1:
        raise InvalidInput(
            f"sketch_rows must be a 2-D array with >= 1 row; got shape {sketch.shape}"
        )
    ell, m = sketch.shape
    if rows.ndim != 2 or rows.shape[1] != m:
        raise InvalidInput(
            f"rows must be 2-D with {m} columns (the sketch width); got shape {rows.shape}"
        )
    n = rows.shape[0]
    block = _block_size(block_rows, ell)
    weights = decay_weights(decay, n)
    # No forgetting runs exactly the code path without weights.
    row_weights = None if float(decay) == 1.0 else weights

    # Only the non-zero rows of the incoming sketch take part (an empty sketch costs nothing).
    gram: np.ndarray | None = None
    if singular_values is None:
        active = sketch[np.einsum("ij,ij->i", sketch, sketch) > 0.0]
    else:
        values = np.asarray(singular_values, dtype=np.float64)
        if values.shape != (ell,):
            raise InvalidInput(
                f"singular_values must be one per sketch row ({ell}); got shape {values.shape}"
            )
        live = int(np.count_nonzero(values > 0.0))
        active, gram = sketch[:live], np.diag(values[:live] ** 2)
    if n == 0:
        return SketchUpdate(sketch.copy(), _pad(_singular_values(active), ell), 0.0)
    if row_weights is not None:
        # The sketch ages by the n rows of this call (rows that decay to 0.0 drop out).
        active = active * decay**n
        kept = np.einsum("ij,ij->i", active, active) > 0.0
        active = active[kept]
        if gram is not None:
            gram = np.diag(np.diagonal(gram)[kept] * decay ** (2 * n))

    if sp.issparse(rows):
        data: Matrix = sp.csr_matrix(rows, dtype=np.float64)
        if normalize_rows:
            # Sparse scaling touches only the non-zeros; do it up front.
            data = normalize_sparse_rows(data)
        if row_weights is not None:
            data = sp.csr_matrix(sp.diags(row_weights) @ data)
        normalize_dense = False
        dense_weights = None
    else:
        data = np.ascontiguousarray(rows, dtype=np.float64)
        normalize_dense = normalize_rows
        dense_weights = row_weights

    if ell + block > m:
        return _feature_side(active, data, normalize_dense, dense_weights, ell, block)
    return _row_side(active, gram, data, normalize_dense, dense_weights, ell, block)


def normalize_sparse_rows(rows: sp.csr_matrix) -> sp.csr_matrix:
    """A CSR copy of ``rows`` with every non-zero row scaled to unit L2 norm."""
    out = sp.csr_matrix(rows, dtype=np.float64, copy=True)
    out.sum_duplicates()
    sq = np.bincount(
        np.repeat(np.arange(out.shape[0]), np.diff(out.indptr)),
        weights=out.data**2,
        minlength=out.shape[0],
    )
    out.data *= np.repeat(_inverse_norms(sq), np.diff(out.indptr))
    return out


def _inverse_norms(squared_norms: np.ndarray) -> np.ndarray:
    """``1 / ||row||`` with 0 for zero rows (a zero sample carries no direction)."""
    inv = np.zeros_like(squared_norms, dtype=np.float64)
    nonzero = squared_norms > 0.0
    inv[nonzero] = 1.0 / np.sqrt(squared_norms[nonzero])
    return inv


def decay_weights(decay: float, n: int) -> np.ndarray:
    """``decay**(n - 1 - i)`` for rows ``i < n``: each row's weight at the end of the ``n`` rows.

    Computed as ``exp(age * log(decay))``, which underflows to 0.0 for rows long forgotten.
    """
    if isinstance(decay, bool) or not isinstance(decay, float | int | np.floating):
        raise InvalidParams(f"decay must be a number in (0, 1]; got {decay!r}")
    if not 0.0 < float(decay) <= 1.0:
        raise InvalidParams(f"decay must be a number in (0, 1]; got {decay!r}")
    return np.exp(np.arange(n - 1, -1, -1, dtype=np.float64) * math.log(float(decay)))


def _block_size(block_rows: int | None, ell: int) -> int:
    if block_rows is None:
        return ell
    if isinstance(block_rows, bool) or not isinstance(block_rows, int | np.integer):
        raise InvalidParams(f"block_rows must be an integer >= 1 or None; got {block_rows!r}")
    if block_rows < 1:
        raise InvalidParams(f"block_rows must be >= 1; got {block_rows}")
    return int(block_rows)


def _sparse_gram(rows: Matrix) -> np.ndarray:
    """``rows @ rows.T`` of a sparse matrix as a dense array (the result is small)."""
    return np.asarray(cast(sp.csr_matrix, rows @ rows.T).toarray())


def _pad(values: np.ndarray, ell: int) -> np.ndarray:
    out = np.zeros(ell)
    out[: values.size] = values[:ell]
    return out


def _singular_values(rows: np.ndarray) -> np.ndarray:
    if rows.shape[0] == 0:
        return np.zeros(0)
    lam = np.linalg.eigvalsh(rows @ rows.T)[::-1]
    return np.sqrt(np.maximum(lam, 0.0))


def _eigh_desc(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lam, vec = np.linalg.eigh(gram)
    return lam[::-1], vec[:, ::-1]


def _shrink(lam_desc: np.ndarray, ell: int, size: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Steps 2-3 on Gram eigenvalues (descending): ``(keep, sqrt(lam[keep] - delta), delta)``.

    Eigenvalues below ``eps * size * lam_1`` are rounding noise of the Gram product: they are
    treated as 0, so a stream of rank < ell is reproduced exactly (``delta = 0``, nothing lost).
    """
    top = lam_desc[: min(ell, lam_desc.size)]
    floor = _EPS * size * max(float(top[0]), 0.0)
    top = np.where(top > floor, top, 0.0)
    delta = float(top[ell - 1]) if top.size >= ell else 0.0
    shrunk = top - delta
    keep = np.flatnonzero(shrunk > 0.0)
    return keep, np.sqrt(shrunk[keep]), delta


def _super_block_rows(block: int, ell: int, m: int, sparse_input: bool) -> int:
    if sparse_input:
        # Dense work per super-block is the S-part of the recovery (2 ell^2 m); the coefficient
        # algebra grows like 2 ell (ell + B) per row: balance them at B ~ sqrt(ell m).
        target = max(int(math.sqrt(ell * m)), 2 * ell)
    else:
        target = _DENSE_BLOCKS_PER_SUPER * ell
    return block * max(1, round(target / block))


def _row_side(
    active: np.ndarray,
    gram: np.ndarray | None,
    data: Matrix,
    normalize_dense: bool,
    row_weights: np.ndarray | None,
    ell: int,
    block: int,
) -> SketchUpdate:
    """Shrinks through ``W W^T`` (``ell + block <= m``), taken in super-blocks.

    Within a super-block ``Q = [S_0; X_1; ...; X_J]`` the sketch after shrink ``j`` is kept as
    coefficients, ``S_j = R_j Q``; with ``G_Q = Q Q^T`` (formed once), the work-matrix Gram of
    shrink ``j + 1`` is ``[[S_j S_j^T, R_j G_Q[:, X_j+1]], [., G_Q[X_j+1, X_j+1]]]`` -- the same
    numbers as forming ``[S_j; X_j+1] [S_j; X_j+1]^T`` from rows -- and
    ``R_j+1 = M [R_j; E_j+1]``. Since every ``M`` has ``M^T M <= I``, ``R^T R <= I`` and the
    PSD guarantee holds exactly as for a row-by-row implementation.
    """
    sparse_input = sp.issparse(data)
    n, m = data.shape
    super_rows = _super_block_rows(block, ell, m, sparse_input)
    # The sketch S (r x m, C order) and two ping-pong outputs: no fresh 30 MB allocation (page
    # faults) per super-block. Sparse rows touch only their columns of S: X S^T and the rows'
    # share of the recovery are formed on those columns alone.
    basis = np.ascontiguousarray(active)
    gram_ss = basis @ basis.T if gram is None else gram
    buffers = [np.empty((ell, m)), np.empty((ell, m))]
    if not sparse_input:
        scratch = np.empty((ell, m))
    s_values = np.zeros(0)
    shrinkage = 0.0
    squared_norm = 0.0
    holder = buffers[0]

    for s0 in range(0, n, super_rows):
        xq = data[s0 : s0 + super_rows]
        weights_q = None if row_weights is None else row_weights[s0 : s0 + xq.shape[0]]
        r = gram_ss.shape[0]
        if sparse_input:
            columns, xq = _on_columns(cast(sp.csr_matrix, xq))
            touched = basis if columns is None else basis[:, columns]
            gram_q, dq = _super_block_gram(xq, touched, gram_ss, False, None)
        else:
            gram_q, dq = _super_block_gram(xq, basis, gram_ss, normalize_dense, weights_q)
        squared_norm += float(np.trace(gram_q[r:, r:]))
        coef, gram_ss, s_values, delta = _shrink_super_block(gram_q, gram_ss, r, block, ell)
        shrinkage += delta
        coef_s = coef[:, :r]
        coef_x = coef[:, r:] if dq is None else coef[:, r:] * dq[None, :]
        rk = coef.shape[0]
        holder = buffers[0]
        buffers.reverse()
        out = holder[:rk]
        if sparse_input:
            if r:
                np.matmul(coef_s, basis, out=out)
            else:
                out[:] = 0.0
            # coef_x X on X's columns: (X^T coef_x^T)^T, a sparse-times-dense product.
            share = np.asarray(xq.T @ coef_x.T).T
            if columns is None:
                out += share
            else:
                out[:, columns] += share
        else:
            np.matmul(coef_x, xq, out=out)
            if r:
                out += np.matmul(coef_s, basis, out=scratch[:rk])
        basis = out

    # The last output buffer was allocated by this call: hand it out instead of copying.
    sketch = holder
    sketch[basis.shape[0] :] = 0.0
    return SketchUpdate(sketch, _pad(s_values, ell), shrinkage, squared_norm)


def _on_columns(rows: sp.csr_matrix) -> tuple[np.ndarray | None, sp.csr_matrix]:
    """The columns ``rows`` has entries in (ascending) and ``rows`` on those columns alone;
    ``None`` and ``rows`` as they are when they touch more than half of the columns (gathering
    most columns of the sketch and adding back into them costs more than reading it whole)."""
    touched = np.zeros(rows.shape[1], dtype=bool)
    touched[rows.indices] = True
    columns = np.flatnonzero(touched)
    if 2 * columns.size > rows.shape[1]:
        return None, rows
    # Each column's place among the touched ones (no sort: a count over the columns).
    place = np.cumsum(touched, dtype=rows.indices.dtype) - 1
    compact = sp.csr_matrix(
        (rows.data, place[rows.indices], rows.indptr), shape=(rows.shape[0], columns.size)
    )
    return columns, compact


def _super_block_gram(
    xq: Matrix,
    basis: np.ndarray,
    gram_ss: np.ndarray,
    normalize_dense: bool,
    weights_q: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``G_Q = Q Q^T`` for ``Q = [S; X_q]``, the rows scaled, and the row scales used.

    Row scales (unit norms, decay weights) act on the small Grams and the recovery coefficients
    only, never on the rows themselves.
    """
    if sp.issparse(xq):
        k_xs = np.asarray(xq @ basis.T)
        k_xx = _sparse_gram(xq)
    else:
        k_xs = xq @ basis.T
        k_xx = xq @ xq.T
    dq = None
    if normalize_dense:
        dq = _inverse_norms(np.diagonal(k_xx).copy())
    if weights_q is not None:
        dq = weights_q if dq is None else dq * weights_q
    if dq is not None:
        k_xs *= dq[:, None]
        k_xx *= dq[:, None] * dq[None, :]
    r = gram_ss.shape[0]
    q = r + k_xx.shape[0]
    gram_q = np.empty((q, q))
    gram_q[:r, :r] = gram_ss
    gram_q[r:, :r] = k_xs
    gram_q[:r, r:] = k_xs.T
    gram_q[r:, r:] = k_xx
    return gram_q, dq


def _shrink_super_block(
    gram_q: np.ndarray, gram_ss: np.ndarray, r: int, block: int, ell: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The shrinks of one super-block from its Gram alone: ``R_j+1 = M [R_j; E_j+1]``.

    Returns the coefficients ``R`` of the sketch over ``Q``, the sketch's Gram, its singular
    values and the shrinkage removed.
    """
    q = gram_q.shape[0]
    coef = np.eye(r, q)
    s_values = np.zeros(0)
    shrinkage = 0.0
    for j0 in range(0, q - r, block):
        seen = r + j0
        new = slice(seen, min(seen + block, q))
        rr = coef.shape[0]
        cross = gram_q[new, :seen] @ coef[:, :seen].T
        size = rr + cross.shape[0]
        work = np.empty((size, size))
        work[:rr, :rr] = gram_ss
        work[rr:, :rr] = cross
        work[:rr, rr:] = cross.T
        work[rr:, rr:] = gram_q[new, new]
        lam, vec = _eigh_desc(work)
        keep, s_values, delta = _shrink(lam, ell, size)
        shrinkage += delta
        mix = (vec[:, keep] * (s_values / np.sqrt(lam[keep]))).T
        gram_ss = mix @ work @ mix.T
        gram_ss = (gram_ss + gram_ss.T) * 0.5
        next_coef = np.zeros((keep.size, q))
        next_coef[:, :seen] = mix[:, :rr] @ coef[:, :seen]
        next_coef[:, new] = mix[:, rr:]
        coef = next_coef
    return coef, gram_ss, s_values, shrinkage


def _feature_side(
    active: np.ndarray,
    data: Matrix,
    normalize_dense: bool,
    row_weights: np.ndarray | None,
    ell: int,
    block: int,
) -> SketchUpdate:
    """Shrinks through the ``m x m`` Gram ``S^T S + X^T X`` (used when ``ell + block > m``)."""
    n, m = data.shape
    basis = active
    s_values = np.zeros(0)
    shrinkage = 0.0
    squared_norm = 0.0
    for start in range(0, n, block):
        xb = data[start : start + block]
        gram = basis.T @ basis
        if sp.issparse(xb):
            x_gram = _sparse_gram(xb.T)
        else:
            if normalize_dense:
                xb = xb * _inverse_norms(np.einsum("ij,ij->i", xb, xb))[:, None]
            if row_weights is not None:
                xb = xb * row_weights[start : start + block, None]
            x_gram = xb.T @ xb
        squared_norm += float(np.trace(x_gram))
        gram += x_gram
        lam, vec = _eigh_desc((gram + gram.T) * 0.5)
        keep, s_values, delta = _shrink(lam, ell, m)
        shrinkage += delta
        basis = np.ascontiguousarray((vec[:, keep] * s_values).T)
    sketch = np.zeros((ell, m))
    sketch[: basis.shape[0]] = basis
    return SketchUpdate(sketch, _pad(s_values, ell), shrinkage, squared_norm)


def paper_svd_update(sketch_rows: np.ndarray, rows: Matrix) -> SketchUpdate:
    """Algorithm 2 steps 1-4, literally: dense SVD of ``C_t = [B_{t-1} | Y_t]`` once per chunk.

    The reference for tests and the benchmark (it densifies sparse rows).
    """
    sketch = np.asarray(sketch_rows, dtype=np.float64)
    ell, m = sketch.shape
    if rows.ndim != 2 or rows.shape[1] != m:
        raise InvalidInput(
            f"rows must be 2-D with {m} columns (the sketch width); got shape {rows.shape}"
        )
    dense = cast(sp.csr_matrix, rows).toarray() if sp.issparse(rows) else np.asarray(rows)
    # Step 1: C_t = [B_{t-1} | Y_t]; in row orientation that is the vertical stack.
    work = np.vstack([sketch, dense.astype(np.float64, copy=False)])
    # Step 2: SVD_ell(C_t); the paper's left singular vectors are our right ones.
    _, sigma, vt = np.linalg.svd(work, full_matrices=False)
    top = sigma[: min(ell, sigma.size)]
    # Step 3: subtract sigma_ell^2 (nothing if C_t has fewer than ell singular values).
    delta = float(top[ell - 1] ** 2) if top.size >= ell else 0.0
    shrunk = np.sqrt(np.maximum(top**2 - delta, 0.0))
    if top.size >= ell:
        shrunk[ell - 1] = 0.0
    # Step 4: B_t = U_ell diag(shrunk).
    out = np.zeros((ell, m))
    out[: top.size] = shrunk[:, None] * vt[: top.size]
    return SketchUpdate(out, _pad(shrunk, ell), delta, float(np.sum(dense * dense)))
