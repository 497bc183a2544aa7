"""OFS numerics: incremental factor vs the exact formulas, batching, state, params, edge cases."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from service.algorithms.base import State
from service.algorithms.leverage import (
    cholesky_add_columns,
    rank_one_factor,
    rank_one_solve,
)
from service.algorithms.ofs import (
    OFS,
    Decision,
    OFSParams,
    batch_leverage_scores,
    cluster_samples,
)
from service.errors import InvalidInput, InvalidParams
from service.store.codec import decode_state, encode_state
from tests.support.states import array_field

METHOD = OFS()


def low_rank(rng: np.random.Generator, n: int, d: int, rank: int) -> np.ndarray:
    """Columns in a random ``rank``-dimensional subspace, with very different column norms."""
    cols = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d))
    return cols * rng.uniform(0.2, 3.0, size=d)


def stream(
    columns: np.ndarray, params: Mapping[str, Any], chunk: int, state: State | None = None
) -> tuple[OFSParams, State, list[Decision]]:
    n = columns.shape[0]
    resolved = METHOD.resolve_params(params, n)
    state = METHOD.initial_state(resolved) if state is None else state
    decisions: list[Decision] = []
    for start in range(0, columns.shape[1], chunk):
        state, got = METHOD.add_features(state, resolved, columns[:, start : start + chunk])
        decisions += got
    return resolved, state, decisions


def exact_score(kept: np.ndarray, a: np.ndarray, ridge: float) -> float:
    """eq. (3.2) / (2.1) from scratch: ``a^T (A~ A~^T + ridge I)^+ a`` from the SVD of ``A~``,
    ``sum_j (u_j^T a)^2 / (s_j^2 + ridge)`` (over the numerically nonzero ``s_j`` if ridge = 0).
    Same formula as a pseudo-inverse of the Gram, without squaring the condition number."""
    n = kept.shape[0]
    if kept.shape[1] == 0:
        return float(a @ a / ridge) if ridge > 0 else 0.0
    u, s, _ = np.linalg.svd(kept, full_matrices=ridge > 0)
    if ridge > 0:
        s2 = np.zeros(n)
        s2[: s.size] = s**2
        return float(((u.T @ a) ** 2 / (s2 + ridge)).sum())
    live = s > max(kept.shape) * np.finfo(float).eps * s[0]
    return float(((u[:, live].T @ a / s[live]) ** 2).sum())


def literal_score(kept: np.ndarray, a: np.ndarray, ridge: float) -> float:
    """eq. (3.2) / (2.1) literally, with ``np.linalg.pinv`` / ``solve`` of the Gram."""
    gram = kept @ kept.T + ridge * np.eye(kept.shape[0])
    if ridge > 0:
        return float(a @ np.linalg.solve(gram, a))
    return float(a @ np.linalg.pinv(gram, hermitian=True) @ a) if kept.shape[1] else 0.0


def relative_residual(kept: np.ndarray, a: np.ndarray) -> float:
    """``||a - P a|| / ||a||`` with ``P`` the projector on ``span(A~)`` (exact SVD)."""
    if kept.shape[1] == 0:
        return 1.0
    u, s, _ = np.linalg.svd(kept, full_matrices=False)
    u = u[:, s > max(kept.shape) * np.finfo(float).eps * s[0]]
    return float(np.linalg.norm(a - u @ (u.T @ a)) / np.linalg.norm(a))


# -- the closed-form factor algebra ------------------------------------------------------------


def test_rank_one_closed_forms_and_rank_k_update() -> None:
    rng = np.random.default_rng(0)
    n = 30
    x = rng.standard_normal((n, 2 * n))
    lower = np.linalg.cholesky(x @ x.T)
    v = 3 * rng.standard_normal(n)
    p = np.linalg.solve(lower, v)
    m = rank_one_factor(p)
    exact = np.linalg.cholesky(x @ x.T + np.outer(v, v))
    # M^-1 y == (L M)^-1 L y, the solve used for the rest of a block.
    y = rng.standard_normal((n, 4))
    np.testing.assert_allclose(
        rank_one_solve(m, np.linalg.solve(lower, y)), np.linalg.solve(exact, y), atol=1e-12
    )
    np.testing.assert_allclose(rank_one_solve(m, p), m.beta, atol=1e-14)  # M^-1 p = beta
    assert m.t_last == pytest.approx(1 + p @ p)
    # Rank-k update via dtpqrt, including a zero-padded (grown) basis.
    vs = rng.standard_normal((n + 2, 5))
    padded = np.zeros((n + 2, n + 2))
    padded[:n, :n] = x @ x.T
    updated = cholesky_add_columns(lower, vs)
    np.testing.assert_allclose(updated @ updated.T, padded + vs @ vs.T, atol=1e-10)
    assert np.all(np.diag(updated) > 0) and np.allclose(np.triu(updated, 1), 0)


# -- incremental factor == exact batch formula --------------------------------------------------


@pytest.mark.parametrize(
    ("n", "d", "rank", "params"),
    [
        (30, 160, 8, {"c": 2.0}),  # pinv, rank < n: new directions, then the span fills
        (24, 160, 24, {"c": 1.5}),  # pinv, full rank: Q becomes all of R^n
        (24, 160, 24, {"c": 1.5, "ridge": 0.3}),  # eq. (2.1)
    ],
)
def test_incremental_scores_equal_the_exact_formula_per_column(
    n: int, d: int, rank: int, params: dict[str, Any]
) -> None:
    rng = np.random.default_rng(n + d + rank)
    a = low_rank(rng, n, d, rank)
    resolved = METHOD.resolve_params(params | {"epsilon": 0.3, "seed": 5}, n)
    eps, c, ridge = resolved.epsilon, resolved.c, resolved.ridge
    state = METHOD.initial_state(resolved)
    n_new = n_discarded = 0
    for i in range(d):
        col = a[:, i]
        kept = METHOD.kept_matrix(state)
        got = float(METHOD.scores(state, resolved, col[:, None])[0])
        state, (decision,) = METHOD.add_features(state, resolved, col[:, None])
        if ridge == 0 and relative_residual(kept, col) > 1e-6:
            n_new += 1  # Step 3 on a new direction: leverage 1 (module docstring)
            assert got == math.inf and decision.leverage == 1.0
        else:
            want = exact_score(kept, col, ridge)
            assert got == pytest.approx(want, rel=1e-9), i
            # The Gram's pseudo-inverse squares cond(A~) (up to ~6e4 here): looser, measured 3e-8.
            assert got == pytest.approx(literal_score(kept, col, ridge), rel=1e-6), i
            assert decision.leverage == pytest.approx(min((1 + eps) * want, 1.0), rel=1e-9)
        assert decision.probability == pytest.approx(min(c * decision.leverage, 1.0), rel=1e-12)
        n_discarded += not decision.kept
    assert n_new == (0 if ridge else rank)
    assert n_discarded > d // 4  # sampling is really at work
    # The factor itself equals the exact Gram of the kept, rescaled columns.
    kept = METHOD.kept_matrix(state)
    lower = np.asarray(state["cholesky"])
    if ridge:
        gram = lower @ lower.T - ridge * np.eye(n)
    else:
        q = np.asarray(state["basis"])
        assert q.shape == (n, rank)
        np.testing.assert_allclose(q.T @ q, np.eye(rank), atol=1e-13)
        gram = q @ lower @ lower.T @ q.T
    np.testing.assert_allclose(gram, kept @ kept.T, atol=1e-10 * np.abs(kept @ kept.T).max())


@pytest.mark.parametrize("ridge", [0.0, 2.0])
def test_blocked_run_has_no_drift_against_exact_scores(ridge: float) -> None:
    """All 600 columns in one call (blocks of 128 with many kept columns each): the factor left
    at the end and the scores of fresh probe columns still match a fresh (pseudo-)inverse."""
    rng = np.random.default_rng(11)
    n = 60
    a = low_rank(rng, n, 600, 45)
    resolved, state, _ = stream(a, {"c": 3.0, "ridge": ridge, "seed": 2}, chunk=600)
    kept = METHOD.kept_matrix(state)
    assert 150 < kept.shape[1] < 550
    # In span(A) (no new direction) for ridge = 0; anywhere for ridge > 0.
    probes = a @ rng.standard_normal((600, 50)) if ridge == 0 else rng.standard_normal((n, 50))
    got = METHOD.scores(state, resolved, probes)
    want = [exact_score(kept, probes[:, j], ridge) for j in range(50)]
    np.testing.assert_allclose(got, want, rtol=1e-9)


# -- randomness, batching and the state round trip ----------------------------------------------


def test_decisions_use_the_counter_based_uniform() -> None:
    a = low_rank(np.random.default_rng(3), 15, 200, 15)
    _, _, decisions = stream(a, {"c": 2.0, "seed": 42}, chunk=200)
    assert [d.index for d in decisions] == list(range(200))
    for d in decisions:
        u = np.random.default_rng([42, d.index]).random()
        assert d.kept == (u < d.probability)
    _, _, other = stream(a, {"c": 2.0, "seed": 43}, chunk=200)
    assert [d.kept for d in other] != [d.kept for d in decisions]


@pytest.mark.parametrize("ridge", [0.0, 0.5])
def test_same_seed_same_decisions_across_batching_and_state_round_trip(ridge: float) -> None:
    rng = np.random.default_rng(4)
    a = low_rank(rng, 25, 400, 25)
    params = {"c": 2.0, "ridge": ridge, "seed": 9}
    runs = {chunk: stream(a, params, chunk) for chunk in (1, 7, 400)}
    _, base_state, base = runs[400]
    assert 50 < sum(d.kept for d in base) < 350
    for _, state, decisions in runs.values():
        assert [d.kept for d in decisions] == [d.kept for d in base]
        np.testing.assert_allclose(
            [d.leverage for d in decisions], [d.leverage for d in base], rtol=1e-10
        )
        np.testing.assert_array_equal(state["kept_indices"], base_state["kept_indices"])
        np.testing.assert_allclose(
            array_field(state, "kept_columns"), array_field(base_state, "kept_columns"), rtol=1e-12
        )

    # Stop after 150 features, persist (arrays copied, then through the no-pickle codec, which
    # returns read-only arrays), restart: the same decisions as the uninterrupted run.
    _, half, first = stream(a[:, :150], params, chunk=50)
    copied: State = {k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in half.items()}
    restored = decode_state(encode_state(half))
    for resumed in (copied, restored):
        _, end, rest = stream(a[:, 150:], params, chunk=33, state=resumed)
        assert [d.kept for d in first + rest] == [d.kept for d in base]
        assert [d.index for d in rest] == list(range(150, 400))
        np.testing.assert_allclose(
            array_field(end, "leverage"), array_field(base_state, "leverage"), rtol=1e-10
        )
        np.testing.assert_array_equal(end["kept_indices"], base_state["kept_indices"])


def test_add_features_does_not_mutate_its_input() -> None:
    rng = np.random.default_rng(5)
    a = low_rank(rng, 20, 120, 12)
    resolved, state, _ = stream(a[:, :60], {"c": 2.0}, chunk=60)
    before = copy.deepcopy(state)
    for value in state.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)  # any write would raise
    cols = a[:, 60:].copy()
    cols.setflags(write=False)
    new, _ = METHOD.add_features(state, resolved, cols)
    assert new is not state and new["features_seen"] == 120
    assert state.keys() == before.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(state[key], value)
    np.testing.assert_array_equal(cols, a[:, 60:])


def test_state_is_flat_arrays_and_json_scalars_and_survives_the_codec() -> None:
    a = low_rank(np.random.default_rng(6), 12, 80, 12)
    _, state, _ = stream(a, {"c": 2.0}, chunk=30)
    for key, value in state.items():
        assert isinstance(value, np.ndarray | int | float), key
        if isinstance(value, np.ndarray):
            assert value.dtype in (np.float64, np.int64), key
    assert array_field(state, "kept_indices").dtype == np.int64
    json.dumps({k: v for k, v in state.items() if not isinstance(v, np.ndarray)})
    decoded = decode_state(encode_state(state))
    assert decoded.keys() == state.keys()
    for key, value in state.items():
        np.testing.assert_array_equal(decoded[key], value)


def test_memory_does_not_grow_with_discarded_features() -> None:
    rng = np.random.default_rng(7)
    n = 20
    a = low_rank(rng, n, 300, n)
    resolved, state, _ = stream(a, {"c": 1.0, "ridge": 0.1}, chunk=100)
    arrays = [k for k, v in state.items() if isinstance(v, np.ndarray)]
    sizes = {k: array_field(state, k).shape for k in arrays if k not in ("leverage", "probability")}
    # 200 zero columns and 200 tiny columns (ridge score ~1e-12): all discarded.
    junk = np.hstack([np.zeros((n, 200)), 1e-6 * a[:, :200]])
    state, decisions = METHOD.add_features(state, resolved, junk)
    assert not any(d.kept for d in decisions)
    assert {k: array_field(state, k).shape for k in sizes} == sizes
    assert array_field(state, "leverage").shape == array_field(state, "probability").shape == (700,)


# -- edge cases: new directions, zero columns, ridge --------------------------------------------


#: (leverage, probability, kept, scale) of a column that is kept for sure / never kept.
FIRST = (1.0, 1.0, True, 1.0)
NEVER = (0.0, 0.0, False, 0.0)


def test_new_direction_gets_leverage_one_and_span_tolerance() -> None:
    n = 10
    resolved = METHOD.resolve_params({"c": 3.0}, n)
    e = np.eye(n)
    state, first = METHOD.add_features(METHOD.initial_state(resolved), resolved, e[:, :2])
    # The very first column cannot start the stream from a bare pseudo-inverse (it would score 0).
    assert [(d.leverage, d.probability, d.kept, d.scale) for d in first] == [FIRST] * 2
    in_span = (e[:, 0] + 2 * e[:, 1])[:, None]
    far = in_span + 1e-6 * e[:, [2]]  # relative residual ~4e-7 > SPAN_TOL: new
    near = in_span + 1e-11 * e[:, [2]]  # ~4e-12 < SPAN_TOL: in the span, the 1e-11 is dropped
    scores = METHOD.scores(state, resolved, np.hstack([in_span, far, near]))
    assert scores[0] == pytest.approx(5.0) and scores[1] == math.inf
    assert scores[2] == pytest.approx(5.0)
    state2, (d_far,) = METHOD.add_features(state, resolved, far)
    assert (d_far.leverage, d_far.kept) == (1.0, True)
    assert array_field(state2, "basis").shape == (n, 3)
    # With c < 1 a new direction is kept with probability c only: p = min(c * 1, 1).
    low_c = METHOD.resolve_params({"c": 0.25}, n)
    _, ds = METHOD.add_features(METHOD.initial_state(low_c), low_c, np.eye(n))
    assert all(d.leverage == 1.0 and d.probability == 0.25 for d in ds)


@pytest.mark.parametrize("ridge", [0.0, 0.7])
def test_zero_column_has_leverage_zero_and_is_never_kept(ridge: float) -> None:
    n = 8
    resolved = METHOD.resolve_params({"c": 1e9, "ridge": ridge}, n)
    cols = np.zeros((n, 4))
    cols[:, 2] = np.arange(1, n + 1)
    state, ds = METHOD.add_features(METHOD.initial_state(resolved), resolved, cols)
    for i in (0, 1, 3):
        assert (ds[i].leverage, ds[i].probability, ds[i].kept, ds[i].scale) == NEVER
    assert ds[2].kept
    np.testing.assert_array_equal(state["kept_indices"], [2])
    assert METHOD.scores(state, resolved, np.zeros((n, 1)))[0] == 0.0


def test_ridge_variant_as_documented() -> None:
    """ridge > 0: eq. (2.1) on A~ (no span test); a new direction scores ~||a||^2 / ridge (clipped
    to 1 for small ridge); for a column in span(A~) the ridge score increases to the pseudo-inverse
    score as ridge -> 0."""
    rng = np.random.default_rng(8)
    n = 12
    a = low_rank(rng, n, 40, 5)
    probe_in = a @ rng.standard_normal((40, 1))  # in span(A), which has dimension 5
    probe_new = rng.standard_normal((n, 1))
    first = METHOD.resolve_params({"ridge": 4.0}, n)
    fresh = METHOD.initial_state(first)
    np.testing.assert_array_equal(fresh["cholesky"], 2.0 * np.eye(n))
    s0 = METHOD.scores(fresh, first, a[:, :1])[0]
    assert s0 == pytest.approx(a[:, 0] @ a[:, 0] / 4.0)

    previous = 0.0
    pinv_params = METHOD.resolve_params({"c": 1e9}, n)  # keep everything with p = 1
    _, pinv_state, _ = stream(a, pinv_params.as_params(), chunk=40)
    pinv_score = METHOD.scores(pinv_state, pinv_params, probe_in)[0]
    for ridge in (1.0, 1e-2, 1e-4, 1e-8):
        params, state, _ = stream(a, {"c": 1e9, "ridge": ridge}, chunk=40)
        s_in, s_new = METHOD.scores(state, params, np.hstack([probe_in, probe_new]))
        assert previous < s_in <= pinv_score * (1 + 1e-9)
        previous = s_in
        if ridge <= 1e-2:
            assert s_new > 1.0  # l~ = 1, like the pseudo-inverse rule for a new direction
    assert previous == pytest.approx(pinv_score, rel=1e-5)


# -- online scores over-estimate the batch scores -----------------------------------------------


@pytest.mark.parametrize("ridge", [0.0, 0.5])
def test_online_scores_overestimate_batch_leverage_when_nothing_is_rescaled(ridge: float) -> None:
    """With c so large that every column is kept with p = 1, A~_{i-1} = A_{1..i-1}. Then, by
    Sherman-Morrison, the batch (ridge) leverage of a_i inside A_{1..i} is exactly s_i / (1 + s_i)
    (1 for a new direction), so s_i >= it; and A_{1..i} A_{1..i}^T <= A A^T makes it >= the
    leverage of a_i in the whole A. Hence l~_i = min((1 + eps) s_i, 1) over-estimates both."""
    rng = np.random.default_rng(9)
    n, d = 10, 60
    a = low_rank(rng, n, d, 7)
    _, _, decisions = stream(a, {"c": 1e12, "ridge": ridge, "epsilon": 0.5}, chunk=9)
    assert all(dec.kept and dec.probability == 1.0 for dec in decisions)
    full = batch_leverage_scores(a, ridge)
    for i, dec in enumerate(decisions):
        prefix = batch_leverage_scores(a[:, : i + 1], ridge)[i]
        assert dec.leverage >= prefix - 1e-12 and prefix >= full[i] - 1e-12
        if dec.leverage < 1.0:
            s = dec.leverage / 1.5
            assert prefix == pytest.approx(s / (1 + s), rel=1e-8, abs=1e-14)
        elif ridge == 0 and i < 7:
            assert prefix == pytest.approx(1.0)  # new direction: exact leverage 1


def test_probabilities_scales_and_kept_columns_are_consistent() -> None:
    rng = np.random.default_rng(10)
    a = low_rank(rng, 20, 300, 20)
    resolved, state, decisions = stream(a, {"c": 2.0, "ridge": 0.1}, chunk=64)
    prob = np.asarray(state["probability"])
    lev = METHOD.weights(state, resolved)
    assert np.all((prob >= 0) & (prob <= 1)) and np.all((lev >= 0) & (lev <= 1))
    np.testing.assert_array_equal(prob, np.minimum(resolved.c * lev, 1.0))
    kept = [d for d in decisions if d.kept]
    assert 0 < len(kept) < 300 and any(d.probability < 1 for d in kept)
    np.testing.assert_array_equal(state["kept_indices"], [d.index for d in kept])
    np.testing.assert_allclose(
        array_field(state, "kept_scales"), 1 / np.sqrt([d.probability for d in kept])
    )
    np.testing.assert_allclose(
        METHOD.kept_matrix(state), a[:, [d.index for d in kept]] * state["kept_scales"]
    )


# -- input checks ----------------------------------------------------------------------------


def test_bad_columns_and_mismatched_state_are_rejected() -> None:
    resolved = METHOD.resolve_params({}, 6)
    state = METHOD.initial_state(resolved)
    with pytest.raises(InvalidInput, match=r"shape \(n_samples=6, c\); got shape \(5, 2\)"):
        METHOD.add_features(state, resolved, np.ones((5, 2)))
    with pytest.raises(InvalidInput, match="got shape"):
        METHOD.add_features(state, resolved, np.ones(6))
    with pytest.raises(InvalidInput, match=r"ridge=0\.0; params say ridge=1\.0"):
        ridge = METHOD.resolve_params(resolved.as_params() | {"ridge": 1.0}, 6)
        METHOD.add_features(state, ridge, np.ones((6, 1)))
    new, ds = METHOD.add_features(state, resolved, np.ones((6, 0)))
    assert ds == [] and new["features_seen"] == 0


def test_cluster_samples() -> None:
    rng = np.random.default_rng(12)
    centers = 10 * rng.standard_normal((3, 5))
    truth = np.repeat(np.arange(3), 20)
    x = centers[truth] + rng.standard_normal((60, 5))
    labels, inertia = cluster_samples(x, 3, seed=0)
    assert labels.shape == (60,) and labels.dtype == np.int64
    # Perfect recovery of well separated blobs; objective (3.5) recomputed by hand.
    assert len({(t, lab) for t, lab in zip(truth, labels, strict=True)}) == 3
    centres = np.array([x[labels == k].mean(axis=0) for k in range(3)])
    assert inertia == pytest.approx(float(((x - centres[labels]) ** 2).sum()))
    for k in (0, 61, True, 2.0):
        with pytest.raises(InvalidInput, match="k must be an integer in"):
            cluster_samples(x, k, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="no features kept"):
        cluster_samples(np.zeros((60, 0)), 3, 0)


def test_batch_leverage_scores() -> None:
    rng = np.random.default_rng(13)
    a = low_rank(rng, 15, 40, 6)
    a[:, 3] = 0
    lev = batch_leverage_scores(a)
    np.testing.assert_allclose(lev, np.diag(a.T @ np.linalg.pinv(a @ a.T) @ a), atol=1e-10)
    assert lev.sum() == pytest.approx(6.0) and lev[3] == pytest.approx(0.0, abs=1e-15)
    ridge = batch_leverage_scores(a, 2.0)
    want = np.diag(a.T @ np.linalg.solve(a @ a.T + 2.0 * np.eye(15), a))
    np.testing.assert_allclose(ridge, want, rtol=1e-10)
    s = np.linalg.svd(a, compute_uv=False)
    assert ridge.sum() == pytest.approx(float((s**2 / (s**2 + 2.0)).sum()))


# -- parameters ------------------------------------------------------------------------------


def test_defaults_are_echoed() -> None:
    resolved = METHOD.resolve_params({}, 1440).as_params()
    assert resolved == {"epsilon": 0.5, "c": 8 * 0.5**-2 * math.log(1440), "ridge": 0.0, "seed": 0}
    assert resolved["c"] == pytest.approx(232.71, abs=0.01)
    assert json.loads(json.dumps(resolved)) == resolved
    again = METHOD.resolve_params(resolved, 1440).as_params()
    assert again == resolved
    custom = METHOD.resolve_params({"epsilon": 0.25, "ridge": 3, "seed": 7}, 100).as_params()
    assert custom == {"epsilon": 0.25, "c": 128 * math.log(100), "ridge": 3.0, "seed": 7}
    assert METHOD.resolve_params({"c": 5}, 1).c == 5.0


@pytest.mark.parametrize(
    ("params", "n", "message"),
    [
        ({"epsilon": 0.5, "k": 3}, 10, "unknown parameter.*'k'.*expected some of: epsilon, c"),
        ({"epsilon": 0.0}, 10, r"epsilon must be a finite number in \(0, 1\); got 0.0"),
        ({"epsilon": 1}, 10, r"epsilon must be a finite number in \(0, 1\); got 1"),
        ({"epsilon": -0.2}, 10, r"epsilon must be a finite number in \(0, 1\)"),
        ({"epsilon": True}, 10, r"epsilon must be a finite number in \(0, 1\); got True"),
        ({"epsilon": "0.5"}, 10, r"epsilon must be a finite number in \(0, 1\); got '0.5'"),
        ({"epsilon": float("nan")}, 10, r"epsilon must be a finite number in \(0, 1\); got nan"),
        ({"c": 0}, 10, r"c must be a finite number > 0; got 0"),
        ({"c": -3.0}, 10, r"c must be a finite number > 0"),
        ({"c": False}, 10, "c must be a finite number > 0; got False"),
        ({"c": float("inf")}, 10, "c must be a finite number > 0; got inf"),
        ({"c": None}, 10, "c must be a finite number > 0; got None"),
        ({"ridge": -1e-3}, 10, "ridge must be a finite number >= 0"),
        ({"ridge": True}, 10, "ridge must be a finite number >= 0; got True"),
        ({"ridge": float("inf")}, 10, "ridge must be a finite number"),
        ({"seed": -1}, 10, r"seed must be an integer in \[0, 2\*\*63\); got -1"),
        ({"seed": 1.0}, 10, "seed must be an integer"),
        ({"seed": True}, 10, "seed must be an integer"),
        ({"seed": 2**63}, 10, "seed must be an integer"),
        ({}, 1, "default c = 8 epsilon.*is 0 for n_samples = 1; pass c"),
        ({}, 0, "the size must be an integer >= 1; got 0"),
        ({}, True, "the size must be an integer >= 1; got True"),
    ],
)
def test_invalid_params(params: dict[str, Any], n: Any, message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        METHOD.resolve_params(params, n)
    with pytest.raises(InvalidParams):
        METHOD.resolve_params(params, n, stored=True)


def test_params_must_be_a_mapping() -> None:
    with pytest.raises(InvalidParams, match="params must be an object; got list"):
        METHOD.resolve_params([("epsilon", 0.5)], 10)  # type: ignore[arg-type]
