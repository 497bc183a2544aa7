"""OMVFS against the paper's claims on the UCI multiple-features digits (6 views, 10 classes).

Protocol (section V-C, scaled to this set): the views are shifted to be nonnegative (per feature,
by the minimum over the set: offline preprocessing, the same for every method), rows arrive in a
seeded random order in chunks of 200, OMVFS runs with its defaults (K = 10 clusters, s = 2,
gamma = 1e7, 200 iterations, alpha = beta = 1); FSDS runs on each view separately with the same
chunks. With the top-b features of every view, rows scaled to unit norm per view, k-means
(10 clusters, 3 seeds) gives the NMI. Run with ``-s`` to see the table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from service.algorithms.fsds import FSDS
from service.algorithms.omvfs import OMVFS
from tests.datasets import load_uci_multifeature

CHUNK = 200


def nonnegative_views() -> tuple[dict[str, np.ndarray], np.ndarray]:
    views, labels = load_uci_multifeature()
    return {name: x - x.min(axis=0) for name, x in views.items()}, labels


def omvfs_weights(views: dict[str, np.ndarray], order: np.ndarray, clusters: int) -> list[Any]:
    """Per view the row norms of V after each chunk (the list of rankings over time)."""
    method = OMVFS()
    dims = {name: x.shape[1] for name, x in views.items()}
    rows = np.hstack(list(views.values()))[order]
    params = method.resolve_params({"views": dims, "n_clusters": clusters}, rows.shape[1])
    state = method.initial_state(params, rows.shape[1])
    history = []
    for start in range(0, rows.shape[0], CHUNK):
        state = method.update(state, params, rows[start : start + CHUNK])
        history.append(split(np.asarray(state["weights"]), dims))
    return history


def split(weights: np.ndarray, dims: dict[str, int]) -> dict[str, np.ndarray]:
    out, start = {}, 0
    for name, dim in dims.items():
        out[name] = weights[start : start + dim]
        start += dim
    return out


def fsds_weights(views: dict[str, np.ndarray], order: np.ndarray) -> dict[str, np.ndarray]:
    out = {}
    for name, x in views.items():
        method = FSDS()
        params = method.resolve_params({"k": min(10, x.shape[1] - 1)}, x.shape[1])
        state = method.initial_state(params, x.shape[1])
        for start in range(0, x.shape[0], CHUNK):
            state = method.update(state, params, x[order][start : start + CHUNK])
        out[name] = method.weights(state, params)
    return out


def nmi_of_selection(
    views: dict[str, np.ndarray],
    weights: dict[str, np.ndarray],
    budget: int,
    rows: np.ndarray,
    labels: np.ndarray,
    clusters: int,
) -> float:
    parts = []
    for name, x in views.items():
        chosen = np.argsort(-weights[name], kind="stable")[:budget]
        part = x[rows][:, chosen]
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        parts.append(part / np.where(norms == 0, 1.0, norms))
    z = np.hstack(parts)
    return float(
        np.mean(
            [
                normalized_mutual_info_score(
                    labels, KMeans(clusters, n_init=10, random_state=seed).fit_predict(z)
                )
                for seed in range(3)
            ]
        )
    )


def test_omvfs_beats_fsds_per_view_with_the_same_budget() -> None:
    views, labels = nonnegative_views()
    order = np.random.default_rng(0).permutation(labels.size)
    omvfs = omvfs_weights(views, order, 10)[-1]
    fsds = fsds_weights(views, order)
    everything = np.arange(labels.size)
    table = {}
    for budget in (10, 25, 50, 100):
        table[budget] = (
            nmi_of_selection(views, omvfs, budget, everything, labels, 10),
            nmi_of_selection(views, fsds, budget, everything, labels, 10),
        )
    print("\nfeatures/view  NMI OMVFS  NMI FSDS per view")
    for budget, (ours, theirs) in table.items():
        print(f"{budget:>13}  {ours:>9.4f}  {theirs:>17.4f}")
    ours, theirs = table[50]
    assert ours >= theirs, f"50 features per view: OMVFS NMI {ours:.4f} < FSDS {theirs:.4f}"
    assert table[10][0] > table[10][1], "the paper's clearest case: small budgets"


def test_ranking_adapts_to_concept_drift() -> None:
    """Fig. 7's setting: digits 0-4 first, then 5-9. The final ranking serves the second
    concept better than the ranking frozen after the first one."""
    views, labels = nonnegative_views()
    rng = np.random.default_rng(0)
    order = np.concatenate(
        [rng.permutation(np.nonzero(labels < 5)[0]), rng.permutation(np.nonzero(labels >= 5)[0])]
    )
    history = omvfs_weights(views, order, 5)
    static, final = history[len(history) // 2 - 1], history[-1]
    second = order[1000:]
    for budget in (5, 10):
        adapted = nmi_of_selection(views, final, budget, second, labels[second], 5)
        frozen = nmi_of_selection(views, static, budget, second, labels[second], 5)
        print(f"\n{budget} features/view on digits 5-9: final {adapted:.4f}, static {frozen:.4f}")
        assert adapted > frozen
