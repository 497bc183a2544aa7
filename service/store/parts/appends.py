"""The one append of the store: an ``Entry`` put on a ``LogTarget``'s log (a selector's or a
stream's: the same layout) with its idempotency record, in one call of the append script
(``append.lua``).

A POST to a selector, a push to a stream and a source's batch all go through ``Appends``: the
first two in a group commit per log (appends that arrive together go to Redis together), a
source's alone, with its bus position moved in the same call (``SourceStep``). The direct path's
append-and-commit (``Commits.append_and_commit``) takes its entries' keys and arguments from
here too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from service.store.core import Room, StoreCore
from service.store.group_commit import GroupCommit, QueuedAppend
from service.store.keys import SelectorKeys, StreamKeys, idem_id
from service.store.records import AppendOutcome, Entry, as_opt_int, as_text

#: Rejected entries kept per log a source feeds (the newest; older ones only counted).
MAX_REJECTS_KEPT = 1000


@dataclass(frozen=True)
class LogTarget:
    """A log appended to: a selector's own (``kind`` "selector") or a stream's ("stream")."""

    kind: str
    name: str

    @classmethod
    def of(cls, into: dict[str, Any]) -> LogTarget:
        """The target a source's definition names (``{"selector": name}`` or
        ``{"stream": name}``)."""
        if into.get("stream"):
            return cls("stream", str(into["stream"]))
        return cls("selector", str(into["selector"]))

    def to_json(self) -> dict[str, str]:
        return {self.kind: self.name}

    def keys(self, prefix: str) -> SelectorKeys:
        if self.kind == "stream":
            return StreamKeys(prefix, self.name)
        return SelectorKeys(prefix, self.name)

    @property
    def mark(self) -> str:
        """What the append script marks in the pending set: the selector, or (``*``) every
        selector attached to the stream."""
        return "*" if self.kind == "stream" else self.name


def record_keys(keys: SelectorKeys, key: str | None) -> list[str]:
    """Where the idempotency record of ``key`` may be: named by its digest, or (a selector's
    of an earlier release, honoured until it expires) by the key itself."""
    if key is None:
        return []
    if isinstance(keys, StreamKeys):
        return [keys.idem(key)]
    return [keys.idem(key), keys.idem_legacy(key)]


def log_keys(keys: SelectorKeys) -> list[str]:
    """The keys of a log every append script starts with: head, log, idems, name->index,
    index->name."""
    return [keys.head, keys.log, keys.idems, keys.feature_index, keys.feature_name]


def entry_args(core: StoreCore, entry: Entry, records: Sequence[str]) -> list[Any]:
    """What the append scripts take per entry (``append.lua``): its record keys' and names'
    counts, then what ``append_entry`` takes."""
    return [
        len(records),
        len(entry.names),
        entry.payload,
        int(entry.items),
        entry.digest,
        "" if entry.key is None else idem_id(entry.key),
        core.idempotency_ttl_ms,
        core.idempotency_max_records,
        "1" if entry.merge else "0",
        entry.incarnation,
        *entry.names,
    ]


def outcome(reply: Any) -> AppendOutcome | None:
    """The outcome of an entry's reply, NEW or DUP (None for a refusal)."""
    status = as_text(reply[0])
    if status == "DUP":
        return AppendOutcome(
            log_id=as_text(reply[1]),
            duplicate=True,
            applied_version=as_opt_int(reply[2]),
            items_seen=as_opt_int(reply[3]),
            first=as_opt_int(reply[4]) or 0,
            rejected=None if len(reply) < 6 or reply[5] is None else as_text(reply[5]),
        )
    if status == "NEW":
        return AppendOutcome(
            log_id=as_text(reply[1]),
            duplicate=False,
            applied_version=None,
            items_seen=None,
            first=int(reply[2]),
        )
    return None


@dataclass(frozen=True)
class SourceStep:
    """What a source read from one partition of its bus, committed with its entry: the
    partition's position moved from ``expected`` to ``position`` (``before``: the entries of
    the partition before the source's start, at its first commit), ``entries`` consumed, and
    those it could not use (``rejects``: position, reason)."""

    name: str
    source_id: str
    partition: str
    expected: str
    position: str
    entries: int
    rejects: Sequence[tuple[str, str]] = ()
    before: int | None = None

    def args(self, rows: int) -> list[Any]:
        now = time.time()
        rejected = [
            json.dumps(
                {
                    "source": self.name,
                    "id": self.source_id,
                    "partition": self.partition,
                    "position": where,
                    "reason": reason,
                    "at": now,
                }
            )
            for where, reason in self.rejects
        ]
        return [
            *(self.name, self.source_id, self.partition, self.expected, self.position),
            "" if self.before is None else self.before,
            *(self.entries, rows, MAX_REJECTS_KEPT, len(rejected)),
            *rejected,
        ]


@dataclass(frozen=True)
class Appended:
    """What one call of the append script answered: each entry's reply, the stream's
    attachments as of the appends (flat), and the source step's reply ('' without one)."""

    replies: list[Any]
    attached: list[Any]
    source: Any


class Appends(Room):
    """Every append to a log (``append``, grouped per log; ``commit_source``, alone)."""

    def __init__(self, core: StoreCore, mark_pending: Callable[[str], None]) -> None:
        super().__init__(core)
        self.mark_pending = mark_pending
        self._group: GroupCommit[LogTarget] = GroupCommit(self._append_together)

    async def append(self, target: LogTarget, entry: Entry) -> tuple[Any, list[Any]]:
        """Append ``entry`` to ``target``'s log with the next call of its group commit: the
        entry's reply and the stream's attachments (flat) as of the append."""
        entry.check()
        records = record_keys(target.keys(self.core.prefix), entry.key)
        args = entry_args(self.core, entry, records)
        reply: tuple[Any, list[Any]] = await self._group.submit(
            target, records, args, len(entry.payload)
        )
        return reply

    async def commit_source(
        self, target: LogTarget, step: SourceStep, entry: Entry | None
    ) -> Appended:
        """Append ``entry`` (a source's good rows, if any) and commit ``step`` in one call."""
        if entry is None:
            return await self._run(target, [], step.args(0))
        entry.check()
        records = record_keys(target.keys(self.core.prefix), entry.key)
        return await self._run(
            target, [(records, entry_args(self.core, entry, records))], step.args(entry.items)
        )

    async def _append_together(
        self, target: LogTarget, batch: list[QueuedAppend]
    ) -> list[tuple[Any, list[Any]]]:
        appended = await self._run(target, [(q.keys, q.args) for q in batch], [])
        return [(reply, appended.attached) for reply in appended.replies]

    async def _run(
        self, target: LogTarget, entries: list[tuple[list[str], list[Any]]], source: list[Any]
    ) -> Appended:
        k = target.keys(self.core.prefix)
        attachments = k.attachments if isinstance(k, StreamKeys) else k.head
        keys = [*log_keys(k), attachments, k.sources, k.source_rejects]
        # The pending mark goes with the append, atomically, where the script may touch the
        # pending set; in a cluster (another slot) it follows it.
        clustered = isinstance(self.core.redis, RedisCluster)
        if not clustered:
            keys.append(self.core.pending_key)
        args: list[Any] = [
            len(entries),
            target.kind,
            "" if clustered else target.mark,
            len(source),
            *source,
        ]
        for record_keys_of, args_of in entries:
            keys += record_keys_of
            args += args_of
        replies, attached, source_reply = await self.core.run_acknowledged("append", keys, args)
        appended = Appended(list(replies), list(attached or []), source_reply)
        if clustered and any(as_text(reply[0]) == "NEW" for reply in appended.replies):
            if target.kind == "selector":
                self.mark_pending(target.name)
            for index in range(0, len(appended.attached), 2):
                self.mark_pending(as_text(appended.attached[index]))
        return appended
