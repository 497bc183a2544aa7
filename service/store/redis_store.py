"""Persistence of selectors in Redis: descriptions, ingest log, idempotency, leases, state.

The write path (see ARCHITECTURE.md, "The write path"):

* ``append`` puts a chunk on the selector's stream together with its idempotency record, in one
  Lua script;
* one applier at a time holds a lease (``acquire_lease``) whose fencing token increases on every
  acquisition;
* ``commit`` first writes the new state into a fresh hash that nothing points at yet, then flips
  the head in one compare-and-set script. Readers follow the head, so they see the old state or
  the new one, never a mix. Large states never travel as Lua arguments.

State keys are unique per write (version, fencing token and a random nonce), so a retry with a
stale expected version can never touch the blob the head points at. Every state hash also
carries a reserved ``__writer__`` field (the lease holder that wrote it, or ``create``): the
commit script flips the head only to a blob that is still exactly the one this applier wrote.

The store needs a client with ``decode_responses=False`` (payloads and state are binary).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, cast

from redis import exceptions as rexc
from redis.asyncio.cluster import RedisCluster

from service.cache import LRU
from service.errors import (
    CheckpointReplaced,
    CodecError,
    Conflict,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    SiftError,
    StaleApplier,
    StaleMeta,
    Unavailable,
)
from service.store import scripts
from service.store.codec import cut_fields, join_fields
from service.store.connection import (
    ClusterStatus,
    RedisClient,
    cluster_status,
    refresh_topology,
)
from service.store.group_commit import GroupCommit, QueuedAppend
from service.store.keys import (
    DEFAULT_PREFIX,
    INITIAL_CURSOR,
    WRITER_FIELD,
    SelectorKeys,
    commits_channel,
    compare_stream_ids,
    expiring_key,
    idem_id,
    is_partition,
    parse_stream_id,
    pending_key,
    registry_key,
    validate_name,
)
from service.store.records import (
    AppendOutcome,
    Checkpoint,
    CommitNotice,
    CommitRecord,
    Head,
    HistoryEntry,
    Lease,
    LogEntry,
    Rejection,
    SelectorMeta,
    Snapshot,
    Taken,
    TakeRequest,
)

log = logging.getLogger("sift.store")

P = ParamSpec("P")
T = TypeVar("T")

#: A staged initial state lives at most this long if its ``create`` never finishes.
_STAGING_TTL_MS = 3_600_000
#: How often ``snapshot`` retries when a newer checkpoint replaces the one it is reading.
_SNAPSHOT_ATTEMPTS = 5
_PIPELINE_BATCH = 256
#: Selectors whose feature names one store keeps parsed.
_FEATURE_NAMES_CACHED = 256
#: Longest single wait for a commit notice (``commit_notices``): a closing listener is seen
#: this fast.
NOTICE_POLL_SECONDS = 1.0
#: Most marks of the pending set one sweep looks at (the oldest first).
PENDING_SWEEP_LIMIT = 10_000
#: How soon a cluster's pending marks are tried again while the set's master does not answer.
MARK_RETRY_SECONDS = 1.0
#: Selectors whose description one store keeps for writes (``cached_meta``).
_METAS_CACHED = 4096
#: How long a cached description without feature names is trusted (``cached_meta``).
NAMELESS_META_SECONDS = 1.0
#: Checkpoint fields read per command (each a piece of at most ``codec.PIECE_BYTES``).
_PIECES_PER_READ = 4
#: Rejected (dead-lettered) entries remembered per selector; older ones are forgotten.
REJECTIONS_KEPT = 10_000
#: Tries of a write followed by WAIT that found its slot elsewhere, or its script unloaded.
_ACKNOWLEDGE_ATTEMPTS = 3
#: At most one log line per this many seconds while Redis is unavailable.
_UNAVAILABLE_LOG_SECONDS = 5.0


#: Failures of the cluster client that are mistakes of ours, never the cluster's state.
_CLUSTER_MISUSE = (rexc.CrossSlotTransactionError, rexc.InvalidPipelineStack)


def _unavailable(exc: rexc.RedisError | rexc.RedisClusterException) -> Unavailable | None:
    """The ``Unavailable`` a Redis failure means, or None if it is not an availability problem.

    The client sees a fixed sentence; the library's message (which names the Redis address)
    goes to the log only.
    """
    if isinstance(exc, rexc.RedisClusterException):
        # The cluster client reached no node, or no node serves the slot (a master down and
        # not yet replaced): retryable, unless it is a transaction across slots (our bug).
        if isinstance(exc, _CLUSTER_MISUSE):
            return None
        mapped = Unavailable("Redis Cluster is unreachable or reconfiguring; retry shortly", 1)
    elif isinstance(exc, rexc.BusyLoadingError):
        mapped = Unavailable("Redis is loading its dataset into memory; retry shortly", 2)
    elif isinstance(exc, rexc.ConnectionError | rexc.TimeoutError):
        mapped = Unavailable("Redis is unreachable; retry shortly", 1)
    elif isinstance(exc, rexc.OutOfMemoryError):
        mapped = Unavailable("Redis is out of memory (maxmemory reached); retry later", 5)
    elif isinstance(exc, rexc.ReadOnlyError | rexc.ClusterDownError | rexc.TryAgainError):
        mapped = Unavailable("Redis cannot accept writes right now; retry shortly", 1)
    elif isinstance(exc, rexc.ClusterError | rexc.AskError):
        # Redirections that did not settle (MOVED/ASK, "TTL exhausted"): a slot is moving to
        # another master, or a failover is under way.
        mapped = Unavailable("Redis Cluster is moving this data; retry shortly", 1)
    else:
        return None
    _log_unavailable(exc)
    return mapped


_last_unavailable_log = 0.0
_unavailable_unlogged = 0


def _log_unavailable(exc: rexc.RedisError | rexc.RedisClusterException) -> None:
    """Log Redis outages at most every few seconds: every request fails while Redis is down."""
    global _last_unavailable_log, _unavailable_unlogged
    now = time.monotonic()
    if now - _last_unavailable_log < _UNAVAILABLE_LOG_SECONDS:
        _unavailable_unlogged += 1
        return
    log.warning(
        "Redis unavailable (%s: %s); %d more failures since the last report",
        type(exc).__name__,
        exc,
        _unavailable_unlogged,
    )
    _last_unavailable_log, _unavailable_unlogged = now, 0


def map_redis_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Turn connection-level Redis failures into ``Unavailable`` (503 + Retry-After)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except rexc.AuthenticationError as exc:
            # Permanent until an operator fixes the configuration: never a retryable 503.
            raise SiftError(
                f"Redis refused the service's credentials ({exc}); check SIFT_REDIS_URL"
            ) from exc
        except (rexc.RedisError, rexc.RedisClusterException) as exc:
            if isinstance(exc.__cause__, rexc.AuthenticationError):  # the cluster client's
                raise SiftError(
                    f"Redis refused the service's credentials ({exc.__cause__}); check "
                    "SIFT_REDIS_URL"
                ) from exc
            mapped = _unavailable(exc)
            if mapped is None:
                raise
            if isinstance(exc, rexc.ConnectionError):
                await _drop_idle_connections(args[0] if args else None)
            raise mapped from exc

    return wrapper


async def _drop_idle_connections(owner: object) -> None:
    """Close the idle pooled connections of ``owner``'s Redis client after a connection error.

    They may be sockets to a Redis that has since restarted: the first command sent on one
    would fail once Redis is back (a 503 after ``/v1/readyz`` already said ready). Closed,
    they reconnect on their next use. Best effort: Redis may well be down right now. A
    cluster client instead learns the topology again (a master down, or replaced).
    """
    client = getattr(owner, "redis", None)
    if isinstance(client, RedisCluster):
        await refresh_topology(client)
        return
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return
    with contextlib.suppress(Exception):
        await pool.disconnect(inuse_connections=False)


#: The reply ``SelectorStore.read_each`` gives for a key whose master did not answer.
UNREACHABLE: Any = object()


def _unavailable_quietly(exc: Exception) -> bool:
    """Whether ``exc`` says a Redis (cluster node) is unavailable, without logging it."""
    if isinstance(exc, rexc.RedisClusterException):
        return not isinstance(exc, _CLUSTER_MISUSE)
    return isinstance(
        exc,
        rexc.ConnectionError
        | rexc.TimeoutError
        | rexc.BusyLoadingError
        | rexc.ClusterError
        | rexc.AskError
        | rexc.TryAgainError,
    )


#: An idempotency record's fields, as ``_record_from`` reads them.
_IDEM_FIELDS = ["digest", "log_id", "applied_version", "rows_seen", "first", "rejected"]


def _record_from(values: Sequence[Any]) -> AppendOutcome | None:
    """The outcome an idempotency record (``_IDEM_FIELDS``) holds; None if there is none."""
    _digest, log_id, version, items_seen, first, rejected = values
    if log_id is None:
        return None
    return AppendOutcome(
        log_id=_str(log_id),
        duplicate=True,
        applied_version=_opt_int(version),
        items_seen=_opt_int(items_seen),
        first=_opt_int(first) or 0,
        rejected=None if rejected is None else _str(rejected),
    )


def _first_record(replies: Sequence[Sequence[Any]]) -> AppendOutcome | None:
    """The first of several records (``_record_keys``, read in that order) that exists."""
    for values in replies:
        record = _record_from(values)
        if record is not None:
            return record
    return None


def _record_keys(k: SelectorKeys, key: str) -> list[str]:
    """Where the idempotency record of ``key`` may be: named by its digest, or (an earlier
    release's, honoured until it expires) by the key itself."""
    return [k.idem(key), k.idem_legacy(key)]


def _redis_time_text(seconds: float) -> str:
    """A time as the scripts write it (``now_str``: seconds, a dot, six digits)."""
    return f"{seconds:.6f}"


def _str(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _opt_int(value: bytes | str | None) -> int | None:
    return None if value is None else int(value)


#: The head's fields a ``Head`` is read from, in this order (the ``READ_FIELDS`` script too).
HEAD_FIELDS = (
    "version",
    "cursor",
    "rows_seen",
    "state_key",
    "updated_at",
    "checkpoint_key",
    "checkpoint_version",
    "checkpoint_cursor",
    "checkpoint_items",
    "checkpoint_layout",
    "incarnation",
)


def _head_from(values: Sequence[Any]) -> Head:
    version, cursor, items_seen, state_key, updated_at = values[:5]
    if version is None or cursor is None or items_seen is None or state_key is None:
        raise CodecError(f"head record is incomplete: {list(values)!r}")
    return Head(
        version=int(version),
        cursor=_str(cursor),
        items_seen=int(items_seen),
        state_key=_str(state_key),
        updated_at=float(updated_at) if updated_at is not None else 0.0,
        checkpoint=_checkpoint_from(values[5:10]),
        incarnation="" if values[10] is None else _str(values[10]),
    )


def _checkpoint_from(values: Sequence[Any]) -> Checkpoint | None:
    """The checkpoint of a head from its ``checkpoint_*`` fields (None: the earlier layout)."""
    key, version, cursor, items_seen, layout = values
    if key is None:
        return None
    if version is None or cursor is None or items_seen is None:
        raise CodecError(f"head record's checkpoint is incomplete: {list(values)!r}")
    return Checkpoint(_str(key), int(version), _str(cursor), int(items_seen), cut=layout is None)


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


def holder_died(holder: str) -> bool:
    """Whether lease ``holder`` (``_holder_id``) is a process of this machine that exists no
    more: a restarted service need not wait out the lease of the one it replaces.

    Only a certainty counts (same host name, pid gone); anything else (another machine, a pid
    reused or not ours to signal) is taken as alive, and the lease simply expires. Breaking the
    lease of a process that is in fact alive would cost it its next commit (the fencing token
    refuses it), never the state.
    """
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def _check_state(state: Mapping[str, bytes]) -> dict[str, bytes]:
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


def _pairs(flat: Sequence[Any]) -> dict[Any, Any]:
    """A Lua-returned ``[field, value, field, value, ...]`` as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _log_entry(k: SelectorKeys, log_id: bytes | str, fields: Mapping[Any, Any]) -> LogEntry:
    record_id, legacy_key = fields.get(b"idk"), fields.get(b"idem")
    record = None
    if record_id is not None:
        record = k.idem_record(_str(record_id))
    elif legacy_key is not None:  # appended by an earlier release: the key itself
        record = k.idem_legacy(_str(legacy_key))
    return LogEntry(
        log_id=_str(log_id),
        payload=fields.get(b"payload", b""),
        idem_record=record,
        items=int(fields.get(b"rows", 0)),
        first=int(fields.get(b"first", 0)),
        merge=fields.get(b"merge") == b"1",
    )


def _not_found(name: str) -> NotFound:
    return NotFound(f"selector '{name}' does not exist")


class SelectorStore:
    """All Redis access of Sift. Methods are async and raise the ``service.errors`` tree."""

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
        replicas of the selector's master have it (``_run_acknowledged``)."""
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
        self.redis = redis
        self.prefix = prefix
        if idempotency_max_records < 1:
            raise ValueError(f"idempotency_max_records must be >= 1, got {idempotency_max_records}")
        self.idempotency_ttl_ms = int(idempotency_ttl_s) * 1000
        self.idempotency_max_records = int(idempotency_max_records)
        self.wait_replicas = int(wait_replicas)
        self.wait_ms = int(wait_ms)
        self._registry = registry_key(prefix)
        self._expiring = expiring_key(prefix)
        self._pending = pending_key(prefix)
        self._commits_channel = commits_channel(prefix)
        self._scripts = {name: redis.register_script(text) for name, text in scripts.ALL.items()}
        # Appends to a selector that arrive together go to Redis together.
        self._appends = GroupCommit(self._append_together)
        # A cluster's pending marks, set in the background (``_mark_pending``).
        self._to_mark: set[str] = set()
        self._marking: asyncio.Task[None] | None = None
        # Feature names by selector incarnation: set once, never changed (``get_meta``).
        self._feature_names: LRU[tuple[str, float, str], list[str]] = LRU(_FEATURE_NAMES_CACHED)
        # Descriptions as last read, and when (``cached_meta``).
        self._metas: LRU[str, tuple[SelectorMeta, float]] = LRU(_METAS_CACHED)

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

    async def _run(self, script: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        return await self._scripts[script](keys=list(keys), args=list(args))

    async def _run_acknowledged(
        self, script: str, keys: Sequence[str], args: Sequence[Any] = ()
    ) -> Any:
        """``_run`` for a write a client is told about. With ``wait_replicas`` set, the script
        and a ``WAIT`` go in one pipeline on one connection (WAIT counts the replicas that have
        everything *its connection* wrote, so it must follow the write there; in a cluster,
        on the master of the selector's slot). Fewer replicas than asked within ``wait_ms``:
        Unavailable, although the master has the write: a retry with the same Idempotency-Key
        finds it (and waits again), and a master lost meanwhile loses nothing that was
        acknowledged.
        """
        if not self.wait_replicas:
            return await self._run(script, keys, args)
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
            outage = isinstance(failure, Exception) and _unavailable_quietly(failure)
            if not outage or len(failures) == len(groups):
                raise failure
        return out

    # -- health ------------------------------------------------------------------------------

    @map_redis_errors
    async def ping(self) -> bool:
        return bool(await self.redis.ping())

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

    # -- selectors ---------------------------------------------------------------------------

    @map_redis_errors
    async def create(
        self,
        meta: SelectorMeta,
        initial_state: Mapping[str, bytes],
        *,
        published: Mapping[str, bytes] | None = None,
        version: int = 0,
        items_seen: int = 0,
        segments: Mapping[str, bytes] | None = None,
        item_names: Mapping[int, str] | None = None,
    ) -> Head:
        """Create a selector; Conflict if the name is taken.

        ``initial_state`` (encoded) becomes its first checkpoint, ``published`` (by default the
        same) what readers read of its first version. A new selector starts at version 0 having
        seen nothing. An imported one starts at ``version`` having seen ``items_seen`` items,
        with its immutable ``segments`` (by id) and the names its items were given on arrival
        (``item_names``, index -> name); its log starts empty, so its next chunk becomes
        ``version + 1`` and its next item is numbered ``items_seen``. All of it appears at
        once, or (name taken) none of it.
        """
        if version < 0 or items_seen < 0:
            raise ValueError(f"version and items_seen must be >= 0; got {version}, {items_seen}")
        k = self.keys(meta.name)
        state = _check_state(initial_state)
        shown = state if published is None else _check_state(published)
        names_json = "" if meta.feature_names is None else json.dumps(meta.feature_names)
        # The state may be large: stage it first (what readers read in one script, short TTL in
        # case we die; the whole state piece by piece), the script then puts it into place only
        # if the name is free.
        nonce = secrets.token_hex(8)
        staging = k.staging(nonce)
        staged: list[Any] = [_STAGING_TTL_MS, WRITER_FIELD, b"create"]
        for field, value in shown.items():
            staged += [field, value]
        await self._run("stage", [staging], staged)
        checkpoint_key = k.checkpoint(int(version), 0, nonce)
        pieces = await asyncio.to_thread(cut_fields, state)
        await self._write_pieces(checkpoint_key, pieces, ttl_ms=_STAGING_TTL_MS)
        keys = [k.meta, k.head, k.names, staging, k.state(0, 0, nonce), k.blobs]
        keys += [checkpoint_key, k.checkpoints]
        args: list[Any] = [meta.to_json(), names_json, meta.incarnation]
        if version or items_seen or segments or item_names:
            keys += await self._stage_import(k, nonce, segments or {}, item_names or {})
            args += [int(version), int(items_seen)]
        # Registered before and after the script, so that a delete racing with this create
        # can never leave the new selector out of the registry (see ``delete``).
        await self.redis.sadd(self._registry, meta.name)
        reply = await self._run_acknowledged("create", keys, args)
        status = _str(reply[0])
        if status == "CONFLICT":
            raise Conflict(f"selector '{meta.name}' already exists")
        if status != "OK":
            raise SiftError(f"creating selector '{meta.name}' failed: {status}")
        await self.redis.sadd(self._registry, meta.name)
        return Head(
            version=int(version),
            cursor=INITIAL_CURSOR,
            items_seen=int(items_seen),
            state_key=keys[4],
            updated_at=float(reply[1]),
            checkpoint=Checkpoint(checkpoint_key, int(version), INITIAL_CURSOR, int(items_seen)),
            incarnation=meta.incarnation,
        )

    async def _write_pieces(
        self, key: str, pieces: Mapping[str, bytes | memoryview], ttl_ms: int | None = None
    ) -> None:
        """Write a state cut in pieces (``codec.cut_fields``) into hash ``key``, one piece per
        round trip: Redis serves other clients between two pieces, and with ``appendfsync
        always`` no fsync covers more than one piece (a megabyte fsync'd at once stalled every
        other client of Redis for tens of milliseconds)."""
        for field, piece in pieces.items():
            await self.redis.hset(key, field, piece)
            if ttl_ms is not None:
                await self.redis.pexpire(key, ttl_ms)
                ttl_ms = None  # once is enough: HSET keeps it

    async def _stage_import(
        self,
        k: SelectorKeys,
        nonce: str,
        segments: Mapping[str, bytes],
        item_names: Mapping[int, str],
    ) -> list[str]:
        """Stage an import's item names and segments (short TTL) for ``CREATE`` to rename into
        place; returns the keys the script takes after the eight of every create."""
        by_name, by_index = k.staging(f"{nonce}:fname"), k.staging(f"{nonce}:findex")
        pipe = self.redis.pipeline(transaction=False)
        if item_names:
            pipe.hset(by_name, mapping={n: str(i) for i, n in item_names.items()})
            pipe.hset(by_index, mapping={str(i): n for i, n in item_names.items()})
            pipe.pexpire(by_name, _STAGING_TTL_MS)
            pipe.pexpire(by_index, _STAGING_TTL_MS)
            await pipe.execute()
        keys = [k.segments, k.feature_index, k.feature_name, by_name, by_index]
        for number, (segment_id, payload) in enumerate(segments.items()):
            staged = k.staging(f"{nonce}:segment:{number}")
            # One segment per round trip: each may be tens of MiB.
            await self.redis.set(staged, payload, px=_STAGING_TTL_MS)
            keys += [staged, k.segment(segment_id)]
        return keys

    async def cached_meta(self, name: str) -> SelectorMeta:
        """The description of ``name`` as this process last read it (``get_meta`` otherwise),
        without a round trip: for writes, whose ``append`` names the incarnation they were
        checked against (StaleMeta when the name was deleted and created again since). A
        description without feature names is trusted for ``NAMELESS_META_SECONDS`` only:
        another replica's first named chunk may give it names."""
        meta = self._trusted_meta(name)
        return meta if meta is not None else await self.get_meta(name)

    def _trusted_meta(self, name: str) -> SelectorMeta | None:
        """The description of ``name`` this process read last, while it can be trusted: one with
        feature names (they never change), or one without for ``NAMELESS_META_SECONDS``."""
        entry = self._metas.get(name)
        if entry is None:
            return None
        meta, read_at = entry
        if meta.feature_names is not None or time.monotonic() - read_at < NAMELESS_META_SECONDS:
            return meta
        return None

    def forget_meta(self, name: str) -> None:
        self._metas.pop(name)

    @map_redis_errors
    async def meta_and_head(self, name: str) -> tuple[SelectorMeta, Head | None]:
        """The description and the head, for readers: the head alone when this process's
        description (``cached_meta``) is of the incarnation the head is of. A partitioned
        selector has no head of its own (its partitions have): None, and the description is
        read every time (no head to check a cached one against)."""
        cached = self._trusted_meta(name)
        if cached is not None and not cached.partitioned:
            head = await self.get_head(name)
            if head.incarnation == cached.incarnation:
                return cached, head
        meta = await self.get_meta(name)
        return meta, None if meta.partitioned else await self.get_head(name)

    @map_redis_errors
    async def get_meta(self, name: str) -> SelectorMeta:
        """The selector's description with its feature names.

        The names (megabytes for a wide selector) never change once set (at the creation, or by
        the first chunk that named its columns: ``adopt_feature_names``) for one incarnation of
        a name: they are read and parsed once, then kept.
        """
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(k.meta)
        pipe.strlen(k.names)
        raw_meta, names_length = await pipe.execute()
        if raw_meta is None:
            raise _not_found(name)
        meta = SelectorMeta.from_json(raw_meta, None)
        if names_length:  # else none (yet: the first named chunk may give them)
            incarnation = (name, meta.created_at, meta.incarnation)
            known = self._feature_names.get(incarnation)
            if known is None:
                known = self._parse_names(name, await self.redis.get(k.names))
                self._feature_names.put(incarnation, known)
            meta = dataclasses.replace(meta, feature_names=known)
        self._metas.put(name, (meta, time.monotonic()))
        return meta

    @staticmethod
    def _parse_names(name: str, raw: Any) -> list[str]:
        try:
            return [str(n) for n in json.loads(raw or b"null")]
        except (ValueError, TypeError) as exc:
            raise CodecError(f"stored feature names of '{name}' do not parse: {exc}") from exc

    @map_redis_errors
    async def adopt_feature_names(self, name: str, names: Sequence[str]) -> list[str]:
        """Give selector ``name`` (created without feature names) these names, unless it has
        names already (another chunk gave them first: names never change once set); the names
        it has now. NotFound if it does not exist."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.meta)
        pipe.set(k.names, json.dumps(list(names)), nx=True)
        pipe.get(k.names)
        exists, _set, raw = await pipe.execute()
        if not exists:
            await self.redis.delete(k.names)  # deleted meanwhile: leave nothing behind
            raise _not_found(name)
        self.forget_meta(name)  # named now: read again on the next write
        return self._parse_names(name, raw)

    @map_redis_errors
    async def create_partitioned(self, meta: SelectorMeta) -> None:
        """Claim ``meta.name`` for a partitioned selector: its description alone (each partition
        is created as a selector of its own, ``meta.partition(i)``). Conflict if it is taken."""
        k = self.keys(meta.name)
        if await self.redis.exists(k.head):
            raise Conflict(f"selector '{meta.name}' already exists")
        await self.redis.sadd(self._registry, meta.name)
        if not await self.redis.set(k.meta, meta.to_json(), nx=True):
            raise Conflict(f"selector '{meta.name}' already exists")
        if meta.feature_names is not None:
            await self.redis.set(k.names, json.dumps(meta.feature_names))

    @map_redis_errors
    async def list_names(self) -> list[str]:
        """Names of all selectors, sorted (registry entries without a description are skipped,
        and so are partitions: they show as their selector)."""
        names = sorted(
            n
            for n in (_str(n) for n in await self.redis.smembers(self._registry))
            if not is_partition(n)
        )
        out: list[str] = []
        for start in range(0, len(names), _PIPELINE_BATCH):
            valid = self.keyed(names[start : start + _PIPELINE_BATCH])
            metas = [self.keys(n).meta for n in valid]
            exists = await self.read_each(metas, lambda pipe, key: pipe.exists(key))
            # A selector whose master is down is listed: the registry says it exists.
            out.extend(n for n, e in zip(valid, exists, strict=True) if e)
        return out

    @map_redis_errors
    async def delete(self, name: str, idle_since: float | None = None) -> bool:
        """Remove every key of the selector atomically, then its registry entry. With
        ``idle_since`` (an expiry), only if its last commit is still that one and nothing is
        pending; whether it was removed. NotFound if it does not exist."""
        k = self.keys(name)
        existed = await self._run(
            "delete",
            [
                *(k.meta, k.head, k.names, k.log, k.lease, k.fence, k.blobs, k.idems),
                *(k.feature_index, k.feature_name, k.segments, k.checkpoints),
                *(k.rejected, k.rejected_order, k.attempts, k.history, k.commits),
            ],
            [] if idle_since is None else [_redis_time_text(idle_since)],
        )
        if existed == -1:
            return False
        self.forget_meta(name)
        await self.redis.srem(self._registry, name)
        await self.redis.zrem(self._expiring, name)
        # Its pending mark, if any, goes at the next sweep (a new selector of the name may
        # have marked it already).
        # A create of the same name may have run between the script and SREM.
        if await self.redis.exists(k.meta):
            await self.redis.sadd(self._registry, name)
        if not existed:
            raise _not_found(name)
        return True

    # -- expiry ------------------------------------------------------------------------------

    @map_redis_errors
    async def expire_after(self, name: str, when: float) -> None:
        """Note that ``name`` (a selector created with ``expires_after``) is due to be looked at
        for expiry at ``when`` (Redis time, seconds)."""
        await self.redis.zadd(self._expiring, {name: when})

    @map_redis_errors
    async def due_to_expire(self, limit: int) -> tuple[float, list[str]]:
        """Redis's time now, and up to ``limit`` selectors due to be looked at for expiry."""
        seconds, micros = await self.redis.time()
        now = seconds + micros / 1e6
        due: list[Any] = await self.redis.zrangebyscore(
            self._expiring, "-inf", now, start=0, num=limit
        )
        return now, [_str(name) for name in due]

    @map_redis_errors
    async def forget_expiry(self, name: str) -> None:
        await self.redis.zrem(self._expiring, name)

    @map_redis_errors
    async def get_head(self, name: str) -> Head:
        k = self.keys(name)
        values = await self.redis.hmget(k.head, list(HEAD_FIELDS))
        if values[0] is None:
            raise _not_found(name)
        return _head_from(values)

    # -- ingest log --------------------------------------------------------------------------

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
        status = _str(reply[0])
        if status == "NOTFOUND":
            self.forget_meta(name)
            raise _not_found(name)
        if status == "INCARNATION":
            self.forget_meta(name)
            raise StaleMeta(f"selector '{name}' was deleted and created again; describe it again")
        if status == "MISMATCH":
            raise IdempotencyMismatch(
                f"Idempotency-Key '{idempotency_key}' was first used with a different body"
            )
        if status == "NAME_TAKEN":
            raise Conflict(
                f"feature name '{_str(reply[1])}' is already used by feature {_str(reply[2])} "
                f"of selector '{name}'; expected a new name"
            )
        if status == "NAME_RESERVED":
            raise Conflict(
                f"feature name '{_str(reply[1])}' is reserved: 'f<i>' is the name shown for "
                f"unnamed feature i, and this column is feature {_str(reply[2])}"
            )
        if status == "DUP":
            return AppendOutcome(
                log_id=_str(reply[1]),
                duplicate=True,
                applied_version=_opt_int(reply[2]),
                items_seen=_opt_int(reply[3]),
                first=_opt_int(reply[4]) or 0,
                rejected=None if len(reply) < 6 or reply[5] is None else _str(reply[5]),
            )
        return AppendOutcome(
            log_id=_str(reply[1]),
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
        if clustered and any(_str(reply[0]) == "NEW" for reply in replies):
            self._mark_pending(name)
        return replies

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

    async def close(self) -> None:
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
        names = [_str(member) for member, _score in marked]
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
                and compare_stream_ids(_str(last), _str(cursor)) > 0
            ):
                pending.append(name)
            else:
                done += [name, f"{score:.0f}"]
        if done:
            await self._run("unmark_pending", [self._pending], done)
        return pending

    @map_redis_errors
    async def idempotency_record(self, name: str, key: str) -> AppendOutcome | None:
        """The record of an idempotency key (``duplicate=True``: it exists), or None."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        for record in _record_keys(k, key):
            pipe.hmget(record, _IDEM_FIELDS)
        return _first_record(await pipe.execute())

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
            pipe.hmget(record, _IDEM_FIELDS)
        replies = await pipe.execute()
        reason = None if replies[0] is None else _str(replies[0])
        return reason, _first_record(replies[1:])

    @map_redis_errors
    async def item_names(self, name: str, indices: Sequence[int]) -> list[str | None]:
        """Names given on arrival to the features at ``indices`` (None where unnamed)."""
        if not indices:
            return []
        values = await self.redis.hmget(self.keys(name).feature_name, [str(i) for i in indices])
        return [None if v is None else _str(v) for v in values]

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
            raise _not_found(name)
        return [_log_entry(k, log_id, fields) for log_id, fields in entries]

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
        status = _str(reply[0])
        if status == "NOTFOUND":
            raise _not_found(lease.name)
        if status == "LEASE":
            raise StaleApplier(
                f"applier with token {lease.token} of selector '{lease.name}' lost its lease "
                "before reading its next entries"
            )
        k = self.keys(lease.name)
        entries = [_log_entry(k, log_id, _pairs(fields)) for log_id, fields in reply[2]]
        return Taken(int(reply[1]), entries)

    async def commit_notices(self) -> AsyncIterator[CommitNotice]:
        """Every commit of every replica, as it is announced, until the connection breaks
        (``Unavailable``: subscribe again; what was announced meanwhile is not heard)."""
        pubsub = self.redis.pubsub()
        try:
            try:
                await pubsub.subscribe(self._commits_channel)
                while True:
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
                mapped = _unavailable(exc)
                if mapped is None:
                    raise
                raise mapped from exc
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    @map_redis_errors
    async def forgive_attempts(self, name: str, holders: Sequence[str]) -> None:
        """Take back the last attempt of each lease holder in ``holders`` (see ``take``): its
        process is alive and knows the entry was not why it made no progress."""
        if holders:
            await self._run("forgive_attempts", [self.keys(name).attempts], list(holders))

    @map_redis_errors
    async def rejection(self, name: str, log_id: str) -> str | None:
        """Why entry ``log_id`` was rejected instead of applied, or None if it was not."""
        reason = await self.redis.hget(self.keys(name).rejected, log_id)
        return None if reason is None else _str(reason)

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
        return None if last is None or _str(last) == INITIAL_CURSOR else _str(last)

    @map_redis_errors
    async def pending_count(self, name: str) -> int:
        """Log entries appended and not yet applied (or rejected)."""
        k = self.keys(name)
        entries, applied = await self.redis.hmget(k.head, ["entries", "applied"])
        if entries is None:  # a head of the earlier layout: its log held only pending entries
            return int(await self.redis.xlen(k.log))
        return max(int(entries) - int(applied or 0), 0)

    @map_redis_errors
    async def names_with_pending(self) -> list[str]:
        """Selectors with entries appended after their cursor (sorted); one small read each."""
        names = sorted(_str(n) for n in await self.redis.smembers(self._registry))
        out: list[str] = []
        for start in range(0, len(names), _PIPELINE_BATCH):
            batch = self.keyed(names[start : start + _PIPELINE_BATCH])
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
                if compare_stream_ids(_str(last), _str(cursor)) > 0:
                    out.append(n)
        return out

    @map_redis_errors
    async def missing(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` that are no selector (any more); one whose master is down is
        not known to be gone."""
        heads = [self.keys(name).head for name in names]
        found = await self.read_each(heads, lambda pipe, key: pipe.exists(key))
        return [name for name, exists in zip(names, found, strict=True) if not exists]

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
    async def commits_after(self, name: str, version: int) -> list[CommitRecord]:
        """The commit records of the versions after ``version``, oldest first."""
        raw = await self.redis.lrange(self.keys(name).commits, 0, -1)
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
                await self.redis.xrange(k.log, min=start, max=through, count=_PIPELINE_BATCH) or []
            )
            out.extend(_log_entry(k, log_id, fields) for log_id, fields in batch)
            if len(batch) < _PIPELINE_BATCH:
                return out
            start = f"({_str(batch[-1][0])}"

    # -- applier lease -----------------------------------------------------------------------

    @map_redis_errors
    async def acquire_lease(self, name: str, ttl_ms: int) -> Lease | None:
        """Take the applier lease if free; None if someone holds it."""
        k = self.keys(name)
        holder = _holder_id()
        reply = await self._run("acquire_lease", [k.head, k.lease, k.fence], [holder, int(ttl_ms)])
        status = _str(reply[0])
        if status == "NOTFOUND":
            raise _not_found(name)
        if status == "BUSY":
            return None
        return Lease(name=name, token=int(reply[1]), holder=holder, incarnation=_str(reply[2]))

    @map_redis_errors
    async def break_dead_lease(self, name: str) -> bool:
        """Remove the lease of ``name`` if its holder is a process of this machine that died
        (``holder_died``); whether it did."""
        k = self.keys(name)
        holder = await self.redis.get(k.lease)
        if holder is None or not holder_died(_str(holder)):
            return False
        return bool(await self._run("release_lease", [k.lease], [_str(holder)]))

    @map_redis_errors
    async def lease_ttl_ms(self, name: str) -> int:
        """Milliseconds left on the applier lease of ``name`` (0 or less: nobody holds it)."""
        return int(await self.redis.pttl(self.keys(name).lease))

    @map_redis_errors
    async def renew_lease(self, lease: Lease, ttl_ms: int) -> bool:
        """Extend the lease; False if it was lost (expired or taken over)."""
        k = self.keys(lease.name)
        reply = await self._run(
            "renew_lease", [k.lease, k.fence], [lease.holder, lease.token, int(ttl_ms)]
        )
        return bool(reply)

    @map_redis_errors
    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (a no-op if it is no longer ours)."""
        k = self.keys(lease.name)
        await self._run("release_lease", [k.lease], [lease.holder])

    # -- state -------------------------------------------------------------------------------

    @map_redis_errors
    async def put_segments(self, name: str, segments: Mapping[str, bytes]) -> None:
        """Write immutable segments (before the commit that refers to them).

        A segment id always names the same bytes (methods derive both from the log order), so
        ``SET NX`` makes a retry, or a stale applier racing the current one, harmless; a segment
        written by an applier whose commit then fails is reused by the next one.
        """
        if not segments:
            return
        k = self.keys(name)
        # Registered before it is written (like a checkpoint), so that no segment is ever left
        # out of the set that ``delete`` removes. Not a MULTI: redis-py's cluster client runs
        # transactions on an event loop of their own, which breaks its connections.
        pipe = self.redis.pipeline(transaction=False)
        for segment_id, payload in segments.items():
            pipe.sadd(k.segments, k.segment(segment_id))
            pipe.set(k.segment(segment_id), payload, nx=True)
        await pipe.execute()

    @map_redis_errors
    async def get_segment(self, name: str, segment_id: str) -> bytes:
        payload = await self.redis.get(self.keys(name).segment(segment_id))
        if payload is None:
            if not await self.redis.exists(self.keys(name).head):
                raise _not_found(name)
            raise CodecError(f"segment '{segment_id}' of selector '{name}' is missing")
        if isinstance(payload, str):  # pragma: no cover - the store requires a bytes client
            raise CodecError("the Redis client decodes responses; expected raw bytes")
        return payload

    @map_redis_errors
    async def load_checkpoint(self, name: str, checkpoint: Checkpoint) -> dict[str, bytes]:
        """The encoded whole state of ``checkpoint``, its pieces joined.

        Read a few pieces per command, so that Redis never serializes a whole large state in
        one reply. Raises Conflict if a newer checkpoint replaced it meanwhile (re-read the
        head), CodecError if it is damaged, NotFound if the selector is gone.
        """
        fields = [_str(f) for f in await self.redis.hkeys(checkpoint.key)]
        stored: dict[str, bytes] = {}
        for start in range(0, len(fields), _PIECES_PER_READ):
            wanted = fields[start : start + _PIECES_PER_READ]
            values: list[Any] = await self.redis.hmget(checkpoint.key, wanted)
            if any(value is None for value in values):
                fields = []  # replaced while it was read
                break
            stored.update(zip(wanted, values, strict=True))
        if not fields:
            current = await self.get_head(name)
            if current.recovery_point.key != checkpoint.key:
                raise CheckpointReplaced(
                    f"checkpoint of version {checkpoint.version} of selector '{name}' was "
                    f"replaced by version {current.recovery_point.version}; re-read the head"
                )
            raise CodecError(f"checkpoint {checkpoint.key} of '{name}' is missing")
        stored.pop(WRITER_FIELD, None)
        return join_fields(stored) if checkpoint.cut else stored

    @map_redis_errors
    async def snapshot(self, name: str) -> Snapshot:
        """The selector as of its last checkpoint: description, head of that version, every
        state field and the names of the items it counts, read consistently."""
        meta = await self.get_meta(name)
        for attempt in range(_SNAPSHOT_ATTEMPTS):
            head = await self.get_head(name)
            point = head.recovery_point
            try:
                state = await self.load_checkpoint(name, point)
                break
            except Conflict:
                if attempt == _SNAPSHOT_ATTEMPTS - 1:
                    raise
        at = Head(point.version, point.cursor, point.items_seen, point.key, head.updated_at, point)
        names: dict[Any, Any] = await self.redis.hgetall(self.keys(name).feature_name)
        # Names are registered when items are appended: keep only those the state counts.
        item_names = {int(i): _str(n) for i, n in names.items() if int(i) < point.items_seen}
        return Snapshot(meta=meta, head=at, state=state, item_names=item_names)

    @map_redis_errors
    async def get_segments(self, name: str, segment_ids: Sequence[str]) -> dict[str, bytes]:
        """Segments by id (CodecError if one is missing): immutable, so any time after the
        head that refers to them was read gives the same bytes."""
        out: dict[str, bytes] = {}
        for segment_id in segment_ids:
            out[segment_id] = await self.get_segment(name, segment_id)
        return out

    @map_redis_errors
    async def read_state_fields(
        self, name: str, fields: Sequence[str]
    ) -> tuple[Head, dict[str, bytes]]:
        """The head and the requested fields of its state, read atomically.

        Fields the state does not have are absent from the answer.
        """
        wanted = [str(f) for f in fields]
        k = self.keys(name)
        reply = await self._run("read_fields", [k.head], wanted)
        status = _str(reply[0])
        if status == "NOTFOUND":
            raise _not_found(name)
        if status == "NOSTATE":
            raise CodecError(f"state {_str(reply[1])} of the current head of '{name}' is missing")
        head = _head_from(reply[1 : 1 + len(HEAD_FIELDS)])
        values = reply[1 + len(HEAD_FIELDS) :]
        return head, {
            f: v
            for f, v in zip(wanted, values, strict=False)
            if v is not None and f != WRITER_FIELD
        }

    # -- ranking history ---------------------------------------------------------------------

    @map_redis_errors
    async def record_history(self, name: str, entry: HistoryEntry, keep: int) -> bool:
        """Add ``entry`` as the newest of the selector's history, keeping the ``keep`` newest.

        False (nothing written) if the selector is gone or was created anew at an earlier
        version since the entry's commit.
        """
        k = self.keys(name)
        reply = await self._run(
            "record_history", [k.head, k.history], [entry.to_json(), entry.version, int(keep)]
        )
        return bool(reply)

    @map_redis_errors
    async def history(self, name: str, limit: int) -> list[HistoryEntry]:
        """The newest ``limit`` history entries, newest version first."""
        k = self.keys(name)
        # One round trip; a delete racing it may leave an empty list for a head still seen.
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.lrange(k.history, 0, max(limit, 1) - 1)
        exists, raw = await pipe.execute()
        if not exists:
            raise _not_found(name)
        entries = [HistoryEntry.from_json(item) for item in raw]
        # Appliers of two replicas may push in the other order around a takeover.
        return sorted(entries, key=lambda entry: entry.version, reverse=True)

    @map_redis_errors
    async def commit(
        self,
        lease: Lease,
        expected_version: int,
        published: Mapping[str, bytes],
        cursor: str,
        items_seen: int,
        applied_records: Sequence[str],
        rejections: Sequence[Rejection] = (),
        *,
        entries: int,
        history: HistoryEntry | None = None,
        history_kept: int = 0,
        then_take: TakeRequest | None = None,
    ) -> Head:
        """Make the next version if ``lease`` is current and the head is unmoved: one script.

        ``published`` is what readers read of the new version; the whole state stays with the
        applier until a checkpoint. ``entries`` counts the log entries committed past (applied
        or rejected) and ``cursor`` is the last of them; the commit record lets a later applier
        replay them. ``applied_records`` are the idempotency records (``LogEntry.idem_record``)
        of the entries the state contains; ``rejections`` the entries moved aside instead (their
        reasons are kept, bounded to ``REJECTIONS_KEPT`` per selector, and their idempotency
        records say so). ``history`` (its ``updated_at`` is set to the commit's time) goes to
        the ranking history, of which ``history_kept`` entries are kept. Raises StaleApplier
        (lease lost, fenced, version moved; nothing is written), NotFound if the selector was
        deleted.

        ``then_take``: the applier's next ``take``, sent in the same round trip right after the
        commit (Redis runs them in that order); what it took goes to its ``taken`` (left None
        when it could not go along, or failed: the applier then takes as usual).
        """
        parse_stream_id(cursor)
        if items_seen < 0:
            raise ValueError(f"items_seen must be >= 0, got {items_seen}")
        fields = _check_state(published)
        k = self.keys(lease.name)
        state_key = k.state(expected_version + 1, lease.token, secrets.token_hex(8))
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
        history_json = ""
        if history is not None:
            history_json = history.to_json(with_time=False)
        args: list[Any] = [
            lease.holder,
            lease.token,
            expected_version,
            cursor,
            int(items_seen),
            int(entries),
            WRITER_FIELD,
            json.dumps(listed),
            REJECTIONS_KEPT,
            history_json,
            max(int(history_kept), 1),
            self._commits_channel,
            lease.name,
        ]
        for field, value in fields.items():
            args += [field, value]
        if then_take is not None and not self.wait_replicas:
            reply, taken = await self._commit_then_take(lease, keys, args, then_take)
        else:
            reply, taken = await self._run_acknowledged("commit", keys, args), None
        status = _str(reply[0])
        if status == "OK":
            if then_take is not None:
                then_take.taken = taken
            return Head(
                version=int(reply[1]),
                cursor=cursor,
                items_seen=int(items_seen),
                state_key=state_key,
                updated_at=float(reply[2]),
                checkpoint=_checkpoint_from(reply[3:8]),
                incarnation=lease.incarnation,
            )
        who = f"applier with token {lease.token} of selector '{lease.name}'"
        if status == "NOTFOUND":
            raise _not_found(lease.name)
        if status == "LEASE":
            holder = _str(reply[1])
            detail = "its lease expired" if not holder else f"its lease is now held by {holder}"
            raise StaleApplier(f"{who} cannot commit: {detail}")
        if status == "FENCED":
            raise StaleApplier(
                f"{who} cannot commit: fenced, the current fencing token is {_str(reply[1])}"
            )
        if status == "VERSION":
            raise StaleApplier(
                f"{who} cannot commit: expected version {expected_version}, "
                f"the head is at version {_str(reply[1])}"
            )
        if status == "CURSOR":
            raise SiftError(
                f"{who} tried to move the cursor back from {_str(reply[1])} to {cursor}"
            )
        raise SiftError(f"commit of selector '{lease.name}' failed: {status}")

    async def _commit_then_take(
        self, lease: Lease, keys: list[str], args: list[Any], then_take: TakeRequest
    ) -> tuple[Any, Taken | None]:
        """The commit script and then the take script, pipelined on one connection (in a
        cluster, on the master of the selector's slot: every key has its hash tag)."""
        take_keys, take_args = self._take_call(lease, then_take)
        commit, take = self._scripts["commit"], self._scripts["take"]
        pipe = self.redis.pipeline(transaction=False)
        pipe.execute_command("EVALSHA", commit.sha, len(keys), *keys, *args)
        pipe.execute_command("EVALSHA", take.sha, len(take_keys), *take_keys, *take_args)
        reply, took = await pipe.execute(raise_on_error=False)
        if isinstance(reply, rexc.NoScriptError):  # not run: run both the usual way
            await self.ensure_scripts()
            return await self._run("commit", keys, args), None
        if isinstance(reply, Exception):
            raise reply
        if isinstance(took, Exception):
            return reply, None
        try:
            return reply, self._taken(lease, took)
        except (StaleApplier, NotFound):
            return reply, None  # the applier's own take says so

    @map_redis_errors
    async def checkpoint(
        self,
        lease: Lease,
        version: int,
        cursor: str,
        items_seen: int,
        pieces: Mapping[str, bytes | memoryview],
    ) -> Checkpoint | None:
        """Write the whole state of ``version`` (applied through ``cursor``), encoded and cut
        in pieces (``codec.cut_fields(encode_state(state))``, done off the event loop by the
        caller), as the selector's checkpoint, piece by piece; then make it current with one
        script (which also trims the log and the commit records it covers and drops older
        checkpoints).

        Returns the checkpoint, or None if it was not needed (a newer one exists) or this
        applier lost its lease meanwhile (the pieces written are removed). NotFound if the
        selector was deleted.
        """
        parse_stream_id(cursor)
        k = self.keys(lease.name)
        key = k.checkpoint(version, lease.token, secrets.token_hex(8))
        # Registered first, so that a crash before the flip leaves an orphan the next
        # checkpoint removes.
        await self.redis.sadd(k.checkpoints, key)
        await self._write_pieces(key, pieces)
        reply = await self._run_acknowledged(
            "checkpoint",
            [k.head, k.lease, k.fence, k.checkpoints, k.log, k.commits, key],
            [lease.holder, lease.token, int(version), cursor, int(items_seen)],
        )
        status = _str(reply[0])
        if status == "OK":
            return Checkpoint(key, int(version), cursor, int(items_seen))
        await self.redis.unlink(key)
        await self.redis.srem(k.checkpoints, key)
        if status == "NOTFOUND":
            raise _not_found(lease.name)
        if status == "AHEAD":
            raise SiftError(
                f"checkpoint of version {version} of '{lease.name}' is ahead of its head "
                f"(version {_str(reply[1])})"
            )
        return None


__all__ = ["SelectorStore", "validate_name"]
