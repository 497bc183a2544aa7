"""Methods whose state is statistics that merge exactly (sums, counts, moments), and the scores
they give: such a method says its maths (``StatisticsMethod``) and its state, merges and
resamples are built from it (``service.algorithms.resampling``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from service.algorithms.base import State
from service.algorithms.resampling import RP, ResampledMergeable
from service.algorithms.subsamples import take_rows, whole_of

__all__ = ["StatisticsMethod"]


class StatisticsMethod(ResampledMergeable[RP]):
    """A row method whose state is statistics that merge exactly, and the scores they give:
    what such a method says is its maths, and its resamples are built from it.

    It says (as River's ``stats.Var`` does with ``update``, ``get``, ``+`` and ``-``):

    * ``statistics_fields``: the array fields of its statistics (with its scalars, what a merge
      and a subsample read);
    * ``empty`` and ``empty_sizes``: the statistics of no row, and the bytes of their arrays;
    * ``fold``: the statistics with a chunk's rows folded in;
    * ``scores``: every feature's score from the statistics (the state keeps them as
      ``score_field``, the ranking);
    * ``derive`` and ``derived_fields``: what else the state keeps of the statistics and their
      scores (a test's p-values);
    * ``plus``: the statistics of both operands' rows (a merge); ``minus``, where it is exact:
      the statistics of the rows of ``whole`` that ``part`` has not seen;
    * ``rows_of`` and ``check``: the rows statistics have seen, and their rules.

    Its state is its statistics and their scores; each of its ``K`` subsamples is statistics of
    the rows dealt to it (``K - 1`` stored and the last the whole stream's ``minus`` theirs;
    all ``K`` stored for a method without ``minus``). A merge is ``plus`` on the whole stream and
    on each stored subsample. ``fold_dealt`` may compute the whole stream's and the stored
    subsamples' statistics in one pass over a chunk; by default it folds each one's rows.
    """

    #: The array fields of the statistics.
    statistics_fields: ClassVar[tuple[str, ...]]
    #: The state field of the scores (the ranking).
    score_field: str
    #: ``Mergeable``: the statistics (set from ``statistics_fields``).
    summary_fields: tuple[str, ...]
    #: Fields besides the scores that the state derives from the statistics (``derive``:
    #: p-values), one float per feature each.
    derived_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = cls.__dict__.get("statistics_fields")
        if fields is not None:
            cls.subsample_fields = fields
            cls.summary_fields = fields
            cls.derives_last = cls.minus is not StatisticsMethod.minus
            cls.derived_from = fields if cls.derives_last else ()

    # -- what the method says --------------------------------------------------------------

    def empty(self, params: RP) -> State:
        """The statistics of no row."""
        raise NotImplementedError

    def empty_sizes(self, params: RP) -> dict[str, int]:
        """Bytes of every array ``empty`` holds (none for arrays that grow from empty)."""
        raise NotImplementedError

    def fold(self, statistics: State, params: RP, chunk: Any) -> State:
        """The statistics with ``chunk``'s rows folded in; new statistics."""
        raise NotImplementedError

    def scores(self, statistics: State, params: RP) -> np.ndarray:
        """Every feature's score (``params.size`` of them) from the statistics."""
        raise NotImplementedError

    def plus(self, statistics: State, params: RP, other: State) -> State:
        """The statistics of both operands' rows."""
        raise NotImplementedError

    def minus(self, whole: State, params: RP, part: State) -> State:
        """The statistics of the rows of ``whole`` that ``part`` has not seen (``Inconsistent``
        if ``part`` is not in it): ``plus(part, minus(whole, part)) == whole`` up to rounding."""
        raise NotImplementedError

    def rows_of(self, statistics: State) -> int:
        """The rows the statistics have seen."""
        raise NotImplementedError

    def derive(self, statistics: State, scores: np.ndarray, params: RP) -> State:
        """The ``derived_fields`` of the statistics and their scores; none by default."""
        return {}

    def check(self, state: State, params: RP) -> None:
        """``Inconsistent`` unless the statistics (and their scores, where ``state`` holds
        them) obey the method's rules; none by default."""

    def fold_dealt(
        self, statistics: list[State], params: RP, chunk: Any, dealt: np.ndarray
    ) -> list[State]:
        """``statistics[0]`` with every row of ``chunk`` folded in, and ``statistics[1 + g]``
        with the rows ``dealt`` to subsample ``g``."""
        out = [self.fold(statistics[0], params, chunk)]
        for g, subsample in enumerate(statistics[1:]):
            rows = np.flatnonzero(dealt == g)
            out.append(
                self.fold(subsample, params, take_rows(chunk, rows)) if rows.size else subsample
            )
        return out

    # -- the state: the statistics and their scores ----------------------------------------

    def statistics_of(self, state: State) -> State:
        """The whole stream's statistics of ``state`` (without its scores and resamples)."""
        derived = {self.score_field, *self.derived_fields}
        return {f: v for f, v in whole_of(state).items() if f not in derived}

    def scored(self, statistics: State, params: RP) -> State:
        """The whole stream's state of these statistics: them, their scores and what derives
        from both."""
        scores = self.scores(statistics, params)
        return {
            **statistics,
            self.score_field: scores,
            **self.derive(statistics, scores, params),
        }

    def weights(self, state: State, params: RP) -> np.ndarray:
        return np.array(state[self.score_field], dtype=np.float64)

    def core_initial_state(self, params: RP) -> State:
        return self.scored(self.empty(params), params)

    def core_state_sizes(self, params: RP) -> dict[str, int]:
        derived = dict.fromkeys((self.score_field, *self.derived_fields), 8 * params.size)
        return {**self.empty_sizes(params), **derived}

    def core_update(self, state: State, params: RP, chunk: Any) -> State:
        return self.scored(self.fold(self.statistics_of(state), params, chunk), params)

    def core_merge(self, state: State, params: RP, summary: State) -> State:
        return self.scored(self.plus(self.statistics_of(state), params, summary), params)

    def core_check_consistency(self, state: State, params: RP, segments: Mapping[str, Any]) -> None:
        self.check(state, params)

    def update_with_subsamples(
        self, state: State, subsamples: list[State], params: RP, chunk: Any, dealt: np.ndarray
    ) -> tuple[State, list[State]]:
        whole, *parts = self.fold_dealt(
            [self.statistics_of(state), *subsamples], params, chunk, dealt
        )
        return self.scored(whole, params), parts

    def summary_samples(self, summary: State) -> int:
        return self.rows_of(summary)

    def merge_refusal(self, params: RP) -> str | None:
        return None  # statistics merge for every setting

    # -- its subsamples: statistics of their rows ------------------------------------------

    def subsample_initial_state(self, params: RP) -> State:
        return self.empty(params)

    def subsample_state_sizes(self, params: RP) -> dict[str, int]:
        return self.empty_sizes(params)

    def subsample_scores(self, subsample: State, params: RP) -> np.ndarray:
        return self.scores(subsample, params)

    def subsample_rows(self, subsample: State) -> int:
        return self.rows_of(subsample)

    def subsample_check(self, subsample: State, params: RP) -> None:
        self.check(subsample, params)

    def subsample_merge(self, subsample: State, params: RP, other: State) -> State:
        return self.plus(subsample, params, other)

    def subsample_of_whole(self, whole: State, params: RP) -> State:
        return self.statistics_of(whole)

    def subsample_unmerge(self, whole: State, params: RP, part: State) -> State:
        return self.minus(whole, params, part)
