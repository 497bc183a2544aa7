"""What Redis holds of the sources (``service/sources``): their definitions, each one's consumer
lease and last status, and, in the slot of the log each one feeds, its positions and counts
committed with every append (``Appends.commit_source``) and the entries it could not use.

A source's definition holds its bus URL with any credentials in it: it is read by the process
that consumes the source and never leaves the service (``service.sources.spec`` redacts it).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from service.errors import Conflict, NotFound, SiftError, StaleMeta
from service.store.keys import (
    SelectorKeys,
    source_lease_key,
    source_members_key,
    source_partition_lease_key,
    source_status_key,
    source_statuses_key,
    sources_registry_key,
)
from service.store.parts.appends import MAX_REJECTS_KEPT, LogTarget, SourceStep
from service.store.records import Entry, as_text
from service.store.redis_errors import map_redis_errors
from service.store.redis_store import SelectorStore
from service.store.refusals import append_refusal

#: Bus resets kept per source (the newest; older ones only counted).
MAX_RESETS_KEPT = 20
#: How long a status a consumer wrote stays (a consumer rewrites it every second or so).
STATUS_TTL_MS = 30_000

#: Extend a lease only if this process still holds it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


#: The log a source appends to: a selector's, or a stream's.
Target = LogTarget


@dataclass(frozen=True)
class Progress:
    """A source's committed progress, as the target's slot holds it."""

    id: str
    positions: dict[str, str]
    entries: int = 0
    rows: int = 0
    rejected: int = 0
    updated_at: float | None = None
    #: Entries of each partition before the source's start (what its lag counts from).
    before: dict[str, int] = field(default_factory=dict)
    #: The incarnation of each partition its position is in (where the bus has one: a
    #: JetStream stream's creation time, a Kafka topic's id).
    epochs: dict[str, str] = field(default_factory=dict)
    #: The partitions stopped at a bus reset (the source's ``on_reset`` is ``stop``), each with
    #: the reset that stopped it: not read until an operator restarts the source.
    halted: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The bus resets met (the newest ``MAX_RESETS_KEPT``, newest first), and how many in all.
    resets: list[dict[str, Any]] = field(default_factory=list)
    reset_count: int = 0
    #: Where the next read of a partition without a position begins, if not the source's
    #: ``start`` (an operator's restart said so).
    starts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: bytes | str) -> Progress:
        document = json.loads(raw)

        def mapping(name: str) -> dict[str, Any]:
            # An empty table comes back from Lua's cjson as {} (or [] for a list).
            value = document.get(name)
            return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}

        resets = document.get("resets")
        return cls(
            id=str(document["id"]),
            positions={k: str(v) for k, v in mapping("positions").items()},
            entries=int(document.get("entries") or 0),
            rows=int(document.get("rows") or 0),
            rejected=int(document.get("rejected") or 0),
            updated_at=document.get("updated_at"),
            before={k: int(v) for k, v in mapping("before").items()},
            epochs={k: str(v) for k, v in mapping("epochs").items()},
            halted={k: dict(v) for k, v in mapping("halted").items() if isinstance(v, dict)},
            resets=[dict(r) for r in resets if isinstance(r, dict)]
            if isinstance(resets, list)
            else [],
            reset_count=int(document.get("reset_count") or 0),
            starts={k: str(v) for k, v in mapping("starts").items()},
        )


@dataclass(frozen=True)
class Reject:
    """An entry a source could not use: where it was on the bus, and why."""

    partition: str
    position: str
    reason: str
    at: float


@dataclass(frozen=True)
class Committed:
    """What a commit of a batch did."""

    log_id: str | None
    #: The selectors attached to a stream target as of the append (to kick).
    attached: list[tuple[str, str]] = field(default_factory=list)
    #: The source's progress as the commit left it (what ``progress`` would read next).
    progress: Progress | None = None


@dataclass(frozen=True)
class PartitionMove:
    """A partition's position moved without appending (``SourceStore.move``): from
    ``expected`` to ``position`` (its first, or the start of the incarnation a reset met), with
    the entries before it (``before``) and the partition's incarnation (``epoch``), each left
    as it was if None; a bus ``reset`` (an event) recorded, and with ``halt`` the partition
    stopped at it rather than moved."""

    partition: str
    expected: str
    position: str | None = None
    before: int | None = None
    epoch: str | None = None
    reset: dict[str, Any] | None = None
    halt: bool = False

    def args(self) -> list[Any]:
        """``source_position.lua``'s ARGV after the source's name and id, but the last."""
        return [
            self.partition,
            self.expected,
            "" if self.position is None else self.position,
            "" if self.before is None else self.before,
            "" if self.epoch is None else self.epoch,
            "" if self.reset is None else json.dumps(self.reset),
            "1" if self.halt else "0",
        ]


class Moved(SiftError):
    """Another consumer committed this partition since this one read its position."""

    def __init__(self, position: str) -> None:
        super().__init__(f"the source's position moved to {position!r}")
        self.position = position


class Gone(SiftError):
    """The source (or its target) no longer exists."""


class SourceStore:
    """Every Redis access of the sources, over the selectors' store (its client, its scripts)."""

    def __init__(self, store: SelectorStore) -> None:
        self.store = store
        self.redis = store.redis
        self.prefix = store.prefix
        self._registry = sources_registry_key(store.prefix)
        self._renew = self.redis.register_script(_RENEW)

    # -- definitions -------------------------------------------------------------------------

    @map_redis_errors
    async def create(self, name: str, definition: dict[str, Any], target: Target) -> str:
        """Register a source; its id. The progress record goes first, in the target's slot (a
        definition never exists without one); the definition is then added only if the name
        is free (Conflict otherwise, and the progress record goes again)."""
        source_id = secrets.token_hex(8)
        keys = target.keys(self.prefix)
        progress = json.dumps({"id": source_id, "positions": {}, "entries": 0, "rows": 0})
        if not await self.redis.hsetnx(keys.sources, name, progress):
            # Left by a source of this name whose deletion did not finish: it is not
            # registered (checked below), so it is nobody's.
            if await self.redis.hexists(self._registry, name):
                raise Conflict(f"source '{name}' already exists; expected a new name")
            await self.redis.hset(keys.sources, name, progress)
        document = json.dumps({**definition, "id": source_id, "created_at": time.time()})
        if not await self.redis.hsetnx(self._registry, name, document):
            await self._forget_progress(keys, name, source_id)
            raise Conflict(f"source '{name}' already exists; expected a new name")
        return source_id

    @map_redis_errors
    async def get(self, name: str) -> dict[str, Any]:
        raw = await self.redis.hget(self._registry, name)
        if raw is None:
            raise NotFound(f"source '{name}' does not exist")
        document: dict[str, Any] = json.loads(raw)
        return document

    @map_redis_errors
    async def all(self) -> dict[str, dict[str, Any]]:
        raw = await self.redis.hgetall(self._registry)
        return {as_text(k): json.loads(v) for k, v in raw.items()}

    @map_redis_errors
    async def delete(self, name: str, target: Target, source_id: str) -> None:
        """Unregister a source, then drop its progress and its lease (its consumer stops at its
        next step: its commit finds no progress record, its renewal no lease)."""
        await self.redis.hdel(self._registry, name)
        await self._forget_progress(target.keys(self.prefix), name, source_id)
        await self.redis.delete(source_lease_key(self.prefix, name))
        await self.redis.delete(source_members_key(self.prefix, name))

    async def _forget_progress(self, keys: SelectorKeys, name: str, source_id: str) -> None:
        raw = await self.redis.hget(keys.sources, name)
        if raw is not None and Progress.parse(raw).id == source_id:
            await self.redis.hdel(keys.sources, name)

    # -- progress ----------------------------------------------------------------------------

    @map_redis_errors
    async def progress(self, name: str, target: Target) -> Progress | None:
        raw = await self.redis.hget(target.keys(self.prefix).sources, name)
        return None if raw is None else Progress.parse(raw)

    @map_redis_errors
    async def rejects(self, name: str, source_id: str, target: Target, limit: int) -> list[Reject]:
        """The newest ``limit`` entries this source could not use (of those kept)."""
        raw = await self.redis.lrange(
            target.keys(self.prefix).source_rejects, 0, MAX_REJECTS_KEPT - 1
        )
        out = []
        for item in raw:
            document = json.loads(item)
            if document.get("source") == name and document.get("id") == source_id:
                out.append(
                    Reject(
                        str(document["partition"]),
                        str(document["position"]),
                        str(document["reason"]),
                        float(document["at"]),
                    )
                )
                if len(out) >= limit:
                    break
        return out

    @map_redis_errors
    async def commit(self, target: Target, step: SourceStep, entry: Entry | None) -> Committed:
        """Append ``entry`` (the good rows read, if any) to the target's log and commit
        ``step`` (the entries it could not use, the partition's new position) in the same
        call of the append script. Moved if another consumer moved the position first; Gone
        if the source or its target is gone; StaleMeta if the target is another incarnation
        than the one the rows were checked against."""
        appended = await self.store.log.appends.commit_source(target, step, entry)
        status = as_text(appended.source[0])
        if status == "OK":
            attached = [
                (as_text(appended.attached[i]), as_text(appended.attached[i + 1]))
                for i in range(0, len(appended.attached), 2)
            ]
            log_id = as_text(appended.replies[0][1]) if appended.replies else None
            return Committed(log_id, attached, Progress.parse(appended.source[1]))
        if status == "MOVED":
            raise Moved(as_text(appended.source[1]))
        # GONE: the source is; NOTFOUND (the append's): its target is.
        if status == "GONE" or as_text(appended.replies[0][0]) == "NOTFOUND":
            raise Gone(f"the source's {target.kind} '{target.name}' or the source is gone")
        reply = appended.replies[0]
        status = as_text(reply[0])
        if status == "INCARNATION":
            raise StaleMeta(f"{target.kind} '{target.name}' was deleted and created again")
        refused = append_refusal(status, reply, target.kind, target.name, None)
        if refused is not None:
            raise refused
        if status == "CLOSING":
            raise Gone(f"stream '{target.name}' is being deleted")
        raise SiftError(f"a source's commit failed: {status}")

    @map_redis_errors
    async def move(
        self, name: str, source_id: str, target: Target, move: PartitionMove
    ) -> Progress:
        """Make ``move`` of a partition of source ``name``; its progress then. Moved if another
        consumer moved the position first; Gone if the source is gone."""
        reply = await self.store.run_acknowledged(
            "source_position",
            [target.keys(self.prefix).sources],
            [name, source_id, *move.args(), MAX_RESETS_KEPT],
        )
        status = as_text(reply[0])
        if status == "MOVED":
            raise Moved(as_text(reply[1]))
        if status != "OK":
            raise Gone(f"source '{name}' is gone")
        return Progress.parse(reply[1])

    @map_redis_errors
    async def restart(self, name: str, source_id: str, target: Target, start: str) -> list[str]:
        """Restart the partitions of a source stopped at a bus reset from ``start``; the
        partitions restarted. Conflict if none was stopped; NotFound if the source is gone."""
        reply = await self.store.run_acknowledged(
            "source_restart", [target.keys(self.prefix).sources], [name, source_id, start]
        )
        status = as_text(reply[0])
        if status == "RUNNING":
            raise Conflict(
                f"source '{name}' is not stopped at a bus reset: only a source whose state is "
                "reset is restarted"
            )
        if status != "OK":
            raise NotFound(f"source '{name}' does not exist")
        return sorted((as_text(p) for p in reply[1] or []), key=lambda p: (len(p), p))

    # -- the consumer's lease and status -----------------------------------------------------

    def _lease_key(self, name: str, partition: str | None) -> str:
        if partition is None:
            return source_lease_key(self.prefix, name)
        return source_partition_lease_key(self.prefix, name, partition)

    @map_redis_errors
    async def take_lease(
        self, name: str, holder: str, ttl_ms: int, partition: str | None = None
    ) -> bool:
        """Whether this holder has the source's lease (or one partition's) now (taken, or
        still its own)."""
        key = self._lease_key(name, partition)
        if await self.redis.set(key, holder, nx=True, px=ttl_ms):
            return True
        return bool(await self._renew(keys=[key], args=[holder, ttl_ms]))

    @map_redis_errors
    async def renew_lease(
        self, name: str, holder: str, ttl_ms: int, partition: str | None = None
    ) -> bool:
        key = self._lease_key(name, partition)
        return bool(await self._renew(keys=[key], args=[holder, ttl_ms]))

    @map_redis_errors
    async def release_lease(self, name: str, holder: str, partition: str | None = None) -> None:
        # The applier's script: a lease released only by its holder.
        await self.store.run("release_lease", [self._lease_key(name, partition)], [holder])

    @map_redis_errors
    async def lease_holder(self, name: str, partition: str | None = None) -> str | None:
        raw = await self.redis.get(self._lease_key(name, partition))
        return None if raw is None else as_text(raw)

    @map_redis_errors
    async def join(self, name: str, holder: str, ttl_ms: int) -> int:
        """Say that ``holder`` consumes the shared source ``name`` for ``ttl_ms`` more; how
        many holders do now (those that stopped saying so are forgotten)."""
        key = source_members_key(self.prefix, name)
        now = int(time.time() * 1000)
        await self.redis.hset(key, holder, str(now + ttl_ms))
        await self.redis.pexpire(key, 4 * ttl_ms)
        members = await self.redis.hgetall(key)
        gone = [h for h, until in members.items() if int(until) <= now]
        if gone:
            await self.redis.hdel(key, *gone)
        return len(members) - len(gone)

    @map_redis_errors
    async def leave(self, name: str, holder: str) -> None:
        await self.redis.hdel(source_members_key(self.prefix, name), holder)

    @map_redis_errors
    async def write_status(
        self, name: str, status: dict[str, Any], holder: str | None = None
    ) -> None:
        """The consumer's status (of a shared source: this holder's, beside the others'),
        under the source's id (``status["id"]``)."""
        source_id = str(status["id"])
        if holder is None:
            await self.redis.set(
                source_status_key(self.prefix, name, source_id),
                json.dumps(status),
                px=STATUS_TTL_MS,
            )
            return
        key = source_statuses_key(self.prefix, name, source_id)
        await self.redis.hset(key, holder, json.dumps(status))
        await self.redis.pexpire(key, STATUS_TTL_MS)

    @map_redis_errors
    async def read_status(self, name: str, source_id: str) -> dict[str, Any] | None:
        """The status of the consumer of source ``name`` of id ``source_id``; of a shared
        source, its consumers' together: every partition's lag, the rows per second summed,
        running if one runs."""
        raw = await self.redis.get(source_status_key(self.prefix, name, source_id))
        if raw is not None:
            return dict(json.loads(raw))
        held = await self.redis.hgetall(source_statuses_key(self.prefix, name, source_id))
        fresh_after = time.time() - STATUS_TTL_MS / 1000 / 3
        statuses = [json.loads(v) for v in held.values()]
        statuses = [s for s in statuses if float(s.get("at") or 0) >= fresh_after]
        if not statuses:
            return None
        order = ("running", "paused", "retrying", "reset", "starting", "failed")
        best = min(statuses, key=lambda s: order.index(s["state"]) if s["state"] in order else 9)
        lag: dict[str, Any] = {}
        for status in statuses:
            lag.update(status.get("lag") or {})
        errors = [s["last_error"] for s in statuses if s.get("last_error")]
        return {
            **best,
            "lag": lag,
            "last_error": best.get("last_error") or (errors[0] if errors else None),
            "rows_per_second": sum(float(s.get("rows_per_second") or 0) for s in statuses),
        }

    @map_redis_errors
    async def forget_status(self, name: str, source_id: str) -> None:
        await self.redis.delete(source_status_key(self.prefix, name, source_id))
        await self.redis.delete(source_statuses_key(self.prefix, name, source_id))
