"""What the applier computes, as pure functions run in worker threads (no Redis, no event loop).

* ``compute_update``: one batch of log entries folded into a state by the selector's method,
  checked (finite, storable), and what the new version publishes for readers encoded;
* ``replay``: a checkpoint's state brought up to a later version by re-applying the log entries
  the commit records name, batch by batch as they were first applied (ARCHITECTURE.md, "The
  write path"), so that a new applier continues exactly where the last one committed;
* the ranking a version records in the history (``ranked``).

Failures are one of two kinds: ``UpdateFailed`` (the batch's fault: its entries get rejected)
and ``StateUnreadable`` (storage damage: nobody's entry is to blame).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from service.algorithms import get_method
from service.algorithms.base import (
    SEGMENT_PREFIX,
    EstimatesStability,
    Mergeable,
    State,
    not_always_finite,
    offers,
    order_by_score,
    top_per_view,
)
from service.algorithms.drift import stable_h
from service.algorithms.resampling import published_state_fields, replaying
from service.algorithms.stability import (
    ResampledRanking,
    Stability,
    assess_views,
    resampled_ranking,
)
from service.applier.resolved import resolved_params
from service.errors import CodecError, SiftError
from service.store.codec import (
    decode_array,
    decode_state,
    encode_array,
    encode_state,
    unpack_fields,
)
from service.store.keys import compare_stream_ids
from service.store.monitoring_records import RankedList
from service.store.records import CommitRecord, LogEntry, SelectorMeta
from service.wire.kinds import Chunk, chunk_format
from service.wire.log import decode_chunk

log = logging.getLogger("sift.updates")

#: Redis refuses a single value over 512 MiB (its default proto-max-bulk-len).
REDIS_MAX_VALUE_BYTES = 512 * 1024**2


class UpdateFailed(Exception):
    """Applying a batch failed because of what the batch holds (or, if ``transient``, maybe not).

    ``reason`` is shown to the producers of a rejected entry, so it says what went wrong in the
    method's terms and never carries a traceback.
    """

    def __init__(self, reason: str, transient: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient


class StateUnreadable(Exception):
    """The stored state (a checkpoint, or the log and commit records after it) cannot be
    brought back: storage damage, not the fault of any log entry."""


def require_finite(state: State, exempt: Collection[str] = ()) -> None:
    """UpdateFailed unless every float array and scalar of ``state`` is finite, but the
    ``exempt`` fields (``not_always_finite``: derived afresh by every update).

    A NaN or an infinity would never leave the state again (every later update folds it in), so
    such a state is never committed; the entry that produced it is rejected instead.
    """
    for field, value in state.items():
        if field in exempt or isinstance(value, str | bool | int) or value is None:
            continue
        array = np.asarray(value)
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise UpdateFailed(
                f"applying this chunk would make the state's '{field}' non-finite (NaN or "
                "infinity); the state was left as it was"
            )


def state_size_problem(sizes: Mapping[str, int], limit: int) -> str | None:
    """Why a state whose values take ``sizes`` bytes cannot be stored, or None if it can.

    Over ``limit`` in all (``SIFT_MAX_STATE_BYTES``), or one value over what Redis accepts.
    """
    total = sum(sizes.values())
    if total > limit:
        largest = max(sizes, key=lambda field: sizes[field])
        return (
            f"the state would take {readable_bytes(total)} (the largest part, '{largest}', "
            f"{readable_bytes(sizes[largest])}), over the limit of {readable_bytes(limit)} "
            "(SIFT_MAX_STATE_BYTES)"
        )
    for field, size in sizes.items():
        if size > REDIS_MAX_VALUE_BYTES:
            return (
                f"the state's '{field}' would take {readable_bytes(size)}, over the "
                f"{readable_bytes(REDIS_MAX_VALUE_BYTES)} Redis accepts in one value"
            )
    return None


def readable_bytes(size: int) -> str:
    """``1073741824`` -> ``"1073741824 bytes (1.0 GiB)"``: exact, and readable at a glance."""
    scaled, unit = float(size), "bytes"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, bigger
    return f"{size} bytes" if unit == "bytes" else f"{size} bytes ({scaled:.1f} {unit})"


def state_sizes(state: State) -> dict[str, int]:
    """Bytes of every array of a decoded state (what its checkpoint stores, about)."""
    return {f: v.nbytes for f, v in state.items() if isinstance(v, np.ndarray)}


#: Published with every version beside the fields readers need: the indices and scores of
#: its top features (as many as the history keeps), so that ``GET .../top`` reads a few KiB
#: per version instead of every score. Store names (``__``): never a method's field.
RANKING_INDEX_FIELD = "__ranking_index__"
RANKING_SCORE_FIELD = "__ranking_score__"
#: ... and what its resamples say of that top (``ResampledRanking``): each replicate's top and
#: the rank each of the version's top features takes in each, so that ``GET .../top`` gives the
#: stability and the bands of any h up to the published top from a few KiB too.
RESAMPLE_TOP_FIELD = "__resample_top__"
RESAMPLE_RANKS_FIELD = "__resample_ranks__"


@dataclass(frozen=True)
class Update:
    """A batch folded in: the new state, what its version publishes, and the new segments."""

    #: The whole new state, decoded, without segment fields (the applier keeps it in memory).
    state: State
    #: Encoded fields readers read of the new version (``published_fields`` and the scalars).
    published: dict[str, bytes]
    #: Encoded immutable segments the update emitted, by id.
    segments: dict[str, bytes]
    #: Bytes of the state's arrays (checked against ``SIFT_MAX_STATE_BYTES``).
    state_bytes: int
    #: The new version's top features (None if they could not be ranked: never fatal).
    ranking: list[RankedList] | None = None
    #: What its resamples say of that top (single rankings of methods that estimate it).
    resampled: ResampledRanking | None = None
    #: The stability of its top ``stable_h`` (``service.algorithms.drift``: 10, or one less
    #: than its features on a selector of 10 or fewer), which the history records and the
    #: gauges and the automatic baseline read (None: not estimated).
    stability: Stability | None = None


#: What an update folds in: a log payload, or the chunk it encodes already decoded (handed over
#: by the process that appended it, ``Applier.appended``).
Folded = bytes | Chunk


def fold(meta: SelectorMeta, state: State, payloads: Sequence[Folded], merge: bool) -> State:
    """The method's update (or, for a merge, its ``merge``) of ``state`` with the payloads.

    Raises UpdateFailed when the payloads do not decode or the method refuses or fails on them.
    The result may still hold NaN or infinity, and its segment fields: see ``compute_update``.
    """
    method = get_method(meta.method)
    try:
        params = resolved_params(meta)
        if merge:
            summary = decode_state(unpack_fields(cast(bytes, payloads[0])))
        else:
            chunks = [
                decode_chunk(p) if isinstance(p, bytes | bytearray | memoryview) else p
                for p in payloads
            ]
    except CodecError as exc:
        raise UpdateFailed(f"the stored chunk does not decode ({exc.detail})") from exc
    try:
        # Overflow is caught as a non-finite state: no warnings on stderr meanwhile.
        with np.errstate(all="ignore"):
            if merge:
                if not offers(method, Mergeable):
                    raise CodecError(f"the log holds a merge, which {method.name} cannot take")
                return method.merge(state, params, summary)
            kind = chunk_format(method.chunk_kind)
            # A stream's chunks come as the stream's kind (labelled rows, for a method of rows).
            joined = kind.join([kind.taken(chunk) for chunk in chunks])
            return method.update(state, params, joined)
    except MemoryError as exc:
        raise UpdateFailed("applying this chunk ran out of memory", transient=True) from exc
    except SiftError as exc:
        raise UpdateFailed(exc.detail) from exc
    except Exception as exc:  # numerical failures of numpy/scipy on this data
        raise UpdateFailed(
            f"{method.name} failed on this chunk ({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc


def compute_update(
    meta: SelectorMeta,
    state: State,
    payloads: Sequence[Folded],
    max_state_bytes: int,
    merge: bool = False,
    top: int = 0,
) -> Update:
    """Fold the payloads into ``state`` (never written into), check the result, and encode what
    the new version publishes and the segments it emitted.

    With ``merge`` the one payload is another selector's summary, folded in by the method's
    ``merge`` (``Mergeable``). Pure CPU work (numerics, checksums): the applier runs it in a
    worker thread. Raises ``UpdateFailed`` if the batch cannot be applied (a chunk that does not
    decode, a method that refuses it or fails on it, a result that is not finite or too large).
    """
    new_state = fold(meta, state, payloads, merge)
    require_finite(new_state, not_always_finite(get_method(meta.method)))
    kept = {f: v for f, v in new_state.items() if not f.startswith(SEGMENT_PREFIX)}
    ranking = rank(meta, kept, top) if top else None
    resampled, stability = assess_resamples(meta, kept, top) if top else (None, None)
    try:
        segments = {
            field.removeprefix(SEGMENT_PREFIX): encode_array(np.asarray(value))
            for field, value in new_state.items()
            if field.startswith(SEGMENT_PREFIX)
        }
        published = publish(meta, kept, ranking, resampled)
    except CodecError as exc:
        raise UpdateFailed(f"the updated state cannot be stored ({exc.detail})") from exc
    sizes = state_sizes(kept)
    problem = state_size_problem(sizes, max_state_bytes)
    too_big = [s for s, value in segments.items() if len(value) > REDIS_MAX_VALUE_BYTES]
    if problem is None and too_big:
        problem = (
            f"segment '{too_big[0]}' would be over the {readable_bytes(REDIS_MAX_VALUE_BYTES)} "
            "Redis accepts in one value"
        )
    if problem is not None:
        raise UpdateFailed(f"applying this chunk cannot be stored: {problem}")
    return Update(kept, published, segments, sum(sizes.values()), ranking, resampled, stability)


def publish(
    meta: SelectorMeta,
    state: State,
    ranking: list[RankedList] | None = None,
    resampled: ResampledRanking | None = None,
    elide_zeros: bool = False,
) -> dict[str, bytes]:
    """What a version of ``state`` shows its readers, encoded: the fields of
    ``published_fields`` (and the resamples' own, ``published_state_fields``), every scalar,
    and the top of a single ``ranking`` with what its resamples say of it. ``elide_zeros``:
    a new selector's (``encode_state``)."""
    shown = published_state_fields(get_method(meta.method), state)
    fields = encode_state(
        {f: v for f, v in state.items() if f in shown or not isinstance(v, np.ndarray)},
        elide_zeros,
    )
    if ranking is not None and len(ranking) == 1 and ranking[0].view is None:
        fields[RANKING_INDEX_FIELD] = encode_array(np.asarray(ranking[0].indices, dtype=np.int64))
        fields[RANKING_SCORE_FIELD] = encode_array(np.asarray(ranking[0].scores, dtype=np.float64))
        if resampled is not None:
            fields[RESAMPLE_TOP_FIELD] = encode_array(resampled.tops)
            fields[RESAMPLE_RANKS_FIELD] = encode_array(resampled.ranks)
    return fields


def assess_resamples(
    meta: SelectorMeta, state: State, top: int
) -> tuple[ResampledRanking | None, Stability | None]:
    """What the resamples of ``state`` say of its top ``top`` (single rankings), and the
    stability of its top ``stable_h``; (None, None) for a method or a state without
    resamples. Never fatal: a failure is logged and answered (None, None)."""
    method = get_method(meta.method)
    score_field = method.score_field
    if not offers(method, EstimatesStability):
        return None, None
    try:
        resampled = method.resample_scores(state, resolved_params(meta))
        if resampled is None:
            return None, None
        scores = np.asarray(state[score_field], dtype=np.float64)
        corrected = method.stability_corrected
        recorded = stable_h(meta.ranked_features)
        if meta.views:
            viewed = assess_views(scores, resampled, meta.views, recorded, corrected)
            return None, None if viewed is None else viewed[0]
        depth = max(top, recorded)
        ranking = resampled_ranking(scores, resampled, depth, corrected)
        assessed = None if ranking is None else ranking.assess(recorded)
        return ranking, None if assessed is None else assessed.stability
    except Exception:
        log.exception("selector %s: assessing the new version's resamples failed", meta.name)
        return None, None


def rank(meta: SelectorMeta, state: State, h: int) -> list[RankedList] | None:
    """The top ``h`` of ``state`` by its method's score (``ranked``); None (logged) if it cannot
    be had, which must never keep a state from being committed."""
    try:
        scores = np.asarray(state[get_method(meta.method).score_field], dtype=np.float64)
        return ranked(meta, scores, h)
    except Exception:
        log.exception("selector %s: ranking the new version failed", meta.name)
        return None


def replay_takes(meta: SelectorMeta) -> tuple[str, ...]:
    """The fields a replay of ``meta``'s log takes from the version it rebuilds, as that
    version published them, instead of computing them on the way (``replay``)."""
    method = get_method(meta.method)
    return tuple(method.replay_takes) if offers(method, EstimatesStability) else ()


def taken_fields(meta: SelectorMeta, published: Mapping[str, bytes]) -> State | None:
    """The ``replay_takes`` fields of a version's published fields (its scalars among them),
    decoded; None unless every one is there."""
    wanted = replay_takes(meta)
    try:
        decoded = decode_state(published)
    except CodecError:
        return None
    if not wanted or any(field not in decoded for field in wanted):
        return None
    return {field: decoded[field] for field in wanted}


def replay(
    meta: SelectorMeta,
    state: State,
    items_seen: int,
    records: Sequence[CommitRecord],
    entries: Sequence[LogEntry],
    taken: State | None = None,
) -> tuple[State, int]:
    """``state`` (of a checkpoint, having seen ``items_seen`` items) with the log entries
    re-applied as the commit records say; returns the state and the items it has seen.
    ``taken``: the ``replay_takes`` fields of the last version, as it published them, which
    the updates on the way then do not compute (``resampling.replaying``).

    Each record covers the entries after the previous record's cursor up to its own: joined
    into one update as they were first (FSDS's sketch depends on where the shrinks fall), or,
    if ``rejected``, the one entry set aside (its chunk kind's placeholder, or nothing).
    Raises StateUnreadable if records and entries do not fit together, or an update that once
    succeeded fails now.
    """
    with replaying() if taken else contextlib.nullcontext():
        state, items_seen = _replayed(meta, state, items_seen, records, entries)
    return ({**state, **taken} if taken and records else state), items_seen


def _replayed(
    meta: SelectorMeta,
    state: State,
    items_seen: int,
    records: Sequence[CommitRecord],
    entries: Sequence[LogEntry],
) -> tuple[State, int]:
    kind = chunk_format(get_method(meta.method).chunk_kind)
    position = 0
    for record in records:
        batch = []
        while (
            position < len(entries)
            and compare_stream_ids(entries[position].log_id, record.cursor) <= 0
        ):
            batch.append(entries[position])
            position += 1
        if not batch or batch[-1].log_id != record.cursor:
            raise StateUnreadable(
                f"the log of '{meta.name}' lacks the entries version {record.version} applied "
                f"(through {record.cursor})"
            )
        try:
            if record.rejected:
                if len(batch) != 1:
                    raise StateUnreadable(
                        f"version {record.version} of '{meta.name}' set aside {len(batch)} "
                        "entries; a rejection sets aside one"
                    )
                stand_in = None if batch[0].merge else kind.placeholder(meta, batch[0].items)
                if stand_in is not None:
                    state = _strip_segments(fold(meta, state, [stand_in], False))
                    items_seen += batch[0].items
                continue
            merge = batch[0].merge
            state = _strip_segments(fold(meta, state, [e.payload for e in batch], merge))
            items_seen += sum(entry.items for entry in batch)
        except UpdateFailed as exc:
            raise StateUnreadable(
                f"replaying version {record.version} of '{meta.name}' failed: {exc.reason}"
            ) from exc
    if position != len(entries):
        raise StateUnreadable(
            f"the log of '{meta.name}' holds {len(entries) - position} entries after the last "
            "commit record that the head says were applied"
        )
    return state, items_seen


def _strip_segments(state: State) -> State:
    """A state without its segment fields (they are written once, at the first commit)."""
    return {f: v for f, v in state.items() if not f.startswith(SEGMENT_PREFIX)}


def ranked(meta: SelectorMeta, scores: np.ndarray, h: int) -> list[RankedList]:
    """The top ``h`` of a score vector as the history keeps it: one ranking, or one per view
    of a multi-view selector (indices within the view), ordered as ``GET .../top`` orders."""
    if meta.views:
        return [
            RankedList(view, order.tolist(), scores[start + order].tolist())
            for view, start, order in top_per_view(scores, meta.views, h)
        ]
    order = order_by_score(scores, h)
    return [RankedList(None, order.tolist(), scores[order].tolist())]


def top_of(meta: SelectorMeta, encoded_state: Mapping[str, bytes], h: int) -> list[RankedList]:
    """The top ``h`` of an encoded state, by its method's score field (worker-thread work)."""
    scores = decode_array(encoded_state[get_method(meta.method).score_field])
    return ranked(meta, np.asarray(scores, dtype=np.float64), h)


def decode_checkpoint(meta: SelectorMeta, fields: Mapping[str, bytes | memoryview]) -> State:
    """A checkpoint's encoded fields as a state; StateUnreadable if they do not decode."""
    try:
        return decode_state(fields)
    except CodecError as exc:
        raise StateUnreadable(f"checkpoint of selector '{meta.name}': {exc.detail}") from exc
