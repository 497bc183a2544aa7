"""The log room of the store: each selector's ingest log.

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
from redis.asyncio.cluster import RedisCluster

from service.errors import Conflict, IdempotencyMismatch, InvalidInput, StaleApplier, StaleMeta
from service.store.core import PIPELINE_BATCH, UNREACHABLE, not_found
from service.store.group_commit import GroupCommit, QueuedAppend
from service.store.keys import (
    INITIAL_CURSOR,
    SelectorKeys,
    compare_stream_ids,
    idem_id,
    parse_stream_id,
)
from service.store.records import (
    IDEM_FIELDS,
    AppendOutcome,
    Lease,
    LogEntry,
    Taken,
    TakeRequest,
    as_opt_int,
    as_text,
    first_outcome_from_idem,
    log_entry_from_reply,
    pairs_from_reply,
)
from service.store.redis_errors import map_redis_errors
from service.store.rooms.registry import Registry

log = logging.getLogger("sift.store")

#: Most marks of the pending set one sweep looks at (the oldest first).
PENDING_SWEEP_LIMIT = 10_000
#: How soon a cluster's pending marks are tried again while the set's master does not answer.
MARK_RETRY_SECONDS = 1.0


def _record_keys(k: SelectorKeys, key: str) -> list[str]:
    """Where the idempotency record of ``key`` may be: named by its digest, or (an earlier
    release's, honoured until it expires) by the key itself."""
    return [k.idem(key), k.idem_legacy(key)]


class Log(Registry):
    """The ingest log: appends, idempotency, pending marks, takes and reads. (A registry room
    too: an append that finds its selector gone forgets its description.)"""

    _appends: GroupCommit
    _to_mark: set[str]
    _marking: asyncio.Task[None] | None

    def _init_log(self) -> None:
        # Appends to a selector that arrive together go to Redis together.
        self._appends = GroupCommit(self._append_together)
        # A cluster's pending marks, set in the background (``_mark_pending``).
        self._to_mark = set()
        self._marking = None

    @map_redis_errors
    async def append(
        self,
        name: str,
        payload: bytes,
        items: int,
        digest: str,
        idempotency_key: str | None,
        item_names: Sequence[str] = (),
        merge: bool = False,
        incarnation: str = "",
    ) -> AppendOutcome:
        """Append a chunk (and its idempotency record, atomically).

        ``items`` counts its rows (or feature columns). ``item_names`` names the items in order,
        or is empty; they are registered atomically with the append. ``incarnation``: the one
        the chunk was checked against (StaleMeta if the name holds another now). Raises
        Conflict when a name is already taken or is ``f<j>`` for another index ``j`` (the name
        shown for unnamed feature ``j``). ``merge`` marks an entry whose payload is another
        selector's summary.
        """
        if item_names and len(item_names) != items:
            raise ValueError(f"expected {items} item names, got {len(item_names)}")
        record_keys: list[str] = []
        if idempotency_key is not None:
            if not idempotency_key:
                raise InvalidInput("Idempotency-Key must not be empty")
            record_keys = _record_keys(self.keys(name), idempotency_key)
        args = [
            len(record_keys),
            len(item_names),
            payload,
            int(items),
            digest,
            "" if idempotency_key is None else idem_id(idempotency_key),
            self.idempotency_ttl_ms,
            self.idempotency_max_records,
            "1" if merge else "0",
            incarnation,
            *item_names,
        ]
        reply = await self._appends.submit(name, record_keys, args, len(payload))
        status = as_text(reply[0])
        if status == "NOTFOUND":
            self.forget_meta(name)
            raise not_found(name)
        if status == "INCARNATION":
            self.forget_meta(name)
            raise StaleMeta(f"selector '{name}' was deleted and created again; describe it again")
        if status == "MISMATCH":
            raise IdempotencyMismatch(
                f"Idempotency-Key '{idempotency_key}' was first used with a different body"
            )
        if status == "NAME_TAKEN":
            raise Conflict(
                f"feature name '{as_text(reply[1])}' is already used by feature "
                f"{as_text(reply[2])} of selector '{name}'; expected a new name"
            )
        if status == "NAME_RESERVED":
            raise Conflict(
                f"feature name '{as_text(reply[1])}' is reserved: 'f<i>' is the name shown for "
                f"unnamed feature i, and this column is feature {as_text(reply[2])}"
            )
        if status == "DUP":
            return AppendOutcome(
                log_id=as_text(reply[1]),
                duplicate=True,
                applied_version=as_opt_int(reply[2]),
                items_seen=as_opt_int(reply[3]),
                first=as_opt_int(reply[4]) or 0,
                rejected=None if len(reply) < 6 or reply[5] is None else as_text(reply[5]),
            )
        return AppendOutcome(
            log_id=as_text(reply[1]),
            duplicate=False,
            applied_version=None,
            items_seen=None,
            first=int(reply[2]),
        )

    async def _append_together(self, name: str, batch: list[QueuedAppend]) -> list[Any]:
        """The appends ``batch`` to ``name`` in one call of the append script (``GroupCommit``),
        acknowledged together."""
        k = self.keys(name)
        keys = [k.head, k.log, k.idems, k.feature_index, k.feature_name]
        # The pending mark goes with the append, atomically, where the script may touch the
        # pending set; in a cluster (another slot) it follows it.
        clustered = isinstance(self.redis, RedisCluster)
        if not clustered:
            keys.append(self._pending)
        args: list[Any] = [len(batch), "" if clustered else name]
        for queued in batch:
            keys += queued.keys
            args += queued.args
        replies: list[Any] = await self._run_acknowledged("append", keys, args)
        if clustered and any(as_text(reply[0]) == "NEW" for reply in replies):
            self._mark_pending(name)
        return replies

    # -- pending marks -----------------------------------------------------------------------

    def _mark_pending(self, name: str) -> None:
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
                await self.redis.zadd(self._pending, dict.fromkeys(names, score))
            except (rexc.RedisError, rexc.RedisClusterException) as exc:
                log.warning("could not mark %d selectors as pending (%s)", len(names), exc)
                self._to_mark |= names
                await asyncio.sleep(MARK_RETRY_SECONDS)

    async def _stop_marking(self) -> None:
        """Stop the background marking (what is left unmarked, the next start sweeps)."""
        if self._marking is not None:
            self._marking.cancel()
            await asyncio.gather(self._marking, return_exceptions=True)

    @map_redis_errors
    async def names_marked_pending(self, limit: int = PENDING_SWEEP_LIMIT) -> list[str]:
        """Selectors marked in the pending set whose logs hold entries after their cursor
        (the ``limit`` oldest marks, each checked on its head, pipelined). Marks of selectors
        with nothing pending (or gone) are removed, unless an append marked them again since
        they were read. Costs one read when nothing is pending, however many selectors exist."""
        marked = cast(
            list[tuple[bytes, float]],
            await self.redis.zrange(self._pending, 0, limit - 1, withscores=True),
        )
        if not marked:
            return []
        names = [as_text(member) for member, _score in marked]
        heads = await self.read_each(
            [self.keys(n).head for n in names],
            lambda pipe, key: pipe.hmget(key, ["cursor", "last_id"]),
        )
        pending: list[str] = []
        done: list[Any] = []
        for name, (_member, score), reply in zip(names, marked, heads, strict=True):
            if reply is UNREACHABLE:  # its master is down: looked at again next time
                continue
            cursor, last = reply
            if (
                cursor is not None
                and last is not None
                and compare_stream_ids(as_text(last), as_text(cursor)) > 0
            ):
                pending.append(name)
            else:
                done += [name, f"{score:.0f}"]
        if done:
            await self._run("unmark_pending", [self._pending], done)
        return pending

    @map_redis_errors
    async def names_with_pending(self) -> list[str]:
        """Selectors with entries appended after their cursor (sorted); one small read each."""
        names = sorted(as_text(n) for n in await self.redis.smembers(self._registry))
        out: list[str] = []
        for start in range(0, len(names), PIPELINE_BATCH):
            batch = self.keyed(names[start : start + PIPELINE_BATCH])
            heads = [self.keys(n).head for n in batch]
            replies = await self.read_each(
                heads, lambda pipe, key: pipe.hmget(key, ["cursor", "last_id"])
            )
            for n, reply in zip(batch, replies, strict=True):
                if reply is UNREACHABLE:  # its master is down: swept once it is back
                    continue
                cursor, last = reply
                if cursor is None:
                    continue
                if last is None:  # earlier layout: the newest entry says
                    last = await self.last_log_id(n)
                    if last is None:
                        continue
                if compare_stream_ids(as_text(last), as_text(cursor)) > 0:
                    out.append(n)
        return out

    @map_redis_errors
    async def pending_count(self, name: str) -> int:
        """Log entries appended and not yet applied (or rejected)."""
        k = self.keys(name)
        entries, applied = await self.redis.hmget(k.head, ["entries", "applied"])
        if entries is None:  # a head of the earlier layout: its log held only pending entries
            return int(await self.redis.xlen(k.log))
        return max(int(entries) - int(applied or 0), 0)

    # -- what became of an entry -------------------------------------------------------------

    @map_redis_errors
    async def idempotency_record(self, name: str, key: str) -> AppendOutcome | None:
        """The record of an idempotency key (``duplicate=True``: it exists), or None."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        for record in _record_keys(k, key):
            pipe.hmget(record, IDEM_FIELDS)
        return first_outcome_from_idem(await pipe.execute())

    @map_redis_errors
    async def settled(
        self, name: str, log_id: str, key: str | None
    ) -> tuple[str | None, AppendOutcome | None]:
        """For an entry the cursor has passed, in one round trip: why it was rejected (None if
        it was applied) and its idempotency record (None without a key)."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(k.rejected, log_id)
        for record in [] if key is None else _record_keys(k, key):
            pipe.hmget(record, IDEM_FIELDS)
        replies = await pipe.execute()
        reason = None if replies[0] is None else as_text(replies[0])
        return reason, first_outcome_from_idem(replies[1:])

    @map_redis_errors
    async def rejection(self, name: str, log_id: str) -> str | None:
        """Why entry ``log_id`` was rejected instead of applied, or None if it was not."""
        reason = await self.redis.hget(self.keys(name).rejected, log_id)
        return None if reason is None else as_text(reason)

    @map_redis_errors
    async def in_log(self, name: str, log_id: str) -> bool:
        """Whether ``log_id`` is an entry still in the log (appended, and not yet covered by a
        checkpoint: pending, or applied since the last one)."""
        parse_stream_id(log_id)
        return bool(await self.redis.xrange(self.keys(name).log, log_id, log_id, count=1))

    @map_redis_errors
    async def last_log_id(self, name: str) -> str | None:
        """The id of the newest log entry ever appended (None when nothing was appended)."""
        k = self.keys(name)
        last = await self.redis.hget(k.head, "last_id")
        if last is None:  # a head of the earlier layout: its log held only pending entries
            newest = await self.redis.xrevrange(k.log, count=1)
            last = newest[0][0] if newest else None
        return None if last is None or as_text(last) == INITIAL_CURSOR else as_text(last)

    # -- reading the log ---------------------------------------------------------------------

    @map_redis_errors
    async def pending(self, name: str, after: str, count: int) -> list[LogEntry]:
        """Up to ``count`` log entries with id > ``after``, oldest first."""
        parse_stream_id(after)
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.xrange(k.log, min=f"({after}", max="+", count=count)
        exists, entries = await pipe.execute()
        if not exists:
            raise not_found(name)
        return [log_entry_from_reply(k, log_id, fields) for log_id, fields in entries]

    @map_redis_errors
    async def take(
        self,
        lease: Lease,
        after: str,
        count: int,
        forgive: Sequence[str] = (),
        held: Sequence[str] = (),
    ) -> tuple[int, list[LogEntry]]:
        """The applier's next entries (as ``pending``) and its attempt number on the first.

        The count is kept in Redis and cleared by the next commit, so an entry whose update
        kills every process that tries it is still recognised (see ``Applier``). ``forgive``
        takes back the last attempts of those lease holders first (``forgive_attempts``).
        Entries whose ids are in ``held`` (their chunks were handed to the caller) come without
        their payloads. StaleApplier if ``lease`` is no longer held (expired, taken over, the
        selector deleted).
        """
        request = TakeRequest(after, count, tuple(forgive), tuple(held))
        keys, args = self._take_call(lease, request)
        taken = self._taken(lease, await self._run("take", keys, args))
        return taken.attempt, taken.entries

    def _take_call(self, lease: Lease, request: TakeRequest) -> tuple[list[str], list[Any]]:
        parse_stream_id(request.after)
        if request.count < 1:
            raise ValueError(f"count must be >= 1, got {request.count}")
        k = self.keys(lease.name)
        args = [request.after, int(request.count), lease.holder, len(request.forgive)]
        return [k.head, k.log, k.attempts, k.lease], [*args, *request.forgive, *request.held]

    def _taken(self, lease: Lease, reply: Any) -> Taken:
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "LEASE":
            raise StaleApplier(
                f"applier with token {lease.token} of selector '{lease.name}' lost its lease "
                "before reading its next entries"
            )
        k = self.keys(lease.name)
        entries = [
            log_entry_from_reply(k, log_id, pairs_from_reply(fields)) for log_id, fields in reply[2]
        ]
        return Taken(int(reply[1]), entries)

    @map_redis_errors
    async def forgive_attempts(self, name: str, holders: Sequence[str]) -> None:
        """Take back the last attempt of each lease holder in ``holders`` (see ``take``): its
        process is alive and knows the entry was not why it made no progress."""
        if holders:
            await self._run("forgive_attempts", [self.keys(name).attempts], list(holders))

    @map_redis_errors
    async def wait_for_entry(self, name: str, after: str, timeout_s: float) -> bool:
        """Block (up to ``timeout_s``) until the log holds an entry after ``after``; whether it
        does. One blocking read on its own connection: an applier lingers on it for free."""
        parse_stream_id(after)
        found = await self.redis.xread(
            {self.keys(name).log: after}, count=1, block=max(int(timeout_s * 1000), 1)
        )
        return bool(found)

    @map_redis_errors
    async def log_between(self, name: str, after: str, through: str) -> list[LogEntry]:
        """The log entries with ``after`` < id <= ``through``, oldest first (what replay
        re-applies); read in bounded batches."""
        parse_stream_id(after)
        parse_stream_id(through)
        k = self.keys(name)
        out: list[LogEntry] = []
        start = f"({after}"
        while True:
            batch: list[Any] = (
                await self.redis.xrange(k.log, min=start, max=through, count=PIPELINE_BATCH) or []
            )
            out.extend(log_entry_from_reply(k, log_id, fields) for log_id, fields in batch)
            if len(batch) < PIPELINE_BATCH:
                return out
            start = f"({as_text(batch[-1][0])}"
