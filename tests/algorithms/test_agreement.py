"""Top-h Jaccard and rank-biased overlap against their definitions (Webber et al. 2010)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.algorithms.agreement import (
    entered_and_left,
    jaccard,
    prefix_overlaps,
    rank_biased_overlap,
)

rankings = st.lists(st.integers(0, 30), max_size=12, unique=True)


def overlap_by_definition(first: list[int], second: list[int], d: int) -> int:
    return len(set(first[:d]) & set(second[:d]))


def rbo_ext_by_definition(first: list[int], second: list[int], p: float) -> float:
    """Eq. 32 written term by term, with X_d from the sets themselves."""
    short, long = sorted((first, second), key=len)
    s, l = len(short), len(long)
    x = {d: overlap_by_definition(short, long, d) for d in range(1, l + 1)}
    total = sum(x[d] / d * p**d for d in range(1, l + 1))
    total += sum(x[s] * (d - s) / (s * d) * p**d for d in range(s + 1, l + 1))
    return (1 - p) / p * total + ((x[l] - x[s]) / l + x[s] / s) * p**l


@given(rankings, rankings)
def test_prefix_overlaps_are_the_overlaps_of_the_prefixes(first, second) -> None:
    depth = max(len(first), len(second))
    expected = [overlap_by_definition(first, second, d) for d in range(1, depth + 1)]
    assert prefix_overlaps(first, second, depth).tolist() == expected


@given(rankings.filter(bool), rankings.filter(bool), st.sampled_from([0.5, 0.9, 0.98]))
def test_rbo_is_eq_32_symmetric_and_within_0_and_1(first, second, p) -> None:
    value = rank_biased_overlap(first, second, p)
    assert value == pytest.approx(min(1.0, rbo_ext_by_definition(first, second, p)), abs=1e-12)
    assert value == pytest.approx(rank_biased_overlap(second, first, p), abs=1e-12)
    assert 0.0 <= value <= 1.0


@given(rankings.filter(bool), st.sampled_from([0.5, 0.9]))
def test_identical_rankings_agree_fully_and_disjoint_ones_not_at_all(ranking, p) -> None:
    assert rank_biased_overlap(ranking, ranking, p) == pytest.approx(1.0)
    other = [f + 100 for f in ranking]
    assert rank_biased_overlap(ranking, other, p) == 0.0
    assert jaccard(ranking, ranking) == 1.0 and jaccard(ranking, other) == 0.0


def test_even_lists_follow_eq_30() -> None:
    """Two top-3 lists sharing one feature at depth 2 and another at depth 3."""
    first, second, p = [1, 2, 3], [2, 4, 1], 0.9
    a = [0 / 1, 1 / 2, 2 / 3]  # A_d = X_d / d
    expected = (1 - p) / p * sum(a[d] * p ** (d + 1) for d in range(3)) + a[2] * p**3
    assert rank_biased_overlap(first, second, p) == pytest.approx(expected)


def test_a_swap_at_the_top_costs_more_than_one_at_the_bottom() -> None:
    ranking = list(range(10))
    top_swapped = [1, 0, *range(2, 10)]
    bottom_swapped = [*range(8), 9, 8]
    assert rank_biased_overlap(ranking, top_swapped) < rank_biased_overlap(ranking, bottom_swapped)
    assert jaccard(ranking, top_swapped) == jaccard(ranking, bottom_swapped) == 1.0


def test_empty_lists_and_bad_persistence() -> None:
    assert rank_biased_overlap([], []) == 1.0 and jaccard([], []) == 1.0
    assert rank_biased_overlap([], [1, 2]) == 0.0
    for p in (0.0, 1.0, -0.5, float(np.nan)):
        with pytest.raises(ValueError, match="p must be in"):
            rank_biased_overlap([1], [1], p)


def test_entered_and_left_keep_rank_order() -> None:
    assert entered_and_left([5, 1, 2, 7], [2, 9, 5, 3]) == ([9, 3], [1, 7])
