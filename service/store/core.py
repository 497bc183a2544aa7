"""What every part of the store shares (``StoreCore``): the Redis client, the Lua scripts and
their loading, the key layout, and the ways of talking to Redis: a script (``run``), a script
a client is told about, acknowledged by replicas (``run_acknowledged``), and one read per key
across a cluster's masters (``read_each``).

``SelectorStore`` (``service.store.redis_store``) is a ``StoreCore`` holding its parts
(``service.store.parts``), each a ``Room`` on the same core.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis import exceptions as rexc
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from service.errors import InvalidInput, NotFound, Unavailable
from service.store import scripts
from service.store.connection import ClusterStatus, RedisClient, cluster_status
from service.store.keys import (
    DEFAULT_PREFIX,
    WRITER_FIELD,
    SelectorKeys,
    commits_channel,
    expiring_key,
    outboxes_key,
    pending_key,
    registry_key,
)
from service.store.records import as_text
from service.store.redis_errors import is_outage, map_redis_errors

#: Keys read per pipeline by registry-wide reads (and log entries per read of ``log_between``).
PIPELINE_BATCH = 256
#: Tries of a write followed by WAIT that found its slot elsewhere, or its script unloaded.
_ACKNOWLEDGE_ATTEMPTS = 3

#: The reply ``StoreCore.read_each`` gives for a key whose master did not answer.
UNREACHABLE: Any = object()


def not_found(name: str) -> NotFound:
    return NotFound(f"selector '{name}' does not exist")


def check_state(state: Mapping[str, bytes]) -> dict[str, bytes]:
    """``state`` (encoded fields of a selector's state) as the scripts write it; InvalidInput
    for a field name that is empty or reserved, or a value that is not bytes."""
    out: dict[str, bytes] = {}
    for field, value in state.items():
        if not isinstance(field, str) or not field or field == WRITER_FIELD:
            raise InvalidInput(f"state field names must be non-empty strings, got {field!r}")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidInput(
                f"state field {field!r} must be encoded bytes, got {type(value).__name__}"
            )
        out[field] = bytes(value) if not isinstance(value, bytes) else value
    return out


class StoreCore:
    """The client, the scripts and the keys every part of the store uses."""

    def __init__(
        self,
        redis: RedisClient,
        prefix: str = DEFAULT_PREFIX,
        idempotency_ttl_s: int = 86400,
        idempotency_max_records: int = 100_000,
        *,
        wait_replicas: int = 0,
        wait_ms: int = 1000,
    ) -> None:
        """``wait_replicas`` > 0: every write that a client is told about (a chunk appended, a
        version committed, a checkpoint, a creation) is followed by ``WAIT wait_replicas
        wait_ms`` on the same connection, and is answered Unavailable unless that many
        replicas of the selector's master have it (``run_acknowledged``)."""
        if redis.get_encoder().decode_responses:
            raise ValueError("SelectorStore needs a Redis client with decode_responses=False")
        if wait_replicas < 0 or wait_ms < 1:
            raise ValueError(
                f"need wait_replicas >= 0 and wait_ms >= 1; got {wait_replicas}, {wait_ms}"
            )
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"key prefix must be non-empty and free of braces, got {prefix!r}")
        if idempotency_ttl_s < 1:
            raise ValueError(f"idempotency_ttl_s must be >= 1, got {idempotency_ttl_s}")
        if idempotency_max_records < 1:
            raise ValueError(f"idempotency_max_records must be >= 1, got {idempotency_max_records}")
        self.redis = redis
        self.prefix = prefix
        self.idempotency_ttl_ms = int(idempotency_ttl_s) * 1000
        self.idempotency_max_records = int(idempotency_max_records)
        self.wait_replicas = int(wait_replicas)
        self.wait_ms = int(wait_ms)
        #: Keys shared by every selector: the registry of names, the selectors due for expiry,
        #: the pending set, the outbox marks, and the channel of commit notices.
        self.registry_key = registry_key(prefix)
        self.expiring_key = expiring_key(prefix)
        self.pending_key = pending_key(prefix)
        self.outboxes_key = outboxes_key(prefix)
        self.commits_channel = commits_channel(prefix)
        self._scripts: dict[str, AsyncScript] = {
            name: redis.register_script(text) for name, text in scripts.ALL.items()
        }

    def keys(self, name: str) -> SelectorKeys:
        """The keys of selector ``name`` (raises InvalidInput for a name with braces)."""
        return SelectorKeys(self.prefix, name)

    def keyed(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` (registry entries) that the store can key: one with braces, say,
        never was a selector."""
        out = []
        for name in names:
            try:
                self.keys(name)
            except InvalidInput:
                continue
            out.append(name)
        return out

    async def run(self, script: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        return await self._scripts[script](keys=list(keys), args=list(args))

    async def run_acknowledged(
        self, script: str, keys: Sequence[str], args: Sequence[Any] = ()
    ) -> Any:
        """``run`` for a write a client is told about. With ``wait_replicas`` set, the script
        and a ``WAIT`` go in one pipeline on one connection (WAIT counts the replicas that have
        everything *its connection* wrote, so it must follow the write there; in a cluster,
        on the master of the selector's slot). Fewer replicas than asked within ``wait_ms``:
        Unavailable, although the master has the write: a retry with the same Idempotency-Key
        finds it (and waits again), and a master lost meanwhile loses nothing that was
        acknowledged.
        """
        if not self.wait_replicas:
            return await self.run(script, keys, args)
        registered = self._scripts[script]
        for _ in range(_ACKNOWLEDGE_ATTEMPTS):
            evalsha = ("EVALSHA", registered.sha, len(keys), *keys, *args)
            wait = ("WAIT", self.wait_replicas, self.wait_ms)
            if isinstance(self.redis, RedisCluster):
                cluster = await self.redis.initialize()  # knows the slots (again, after an error)
                spread = cluster.pipeline(transaction=False)
                spread.execute_command(*evalsha)
                spread.execute_command(*wait, target_nodes=cluster.get_node_from_key(keys[0]))
                # Redirected, the script would run on another connection than the WAIT.
                reply, acked = await spread.execute(raise_on_error=False, allow_redirections=False)
            else:
                pipe = self.redis.pipeline(transaction=False)
                pipe.execute_command(*evalsha)
                pipe.execute_command(*wait)
                reply, acked = await pipe.execute(raise_on_error=False)
            if isinstance(reply, rexc.NoScriptError):  # a restarted or newly promoted master
                await self.ensure_scripts()
                continue
            if isinstance(reply, rexc.AskError | rexc.TryAgainError):  # MOVED is an AskError
                # The script did not run: the slot is elsewhere now (or moving). A plain
                # command follows the redirection and teaches the client the new owner.
                await self.redis.exists(keys[0])
                continue
            if isinstance(reply, Exception):
                raise reply
            if isinstance(acked, Exception):
                raise acked
            if int(acked) < self.wait_replicas:
                raise Unavailable(
                    f"the write reached {int(acked)} of the {self.wait_replicas} Redis "
                    f"replicas required (SIFT_REDIS_WAIT_REPLICAS) within {self.wait_ms} ms; "
                    "retry shortly with the same Idempotency-Key",
                    1,
                )
            return reply
        raise Unavailable("Redis Cluster is moving this selector's data; retry shortly", 1)

    async def read_each(
        self,
        keys: Sequence[str],
        read: Callable[[Any, str], object],
        *,
        raise_on_error: bool = True,
    ) -> list[Any]:
        """One read per key (``read(pipe, key)`` queues it), pipelined; the replies in order
        (with ``raise_on_error`` False, a command's error is its reply).

        On a cluster, one pipeline per master, run side by side: where a master does not answer
        (down, and not yet replaced), its keys' replies are ``UNREACHABLE`` and the others' are
        read all the same, so that registry-wide reads (listings, the sweeper, the gauges) go
        on serving the selectors of the other masters. Raises when no master answers.
        """
        if not keys:
            return []
        if not isinstance(self.redis, RedisCluster):
            pipe = self.redis.pipeline(transaction=False)
            for key in keys:
                read(pipe, key)
            return list(await pipe.execute(raise_on_error=raise_on_error))
        cluster = await self.redis.initialize()
        by_node: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            node = cluster.get_node_from_key(key)
            by_node.setdefault("" if node is None else node.name, []).append(index)

        async def read_group(indices: list[int]) -> list[Any]:
            pipe = cluster.pipeline(transaction=False)
            for index in indices:
                read(pipe, keys[index])
            return list(await pipe.execute(raise_on_error=raise_on_error))

        groups = list(by_node.values())
        results = await asyncio.gather(*map(read_group, groups), return_exceptions=True)
        out: list[Any] = [UNREACHABLE] * len(keys)
        failures: list[BaseException] = []
        for indices, result in zip(groups, results, strict=True):
            if isinstance(result, BaseException):
                failures.append(result)
                continue
            for index, value in zip(indices, result, strict=True):
                out[index] = value
        for failure in failures:
            outage = isinstance(failure, Exception) and is_outage(failure)
            if not outage or len(failures) == len(groups):
                raise failure
        return out

    async def write_pieces(
        self, key: str, pieces: Mapping[str, bytes | memoryview], ttl_ms: int | None = None
    ) -> None:
        """Write a state cut in pieces (``codec.cut_state``) into hash ``key``, one piece per
        round trip: Redis serves other clients between two pieces, and with ``appendfsync
        always`` no fsync covers more than one piece (a megabyte fsync'd at once stalled every
        other client of Redis for tens of milliseconds)."""
        for field, piece in pieces.items():
            await self.redis.hset(key, field, piece)
            if ttl_ms is not None:
                await self.redis.pexpire(key, ttl_ms)
                ttl_ms = None  # once is enough: HSET keeps it

    async def adopt_names(self, meta_key: str, names_key: str, names: Sequence[str]) -> Any:
        """Give the selector or stream described at ``meta_key`` these feature names unless it
        has names already; the names it has now (their JSON), or None when it does not exist
        (and then nothing is left behind)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(meta_key)
        pipe.set(names_key, json.dumps(list(names)), nx=True)
        pipe.get(names_key)
        exists, _set, raw = await pipe.execute()
        if not exists:
            await self.redis.delete(names_key)  # deleted meanwhile: leave nothing behind
            return None
        return raw

    async def item_names(self, key: str, indices: Sequence[int]) -> list[str | None]:
        """Names given on arrival to the items at ``indices`` (None where unnamed), in the
        index -> name hash ``key``."""
        if not indices:
            return []
        values = await self.redis.hmget(key, [str(i) for i in indices])
        return [None if v is None else as_text(v) for v in values]

    # -- scripts -----------------------------------------------------------------------------

    @map_redis_errors
    async def ensure_scripts(self) -> None:
        """Load every script (e.g. at start-up or after a Redis restart). On a cluster, on
        every master that answers: one that is down gets them from readiness or from the first
        script it cannot find, and the others' selectors are served meanwhile."""
        if isinstance(self.redis, RedisCluster):
            await self.cluster_status()
            return
        for script in self._scripts.values():
            script.sha = await self.redis.script_load(script.script)

    @map_redis_errors
    async def scripts_loaded(self) -> bool:
        shas = [script.sha for script in self._scripts.values()]
        return all(await self.redis.script_exists(*shas))

    @map_redis_errors
    async def cluster_status(self) -> ClusterStatus | None:
        """For a Redis Cluster: its state and the masters that answer, each of which now has
        the scripts (a restarted or newly promoted master has none); None for a single Redis.

        Unavailable when no master answers.
        """
        if not isinstance(self.redis, RedisCluster):
            return None
        status = await cluster_status(self.redis)
        shas = [script.sha for script in self._scripts.values()]
        for node in status.answering:
            loaded = await self.redis.execute_command("SCRIPT EXISTS", *shas, target_nodes=node)
            for script, exists in zip(self._scripts.values(), loaded, strict=True):
                if not exists:
                    await self.redis.execute_command(
                        "SCRIPT LOAD", script.script, target_nodes=node
                    )
        return status


class Room:
    """A part of the store: one concern, on the core's client, scripts and keys."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
