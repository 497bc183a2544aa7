"""Interleaved subsamples kept beside a row method's state: how Sift knows, online, how settled
a ranking is (``service.algorithms.stability`` measures it).

A row method (chunk kinds ``rows``, ``labelled rows``, ``views``) that inherits
``ResampledMethod`` keeps, next to its own state, ``K`` subsamples (``resamples``, default 2):
subsample ``g`` has seen only the rows dealt to it. Rows are dealt by their position in the
stream: every block of ``K`` consecutive rows (rows ``bK .. bK + K - 1``) goes one row to each
subsample, in an order drawn from a hash of the block's number. So the subsamples are balanced
(their sizes differ by at most one row), disjoint, together the whole stream, blind to a period
in the stream (a stream alternating two classes does not put one class in each half), and
where a row goes depends on its position alone: a replay, a recomputation, any chunking or
coalescing of the same rows deals them alike, and exactly-once holds for the subsamples as it
does for the state.

**What a subsample holds is the method's choice** (the ``subsample_*`` hooks), within the
issue's bound: with the default ``K = 2``, at most twice the state and the update time of the
method without them. Two layouts:

* *Derived* (``derives_last``: variance's moments, OCFS's and IOC's class counts and sums,
  FSDS's sketch). The whole stream's state holds what the subsamples hold together, so only
  ``K - 1`` subsamples are stored and the last is derived by taking the others out of it
  (``subsample_unmerge``): exactly up to rounding for sums (subtraction of counts and sums,
  the inverse of Chan's pairwise update for moments), within both Frequent-Directions bounds
  for a sketch. A row is folded into the state and into at most one stored subsample.
* *Stored* (OMVFS, whose factorisation neither adds up nor subtracts): all ``K``, each
  buffering its own rows, so that their buffers together are the whole stream's.

A method may compute its subsamples' updates with the whole stream's
(``update_with_subsamples``), sharing what they would compute again (variance's squared
deviations, OCFS's pass over the chunk, OMVFS's scaled views). A subsample's scores are
computed from its fields when asked (``subsample_scores``), not kept (OMVFS keeps them).

The stored subsamples are fields of the state, named ``resample<g>:<field>``, with
``resample_counts`` (``K`` rows counts, the derived subsample's too): checkpoints, replays,
exports and imports, the state limit and ``check_state`` (which reads the fields off
``initial_state``) carry them as any other field. Each version publishes what the subsamples'
scores read (``resample_fields``: the stored subsamples' ``subsample_fields`` and, for sums,
the whole stream's ``derived_from``) unless the method serves the field from checkpoints
(FSDS's sketches). Mergeable methods merge stored subsample ``g`` of one state with stored
subsample ``g`` of the other (a derived one follows: the merged whole minus the merged stored
ones), so partitioned selectors and merges keep them.

Selectors created before this existed have stored params without ``resamples``: they resolve
to 0 and their states (and archives) have no subsample fields; they keep working and answer
``stability: null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar

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
    "Dealt",
    "ResampledMergeable",
    "ResampledMethod",
    "ResampledParams",
    "group_field",
    "groups_of_rows",
    "kept_scores",
    "of_resamples",
    "published_state_fields",
    "resample_count",
    "resample_fields",
    "scores_due",
    "served_from_checkpoint",
    "split_field",
    "subsample_state_fields",
    "summary_fields_of",
]

#: Subsamples a new selector keeps, and the most it may keep.
DEFAULT_RESAMPLES = 2
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


def _groups_in(state: State) -> int:
    counts = state.get(COUNTS_FIELD)
    return int(np.asarray(counts).shape[0]) if isinstance(counts, np.ndarray) else 0


_RESAMPLE_FIELDS = frozenset({COUNTS_FIELD, SCORES_FIELD, SCORES_ROWS_FIELD})


def of_resamples(field: str) -> bool:
    """Whether ``field`` belongs to the resamples (a subsample's, their counts or scores),
    not to the whole stream's state."""
    return field in _RESAMPLE_FIELDS or split_field(field) is not None


def _main(state: State) -> State:
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


def _group(state: State, group: int) -> State:
    out: State = {}
    for name, value in state.items():
        parts = split_field(name)
        if parts is not None and parts[0] == group:
            out[parts[1]] = value
    return out


V = TypeVar("V")


def _prefixed(fields: Mapping[str, V], group: int) -> dict[str, V]:
    """``fields`` (a state, its sizes or its growing axes) under the names of ``group``'s."""
    return {group_field(group, f): v for f, v in fields.items()}


@dataclass(frozen=True)
class Dealt:
    """A subsample's rows of a chunk: their positions (ascending, never none) among the chunk's
    ``rows`` rows. ``of(chunk)`` copies them out; a method may read them in place instead
    (OCFS's class sums), or weigh them by their position (FSDS's forgetting)."""

    positions: np.ndarray
    rows: int

    def of(self, chunk: Any) -> Any:
        """The subsample's rows of ``chunk`` (a copy, of the chunk's type)."""
        return take_rows(chunk, self.positions)


class ResampledParams(MethodParams):
    """The parameter every row method shares: how many subsamples it keeps."""

    resamples: int | None = computed(
        f"Interleaved subsamples whose rankings estimate the stability of the top h: 0 (none) "
        f"or 2 to {MAX_RESAMPLES} (default {DEFAULT_RESAMPLES}: at most twice the state and the "
        f"update time; more cost more).",
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


#: A resampled method's resolved parameters.
RP = TypeVar("RP", bound=ResampledParams)


class ResampledMethod(MethodBase[RP]):
    """A row method that keeps ``resamples`` interleaved subsamples (module docstring). It
    implements the protocol's ``initial_state``, ``state_sizes``, ``update``,
    ``check_consistency`` and ``growing_axes`` around the method's own, which it declares as
    ``core_*``, and the subsamples' through the ``subsample_*`` hooks; everything else
    (``weights``, ``describe``, the capabilities) reads the whole stream's fields, which keep
    their names."""

    #: How the subsamples are kept for this method, and what they estimate (``GET .../top``
    #: shows it as ``stability.estimated_by``).
    stability_estimate: ClassVar[str]
    #: Whether the subsamples' spread is scaled to resamples of every row seen: for methods
    #: whose scores are smooth functions of means (``stability.replicate_scores``).
    stability_corrected: ClassVar[bool] = True
    #: The array fields of a subsample that its scores (and a merge of it) read.
    subsample_fields: ClassVar[tuple[str, ...]]
    #: Whether the whole stream's state holds what the subsamples hold together (sums, a
    #: sketch), so that the last one is derived from it (``subsample_of_whole``,
    #: ``subsample_merge``, ``subsample_unmerge``), not stored.
    derives_last: ClassVar[bool] = False
    #: ... from these array fields of the whole stream's state (and its scalars).
    derived_from: ClassVar[tuple[str, ...]] = ()
    #: Whether computing the subsamples' scores costs about an update (FSDS: a sketch derived
    #: and both decomposed), so that the state keeps the last ones (``SCORES_FIELD``), computed
    #: again only once the rows grew by ``SCORES_REFRESH_GROWTH``: the stability then speaks of
    #: the subsamples as of at most that share of the rows ago, and the update time stays
    #: within twice the method's.
    caches_resample_scores: ClassVar[bool] = False

    # -- what the method declares of itself --------------------------------------------------

    def core_initial_state(self, params: RP) -> State:
        raise NotImplementedError

    def core_state_sizes(self, params: RP) -> dict[str, int]:
        raise NotImplementedError

    def core_update(self, state: State, params: RP, chunk: Any) -> State:
        raise NotImplementedError

    def core_check_consistency(self, state: State, params: RP, segments: Mapping[str, Any]) -> None:
        """The method's own rules of one state (``ChecksState``); none by default."""

    def core_growing_axes(self, params: RP) -> dict[str, tuple[int, ...]]:
        return {}

    # -- ... and of its subsamples -----------------------------------------------------------

    def subsample_initial_state(self, params: RP) -> State:
        """A subsample that has seen no row."""
        raise NotImplementedError

    def subsample_state_sizes(self, params: RP) -> dict[str, int]:
        """Bytes of every array ``subsample_initial_state`` holds."""
        raise NotImplementedError

    def subsample_update(
        self, subsample: State, params: RP, chunk: Any, whole: State, dealt: Dealt
    ) -> State:
        """Fold the subsample's rows of ``chunk`` (``dealt``) into it; ``whole`` is the whole
        stream's state after the same chunk. A new state."""
        raise NotImplementedError

    def update_with_subsamples(
        self,
        state: State,
        subsamples: list[State],
        params: RP,
        chunk: Any,
        dealt: np.ndarray,
    ) -> tuple[State, list[State]]:
        """The whole stream's state and each stored subsample's after a chunk (``dealt``: the
        subsample of each of its rows): the method's update, then ``subsample_update`` of each
        subsample dealt rows. A method whose subsamples' statistics share the work of the whole
        stream's (variance's squared deviations) computes them together instead."""
        new = self.core_update(state, params, chunk)
        out = []
        for g, subsample in enumerate(subsamples):
            rows = np.flatnonzero(dealt == g)
            if rows.size:
                subsample = self.subsample_update(
                    subsample, params, chunk, new, Dealt(rows, dealt.size)
                )
            out.append(subsample)
        return new, out

    def subsample_scores(self, subsample: State, params: RP) -> np.ndarray:
        """The subsample's score of every feature (from its ``subsample_fields`` and scalars)."""
        raise NotImplementedError

    def subsample_rows(self, subsample: State) -> int:
        """The rows the subsample has seen (``resample_counts`` must agree)."""
        raise NotImplementedError

    def subsample_check(self, subsample: State, params: RP) -> None:
        """``Inconsistent`` unless the subsample obeys the method's rules; none by default."""

    def subsample_growing_axes(self, params: RP) -> dict[str, tuple[int, ...]]:
        return {}

    def subsample_merge(self, subsample: State, params: RP, other: State) -> State:
        """The subsample of both subsamples' rows (a merge, and a derivation for K > 2)."""
        raise NotImplementedError

    def subsample_of_whole(self, whole: State, params: RP) -> State:
        """``derives_last``: the whole stream's statistics as a subsample (of every row)."""
        raise NotImplementedError

    def subsample_unmerge(self, whole: State, params: RP, part: State) -> State:
        """``derives_last``: the subsample of the rows of ``whole`` that ``part`` has not seen
        (the inverse of ``subsample_merge``); ``Inconsistent`` if ``part`` is not in it."""
        raise NotImplementedError

    # -- the protocol ----------------------------------------------------------------------

    def stored_subsamples(self, k: int) -> int:
        """How many of ``k`` subsamples are stored (the last is derived for sums)."""
        return k - 1 if self.derives_last and k else k

    def initial_state(self, params: RP) -> State:
        state = self.core_initial_state(params)
        k = resample_count(params)
        if k == 0:
            return state
        out = dict(state)
        for g in range(self.stored_subsamples(k)):
            out.update(_prefixed(self.subsample_initial_state(params), g))
        out[COUNTS_FIELD] = np.zeros(k, dtype=np.int64)
        if self.caches_resample_scores:
            out.update(self._no_scores(state, k))
        return out

    def _no_scores(self, state: State, k: int) -> State:
        """The kept scores before every subsample has seen a row: zeros, computed at 0 rows."""
        scored = np.asarray(state[self.score_field]).shape[0]  # type: ignore[attr-defined]
        return {SCORES_FIELD: np.zeros((k, scored), dtype=np.float32), SCORES_ROWS_FIELD: 0}

    def state_sizes(self, params: RP) -> dict[str, int]:
        out = dict(self.core_state_sizes(params))
        k = resample_count(params)
        if k:
            sizes = self.subsample_state_sizes(params)
            for g in range(self.stored_subsamples(k)):
                out.update(_prefixed(sizes, g))
            out[COUNTS_FIELD] = 8 * k
            if self.caches_resample_scores:
                scored = out[self.score_field] // 8  # type: ignore[attr-defined]
                out[SCORES_FIELD] = 4 * k * scored
        return out

    def update(self, state: State, params: RP, chunk: Any) -> State:
        """The method's update of the whole stream, and of each stored subsample with its rows
        (a derived subsample follows the whole stream)."""
        k = _groups_in(state)
        if k == 0:
            return self.core_update(_main(state), params, chunk)  # from before resamples
        counts = np.array(state[COUNTS_FIELD], dtype=np.int64)
        dealt = groups_of_rows(int(counts.sum()), rows_in(chunk), k)
        stored = [_group(state, g) for g in range(self.stored_subsamples(k))]
        new, subsamples = self.update_with_subsamples(_main(state), stored, params, chunk, dealt)
        for g, subsample in enumerate(subsamples):
            new.update(_prefixed(subsample, g))
        new[COUNTS_FIELD] = counts + np.bincount(dealt, minlength=k)
        return self.with_scores(new, params, state)

    def with_scores(self, state: State, params: RP, previous: State | None) -> State:
        """``state`` with its subsamples' scores (``caches_resample_scores``): ``previous``'s
        while they are not due (``scores_due``), else computed afresh (``previous`` None: a
        merge, computed afresh). Zeros, computed at 0 rows, while a subsample has seen none."""
        if not self.caches_resample_scores or COUNTS_FIELD not in state:
            return state
        rows = int(np.asarray(state[COUNTS_FIELD]).sum())
        if previous is not None and SCORES_FIELD in previous:
            computed_at = int(previous.get(SCORES_ROWS_FIELD) or 0)
            if not scores_due(computed_at, rows):
                return {
                    **state,
                    SCORES_FIELD: previous[SCORES_FIELD],
                    SCORES_ROWS_FIELD: computed_at,
                }
        scores = self.computed_resample_scores(state, params)
        if scores is None:
            return {**state, **self._no_scores(state, _groups_in(state))}
        return {**state, SCORES_FIELD: kept_scores(scores), SCORES_ROWS_FIELD: rows}

    def check_consistency(
        self,
        state: State,
        params: RP,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the method's rules for the whole stream and for each stored
        subsample, a derived one that can be derived (the stored ones are part of the whole
        stream: ``subsample_unmerge``), and subsample counts that count their rows."""
        self.core_check_consistency(_main(state), params, segments)
        k = _groups_in(state)
        if k == 0:
            return
        counts = np.asarray(state[COUNTS_FIELD])
        subsamples = self.subsamples(state, params)
        for g, subsample in enumerate(subsamples):
            if g < self.stored_subsamples(k):
                self.subsample_check(subsample, params)
            if self.subsample_rows(subsample) != counts[g]:
                raise Inconsistent(
                    f"resample_counts says subsample {g} has seen {int(counts[g])} rows; it has "
                    f"seen {self.subsample_rows(subsample)}"
                )
        if self.caches_resample_scores:
            self._check_kept_scores(state, params, counts)

    def _check_kept_scores(self, state: State, params: RP, counts: np.ndarray) -> None:
        """Kept scores (``caches_resample_scores``) computed when ``with_scores`` computes
        them: at 0 rows while a subsample has seen none, else at most a refresh ago; and, when
        computed at the rows seen, the subsamples' own (an archive cannot bring a stability of
        its choosing; older ones are refreshed within ``SCORES_REFRESH_GROWTH`` more rows)."""
        rows = int(counts.sum())
        computed_at = state.get(SCORES_ROWS_FIELD)
        if not isinstance(computed_at, int) or not 0 <= computed_at <= rows:
            raise Inconsistent(
                f"{SCORES_ROWS_FIELD} must be a count of rows within the {rows} seen; got "
                f"{computed_at!r}"
            )
        if bool(np.any(counts == 0)) != (computed_at == 0) or (
            computed_at and scores_due(computed_at, rows)
        ):
            raise Inconsistent(
                f"{SCORES_FIELD} computed at {computed_at} rows, which an update at {rows} rows "
                f"(subsamples of {counts.tolist()}) would have computed again"
            )
        kept = np.asarray(state[SCORES_FIELD], dtype=np.float64)
        if kept.size and np.abs(kept).max() > 1.0:
            raise Inconsistent(f"{SCORES_FIELD} must lie within [-1, 1]; got larger magnitudes")
        if computed_at == rows and rows:
            computed = self.computed_resample_scores(state, params)
            # Within [-1, 1]: rounding of the decompositions, then of single precision.
            if computed is None or not np.allclose(kept, kept_scores(computed), atol=1e-5):
                raise Inconsistent(f"{SCORES_FIELD} are not the scores of the subsamples")

    def growing_axes(self, params: RP) -> dict[str, tuple[int, ...]]:
        out = dict(self.core_growing_axes(params))
        k = resample_count(params)
        if k:
            axes = self.subsample_growing_axes(params)
            for g in range(self.stored_subsamples(k)):
                out.update(_prefixed(axes, g))
        return out

    def resample_scores(self, state: State, params: RP) -> np.ndarray | None:
        """The scores of every subsample, ``K x d``; None without subsamples, or while one of
        them has seen no row. ``state`` needs only ``resample_fields`` and the scalars. A
        method that ``caches_resample_scores`` answers the ones its state keeps."""
        if self.caches_resample_scores:
            if not int(state.get(SCORES_ROWS_FIELD) or 0) or SCORES_FIELD not in state:
                return None
            return np.asarray(state[SCORES_FIELD], dtype=np.float64)
        return self.computed_resample_scores(state, params)

    def computed_resample_scores(self, state: State, params: RP) -> np.ndarray | None:
        """``resample_scores`` computed from the subsamples of ``state``."""
        k = _groups_in(state)
        if k < 2 or np.any(np.asarray(state[COUNTS_FIELD]) == 0):
            return None
        subsamples = self.subsamples(state, params)
        return np.stack([np.asarray(self.subsample_scores(s, params)) for s in subsamples])

    def subsamples(self, state: State, params: RP) -> list[State]:
        """Every subsample of ``state`` (none without resamples): the stored ones, and the
        derived one for sums."""
        k = _groups_in(state)
        stored = [_group(state, g) for g in range(self.stored_subsamples(k))]
        if not self.derives_last or not k:
            return stored
        whole = self.subsample_of_whole(_main(state), params)
        if not stored:  # pragma: no cover - K >= 2 keeps at least one
            return [whole]
        part = stored[0]
        for other in stored[1:]:
            part = self.subsample_merge(part, params, other)
        return [*stored, self.subsample_unmerge(whole, params, part)]


class ResampledMergeable(ResampledMethod[RP]):
    """A resampled method that merges (``Mergeable``): stored subsample ``g`` of one state takes
    stored subsample ``g`` of the other, so a merged state keeps ``K`` interleaved subsamples of
    all the rows (dealt by the position in each stream instead of in the union: any split of
    the union into ``K`` balanced, disjoint parts serves); a derived subsample is then the
    merged whole stream minus the merged stored ones, i.e. the merge of the two derived ones."""

    def core_merge(self, state: State, params: RP, summary: State) -> State:
        raise NotImplementedError

    def merge(self, state: State, params: RP, summary: State) -> State:
        new = self.core_merge(_main(state), params, _main(summary))
        k = _groups_in(state)
        if k == 0:
            return new
        if _groups_in(summary) != k:
            raise InvalidInput(
                f"this selector keeps {k} resamples; the merged state has "
                f"{_groups_in(summary)}: merge selectors created with the same resamples"
            )
        for g in range(self.stored_subsamples(k)):
            merged = self.subsample_merge(_group(state, g), params, _group(summary, g))
            new.update(_prefixed(merged, g))
        new[COUNTS_FIELD] = np.asarray(state[COUNTS_FIELD], dtype=np.int64) + np.asarray(
            summary[COUNTS_FIELD], dtype=np.int64
        )
        return self.with_scores(new, params, None)  # a merge's scores are computed afresh


def resample_fields(method: Any, k: int) -> list[str]:
    """The array fields ``resample_scores`` reads of a state of ``k`` subsamples (besides its
    scalars): the scores it keeps (``caches_resample_scores``), else
    ``subsample_state_fields``."""
    if k and isinstance(method, ResampledMethod) and method.caches_resample_scores:
        return [SCORES_FIELD, COUNTS_FIELD]
    return subsample_state_fields(method, k)


def subsample_state_fields(method: Any, k: int) -> list[str]:
    """The array fields ``k`` subsamples are made of: the stored subsamples'
    ``subsample_fields``, the whole stream's ``derived_from`` for sums, and the counts; none
    without resamples."""
    if not k or not isinstance(method, ResampledMethod):
        return []
    fields = list(method.derived_from) if method.derives_last else []
    for g in range(method.stored_subsamples(k)):
        fields.extend(group_field(g, f) for f in method.subsample_fields)
    return [*fields, COUNTS_FIELD]


def summary_fields_of(method: Any, params: MethodParams) -> list[str]:
    """A mergeable method's summary fields (``summary_fields``) with its stored subsamples'
    own (``subsample_state_fields``: what a merge of them reads)."""
    fields = list(method.summary_fields)
    k = resample_count(params)
    fields.extend(f for f in subsample_state_fields(method, k) if f not in fields)
    return fields


def served_from_checkpoint(served: tuple[str, ...], field: str) -> bool:
    """Whether ``field`` is read from checkpoints: one of the method's ``served``, or a
    subsample's field of the same name."""
    if field == SCORES_FIELD:  # K x d, kept for the rare reader of more than the published top
        return True
    parts = split_field(field)
    return (parts[1] if parts is not None else field) in served


def published_state_fields(method: Any, state: State) -> set[str]:
    """The array fields a version of ``state`` publishes: ``published_fields`` of the method
    and what the resamples' scores read (``resample_fields``), except what the method serves
    from checkpoints."""
    out = set(published_fields(method))
    k = _groups_in(state)
    if k and isinstance(method, ResampledMethod):
        served = method.served_from_checkpoints
        read = resample_fields(method, k)
        out.update(f for f in read if not served_from_checkpoint(served, f))
    return out
