"""IQRP: the exact Businger-Golub pivoted-QR column selection in few passes (Maung & Schweitzer,
"Pass-Efficient Unsupervised Feature Selection", NIPS 2013, Figures 1-6, section 4).

QRP (Figure 1) selects, k times, the column with the largest squared residual
``v_i = |x_i - Q Q^T x_i|^2`` against the columns selected so far, one pass over the data per
selection. IQRP keeps, per column, ``v_i(r_i)``: the residual against the first ``r_i`` selected
columns only (eq. (1)). Since ``v_i(r)`` only decreases with ``r``, a stale value is an upper
bound, and a column whose upper bound is below the threshold ``T`` of a heap of the ``l + 1``
best candidates (eq. (3)) is skipped without being read (Figure 5, A.1). At the end of a pass the
``l`` best candidates ``L`` are run through QRP as long as the pivot stays above ``BF``, the
``(l+1)``-th value (Figure 6): each pass selects at least one column (section 4.2) and the
selection is exactly QRP's (section 4.1).

Column sources are read block by block; a block whose every column is below ``T`` when the pass
reaches it is not fetched at all (``T`` only grows within a pass, so nothing in it could be
needed). The account follows section 4.3: passes ``p``, IO-passes ``q = 1 + sum_{j>=2} n_j / n``
(``n_j``: columns not skipped in pass ``j``), the orthogonalisation cost ``c`` and the flops of
eq. (6) (memory-efficient Gram-Schmidt of Figure 3, left: the data is read-only, the default) or
eq. (7) (time-efficient variant: residual vectors kept and overwritten, Figure 2, left).

Numerics: a downdated ``v_i`` loses relative accuracy when it becomes small against the value it
was last computed from (cancellation). As LAPACK's geqp3 does (``tol3z = sqrt(eps)``), such a
value is recomputed from the column, which is in hand whenever ``v_i`` is downdated. New basis
vectors are orthogonalised twice (Gram-Schmidt with re-orthogonalisation).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from service.errors import InvalidInput, SelectorMismatch

__all__ = ["ColumnSource", "IQRPResult", "MatrixSource", "iqrp", "qrp"]

VARIANTS = ("memory", "time")
_EPS = float(np.finfo(np.float64).eps)
#: Recompute a downdated residual below this fraction of the value it was computed from.
_RECOMPUTE = math.sqrt(_EPS)


class ColumnSource(Protocol):
    """Columns readable in passes, block by block; a block is fetched only by ``read_block``."""

    n_rows: int
    n_columns: int

    @property
    def block_bounds(self) -> Sequence[tuple[int, int]]:
        """Contiguous ``[start, stop)`` column ranges covering ``0..n_columns`` in order."""
        ...

    def read_block(self, block: int) -> np.ndarray:
        """Dense float64 columns of ``block``: shape ``(n_rows, stop - start)``."""
        ...


class MatrixSource:
    """An in-memory ``ColumnSource`` over a dense array or a scipy sparse matrix (m x n).

    ``reads`` lists the blocks fetched, in order (so that tests can count them).
    """

    def __init__(self, matrix: Any, block_columns: int = 256) -> None:
        if block_columns < 1:
            raise InvalidInput(f"block_columns must be >= 1; got {block_columns}")
        self.matrix = sp.csc_matrix(matrix) if sp.issparse(matrix) else np.asarray(matrix)
        if self.matrix.ndim != 2:
            raise InvalidInput(
                f"expected a 2-D matrix (objects x features); got {self.matrix.ndim}-D"
            )
        self.n_rows, self.n_columns = (int(d) for d in self.matrix.shape)
        self.block_bounds = [
            (start, min(start + block_columns, self.n_columns))
            for start in range(0, self.n_columns, block_columns)
        ]
        self.reads: list[int] = []

    def read_block(self, block: int) -> np.ndarray:
        self.reads.append(block)
        start, stop = self.block_bounds[block]
        part = self.matrix[:, start:stop]
        if isinstance(part, np.ndarray):
            return np.asarray(part, dtype=np.float64)
        return np.asarray(part.toarray(), dtype=np.float64)


@dataclass(frozen=True)
class IQRPResult:
    """The selection and what it cost (section 4.3)."""

    #: The k selected columns in selection order (QRP's, i.e. geqp3's first k pivots).
    indices: list[int]
    #: ``|R_jj|``: the residual norm of each selected column when it was selected.
    pivots: list[float]
    passes: int
    #: ``q = 1 + sum_{j>=2} n_j / n``.
    io_passes: float
    #: ``n_j``: columns not skipped in each pass (the first pass reads all n).
    columns_read: list[int]
    #: Blocks fetched from the source over all passes.
    blocks_read: int
    #: ``c`` of eq. (6): total ``|S| - r_i`` over all updates of a ``v_i`` (Figure 5, A.2.2.1),
    #: divided by n.
    ortho_units: float
    #: Eq. (6) ``2mn + 4mnc + 4mlk`` (memory variant) or eq. (7) ``2mn + 4m sum r~_i`` (time).
    flops: float
    flops_per_kmn: float
    l: int
    variant: str


def _check_k_l(k: Any, l: Any, n: int) -> tuple[int, int]:
    if isinstance(k, bool) or not isinstance(k, Integral) or int(k) < 1:
        raise InvalidInput(f"k must be an integer >= 1; got {k!r}")
    if int(k) > n:
        raise SelectorMismatch(f"k={k} is larger than the number of columns n={n}")
    if l is None:
        return int(k), int(k)  # the paper's recommendation (section 6)
    if isinstance(l, bool) or not isinstance(l, Integral) or int(l) < 1:
        raise InvalidInput(f"l (the candidate list length) must be an integer >= 1; got {l!r}")
    return int(k), int(l)


def _finite(block: np.ndarray, start: int) -> np.ndarray:
    if not np.all(np.isfinite(block)):
        row, col = np.argwhere(~np.isfinite(block))[0]
        raise InvalidInput(
            f"columns must be finite; got {block[row, col]} in column {start + col}, row {row}"
        )
    return block


class _Basis:
    """The orthonormal basis ``Q`` of the selected columns (Figure 3, left, steps 4-5)."""

    def __init__(self, m: int, k: int) -> None:
        self.q = np.zeros((m, k))
        self.size = 0

    def residual(self, x: np.ndarray) -> np.ndarray:
        """``x - Q Q^T x``, orthogonalised twice (one pass loses orthogonality for tiny ones)."""
        q = self.q[:, : self.size]
        out = x - q @ (q.T @ x)
        return np.asarray(out - q @ (q.T @ out))

    def add(self, residual: np.ndarray) -> None:
        self.q[:, self.size] = residual / np.linalg.norm(residual)
        self.size += 1


class _Columns:
    """Per-column bookkeeping: ``v_i(r_i)``, ``r_i`` and the value ``v`` was last computed from."""

    def __init__(self, n: int) -> None:
        self.v = np.zeros(n)
        self.r = np.zeros(n, dtype=np.int64)
        self.reference = np.zeros(n)
        self.ortho_units = 0

    def bring_up_to_date(self, i: int, x: np.ndarray, basis: _Basis) -> None:
        """Figure 5, A.2.2.1: ``v_i(|S|)`` from ``v_i(r_i)`` with the new basis vectors only."""
        r, s = int(self.r[i]), basis.size
        if r == s:
            return
        w = basis.q[:, r:s].T @ x
        value = self.v[i] - float(w @ w)
        self.ortho_units += s - r
        if value <= _RECOMPUTE * self.reference[i]:
            # Cancellation: recompute from the column (geqp3's tol3z rule).
            residual = basis.residual(x)
            value = float(residual @ residual)
            self.reference[i] = value
        self.v[i] = max(value, 0.0)
        self.r[i] = s


class _Heap:
    """Min-heap of the ``l + 1`` largest candidates seen in a pass (section 4, eq. (3))."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # (v, -index, index, column): equal values keep the lower index (QRP's argmax rule).
        self.items: list[tuple[float, int, int, np.ndarray]] = []

    @property
    def threshold(self) -> float:
        """``T`` of eq. (3): the smallest value held once the heap is full, else -inf."""
        return self.items[0][0] if len(self.items) == self.capacity else -math.inf

    def offer(self, v: float, index: int, column: np.ndarray) -> None:
        item = (v, -index, index, column)
        if len(self.items) < self.capacity:
            heapq.heappush(self.items, item)
        elif item[:2] > self.items[0][:2]:
            heapq.heapreplace(self.items, item)

    def candidates(self) -> tuple[list[tuple[int, np.ndarray]], float]:
        """``L`` (without the top of a full heap) and ``BF`` (the top, or -inf)."""
        bound = self.threshold
        items = sorted(self.items, reverse=True)
        if len(items) == self.capacity:
            items = items[:-1]
        return [(index, column) for _, _, index, column in items], bound


def iqrp(source: ColumnSource, k: int, l: int | None = None, variant: str = "memory") -> IQRPResult:
    """The first k columns of pivoted QR over ``source``, in IQRP's passes (Figure 4).

    ``l`` is the candidate list length (default k, section 6). ``variant="memory"`` (default)
    reads columns only (Figure 3, left); ``"time"`` keeps every residual vector in memory after
    the first pass (m x n floats) and updates it in place (Figure 2, left), for eq. (7).
    """
    if variant not in VARIANTS:
        raise InvalidInput(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    n = int(source.n_columns)
    k, l = _check_k_l(k, l, n)
    run = _Passes(source, k, l, variant)
    run.first_pass()
    while len(run.selected) < k:
        before = len(run.selected)
        run.next_pass()
        if len(run.selected) == before:  # pragma: no cover - section 4.2 rules this out
            raise RuntimeError("an IQRP pass selected nothing")
    return run.result()


class _Passes:
    """One IQRP run: the basis, the columns' bookkeeping and what each pass read."""

    def __init__(self, source: ColumnSource, k: int, l: int, variant: str) -> None:
        self.source, self.k, self.l, self.variant = source, k, l, variant
        self.m, self.n = int(source.n_rows), int(source.n_columns)
        self.basis = _Basis(self.m, k)
        self.cols = _Columns(self.n)
        self.residuals = np.empty((self.m, self.n)) if variant == "time" else None
        self.selected: list[int] = []
        self.pivots: list[float] = []
        self.columns_read: list[int] = []
        self.blocks_read = 0
        self.rank_floor = 0.0

    def _read(self, b: int, start: int) -> np.ndarray:
        self.blocks_read += 1
        return _finite(np.asarray(self.source.read_block(b), dtype=np.float64), start)

    def first_pass(self) -> None:
        """Figure 4, step 1: ``v_i(0) = |x_i|^2``, every column read."""
        cols, m, residuals = self.cols, self.m, self.residuals
        heap = _Heap(self.l + 1)
        for b, (start, stop) in enumerate(self.source.block_bounds):
            block = self._read(b, start)
            if block.shape != (m, stop - start):
                expected = (m, stop - start)
                raise InvalidInput(f"block {b} has shape {block.shape}; expected {expected}")
            if residuals is not None:
                residuals[:, start:stop] = block
            norms = np.einsum("ij,ij->j", block, block)
            cols.v[start:stop] = norms
            cols.reference[start:stop] = norms
            for j in np.nonzero(norms > heap.threshold)[0] if stop > start else []:
                if norms[j] > heap.threshold or len(heap.items) < heap.capacity:
                    i = start + int(j)
                    column = residuals[:, i] if residuals is not None else block[:, j]
                    heap.offer(float(norms[j]), i, column)
        self.columns_read.append(self.n)
        self._exploit(*heap.candidates())

    def next_pass(self) -> None:
        """Figure 4, step 2 (Figure 5): the columns whose bound may beat the list's threshold."""
        cols, residuals = self.cols, self.residuals
        heap = _Heap(self.l + 1)
        visited = 0
        for b, (start, stop) in enumerate(self.source.block_bounds):
            if np.all(cols.v[start:stop] <= heap.threshold):
                continue  # the whole block would be skipped (A.1): do not fetch it
            # The time variant's residuals are a view; the memory variant reads the block.
            block = self._read(b, start) if residuals is None else residuals[:, start:stop]
            for i in range(start, stop):
                if cols.v[i] <= heap.threshold:
                    continue  # A.1
                visited += 1
                x = block[:, i - start]
                if residuals is not None:
                    _update_in_place(cols, i, x, self.basis)
                else:
                    cols.bring_up_to_date(i, x, self.basis)  # A.2.2.1
                heap.offer(float(cols.v[i]), i, x)  # A.2.1 / A.2.2.2
        self.columns_read.append(visited)
        self._exploit(*heap.candidates())

    def _exploit(self, candidates: list[tuple[int, np.ndarray]], bound: float) -> None:
        """Figure 6: QRP on ``L`` while the pivot is at least ``BF``."""
        cols, selected = self.cols, self.selected
        while candidates and len(selected) < self.k:
            best = max(range(len(candidates)), key=lambda c: (cols.v[candidates[c][0]], -c))
            z, x = candidates[best]
            if cols.v[z] < bound:  # B.2
                return
            residual = self.basis.residual(x)
            pivot = float(np.linalg.norm(residual))
            if not selected:
                self.rank_floor = max(self.m, self.n) * _EPS * pivot
            if pivot <= self.rank_floor:
                raise InvalidInput(
                    f"k={self.k} exceeds the numerical rank {len(selected)} of the columns; at "
                    f"most {len(selected)} independent columns exist (pivot {pivot:.3g} is at "
                    "rounding level)"
                )
            self.basis.add(residual)  # B.3.1
            selected.append(z)
            self.pivots.append(pivot)
            cols.v[z] = -math.inf  # never a candidate again
            candidates.pop(best)
            for i, column in candidates:  # B.3.2
                cols.bring_up_to_date(i, column, self.basis)

    def result(self) -> IQRPResult:
        m, n, k, l = self.m, self.n, self.k, self.l
        ortho_units = self.cols.ortho_units / n
        if self.variant == "memory":
            flops = 2 * m * n + 4 * m * n * ortho_units + 4 * m * l * k
        else:
            flops = 2 * m * n + 4 * m * float(self.cols.r.sum())
        return IQRPResult(
            indices=self.selected,
            pivots=self.pivots,
            passes=len(self.columns_read),
            io_passes=1 + sum(self.columns_read[1:]) / n,
            columns_read=self.columns_read,
            blocks_read=self.blocks_read,
            ortho_units=ortho_units,
            flops=float(flops),
            flops_per_kmn=float(flops) / (k * m * n),
            l=l,
            variant=self.variant,
        )


def _update_in_place(cols: _Columns, i: int, residual: np.ndarray, basis: _Basis) -> None:
    """Time-efficient A.2.2.1 (Figure 2, left): overwrite the residual with the new vectors."""
    r, s = int(cols.r[i]), basis.size
    if r == s:
        return
    q = basis.q[:, r:s]
    w = q.T @ residual
    residual -= q @ w
    cols.ortho_units += s - r
    value = cols.v[i] - float(w @ w)
    if value <= _RECOMPUTE * cols.reference[i]:
        value = float(residual @ residual)
        cols.reference[i] = value
    cols.v[i] = max(value, 0.0)
    cols.r[i] = s


def qrp(matrix: Any, k: int) -> list[int]:
    """Plain Businger-Golub QRP (Figure 1 with Figure 3, left): k passes, one per selection."""
    source = MatrixSource(matrix, block_columns=max(1, int(matrix.shape[1])))
    dense = source.read_block(0)
    m, n = dense.shape
    k, _ = _check_k_l(k, None, n)
    basis = _Basis(m, k)
    v = np.einsum("ij,ij->j", dense, dense)
    reference = v.copy()
    selected: list[int] = []
    floor = 0.0
    for _ in range(k):
        z = int(np.argmax(v))
        residual = basis.residual(dense[:, z])
        pivot = float(np.linalg.norm(residual))
        floor = floor or max(m, n) * _EPS * pivot
        if pivot <= floor:
            raise InvalidInput(f"k={k} exceeds the numerical rank {len(selected)} of the columns")
        basis.add(residual)
        selected.append(z)
        w = basis.q[:, basis.size - 1] @ dense
        v -= w * w
        v[z] = -math.inf
        stale = np.nonzero(v <= _RECOMPUTE * reference)[0]
        for i in stale:
            if v[i] != -math.inf:
                rest = basis.residual(dense[:, i])
                v[i] = reference[i] = float(rest @ rest)
    return selected
