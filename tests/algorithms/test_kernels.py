"""Random Fourier features and FSDS's Gaussian-kernel mode."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import kernels
from service.algorithms.base import Matrix, State
from service.algorithms.fsds import (
    FSDS,
    FSDSParams,
    gfw_p2_kernel_weights,
    gfw_p2_weights,
    normalize_rows,
)
from service.algorithms.kernels import RandomFourierFeatures, median_pairwise_distance
from service.errors import InvalidInput, InvalidParams
from tests.support.states import array_field, number_field


def test_same_seed_same_map_across_calls_and_processes_cache() -> None:
    rows = np.random.default_rng(0).standard_normal((5, 12))
    first = RandomFourierFeatures(12, 64, 1.5, seed=3).transform(rows)
    kernels._draws.cache_clear()  # regenerated from the seed, not remembered
    second = RandomFourierFeatures(12, 64, 1.5, seed=3).transform(rows)
    np.testing.assert_array_equal(first, second)
    other = RandomFourierFeatures(12, 64, 1.5, seed=4).transform(rows)
    assert not np.allclose(first, other)
    # Bandwidth only rescales the same draws.
    a = RandomFourierFeatures(12, 64, 1.0, seed=3)
    b = RandomFourierFeatures(12, 64, 2.0, seed=3)
    np.testing.assert_allclose(a.omega, 2.0 * b.omega)
    np.testing.assert_array_equal(a.offset, b.offset)
    assert np.all((a.offset >= 0) & (a.offset < 2 * math.pi))


def test_map_formula_and_kernel_approximation() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 6)) * 0.5
    rff = RandomFourierFeatures(6, 20_000, bandwidth=1.3, seed=0)
    z = rff.transform(x)
    np.testing.assert_allclose(
        z, math.sqrt(2 / 20_000) * np.cos(x @ rff.omega + rff.offset), rtol=1e-12, atol=1e-15
    )
    exact = np.exp(-((x[:, None, :] - x[None, :, :]) ** 2).sum(-1) / (2 * 1.3**2))
    np.testing.assert_allclose(rff.kernel(x, x), exact, atol=1e-12)
    assert np.abs(z @ z.T - exact).max() < 0.03  # Monte Carlo error ~ 1/sqrt(D)
    assert rff.omega.std() == pytest.approx(1 / 1.3, rel=0.02)


def test_sparse_rows_match_dense() -> None:
    x = sp.random(30, 50, density=0.1, random_state=np.random.default_rng(2), format="csr")
    rff = RandomFourierFeatures(50, 32, 0.7, seed=9)
    np.testing.assert_allclose(rff.transform(x), rff.transform(x.toarray()), atol=1e-14)


def test_rff_validation() -> None:
    with pytest.raises(InvalidParams, match="bandwidth must be a finite number > 0; got 0"):
        RandomFourierFeatures(3, 4, 0, seed=0)
    with pytest.raises(InvalidParams, match="n_components must be an integer >= 1; got True"):
        RandomFourierFeatures(3, True, 1.0)
    with pytest.raises(InvalidParams, match="seed must be an integer >= 0"):
        RandomFourierFeatures(3, 4, 1.0, seed=-2)
    with pytest.raises(InvalidInput, match="3 columns"):
        RandomFourierFeatures(3, 4, 1.0).transform(np.ones((2, 4)))


def test_median_pairwise_distance() -> None:
    rows = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0], [0.0, 1.0]])
    dists = [5.0, 10.0, 1.0, 5.0, math.hypot(3, 3), math.hypot(6, 7)]
    assert median_pairwise_distance(rows) == pytest.approx(float(np.median(dists)))
    assert median_pairwise_distance(sp.csr_matrix(rows)) == pytest.approx(np.median(dists))
    assert median_pairwise_distance(rows, max_rows=2) == pytest.approx(5.0)
    assert median_pairwise_distance(rows[:1]) == 0.0


def gaussian_run(
    chunks: Sequence[Matrix], params: Mapping[str, object]
) -> tuple[FSDS, FSDSParams, State]:
    method = FSDS()
    m = chunks[0].shape[1]
    resolved = method.resolve_params({"kernel": "gaussian", **params}, m)
    state = method.initial_state(resolved)
    for chunk in chunks:
        state = method.update(state, resolved, chunk)
    return method, resolved, state


@pytest.mark.parametrize("sparse", [False, True])
def test_gaussian_mode_equals_the_batch_kernel_reference_below_ell(sparse: bool) -> None:
    rng = np.random.default_rng(6)
    y = rng.standard_normal((33, 45)) * rng.uniform(0.5, 2.0, size=(33, 1))
    parts = [y[i : i + 8] for i in range(0, 33, 8)]
    chunks = [sp.csr_matrix(p) for p in parts] if sparse else parts
    method, params, state = gaussian_run(chunks, {"k": 4, "ell": 40, "kernel_components": 48})
    assert state["shrinkage_total"] == 0.0
    assert array_field(state, "sketch_rows").shape == (40, 45 + 48)
    bandwidth = number_field(state, "kernel_bandwidth")
    assert bandwidth == pytest.approx(median_pairwise_distance(normalize_rows(parts[0])))
    rff = RandomFourierFeatures(45, 48, bandwidth, seed=0)
    reference = gfw_p2_kernel_weights(y, 4, 3.0, rff)
    weights = method.weights(state, params)
    assert weights.shape == (45,)
    np.testing.assert_allclose(weights, reference, rtol=1e-7, atol=1e-10 * reference.max())


def test_kernel_reference_reduces_to_gfw_p2_when_z_is_y() -> None:
    """With the identity map in place of z, the kernel formula is exactly eq. (5)."""

    class Identity(RandomFourierFeatures):
        def transform(self, rows: object) -> np.ndarray:
            return np.asarray(rows, dtype=np.float64)

    rng = np.random.default_rng(3)
    y = rng.standard_normal((60, 7)) @ rng.standard_normal((7, 30))
    np.testing.assert_allclose(
        gfw_p2_kernel_weights(y, 5, 3.0, Identity(30, 1, 1.0)), gfw_p2_weights(y, 5), rtol=1e-9
    )


def test_bandwidth_heuristic_is_computed_once_and_stored() -> None:
    rng = np.random.default_rng(8)
    first = rng.standard_normal((20, 16))
    second = np.abs(rng.standard_normal((20, 16))) + 5.0  # a very different distribution
    method, params, state = gaussian_run([first], {"k": 2, "ell": 6, "kernel_components": 8})
    expected = median_pairwise_distance(normalize_rows(first))
    assert state["kernel_bandwidth"] == pytest.approx(expected)
    state = method.update(state, params, second)
    assert state["kernel_bandwidth"] == pytest.approx(expected)
    assert params.kernel_bandwidth is None
    # An explicit bandwidth is used as given; a lone first row falls back to sqrt(2).
    _, _, fixed = gaussian_run([first], {"k": 2, "ell": 6, "kernel_bandwidth": 0.25})
    assert fixed["kernel_bandwidth"] == 0.25
    _, _, lone = gaussian_run([first[:1]], {"k": 2, "ell": 6, "kernel_components": 8})
    assert lone["kernel_bandwidth"] == pytest.approx(math.sqrt(2))


def test_gaussian_mode_is_deterministic_and_seeded() -> None:
    rng = np.random.default_rng(10)
    chunks = [rng.standard_normal((15, 20)) for _ in range(4)]
    params = {"k": 3, "ell": 8, "kernel_components": 32, "seed": 5}
    m1, p1, s1 = gaussian_run(chunks, params)
    kernels._draws.cache_clear()
    m2, p2, s2 = gaussian_run(chunks, params)
    np.testing.assert_array_equal(m1.weights(s1, p1), m2.weights(s2, p2))
    m3, p3, s3 = gaussian_run(chunks, {**params, "seed": 6})
    assert not np.allclose(m1.weights(s1, p1), m3.weights(s3, p3))
    assert number_field(s1, "shrinkage_total") > 0
