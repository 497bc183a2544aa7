"""How settled a top h is: the selection-stability index of Nogueira, Sechidis & Brown, and the
rank band of every feature, over resampled rankings.

Pure functions of score vectors and selections (no Redis, no HTTP). Where the resampled
rankings come from is ``service.algorithms.resampling``; this module measures them.

**The index** (Nogueira, Sechidis & Brown, "On the Stability of Feature Selection Algorithms",
JMLR 18(174), 2018, section 4, the measure Φ̂ that meets all five of their properties). ``M``
selections of a feature set of size ``d``, as the binary matrix ``Z`` (``z_if = 1`` when
selection ``i`` holds feature ``f``), each of ``k_i`` features::

    p̂_f = (1/M) sum_i z_if,   k̄ = (1/M) sum_i k_i,   s_f^2 = M/(M-1) p̂_f (1 - p̂_f)
    Φ̂ = 1 - ((1/d) sum_f s_f^2) / ((k̄/d) (1 - k̄/d))

1 when every selection is the same, about 0 for selections drawn at random (its expectation
under random selections of one size is 0), negative when they disagree more than chance.

**Its interval.** For selections of one size ``h`` (every top h the service assesses), Φ̂ is
a mean over pairs: with ``X_ij`` the features selection ``i`` lacks of selection ``j``,
``sum_f s_f^2 = mean_{i != j} X_ij``, so ``Φ̂ = 1 - q̄ / (1 - h/d)`` with ``q̄ = mean X_ij / h``
the share of its h features a selection lacks of another. The interval is Wilson's score
interval (Wilson, JASA 22(158), 1927) of that share as if seen over ``n = h M / 2`` trials
(the features of ``M / 2`` disjoint pairs: the pairs that share a selection add less), mapped
back through ``Φ̂ = 1 - q / (1 - h/d)`` (``disagreement_interval``). Counting features as
trials is conservative: a top's features flip with different probabilities (those far above
the h-th never flip), and the count of flips of unequal Bernoulli trials varies less than a
binomial of the same mean; so does the hypergeometric count of two random selections. Wilson's
interval keeps its coverage with few trials and shares near 0 (a settled top).

Nogueira et al.'s own interval (section 5: Φ̂ asymptotically normal as ``M`` grows, with a
variance estimator from ``φ_i = (p_a,i - p_e,i) / (1 - p_e)``, ``p_a,i = 1 - k_i/d - k̄/d +
(2/d) sum_f z_if p̂_f``, ``p_e,i = (1 - Φ̂)((k̄/d)(k_i/d) + (1 - k̄/d)(1 - k_i/d))``, ``p_e = 1 -
2(k̄/d)(1 - k̄/d)``, ``v̂ = (4/M^2) sum_i (φ_i - φ̄)^2``) needs many selections: it is 0 whenever
every selection agrees, and identically 0 for two of one size. It serves only selections of
unequal sizes (none the service makes), with Student's t quantile of ``M - 1`` degrees of
freedom for the normal one.

With ``M = 4`` (the default), four identical selections of 10 of 1000 features give
``[0.84, 1]`` (of 3: ``[0.61, 1]``); with ``M = 2``, ``[0.72, 1]`` and ``[0.44, 1]``; with 8,
``[0.91, 1]`` and ``[0.76, 1]``.

**Bands.** A feature's band is the lowest and highest rank it takes in the current ranking and
in the resampled ones (1 is the best), so the band always holds its current rank. How the
resampled rankings are formed from subsamples, and scaled for the index and for the bands:
``replicate_scores``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit

from service.algorithms.base import order_by_score

__all__ = [
    "CONFIDENCE",
    "Assessment",
    "ResampledRanking",
    "Stability",
    "assess",
    "assess_views",
    "bands",
    "disagreement_interval",
    "ranks_of",
    "replicate_scores",
    "resampled_ranking",
    "stability_index",
    "top_sets",
]

#: One selection: the indices of the features it holds.
Selection = Sequence[int] | np.ndarray
#: The level of the interval.
CONFIDENCE = 0.95
#: z_{1 - (1 - CONFIDENCE) / 2}
_Z = 1.959963984540054


@dataclass(frozen=True)
class Stability:
    """Φ̂ of ``resamples`` selections of ``h`` of ``d`` features, with its interval."""

    index: float
    low: float
    high: float
    resamples: int
    h: int
    d: int

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "interval": [self.low, self.high],
            "resamples": self.resamples,
            "h": self.h,
        }


def stability_index(selections: Sequence[Selection], d: int) -> Stability:
    """Φ̂ and its interval (module docstring) of ``selections`` (feature indices, each a set of
    distinct features among ``d``). Needs at least two selections and ``0 < k̄ < d``."""
    m = len(selections)
    if m < 2:
        raise ValueError(f"the index compares at least two selections; got {m}")
    sizes = np.array([len(s) for s in selections], dtype=np.float64)
    k_bar = float(sizes.mean())
    if not 0 < k_bar < d:
        raise ValueError(f"the selections must hold some but not all of the {d} features")
    chosen = np.concatenate([np.asarray(s, dtype=np.int64) for s in selections])
    features, counts = np.unique(chosen, return_counts=True)
    p_hat = counts / m
    # Features no selection holds have p̂ = 0 and s_f^2 = 0: only the selected ones count.
    spread = float(np.sum(m / (m - 1) * p_hat * (1.0 - p_hat))) / d
    share = k_bar / d
    index = 1.0 - spread / (share * (1.0 - share))
    if np.all(sizes == sizes[0]):
        low, high = disagreement_interval(index, int(sizes[0]), m, d)
    else:
        weight = dict(zip(features.tolist(), p_hat.tolist(), strict=True))
        held = np.array([sum(weight[f] for f in np.asarray(s).tolist()) for s in selections])
        p_e = 1.0 - 2.0 * share * (1.0 - share)
        p_a = 1.0 - sizes / d - share + 2.0 / d * held
        p_e_i = (1.0 - index) * (share * sizes / d + (1.0 - share) * (1.0 - sizes / d))
        phi = (p_a - p_e_i) / (1.0 - p_e)
        spread_of_mean = math.sqrt(4.0 / m**2 * float(np.sum((phi - phi.mean()) ** 2)))
        half = float(stdtrit(m - 1, 0.5 + CONFIDENCE / 2)) * spread_of_mean
        low, high = index - half, index + half
    return Stability(
        index=_clip(index),
        low=_clip(min(low, index)),
        high=_clip(max(high, index)),
        resamples=m,
        h=round(k_bar),
        d=d,
    )


def disagreement_interval(index: float, h: int, m: int, d: int) -> tuple[float, float]:
    """Φ̂'s interval for ``m`` selections of ``h`` of ``d`` features (module docstring): Wilson's
    score interval of the share ``q̄ = (1 - h/d)(1 - Φ̂)`` of the h features one selection
    lacks of another, as if seen over ``n = h m / 2`` trials (the features of ``m / 2`` disjoint
    pairs), mapped back through ``Φ̂ = 1 - q / (1 - h/d)``."""
    scale = 1.0 - h / d
    q = min(1.0, max(0.0, (1.0 - index) * scale))
    n = h * m / 2.0
    z2 = _Z * _Z
    centre = (q + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z / (1 + z2 / n) * math.sqrt(q * (1 - q) / n + z2 / (4 * n * n))
    return 1.0 - (centre + half) / scale, 1.0 - (centre - half) / scale


def _clip(value: float) -> float:
    """Φ̂ lies in [-1, 1] (its minimum is -1, reached by two disjoint halves)."""
    return float(min(1.0, max(-1.0, value)))


#: The scale of the subsamples' deviations that gives the *bands* the spread of resamples of
#: the whole stream (``replicate_scores``' ``scale``): the range of a feature's rank over the
#: current ranking and ``K`` replicates is then, in expectation, its range over the current
#: ranking and ``K`` independent resamples of ``n`` rows. Under the normal approximation,
#: ``E[range(0, X_1..X_K)] / (sqrt(K) E[range(0, G_1 - Ḡ, ..., G_K - Ḡ)])`` for independent
#: standard normals ``X`` and ``G`` (the subsamples' deviations from their mean sum to zero, so
#: they spread less than independent draws: 1.21 times ``1 / sqrt(K)`` at ``K = 2``, about
#: ``1 / sqrt(K)`` from 4 on). Computed by Monte Carlo (2 million draws each;
#: ``tests/algorithms/test_stability.py`` draws again).
BAND_SCALE = {2: 0.8532, 3: 0.6061, 4: 0.5082, 5: 0.4497, 6: 0.4095, 7: 0.3783, 8: 0.3536}


def replicate_scores(
    scores: np.ndarray, resampled: np.ndarray, corrected: bool = True, for_bands: bool = False
) -> np.ndarray | None:
    """The rankings the index and the bands compare, from the scores of the whole stream
    (``d``) and of ``K`` interleaved subsamples of it (``K x d``), each of about ``n / K`` rows;
    None while any of them has no score yet. Every score vector is first scaled to unit length
    (``ŝ = s / ||s||``): rankings do not depend on the scale.

    ``corrected`` (methods whose scores are smooth functions of means: variance, OCFS, IOC):
    rankings of the whole stream as ``K`` resamples of its ``n`` rows would give them. Where a
    score is asymptotically linear in the rows, its sampling variance is ``K`` times larger at
    ``n / K`` rows, so the subsamples' deviations from their mean are scaled by ``1 / sqrt(K)``
    around the whole stream's scores::

        r_g = ŝ + (ŝ_g - mean_j ŝ_j) / sqrt(K)

    which gives any two replicates the spread of two resamples of ``n`` rows
    (``Var(r_g - r_j) = 2 σ² / n``): what the index measures, how often two selections differ.
    For the bands (``for_bands``), the deviations are scaled by ``BAND_SCALE`` instead, which
    gives the range of a rank over the current ranking and the replicates the range it has over
    the current ranking and as many resamples.

    Not ``corrected`` (FSDS, OMVFS: spectral and factorisation methods, whose scores are not
    smooth in the rows where singular values are close): the subsamples' own rankings, ``ŝ_g``.
    The index is then that of ``n / K`` rows, lower than the whole stream's when the ranking
    still settles with more rows (by 0.04 to 0.12 for FSDS on digits and COIL20), and right
    where the correction would be wrong: on a stream of noise, whose singular directions no
    two samples share, the scaled subsamples stay near the whole stream's one noisy ranking and
    looked stable (index 0.45 for FSDS, where resamples agree on nothing).
    """
    norms = np.linalg.norm(resampled, axis=1)
    total = float(np.linalg.norm(scores))
    if total == 0.0 or np.any(norms == 0.0):
        return None
    parts = resampled / norms[:, None]
    if not corrected:
        return np.asarray(parts)
    unit = scores / total
    k = parts.shape[0]
    scale = BAND_SCALE.get(k, 1.0 / math.sqrt(k)) if for_bands else 1.0 / math.sqrt(k)
    return np.asarray(unit + (parts - parts.mean(axis=0)) * scale)


def top_sets(replicates: np.ndarray, h: int) -> list[np.ndarray]:
    """The top ``h`` of every replicate, ties broken by the lower index (as every ranking)."""
    return [order_by_score(row, h) for row in replicates]


def ranks_of(replicates: np.ndarray, features: np.ndarray) -> np.ndarray:
    """The rank (1 = best, ties by the lower index, as every ranking) of each of ``features`` in
    every replicate: ``K x len(features)``. One sort per replicate."""
    features = np.asarray(features, dtype=np.int64)
    out = np.empty((replicates.shape[0], features.size), dtype=np.int64)
    for g, row in enumerate(replicates):
        ascending = np.sort(row)
        values = row[features]
        above = row.size - np.searchsorted(ascending, values, side="right")
        ties = np.searchsorted(ascending, values, side="right") - np.searchsorted(
            ascending, values, side="left"
        )
        ranks = above + 1
        for at in np.flatnonzero(ties > 1):  # rare: count the tied features of lower index
            f = features[at]
            ranks[at] += int(np.count_nonzero(row[:f] == row[f]))
        out[g] = ranks
    return out


def bands(current: np.ndarray, replicate_ranks: np.ndarray) -> np.ndarray:
    """``n x 2``: the lowest and highest of each feature's current rank (``current``, ``n``) and
    its ranks in the replicates (``K x n``)."""
    every = np.vstack([np.asarray(current, dtype=np.int64)[None, :], replicate_ranks])
    return np.stack([every.min(axis=0), every.max(axis=0)], axis=1)


@dataclass(frozen=True)
class ResampledRanking:
    """What the replicates say of one ranking's top ``t`` (``t`` = the features a version
    publishes): each replicate's own top ``t`` (``K x t``), and the rank each of the ranking's
    top ``t`` takes in each replicate scaled for the bands (``K x t``). Enough to answer any
    ``h <= t``."""

    tops: np.ndarray
    ranks: np.ndarray
    #: Features of the ranking (``d``).
    d: int

    @property
    def depth(self) -> int:
        return int(self.tops.shape[1])

    def answers(self, h: int) -> bool:
        """Whether the top ``h`` can be assessed from what is kept (``h <= t``, or all)."""
        return h <= self.depth or self.depth >= self.d

    def assess(self, h: int) -> Assessment | None:
        """The stability of the top ``h`` and the bands of its features (``answers(h)``);
        None when ``h`` is every feature (all selections are then the same)."""
        h = min(h, self.d)
        if not 0 < h < self.d:
            return None
        index = stability_index([top[:h] for top in self.tops], self.d)
        return Assessment(index, bands(np.arange(1, h + 1), self.ranks[:, :h]))


def resampled_ranking(
    scores: np.ndarray, resampled: np.ndarray, t: int, corrected: bool = True
) -> ResampledRanking | None:
    """``ResampledRanking`` of the top ``t`` of ``scores``; None while the subsamples have no
    scores (``replicate_scores``)."""
    replicates = replicate_scores(scores, resampled, corrected)
    spread = replicate_scores(scores, resampled, corrected, for_bands=True)
    if replicates is None or spread is None:
        return None
    t = min(t, scores.size)
    current = order_by_score(scores, t)
    tops = np.stack([order_by_score(row, t) for row in replicates])
    return ResampledRanking(tops, ranks_of(spread, current), scores.size)


@dataclass(frozen=True)
class Assessment:
    """The stability of a top ``h``, and the band of each of its features (``h x 2``, in the
    ranking's order)."""

    stability: Stability
    bands: np.ndarray


def assess(
    scores: np.ndarray, resampled: np.ndarray, h: int, corrected: bool = True
) -> Assessment | None:
    """The stability of the top ``h`` of ``scores`` and the bands of its features."""
    ranking = resampled_ranking(scores, resampled, h, corrected)
    return None if ranking is None else ranking.assess(h)


def assess_views(
    scores: np.ndarray,
    resampled: np.ndarray,
    views: Sequence[tuple[str, int]],
    h: int,
    corrected: bool = True,
) -> tuple[Stability, list[np.ndarray]] | None:
    """A multi-view ranking (the views side by side, the top ``h`` of each): the stability of
    the union of the views' tops (each selection holds ``h`` of every view, among all the
    features), and each view's bands (ranks within the view)."""
    replicates = replicate_scores(scores, resampled, corrected)
    spread = replicate_scores(scores, resampled, corrected, for_bands=True)
    if replicates is None or spread is None:
        return None
    selections: list[list[int]] = [[] for _ in range(replicates.shape[0])]
    view_bands = []
    start = 0
    for _view, dim in views:
        part = slice(start, start + dim)
        take = min(h, dim)
        current = order_by_score(scores[part], take)
        for g, row in enumerate(replicates):
            selections[g].extend((order_by_score(row[part], take) + start).tolist())
        view_bands.append(bands(np.arange(1, take + 1), ranks_of(spread[:, part], current)))
        start += dim
    if not 0 < len(selections[0]) < scores.size:
        return None
    return stability_index(selections, scores.size), view_bands
