"""FSDS vs GFW-p2 on real data: k-means NMI on the top-200 features of COIL20.

The paper reports FSDS reaching >= 97-99 % of GFW-p2's NMI (section 5.2). Rows are streamed in a
seeded shuffled order, 150 rows per chunk, k = 20 (the number of classes), all other parameters
at their defaults (ell = ceil(sqrt(1024)) = 32, alpha = 2^3 sigma_k, block_rows = 200). NMI is
averaged over several k-means seeds so the comparison is not at the mercy of one initialisation.
"""

from __future__ import annotations

import numpy as np

from service.algorithms.fsds import FSDS, gfw_p2_weights
from tests.support.datasets import load_mat
from tests.support.states import number_field

TOP = 200
K = 20
KMEANS_SEEDS = (0, 1, 2, 3, 4)


def mean_nmi(x: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> float:
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    top = np.argsort(-weights, kind="stable")[:TOP]
    scores = [
        normalized_mutual_info_score(
            labels, KMeans(n_clusters=20, n_init=10, random_state=seed).fit_predict(x[:, top])
        )
        for seed in KMEANS_SEEDS
    ]
    return float(np.mean(scores))


def test_fsds_reaches_97_percent_of_gfw_p2_nmi() -> None:
    x, labels = load_mat("COIL20.mat")
    assert isinstance(x, np.ndarray)
    n, m = x.shape

    method = FSDS()
    params = method.resolve_params({"k": K}, m)
    assert params.ell == 32
    state = method.initial_state(params)
    order = np.random.default_rng(0).permutation(n)
    for start in range(0, n, 150):
        state = method.update(state, params, x[order[start : start + 150]])
    assert state["rows_seen"] == n and number_field(state, "shrinkage_total") > 0

    fsds_nmi = mean_nmi(x, labels, method.weights(state, params))
    gfw_nmi = mean_nmi(x, labels, gfw_p2_weights(x, K))
    print(f"COIL20 top-{TOP} k-means NMI: FSDS {fsds_nmi:.4f}, GFW-p2 {gfw_nmi:.4f}")
    assert fsds_nmi >= 0.97 * gfw_nmi
