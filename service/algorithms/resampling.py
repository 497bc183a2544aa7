"""Interleaved subsamples kept beside a row method's state: how Sift knows, online, how settled
a ranking is (``service.algorithms.stability`` measures it).

A row method (chunk kinds ``rows``, ``labelled rows``, ``views``) that inherits
``ResampledMethod`` keeps, next to its own state, ``K`` subsamples (``resamples``, default 4):
subsample ``g`` has seen only the rows dealt to it (``service.algorithms.subsamples``: dealt by
their position in the stream, so any chunking, coalescing or replay deals them alike).

**What a subsample holds is the method's choice** (the ``subsample_*`` hooks), within a
bound (at ``K = 2``, at most twice the state and the update time of the method without them);
the default is ``K = 4``, for an interval that says something (its measured cost:
docs/stability-and-drift.md). A method whose state is statistics that merge exactly says only
its maths (``service.algorithms.statistics.StatisticsMethod``: ``fold``, ``scores``, ``plus``,
``minus``), and its hooks are built from them: a subsample is statistics of its rows. Two layouts:

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

The stored subsamples are fields of the state (``subsamples.group_field``): checkpoints,
replays, exports and imports, the state limit and ``check_state`` (which reads the fields off
``initial_state``) carry them as any other field. Each version publishes what the subsamples'
scores read (``resample_fields``: the stored subsamples' ``subsample_fields`` and, for sums,
the whole stream's ``derived_from``) unless the method serves the field from checkpoints
(FSDS's sketches). Mergeable methods merge stored subsample ``g`` of one state with stored
subsample ``g`` of the other (a derived one follows: the merged whole minus the merged stored
ones), so partitioned selectors and merges keep them.

Selectors created before this existed keep no subsamples; they keep working and answer
``stability: null``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, ClassVar, TypeVar

import numpy as np

from service.algorithms import parallel
from service.algorithms.base import MethodBase, State, published_fields
from service.algorithms.params import MethodParams
from service.algorithms.subsamples import (
    COUNTS_FIELD,
    SCORES_FIELD,
    SCORES_ROWS_FIELD,
    ResampledParams,
    SubsampleRows,
    group_field,
    group_of,
    groups_in,
    groups_of_rows,
    kept_scores,
    prefixed,
    resample_count,
    rows_in,
    scores_due,
    split_field,
    whole_of,
)
from service.errors import Inconsistent, InvalidInput

#: A subsample's arrays of at least this many bytes (on average) make its update worth a thread
#: of its own beside the whole stream's (``update_with_subsamples``): below it, handing the
#: parts out costs about what running them does.
PARALLEL_PART_BYTES = 256 * 1024

__all__ = [
    "ResampledMergeable",
    "ResampledMethod",
    "published_state_fields",
    "resample_fields",
    "served_from_checkpoint",
    "subsample_state_fields",
    "summary_fields_of",
]

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
    #: Array fields that the whole stream's state and every stored subsample hold only under
    #: some params (``keeps_optional``; OCFS's per-class M2, kept with ``standardize``). Each
    #: version publishes them where the state has them; merges and the subsamples' scores read
    #: them with the others where the params keep them.
    optional_fields: ClassVar[tuple[str, ...]] = ()

    def keeps_optional(self, params: RP) -> bool:
        """Whether states of these params hold the ``optional_fields``."""
        return False

    def stability_estimate_for(self, params: RP) -> str:
        """``stability_estimate`` for a selector of these params (``GET .../top``'s
        ``estimated_by``): the class's text unless the params change what it says (FSDS's
        kernel mode)."""
        return self.stability_estimate

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
        self, subsample: State, params: RP, chunk: Any, whole: State, dealt: SubsampleRows
    ) -> State:
        """Fold the subsample's rows of ``chunk`` (``dealt``) into it; ``whole`` is the whole
        stream's state before the same chunk (the update of the whole runs beside it). A new
        state."""
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
        subsample of each of its rows): the method's update and ``subsample_update`` of each
        subsample dealt rows, independent parts, run on the update's threads
        (``parallel.run_parts``) when the subsamples' arrays are large enough to repay a
        thread (``PARALLEL_PART_BYTES``). A method whose subsamples' statistics share the work
        of the whole stream's (variance's squared deviations) computes them together instead."""
        calls: list[Callable[[], State]] = [partial(self.core_update, state, params, chunk)]
        dealt_to: list[int] = []
        for g, subsample in enumerate(subsamples):
            rows = np.flatnonzero(dealt == g)
            if rows.size:
                calls.append(
                    partial(
                        self.subsample_update,
                        subsample,
                        params,
                        chunk,
                        state,
                        SubsampleRows(rows, dealt.size),
                    )
                )
                dealt_to.append(g)
        worth = _array_bytes(subsamples) >= PARALLEL_PART_BYTES * max(len(subsamples), 1)
        new, *updated = parallel.run_parts(calls) if worth else [call() for call in calls]
        out = list(subsamples)
        for g, subsample in zip(dealt_to, updated, strict=True):
            out[g] = subsample
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
            out.update(prefixed(self.subsample_initial_state(params), g))
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
                out.update(prefixed(sizes, g))
            out[COUNTS_FIELD] = 8 * k
            if self.caches_resample_scores:
                scored = out[self.score_field] // 8  # type: ignore[attr-defined]
                out[SCORES_FIELD] = 4 * k * scored
        return out

    def update(self, state: State, params: RP, chunk: Any) -> State:
        """The method's update of the whole stream, and of each stored subsample with its rows
        (a derived subsample follows the whole stream)."""
        k = groups_in(state)
        if k == 0:
            return self.core_update(whole_of(state), params, chunk)  # from before resamples
        counts = np.array(state[COUNTS_FIELD], dtype=np.int64)
        dealt = groups_of_rows(int(counts.sum()), rows_in(chunk), k)
        stored = [group_of(state, g) for g in range(self.stored_subsamples(k))]
        new, subsamples = self.update_with_subsamples(whole_of(state), stored, params, chunk, dealt)
        for g, subsample in enumerate(subsamples):
            new.update(prefixed(subsample, g))
        new[COUNTS_FIELD] = counts + np.bincount(dealt, minlength=k)
        return self.with_scores(new, params, state)

    def with_scores(self, state: State, params: RP, previous: State | None) -> State:
        """``state`` with its subsamples' scores (``caches_resample_scores``): ``previous``'s
        while they are not due (``scores_due``), else computed afresh (``previous`` None: a
        merge, computed afresh). Zeros, computed at 0 rows, while a subsample has seen none."""
        if not self.caches_resample_scores or COUNTS_FIELD not in state:
            return state
        rows = int(np.asarray(state[COUNTS_FIELD]).sum())
        deferred = getattr(_replaying, "active", False)
        if previous is not None and SCORES_FIELD in previous:
            computed_at = int(previous.get(SCORES_ROWS_FIELD) or 0)
            if deferred or not scores_due(computed_at, rows):
                return {
                    **state,
                    SCORES_FIELD: previous[SCORES_FIELD],
                    SCORES_ROWS_FIELD: computed_at,
                }
        if deferred:
            return {**state, **self._no_scores(state, groups_in(state))}
        started = time.thread_time()
        scores = self.computed_resample_scores(state, params)
        # A replay takes the kept scores from the version it rebuilds (``replaying``).
        parallel.not_replayed(time.thread_time() - started)
        if scores is None:
            return {**state, **self._no_scores(state, groups_in(state))}
        return {**state, SCORES_FIELD: kept_scores(scores), SCORES_ROWS_FIELD: rows}

    @property
    def replay_takes(self) -> tuple[str, ...]:
        """Fields a replay takes from the version it rebuilds (``replaying``): the kept scores,
        which it does not compute again on the way."""
        return (SCORES_FIELD, SCORES_ROWS_FIELD) if self.caches_resample_scores else ()

    def check_consistency(
        self,
        state: State,
        params: RP,
        segments: Mapping[str, np.ndarray],
    ) -> None:
        """``ChecksState``: the method's rules for the whole stream and for each stored
        subsample, a derived one that can be derived (the stored ones are part of the whole
        stream: ``subsample_unmerge``), and subsample counts that count their rows."""
        self.core_check_consistency(whole_of(state), params, segments)
        k = groups_in(state)
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
                out.update(prefixed(axes, g))
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
        k = groups_in(state)
        if k < 2 or np.any(np.asarray(state[COUNTS_FIELD]) == 0):
            return None
        subsamples = self.subsamples(state, params)
        return np.stack([np.asarray(self.subsample_scores(s, params)) for s in subsamples])

    def subsamples(self, state: State, params: RP) -> list[State]:
        """Every subsample of ``state`` (none without resamples): the stored ones, and the
        derived one for sums."""
        k = groups_in(state)
        stored = [group_of(state, g) for g in range(self.stored_subsamples(k))]
        if not self.derives_last or not k:
            return stored
        whole = self.subsample_of_whole(whole_of(state), params)
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
        new = self.core_merge(whole_of(state), params, whole_of(summary))
        k = groups_in(state)
        if k == 0:
            return new
        if groups_in(summary) != k:
            raise InvalidInput(
                f"this selector keeps {k} resamples; the merged state has "
                f"{groups_in(summary)}: merge selectors created with the same resamples"
            )
        for g in range(self.stored_subsamples(k)):
            merged = self.subsample_merge(group_of(state, g), params, group_of(summary, g))
            new.update(prefixed(merged, g))
        new[COUNTS_FIELD] = np.asarray(state[COUNTS_FIELD], dtype=np.int64) + np.asarray(
            summary[COUNTS_FIELD], dtype=np.int64
        )
        return self.with_scores(new, params, None)  # a merge's scores are computed afresh


_replaying = threading.local()


@contextlib.contextmanager
def replaying() -> Iterator[None]:
    """Updates on this thread re-apply versions whose every field of ``replay_takes`` the
    caller will take from the last of them: the kept scores are carried, not computed (they
    cost about an update, and only the last version's are kept)."""
    outer = getattr(_replaying, "active", False)
    _replaying.active = True
    try:
        yield
    finally:
        _replaying.active = outer


def resample_fields(method: Any, k: int, params: MethodParams | None = None) -> list[str]:
    """The array fields ``resample_scores`` reads of a state of ``k`` subsamples (besides its
    scalars): the scores it keeps (``caches_resample_scores``), else
    ``subsample_state_fields`` (``params``: as there)."""
    if k and isinstance(method, ResampledMethod) and method.caches_resample_scores:
        return [SCORES_FIELD, COUNTS_FIELD]
    return subsample_state_fields(method, k, params)


def optional_fields_of(method: Any, params: MethodParams | None) -> tuple[str, ...]:
    """The method's ``optional_fields`` that states of ``params`` hold (None: any params, all
    of them: for readers that keep the fields a state has)."""
    if not isinstance(method, ResampledMethod):
        return ()
    if params is None or method.keeps_optional(params):
        return method.optional_fields
    return ()


def subsample_state_fields(method: Any, k: int, params: MethodParams | None = None) -> list[str]:
    """The array fields ``k`` subsamples are made of: the stored subsamples'
    ``subsample_fields``, the whole stream's ``derived_from`` for sums, and the counts; none
    without resamples. With them the ``optional_fields`` that states of ``params`` hold
    (``optional_fields_of``)."""
    if not k or not isinstance(method, ResampledMethod):
        return []
    optional = optional_fields_of(method, params)
    fields = [*method.derived_from, *optional] if method.derives_last else []
    for g in range(method.stored_subsamples(k)):
        fields.extend(group_field(g, f) for f in (*method.subsample_fields, *optional))
    return [*fields, COUNTS_FIELD]


def summary_fields_of(method: Any, params: MethodParams) -> list[str]:
    """A mergeable method's summary fields (``summary_fields``, and the ``optional_fields``
    its states of ``params`` hold) with its stored subsamples' own
    (``subsample_state_fields``: what a merge of them reads)."""
    fields = [*method.summary_fields, *optional_fields_of(method, params)]
    k = resample_count(params)
    fields.extend(f for f in subsample_state_fields(method, k, params) if f not in fields)
    return fields


def served_from_checkpoint(served: tuple[str, ...], field: str) -> bool:
    """Whether ``field`` is read from checkpoints: one of the method's ``served``, or a
    subsample's field of the same name."""
    if field == SCORES_FIELD:  # K x d, kept for the rare reader of more than the published top
        return True
    parts = split_field(field)
    return (parts[1] if parts is not None else field) in served


def published_state_fields(method: Any, state: State) -> set[str]:
    """The array fields a version of ``state`` publishes: ``published_fields`` of the method,
    the ``optional_fields`` the state holds, and what the resamples' scores read
    (``resample_fields``), except what the method serves from checkpoints."""
    out = set(published_fields(method))
    out.update(f for f in optional_fields_of(method, None) if f in state)
    k = groups_in(state)
    if k and isinstance(method, ResampledMethod):
        served = method.served_from_checkpoints
        read = resample_fields(method, k)
        out.update(f for f in read if not served_from_checkpoint(served, f))
    return out


def _array_bytes(states: list[State]) -> int:
    """Bytes of the arrays of ``states``."""
    return sum(v.nbytes for state in states for v in state.values() if isinstance(v, np.ndarray))
