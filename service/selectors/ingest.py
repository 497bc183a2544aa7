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
from dataclasses import dataclass
from typing import Literal

from service import tracing
from service.algorithms import get_method
from service.algorithms.base import DecidesOnArrival, offers
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
from service.store.records import AppendOutcome, Entry, Head, SelectorMeta
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

    async def push(
        self,
        meta: SelectorMeta,
        route: str,
        body: bytes,
        media_type: str,
        idempotency_key: str | None,
        wait: bool,
        labels: str | None = None,
    ) -> Receipt:
        """Append a chunk that came to ``POST .../<route>``; answer with the version that
        contains it (200), or pending (202). ``labels`` names the label column of a table body.

        ``meta`` may be this process's cached description (``Registry.cached_meta``): the
        append refuses a chunk checked against an earlier incarnation of the name (StaleMeta),
        and a chunk refused against it is looked at again when the name holds another
        incarnation now; either way it is checked again against the selector the name holds.
        """
        try:
            return await self._push(meta, route, body, media_type, idempotency_key, wait, labels)
        except StaleMeta:
            meta = await self.store.registry.get_meta(meta.name)
        except InvalidInput:
            current = await self.store.registry.get_meta(meta.name)
            if current.incarnation == meta.incarnation:
                raise
            meta = current
        return await self._push(meta, route, body, media_type, idempotency_key, wait, labels)

    async def _push(
        self,
        meta: SelectorMeta,
        route: str,
        body: bytes,
        media_type: str,
        idempotency_key: str | None,
        wait: bool,
        labels: str | None,
    ) -> Receipt:
        method = get_method(meta.method)
        kind = chunk_format(method.chunk_kind)
        require_route(kind, meta, route)
        if meta.stream is not None:
            await self._refuse_attached(meta)
        try:
            decoded = await self.decode(kind, body, media_type, meta, labels)
            if decoded.adopt is not None:
                # The first chunk that names its columns names a selector created without
                # names; a chunk that named them otherwise at the same moment lost the race:
                # decoded again against the names the selector took.
                adopted = await self.store.registry.adopt_feature_names(meta.name, decoded.adopt)
                if adopted != list(decoded.adopt):
                    meta = dataclasses.replace(meta, feature_names=adopted)
                    decoded = await self.decode(kind, body, media_type, meta, labels)
            if decoded.classes:
                await self.check_class_budget(meta, decoded.classes)
        except InvalidInput as exc:
            self.metrics.chunks_rejected.labels(str(exc.status)).inc()
            raise
        payload = decoded.payload
        if not wait and len(payload) >= COMPRESS_FROM_BYTES:
            # Compressing pays for Redis (that many fewer bytes to receive, fsync and hold until
            # a checkpoint), not for the producer who waits: it costs ~3 ms per MB each way.
            payload = await asyncio.to_thread(pack_payload, payload)
        submitted = await self.submit(
            meta,
            payload,
            decoded.items,
            decoded.digest,
            idempotency_key,
            wait,
            decoded.names,
            chunk=decoded.chunk,
        )
        # The route's own answer (``require_route`` made sure it is the kind's route).
        return await self._receipts[route](meta, kind, submitted, decoded.items)

    async def _refuse_attached(self, meta: SelectorMeta) -> None:
        """Conflict for a chunk pushed to a selector attached to a stream: it applies its
        stream's chunks (``APPEND`` refuses it too; this says so before the body is decoded,
        once the description, which a detach changes, is read afresh)."""
        current = await self.store.registry.get_meta(meta.name)
        if current.stream is not None:
            raise attached_to_stream(meta.name, current.stream)

    async def decode(
        self,
        kind: ChunkFormat,
        body: bytes,
        media_type: str,
        meta: ChunkTarget,
        labels: str | None = None,
    ) -> ValidChunk:
        """A body validated as a chunk of ``kind`` for ``meta`` (a selector, or a stream):
        small bodies on the event loop, the rest (and every ``.npz``) in a worker thread."""
        limit = self.settings.max_body_bytes
        with tracing.span(
            "sift.validate", {"sift.bytes": len(body), "sift.media_type": media_type}
        ):
            if len(body) <= INLINE_DECODE_BYTES and media_type not in INFLATING_MEDIA_TYPES:
                return kind.decode(body, media_type, meta, limit, labels)
            return await asyncio.to_thread(kind.decode, body, media_type, meta, limit, labels)

    async def submit(
        self,
        meta: SelectorMeta,
        payload: bytes,
        items: int,
        digest: str,
        idempotency_key: str | None,
        wait: bool,
        item_names: tuple[str, ...] = (),
        merge: bool = False,
        chunk: Chunk | None = None,
    ) -> Submitted:
        """Append with the idempotency record, then wait (bounded) for the applier.

        ``chunk`` (the decoded chunk the payload encodes) is handed to this process's applier,
        which then neither reads the payload back nor decodes it again; the log stays the truth
        (another replica, or this one after a restart, reads the payload).
        Raises ``ChunkRejected`` when the entry was set aside instead of applied (now, or when
        a request with the same key first came).
        """
        partition = None
        if meta.partitioned:
            partition = self._partition_for(meta, idempotency_key)
            meta = meta.partition(partition)
        name = meta.name
        entry = Entry(payload, items, digest, idempotency_key, item_names, merge, meta.incarnation)
        traced: tracing.Attributes = {
            "sift.selector": name,
            "sift.method": meta.method,
            "sift.rows": items,
        }
        if wait and chunk is not None and not merge and not item_names:
            # The direct path: this process's drain holds the selector's lease and state.
            direct = await self.applier.try_direct(
                name,
                meta.incarnation,
                chunk,
                entry,
            )
            if direct is not None:
                self.metrics.labelled(self.metrics.chunks_accepted, meta.method).inc()
                return Submitted(direct, direct.applied_version, direct.items_seen, partition)
        with tracing.span("sift.append", traced) as span:
            outcome = await self.store.log.append(name, entry)
            tracing.annotate(
                span, {"sift.log_id": outcome.log_id, "sift.duplicate": outcome.duplicate}
            )
            if not outcome.duplicate:
                tracing.appended(name, outcome.log_id)  # the applier's span links to this one
        if outcome.duplicate:
            self.metrics.chunks_duplicate.inc()
        else:
            self.metrics.labelled(self.metrics.chunks_accepted, meta.method).inc()
        if outcome.rejected is not None:
            raise rejected(outcome.log_id, outcome.rejected)
        if outcome.applied_version is not None:
            return Submitted(outcome, outcome.applied_version, outcome.items_seen, partition)
        handed = None if outcome.duplicate else chunk
        self.applier.appended(outcome.log_id, handed, len(payload), [(name, meta.incarnation)])
        if not wait:
            return Submitted(outcome, None, None, partition)
        with tracing.span("sift.wait", traced) as span:
            settled = await self.applier.wait_applied(
                name, outcome.log_id, self.settings.apply_wait_seconds, meta.incarnation
            )
            if settled is not None:
                tracing.annotate(span, {"sift.version": settled.version})
        if settled is None:
            return Submitted(outcome, None, None, partition)
        if settled.rejected:
            raise rejected(outcome.log_id, settled.rejected)
        if settled.rejected == "":  # the commit that applied it, as this process saw it
            return Submitted(outcome, settled.version, settled.items_seen, partition)
        # Heard of from afar (or read off the head): whether it was applied, and by which
        # version exactly (a repeated request answers what the first one did), Redis says.
        reason, record = await self.store.log.settled(name, outcome.log_id, idempotency_key)
        if reason is not None:
            raise rejected(outcome.log_id, reason)
        version, items_seen = settled.version, settled.items_seen
        if record is not None and record.applied_version is not None:
            version = record.applied_version
            items_seen = record.items_seen if record.items_seen is not None else items_seen
        return Submitted(outcome, version, items_seen, partition)

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
