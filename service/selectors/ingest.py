"""Ingestion: a chunk (or a merge) from request to receipt, exactly once.

Every write goes the same way: the body is decoded and validated by the selector's chunk kind
(off the event loop) before anything is written; the payload is appended to the selector's log
together with its idempotency record; the POST then waits, bounded, for the applier. All the
receipts a client can get are built here: applied (with the version that contains the chunk),
pending (202, with the log id), or rejected (the entry was set aside, a 422 with the reason).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from service import tracing
from service.algorithms import get_method
from service.algorithms.base import DecidesOnArrival, RefusesValues, offers
from service.algorithms.labels import Label, stored_classes
from service.applier import Applier, is_applied
from service.config import Settings
from service.errors import ChunkRejected, InvalidInput, NotFound, StaleMeta
from service.metrics import Metrics
from service.selectors.decisions import Decisions
from service.selectors.reading import StateReader, seen
from service.selectors.results import (
    ChunkOut,
    ChunkPending,
    ChunkStatus,
    ColumnsStored,
    FeaturesOut,
    FeaturesPending,
    Merged,
    MergeOut,
    Result,
)
from service.store.codec import SCALARS_FIELD, decode_state
from service.store.keys import INITIAL_CURSOR, log_id_belongs, parse_stream_id
from service.store.records import AppendOutcome, Entry, Head, SelectorMeta, StreamMeta
from service.store.redis_store import SelectorStore
from service.store.refusals import attached_to_stream
from service.wire.kinds import (
    Chunk,
    ChunkFormat,
    ChunkTarget,
    ColumnsFormat,
    RowsFormat,
    ValidChunk,
    chunk_format,
    require_route,
)
from service.wire.log import COMPRESS_FROM_BYTES, pack_payload
from service.wire.media import INFLATING_MEDIA_TYPES

#: Bodies up to this size are decoded on the event loop: a hand-off to a worker thread costs
#: more than decoding them, and makes the event loop wait for the GIL each time it gets it back.
#: Not an ``.npz`` of any size: a small archive may inflate to ``SIFT_MAX_BODY_BYTES``.
INLINE_DECODE_BYTES = 32 * 1024

#: Class sums a labelled selector may keep, in doubles (1 GiB): bounds its number of classes.
MAX_CLASS_CELLS = 2**27
#: Most classes of one labelled selector, whatever its width.
MAX_CLASSES = 10_000


def max_classes(n_features: int) -> int:
    """How many classes a labelled selector over ``n_features`` features may discover."""
    return max(2, min(MAX_CLASSES, MAX_CLASS_CELLS // max(n_features, 1)))


def rejected(log_id: str, reason: str) -> ChunkRejected:
    """The 422 a producer gets for a chunk that was appended but could not be applied."""
    return ChunkRejected(
        f"the chunk (log id {log_id}) was accepted but could not be applied, and was set aside; "
        f"nothing of it is in the state: {reason}",
        log_id=log_id,
    )


def _may_hold(head: Head, log_id: str, stream_incarnation: str | None = None) -> bool:
    """Whether ``log_id`` can be an entry of the selector at ``head``: one of its incarnation's
    (``keys.log_id_belongs``), or of its stream's incarnation for a selector attached to one;
    for a selector of an earlier release, any id after ``0-0``."""
    incarnation = head.incarnation if stream_incarnation is None else stream_incarnation
    if incarnation:
        return log_id_belongs(incarnation, log_id)
    return log_id != INITIAL_CURSOR


#: What a chunk is pushed to: a selector, or a stream.
Target = TypeVar("Target", SelectorMeta, StreamMeta)
Answer = TypeVar("Answer")


@dataclass(frozen=True)
class Push:
    """A chunk as its producer sent it: the body and its media type, its Idempotency-Key,
    whether the producer waits until it is applied, and the label (or target) column of a
    table body."""

    body: bytes
    media_type: str
    idempotency_key: str | None = None
    wait: bool = True
    labels: str | None = None
    target: str | None = None


async def once_more_if_stale(
    target: Target,
    attempt: Callable[[Target], Awaitable[Answer]],
    current: Callable[[], Awaitable[Target]],
) -> Answer:
    """``attempt(target)``, where ``target`` may be a cached description: attempted again
    against the ``current`` one when the append found it stale (the name deleted and created
    again since), or when it refused the chunk and the name holds another incarnation now."""
    try:
        return await attempt(target)
    except StaleMeta:
        target = await current()
    except InvalidInput:
        fresh = await current()
        if fresh.incarnation == target.incarnation:
            raise
        target = fresh
    return await attempt(target)


async def stored_payload(payload: bytes, wait: bool) -> bytes:
    """The payload as the log keeps it: compressed when large and nobody waits for it
    (compressing pays for Redis: that many fewer bytes to receive, fsync and hold until a
    checkpoint; not for the producer who waits: it costs ~3 ms per MB each way)."""
    if not wait and len(payload) >= COMPRESS_FROM_BYTES:
        return await asyncio.to_thread(pack_payload, payload)
    return payload


@dataclass(frozen=True)
class Submitted:
    """An appended entry and, once applied, the version that contains it (of the partition
    that took it, for a partitioned selector)."""

    outcome: AppendOutcome
    version: int | None
    items_seen: int | None
    partition: int | None = None

    @property
    def applied(self) -> bool:
        return self.version is not None


@dataclass(frozen=True)
class Receipt:
    """The answer to a write, and whether it is final (200) or pending (202)."""

    result: Result
    applied: bool


class Ingest:
    def __init__(
        self,
        store: SelectorStore,
        reader: StateReader,
        applier: Applier,
        decisions: Decisions,
        settings: Settings,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.reader = reader
        self.applier = applier
        self.decisions = decisions
        self.settings = settings
        self.metrics = metrics
        # Chunks without a key go to a partitioned selector's partitions in turn.
        self._turns = itertools.count()
        #: What each write route answers, by the route the kinds declare.
        self._receipts = {
            RowsFormat.route: self._row_receipt,
            ColumnsFormat.route: self._column_receipt,
        }

    async def push(self, meta: SelectorMeta, route: str, push: Push) -> Receipt:
        """Append a chunk that came to ``POST .../<route>``; answer with the version that
        contains it (200), or pending (202).

        ``meta`` may be this process's cached description (``Registry.cached_meta``): the
        append refuses a chunk checked against an earlier incarnation of the name (StaleMeta),
        and a chunk refused against it is looked at again when the name holds another
        incarnation now; either way it is checked again against the selector the name holds.
        """
        return await once_more_if_stale(
            meta,
            lambda target: self._push(target, route, push),
            lambda: self.store.registry.get_meta(meta.name),
        )

    async def _push(self, meta: SelectorMeta, route: str, push: Push) -> Receipt:
        method = get_method(meta.method)
        kind = chunk_format(method.chunk_kind)
        require_route(kind, meta, route)
        if meta.stream is not None:
            await self._refuse_attached(meta)

        async def adopt(names: tuple[str, ...]) -> list[str]:
            return await self.store.registry.adopt_feature_names(meta.name, names)

        async def itself(target: SelectorMeta) -> list[SelectorMeta]:
            return [target]

        meta, decoded = await self.validated(kind, push, meta, adopt, itself)
        entry = Entry(
            await stored_payload(decoded.payload, push.wait),
            decoded.items,
            decoded.digest,
            push.idempotency_key,
            decoded.names,
        )
        submitted = await self.submit(meta, entry, push.wait, decoded.chunk)
        # The route's own answer (``require_route`` made sure it is the kind's route).
        return await self._receipts[route](meta, kind, submitted, decoded.items)

    async def _refuse_attached(self, meta: SelectorMeta) -> None:
        """Conflict for a chunk pushed to a selector attached to a stream: it applies its
        stream's chunks (``APPEND`` refuses it too; this says so before the body is decoded,
        once the description, which a detach changes, is read afresh)."""
        current = await self.store.registry.get_meta(meta.name)
        if current.stream is not None:
            raise attached_to_stream(meta.name, current.stream)

    async def validated(
        self,
        kind: ChunkFormat,
        push: Push,
        target: Target,
        adopt: Callable[[tuple[str, ...]], Awaitable[list[str]]],
        class_holders: Callable[[Target], Awaitable[list[SelectorMeta]]],
    ) -> tuple[Target, ValidChunk]:
        """``push`` decoded as a chunk of ``kind`` for ``target`` (a selector or a stream),
        and the target as it was checked against; a 4xx is counted as a rejected chunk.

        The first chunk that names its columns names a target created without names
        (``adopt``: the names it took); a chunk that named them otherwise at the same moment
        lost the race and is decoded again against the names taken. A labelled chunk keeps
        each of ``class_holders`` within its class budget and holds only values each one's
        method takes (``RefusesValues``)."""
        try:
            decoded = await self.decode(kind, push, target)
            if decoded.adopt is not None:
                adopted = await adopt(decoded.adopt)
                if adopted != list(decoded.adopt):
                    target = dataclasses.replace(target, feature_names=adopted)
                    decoded = await self.decode(kind, push, target)
            if decoded.classes:
                refusing: dict[str, RefusesValues] = {}
                for selector in await class_holders(target):
                    await self.check_class_budget(selector, decoded.classes)
                    method = get_method(selector.method)
                    if offers(method, RefusesValues):
                        refusing[selector.method] = method
                for refuser in refusing.values():  # once per method, off the loop when large
                    if len(push.body) <= INLINE_DECODE_BYTES:
                        refuser.refuse_values(decoded.chunk)
                    else:
                        await asyncio.to_thread(refuser.refuse_values, decoded.chunk)
        except InvalidInput as exc:
            self.metrics.chunks_rejected.labels(str(exc.status)).inc()
            raise
        return target, decoded

    async def decode(self, kind: ChunkFormat, push: Push, meta: ChunkTarget) -> ValidChunk:
        """A body validated as a chunk of ``kind`` for ``meta`` (a selector, or a stream):
        small bodies on the event loop, the rest (and every ``.npz``) in a worker thread."""
        body, media_type = push.body, push.media_type
        limit = self.settings.max_body_bytes
        with tracing.span(
            "sift.validate", {"sift.bytes": len(body), "sift.media_type": media_type}
        ):
            if len(body) <= INLINE_DECODE_BYTES and media_type not in INFLATING_MEDIA_TYPES:
                return kind.decode(body, media_type, meta, limit, push.labels, push.target)
            return await asyncio.to_thread(
                kind.decode, body, media_type, meta, limit, push.labels, push.target
            )

    async def submit(
        self, meta: SelectorMeta, entry: Entry, wait: bool, chunk: Chunk | None = None
    ) -> Submitted:
        """Append ``entry`` with its idempotency record, then wait (bounded) for the applier.

        ``entry`` is checked against ``meta``'s incarnation (or its partition's, which takes
        it). ``chunk`` (the decoded chunk the payload encodes) is handed to this process's
        applier, which then neither reads the payload back nor decodes it again; the log stays
        the truth (another replica, or this one after a restart, reads the payload).
        Raises ``ChunkRejected`` when the entry was set aside instead of applied (now, or when
        a request with the same key first came).
        """
        partition = None
        if meta.partitioned:
            partition = self._partition_for(meta, entry.key)
            meta = meta.partition(partition)
        entry = dataclasses.replace(entry, incarnation=meta.incarnation)
        traced: tracing.Attributes = {
            "sift.selector": meta.name,
            "sift.method": meta.method,
            "sift.rows": entry.items,
        }
        if wait and chunk is not None and not entry.merge and not entry.names:
            # The direct path: this process's drain holds the selector's lease and state.
            direct = await self.applier.try_direct(meta.name, meta.incarnation, chunk, entry)
            if direct is not None:
                self.metrics.labelled(self.metrics.chunks_accepted, meta.method).inc()
                return Submitted(direct, direct.applied_version, direct.items_seen, partition)
        outcome = await self._append(meta, entry, traced)
        if outcome.rejected is not None:
            raise rejected(outcome.log_id, outcome.rejected)
        if outcome.applied_version is not None:
            return Submitted(outcome, outcome.applied_version, outcome.items_seen, partition)
        handed = None if outcome.duplicate else chunk
        self.applier.appended(
            outcome.log_id, handed, len(entry.payload), [(meta.name, meta.incarnation)]
        )
        if not wait:
            return Submitted(outcome, None, None, partition)
        version, items_seen = await self._applied(meta, entry, outcome, traced)
        return Submitted(outcome, version, items_seen, partition)

    async def _append(
        self, meta: SelectorMeta, entry: Entry, traced: tracing.Attributes
    ) -> AppendOutcome:
        """``entry`` appended to the log of ``meta`` (traced, and counted)."""
        with tracing.span("sift.append", traced) as span:
            outcome = await self.store.log.append(meta.name, entry)
            tracing.annotate(
                span, {"sift.log_id": outcome.log_id, "sift.duplicate": outcome.duplicate}
            )
            if not outcome.duplicate:
                tracing.appended(meta.name, outcome.log_id)  # the applier's span links to it
        if outcome.duplicate:
            self.metrics.chunks_duplicate.inc()
        else:
            self.metrics.labelled(self.metrics.chunks_accepted, meta.method).inc()
        return outcome

    async def _applied(
        self,
        meta: SelectorMeta,
        entry: Entry,
        outcome: AppendOutcome,
        traced: tracing.Attributes,
    ) -> tuple[int | None, int | None]:
        """The version that applied the appended entry and its items seen, once the applier
        applied it within ``SIFT_APPLY_WAIT_SECONDS`` (both None if not yet)."""
        name = meta.name
        with tracing.span("sift.wait", traced) as span:
            settled = await self.applier.wait_applied(
                name, outcome.log_id, self.settings.apply_wait_seconds, meta.incarnation
            )
            if settled is not None:
                tracing.annotate(span, {"sift.version": settled.version})
        if settled is None:
            return None, None
        if settled.rejected:
            raise rejected(outcome.log_id, settled.rejected)
        if settled.rejected == "":  # the commit that applied it, as this process saw it
            return settled.version, settled.items_seen
        # Heard of from afar (or read off the head): whether it was applied, and by which
        # version exactly (a repeated request answers what the first one did), Redis says.
        reason, record = await self.store.log.settled(name, outcome.log_id, entry.key)
        if reason is not None:
            raise rejected(outcome.log_id, reason)
        version, items_seen = settled.version, settled.items_seen
        if record is not None and record.applied_version is not None:
            version = record.applied_version
            items_seen = record.items_seen if record.items_seen is not None else items_seen
        return version, items_seen

    def _partition_for(self, meta: SelectorMeta, idempotency_key: str | None) -> int:
        """The partition that takes a chunk: by its Idempotency-Key (so that every retry goes
        to the same partition's log, where the key is remembered), else in turn."""
        if idempotency_key is not None:
            return zlib.crc32(idempotency_key.encode()) % meta.partitions
        return next(self._turns) % meta.partitions

    async def _row_receipt(
        self, meta: SelectorMeta, kind: ChunkFormat, submitted: Submitted, items: int
    ) -> Receipt:
        """What ``POST .../chunks`` answers: rows counted and acknowledged as rows."""
        outcome = submitted.outcome
        if not submitted.applied:
            pending = ChunkPending(
                log_id=outcome.log_id,
                rows=items,
                duplicate=outcome.duplicate,
                partition=submitted.partition,
            )
            return Receipt(pending, False)
        assert submitted.version is not None and submitted.items_seen is not None
        applied = ChunkOut(
            version=submitted.version,
            rows_seen=submitted.items_seen,
            rows=items,
            duplicate=outcome.duplicate,
            log_id=outcome.log_id,
            partition=submitted.partition,
        )
        return Receipt(applied, True)

    async def _column_receipt(
        self, meta: SelectorMeta, kind: ChunkFormat, submitted: Submitted, items: int
    ) -> Receipt:
        """What ``POST .../features`` answers: the columns' indices, and what the method did
        with them on arrival (decided on each, or stored them)."""
        outcome = submitted.outcome
        if not submitted.applied:
            waiting = FeaturesPending(
                log_id=outcome.log_id,
                columns=items,
                first_index=outcome.first,
                duplicate=outcome.duplicate,
            )
            return Receipt(waiting, False)
        assert submitted.version is not None and submitted.items_seen is not None
        method = get_method(meta.method)
        if offers(method, DecidesOnArrival):
            _head, decided = await self.decisions.decided(meta, method, kind, outcome.first, items)
            answer: Result = FeaturesOut(
                version=submitted.version,
                features_seen=submitted.items_seen,
                duplicate=outcome.duplicate,
                log_id=outcome.log_id,
                decisions=decided,
            )
        else:
            answer = ColumnsStored(
                version=submitted.version,
                features_seen=submitted.items_seen,
                duplicate=outcome.duplicate,
                log_id=outcome.log_id,
                columns=items,
                first_index=outcome.first,
            )
        return Receipt(answer, True)

    def merge_receipt(self, submitted: Submitted, merged: Merged, items: int) -> Receipt:
        """What a merge's requester is told (a merge counts the samples it adds as rows)."""
        outcome = submitted.outcome
        if not submitted.applied:
            pending = ChunkPending(
                log_id=outcome.log_id, rows=items, duplicate=outcome.duplicate, merged=merged
            )
            return Receipt(pending, False)
        assert submitted.version is not None and submitted.items_seen is not None
        answer = MergeOut(
            version=submitted.version,
            rows_seen=submitted.items_seen,
            rows=items,
            duplicate=outcome.duplicate,
            log_id=outcome.log_id,
            merged=merged,
        )
        return Receipt(answer, True)

    async def status(self, name: str, log_id: str, partition: int | None = None) -> ChunkStatus:
        """Where an appended chunk is: ``pending``, ``applied`` (in the current version at the
        latest) or ``rejected`` (with the reason). A partitioned selector's chunk is looked up
        in the partition its answer named."""
        try:
            parse_stream_id(log_id)
        except ValueError:
            raise InvalidInput(
                f"expected a log id like '1718000000000-0' (as a chunk's answer gives it); "
                f"got {log_id[:60]!r}"
            ) from None
        selector = await self.reader.described(name)
        meta, kind = selector.meta, selector.kind
        if meta.partitioned:
            if partition is None or partition >= meta.partitions:
                raise InvalidInput(
                    f"selector '{name}' has {meta.partitions} partitions: ask with ?partition= "
                    f"the partition the chunk's answer named (0 to {meta.partitions - 1}); "
                    f"got {partition}"
                )
            name = meta.partition(partition).name
        head = await self.store.registry.get_head(name)
        # An attached selector's log ids are its stream's (they carry the stream's incarnation).
        if not _may_hold(head, log_id, meta.stream_incarnation if meta.stream else None):
            raise NotFound(f"selector '{name}' has no chunk with log id '{log_id}'")
        counts = seen(kind, head)
        reason = None
        if not is_applied(head, log_id) and not await self.store.log.in_log(name, log_id):
            # Applied, and its log entry covered by a checkpoint, between the two reads: look
            # again.
            head = await self.store.registry.get_head(name)
            counts = seen(kind, head)
            if not is_applied(head, log_id):
                raise NotFound(f"selector '{name}' has no chunk with log id '{log_id}'")
        if not is_applied(head, log_id):
            status: Literal["pending", "applied", "rejected"] = "pending"
        else:
            reason = await self.store.log.rejection(name, log_id)
            status = "applied" if reason is None else "rejected"
        return ChunkStatus(
            log_id=log_id,
            status=status,
            applied=status == "applied",
            version=head.version,
            rows_seen=counts.rows_seen,
            features_seen=counts.features_seen,
            reason=reason,
        )

    async def check_class_budget(self, meta: SelectorMeta, classes: tuple[Label, ...]) -> None:
        """422 if the chunk would take the selector past ``max_classes`` (a row of sums each).

        Checked against the committed classes: chunks racing each other may overshoot by what
        they bring together, which stays bounded by the per-chunk limit.
        """
        if meta.partitioned:  # the classes of every partition together
            _head, state = await self.reader.state(meta.name, [])
            known = stored_classes(state)
        else:
            _head, fields = await self.store.checkpoints.read_state_fields(
                meta.name, [SCALARS_FIELD]
            )
            known = stored_classes(decode_state(fields)) if fields.get(SCALARS_FIELD) else []
        seen_before = {(type(label), label) for label in known}
        new = sum(1 for label in classes if (type(label), label) not in seen_before)
        budget = max_classes(meta.size)
        if len(known) + new > budget:
            raise InvalidInput(
                f"selector '{meta.name}' may hold at most {budget} classes (class sums of "
                f"{meta.size} features each); it has {len(known)} and this chunk brings "
                f"{new} new"
            )
