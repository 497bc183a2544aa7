"""The baselines the papers compare against, as published libraries implement them, and Sift's
own batch references.

* MCFS (Cai, Zhang & He, KDD 2010) and the Laplacian score (He, Cai & Niyogi, NIPS 2005) from
  ``skfeature-chappers``, the maintained fork of scikit-feature (ASU), on the graphs its own
  examples use: MCFS on the binary kNN graph (k = 5, Euclidean), the Laplacian score on the
  heat-kernel kNN graph (k = 5, Euclidean, ``t = 1``; on unit rows the squared distances lie in
  [0, 4], so the weights ``exp(-d^2 / 2)`` stay in [0.14, 1]). MCFS is run once per budget h
  (its LARS cardinality constraint is h, as in the paper) and features are scored by
  ``max_j |a_ji|`` over the spectral targets (the paper's MCFS score); skfeature's own ranking
  helper takes ``max_j a_ji`` without the absolute value, which is why the raw coefficients are
  read here (``mode="raw"``).
* scikit-learn's ``chi2`` and ``mutual_info_classif`` (information gain's estimator) for the
  labelled task, and ``VarianceThreshold`` (its ``variances_``) to check Sift's ``variance``.
* Sift's batch references: GFW-p2 (``service.algorithms.fsds.gfw_p2_weights``, Algorithm 1 with
  p = 2 on all rows), exact ridge leverage scores (``service.algorithms.leverage``, eq. (2.1)),
  OCFS's scores from all rows at once (``service.algorithms.ocfs``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import numpy as np

from evaluation.protocol import timed

#: skfeature's ``construct_W`` arguments, as its examples for each method.
MCFS_GRAPH: dict[str, Any] = {
    "metric": "euclidean",
    "neighbor_mode": "knn",
    "weight_mode": "binary",
    "k": 5,
}
LAPLACIAN_GRAPH: dict[str, Any] = {
    "metric": "euclidean",
    "neighbor_mode": "knn",
    "weight_mode": "heat_kernel",
    "k": 5,
    "t": 1.0,
}


def versions() -> dict[str, str]:
    """The peer libraries' versions (the report names them)."""
    out = {}
    for name in ("skfeature-chappers", "scikit-learn", "numpy", "scipy", "matplotlib"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def graph(x: np.ndarray, options: dict[str, Any]) -> Any:
    """skfeature's affinity matrix of the rows of ``x`` (a copy: its cosine mode writes)."""
    from skfeature.utility.construct_W import construct_W

    return construct_W(np.array(x, dtype=np.float64), **options)


@dataclass
class Unsupervised:
    """MCFS and the Laplacian score on one matrix, computed once and timed."""

    x: np.ndarray
    clusters: int
    seconds: dict[str, float] = field(default_factory=dict)
    _mcfs_graph: Any = None
    _laplacian: np.ndarray | None = None
    _mcfs: dict[int, np.ndarray] = field(default_factory=dict)

    def mcfs(self, h: int) -> np.ndarray:
        """MCFS scores ``max_j |a_ji|`` with LARS stopped at h nonzero coefficients."""
        from skfeature.function.sparse_learning_based.MCFS import mcfs

        if h not in self._mcfs:
            if self._mcfs_graph is None:
                self._mcfs_graph, spent = timed(lambda: graph(self.x, MCFS_GRAPH))
                self.seconds["mcfs graph"] = spent
            coef, spent = timed(
                lambda: mcfs(
                    np.array(self.x),
                    n_selected_features=h,
                    W=self._mcfs_graph,
                    n_clusters=self.clusters,
                    mode="raw",
                )
            )
            self.seconds[f"mcfs h={h}"] = spent
            self._mcfs[h] = np.abs(np.asarray(coef)).max(axis=1)
        return self._mcfs[h]

    def laplacian_order(self) -> np.ndarray:
        """Every feature, best (smallest Laplacian score) first."""
        from skfeature.function.similarity_based.lap_score import lap_score

        if self._laplacian is None:

            def run() -> np.ndarray:
                weights = graph(self.x, LAPLACIAN_GRAPH)
                return np.asarray(lap_score(np.array(self.x), W=weights, mode="index"), dtype=int)

            self._laplacian, self.seconds["laplacian score"] = timed(run)
        return self._laplacian


def chi2_scores(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scikit-learn's chi2 statistic per feature (a constant feature scores 0)."""
    from sklearn.feature_selection import chi2

    scores, _ = chi2(x, y)
    return np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0)


def raw_chi2(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scikit-learn's chi2 statistic per feature as it answers (NaN for a feature of zeros)."""
    from sklearn.feature_selection import chi2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(chi2(x, y)[0], dtype=np.float64)


def f_classif_scores(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scikit-learn's ANOVA F per feature as it answers (NaN for a constant feature)."""
    from sklearn.feature_selection import f_classif

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(f_classif(x, y)[0], dtype=np.float64)


def largest_difference(found: np.ndarray, exact: np.ndarray) -> float:
    """The largest relative difference where both are finite and the reference not zero."""
    both = np.isfinite(found) & np.isfinite(exact) & (exact != 0)
    if not both.any():
        return 0.0
    return float(np.max(np.abs(found[both] - exact[both]) / np.abs(exact[both])))


#: Equal-width bins of a [0, 1]-scaled feature for the information-gain estimate.
INFORMATION_BINS = 10


def information_gain(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scikit-learn's ``mutual_info_classif`` with the discrete (contingency) estimator on every
    feature of ``x`` (scaled to [0, 1]) cut into ``INFORMATION_BINS`` equal-width bins: the
    information gain of the paper's IG.

    The kNN estimator (scikit-learn's default for continuous features) fits one neighbour
    search per feature and class: about 20,000 searches on COIL20 whatever the number of
    rows, minutes where everything else takes seconds, for an estimate of the same quantity.
    """
    from sklearn.feature_selection import mutual_info_classif

    binned = np.minimum(
        (np.clip(x, 0.0, 1.0) * INFORMATION_BINS).astype(np.int64), INFORMATION_BINS - 1
    )
    return np.asarray(mutual_info_classif(binned, y, discrete_features=True), dtype=np.float64)


def variances(x: np.ndarray) -> np.ndarray:
    """scikit-learn's ``VarianceThreshold().fit(x).variances_`` (population variance)."""
    from sklearn.feature_selection import VarianceThreshold

    return np.asarray(VarianceThreshold().fit(x).variances_, dtype=np.float64)
