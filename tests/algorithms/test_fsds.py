"""FSDS: weights against the batch GFW-p2 reference, the sketch guarantee, params, state."""

from __future__ import annotations

import copy
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms import METHODS, get_method
from service.algorithms.base import State, check_state
from service.algorithms.fsds import FSDS, FSDSParams, gfw_p2_weights, normalize_rows
from service.algorithms.resampling import summary_fields_of
from service.algorithms.sketching import paper_svd_update
from service.algorithms.subsamples import (
    COUNTS_FIELD,
    SCORES_FIELD,
    SCORES_REFRESH_GROWTH,
    SCORES_ROWS_FIELD,
    group_field,
)
from service.errors import Inconsistent, InvalidInput, InvalidParams
from tests.support.states import array_field, number_field


def low_rank(rng: np.random.Generator, n: int, m: int, rank: int, noise: float) -> np.ndarray:
    scales = 1.0 / (1.0 + np.arange(rank))
    signal = (rng.standard_normal((n, rank)) * scales) @ rng.standard_normal((rank, m))
    return signal + noise * rng.standard_normal((n, m))


def run(
    rows: np.ndarray | sp.csr_matrix, params: dict[str, Any], chunk: int
) -> tuple[FSDS, FSDSParams, State]:
    method = FSDS()
    resolved = method.resolve_params(params, rows.shape[1])
    state = method.initial_state(resolved)
    for start in range(0, rows.shape[0], chunk):
        state = method.update(state, resolved, rows[start : start + chunk])
    return method, resolved, state


# -- weights -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(
    ("n", "m", "rank", "k", "ell", "chunk"),
    [
        (150, 80, 7, 5, 12, 40),
        (60, 300, 9, 4, 10, 17),
        (200, 25, 6, 3, 8, 1),
    ],
)
def test_streaming_weights_equal_gfw_p2_below_rank_ell(
    sparse: bool, n: int, m: int, rank: int, k: int, ell: int, chunk: int
) -> None:
    rng = np.random.default_rng(n + m)
    y = low_rank(rng, n, m, rank, noise=0.0) * rng.uniform(0.5, 3.0, size=(n, 1))
    rows = sp.csr_matrix(y) if sparse else y
    method, params, state = run(rows, {"k": k, "ell": ell}, chunk)
    assert state["shrinkage_total"] == 0.0
    reference = gfw_p2_weights(rows, k)
    weights = method.weights(state, params)
    assert weights.shape == (m,)
    np.testing.assert_allclose(weights, reference, rtol=1e-8, atol=1e-10 * reference.max())
    # The ranking (what selection uses) is the same.
    top = np.argsort(-reference)[:10]
    assert set(np.argsort(-weights)[:10]) == set(top)
    _, sigma, _ = np.linalg.svd(normalize_rows(y), full_matrices=False)
    assert state["alpha"] == pytest.approx(2**3 * sigma[k - 1], rel=1e-9)


def test_weights_are_lemma_3_3_on_the_sketch() -> None:
    rng = np.random.default_rng(1)
    y = low_rank(rng, 300, 40, 12, noise=0.2)
    method, params, state = run(y, {"k": 4, "ell": 9, "alpha_exponent": 1.5}, 70)
    sketch, s = state["sketch_rows"], state["singular_values"]
    assert isinstance(sketch, np.ndarray) and isinstance(s, np.ndarray)
    alpha = 2**1.5 * s[3]
    expected = np.max(np.abs(sketch[:4]) * (s[:4] / (s[:4] ** 2 + alpha))[:, None] / s[:4, None], 0)
    np.testing.assert_allclose(method.weights(state, params), expected, rtol=1e-12)
    assert state["alpha"] == pytest.approx(alpha)


def test_fewer_rows_than_k_gives_no_nan() -> None:
    # sigma_k = 0, so alpha = 0 and the terms with s_j = 0 must be 0, not 0/0.
    rows = np.random.default_rng(0).standard_normal((2, 30))
    method, params, state = run(rows, {"k": 5, "ell": 8}, 2)
    weights = method.weights(state, params)
    assert np.all(np.isfinite(weights)) and weights.max() > 0
    assert state["alpha"] == 0.0
    np.testing.assert_allclose(weights, gfw_p2_weights(rows, 5), rtol=1e-10)


# -- the sketch guarantee through the method ---------------------------------------------------


@pytest.mark.parametrize("block_rows", ["default", None, 3])
@pytest.mark.parametrize(("n", "m", "ell", "chunk"), [(400, 50, 9, 90), (70, 250, 12, 20)])
def test_state_sketch_carries_the_fd_guarantee(
    block_rows: object, n: int, m: int, ell: int, chunk: int
) -> None:
    rng = np.random.default_rng(n)
    y = low_rank(rng, n, m, 15, noise=0.3) * rng.uniform(0.2, 5.0, size=(n, 1))
    params: dict[str, Any] = {"k": 3, "ell": ell}
    if block_rows != "default":
        params["block_rows"] = block_rows
    _, _, state = run(y, params, chunk)
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    sketch = state["sketch_rows"]
    assert isinstance(sketch, np.ndarray)
    diff = unit.T @ unit - sketch.T @ sketch
    eig = np.linalg.eigvalsh((diff + diff.T) / 2)
    tol = 1e-10 * np.linalg.norm(unit, 2) ** 2
    assert eig[0] >= -tol
    err = max(-eig[0], eig[-1])
    shrinkage = number_field(state, "shrinkage_total")
    assert shrinkage > 0 and err <= shrinkage + tol
    sigma2 = np.linalg.svd(unit, compute_uv=False) ** 2
    for k in range(ell):
        assert err <= shrinkage + tol <= float(np.sum(sigma2[k:])) / (ell - k) + 2 * tol
    assert state["rows_seen"] == n
    assert state["squared_norm_seen"] == pytest.approx(float(np.sum(unit * unit)))


def test_null_block_rows_is_the_paper_update() -> None:
    rng = np.random.default_rng(8)
    y = low_rank(rng, 360, 90, 20, noise=0.4)
    _, _, state = run(y, {"k": 4, "ell": 10, "block_rows": None}, 120)
    paper = np.zeros((10, 90))
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    for start in range(0, 360, 120):
        paper = paper_svd_update(paper, unit[start : start + 120]).sketch_rows
    sketch = state["sketch_rows"]
    assert isinstance(sketch, np.ndarray)
    np.testing.assert_allclose(sketch.T @ sketch, paper.T @ paper, atol=1e-10 * 360)


def test_sparse_and_dense_chunks_give_the_same_state() -> None:
    y = sp.random(300, 400, density=0.03, random_state=np.random.default_rng(2), format="csr")
    method, params, sparse_state = run(y, {"k": 5, "ell": 20}, 75)
    _, _, dense_state = run(y.toarray(), {"k": 5, "ell": 20}, 75)
    s1, s2 = sparse_state["sketch_rows"], dense_state["sketch_rows"]
    assert isinstance(s1, np.ndarray) and isinstance(s2, np.ndarray)
    np.testing.assert_allclose(s1.T @ s1, s2.T @ s2, atol=1e-10 * 300)
    np.testing.assert_allclose(
        method.weights(sparse_state, params), method.weights(dense_state, params), rtol=1e-7
    )


# -- state hygiene -----------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["cosine", "gaussian"])
def test_update_does_not_mutate_its_input(kernel: str) -> None:
    rng = np.random.default_rng(4)
    method = FSDS()
    extra = {"kernel_components": 16} if kernel == "gaussian" else {}
    params = method.resolve_params({"k": 2, "ell": 5, "kernel": kernel, **extra}, 30)
    state = method.update(method.initial_state(params), params, rng.standard_normal((20, 30)))
    frozen = copy.deepcopy(state)
    for value in state.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)  # an in-place write would raise
    rows = rng.standard_normal((25, 30))
    rows.setflags(write=False)
    new = method.update(state, params, rows)
    assert new is not state
    for key, value in frozen.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(state[key], value)
            assert not np.shares_memory(new[key], state[key])
        else:
            assert state[key] == value
    assert new["rows_seen"] == 45


def test_state_is_flat_arrays_and_scalars() -> None:
    rng = np.random.default_rng(5)
    method, params, state = run(
        rng.standard_normal((40, 12)), {"k": 2, "ell": 4, "resamples": 2}, 15
    )
    own = {
        "sketch_rows", "singular_values", "weights", "alpha", "rows_seen",
        "shrinkage_total", "squared_norm_seen", "kernel_bandwidth",
    }  # fmt: skip
    # One stored subsample (the other is the whole stream's sketch minus it): its sketch.
    resampled = {group_field(0, f) for f in own - {"weights", "alpha"}}
    # And the subsamples' scores as of some rows (computed again as the rows grow).
    assert set(state) == own | resampled | {COUNTS_FIELD, SCORES_FIELD, SCORES_ROWS_FIELD}
    assert state[COUNTS_FIELD].dtype == np.int64  # type: ignore[union-attr]
    assert state[SCORES_FIELD].dtype == np.float32  # type: ignore[union-attr]
    # The stored subsample's sketch in single precision (resample_precision), as directions.
    kept = array_field(state, group_field(0, "sketch_rows"))
    assert kept.dtype == np.float32
    norms = np.linalg.norm(kept, axis=1)
    live = array_field(state, group_field(0, "singular_values")) > 0
    np.testing.assert_allclose(norms[live], 1.0, rtol=1e-6)
    assert np.all(norms[~live] == 0)
    for key, value in state.items():
        if key in (COUNTS_FIELD, SCORES_FIELD, group_field(0, "sketch_rows")):
            continue
        if isinstance(value, np.ndarray):
            assert value.dtype == np.float64, key
        else:
            assert type(value) in (int, float), key
    assert array_field(state, "sketch_rows").shape == (4, 12)
    np.testing.assert_array_equal(method.weights(state, params), state["weights"])
    initial = method.initial_state(params)
    assert initial["rows_seen"] == 0 and not array_field(initial, "weights").any()


def test_rows_with_the_wrong_width_are_rejected() -> None:
    method = FSDS()
    params = method.resolve_params({}, 10)
    with pytest.raises(InvalidInput, match="10 columns"):
        method.update(method.initial_state(params), params, np.ones((3, 11)))


# -- parameters --------------------------------------------------------------------------------


def test_defaults() -> None:
    method = FSDS()
    assert method.resolve_params({}, 1024).as_params() == {
        "k": 10, "ell": 32, "alpha_exponent": 3.0, "normalize_rows": True,
        "block_rows": 200, "resample_ell": 32, "resample_precision": "single",
        "kernel": "cosine", "resamples": 4,
    }  # fmt: skip
    assert method.resolve_params({}, 100).ell == 11  # max(ceil(sqrt(m)), k + 1)
    tiny = method.resolve_params({}, 5)
    assert (tiny.k, tiny.ell, tiny.block_rows) == (5, 6, 200)
    # block_rows = max(4 ell, 200): 4 ell once ell > 50.
    assert method.resolve_params({}, 4862).block_rows == 4 * 70
    small = method.resolve_params({}, 1)
    assert (small.k, small.ell) == (1, 2)
    assert method.resolve_params({"k": 20}, 26214).ell == math.ceil(math.sqrt(26214)) == 162
    assert method.resolve_params({"block_rows": None}, 50).block_rows is None
    gaussian = method.resolve_params({"kernel": "gaussian"}, 64)
    assert gaussian.kernel_components == 512
    assert gaussian.kernel_bandwidth is None and gaussian.seed == 0


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"k": 3, "ell": 7, "alpha_exponent": 0, "normalize_rows": False, "block_rows": None},
        {"kernel": "gaussian", "kernel_components": 8, "kernel_bandwidth": 0.5, "seed": 7},
        {"kernel": "gaussian", "kernel_bandwidth": None},
        {"decay": 0.99, "block_rows": 64},
    ],
)
def test_resolved_params_are_json_and_stable(params: dict[str, Any]) -> None:
    method = FSDS()
    resolved = method.resolve_params(params, 40).as_params()
    echoed = json.loads(json.dumps(resolved))
    assert echoed == resolved
    assert method.resolve_params(echoed, 40).as_params() == resolved
    assert isinstance(resolved["alpha_exponent"], float)


def test_subsample_sketches_of_params_stored_before_their_layout_stay_double_and_ell_rows() -> None:
    """Params stored without ``resample_ell`` and ``resample_precision`` (selectors and
    archives from before they existed) resolve to subsample sketches of ``ell`` rows in double
    precision and are described as stored; new selectors keep theirs in single precision, the
    same sketch to its rounding (so the same subsample rankings)."""
    method = FSDS()
    new = method.resolve_params({"k": 3, "ell": 8}, 30)
    assert (new.resample_ell, new.resample_precision) == (8, "single")
    stored = {
        k: v for k, v in new.as_params().items() if k not in ("resample_ell", "resample_precision")
    }
    old = method.resolve_params(stored, 30, stored=True)
    assert (old.resample_ell, old.resample_precision) == (8, "double")
    assert old.as_params() == stored
    assert method.resolve_params(new.as_params(), 30, stored=True).as_params() == new.as_params()
    rng = np.random.default_rng(11)
    states = {}
    for label, params in (("old", old), ("new", new)):
        state = method.initial_state(params)
        for n in (90, 45, 130):
            state = method.update(state, params, low_rank(rng, n, 30, 5, 0.1))
        check_state(method, state, params)
        states[label] = state
        rng = np.random.default_rng(11)
    double = array_field(states["old"], group_field(0, "sketch_rows"))
    single = array_field(states["new"], group_field(0, "sketch_rows"))
    assert double.dtype == np.float64 and double.shape == (8, 30)
    assert single.dtype == np.float32 and single.shape == (8, 30)
    sigma = array_field(states["new"], group_field(0, "singular_values"))
    np.testing.assert_allclose(single * sigma[:, None], double, rtol=0, atol=1e-6 * sigma[0])
    # The whole stream's state does not depend on how the subsamples are kept ...
    for field in ("sketch_rows", "weights"):
        np.testing.assert_array_equal(states["old"][field], states["new"][field])
    # ... nor do the subsamples' rankings.
    for a, b in zip(
        method.resample_scores(states["old"], old),  # type: ignore[arg-type]
        method.resample_scores(states["new"], new),  # type: ignore[arg-type]
        strict=True,
    ):
        assert list(np.argsort(-a)[:10]) == list(np.argsort(-b)[:10])
    # A state kept one way does not pass for the other.
    with pytest.raises(Inconsistent, match="must be a 2-D float32 array; got a 2-D float64"):
        check_state(method, states["old"], new)


def test_subsample_sketches_of_fewer_rows_than_ell() -> None:
    """``resample_ell`` below ``ell``: each stored subsample is a sketch of that many rows (a
    Frequent-Directions sketch of its rows, checked by the state's own rules), the derived one
    of the whole stream's ``ell``; merges keep them so."""
    method = FSDS()
    params = method.resolve_params({"k": 3, "ell": 10, "resample_ell": 5, "resamples": 3}, 24)
    rng = np.random.default_rng(4)
    state = method.initial_state(params)
    for n in (60, 33, 80):
        state = method.update(state, params, low_rank(rng, n, 24, 6, 0.2))
    check_state(method, state, params)
    subsamples = method.subsamples(state, params)
    assert [array_field(s, "sketch_rows").shape for s in subsamples] == [
        (5, 24),
        (5, 24),
        (10, 24),
    ]
    assert sum(method.subsample_rows(s) for s in subsamples) == 173
    assert method.state_sizes(params)[group_field(1, "sketch_rows")] == 4 * 5 * 24
    summary: State = {k: v for k, v in state.items() if not isinstance(v, np.ndarray)}
    summary.update({f: state[f] for f in summary_fields_of(method, params)})
    merged = method.merge(state, params, summary)
    check_state(method, merged, params)
    assert array_field(merged, group_field(0, "sketch_rows")).shape == (5, 24)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"k": 12, "ell": 10}, r"k must be smaller than ell \(got k=12, ell=10\)"),
        ({"k": 10, "ell": 10}, r"k must be smaller than ell \(got k=10, ell=10\)"),
        ({"ell": 5}, r"k must be smaller than ell \(got k=10, ell=5\); k defaults"),
        ({"ell": 1}, r"ell must be an integer >= 2; got 1"),
        ({"k": 0}, r"k must be an integer >= 1; got 0"),
        ({"k": 101}, r"k must be at most n_features=100; got k=101"),
        ({"alpha_exponent": -0.5}, r"alpha_exponent must be a finite number >= 0; got -0.5"),
        ({"alpha_exponent": float("nan")}, r"alpha_exponent must be a finite number"),
        ({"alpha_exponent": "3"}, r"alpha_exponent must be a finite number >= 0; got '3'"),
        ({"kk": 3}, r"unknown parameter\(s\) for fsds: 'kk'; expected some of: k, ell"),
        ({"seed": 1}, r"seed only apply to kernel='gaussian'; got kernel='cosine'"),
        ({"kernel_components": 8}, r"kernel_components only apply to kernel='gaussian'"),
        ({"kernel_bandwidth": None}, r"kernel_bandwidth only apply to kernel='gaussian'"),
        ({"kernel": "rbf"}, r"kernel must be one of 'cosine', 'gaussian'; got 'rbf'"),
        ({"resample_ell": 10}, r"resample_ell must be more than k=10 and at most ell=11; got"),
        ({"resample_ell": 12}, r"resample_ell must be more than k=10 and at most ell=11; got"),
        ({"resample_precision": "half"}, r"resample_precision must be one of 'single', 'double'"),
        ({"k": True}, r"k must be an integer >= 1; got True"),
        ({"ell": True}, r"ell must be an integer >= 2; got True"),
        ({"k": 2.0}, r"k must be an integer >= 1; got 2.0"),
        ({"block_rows": True}, r"block_rows must be an integer >= 1, or null; got True"),
        ({"block_rows": 0}, r"block_rows must be an integer >= 1, or null; got 0"),
        ({"alpha_exponent": True}, r"alpha_exponent must be a finite number >= 0; got True"),
        ({"normalize_rows": 1}, r"normalize_rows must be true or false; got 1"),
        ({"kernel": "gaussian", "seed": True}, r"seed must be an integer in \[0, 2\*\*63\)"),
        ({"kernel": "gaussian", "seed": -1}, r"seed must be an integer in \[0, 2\*\*63\); got -1"),
        ({"kernel": "gaussian", "kernel_components": 0}, r"kernel_components must be an integer"),
        ({"kernel": "gaussian", "kernel_components": False}, r"kernel_components must be an"),
        ({"kernel": "gaussian", "kernel_bandwidth": 0}, r"kernel_bandwidth must be .* > 0"),
        ({"kernel": "gaussian", "kernel_bandwidth": True}, r"kernel_bandwidth must be a finite"),
    ],
)
def test_invalid_params(params: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParams, match=message) as info:
        FSDS().resolve_params(params, 100)
    assert info.value.detail == str(info.value)


def test_params_must_be_a_mapping() -> None:
    with pytest.raises(InvalidParams, match="params must be an object; got list"):
        FSDS().resolve_params([], 10)  # type: ignore[arg-type]


def test_registry() -> None:
    assert get_method("fsds") is METHODS["fsds"]
    assert get_method("fsds").name == "fsds"
    with pytest.raises(InvalidInput, match="unknown method 'x'; expected one of: anova, chi2"):
        get_method("x")


# -- merging sketches (partitions, POST .../merge) ----------------------------------------------


def merged_parts(
    y: np.ndarray, params: dict[str, Any], parts: int, chunk: int
) -> tuple[FSDS, FSDSParams, State]:
    """Rows dealt to ``parts`` streams in turn by chunk, each sketched alone, then merged from
    the initial state in order (as a partitioned selector's reader does)."""
    method = FSDS()
    resolved = method.resolve_params(params, y.shape[1])
    states = [method.initial_state(resolved) for _ in range(parts)]
    for index, start in enumerate(range(0, y.shape[0], chunk)):
        which = index % parts
        states[which] = method.update(states[which], resolved, y[start : start + chunk])
    merged = method.initial_state(resolved)
    for state in states:
        fields = summary_fields_of(method, resolved)
        summary = {f: v for f, v in state.items() if f in fields or not isinstance(v, np.ndarray)}
        merged = method.merge(merged, resolved, summary)
    return method, resolved, merged


@pytest.mark.parametrize("parts", [2, 3, 5])
@pytest.mark.parametrize(("n", "m", "ell", "chunk"), [(600, 60, 9, 50), (150, 300, 12, 20)])
def test_merged_sketches_keep_the_fd_bound_for_all_rows(
    parts: int, n: int, m: int, ell: int, chunk: int
) -> None:
    """Stacking sketches and shrinking keeps 0 <= A^T A - B^T B <= shrinkage_total, and the
    total stays below ||A - A_k||_F^2 / (ell - k) for every k < ell, for the union of rows."""
    rng = np.random.default_rng([n, parts])
    y = low_rank(rng, n, m, 20, noise=0.3)
    _, _, state = merged_parts(y, {"k": 3, "ell": ell}, parts, chunk)
    unit = normalize_rows(y)
    assert isinstance(unit, np.ndarray)
    sketch = np.asarray(state["sketch_rows"])
    assert sketch.shape == (ell, m)
    diff = unit.T @ unit - sketch.T @ sketch
    eig = np.linalg.eigvalsh((diff + diff.T) / 2)
    tol = 1e-9 * np.linalg.norm(unit, 2) ** 2
    assert eig[0] >= -tol
    shrinkage = float(np.asarray(state["shrinkage_total"]))
    assert shrinkage > 0 and eig[-1] <= shrinkage + tol
    sigma2 = np.linalg.svd(unit, compute_uv=False) ** 2
    for k in range(ell):
        assert shrinkage <= float(np.sum(sigma2[k:])) / (ell - k) + 2 * tol, k
    assert state["rows_seen"] == n
    assert float(np.asarray(state["squared_norm_seen"])) == pytest.approx(float(np.sum(unit**2)))


def test_merged_sketches_below_rank_ell_give_the_batch_weights() -> None:
    """Nothing is shrunk away below rank ell: the merged weights are batch GFW-p2's."""
    rng = np.random.default_rng(12)
    y = low_rank(rng, 240, 70, 6, noise=0.0)
    _, resolved, state = merged_parts(y, {"k": 4, "ell": 10}, 3, 30)
    np.testing.assert_allclose(
        np.asarray(state["weights"]),
        gfw_p2_weights(y, k=4, alpha_exponent=resolved.alpha_exponent),
        rtol=1e-7,
        atol=1e-12,
    )


def test_merge_refuses_a_sketch_of_other_features_or_another_feature_map() -> None:
    method = FSDS()
    resolved = method.resolve_params({"k": 2, "ell": 4}, 8)
    state = method.initial_state(resolved)
    with pytest.raises(InvalidInput, match="8 columns"):
        method.merge(state, resolved, {"sketch_rows": np.zeros((4, 9)), "rows_seen": 1})
    gaussian = method.resolve_params(
        {"k": 2, "ell": 4, "kernel": "gaussian", "kernel_components": 8}, 8
    )
    assert method.merge_refusal(gaussian) is not None
    fixed = method.resolve_params({**gaussian.as_params(), "kernel_bandwidth": 1.5}, 8)
    assert method.merge_refusal(fixed) is None and method.merge_refusal(resolved) is None
    ours = {**method.initial_state(gaussian), "kernel_bandwidth": 1.0}
    theirs = {**method.initial_state(gaussian), "kernel_bandwidth": 2.0, "rows_seen": 3}
    with pytest.raises(InvalidInput, match="bandwidth"):
        method.merge(ours, gaussian, theirs)


def test_kept_subsample_scores_are_refreshed_as_the_rows_grow_and_checked_on_import() -> None:
    """FSDS keeps its subsamples' scores (``caches_resample_scores``): the same as computed
    afresh when they were computed, computed again once the rows grew by a tenth, and an
    archive whose kept scores are not its subsamples' (or are older than an update leaves
    them) is refused by ``check_state``."""
    method = FSDS()
    params = method.resolve_params({"resamples": 2}, 30)
    rng = np.random.default_rng(11)
    state = method.initial_state(params)
    computed_at: list[int] = []
    for _ in range(30):
        state = method.update(state, params, rng.standard_normal((20, 30)))
        computed_at.append(int(number_field(state, SCORES_ROWS_FIELD)))
    rows = int(array_field(state, COUNTS_FIELD).sum())
    assert rows == 600
    # Every chunk while a chunk is a tenth of the rows or more, then once per tenth more rows.
    refreshed = sorted(set(computed_at))
    assert refreshed[:11] == [20 * i for i in range(1, 12)]
    assert all(b - a >= SCORES_REFRESH_GROWTH * a for a, b in itertools.pairwise(refreshed))
    assert len(refreshed) < 30
    check_state(method, state, params)
    # Computed at the last chunk (594 rows were due): the subsamples' scores, each divided by
    # its largest, in float32 (the same order).
    assert computed_at[-1] == rows
    expected = method.computed_resample_scores(state, params)
    assert expected is not None
    kept = array_field(state, SCORES_FIELD)
    np.testing.assert_allclose(kept, expected / np.abs(expected).max(axis=1)[:, None], atol=1e-6)
    assert np.abs(kept).max(axis=1).tolist() == [1.0, 1.0]
    for g in range(2):
        np.testing.assert_array_equal(np.argsort(-kept[g])[:5], np.argsort(-expected[g])[:5])
    tampered = dict(state)
    kept = array_field(state, SCORES_FIELD)
    tampered[SCORES_FIELD] = kept[::-1].copy()  # another subsample's scores
    tampered[SCORES_ROWS_FIELD] = rows
    with pytest.raises(Inconsistent, match="not the scores"):
        check_state(method, tampered, params)
    scaled = dict(state)
    scaled[SCORES_FIELD] = kept * 2  # the same order, not as kept
    with pytest.raises(Inconsistent, match="within"):
        check_state(method, scaled, params)
    stale = dict(state)
    stale[SCORES_ROWS_FIELD] = rows // 2  # an update would have computed them again
    with pytest.raises(Inconsistent, match="computed again"):
        check_state(method, stale, params)
