"""IQRP against LAPACK's pivoted QR (geqp3 via scipy), and its pass account.

Matrices are chosen without ties in the pivots: geqp3 breaks ties by position after its column
swaps, not by the lowest index, and IQRP does not try to imitate that.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from service.algorithms.pivoted_qr import MatrixSource, iqrp, qrp
from service.errors import InvalidInput
from tests.support.datasets import load_mat


def geqp3(matrix: np.ndarray, k: int) -> tuple[list[int], np.ndarray]:
    r, pivots = scipy.linalg.qr(matrix, pivoting=True, mode="r")
    return pivots[:k].tolist(), np.abs(np.diag(r))[:k]


def gaussian(seed: int, m: int = 40, n: int = 120) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((m, n))


def column_scaled(seed: int, m: int = 40, n: int = 120) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, n)) * np.geomspace(10.0, 0.01, n)[rng.permutation(n)]


def low_rank_plus_noise(seed: int, m: int = 60, n: int = 150, rank: int = 12) -> np.ndarray:
    rng = np.random.default_rng(seed)
    signal = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    return signal + 1e-3 * rng.standard_normal((m, n))


MATRICES = {"gaussian": gaussian, "column-scaled": column_scaled, "low-rank": low_rank_plus_noise}


@pytest.mark.parametrize("kind", sorted(MATRICES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_order_and_pivots_equal_geqp3(kind: str, seed: int) -> None:
    matrix = MATRICES[kind](seed)
    for k in (1, 5, 12, 30):
        expected, pivots = geqp3(matrix, k)
        assert qrp(matrix, k) == expected
        for l in (None, 1, 3 * k, 1000):
            for block in (1, 7, 256):
                for variant in ("memory", "time"):
                    result = iqrp(MatrixSource(matrix, block), k, l, variant)
                    assert result.indices == expected, (k, l, block, variant)
                    np.testing.assert_allclose(result.pivots, pivots, rtol=1e-8)
                    assert result.l == (k if l is None else l)


def test_sparse_source_gives_the_dense_answer() -> None:
    rng = np.random.default_rng(4)
    matrix = sp.random(80, 300, density=0.05, random_state=rng, format="csc") * 3.0
    dense = matrix.toarray()
    expected, _ = geqp3(dense, 25)
    assert iqrp(MatrixSource(matrix, 32), 25).indices == expected
    assert iqrp(MatrixSource(sp.csr_matrix(matrix), 5), 25, l=4).indices == expected


@pytest.mark.parametrize(
    ("name", "k", "dense"),
    [
        ("COIL20.mat", 50, True),
        ("Isolet.mat", 50, True),
        ("warpPIE10P.mat", 20, True),
        ("PCMAC.mat", 50, False),
    ],
)
def test_real_data_columns_are_features(name: str, k: int, dense: bool) -> None:
    x, _ = load_mat(name, dense=dense)
    expected, pivots = geqp3(x if isinstance(x, np.ndarray) else x.toarray(), k)
    result = iqrp(MatrixSource(x, 64), k)
    assert result.indices == expected
    np.testing.assert_allclose(result.pivots, pivots, rtol=1e-8)
    assert result.passes < k, "IQRP should need fewer passes than QRP's k"
    assert 1 <= result.io_passes <= result.passes
    assert result.columns_read[0] == x.shape[1] and len(result.columns_read) == result.passes


def test_account_is_consistent_with_its_formulas() -> None:
    matrix = column_scaled(9, m=50, n=400)
    m, n = matrix.shape
    source = MatrixSource(matrix, 16)
    result = iqrp(source, 20)
    assert result.blocks_read == len(source.reads)
    assert result.io_passes == pytest.approx(1 + sum(result.columns_read[1:]) / n)
    assert result.flops == pytest.approx(
        2 * m * n + 4 * m * n * result.ortho_units + 4 * m * 20 * 20
    )
    assert result.flops_per_kmn == pytest.approx(result.flops / (20 * m * n))
    # c counts actual updates: never more than every visited column against every selection.
    assert 0 < result.ortho_units <= sum(result.columns_read[1:]) * 20 / n
    timed = iqrp(MatrixSource(matrix, 16), 20, variant="time")
    assert timed.indices == result.indices and timed.variant == "time"
    assert timed.flops <= 2 * m * n + 4 * m * n * 19  # eq. (7): r~_i <= k - 1
    assert timed.blocks_read == len(source.block_bounds)  # read once, then kept in memory


def test_skipped_blocks_are_not_fetched() -> None:
    """Columns 0-9 dominate; the other blocks hold tiny columns that can never be selected."""
    rng = np.random.default_rng(5)
    matrix = np.hstack(
        [100.0 * rng.standard_normal((30, 10)), 1e-3 * rng.standard_normal((30, 90))]
    )
    source = MatrixSource(matrix, 10)
    result = iqrp(source, 6, l=3)
    assert result.indices == geqp3(matrix, 6)[0]
    assert result.passes > 1
    # Pass 1 reads the ten blocks; later passes only the first one: at least l + 1 = 4 big
    # columns are left in it, they fill the heap, and the small blocks' upper bounds are below
    # its threshold.
    assert source.reads[:10] == list(range(10))
    assert set(source.reads[10:]) == {0}
    assert result.blocks_read == 10 + result.passes - 1
    assert all(read <= 10 for read in result.columns_read[1:])


def test_bad_input_says_what_was_expected() -> None:
    matrix = gaussian(0, m=10, n=20)
    rank_two = np.outer(np.arange(1.0, 11.0), np.ones(20)) + np.outer(np.ones(10), np.arange(20.0))
    nan = matrix.copy()
    nan[3, 4] = np.nan
    cases = [
        (lambda: iqrp(MatrixSource(matrix), 21), "k=21 is larger than the number of columns n=20"),
        (lambda: iqrp(MatrixSource(matrix), 0), "k must be an integer >= 1"),
        (lambda: iqrp(MatrixSource(matrix), 11), "exceeds the numerical rank 10"),
        (lambda: iqrp(MatrixSource(rank_two), 3), "exceeds the numerical rank 2"),
        (lambda: qrp(rank_two, 3), "exceeds the numerical rank 2"),
        (lambda: iqrp(MatrixSource(matrix), 3, l=0), "l (the candidate list length)"),
        (lambda: iqrp(MatrixSource(matrix), 3, variant="fast"), "variant must be one of"),
        (lambda: iqrp(MatrixSource(nan), 3), "got nan in column 4, row 3"),
        (lambda: MatrixSource(matrix, 0), "block_columns must be >= 1"),
    ]
    for call, message in cases:
        with pytest.raises(InvalidInput) as info:
            call()
        assert message in info.value.detail, info.value.detail
