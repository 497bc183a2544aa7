"""How much two rankings of features agree: top-h Jaccard and rank-biased overlap.

Shared by every answer that compares rankings (a selector's drift between versions, the
selectors of one stream side by side). Pure functions of the ranked feature indices (best
first), no Redis and no HTTP.

Rank-biased overlap (Webber, Moffat & Zobel, "A Similarity Measure for Indefinite Rankings",
ACM TOIS 28(4), 2010) weighs the agreement at each depth ``d`` (the overlap of the two top-d
prefixes divided by ``d``, eq. 2-3) by ``p**(d-1)``, so that the top of a ranking counts most:
with persistence ``p`` the first ``1 / (1 - p)`` ranks hold most of the weight (``p = 0.9``:
about the first 10; 86% of the weight lies in the first 10 ranks, sec. 4.2). Sift compares
prefixes of known length only (the top ``h`` of each side) and reports the *extrapolated*
value, ``RBO_ext`` (eq. 32 for lists of uneven length, eq. 30 when they are even), which
assumes the agreement seen at the deepest depth holds below it: 1 for identical lists, 0 for
disjoint ones, symmetric, and a point estimate between the minimum and maximum of eq. 11-12.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Webber et al.'s example persistence: the first 10 ranks carry 86% of the weight.
DEFAULT_PERSISTENCE = 0.9


def jaccard(first: Sequence[int], second: Sequence[int]) -> float:
    """|A ∩ B| / |A ∪ B| of the two sets of features; two empty sets agree fully (1.0)."""
    a, b = set(first), set(second)
    union = a | b
    return 1.0 if not union else len(a & b) / len(union)


def prefix_overlaps(first: Sequence[int], second: Sequence[int], depth: int) -> np.ndarray:
    """``X_d`` for ``d = 1..depth``: how many features the top-d prefixes share (eq. 1). A list
    shorter than ``d`` contributes all it has (its prefix stops growing)."""
    seen_first: set[int] = set()
    seen_second: set[int] = set()
    shared = 0
    overlaps = np.zeros(depth, dtype=np.int64)
    for d in range(depth):
        if d < len(first):
            item = first[d]
            seen_first.add(item)
            shared += item in seen_second
        if d < len(second):
            item = second[d]
            seen_second.add(item)
            # A feature both lists hold at this depth was not yet in seen_second when the first
            # list's item was checked: it is counted here, once.
            shared += item in seen_first
        overlaps[d] = shared
    return overlaps


def rank_biased_overlap(
    first: Sequence[int], second: Sequence[int], p: float = DEFAULT_PERSISTENCE
) -> float:
    """``RBO_ext`` of two rankings (best first, no repeats), Webber et al. 2010, eq. 32.

    With ``S`` the shorter list (length ``s``) and ``L`` the longer (``l``), ``X_d`` the overlap
    at depth ``d`` and ``A_d = X_d / d``:

        RBO_ext = (1-p)/p * (sum_{d=1..l} X_d/d p^d + sum_{d=s+1..l} X_s (d-s)/(s d) p^d)
                  + ((X_l - X_s)/l + X_s/s) p^l

    which for ``s = l = k`` is eq. 30: ``(1-p)/p * sum_{d=1..k} A_d p^d + A_k p^k``. Two empty
    lists agree fully (1.0); an empty list against a non-empty one not at all (0.0).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1); got {p}")
    short, long = (first, second) if len(first) <= len(second) else (second, first)
    s, l = len(short), len(long)
    if l == 0:
        return 1.0
    if s == 0:
        return 0.0
    overlaps = prefix_overlaps(short, long, l).astype(np.float64)
    depths = np.arange(1, l + 1, dtype=np.float64)
    powers = p**depths
    total = float(np.sum(overlaps / depths * powers))
    x_s = overlaps[s - 1]
    tail = depths[s:]
    total += float(np.sum(x_s * (tail - s) / (s * tail) * powers[s:]))
    value = (1.0 - p) / p * total + ((overlaps[l - 1] - x_s) / l + x_s / s) * p**l
    # Rounding may leave identical lists at 1 - 1e-16 or above 1; the measure is in [0, 1].
    return float(min(1.0, max(0.0, value)))


def entered_and_left(before: Sequence[int], after: Sequence[int]) -> tuple[list[int], list[int]]:
    """The features in ``after`` but not ``before`` (in ``after``'s order) and those in
    ``before`` but not ``after`` (in ``before``'s order)."""
    had, has = set(before), set(after)
    return [f for f in after if f not in had], [f for f in before if f not in has]
