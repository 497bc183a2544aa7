"""A method of the test suite's own, registered for a while: adding a method is its module, its
registry line and its docs page, and nothing else in the service or the tests.

``MeanAbs`` ranks each feature by the running mean of ``|x|^power`` over the rows seen (a
scale, not a spread: the baseline of sparse-coding feature selection). It is written as a new
method would be: its maths only, against ``StatisticsMethod`` and its typed params, with its
examples. Its statistics (a row count and every feature's sum of ``|x|^power``) add and
subtract exactly, so it merges (partitions too) and keeps resamples (its stability) with no
line of its own for them. ``registered`` puts it in the registry (``service.algorithms.METHODS``)
and takes it out again, as its registry line would, so that the conformance checks and the
service (created while it is registered) run it as any other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms import METHODS
from service.algorithms.base import ChunkKind, Matrix, State
from service.algorithms.examples import Example
from service.algorithms.statistics import StatisticsMethod
from service.algorithms.subsamples import ResampledParams

NAME = "mean_abs"


class MeanAbsParams(ResampledParams):
    """The mean of |x|^power of every feature over the rows seen."""

    method = NAME
    power: float = Field(1.0, gt=0, le=2, description="The power of |x| averaged.")


class MeanAbs(StatisticsMethod[MeanAbsParams]):
    """Every feature's mean of ``|x|^power``: sums of powers and a row count, so exact for any
    chunking (up to rounding) and never written into."""

    name = NAME
    paper = "none: the test suite's own method (the mean absolute value of every feature)"
    chunk_kind: ChunkKind = "rows"
    params_model = MeanAbsParams
    score_field = "mean_abs"
    statistics_fields: ClassVar[tuple[str, ...]] = ("power_sums",)
    stability_estimate = "the mean of |x|^power of K interleaved subsamples of the rows"
    examples: tuple[Example, ...] = (
        Example({"n_features": 4}, items=5),
        Example({"n_features": 4}, {"power": 2.0}),
    )

    def empty(self, params: MeanAbsParams) -> State:
        return {"rows_seen": 0, "power_sums": np.zeros(params.size)}

    def empty_sizes(self, params: MeanAbsParams) -> dict[str, int]:
        return {"power_sums": 8 * params.size}

    def fold(self, statistics: State, params: MeanAbsParams, chunk: Matrix) -> State:
        if sp.issparse(chunk):
            powers = np.asarray(abs(sp.csr_matrix(chunk)).power(params.power).sum(axis=0))
        else:
            powers = (np.abs(np.asarray(chunk, dtype=np.float64)) ** params.power).sum(axis=0)
        return self.plus(statistics, params, {"rows_seen": chunk.shape[0], "power_sums": powers})

    def scores(self, statistics: State, params: MeanAbsParams) -> np.ndarray:
        rows = self.rows_of(statistics)
        return np.asarray(statistics["power_sums"], dtype=np.float64) / max(rows, 1)

    def plus(self, statistics: State, params: MeanAbsParams, other: State) -> State:
        return {
            "rows_seen": self.rows_of(statistics) + self.rows_of(other),
            "power_sums": np.asarray(statistics["power_sums"], dtype=np.float64)
            + np.asarray(other["power_sums"], dtype=np.float64).reshape(-1),
        }

    def minus(self, whole: State, params: MeanAbsParams, part: State) -> State:
        return {
            "rows_seen": self.rows_of(whole) - self.rows_of(part),
            "power_sums": np.maximum(
                np.asarray(whole["power_sums"]) - np.asarray(part["power_sums"]), 0.0
            ),
        }

    def rows_of(self, statistics: State) -> int:
        return int(np.asarray(statistics["rows_seen"]))


@contextmanager
def registered(method: Any = None) -> Iterator[MeanAbs]:
    """``MeanAbs`` (or ``method``) in the registry for the block's duration, as a registry
    line would put it there."""
    added = method if method is not None else MeanAbs()
    assert added.name not in METHODS, f"{added.name} is registered already"
    METHODS[added.name] = added
    try:
        yield added
    finally:
        del METHODS[added.name]
