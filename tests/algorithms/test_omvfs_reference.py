"""OMVFS's update against the first version's code and the literal formulas (Shao et al.).

``reference_update`` is the update as it was first written: one product per view, the
similarity blocks kept dense, the objective recomputed every iteration (``first_objective``,
checked here against ``literal_objective``, which forms ``U V^T`` and ``L = D - W``) and, with
``stop="objective"``, its first stopping rule. It keeps that version's state layout (dense
``W{j}``), so it also stands for the selectors stored before the similarity graph was kept
sparse. ``service.algorithms.omvfs`` reuses products between the two updates, stacks the views
and keeps the kNN graph sparse: the iterates must be the same up to floating-point
reassociation. ``benchmarks/bench_omvfs.py`` times this reference as "old".

The first version had the paper's gamma (1e7) and ranking (the row norms of V) and kept no
feature moments: the tests here run with those settings (``PAPER``), and with ``gamma: "auto"``
computed literally from the buffer (``GAMMA_SCALE |X_[s,t]|_F^2 / K``), on states without the
moments; the scale-free scores are checked in test_omvfs.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.base import State
from service.algorithms.moments import chunk_moments
from service.algorithms.omvfs import OMVFSParams, split_views
from service.algorithms.omvfs.graph import buffer_rows, similarity_blocks
from tests.support.omvfs_reference import (
    METHOD,
    MOMENTS,
    literal_objective,
    reference_initial_state,
    reference_update,
)
from tests.support.states import array_field

#: The paper's orthogonality weight and ranking, the first version's only ones.
PAPER: dict[str, Any] = {"gamma": 1e7, "score": "paper"}
VIEWS = {"text": 40, "image": 12, "tags": 6}
WIDTH = sum(VIEWS.values())


def literal_objective_of(state: State, params: OMVFSParams) -> float:
    """``literal_objective`` at a state's final iterate (its A and B are that iterate's A^, B^)."""
    dims = [dim for _, dim in params.view_dims]
    return literal_objective(
        [buffer_rows(state, j, dim).toarray() for j, dim in enumerate(dims)],
        [similarities(state, j) for j in range(len(dims))],
        np.asarray(state["U_buffer"]),
        [np.asarray(state[f"V{j}"]) for j in range(len(dims))],
        np.asarray(state["A"]),
        [np.asarray(state[f"B{j}"]) for j in range(len(dims))],
        params,
    )


def chunks(count: int, rows: int = 30, seed: int = 0) -> list[sp.csr_matrix]:
    """Nonnegative chunks: a sparse 'text' view, a dense 'image' view, a half-empty 'tags'."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        text = sp.random(rows, VIEWS["text"], density=0.05, random_state=rng) * 3
        image = rng.random((rows, VIEWS["image"]))
        tags = rng.random((rows, VIEWS["tags"])) * (rng.random((rows, VIEWS["tags"])) < 0.5)
        out.append(sp.hstack([text, sp.csr_matrix(image), sp.csr_matrix(tags)], format="csr"))
    return out


def similarities(state: State, j: int) -> np.ndarray:
    """``W{j}`` as a dense matrix, whichever layout the state holds."""
    if f"W{j}_indptr" in state:
        return np.asarray(similarity_blocks(state, j, sparse=False))
    return np.asarray(state[f"W{j}"])


def assert_same_iterates(ours: State, reference: State) -> None:
    assert ours["last_iterations"] == reference["last_iterations"]
    for key in ("U_buffer", "A", "weights", *(f"{p}{j}" for p in "VB" for j in range(3))):
        np.testing.assert_allclose(
            np.asarray(ours[key]), np.asarray(reference[key]), rtol=1e-9, atol=1e-13, err_msg=key
        )
    for j in range(3):
        np.testing.assert_allclose(similarities(ours, j), similarities(reference, j), rtol=1e-12)
    assert ours["last_objective"] == pytest.approx(reference["last_objective"], rel=1e-9)


@pytest.mark.parametrize(
    "params",
    [
        {**PAPER, "neighbours": None, "max_iter": 40, "tol": 1e-12},
        {**PAPER, "neighbours": 5, "max_iter": 40, "tol": 1e-12},
        {**PAPER, "neighbours": 5, "alpha": {"text": 0.5, "image": 2.0, "tags": 1.0}, "beta": 0.3},
        {**PAPER, "neighbours": None, "buffer_chunks": 3},
        PAPER,
        {"score": "paper", "gamma": "auto"},
        {"score": "paper", "gamma": "auto", "neighbours": None, "max_iter": 40, "tol": 1e-12},
    ],
    ids=["dense-cap", "knn-cap", "knn-per-view", "dense-stops", "paper", "auto", "auto-cap"],
)
def test_iterates_equal_the_first_version_chunk_after_chunk(params: dict[str, Any]) -> None:
    """Same U, V, A, B (rtol 1e-9) after every one of 5 chunks, and the same number of
    iterations: at a cap, or where the stopping rule (relative change of U and of every V)
    ends the chunk, which at the paper's settings and the default tol is before the cap and not
    at once. ``"auto"``: the same with gamma computed from each chunk's buffer (on this
    structureless data U keeps moving, and some chunks reach the cap)."""
    resolved = METHOD.resolve_params({"views": VIEWS, "n_clusters": 4, **params}, WIDTH)
    ours = METHOD.initial_state(resolved)
    reference = reference_initial_state(resolved, WIDTH)
    iterations = []
    for chunk in chunks(5, seed=7):
        ours = METHOD.update(ours, resolved, chunk)
        reference = reference_update(reference, resolved, chunk)
        assert_same_iterates(ours, reference)
        iterations.append(int(np.asarray(ours["last_iterations"])))
    if "tol" not in params and params["gamma"] != "auto":
        assert all(1 < n < resolved.max_iter for n in iterations), iterations


def test_states_stored_in_the_first_layout_are_read_and_rewritten() -> None:
    """A kNN selector stored before the graph was kept sparse holds dense ``W{j}``, no feature
    moments, and params without ``score`` (gamma 1e7): the update reads it, continues exactly
    as the first version would (the paper's ranking), writes the sparse layout and starts the
    moments from the rows its buffer held."""
    given = METHOD.resolve_params({"views": VIEWS, "n_clusters": 3, "neighbours": 4}, WIDTH)
    first = {**given.as_params(), "gamma": 1e7}
    del first["score"]
    resolved = METHOD.resolve_params(first, WIDTH, stored=True)
    data = chunks(4, seed=8)
    stored = reference_initial_state(resolved, WIDTH)
    for chunk in data[:2]:
        stored = reference_update(stored, resolved, chunk)
    assert not set(MOMENTS) & set(stored)
    ours = METHOD.update(stored, resolved, data[2])
    reference = reference_update(stored, resolved, data[2])
    assert_same_iterates(ours, reference)
    assert "W0" not in ours and np.asarray(ours["W0_indptr"]).shape == (61,)
    assert set(ours) == set(METHOD.initial_state(resolved))
    cfg = resolved
    held = np.vstack([sp.hstack(split_views(chunk, cfg)).toarray() for chunk in data[:3]])
    rows, mean, m2 = chunk_moments(held)
    assert ours["feature_rows"] == rows == 90
    np.testing.assert_allclose(array_field(ours, "feature_mean"), mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(array_field(ours, "feature_m2"), m2, rtol=1e-10, atol=1e-14)
    assert_same_iterates(
        METHOD.update(ours, resolved, data[3]), reference_update(reference, resolved, data[3])
    )


@pytest.mark.parametrize("neighbours", [None, 6])
def test_objective_is_the_literal_one_and_never_increases(neighbours: int | None) -> None:
    resolved = METHOD.resolve_params(
        {
            "views": VIEWS,
            "n_clusters": 3,
            "max_iter": 60,
            "tol": 1e-14,
            "neighbours": neighbours,
            **PAPER,
        },
        WIDTH,
    )
    ours = METHOD.initial_state(resolved)
    reference = reference_initial_state(resolved, WIDTH)
    for chunk in chunks(4, seed=3):
        trace: list[float] = []
        reference = reference_update(reference, resolved, chunk, trace=trace)
        ours = METHOD.update(ours, resolved, chunk)
        values = np.asarray(trace)
        assert values.size == 61
        increases = np.diff(values) / np.abs(values[:-1])
        assert increases.max() <= 1e-9, f"objective went up by {increases.max():.2e}"
        assert values[-1] < values[0]
        literal = literal_objective_of(reference, resolved)
        assert values[-1] == pytest.approx(literal, rel=1e-9)
        assert ours["last_objective"] == pytest.approx(
            literal_objective_of(ours, resolved), rel=1e-9
        )
        assert ours["last_objective"] == pytest.approx(literal, rel=1e-9)


def test_the_first_stopping_rule_ends_chunks_where_the_objective_settles() -> None:
    """``stop="objective"`` is the first rule; on data where the objective does settle it ends
    chunks early, so the benchmark's "old" column is that rule, not a cap written in."""
    resolved = METHOD.resolve_params(
        {
            "views": VIEWS,
            "n_clusters": 3,
            "gamma": 10.0,
            "tol": 1e-4,
            "neighbours": None,
            "score": "paper",
        },
        WIDTH,
    )
    state = reference_initial_state(resolved, WIDTH)
    for chunk in chunks(2, seed=5):
        state = reference_update(state, resolved, chunk, stop="objective")
        assert 1 < int(np.asarray(state["last_iterations"])) < 200
