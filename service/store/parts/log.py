"""The log part of the store: each selector's ingest log.

Appends (each with its idempotency record, in one script; appends that arrive together go to
Redis together, ``GroupCommit``), the pending set that marks selectors with entries nobody
applied yet, what an applier takes from the log and reads back (``take``, ``pending``,
``log_between``), and what became of an entry (``settled``, ``rejection``, ``in_log``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, cast

from redis import exceptions as rexc

from service.errors import SiftError, StaleApplier, StaleMeta
from service.store.core import PIPELINE_BATCH, UNREACHABLE, Room, StoreCore, not_found
from service.store.keys import (
    INITIAL_CURSOR,
    SelectorKeys,
    StreamKeys,
    compare_stream_ids,
    parse_stream_id,
)
from service.store.parts.appends import Appends, LogTarget, outcome, record_keys
from service.store.parts.log_source import SOURCE_FIELDS, LogSource, through
from service.store.parts.registry import Registry
from service.store.records import (
    AppendOutcome,
    Entry,
    Lease,
    LogEntry,
    Taken,
    TakeRequest,
    as_text,
    pairs_from_reply,
)
from service.store.redis_errors import map_redis_errors
from service.store.refusals import append_refusal
from service.store.replies import IDEM_FIELDS, first_outcome_from_idem, log_entry_from_reply

log = logging.getLogger("sift.store")

#: Most marks of the pending set one sweep looks at (the oldest first).
PENDING_SWEEP_LIMIT = 10_000
#: How soon a cluster's pending marks are tried again while the set's master does not answer.
MARK_RETRY_SECONDS = 1.0


class Log(Room):
    """The ingest log: appends, idempotency, pending marks, takes and reads. (An append that
    finds its selector gone has the registry forget its description.)"""

    _to_mark: set[str]
    _marking: asyncio.Task[None] | None

    def __init__(self, core: StoreCore, registry: Registry) -> None:
        super().__init__(core)
        self.registry = registry
        #: Every append to a log, this selector's and a stream's (``Appends``).
        self.appends = Appends(core, self.mark_pending)
        # A cluster's pending marks, set in the background (``_mark_pending``).
        self._to_mark = set()
        self._marking = None

    @map_redis_errors
    async def append(self, name: str, entry: Entry) -> AppendOutcome:
        """Append ``entry`` to selector ``name``'s log (and its idempotency record, atomically).

        The names of its items are registered atomically with the append. StaleMeta if the
        name holds another incarnation than the entry's; Conflict when a name is already taken
        or is ``f<j>`` for another index ``j`` (the name shown for unnamed feature ``j``).
        """
        reply, _attached = await self.appends.append(LogTarget("selector", name), entry)
        status = as_text(reply[0])
        if status == "NOTFOUND":
            self.registry.forget_meta(name)
            raise not_found(name)
        if status == "INCARNATION":
            self.registry.forget_meta(name)
            raise StaleMeta(f"selector '{name}' was deleted and created again; describe it again")
        if status == "ATTACHED":
            self.registry.forget_meta(name)
        refused = append_refusal(status, reply, "selector", name, entry.key)
        if refused is not None:
            raise refused
        appended = outcome(reply)
        if appended is None:
            raise SiftError(f"appending to selector '{name}' failed: {status}")
        return appended

    # -- pending marks -----------------------------------------------------------------------

    def mark_pending(self, name: str) -> None:
        """Mark ``name`` in the pending set, in the background (a cluster's appends: the set
        lives on another master, which the append must not wait for, nor fail with, while it
        fails over). Marks that come together go in one ``ZADD``; while the set's master does
        not answer they are kept and tried again every ``MARK_RETRY_SECONDS``. Best effort:
        the appender's own applier runs anyway, and every start's full sweep finds what a
        crash left unmarked."""
        self._to_mark.add(name)
        if self._marking is None or self._marking.done():
            self._marking = asyncio.create_task(self._mark_queued(), name="pending-marks")

    async def _mark_queued(self) -> None:
        while self._to_mark:
            names, self._to_mark = self._to_mark, set()
            # This process's clock: a mark only has to change when a name is marked again
            # (``UNMARK_PENDING`` compares), and asking Redis for the time would reach a node
            # that may be the one down.
            score = time.time_ns() // 1_000_000
            try:
                await self.core.redis.zadd(self.core.pending_key, dict.fromkeys(names, score))
            except (rexc.RedisError, rexc.RedisClusterException) as exc:
                log.warning("could not mark %d selectors as pending (%s)", len(names), exc)
                self._to_mark |= names
                await asyncio.sleep(MARK_RETRY_SECONDS)

    async def stop_marking(self) -> None:
        """Stop the background marking (what is left unmarked, the next start sweeps)."""
        if self._marking is not None:
            self._marking.cancel()
            await asyncio.gather(self._marking, return_exceptions=True)

    async def _behind(self, names: Sequence[str]) -> list[bool | None]:
        """For each selector: whether its log (its own, or its stream's) holds entries after
        its cursor (False for one that is gone); None where its master (or its stream's) did
        not answer. Two pipelined reads per master at most: the heads, then the heads of the
        streams the attached ones read."""
        heads = await self.core.read_each(
            [self.core.keys(n).head for n in names],
            lambda pipe, key: pipe.hmget(key, SOURCE_FIELDS),
        )
        streams = sorted(
            {
                as_text(reply[2])
                for reply in heads
                if reply is not UNREACHABLE and reply[2] is not None
            }
        )
        stream_heads = dict(
            zip(
                streams,
                await self.core.read_each(
                    [StreamKeys(self.core.prefix, s).head for s in streams],
                    lambda pipe, key: pipe.hmget(key, ["last_id", "incarnation"]),
                ),
                strict=True,
            )
        )
        out: list[bool | None] = []
        for name, reply in zip(names, heads, strict=True):
            if reply is UNREACHABLE:
                out.append(None)
                continue
            cursor, last, stream, stream_incarnation = reply[:4]
            if cursor is None:  # gone
                out.append(False)
                continue
            if stream is not None:
                of_stream = stream_heads[as_text(stream)]
                if of_stream is UNREACHABLE:
                    out.append(None)
                    continue
                stream_last, incarnation = of_stream
                # A stream deleted (or another incarnation of it) feeds nothing.
                same = incarnation is not None and incarnation == stream_incarnation
                last = stream_last if same else None
                last = through(last, reply[6])
            elif last is None:  # earlier layout: the newest entry says
                last_id = await self.last_log_id(name)
                last = None if last_id is None else last_id.encode()
            out.append(last is not None and compare_stream_ids(as_text(last), as_text(cursor)) > 0)
        return out

    @map_redis_errors
    async def names_marked_pending(self, limit: int = PENDING_SWEEP_LIMIT) -> list[str]:
        """Selectors marked in the pending set whose logs hold entries after their cursor
        (the ``limit`` oldest marks, each checked on its head, pipelined; an attached
        selector's on its stream's head). Marks of selectors with nothing pending (or gone)
        are removed, unless an append marked them again since they were read. Costs one read
        when nothing is pending, however many selectors exist."""
        marked = cast(
            list[tuple[bytes, float]],
            await self.core.redis.zrange(self.core.pending_key, 0, limit - 1, withscores=True),
        )
        if not marked:
            return []
        names = self.core.keyed([as_text(member) for member, _score in marked])
        scores = {as_text(member): score for member, score in marked}
        behind = await self._behind(names)
        pending: list[str] = []
        done: list[Any] = []
        for name, is_behind in zip(names, behind, strict=True):
            if is_behind:
                pending.append(name)
            elif is_behind is False:  # None: its master is down, looked at again next time
                done += [name, f"{scores[name]:.0f}"]
        if done:
            await self.core.run("unmark_pending", [self.core.pending_key], done)
        return pending

    @map_redis_errors
    async def names_with_pending(self) -> list[str]:
        """Selectors with entries appended after their cursor (sorted); one small read each."""
        names = sorted(as_text(n) for n in await self.core.redis.smembers(self.core.registry_key))
        out: list[str] = []
        for start in range(0, len(names), PIPELINE_BATCH):
            batch = self.core.keyed(names[start : start + PIPELINE_BATCH])
            for name, is_behind in zip(batch, await self._behind(batch), strict=True):
                if is_behind:
                    out.append(name)
        return out

    async def _head_and_source(self, name: str) -> tuple[list[Any], LogSource]:
        """The head's ``SOURCE_FIELDS`` and where the selector's entries are; NotFound if
        it does not exist."""
        k = self.core.keys(name)
        reply = await self.core.redis.hmget(k.head, SOURCE_FIELDS)
        if reply[0] is None:
            raise not_found(name)
        return reply, self._source(k, reply[2], reply[3], reply[6])

    def _source(
        self, k: SelectorKeys, stream: Any, stream_incarnation: Any, cut: Any = None
    ) -> LogSource:
        if stream is None:
            return LogSource(k)
        return LogSource(
            StreamKeys(self.core.prefix, as_text(stream)),
            "" if stream_incarnation is None else as_text(stream_incarnation),
            None if cut is None else as_text(cut),
        )

    @map_redis_errors
    async def pending_count(self, name: str) -> int:
        """Log entries appended and not yet applied (or rejected); an attached selector's:
        its stream's entries after those it had applied."""
        k = self.core.keys(name)
        head, source = await self._head_and_source(name)
        entries, applied = head[4], head[5]
        if source.through is not None and compare_stream_ids(as_text(head[0]), source.through) >= 0:
            return 0  # cut by a detach, and applied through the cut
        if source.stream_incarnation is not None:
            stream = await self.core.redis.hmget(source.keys.head, ["entries", "incarnation"])
            if stream[1] is None or as_text(stream[1]) != source.stream_incarnation:
                return 0
            entries = stream[0]
        if entries is None:  # a head of the earlier layout: its log held only pending entries
            return int(await self.core.redis.xlen(k.log))
        return max(int(entries) - int(applied or 0), 0)

    # -- what became of an entry -------------------------------------------------------------

    @map_redis_errors
    async def idempotency_record(self, name: str, key: str) -> AppendOutcome | None:
        """The record of an idempotency key (``duplicate=True``: it exists), or None."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        for record in record_keys(k, key):
            pipe.hmget(record, IDEM_FIELDS)
        return first_outcome_from_idem(await pipe.execute())

    @map_redis_errors
    async def settled(
        self, name: str, log_id: str, key: str | None
    ) -> tuple[str | None, AppendOutcome | None]:
        """For an entry the cursor has passed, in one round trip: why it was rejected (None if
        it was applied) and its idempotency record (None without a key)."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.hget(k.rejected, log_id)
        for record in record_keys(k, key):
            pipe.hmget(record, IDEM_FIELDS)
        replies = await pipe.execute()
        reason = None if replies[0] is None else as_text(replies[0])
        return reason, first_outcome_from_idem(replies[1:])

    @map_redis_errors
    async def rejection(self, name: str, log_id: str) -> str | None:
        """Why entry ``log_id`` was rejected instead of applied, or None if it was not."""
        reason = await self.core.redis.hget(self.core.keys(name).rejected, log_id)
        return None if reason is None else as_text(reason)

    @map_redis_errors
    async def in_log(self, name: str, log_id: str) -> bool:
        """Whether ``log_id`` is an entry still in the log (appended, and not yet covered by a
        checkpoint: pending, or applied since the last one)."""
        parse_stream_id(log_id)
        _head, source = await self._head_and_source(name)
        if not source.holds(log_id):
            return False
        return bool(await self.core.redis.xrange(source.keys.log, log_id, log_id, count=1))

    @map_redis_errors
    async def last_log_id(self, name: str) -> str | None:
        """The id of the newest log entry ever appended (None when nothing was appended); an
        attached selector's: its stream's newest, if it is after the selector's cursor."""
        k = self.core.keys(name)
        head, source = await self._head_and_source(name)
        last = head[1]
        if source.stream_incarnation is not None:
            stream = await self.core.redis.hmget(source.keys.head, ["last_id", "incarnation"])
            if stream[1] is None or as_text(stream[1]) != source.stream_incarnation:
                return None
            last = through(stream[0], source.through)
            if last is None or compare_stream_ids(as_text(last), as_text(head[0])) <= 0:
                return None
        elif last is None:  # a head of the earlier layout: its log held only pending entries
            newest = await self.core.redis.xrevrange(k.log, count=1)
            last = newest[0][0] if newest else None
        return None if last is None or as_text(last) == INITIAL_CURSOR else as_text(last)

    # -- reading the log ---------------------------------------------------------------------

    @map_redis_errors
    async def pending(self, name: str, after: str, count: int) -> list[LogEntry]:
        """Up to ``count`` log entries with id > ``after``, oldest first (an attached
        selector's, from its stream's log)."""
        parse_stream_id(after)
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        _head, source = await self._head_and_source(name)
        entries: list[Any] = (
            await self.core.redis.xrange(
                source.keys.log, min=f"({after}", max=source.through or "+", count=count
            )
            or []
        )
        return [
            source.entry(log_id, fields)
            for log_id, fields in entries
            if source.holds(as_text(log_id))
        ]

    async def take(
        self,
        lease: Lease,
        after: str,
        count: int,
        forgive: Sequence[str] = (),
        held: Sequence[str] = (),
        counts: bool = True,
    ) -> tuple[int, list[LogEntry]]:
        """The applier's next entries (as ``pending``) and its attempt number on the first.

        The count is kept in Redis and cleared by the next commit, so an entry whose update
        kills every process that tries it is still recognised (see ``Applier``). ``forgive``
        takes back the last attempts of those lease holders first (``forgive_attempts``).
        Entries whose ids are in ``held`` (their chunks were handed to the caller) come without
        their payloads. With ``counts`` false the attempt is reported but not recorded (the
        take then writes nothing, see ``TAKE``). StaleApplier if ``lease`` is no longer held
        (expired, taken over, the selector deleted, or detached from the stream the lease
        says it reads).

        A selector attached to a stream reads the stream's log (``STREAM_READ``, the stream's
        slot), then counts its attempt under its lease (``TAKE_ATTEMPT``, its own slot).
        """
        request = TakeRequest(after, count, tuple(forgive), tuple(held), counts=counts)
        taken = await self.take_for(lease, request)
        return taken.attempt, taken.entries

    @map_redis_errors
    async def take_for(self, lease: Lease, request: TakeRequest) -> Taken:
        """``take`` as ``request`` says (its ``taken`` is left alone)."""
        if lease.stream is not None:
            return await self._take_from_stream(lease, request)
        keys, args = self.take_call(lease, request)
        return self.taken_from(lease, await self.core.run("take", keys, args))

    async def _take_from_stream(self, lease: Lease, request: TakeRequest) -> Taken:
        assert lease.stream is not None
        _check_take(request)
        source = LogSource(StreamKeys(self.core.prefix, lease.stream), lease.stream_incarnation)
        read = await self.core.run(
            "stream_read",
            [source.keys.head, source.keys.log],
            [
                lease.stream_incarnation,
                request.after,
                int(request.count),
                lease.stream_cut or "+",
                *request.held,
            ],
        )
        # A stream deleted, or created anew, feeds nothing: the selector has nothing to apply.
        raw = read[1] if as_text(read[0]) == "OK" else []
        entries = [source.entry(log_id, pairs_from_reply(fields)) for log_id, fields in raw]
        k = self.core.keys(lease.name)
        first = [entries[0].log_id] if entries else []
        reply = await self.core.run(
            "take_attempt",
            [k.head, k.attempts, k.lease],
            [
                lease.stream,
                lease.stream_cut or "",
                lease.holder,
                len(request.forgive),
                *request.forgive,
                *first,
            ],
        )
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "DETACHED":
            raise StaleApplier(
                f"selector '{lease.name}' no longer reads stream '{lease.stream}' (detached)"
            )
        if status == "CUT":
            raise StaleApplier(
                f"selector '{lease.name}' is being detached from stream '{lease.stream}': its "
                "lease was taken before the stream was cut for it"
            )
        if status == "LEASE":
            raise _lease_lost(lease)
        return Taken(int(reply[1]), entries)

    def take_call(self, lease: Lease, request: TakeRequest) -> tuple[list[str], list[Any]]:
        _check_take(request)
        k = self.core.keys(lease.name)
        args = [
            request.after,
            int(request.count),
            lease.holder,
            "1" if request.counts else "0",
            len(request.forgive),
        ]
        return [k.head, k.log, k.attempts, k.lease], [*args, *request.forgive, *request.held]

    def taken_from(self, lease: Lease, reply: Any) -> Taken:
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "LEASE":
            raise _lease_lost(lease)
        k = self.core.keys(lease.name)
        entries = [
            log_entry_from_reply(k, log_id, pairs_from_reply(fields)) for log_id, fields in reply[2]
        ]
        return Taken(int(reply[1]), entries)

    @map_redis_errors
    async def forgive_attempts(self, name: str, holders: Sequence[str]) -> None:
        """Take back the last attempt of each lease holder in ``holders`` (see ``take``): its
        process is alive and knows the entry was not why it made no progress."""
        if holders:
            await self.core.run("forgive_attempts", [self.core.keys(name).attempts], list(holders))

    @map_redis_errors
    async def wait_for_entry(
        self, name: str, after: str, timeout_s: float, stream: str | None = None
    ) -> bool:
        """Block (up to ``timeout_s``) until the log holds an entry after ``after``; whether it
        does. One blocking read on its own connection: an applier lingers on it for free.
        ``stream``: the stream an attached selector reads (its lease says which)."""
        parse_stream_id(after)
        log_key = (
            self.core.keys(name).log if stream is None else StreamKeys(self.core.prefix, stream).log
        )
        found = await self.core.redis.xread(
            {log_key: after}, count=1, block=max(int(timeout_s * 1000), 1)
        )
        return bool(found)

    @map_redis_errors
    async def log_between(self, name: str, after: str, through: str) -> list[LogEntry]:
        """The log entries with ``after`` < id <= ``through``, oldest first (what replay
        re-applies; an attached selector's from its stream's log); read in bounded batches."""
        parse_stream_id(after)
        parse_stream_id(through)
        _head, source = await self._head_and_source(name)
        out: list[LogEntry] = []
        start = f"({after}"
        while True:
            batch: list[Any] = (
                await self.core.redis.xrange(
                    source.keys.log, min=start, max=through, count=PIPELINE_BATCH
                )
                or []
            )
            out.extend(
                source.entry(log_id, fields)
                for log_id, fields in batch
                if source.holds(as_text(log_id))
            )
            if len(batch) < PIPELINE_BATCH:
                return out
            start = f"({as_text(batch[-1][0])}"


def _check_take(request: TakeRequest) -> None:
    """ValueError for a take after no stream id, or of no entries."""
    parse_stream_id(request.after)
    if request.count < 1:
        raise ValueError(f"count must be >= 1, got {request.count}")


def _lease_lost(lease: Lease) -> StaleApplier:
    """What a take answers when ``lease`` is no longer its applier's."""
    return StaleApplier(
        f"applier with token {lease.token} of selector '{lease.name}' lost its lease "
        "before reading its next entries"
    )
