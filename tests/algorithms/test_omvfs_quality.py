"""OMVFS's rankings on the UCI multiple-features digits, against baselines any ranking must beat.

Protocol, the same for every method: the four views that are nonnegative as published (``fou``
76, ``fac`` 216, ``pix`` 240, ``zer`` 47 features; 2000 rows, 10 classes) stream in chunks of
200 rows, in several seeded random orders (``ORDERS``). A ranking's top-b features of every
view (b in ``BUDGETS``; all 47 of ``zer`` at 50) are judged by k-means (10 clusters, n_init 10,
seeds 0 and 1) on those columns of the whole set, *standardised* (zero mean, unit variance per
column: no feature counts for more because its values are larger), by the NMI with the labels,
averaged over the seeds and the orders. Baselines:

* random subsets of b features per view (the average over ``RANDOM_SUBSETS`` draws);
* the b features of largest column mean per view (what a magnitude-driven ranking picks);
* FSDS (``service.algorithms.fsds``) run on each view separately over the same chunks;
* all features.

OMVFS runs with K = 10 and its defaults (``score: "explained"``, ``gamma: "auto"``), and with the
paper's settings (``score: "paper"``, ``gamma: 1e7``), which must still give the paper's ranking:
the row norm of V, which follows the column means. Run with ``-s`` to see the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from service.algorithms.fsds import FSDS
from service.algorithms.omvfs import OMVFS
from tests.support.datasets import load_uci_multifeature

pytestmark = pytest.mark.slow

#: The views of UCI mfeat with no negative value (kar has some; mor has only 6 features).
VIEWS = ("fou", "fac", "pix", "zer")
CHUNK = 200
BUDGETS = (10, 20, 50)
ORDERS = (0, 1, 2)
KMEANS_SEEDS = (0, 1)
RANDOM_SUBSETS = 20
#: The paper's settings (gamma 1e7, the row norm of V).
PAPER = {"score": "paper", "gamma": 1e7}


@dataclass(frozen=True)
class Data:
    views: dict[str, np.ndarray]
    labels: np.ndarray

    @property
    def dims(self) -> dict[str, int]:
        return {name: x.shape[1] for name, x in self.views.items()}


@cache
def data() -> Data:
    views, labels = load_uci_multifeature()
    return Data({name: views[name] for name in VIEWS}, labels)


def order(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(data().labels.size)


def omvfs_scores(seed: int, params: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per view the scores of OMVFS (K = 10) after the stream in order ``seed``."""
    method = OMVFS()
    dims = data().dims
    rows = np.hstack(list(data().views.values()))[order(seed)]
    resolved = method.resolve_params({"views": dims, "n_clusters": 10, **params}, rows.shape[1])
    state = method.initial_state(resolved)
    for start in range(0, rows.shape[0], CHUNK):
        state = method.update(state, resolved, rows[start : start + CHUNK])
    weights = method.weights(state, resolved)
    bounds = np.cumsum([0, *dims.values()])
    return {name: weights[bounds[i] : bounds[i + 1]] for i, name in enumerate(dims)}


def fsds_scores(seed: int) -> dict[str, np.ndarray]:
    """FSDS on each view separately, over the same chunks (k = 10, its defaults otherwise)."""
    out = {}
    for name, x in data().views.items():
        method = FSDS()
        params = method.resolve_params({"k": 10}, x.shape[1])
        state = method.initial_state(params)
        rows = x[order(seed)]
        for start in range(0, rows.shape[0], CHUNK):
            state = method.update(state, params, rows[start : start + CHUNK])
        out[name] = method.weights(state, params)
    return out


def top(scores: dict[str, np.ndarray], budget: int) -> dict[str, np.ndarray]:
    """The top ``budget`` of every view (ties broken by the lower index, as the service)."""
    return {name: np.lexsort((np.arange(s.size), -s))[:budget] for name, s in scores.items()}


def nmi(selection: dict[str, np.ndarray], kmeans_seeds: tuple[int, ...] = KMEANS_SEEDS) -> float:
    """k-means on the selected columns, standardised; the NMI with the labels (mean)."""
    z = np.hstack([data().views[name][:, columns] for name, columns in selection.items()])
    spread = z.std(axis=0)
    z = (z - z.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return float(
        np.mean(
            [
                normalized_mutual_info_score(
                    data().labels, KMeans(10, n_init=10, random_state=seed).fit_predict(z)
                )
                for seed in kmeans_seeds
            ]
        )
    )


def mean_nmi(rankings: list[dict[str, np.ndarray]], budget: int) -> float:
    return float(np.mean([nmi(top(scores, budget)) for scores in rankings]))


@cache
def table() -> dict[str, dict[int, float]]:
    """NMI per ranking and budget (averaged over the orders), and the baselines."""
    default = [omvfs_scores(seed, {}) for seed in ORDERS]
    paper = [omvfs_scores(seed, PAPER) for seed in ORDERS]
    fsds = [fsds_scores(seed) for seed in ORDERS]
    largest = [{name: x.mean(axis=0) for name, x in data().views.items()}]
    rng = np.random.default_rng(2024)
    rows: dict[str, dict[int, float]] = {}
    rows["random subsets"] = {
        budget: float(
            np.mean(
                [
                    nmi(
                        {name: rng.permutation(dim)[:budget] for name, dim in data().dims.items()},
                        kmeans_seeds=(0,),
                    )
                    for _ in range(RANDOM_SUBSETS)
                ]
            )
        )
        for budget in BUDGETS
    }
    rows["largest column mean"] = {budget: mean_nmi(largest, budget) for budget in BUDGETS}
    rows["FSDS per view"] = {budget: mean_nmi(fsds, budget) for budget in BUDGETS}
    rows["OMVFS paper"] = {budget: mean_nmi(paper, budget) for budget in BUDGETS}
    rows["OMVFS default"] = {budget: mean_nmi(default, budget) for budget in BUDGETS}
    everything = nmi({name: np.arange(dim) for name, dim in data().dims.items()})
    rows["all features"] = dict.fromkeys(BUDGETS, everything)
    print(f"\n{'features per view':<22}" + "".join(f"{b:>8}" for b in BUDGETS))
    for label, row in rows.items():
        print(f"{label:<22}" + "".join(f"{row[b]:>8.4f}" for b in BUDGETS))
    return rows


def test_the_default_ranking_beats_random_subsets_and_the_largest_means() -> None:
    rows = table()
    # Measured (3 orders): 0.731 against 0.713 at 10 features per view, 0.807 against 0.738 at
    # 20. The margin at 10 is small and said so in docs/methods/omvfs.md; at 20 the default also
    # passes per-view FSDS.
    margins = {10: 0.01, 20: 0.04}
    for budget, margin in margins.items():
        ours = rows["OMVFS default"][budget]
        assert ours >= rows["random subsets"][budget] + margin, (budget, rows)
        assert ours >= rows["largest column mean"][budget] + 0.03, (budget, rows)
    # At 50 features per view a random subset is nearly all features: no ranking can beat it
    # clearly; the default must not fall below it.
    assert rows["OMVFS default"][50] >= rows["random subsets"][50] - 0.01, rows


def test_the_default_ranking_is_within_a_few_percent_of_fsds_per_view() -> None:
    rows = table()
    for budget in BUDGETS:
        assert rows["OMVFS default"][budget] >= 0.95 * rows["FSDS per view"][budget], (budget, rows)


def test_the_papers_ranking_is_still_there_when_asked_for() -> None:
    """score "paper" with gamma 1e7: the row norm of V, which follows the column mean of each
    feature (rows scaled to unit norm per view, as the factorisation sees them), and clusters
    no better than random subsets."""
    rows = table()
    for budget in BUDGETS:
        assert rows["OMVFS paper"][budget] <= rows["random subsets"][budget] + 0.01, rows
    scores = omvfs_scores(ORDERS[0], PAPER)
    for name, x in data().views.items():
        scaled = x / np.linalg.norm(x, axis=1, keepdims=True)
        correlation = spearmanr(scores[name], scaled.mean(axis=0)).statistic
        assert correlation >= 0.95, (name, correlation)
