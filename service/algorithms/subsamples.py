"""Interleaved subsamples of a row method's stream, as its state keeps them: how many, how
rows are dealt to them, what their fields are called, and the parameter that asks for them
(``ResampledParams``). ``service.algorithms.resampling`` keeps them beside a method's state.

Rows are dealt by their position in the stream: every block of ``K`` consecutive rows (rows
``bK .. bK + K - 1``) goes one row to each subsample, in an order drawn from a hash of the
block's number (``groups_of_rows``). So the subsamples are balanced (their sizes differ by at
most one row), disjoint, together the whole stream, blind to a period in the stream (a stream
alternating two classes does not put one class in each half), and where a row goes depends on
its position alone: a replay, a recomputation, any chunking or coalescing of the same rows
deals them alike, and exactly-once holds for the subsamples as it does for the state.

The stored subsamples are fields of the state, named ``resample<g>:<field>`` (``group_field``),
with ``resample_counts`` (``K`` rows counts, a derived subsample's too) and, for methods that
keep their subsamples' scores, ``resample_scores`` and the rows they were computed at.

Selectors created before subsamples existed have stored params without ``resamples``: they
resolve to 0 and their states (and archives) have no subsample fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import numpy as np
import scipy.sparse as sp
from pydantic import PrivateAttr, ValidationInfo, model_validator

from service.algorithms.base import Matrix, State
from service.algorithms.labels import LabelledRows
from service.algorithms.params import MethodParams, computed
from service.algorithms.targets import TargetRows
from service.errors import InvalidParams

__all__ = [
    "COUNTS_FIELD",
    "DEFAULT_RESAMPLES",
    "MAX_RESAMPLES",
    "SCORES_FIELD",
    "SCORES_REFRESH_GROWTH",
    "SCORES_ROWS_FIELD",
    "ResampledParams",
    "SubsampleRows",
    "group_field",
    "group_of",
    "groups_in",
    "groups_of_rows",
    "kept_scores",
    "of_resamples",
    "prefixed",
    "resample_count",
    "rows_in",
    "scores_due",
    "split_field",
    "take_rows",
    "whole_of",
]

#: Subsamples a new selector keeps, and the most it may keep. Four: the index then averages
#: six pairs of rankings instead of one, and its interval (``stability.disagreement_interval``)
#: is about a third narrower than with two (EVALUATION.md, "Stability intervals at the
#: defaults"); state and update time grow to about 3 and 1.6 to 2.2 times the method's own.
#: Selectors created with another default keep theirs (their stored params name it).
DEFAULT_RESAMPLES = 4
MAX_RESAMPLES = 8
#: Rows each subsample has seen (int64, ``K``).
COUNTS_FIELD = "resample_counts"
#: Methods whose subsamples' scores cost about as much as an update (``caches_resample_scores``)
#: keep the last ones in the state (``K x d``, ``kept_scores``) with the rows seen when they
#: were computed ...
SCORES_FIELD = "resample_scores"
SCORES_ROWS_FIELD = "resample_scores_rows"
#: ... and compute them again once the rows seen grew by this share since: deterministic in the
#: rows (a replay computes them at the same versions), and at most that share behind.
SCORES_REFRESH_GROWTH = 0.1
_PREFIX = "resample"
#: Seed of the hash that deals each block of rows (fixed: where a row goes is part of the
#: state's definition, so it never changes).
_DEAL_SEED = np.uint64(0x5EED_51F7_0000_0024)


def group_field(group: int, field: str) -> str:
    """The name of subsample ``group``'s ``field`` in the state."""
    return f"{_PREFIX}{group}:{field}"


def split_field(name: str) -> tuple[int, str] | None:
    """``(group, field)`` of a subsample's field, None for any other field."""
    if not name.startswith(_PREFIX):
        return None
    head, colon, field = name.partition(":")
    digits = head[len(_PREFIX) :]
    if not colon or not digits.isdigit() or not field:
        return None
    return int(digits), field


def resample_count(params: MethodParams) -> int:
    """``K`` of resolved params (0: none, as for a method without resamples and for selectors
    created before resamples existed)."""
    value = getattr(params, "resamples", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def groups_in(state: State) -> int:
    """How many subsamples ``state`` keeps (0: none)."""
    counts = state.get(COUNTS_FIELD)
    return int(np.asarray(counts).shape[0]) if isinstance(counts, np.ndarray) else 0


_RESAMPLE_FIELDS = frozenset({COUNTS_FIELD, SCORES_FIELD, SCORES_ROWS_FIELD})


def of_resamples(field: str) -> bool:
    """Whether ``field`` belongs to the resamples (a subsample's, their counts or scores),
    not to the whole stream's state."""
    return field in _RESAMPLE_FIELDS or split_field(field) is not None


def whole_of(state: State) -> State:
    """The whole stream's fields of ``state`` (without the resamples')."""
    return {f: v for f, v in state.items() if not of_resamples(f)}


def kept_scores(scores: np.ndarray) -> np.ndarray:
    """Subsample scores as the state keeps them: each subsample's divided by its largest
    magnitude, in single precision. The K scores of each feature then take the room of one
    vector of the method's own (the state stays within twice the method's), and within [-1, 1]
    single precision neither overflows nor flushes the top to zero; the stability reads only
    their order (``stability.replicate_scores`` scales every score vector to unit length)."""
    peaks = np.abs(scores).max(axis=1, keepdims=True)
    peaks[peaks == 0] = 1.0
    return np.asarray(scores / peaks, dtype=np.float32)


def scores_due(computed_at: int, rows: int) -> bool:
    """Whether subsample scores computed at ``computed_at`` rows are due again at ``rows``
    (``SCORES_REFRESH_GROWTH``; never computed: at once)."""
    return computed_at <= 0 or rows - computed_at >= SCORES_REFRESH_GROWTH * computed_at


def group_of(state: State, group: int) -> State:
    """Subsample ``group``'s fields of ``state``, under their own names."""
    out: State = {}
    for name, value in state.items():
        parts = split_field(name)
        if parts is not None and parts[0] == group:
            out[parts[1]] = value
    return out


V = TypeVar("V")


def prefixed(fields: Mapping[str, V], group: int) -> dict[str, V]:
    """``fields`` (a state, its sizes or its growing axes) under the names of ``group``'s."""
    return {group_field(group, f): v for f, v in fields.items()}


@dataclass(frozen=True)
class SubsampleRows:
    """The rows of a chunk dealt to one subsample: their positions (ascending, never none) among
    the chunk's ``rows`` rows. ``of(chunk)`` copies them out; a method may read them in place
    instead (OCFS's class sums), or weigh them by their position (FSDS's forgetting)."""

    positions: np.ndarray
    rows: int

    def of(self, chunk: Any) -> Any:
        """The subsample's rows of ``chunk`` (a copy, of the chunk's type)."""
        return take_rows(chunk, self.positions)


class ResampledParams(MethodParams):
    """The parameter every row method shares: how many subsamples it keeps."""

    resamples: int | None = computed(
        f"Interleaved subsamples whose rankings estimate the stability of the top h: 0 (none) "
        f"or 2 to {MAX_RESAMPLES} (default {DEFAULT_RESAMPLES}: about 3 times the state and 1.6 to "
        f"2.2 times the update time; more cost more, fewer give a wider interval).",
        ge=0,
        le=MAX_RESAMPLES,
    )

    #: Whether the params named ``resamples`` (0 given is kept in the resolved params; 0 by
    #: default, for params stored before it existed, is left out as they were).
    _resamples_given: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _complete_resamples(self, info: ValidationInfo) -> Self:
        self._resamples_given = self.resamples is not None
        if self.resamples is None:
            # Params stored before resamples existed describe states without subsamples.
            stored = bool((info.context or {}).get("stored", False))
            self.resamples = 0 if stored else DEFAULT_RESAMPLES
        if self.resamples == 1:
            raise InvalidParams(
                f"resamples must be 0 (no stability estimate) or from 2 to {MAX_RESAMPLES} "
                "(one subsample has nothing to be compared with); got 1"
            )
        return self

    def as_params(self) -> dict[str, Any]:
        params = super().as_params()
        resamples = params.pop("resamples", None)
        if resamples or self._resamples_given:  # (last: it is about the estimate)
            params["resamples"] = resamples
        # Left out, the params read as they were stored before resamples existed: resolved
        # again as stored they give 0, and resolve to themselves.
        return params


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014) on uint64, wrapping."""
    z = values + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def groups_of_rows(first: int, n: int, k: int) -> np.ndarray:
    """The subsample of rows ``first .. first + n - 1`` (positions in the stream): block ``b``
    (rows ``bK .. bK + K - 1``) is dealt in the order of ``K`` hashes of ``(b, j)``."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    b0, b1 = first // k, (first + n - 1) // k
    slots = np.arange(b0 * k, (b1 + 1) * k, dtype=np.uint64)
    draws = _splitmix64(slots ^ _DEAL_SEED).reshape(-1, k)
    dealt = np.argsort(np.argsort(draws, axis=1, kind="stable"), axis=1, kind="stable")
    start = first - b0 * k
    return np.asarray(dealt.reshape(-1)[start : start + n], dtype=np.int64)


def rows_in(chunk: Matrix | LabelledRows | TargetRows) -> int:
    return chunk.n_rows if isinstance(chunk, LabelledRows | TargetRows) else int(chunk.shape[0])


def take_rows(chunk: Any, rows: np.ndarray) -> Any:
    """The chunk's ``rows`` (positions, in order), of the same type."""
    if isinstance(chunk, LabelledRows | TargetRows):
        return chunk.take(rows)
    if sp.issparse(chunk):
        return chunk[rows]
    return np.asarray(chunk)[rows]
