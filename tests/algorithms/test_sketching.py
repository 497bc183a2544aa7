"""Frequent Directions: the guarantee, exactness below rank ell, and agreement between paths."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithms.sketching import (
    SketchUpdate,
    _on_columns,
    frequent_directions_update,
    normalize_sparse_rows,
    paper_svd_update,
)
from service.errors import InvalidInput, InvalidParams


def low_rank(rng: np.random.Generator, n: int, m: int, rank: int, noise: float) -> np.ndarray:
    """Decaying-spectrum low-rank signal plus noise: every shrink has something to do."""
    scales = 1.0 / (1.0 + np.arange(rank))
    signal = (rng.standard_normal((n, rank)) * scales) @ rng.standard_normal((rank, m))
    return signal + noise * rng.standard_normal((n, m))


def stream(
    rows: np.ndarray | sp.csr_matrix,
    ell: int,
    chunk: int,
    block_rows: int | None = None,
    normalize_rows: bool = False,
) -> tuple[np.ndarray, float, list[SketchUpdate]]:
    sketch = np.zeros((ell, rows.shape[1]))
    total = 0.0
    updates = []
    for start in range(0, rows.shape[0], chunk):
        upd = frequent_directions_update(
            sketch, rows[start : start + chunk], block_rows, normalize_rows=normalize_rows
        )
        sketch = upd.sketch_rows
        total += upd.shrinkage
        updates.append(upd)
    return sketch, total, updates


def assert_fd_guarantee(y: np.ndarray, sketch: np.ndarray, shrinkage: float) -> None:
    """S^T S <= Y^T Y, ||Y^T Y - S^T S|| <= shrinkage <= ||Y - Y_k||_F^2 / (ell - k), all k."""
    ell = sketch.shape[0]
    diff = y.T @ y - sketch.T @ sketch
    eig = np.linalg.eigvalsh((diff + diff.T) / 2)
    scale = np.linalg.norm(y, 2) ** 2
    tol = 1e-10 * scale
    assert eig[0] >= -tol, f"B B^T <= Y Y^T violated: min eigenvalue {eig[0]:.3e}"
    err = max(abs(eig[0]), abs(eig[-1]))
    assert err <= shrinkage + tol
    sigma2 = np.linalg.svd(y, compute_uv=False) ** 2
    for k in range(ell):
        tail = float(np.sum(sigma2[k:]))
        assert shrinkage <= tail / (ell - k) + tol, f"bound fails at k={k}"
        assert err <= tail / (ell - k) + tol


@pytest.mark.parametrize(
    ("n", "m", "ell", "chunk", "block_rows"),
    [
        (400, 60, 8, 50, None),  # n > m, row-side Gram (ell + b <= m)
        (400, 60, 8, 50, 3),
        (400, 60, 8, 130, 1000),  # one shrink per chunk
        (60, 300, 12, 25, None),  # n < m
        (60, 300, 12, 7, 1),  # one row at a time
        (300, 12, 8, 40, None),  # ell + b > m: the m x m Gram path
        (300, 12, 8, 40, 2),
        (50, 10, 14, 9, None),  # ell > m: nothing can be shrunk
    ],
)
def test_fd_guarantee_dense(n: int, m: int, ell: int, chunk: int, block_rows: int | None) -> None:
    rng = np.random.default_rng(n * 1000 + m)
    y = low_rank(rng, n, m, rank=10, noise=0.2)
    sketch, total, updates = stream(y, ell, chunk, block_rows)
    assert sketch.shape == (ell, m)
    assert_fd_guarantee(y, sketch, total)
    if ell >= min(n, m):
        assert total == 0.0
    # Rows are s_j u_j^T with orthonormal u_j, sorted by s_j.
    s = updates[-1].singular_values
    assert np.all(np.diff(s) <= 1e-12 * s[0])
    np.testing.assert_allclose(np.linalg.norm(sketch, axis=1), s, rtol=1e-8, atol=1e-10 * s[0])
    live = s > 0
    u = sketch[live] / s[live, None]
    np.testing.assert_allclose(u @ u.T, np.eye(int(live.sum())), atol=1e-8)


@pytest.mark.parametrize(("n", "m", "ell"), [(300, 80, 10), (40, 200, 8), (200, 15, 9)])
@pytest.mark.parametrize("chunk", [1, 37, 300])
@pytest.mark.parametrize("block_rows", [None, 1, 5, 10_000])
def test_chunking_and_block_size_keep_the_guarantee(
    n: int, m: int, ell: int, chunk: int, block_rows: int | None
) -> None:
    rng = np.random.default_rng(7)
    y = low_rank(rng, n, m, rank=12, noise=0.1)
    sketch, total, _ = stream(y, ell, chunk, block_rows)
    assert_fd_guarantee(y, sketch, total)


def test_exact_when_rank_below_ell() -> None:
    rng = np.random.default_rng(3)
    y = low_rank(rng, 200, 70, rank=6, noise=0.0)
    sketch, total, _ = stream(y, 9, 23)
    assert total == 0.0
    np.testing.assert_allclose(
        sketch.T @ sketch, y.T @ y, atol=1e-9 * float(np.linalg.norm(y, 2)) ** 2
    )


@pytest.mark.parametrize("block_rows", [None, 4, 10_000])
@pytest.mark.parametrize(("m", "ell"), [(400, 12), (30, 8), (2000, 12)])
def test_sparse_input_gives_the_dense_sketch(block_rows: int | None, m: int, ell: int) -> None:
    """Rows that touch most columns are folded in over the whole sketch, rows that touch few
    (m = 2,000 here: 400 of its columns, spread) over the columns they touch; both give the
    dense rows' sketch."""
    rng = np.random.default_rng(5)
    y = sp.random(250, min(m, 400), density=0.05, random_state=rng, format="csr")
    if m > y.shape[1]:
        spread = rng.permutation(m)[: y.shape[1]]
        y = sp.csr_matrix((y.data, spread[y.indices], y.indptr), shape=(250, m))
    few, _ = _on_columns(y)
    many, _ = _on_columns(sp.csr_matrix(np.ones((2, m))))
    assert many is None and (few is None) == (m < 2000)
    sparse_sketch, sparse_total, _ = stream(y, ell, 60, block_rows, normalize_rows=True)
    dense_sketch, dense_total, _ = stream(y.toarray(), ell, 60, block_rows, normalize_rows=True)
    scale = float(np.linalg.norm(dense_sketch, 2)) ** 2
    # Singular vectors may differ in sign: compare S^T S.
    np.testing.assert_allclose(
        sparse_sketch.T @ sparse_sketch, dense_sketch.T @ dense_sketch, atol=1e-10 * scale
    )
    assert sparse_total == pytest.approx(dense_total, rel=1e-9, abs=1e-12)


def test_sparse_input_is_never_densified(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only small products (b x b Grams) may become dense, never an m-wide matrix."""
    m = 3000
    y = sp.random(400, m, density=0.01, random_state=np.random.default_rng(1), format="csr")
    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        original = cls.toarray

        def guarded(self: sp.spmatrix, *args: object, _original=original, **kw: object) -> object:
            assert m not in self.shape, f"densified an m-wide sparse matrix {self.shape}"
            return _original(self, *args, **kw)

        monkeypatch.setattr(cls, "toarray", guarded)
        monkeypatch.setattr(cls, "todense", guarded)
    upd = frequent_directions_update(np.zeros((10, m)), y, normalize_rows=True)
    assert upd.sketch_rows.shape == (10, m)
    upd = frequent_directions_update(upd.sketch_rows, y[:50], block_rows=None)
    assert upd.shrinkage > 0


@pytest.mark.parametrize(("n", "m", "ell", "chunk"), [(300, 50, 8, 60), (90, 200, 10, 30)])
def test_one_shrink_per_chunk_equals_the_paper_svd(n: int, m: int, ell: int, chunk: int) -> None:
    rng = np.random.default_rng(11)
    y = low_rank(rng, n, m, rank=15, noise=0.3)
    fast = np.zeros((ell, m))
    paper = np.zeros((ell, m))
    fast_total = paper_total = 0.0
    for start in range(0, n, chunk):
        part = y[start : start + chunk]
        a = frequent_directions_update(fast, part, block_rows=part.shape[0])
        b = paper_svd_update(paper, part)
        fast, paper = a.sketch_rows, b.sketch_rows
        fast_total += a.shrinkage
        paper_total += b.shrinkage
        np.testing.assert_allclose(a.singular_values, b.singular_values, rtol=1e-8, atol=1e-9)
    scale = float(np.linalg.norm(y, 2)) ** 2
    np.testing.assert_allclose(fast.T @ fast, paper.T @ paper, atol=1e-9 * scale)
    assert fast_total == pytest.approx(paper_total, rel=1e-9)
    assert_fd_guarantee(y, paper, paper_total)


def test_normalisation_is_folded_exactly() -> None:
    rng = np.random.default_rng(2)
    y = low_rank(rng, 500, 120, rank=8, noise=0.5) * rng.uniform(0.1, 10.0, size=(500, 1))
    y[[3, 250]] = 0.0  # zero rows stay zero
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    unit = np.divide(y, norms, out=np.zeros_like(y), where=norms > 0)
    folded, folded_total, ups = stream(y, 10, 170, normalize_rows=True)
    plain, plain_total, _ = stream(unit, 10, 170)
    np.testing.assert_allclose(folded.T @ folded, plain.T @ plain, atol=1e-10 * 500)
    assert folded_total == pytest.approx(plain_total, rel=1e-9)
    assert sum(u.squared_norm for u in ups) == pytest.approx(498.0)
    assert_fd_guarantee(unit, folded, folded_total)
    sparse_unit = normalize_sparse_rows(sp.csr_matrix(y)).toarray()
    np.testing.assert_allclose(sparse_unit, unit, atol=1e-15)


def test_non_orthogonal_incoming_sketch_is_handled() -> None:
    """S S^T is formed from the given rows, not assumed diagonal."""
    rng = np.random.default_rng(4)
    start = rng.standard_normal((6, 40))  # arbitrary rows, not s_j u_j^T
    y = rng.standard_normal((30, 40))
    upd = frequent_directions_update(start, y, block_rows=5)
    whole = np.vstack([start, y])
    assert_fd_guarantee(whole, upd.sketch_rows, upd.shrinkage)
    ref = paper_svd_update(start, y)
    one = frequent_directions_update(start, y, block_rows=30)
    np.testing.assert_allclose(
        one.sketch_rows.T @ one.sketch_rows, ref.sketch_rows.T @ ref.sketch_rows, atol=1e-9 * 100
    )


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("decay", [1.0, 0.97])
def test_a_sketchs_own_singular_values_stand_for_its_gram(sparse: bool, decay: float) -> None:
    """``singular_values`` of a sketch this function made give its ``S S^T = diag(s^2)``
    instead of a product over m: the same sketch to rounding, chunk after chunk (sparse rows
    on their own columns too), with the guarantee kept; a count that does not fit is refused."""
    rng = np.random.default_rng(21)
    y = low_rank(rng, 420, 300, rank=20, noise=0.2)
    chunks = sp.csr_matrix(np.where(y > 0.3, y, 0.0)) if sparse else y
    computed = known = frequent_directions_update(np.zeros((12, 300)), chunks[:60], 25)
    for start in range(60, 420, 60):
        part = chunks[start : start + 60]
        computed = frequent_directions_update(
            computed.sketch_rows, part, 25, normalize_rows=True, decay=decay
        )
        known = frequent_directions_update(
            known.sketch_rows,
            part,
            25,
            normalize_rows=True,
            decay=decay,
            singular_values=known.singular_values,
        )
        scale = float(computed.singular_values[0]) ** 2
        # A singular value's rounding is a few ulps of the largest one (of the norm), not of
        # itself: the small ones are compared on that scale.
        np.testing.assert_allclose(
            known.singular_values,
            computed.singular_values,
            rtol=1e-12,
            atol=1e-12 * float(computed.singular_values[0]),
        )
        np.testing.assert_allclose(
            known.sketch_rows.T @ known.sketch_rows,
            computed.sketch_rows.T @ computed.sketch_rows,
            atol=1e-12 * scale,
        )
        assert known.shrinkage == pytest.approx(computed.shrinkage, rel=1e-12, abs=1e-15)
        gram = known.sketch_rows @ known.sketch_rows.T
        np.testing.assert_allclose(gram, np.diag(known.singular_values**2), atol=1e-12 * scale)
    with pytest.raises(InvalidInput, match="one per sketch row"):
        frequent_directions_update(known.sketch_rows, y[:3], singular_values=np.ones(11))


def test_inputs_are_not_mutated() -> None:
    rng = np.random.default_rng(9)
    sketch = frequent_directions_update(
        np.zeros((8, 50)), rng.standard_normal((40, 50))
    ).sketch_rows
    rows = rng.standard_normal((30, 50))
    sketch.setflags(write=False)
    rows.setflags(write=False)
    before = (sketch.copy(), rows.copy())
    upd = frequent_directions_update(sketch, rows, normalize_rows=True)
    assert not np.shares_memory(upd.sketch_rows, sketch)
    values = np.linalg.norm(sketch, axis=1)
    for data in (rows, sp.csr_matrix(rows)):
        known = frequent_directions_update(sketch, data, singular_values=values)
        assert not np.shares_memory(known.sketch_rows, sketch)
    np.testing.assert_array_equal(sketch, before[0])
    np.testing.assert_array_equal(rows, before[1])


def test_zero_rows_and_empty_chunks() -> None:
    upd = frequent_directions_update(np.zeros((5, 20)), np.zeros((7, 20)), normalize_rows=True)
    assert not upd.sketch_rows.any() and upd.shrinkage == 0.0
    rng = np.random.default_rng(0)
    sketch = frequent_directions_update(np.zeros((5, 20)), rng.standard_normal((3, 20))).sketch_rows
    same = frequent_directions_update(sketch, np.zeros((0, 20)))
    np.testing.assert_array_equal(same.sketch_rows, sketch)
    np.testing.assert_allclose(same.singular_values, np.linalg.norm(sketch, axis=1), rtol=1e-12)


def test_bad_arguments() -> None:
    with pytest.raises(InvalidParams, match="block_rows"):
        frequent_directions_update(np.zeros((4, 10)), np.ones((3, 10)), block_rows=0)
    with pytest.raises(InvalidParams, match="block_rows"):
        frequent_directions_update(np.zeros((4, 10)), np.ones((3, 10)), block_rows=True)
    with pytest.raises(InvalidInput, match="10 columns"):
        frequent_directions_update(np.zeros((4, 10)), np.ones((3, 11)))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 60),
    m=st.integers(1, 40),
    ell=st.integers(2, 12),
    chunk=st.integers(1, 25),
    block=st.one_of(st.none(), st.integers(1, 30)),
    seed=st.integers(0, 2**16),
)
def test_fd_guarantee_property(
    n: int, m: int, ell: int, chunk: int, block: int | None, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    y = low_rank(rng, n, m, rank=min(5, m), noise=0.3)
    sketch, total, _ = stream(y, ell, chunk, block)
    assert_fd_guarantee(y, sketch, total)
