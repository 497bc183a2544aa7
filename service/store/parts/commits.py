"""The commits part of the store: making a selector's next version, the commit records
replay reads, and the notices of commits every replica hears.

A commit writes the new state into a fresh hash, then flips the head to it in one
compare-and-set script, if the applier's lease is current and the head has not moved (the
write path: ``service.store.redis_store``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from redis import exceptions as rexc

from service.errors import CodecError, NotFound, SiftError, StaleApplier
from service.store.core import Room, StoreCore, check_state, not_found
from service.store.keys import WRITER_FIELD, parse_stream_id
from service.store.parts.appends import entry_args, log_keys, record_keys
from service.store.parts.log import Log
from service.store.records import (
    AppendOutcome,
    Checkpoint,
    CommitNotice,
    CommitRecord,
    DeletionNotice,
    Entry,
    Head,
    Lease,
    NextVersion,
    Rejection,
    Taken,
    TakeRequest,
    as_text,
)
from service.store.redis_errors import map_redis_errors, unavailable_for
from service.store.replies import checkpoint_from_reply

log = logging.getLogger("sift.store")

#: Rejected (dead-lettered) entries remembered per selector; older ones are forgotten.
REJECTIONS_KEPT = 10_000
#: Longest single wait for a commit notice (``commit_notices``): a closing listener is seen
#: this fast.
NOTICE_POLL_SECONDS = 1.0


class Commits(Room):
    """New versions (``commit``), the commit records and the commit notices. (A commit may
    carry the applier's next ``take`` from the log.)"""

    def __init__(self, core: StoreCore, log: Log) -> None:
        super().__init__(core)
        self.log = log

    @map_redis_errors
    async def commit(
        self,
        lease: Lease,
        version: NextVersion,
        applied_records: Sequence[str],
        rejections: Sequence[Rejection] = (),
        *,
        entries: int,
        then_take: TakeRequest | None = None,
    ) -> Head:
        """Make ``version`` if ``lease`` is current and the head is unmoved: one script.

        ``version.published`` is what readers read of the new version; the whole state stays
        with the applier until a checkpoint. ``entries`` counts the log entries committed past
        (applied or rejected) and ``version.cursor`` is the last of them; the commit record
        lets a later applier replay them. ``applied_records`` are the idempotency records
        (``LogEntry.idem_record``) of the entries the state contains; ``rejections`` the
        entries moved aside instead (their reasons are kept, bounded to ``REJECTIONS_KEPT`` per
        selector, and their idempotency records say so). Raises StaleApplier (lease lost,
        fenced, version moved; nothing is written), NotFound if the selector was deleted.

        ``then_take``: the applier's next ``take``, sent in the same round trip right after the
        commit (Redis runs them in that order); what it took goes to its ``taken`` (left None
        when it could not go along, or failed: the applier then takes as usual).
        """
        keys, args, state_key = self._commit_call(
            lease, version, applied_records, rejections, entries
        )
        # A selector that reads a stream takes from another slot: not in this round trip.
        if then_take is not None and not self.core.wait_replicas and lease.stream is None:
            reply, taken = await self._commit_then_take(lease, keys, args, then_take)
        else:
            reply, taken = await self.core.run_acknowledged("commit", keys, args), None
        head = self._committed(reply, lease, version, version.cursor, state_key)
        if then_take is not None:
            then_take.taken = taken
        return head

    @map_redis_errors
    async def append_and_commit(
        self,
        lease: Lease,
        version: NextVersion,
        entries: Sequence[Entry],
        *,
        checkpoint: Mapping[str, bytes | memoryview] | None = None,
    ) -> tuple[Head, list[AppendOutcome]] | str:
        """Append ``entries`` to the log of ``lease``'s selector (as ``append`` would, with
        their idempotency records) and commit ``version``, which applies them, in one script
        (``APPEND_COMMIT``): one round trip, one fsync. ``version.cursor`` is the head's cursor
        the update followed. The new head and each entry's outcome; or, when nothing was
        written, why (the lease or the version moved, entries are pending in the log, a key was
        seen before: the caller appends as usual).

        ``checkpoint``: the new version's whole state (``cut_state(...)``), sent
        instead of the entries' payloads when it is smaller: the entries go to the log without
        them and the state becomes the checkpoint in the same script (the head returned says
        so), so what a rebuild reads is that state, never the missing payloads.
        """
        if not entries:
            raise ValueError("append_and_commit needs at least one entry")
        k = self.core.keys(lease.name)
        keys, commit_args, state_key = self._commit_call(lease, version, (), (), len(entries))
        # COMMIT's twelve keys, then the log's, the checkpoint's, then each entry's record keys.
        checkpoint_key = k.checkpoint(version.version, lease.token, secrets.token_hex(8))
        keys = [*keys[:12], *log_keys(k)[2:], checkpoint_key]
        scalars, pairs = commit_args[:13], commit_args[13:]
        per_entry: list[Any] = []
        for entry in entries:
            entry.check()
            if checkpoint is not None:
                entry = dataclasses.replace(entry, payload=b"")
            records = record_keys(k, entry.key)
            keys += records
            per_entry += entry_args(self.core, entry, records)
        pairs_at = 13 + 3 + len(per_entry) + 1  # Lua's ARGV are 1-based
        pieces = _pairs(checkpoint or {})
        pieces_at = pairs_at + len(pairs) if pieces else 0
        args = [*scalars, len(entries), pairs_at, pieces_at, *per_entry, *pairs, *pieces]
        reply = await self.core.run_acknowledged("append_commit", keys, args)
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "REFUSED":
            return as_text(reply[1])
        appended = [
            AppendOutcome(as_text(log_id), False, version.version, version.items_seen, int(first))
            for log_id, first in reply[2]
        ]
        head = self._committed(reply[1], lease, version, appended[-1].log_id, state_key)
        if pieces:
            point = Checkpoint(checkpoint_key, head.version, head.cursor, head.items_seen)
            head = dataclasses.replace(head, checkpoint=point)
        return head, appended

    def _commit_call(
        self,
        lease: Lease,
        version: NextVersion,
        applied_records: Sequence[str],
        rejections: Sequence[Rejection],
        entries: int,
    ) -> tuple[list[str], list[Any], str]:
        """COMMIT's keys and arguments, and the new version's state key."""
        parse_stream_id(version.cursor)
        if version.items_seen < 0:
            raise ValueError(f"items_seen must be >= 0, got {version.items_seen}")
        fields = check_state(version.published)
        k = self.core.keys(lease.name)
        state_key = k.state(version.version, lease.token, secrets.token_hex(8))
        keys = [k.head, k.lease, k.fence, k.blobs, k.commits, state_key]
        keys += [k.rejected, k.rejected_order, k.attempts, k.checkpoints, k.history, k.log]
        keys += list(applied_records)
        listed = []
        for rejection in rejections:
            index = 0
            if rejection.idem_record:
                keys.append(rejection.idem_record)
                index = len(keys)  # Lua's KEYS are 1-based
            listed.append([rejection.log_id, rejection.reason, index])
        history = version.history
        args: list[Any] = [
            lease.holder,
            lease.token,
            version.after,
            version.cursor,
            int(version.items_seen),
            int(entries),
            WRITER_FIELD,
            json.dumps(listed),
            REJECTIONS_KEPT,
            "" if history is None else history.to_json(with_time=False),
            max(int(version.history_kept), 1),
            self.core.commits_channel,
            lease.name,
        ]
        return keys, args + _pairs(fields), state_key

    def _committed(
        self, reply: Any, lease: Lease, version: NextVersion, cursor: str, state_key: str
    ) -> Head:
        """The head a commit of ``version`` (its cursor moved to ``cursor``) made, as its reply
        says, or the error it answered."""
        status = as_text(reply[0])
        if status == "OK":
            return Head(
                version=int(reply[1]),
                cursor=cursor,
                items_seen=int(version.items_seen),
                state_key=state_key,
                updated_at=float(reply[2]),
                checkpoint=checkpoint_from_reply(reply[3:8]),
                incarnation=lease.incarnation,
            )
        who = f"applier with token {lease.token} of selector '{lease.name}'"
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "LEASE":
            holder = as_text(reply[1])
            detail = "its lease expired" if not holder else f"its lease is now held by {holder}"
            raise StaleApplier(f"{who} cannot commit: {detail}")
        if status == "FENCED":
            raise StaleApplier(
                f"{who} cannot commit: fenced, the current fencing token is {as_text(reply[1])}"
            )
        if status == "VERSION":
            raise StaleApplier(
                f"{who} cannot commit: expected version {version.after}, "
                f"the head is at version {as_text(reply[1])}"
            )
        if status == "CURSOR":
            raise SiftError(
                f"{who} tried to move the cursor back from {as_text(reply[1])} to {cursor}"
            )
        raise SiftError(f"commit of selector '{lease.name}' failed: {status}")

    async def _commit_then_take(
        self, lease: Lease, keys: list[str], args: list[Any], then_take: TakeRequest
    ) -> tuple[Any, Taken | None]:
        """The commit script and then the take script, pipelined on one connection (in a
        cluster, on the master of the selector's slot: every key has its hash tag)."""
        take_keys, take_args = self.log.take_call(lease, then_take)
        commit, take = self.core._scripts["commit"], self.core._scripts["take"]
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.execute_command("EVALSHA", commit.sha, len(keys), *keys, *args)
        pipe.execute_command("EVALSHA", take.sha, len(take_keys), *take_keys, *take_args)
        reply, took = await pipe.execute(raise_on_error=False)
        if isinstance(reply, rexc.NoScriptError):  # not run: run both the usual way
            await self.core.ensure_scripts()
            return await self.core.run("commit", keys, args), None
        if isinstance(reply, Exception):
            raise reply
        if isinstance(took, Exception):
            return reply, None
        try:
            return reply, self.log.taken_from(lease, took)
        except (StaleApplier, NotFound):
            return reply, None  # the applier's own take says so

    @map_redis_errors
    async def commits_after(self, name: str, version: int) -> list[CommitRecord]:
        """The commit records of the versions after ``version``, oldest first."""
        raw = await self.core.redis.lrange(self.core.keys(name).commits, 0, -1)
        records = []
        for item in raw:
            try:
                number, cursor, rejected = json.loads(item)
                record = CommitRecord(int(number), str(cursor), bool(rejected))
            except (ValueError, TypeError) as exc:
                raise CodecError(f"commit record of '{name}' does not parse: {item!r}") from exc
            if record.version > version:
                records.append(record)
        return records

    # -- commit notices ----------------------------------------------------------------------

    async def commit_notices(
        self,
        subscribed: Callable[[], None] | None = None,
        until: Callable[[], bool] | None = None,
    ) -> AsyncIterator[CommitNotice | DeletionNotice]:
        """Every commit and deletion of every replica, as it is announced, until the connection
        breaks (``Unavailable``: subscribe again; what was announced meanwhile is not heard)
        or ``until()`` is true (asked after every wait, so within ``NOTICE_POLL_SECONDS``: a
        listener stops even where a cancellation is lost in redis-py's read timeout).
        ``subscribed`` is called once the subscription holds: from then on nothing announced
        is missed while the iteration goes on."""
        pubsub = self.core.redis.pubsub()
        try:
            try:
                await pubsub.subscribe(self.core.commits_channel)
                if subscribed is not None:
                    # Once Redis confirms: a notice published before it would not be heard.
                    while until is None or not until():
                        message = await pubsub.get_message(timeout=NOTICE_POLL_SECONDS)
                        if message is not None and message["type"] in ("subscribe", b"subscribe"):
                            break
                    else:
                        return
                    subscribed()
                while until is None or not until():
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=NOTICE_POLL_SECONDS
                    )
                    if message is None:
                        continue
                    try:
                        yield CommitNotice.parse(message["data"])
                    except CodecError:
                        log.warning("ignored a commit notice that does not parse")
            except (rexc.RedisError, rexc.RedisClusterException) as exc:
                mapped = unavailable_for(exc)
                if mapped is None:
                    raise
                raise mapped from exc
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]


def _pairs(fields: Mapping[str, bytes | memoryview]) -> list[Any]:
    """``fields`` as the field, value pairs a script's ARGV end with."""
    return [part for pair in fields.items() for part in pair]
