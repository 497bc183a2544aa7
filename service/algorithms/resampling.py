"""Interleaved subsamples kept beside a row method's state: how Sift knows, online, how settled
a ranking is (``service.algorithms.stability`` measures it).

A row method (chunk kinds ``rows``, ``labelled rows``, ``views``) that inherits
``ResampledMethod`` keeps, next to its own state, ``K`` more states of itself (``resamples``,
default 2): state ``g`` has seen only the rows dealt to subsample ``g``. Rows are dealt by their
position in the stream: every block of ``K`` consecutive rows (rows ``bK .. bK + K - 1``) goes
one row to each subsample, in an order drawn from a hash of the block's number. So the
subsamples are balanced (their sizes differ by at most one row), disjoint, together the whole
stream, blind to a period in the stream (a stream alternating two classes does not put one class
in each half), and where a row goes depends on its position alone: a replay, a recomputation,
any chunking or coalescing of the same rows deals them alike, and exactly-once holds for the
subsamples as it does for the state.

The subsample states are fields of the state, named ``resample<g>:<field>``, with
``resample_counts`` (``K`` rows counts): checkpoints, replays, exports and imports, the state
limit and ``check_state`` (which reads the fields off ``initial_state``) carry them as any
other field. A subsample field is published with every version when its field is (the scores,
a mergeable method's summary) and served from checkpoints when its field is. Mergeable methods
merge subsample ``g`` of one state with subsample ``g`` of the other, so partitioned selectors
and merges keep them.

Cost: every row is folded into the state and into one subsample, so an update costs about
twice as much; the state holds ``K + 1`` states (``benchmarks``: ``stability`` measures both).

Selectors created before this existed have stored params without ``resamples``: they resolve
to 0 and their states (and archives) have no subsample fields; they keep working and answer
``stability: null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp
from pydantic import PrivateAttr, ValidationInfo, model_validator

from service.algorithms.base import Matrix, MethodBase, State, published_fields
from service.algorithms.labels import LabelledRows
from service.algorithms.params import MethodParams, computed
from service.errors import Inconsistent, InvalidInput, InvalidParams

__all__ = [
    "COUNTS_FIELD",
    "DEFAULT_RESAMPLES",
    "MAX_RESAMPLES",
    "ResampledMergeable",
    "ResampledMethod",
    "ResampledParams",
    "group_field",
    "groups_of_rows",
    "published_state_fields",
    "resample_count",
    "served_from_checkpoint",
    "split_field",
    "summary_fields_of",
]

#: Subsamples a new selector keeps, and the most it may keep.
DEFAULT_RESAMPLES = 2
MAX_RESAMPLES = 8
#: Rows each subsample has seen (int64, ``K``).
COUNTS_FIELD = "resample_counts"
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


def resample_count(params: Mapping[str, Any]) -> int:
    """``K`` of resolved params (0: none, as for selectors created before resamples existed)."""
    value = params.get("resamples")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def _groups_in(state: State) -> int:
    counts = state.get(COUNTS_FIELD)
    return int(np.asarray(counts).shape[0]) if isinstance(counts, np.ndarray) else 0


def _main(state: State) -> State:
    return {f: v for f, v in state.items() if f != COUNTS_FIELD and split_field(f) is None}


def _group(state: State, group: int) -> State:
    out: State = {}
    for name, value in state.items():
        parts = split_field(name)
        if parts is not None and parts[0] == group:
            out[parts[1]] = value
    return out


def _prefixed(state: State, group: int) -> State:
    return {group_field(group, f): v for f, v in state.items()}


def _copy(state: State) -> State:
    return {f: np.array(v) if isinstance(v, np.ndarray) else v for f, v in state.items()}


class ResampledParams(MethodParams):
    """The parameter every row method shares: how many subsamples it keeps."""

    resamples: int | None = computed(
        f"Interleaved subsamples whose rankings estimate the stability of the top h: 0 (none) "
        f"or 2 to {MAX_RESAMPLES}; each costs about one more state (default "
        f"{DEFAULT_RESAMPLES}).",
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


def rows_in(chunk: Matrix | LabelledRows) -> int:
    return chunk.n_rows if isinstance(chunk, LabelledRows) else int(chunk.shape[0])


def take_rows(chunk: Any, rows: np.ndarray) -> Any:
    """The chunk's ``rows`` (positions, in order), of the same type."""
    if isinstance(chunk, LabelledRows):
        return chunk.take(rows)
    if sp.issparse(chunk):
        return chunk[rows]
    return np.asarray(chunk)[rows]


class ResampledMethod(MethodBase):
    """A row method that keeps ``resamples`` interleaved subsamples of itself (module
    docstring). It implements the protocol's ``initial_state``, ``state_sizes``, ``update``,
    ``check_consistency`` and ``growing_axes`` around the method's own, which it declares as
    ``core_*``; everything else (``weights``, ``describe``, the capabilities) reads the whole
    stream's fields, which keep their names."""

    #: How the subsamples are kept for this method, and what they estimate (``GET .../top``
    #: shows it as ``stability.estimated_by``).
    stability_estimate: ClassVar[str]
    #: Whether the subsamples' spread is scaled to resamples of every row seen: for methods
    #: whose scores are smooth functions of means (``stability.replicate_scores``).
    stability_corrected: ClassVar[bool] = True

    # -- what the method declares ----------------------------------------------------------

    def core_initial_state(self, params: Mapping[str, Any], size: int) -> State:
        raise NotImplementedError

    def core_state_sizes(self, params: Mapping[str, Any], size: int) -> dict[str, int]:
        raise NotImplementedError

    def core_update(self, state: State, params: Mapping[str, Any], chunk: Any) -> State:
        raise NotImplementedError

    def core_check_consistency(
        self, state: State, params: Mapping[str, Any], size: int, segments: Mapping[str, Any]
    ) -> None:
        """The method's own rules of one state (``ChecksState``); none by default."""

    def core_growing_axes(self, params: Mapping[str, Any], size: int) -> dict[str, tuple[int, ...]]:
        return {}

    def resample_params(self, params: Mapping[str, Any], state: State, k: int) -> Mapping[str, Any]:
        """The params a subsample's update runs with, given the whole stream's state after the
        same chunk: the same by default (FSDS forgets per row it sees, and shares the whole
        stream's kernel bandwidth)."""
        return params

    # -- the protocol ----------------------------------------------------------------------

    def initial_state(self, params: Mapping[str, Any], size: int) -> State:
        state = self.core_initial_state(params, size)
        k = resample_count(params)
        if k == 0:
            return state
        out = dict(state)
        for g in range(k):
            out.update(_prefixed(_copy(state), g))
        out[COUNTS_FIELD] = np.zeros(k, dtype=np.int64)
        return out

    def state_sizes(self, params: Mapping[str, Any], size: int) -> dict[str, int]:
        sizes = self.core_state_sizes(params, size)
        k = resample_count(params)
        out = dict(sizes)
        for g in range(k):
            out.update({group_field(g, f): n for f, n in sizes.items()})
        if k:
            out[COUNTS_FIELD] = 8 * k
        return out

    def update(self, state: State, params: Mapping[str, Any], chunk: Any) -> State:
        """The method's update of the whole stream, and of each subsample with its rows."""
        new = self.core_update(_main(state), params, chunk)
        k = _groups_in(state)
        if k == 0:
            return new  # a state from before resamples existed
        counts = np.array(state[COUNTS_FIELD], dtype=np.int64)
        n = rows_in(chunk)
        dealt = groups_of_rows(int(counts.sum()), n, k)
        sub_params = self.resample_params(params, new, k)
        for g in range(k):
            rows = np.flatnonzero(dealt == g)
            group = _group(state, g)
            if rows.size:
                group = self.core_update(group, sub_params, take_rows(chunk, rows))
                counts[g] += rows.size
            new.update(_prefixed(group, g))
        new[COUNTS_FIELD] = counts
        return new

    def check_consistency(
        self,
        state: State,
        params: Mapping[str, Any],
        size: int,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the method's rules for the whole stream and for each subsample, and
        subsample counts that are counts of rows."""
        self.core_check_consistency(_main(state), params, size, segments)
        k = _groups_in(state)
        for g in range(k):
            self.core_check_consistency(_group(state, g), params, size, {})
        if k and np.any(np.asarray(state[COUNTS_FIELD]) < 0):
            raise Inconsistent("the rows each subsample has seen cannot be negative")

    def growing_axes(self, params: Mapping[str, Any], size: int) -> dict[str, tuple[int, ...]]:
        axes = self.core_growing_axes(params, size)
        out = dict(axes)
        for g in range(resample_count(params)):
            out.update({group_field(g, f): a for f, a in axes.items()})
        return out

    def resample_scores(self, state: State, params: Mapping[str, Any]) -> np.ndarray | None:
        """The scores (``weights``) of every subsample, ``K x d``; None without subsamples, or
        while one of them has seen no row."""
        k = _groups_in(state)
        if k < 2 or np.any(np.asarray(state[COUNTS_FIELD]) == 0):
            return None
        weights = self.weights  # type: ignore[attr-defined]
        return np.stack([np.asarray(weights(_group(state, g), params)) for g in range(k)])


class ResampledMergeable(ResampledMethod):
    """A resampled method that merges (``Mergeable``): subsample ``g`` of one state takes
    subsample ``g`` of the other, so a merged state keeps ``K`` interleaved subsamples of all
    the rows (dealt by the position in each stream instead of in the union: any split of the
    union into ``K`` balanced, disjoint parts serves)."""

    def core_merge(self, state: State, params: Mapping[str, Any], summary: State) -> State:
        raise NotImplementedError

    def merge(self, state: State, params: Mapping[str, Any], summary: State) -> State:
        new = self.core_merge(_main(state), params, _main(summary))
        k = _groups_in(state)
        if k == 0:
            return new
        if _groups_in(summary) != k:
            raise InvalidInput(
                f"this selector keeps {k} resamples; the merged state has "
                f"{_groups_in(summary)}: merge selectors created with the same resamples"
            )
        for g in range(k):
            new.update(_prefixed(self.core_merge(_group(state, g), params, _group(summary, g)), g))
        new[COUNTS_FIELD] = np.asarray(state[COUNTS_FIELD], dtype=np.int64) + np.asarray(
            summary[COUNTS_FIELD], dtype=np.int64
        )
        return new


def summary_fields_of(summary_fields: tuple[str, ...], params: Mapping[str, Any]) -> list[str]:
    """A mergeable method's summary fields (``summary_fields``) with its subsamples' own."""
    k = resample_count(params)
    fields = list(summary_fields)
    for g in range(k):
        fields.extend(group_field(g, f) for f in summary_fields)
    if k:
        fields.append(COUNTS_FIELD)
    return fields


def served_from_checkpoint(served: tuple[str, ...], field: str) -> bool:
    """Whether ``field`` is read from checkpoints: one of the method's ``served``, or a
    subsample's copy of one."""
    parts = split_field(field)
    return (parts[1] if parts is not None else field) in served


def published_state_fields(method: Any, state: State) -> set[str]:
    """The array fields a version of ``state`` publishes: ``published_fields`` of the method,
    every subsample's copy of them, and the subsample counts."""
    shown = set(published_fields(method))
    out = set(shown)
    for name in state:
        parts = split_field(name)
        if parts is not None and parts[1] in shown:
            out.add(name)
    if COUNTS_FIELD in state:
        out.add(COUNTS_FIELD)
    return out
