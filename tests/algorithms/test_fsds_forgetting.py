"""FSDS with exponential forgetting (``decay``): the bound, decay = 1, chunkings, drift.

The matrix a decayed selector sketches is ``A_w``: row ``i`` of the normalised stream weighted
by ``decay**(rows after it)``. Its guarantee (``service.algorithms.sketching``) is the
Frequent-Directions one for ``A_w``: ``0 <= A_w^T A_w - B^T B <= shrinkage_total I`` and
``shrinkage_total <= ||A_w - [A_w]_k||_F^2 / (ell - k)`` for every ``k < ell``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.base import State
from service.algorithms.fsds import (
    FSDS,
    FSDSParams,
    gfw_p2_kernel_weights,
    gfw_p2_weights,
    normalize_rows,
)
from service.algorithms.kernels import RandomFourierFeatures
from service.algorithms.sketching import decay_weights, frequent_directions_update
from service.errors import InvalidParams
from tests.support.datasets import load_mat
from tests.support.states import array_field, number_field


def low_rank(rng: np.random.Generator, n: int, m: int, rank: int, noise: float) -> np.ndarray:
    scales = 1.0 / (1.0 + np.arange(rank))
    signal = (rng.standard_normal((n, rank)) * scales) @ rng.standard_normal((rank, m))
    return signal + noise * rng.standard_normal((n, m))


def run(
    rows: np.ndarray | sp.csr_matrix, params: dict[str, Any], chunks: list[int]
) -> tuple[FSDSParams, State]:
    """The method's state after ``rows`` arrived in update calls of the given sizes."""
    assert sum(chunks) == rows.shape[0]
    method = FSDS()
    resolved = method.resolve_params(params, rows.shape[1])
    state = method.initial_state(resolved)
    start = 0
    for size in chunks:
        state = method.update(state, resolved, rows[start : start + size])
        start += size
    return resolved, state


def sizes(n: int, chunk: int) -> list[int]:
    return [min(chunk, n - start) for start in range(0, n, chunk)]


def weighted(rows: np.ndarray, decay: float) -> np.ndarray:
    """``A_w``: row i times ``decay**(n - 1 - i)``."""
    return np.asarray(rows * decay_weights(decay, rows.shape[0])[:, None])


def assert_fd_bound(a_w: np.ndarray, sketch: np.ndarray, shrinkage: float) -> None:
    """``0 <= A_w^T A_w - B^T B <= shrinkage``, ``shrinkage <= tail_k / (ell - k)`` for all k."""
    ell = sketch.shape[0]
    diff = a_w.T @ a_w - sketch.T @ sketch
    eig = np.linalg.eigvalsh((diff + diff.T) / 2)
    tol = 1e-10 * np.linalg.norm(a_w, 2) ** 2
    assert eig[0] >= -tol, f"B^T B <= A_w^T A_w violated: {eig[0]:.3e}"
    assert eig[-1] <= shrinkage + tol
    sigma2 = np.linalg.svd(a_w, compute_uv=False) ** 2
    for k in range(ell):
        assert shrinkage <= float(np.sum(sigma2[k:])) / (ell - k) + tol, f"bound fails at k={k}"


# -- (a) the stated bound against the exact weighted matrix -------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("block_rows", ["default", None, 7])
@pytest.mark.parametrize(
    ("n", "m", "ell", "chunk", "decay"),
    [(600, 40, 8, 90, 0.995), (300, 120, 10, 33, 0.98), (240, 30, 6, 1, 0.9)],
)
def test_decayed_sketch_keeps_the_fd_bound_of_the_weighted_matrix(
    sparse: bool, block_rows: object, n: int, m: int, ell: int, chunk: int, decay: float
) -> None:
    rng = np.random.default_rng(n + m)
    y = low_rank(rng, n, m, 12, noise=0.3) * rng.uniform(0.2, 5.0, size=(n, 1))
    if sparse:
        y = y * (rng.random(y.shape) < 0.3)
    params: dict[str, Any] = {"k": 3, "ell": ell, "decay": decay}
    if block_rows != "default":
        params["block_rows"] = block_rows
    _, state = run(sp.csr_matrix(y) if sparse else y, params, sizes(n, chunk))
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    a_w = weighted(unit, decay)
    shrinkage = number_field(state, "shrinkage_total")
    assert shrinkage > 0  # the bound is exercised, not vacuous
    assert_fd_bound(a_w, array_field(state, "sketch_rows"), shrinkage)
    assert state["squared_norm_seen"] == pytest.approx(float(np.sum(a_w * a_w)), rel=1e-9)
    assert state["rows_seen"] == n
    # The old rows are forgotten: the undecayed stream's mass is far larger.
    assert float(np.sum(unit * unit)) > 2 * float(state["squared_norm_seen"])


def test_gaussian_kernel_sketch_keeps_the_bound_of_the_weighted_joint_matrix() -> None:
    rng = np.random.default_rng(3)
    y = low_rank(rng, 400, 20, 8, noise=0.2)
    params = {"k": 2, "ell": 9, "decay": 0.99, "kernel": "gaussian", "kernel_components": 24}
    resolved, state = run(y, params, sizes(400, 64))
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    bandwidth = number_field(state, "kernel_bandwidth")
    rff = RandomFourierFeatures(20, 24, bandwidth, resolved.seed)
    joint = weighted(np.hstack([unit, rff.transform(unit)]), 0.99)
    shrinkage = number_field(state, "shrinkage_total")
    assert shrinkage > 0
    assert_fd_bound(joint, array_field(state, "sketch_rows"), shrinkage)
    assert state["squared_norm_seen"] == pytest.approx(
        float(np.sum(weighted(unit, 0.99) ** 2)), rel=1e-9
    )


# -- (b) decay = 1 is the code without forgetting ----------------------------------------------


@pytest.mark.parametrize("kernel", ["cosine", "gaussian"])
@pytest.mark.parametrize("sparse", [False, True])
def test_decay_one_is_bit_identical_to_no_decay(kernel: str, sparse: bool) -> None:
    rng = np.random.default_rng(11)
    y = low_rank(rng, 300, 50, 10, noise=0.3)
    rows = sp.csr_matrix(y * (rng.random(y.shape) < 0.4)) if sparse else y
    extra: dict[str, Any] = {"kernel_components": 16} if kernel == "gaussian" else {}
    base = {"k": 3, "ell": 8, "block_rows": 40, "kernel": kernel, **extra}
    plain_params, plain = run(rows, base, [70, 130, 100])
    one_params, one = run(rows, {**base, "decay": 1.0}, [70, 130, 100])
    assert one_params.as_params() == plain_params.as_params()
    assert "decay" not in one_params.as_params()
    assert number_field(plain, "shrinkage_total") > 0
    assert set(one) == set(plain)
    for key, value in plain.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(one[key], value, err_msg=key)
        else:
            assert one[key] == value and type(one[key]) is type(value), key


def test_sketching_with_decay_one_is_bit_identical() -> None:
    rng = np.random.default_rng(12)
    y = low_rank(rng, 200, 60, 9, noise=0.2)
    start = frequent_directions_update(np.zeros((7, 60)), y[:50], 20).sketch_rows
    plain = frequent_directions_update(start, y[50:], 20, normalize_rows=True)
    one = frequent_directions_update(start, y[50:], 20, normalize_rows=True, decay=1.0)
    np.testing.assert_array_equal(one.sketch_rows, plain.sketch_rows)
    np.testing.assert_array_equal(one.singular_values, plain.singular_values)
    assert (one.shrinkage, one.squared_norm) == (plain.shrinkage, plain.squared_norm)


# -- (c) chunkings: forgetting adds no dependence on them ---------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
def test_below_rank_ell_decayed_weights_are_batch_gfw_p2_of_the_weighted_rows_for_any_chunking(
    sparse: bool,
) -> None:
    """FSDS is not chunking-invariant (``chunking_invariant = False``: shrinks fall where calls
    end), but below rank ell nothing is shrunk, so every chunking must give the batch answer on
    ``A_w``: decay is per row, and so is the same however the applier coalesces chunks."""
    rng = np.random.default_rng(5)
    n, m = 180, 70
    y = low_rank(rng, n, m, 6, noise=0.0) * rng.uniform(0.5, 3.0, size=(n, 1))
    rows = sp.csr_matrix(y) if sparse else y
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    reference = gfw_p2_weights(weighted(unit, 0.97), 4, normalize_rows=False)
    states = []
    for chunks in ([n], [1] * 20 + [160], sizes(n, 17), [3, 100, 77]):
        params, state = run(rows, {"k": 4, "ell": 10, "decay": 0.97}, chunks)
        assert state["shrinkage_total"] == 0.0
        weights = FSDS().weights(state, params)
        np.testing.assert_allclose(weights, reference, rtol=1e-7, atol=1e-9 * reference.max())
        states.append(state)
    grams = [array_field(s, "sketch_rows").T @ array_field(s, "sketch_rows") for s in states]
    for gram in grams[1:]:
        np.testing.assert_allclose(gram, grams[0], atol=1e-10)
    for state in states[1:]:
        assert state["squared_norm_seen"] == pytest.approx(states[0]["squared_norm_seen"])


def test_gaussian_decayed_weights_equal_the_weighted_batch_below_rank_ell() -> None:
    rng = np.random.default_rng(6)
    y = low_rank(rng, 12, 15, 12, noise=0.0)
    params = {"k": 2, "ell": 13, "decay": 0.9, "kernel": "gaussian", "kernel_components": 8}
    resolved, state = run(y, params, [5, 7])
    assert state["shrinkage_total"] == 0.0
    rff = RandomFourierFeatures(15, 8, number_field(state, "kernel_bandwidth"), 0)
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    # The batch reference on A_w: scale the (already normalised) rows and their features.
    w = decay_weights(0.9, 12)
    expected = _weighted_kernel_reference(unit, w, rff, 2)
    np.testing.assert_allclose(FSDS().weights(state, resolved), expected, rtol=1e-7)
    assert not np.allclose(expected, gfw_p2_kernel_weights(unit, 2, 3.0, rff, False), rtol=1e-3)


def _weighted_kernel_reference(
    unit: np.ndarray, w: np.ndarray, rff: RandomFourierFeatures, k: int
) -> np.ndarray:
    """``X = (Y_w Y_w^T + alpha I)^-1 Y_w V_k(Z_w)`` with rows and random features weighted."""
    y_w, z_w = unit * w[:, None], rff.transform(unit) * w[:, None]
    u, sigma, vt = np.linalg.svd(y_w, full_matrices=False)
    alpha = 2.0**3 * sigma[k - 1]
    scale = sigma / (sigma**2 + alpha)
    left, _, _ = np.linalg.svd(z_w, full_matrices=False)
    x = vt.T @ (scale[:, None] * (u.T @ left[:, :k]))
    return np.asarray(np.abs(x).max(axis=1))


# -- parameters --------------------------------------------------------------------------------


def test_decay_is_resolved_and_shown_only_when_forgetting() -> None:
    method = FSDS()
    assert "decay" not in method.resolve_params({}, 30).as_params()
    once = method.resolve_params({"decay": 1}, 30).as_params()
    assert once == method.resolve_params({}, 30).as_params()
    resolved = method.resolve_params({"decay": 0.999}, 30).as_params()
    assert resolved["decay"] == 0.999 and isinstance(resolved["decay"], float)
    assert method.resolve_params(resolved, 30).as_params() == resolved


@pytest.mark.parametrize(
    ("decay", "message"),
    [
        (0, r"decay must be a finite number in \(0, 1\]; got 0"),
        (-0.5, r"decay must be a finite number in \(0, 1\]"),
        (1.5, r"decay must be a finite number in \(0, 1\]"),
        (True, r"decay must be a finite number in \(0, 1\]; got True"),
        (float("nan"), r"decay must be a finite number"),
        ("0.9", r"decay must be a finite number in \(0, 1\]; got '0.9'"),
    ],
)
def test_invalid_decay(decay: object, message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        FSDS().resolve_params({"decay": decay}, 30)
    with pytest.raises(InvalidParams, match="decay must be a number in"):
        frequent_directions_update(np.zeros((3, 4)), np.ones((2, 4)), decay=decay)  # type: ignore[arg-type]


# -- (d) drift: the ranking follows the stream only when it forgets ----------------------------


def overlap(a: np.ndarray, b: np.ndarray, h: int) -> float:
    top_a = set(np.argsort(-a, kind="stable")[:h].tolist())
    return len(top_a & set(np.argsort(-b, kind="stable")[:h].tolist())) / h


def drifting_stream(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Two halves whose informative features differ: 0-9 first, 10-19 after (rank 3 each)."""
    halves = []
    for informative in (np.arange(10), np.arange(10, 20)):
        loadings = np.zeros((3, m))
        loadings[:, informative] = rng.standard_normal((3, 10)) * 3.0
        halves.append(rng.standard_normal((n, 3)) @ loadings + rng.standard_normal((n, m)) * 0.3)
    return halves[0], halves[1]


def test_synthetic_drift_is_followed_with_decay_and_not_without() -> None:
    rng = np.random.default_rng(21)
    first, second = drifting_stream(rng, 1500, 80)
    stream = np.vstack([first, second])
    target = gfw_p2_weights(second, 3)
    assert set(np.argsort(-target)[:10].tolist()) == set(range(10, 20))
    found = {}
    for decay in (1.0, 0.995):
        params, state = run(stream, {"k": 3, "decay": decay}, sizes(3000, 200))
        found[decay] = overlap(FSDS().weights(state, params), target, 10)
    assert found[0.995] >= 0.9
    assert found[1.0] <= 0.6
    assert found[0.995] - found[1.0] >= 0.4


@pytest.mark.slow
def test_coil20_class_drift_is_followed_with_decay_and_not_without() -> None:
    """COIL20's classes 1-10, then 11-20 (each half shuffled), the paper's 200-row chunks,
    k = 10: the final top-40 against the second half's batch ranking."""
    x, labels = load_mat("COIL20.mat")
    assert isinstance(x, np.ndarray)
    rng = np.random.default_rng(0)
    first = rng.permutation(np.flatnonzero(labels <= 10))
    second = rng.permutation(np.flatnonzero(labels > 10))
    stream = x[np.concatenate([first, second])]
    target = gfw_p2_weights(x[second], 10)
    found = {}
    for decay in (1.0, 0.998):
        params, state = run(stream, {"k": 10, "decay": decay}, sizes(stream.shape[0], 200))
        found[decay] = overlap(FSDS().weights(state, params), target, 40)
    print(f"top-40 overlap with the second half's batch ranking: {found}")
    assert found[1.0] <= 0.2
    assert found[0.998] >= found[1.0] + 0.3
