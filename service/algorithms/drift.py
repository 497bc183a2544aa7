"""How far a ranking moved, and when that is worth an alert: pure rules, shared by the service
(``GET .../drift``, the monitor that raises alerts) and the evaluation (``evaluation/drift``).

* ``compare``: two versions' top h (per view for multi-view selectors) by rank-biased overlap
  (``RBO_ext``, Webber, Moffat & Zobel 2010, persistence 0.9) and top-h Jaccard, with the
  features that entered and left (``service.algorithms.agreement``). The **drift** is
  ``1 - RBO_ext``: 0 for the same ranking, 1 for disjoint tops; a multi-view selector's is the
  mean over its views.
* ``is_stable``: whether a version's ranking is settled enough to be the baseline: the
  stability index (``service.algorithms.stability``) of its top h is at least
  ``SIFT_BASELINE_STABILITY``, or, for a selector without one (feature-column methods,
  ``resamples: 0``), its top h agrees with the previous version's (``RBO_ext >=
  BASELINE_AGREEMENT``). The h is the smallest of 10 and the h of the selector's alerts: a
  stream where only five features carry signal never has a stable top 10, and an alert on its
  top 5 must still get a baseline.
* ``judged_h``: the h fits the selector. A top of every feature has no stability (every
  resample selects all of them: the index is undefined), and its top ``d - 1`` already orders
  all ``d`` features, so on a selector whose rankings hold ``d`` features (a multi-view
  selector's widest view) every rule looks at most ``d - 1`` deep: ``stable_h`` is 10 on a
  selector of more than 10 features, ``d - 1`` on a smaller one.
* ``is_over``: whether a version crosses an alert: drift since the baseline at or over the
  threshold, and (if the alert asks) a top h at least that stable: a ranking that moved *and*
  settled somewhere else, rather than one that is merely noisy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from service.algorithms.agreement import entered_and_left, jaccard, rank_biased_overlap

#: The depth both rules of ``is_stable`` look at (the history's default h), on a selector of
#: more than ``STABLE_H`` features (``stable_h``).
STABLE_H = 10
#: Agreement of two consecutive tops that counts as settled for a selector without a
#: stability estimate.
BASELINE_AGREEMENT = 0.9


class Ranked(Protocol):
    """One ranking of a version (``service.store.records.RankedList``): ``view`` (multi-view
    selectors) or None, and the features' indices (within the view), best first."""

    @property
    def view(self) -> str | None: ...

    @property
    def indices(self) -> Sequence[int]: ...


@dataclass(frozen=True)
class Comparison:
    """How a top h moved from ``before`` to ``after``."""

    h: int
    rbo: float
    jaccard: float
    #: ``(view, index)`` of the features in the later top h but not the earlier, best first ...
    entered: list[tuple[str | None, int]]
    #: ... and of those that left it, in the earlier top's order.
    left: list[tuple[str | None, int]]

    @property
    def drift(self) -> float:
        return 1.0 - self.rbo


def compare(before: Sequence[Ranked], after: Sequence[Ranked], h: int) -> Comparison:
    """The top ``h`` of ``after`` against that of ``before``, view by view (the views both
    have; a single ranking has the one view None)."""
    earlier = {r.view: list(r.indices[:h]) for r in before}
    rbos, jaccards = [], []
    entered: list[tuple[str | None, int]] = []
    left: list[tuple[str | None, int]] = []
    for ranking in after:
        if ranking.view not in earlier:
            continue
        old, new = earlier[ranking.view], list(ranking.indices[:h])
        rbos.append(rank_biased_overlap(old, new))
        jaccards.append(jaccard(old, new))
        came, went = entered_and_left(old, new)
        entered.extend((ranking.view, f) for f in came)
        left.extend((ranking.view, f) for f in went)
    if not rbos:
        return Comparison(h, 0.0, 0.0, [], [])
    return Comparison(h, sum(rbos) / len(rbos), sum(jaccards) / len(jaccards), entered, left)


def judged_h(h: int, features: int | None) -> int:
    """``h``, at most ``features - 1`` (module docstring): the depth a top h is judged at on a
    selector whose rankings hold ``features`` features (None: counted as they arrive, no
    bound). At least 1."""
    if features is None:
        return h
    return max(1, min(h, features - 1))


def stable_h(features: int | None) -> int:
    """The h of the stability every version records (the history's): ``STABLE_H``, fitted to
    the selector (``judged_h``)."""
    return judged_h(STABLE_H, features)


def baseline_h(alert_hs: Sequence[int], features: int | None = None) -> int:
    """The h whose stability makes a version the baseline (module docstring), fitted to a
    selector whose rankings hold ``features`` features."""
    return judged_h(min([STABLE_H, *alert_hs]), features)


def is_stable(
    stability: float | None,
    previous: Sequence[Ranked] | None,
    current: Sequence[Ranked],
    threshold: float,
    h: int = STABLE_H,
) -> bool:
    """Whether a version's ranking may be the automatic baseline (module docstring):
    ``stability`` is the index of its top ``h`` (None without an estimate), ``previous`` the
    previous version's rankings (None: unknown)."""
    if stability is not None:
        return stability >= threshold
    if previous is None:
        return False
    return compare(previous, current, h).rbo >= BASELINE_AGREEMENT


def is_over(
    comparison: Comparison,
    stability: float | None,
    threshold: float,
    min_stability: float | None,
) -> bool:
    """Whether a version crosses an alert of ``threshold`` (and ``min_stability``)."""
    if comparison.drift < threshold:
        return False
    return min_stability is None or (stability is not None and stability >= min_stability)
