"""Persistence of selectors in Redis: descriptions, ingest log, idempotency, leases, state.

The write path (see ``shared/DESIGN.md``):

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

import functools
import json
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as rexc

from service.errors import (
    CodecError,
    Conflict,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    SiftError,
    StaleApplier,
    Unavailable,
)
from service.store import scripts
from service.store.keys import (
    DEFAULT_PREFIX,
    INITIAL_CURSOR,
    WRITER_FIELD,
    SelectorKeys,
    compare_stream_ids,
    next_stream_id,
    parse_stream_id,
    registry_key,
    validate_name,
)
from service.store.records import AppendOutcome, Head, Lease, LogEntry, SelectorMeta

P = ParamSpec("P")
T = TypeVar("T")

#: A staged initial state lives at most this long if its ``create`` never finishes.
_STAGING_TTL_MS = 3_600_000
#: How often ``load_snapshot`` retries when a commit replaces the state it is reading.
_SNAPSHOT_ATTEMPTS = 5
_PIPELINE_BATCH = 256


def _unavailable(exc: rexc.RedisError) -> Unavailable | None:
    """The ``Unavailable`` a Redis failure means, or None if it is not an availability problem."""
    if isinstance(exc, rexc.BusyLoadingError):
        return Unavailable("Redis is loading its dataset into memory; retry shortly", retry_after=2)
    if isinstance(exc, rexc.ConnectionError | rexc.TimeoutError):
        return Unavailable(f"Redis is unreachable: {exc}", retry_after=1)
    if isinstance(exc, rexc.OutOfMemoryError):
        return Unavailable(f"Redis is out of memory (maxmemory reached): {exc}", retry_after=5)
    if isinstance(exc, rexc.ReadOnlyError | rexc.ClusterDownError | rexc.TryAgainError):
        return Unavailable(f"Redis cannot accept writes right now: {exc}", retry_after=1)
    return None


def _redis_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Turn connection-level Redis failures into ``Unavailable`` (503 + Retry-After)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except rexc.RedisError as exc:
            mapped = _unavailable(exc)
            if mapped is None:
                raise
            raise mapped from exc

    return wrapper


def _str(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _opt_int(value: bytes | str | None) -> int | None:
    return None if value is None else int(value)


def _head_from(values: Sequence[Any]) -> Head:
    version, cursor, rows_seen, state_key, updated_at = values
    if version is None or cursor is None or rows_seen is None or state_key is None:
        raise CodecError(f"head record is incomplete: {list(values)!r}")
    return Head(
        version=int(version),
        cursor=_str(cursor),
        rows_seen=int(rows_seen),
        state_key=_str(state_key),
        updated_at=float(updated_at) if updated_at is not None else 0.0,
    )


def _holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(8)}"


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


def _not_found(name: str) -> NotFound:
    return NotFound(f"selector '{name}' does not exist")


class SelectorStore:
    """All Redis access of Sift. Methods are async and raise the ``service.errors`` tree."""

    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str = DEFAULT_PREFIX,
        idempotency_ttl_s: int = 86400,
    ) -> None:
        kwargs = getattr(getattr(redis, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("decode_responses"):
            raise ValueError("SelectorStore needs a Redis client with decode_responses=False")
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"key prefix must be non-empty and free of braces, got {prefix!r}")
        if idempotency_ttl_s < 1:
            raise ValueError(f"idempotency_ttl_s must be >= 1, got {idempotency_ttl_s}")
        self.redis = redis
        self.prefix = prefix
        self.idempotency_ttl_ms = int(idempotency_ttl_s) * 1000
        self._registry = registry_key(prefix)
        self._scripts = {name: redis.register_script(text) for name, text in scripts.ALL.items()}

    def keys(self, name: str) -> SelectorKeys:
        """The keys of selector ``name`` (raises InvalidInput for a name with braces)."""
        return SelectorKeys(self.prefix, name)

    async def _run(self, script: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        return await self._scripts[script](keys=list(keys), args=list(args))

    # -- health ------------------------------------------------------------------------------

    @_redis_errors
    async def ping(self) -> bool:
        return bool(await self.redis.ping())

    @_redis_errors
    async def ensure_scripts(self) -> None:
        """Load every script (e.g. at start-up or after a Redis restart)."""
        for script in self._scripts.values():
            script.sha = await self.redis.script_load(script.script)

    @_redis_errors
    async def scripts_loaded(self) -> bool:
        shas = [script.sha for script in self._scripts.values()]
        return all(await self.redis.script_exists(*shas))

    # -- selectors ---------------------------------------------------------------------------

    @_redis_errors
    async def create(self, meta: SelectorMeta, initial_state: Mapping[str, bytes]) -> Head:
        """Create a selector at version 0; Conflict if the name is taken."""
        k = self.keys(meta.name)
        state = _check_state(initial_state)
        names_json = "" if meta.feature_names is None else json.dumps(meta.feature_names)
        # The initial state may be large: stage it with plain commands (short TTL in case we
        # die), the script then renames it into place only if the name is free.
        nonce = secrets.token_hex(8)
        staging = k.staging(nonce)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(staging)
        staged: dict[Any, Any] = {**state, WRITER_FIELD: b"create"}
        pipe.hset(staging, mapping=staged)
        pipe.pexpire(staging, _STAGING_TTL_MS)
        await pipe.execute()
        # Registered before and after the script, so that a delete racing with this create
        # can never leave the new selector out of the registry (see ``delete``).
        await self.redis.sadd(self._registry, meta.name)
        state0 = k.state(0, 0, nonce)
        reply = await self._run(
            "create",
            [k.meta, k.head, k.names, staging, state0, k.blobs],
            [meta.to_json(), names_json],
        )
        status = _str(reply[0])
        if status == "CONFLICT":
            raise Conflict(f"selector '{meta.name}' already exists")
        if status != "OK":
            raise SiftError(f"creating selector '{meta.name}' failed: {status}")
        await self.redis.sadd(self._registry, meta.name)
        return Head(
            version=0,
            cursor=INITIAL_CURSOR,
            rows_seen=0,
            state_key=state0,
            updated_at=float(reply[1]),
        )

    @_redis_errors
    async def get_meta(self, name: str) -> SelectorMeta:
        k = self.keys(name)
        raw_meta, raw_names = await self.redis.mget([k.meta, k.names])
        if raw_meta is None:
            raise _not_found(name)
        feature_names = None
        if raw_names is not None:
            try:
                feature_names = [str(n) for n in json.loads(raw_names)]
            except (ValueError, TypeError) as exc:
                raise CodecError(f"stored feature names of '{name}' do not parse: {exc}") from exc
        return SelectorMeta.from_json(raw_meta, feature_names)

    @_redis_errors
    async def list_names(self) -> list[str]:
        """Names of all selectors, sorted (registry entries without a description are skipped)."""
        names = sorted(_str(n) for n in await self.redis.smembers(self._registry))
        out: list[str] = []
        for start in range(0, len(names), _PIPELINE_BATCH):
            batch = names[start : start + _PIPELINE_BATCH]
            pipe = self.redis.pipeline(transaction=False)
            valid = []
            for n in batch:
                try:
                    pipe.exists(self.keys(n).meta)
                    valid.append(n)
                except InvalidInput:
                    continue
            exists = await pipe.execute()
            out.extend(n for n, e in zip(valid, exists, strict=True) if e)
        return out

    @_redis_errors
    async def delete(self, name: str) -> None:
        """Remove every key of the selector atomically, then its registry entry."""
        k = self.keys(name)
        existed = await self._run(
            "delete",
            [
                *(k.meta, k.head, k.names, k.log, k.lease, k.fence, k.blobs, k.idems),
                *(k.feature_index, k.feature_name, k.segments),
            ],
        )
        await self.redis.srem(self._registry, name)
        # A create of the same name may have run between the script and SREM.
        if await self.redis.exists(k.meta):
            await self.redis.sadd(self._registry, name)
        if not existed:
            raise _not_found(name)

    @_redis_errors
    async def get_head(self, name: str) -> Head:
        k = self.keys(name)
        values = await self.redis.hmget(
            k.head, ["version", "cursor", "rows_seen", "state_key", "updated_at"]
        )
        if values[0] is None:
            raise _not_found(name)
        return _head_from(values)

    # -- ingest log --------------------------------------------------------------------------

    @_redis_errors
    async def append(
        self,
        name: str,
        payload: bytes,
        rows: int,
        digest: str,
        idempotency_key: str | None,
        item_names: Sequence[str] = (),
    ) -> AppendOutcome:
        """Append a chunk (and its idempotency record, atomically).

        ``item_names`` names the chunk's items (feature columns) in order, or is empty; they are
        registered atomically with the append. Raises Conflict when a name is already taken or
        is ``f<j>`` for another index ``j`` (the name shown for unnamed feature ``j``).
        """
        if item_names and len(item_names) != rows:
            raise ValueError(f"expected {rows} item names, got {len(item_names)}")
        k = self.keys(name)
        keys = [k.head, k.log, k.idems, k.feature_index, k.feature_name]
        if idempotency_key is not None:
            if not idempotency_key:
                raise InvalidInput("Idempotency-Key must not be empty")
            keys.append(k.idem(idempotency_key))
        reply = await self._run(
            "append",
            keys,
            [
                payload,
                int(rows),
                digest,
                idempotency_key or "",
                self.idempotency_ttl_ms,
                *item_names,
            ],
        )
        status = _str(reply[0])
        if status == "NOTFOUND":
            raise _not_found(name)
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
                rows_seen=_opt_int(reply[3]),
                first=_opt_int(reply[4]) or 0,
            )
        return AppendOutcome(
            log_id=_str(reply[1]),
            duplicate=False,
            applied_version=None,
            rows_seen=None,
            first=int(reply[2]),
        )

    @_redis_errors
    async def idempotency_record(self, name: str, key: str) -> AppendOutcome | None:
        """The record of an idempotency key (``duplicate=True``: it exists), or None."""
        k = self.keys(name)
        _digest, log_id, version, rows_seen, first = await self.redis.hmget(
            k.idem(key), ["digest", "log_id", "applied_version", "rows_seen", "first"]
        )
        if log_id is None:
            return None
        return AppendOutcome(
            log_id=_str(log_id),
            duplicate=True,
            applied_version=_opt_int(version),
            rows_seen=_opt_int(rows_seen),
            first=_opt_int(first) or 0,
        )

    @_redis_errors
    async def item_names(self, name: str, indices: Sequence[int]) -> list[str | None]:
        """Names given on arrival to the features at ``indices`` (None where unnamed)."""
        if not indices:
            return []
        values = await self.redis.hmget(self.keys(name).feature_name, [str(i) for i in indices])
        return [None if v is None else _str(v) for v in values]

    @_redis_errors
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
        out = []
        for log_id, fields in entries:
            idem = fields.get(b"idem")
            out.append(
                LogEntry(
                    log_id=_str(log_id),
                    payload=fields.get(b"payload", b""),
                    idempotency_key=None if idem is None else _str(idem),
                    rows=int(fields.get(b"rows", 0)),
                    first=int(fields.get(b"first", 0)),
                )
            )
        return out

    @_redis_errors
    async def last_log_id(self, name: str) -> str | None:
        """The id of the newest log entry (None when the log is empty: all applied)."""
        newest = await self.redis.xrevrange(self.keys(name).log, count=1)
        log_id = newest[0][0] if newest else None
        return None if log_id is None else _str(log_id)

    @_redis_errors
    async def log_length(self, name: str) -> int:
        return int(await self.redis.xlen(self.keys(name).log))

    @_redis_errors
    async def names_with_pending(self) -> list[str]:
        """Selectors whose log holds entries after their cursor (sorted)."""
        names = sorted(_str(n) for n in await self.redis.smembers(self._registry))
        out: list[str] = []
        for start in range(0, len(names), _PIPELINE_BATCH):
            batch = []
            pipe = self.redis.pipeline(transaction=False)
            for n in names[start : start + _PIPELINE_BATCH]:
                try:
                    k = self.keys(n)
                except InvalidInput:
                    continue
                batch.append(n)
                pipe.hget(k.head, "cursor")
                pipe.xrevrange(k.log, max="+", min="-", count=1)
            replies = await pipe.execute()
            for i, n in enumerate(batch):
                cursor, last = replies[2 * i], replies[2 * i + 1]
                if cursor is None or not last:
                    continue
                if compare_stream_ids(_str(last[0][0]), _str(cursor)) > 0:
                    out.append(n)
        return out

    # -- applier lease -----------------------------------------------------------------------

    @_redis_errors
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
        return Lease(name=name, token=int(reply[1]), holder=holder)

    @_redis_errors
    async def renew_lease(self, lease: Lease, ttl_ms: int) -> bool:
        """Extend the lease; False if it was lost (expired or taken over)."""
        k = self.keys(lease.name)
        reply = await self._run(
            "renew_lease", [k.lease, k.fence], [lease.holder, lease.token, int(ttl_ms)]
        )
        return bool(reply)

    @_redis_errors
    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (a no-op if it is no longer ours)."""
        k = self.keys(lease.name)
        await self._run("release_lease", [k.lease], [lease.holder])

    # -- state -------------------------------------------------------------------------------

    @_redis_errors
    async def put_segments(self, name: str, segments: Mapping[str, bytes]) -> None:
        """Write immutable segments (before the commit that refers to them).

        A segment id always names the same bytes (methods derive both from the log order), so
        ``SET NX`` makes a retry, or a stale applier racing the current one, harmless; a segment
        written by an applier whose commit then fails is reused by the next one.
        """
        if not segments:
            return
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=True)
        for segment_id, payload in segments.items():
            pipe.set(k.segment(segment_id), payload, nx=True)
            pipe.sadd(k.segments, k.segment(segment_id))
        await pipe.execute()

    @_redis_errors
    async def get_segment(self, name: str, segment_id: str) -> bytes:
        payload = await self.redis.get(self.keys(name).segment(segment_id))
        if payload is None:
            if not await self.redis.exists(self.keys(name).head):
                raise _not_found(name)
            raise CodecError(f"segment '{segment_id}' of selector '{name}' is missing")
        if isinstance(payload, str):  # pragma: no cover - the store requires a bytes client
            raise CodecError("the Redis client decodes responses; expected raw bytes")
        return payload

    @_redis_errors
    async def load_state(self, name: str, head: Head) -> dict[str, bytes]:
        """All encoded fields of ``head``'s state.

        Raises Conflict if a commit replaced that state meanwhile (re-read the head, or use
        ``load_snapshot``), NotFound if the selector is gone.
        """
        raw: dict[Any, Any] = await self.redis.hgetall(head.state_key)
        if not raw:
            current = await self.get_head(name)
            if current.state_key != head.state_key:
                raise Conflict(
                    f"state of version {head.version} of selector '{name}' was replaced by "
                    f"version {current.version} while it was read; re-read the head"
                )
            raise CodecError(f"state {head.state_key} of the current head of '{name}' is missing")
        return {_str(field): value for field, value in raw.items() if _str(field) != WRITER_FIELD}

    async def load_snapshot(self, name: str) -> tuple[Head, dict[str, bytes]]:
        """The current head and all of its state, retrying if a commit races the read."""
        for attempt in range(_SNAPSHOT_ATTEMPTS):
            head = await self.get_head(name)
            try:
                return head, await self.load_state(name, head)
            except Conflict:
                if attempt == _SNAPSHOT_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    @_redis_errors
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
        head = _head_from(reply[1:6])
        values = reply[6:]
        return head, {
            f: v
            for f, v in zip(wanted, values, strict=False)
            if v is not None and f != WRITER_FIELD
        }

    @_redis_errors
    async def commit(
        self,
        lease: Lease,
        expected_version: int,
        state: Mapping[str, bytes],
        cursor: str,
        rows_seen: int,
        applied_keys: Sequence[str],
    ) -> Head:
        """Make ``state`` the next version if ``lease`` is current and the head is unmoved.

        Raises StaleApplier (lease lost, fenced, version moved; the written state is removed),
        NotFound if the selector was deleted.
        """
        parse_stream_id(cursor)
        if rows_seen < 0:
            raise ValueError(f"rows_seen must be >= 0, got {rows_seen}")
        fields = _check_state(state)
        k = self.keys(lease.name)
        state_key = k.state(expected_version + 1, lease.token, secrets.token_hex(8))
        # Written first and invisible until the head points at it; registered in :blobs so a
        # crash between here and the flip leaves an orphan the next commit removes.
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(state_key)
        blob: dict[Any, Any] = {**fields, WRITER_FIELD: lease.holder.encode()}
        pipe.hset(state_key, mapping=blob)
        pipe.sadd(k.blobs, state_key)
        await pipe.execute()
        reply = await self._run(
            "commit",
            [k.head, k.lease, k.fence, k.blobs, k.log, state_key]
            + [k.idem(key) for key in applied_keys],
            [
                lease.holder,
                lease.token,
                expected_version,
                cursor,
                int(rows_seen),
                next_stream_id(cursor),
                WRITER_FIELD,
            ],
        )
        status = _str(reply[0])
        if status == "OK":
            return Head(
                version=int(reply[1]),
                cursor=cursor,
                rows_seen=int(rows_seen),
                state_key=state_key,
                updated_at=float(reply[2]),
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
        if status == "BLOB":
            raise StaleApplier(
                f"{who} cannot commit: its state {state_key} was removed or overwritten"
            )
        if status == "CURSOR":
            raise SiftError(
                f"{who} tried to move the cursor back from {_str(reply[1])} to {cursor}"
            )
        raise SiftError(f"commit of selector '{lease.name}' failed: {status}")


__all__ = ["SelectorStore", "validate_name"]
