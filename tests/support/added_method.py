"""A method of the test suite's own, registered for a while: adding a method is its module, its
registry line and its docs page, and nothing else in the service or the tests.

``MeanAbs`` ranks each feature by the running mean of ``|x|^power`` over the rows seen (a
scale, not a spread: the baseline of sparse-coding feature selection). It is written as a new
method would be, against ``MethodBase`` and its typed ``MethodParams``, with its examples;
``registered`` puts it in the registry (``service.algorithms.METHODS``) and takes it out again,
as its registry line would, so that the conformance checks and the service (created while it
is registered) run it as any other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import scipy.sparse as sp
from pydantic import Field

from service.algorithms import METHODS
from service.algorithms.base import ChunkKind, Matrix, MethodBase, State
from service.algorithms.examples import Example
from service.algorithms.params import MethodParams

NAME = "mean_abs"


class MeanAbsParams(MethodParams):
    """The mean of |x|^power of every feature over the rows seen."""

    method = NAME
    power: float = Field(1.0, gt=0, le=2, description="The power of |x| averaged.")


class MeanAbs(MethodBase[MeanAbsParams]):
    """Every feature's mean of ``|x|^power``: sums of powers and a row count, so exact for any
    chunking (up to rounding) and never written into."""

    name = NAME
    paper = "none: the test suite's own method (the mean absolute value of every feature)"
    chunk_kind: ChunkKind = "rows"
    params_model = MeanAbsParams
    score_field = "mean_abs"
    examples: tuple[Example, ...] = (
        Example({"n_features": 4}, items=5),
        Example({"n_features": 4}, {"power": 2.0}),
    )

    def initial_state(self, params: MeanAbsParams) -> State:
        return {
            "rows_seen": 0,
            "power_sums": np.zeros(params.size),
            "mean_abs": np.zeros(params.size),
        }

    def state_sizes(self, params: MeanAbsParams) -> dict[str, int]:
        return {"power_sums": 8 * params.size, "mean_abs": 8 * params.size}

    def update(self, state: State, params: MeanAbsParams, chunk: Matrix) -> State:
        if sp.issparse(chunk):
            powers = np.asarray(abs(sp.csr_matrix(chunk)).power(params.power).sum(axis=0))
        else:
            powers = (np.abs(np.asarray(chunk, dtype=np.float64)) ** params.power).sum(axis=0)
        rows = int(np.asarray(state["rows_seen"])) + int(chunk.shape[0])
        sums = np.asarray(state["power_sums"], dtype=np.float64) + powers.reshape(-1)
        return {"rows_seen": rows, "power_sums": sums, "mean_abs": sums / rows}

    def weights(self, state: State, params: MeanAbsParams) -> np.ndarray:
        return np.array(state["mean_abs"], dtype=np.float64)


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
