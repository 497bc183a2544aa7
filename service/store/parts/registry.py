"""The registry part of the store: which selectors exist and what they are.

Creating a selector (its initial state staged first, then put into place by one script; an
import's segments and item names with it), a partitioned selector's claim on its name, the
descriptions (read once per incarnation for their feature names, and cached for writes), the
head, the listing, deletion and expiry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from service.cache import LRU
from service.errors import CodecError, Conflict, SiftError
from service.store.codec import cut_fields
from service.store.core import PIPELINE_BATCH, Room, StoreCore, check_state, not_found
from service.store.keys import INITIAL_CURSOR, WRITER_FIELD, SelectorKeys, is_partition
from service.store.records import Attached, Checkpoint, Head, Imported, SelectorMeta, as_text
from service.store.redis_errors import map_redis_errors
from service.store.replies import HEAD_FIELDS, head_from_reply

#: A staged initial state lives at most this long if its ``create`` never finishes.
_STAGING_TTL_MS = 3_600_000
#: Selectors whose feature names one store keeps parsed.
_FEATURE_NAMES_CACHED = 256
#: Selectors whose description one store keeps for writes (``cached_meta``).
_METAS_CACHED = 4096
#: How long a cached description without feature names is trusted (``cached_meta``).
NAMELESS_META_SECONDS = 1.0


def _redis_time_text(seconds: float) -> str:
    """A time as the scripts write it (``now_str``: seconds, a dot, six digits)."""
    return f"{seconds:.6f}"


class Registry(Room):
    """Selectors: create, describe, list, delete, expire."""

    _feature_names: LRU[tuple[str, float, str], list[str]]
    _metas: LRU[str, tuple[SelectorMeta, float]]

    def __init__(self, core: StoreCore) -> None:
        super().__init__(core)
        # Feature names by selector incarnation: set once, never changed (``get_meta``).
        self._feature_names = LRU(_FEATURE_NAMES_CACHED)
        # Descriptions as last read, and when (``cached_meta``).
        self._metas = LRU(_METAS_CACHED)

    @map_redis_errors
    async def create(
        self,
        meta: SelectorMeta,
        initial_state: Mapping[str, bytes],
        *,
        published: Mapping[str, bytes] | None = None,
        imported: Imported | None = None,
        attached: Attached | None = None,
    ) -> Head:
        """Create a selector; Conflict if the name is taken.

        ``initial_state`` (encoded) becomes its first checkpoint, ``published`` (by default the
        same) what readers read of its first version. A new selector starts at version 0 having
        seen nothing. An ``imported`` one starts where that says, its log empty, so its next
        chunk becomes ``imported.version + 1`` and its next item is numbered
        ``imported.items_seen``. A selector attached to
        ``meta.stream`` starts where ``attached`` (``Streams.attach``) says: its cursor is
        there in the stream's log, the stream's entries before it count as applied. All of it
        appears at once, or (name taken) none of it.
        """
        start = imported or Imported()
        version, items_seen = start.version, start.items_seen
        if version < 0 or items_seen < 0:
            raise ValueError(f"version and items_seen must be >= 0; got {version}, {items_seen}")
        k = self.core.keys(meta.name)
        state = check_state(initial_state)
        shown = state if published is None else check_state(published)
        names_json = "" if meta.feature_names is None else json.dumps(meta.feature_names)
        # The state may be large: stage it first (what readers read in one script, short TTL in
        # case we die; the whole state piece by piece), the script then puts it into place only
        # if the name is free.
        nonce = secrets.token_hex(8)
        staging = k.staging(nonce)
        staged: list[Any] = [_STAGING_TTL_MS, WRITER_FIELD, b"create"]
        for field, value in shown.items():
            staged += [field, value]
        await self.core.run("stage", [staging], staged)
        checkpoint_key = k.checkpoint(int(version), 0, nonce)
        pieces = await asyncio.to_thread(cut_fields, state)
        await self.core.write_pieces(checkpoint_key, pieces, ttl_ms=_STAGING_TTL_MS)
        keys = [k.meta, k.head, k.names, staging, k.state(0, 0, nonce), k.blobs]
        keys += [checkpoint_key, k.checkpoints]
        args: list[Any] = [meta.to_json(), names_json, meta.incarnation]
        if version or items_seen or start.segments or start.item_names:
            keys += await self._stage_import(k, nonce, start.segments, start.item_names)
            args += [int(version), int(items_seen)]
        cursor = INITIAL_CURSOR
        if attached is not None and meta.stream is not None:
            if len(args) == 3:
                args += [int(version), int(items_seen)]
            cursor = attached.cursor
            args += [cursor, attached.entries, meta.stream, meta.stream_incarnation]
        # Registered before and after the script, so that a delete racing with this create
        # can never leave the new selector out of the registry (see ``delete``).
        await self.core.redis.sadd(self.core.registry_key, meta.name)
        reply = await self.core.run_acknowledged("create", keys, args)
        status = as_text(reply[0])
        if status == "CONFLICT":
            raise Conflict(f"selector '{meta.name}' already exists")
        if status != "OK":
            raise SiftError(f"creating selector '{meta.name}' failed: {status}")
        await self.core.redis.sadd(self.core.registry_key, meta.name)
        return Head(
            version=int(version),
            cursor=cursor,
            items_seen=int(items_seen),
            state_key=keys[4],
            updated_at=float(reply[1]),
            checkpoint=Checkpoint(checkpoint_key, int(version), cursor, int(items_seen)),
            incarnation=meta.incarnation,
        )

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
        pipe = self.core.redis.pipeline(transaction=False)
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
            await self.core.redis.set(staged, payload, px=_STAGING_TTL_MS)
            keys += [staged, k.segment(segment_id)]
        return keys

    async def cached_meta(self, name: str) -> SelectorMeta:
        """The description of ``name`` as this process last read it (``get_meta`` otherwise),
        without a round trip: for writes, whose ``append`` names the incarnation they were
        checked against (StaleMeta when the name was deleted and created again since). A
        description without feature names is trusted for ``NAMELESS_META_SECONDS`` only:
        another replica's first named chunk may give it names."""
        meta = self.trusted_meta(name)
        return meta if meta is not None else await self.get_meta(name)

    def trusted_meta(self, name: str) -> SelectorMeta | None:
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
        cached = self.trusted_meta(name)
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
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.get(k.meta)
        pipe.strlen(k.names)
        raw_meta, names_length = await pipe.execute()
        if raw_meta is None:
            raise not_found(name)
        meta = SelectorMeta.from_json(raw_meta, None)
        if names_length:  # else none (yet: the first named chunk may give them)
            incarnation = (name, meta.created_at, meta.incarnation)
            known = self._feature_names.get(incarnation)
            if known is None:
                known = self._parse_names(name, await self.core.redis.get(k.names))
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
        k = self.core.keys(name)
        raw = await self.core.adopt_names(k.meta, k.names, names)
        if raw is None:
            raise not_found(name)
        self.forget_meta(name)  # named now: read again on the next write
        return self._parse_names(name, raw)

    @map_redis_errors
    async def item_names(self, name: str, indices: Sequence[int]) -> list[str | None]:
        """Names given on arrival to the features at ``indices`` (None where unnamed)."""
        return await self.core.item_names(self.core.keys(name).feature_name, indices)

    @map_redis_errors
    async def create_partitioned(self, meta: SelectorMeta) -> None:
        """Claim ``meta.name`` for a partitioned selector: its description alone (each partition
        is created as a selector of its own, ``meta.partition(i)``). Conflict if it is taken."""
        k = self.core.keys(meta.name)
        if await self.core.redis.exists(k.head):
            raise Conflict(f"selector '{meta.name}' already exists")
        await self.core.redis.sadd(self.core.registry_key, meta.name)
        if not await self.core.redis.set(k.meta, meta.to_json(), nx=True):
            raise Conflict(f"selector '{meta.name}' already exists")
        if meta.feature_names is not None:
            await self.core.redis.set(k.names, json.dumps(meta.feature_names))

    @map_redis_errors
    async def list_names(self) -> list[str]:
        """Names of all selectors, sorted (registry entries without a description are skipped,
        and so are partitions: they show as their selector)."""
        names = sorted(
            n
            for n in (as_text(n) for n in await self.core.redis.smembers(self.core.registry_key))
            if not is_partition(n)
        )
        out: list[str] = []
        for start in range(0, len(names), PIPELINE_BATCH):
            valid = self.core.keyed(names[start : start + PIPELINE_BATCH])
            metas = [self.core.keys(n).meta for n in valid]
            exists = await self.core.read_each(metas, lambda pipe, key: pipe.exists(key))
            # A selector whose master is down is listed: the registry says it exists.
            out.extend(n for n, e in zip(valid, exists, strict=True) if e)
        return out

    @map_redis_errors
    async def missing(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` that are no selector (any more); one whose master is down is
        not known to be gone."""
        heads = [self.core.keys(name).head for name in names]
        found = await self.core.read_each(heads, lambda pipe, key: pipe.exists(key))
        return [name for name, exists in zip(names, found, strict=True) if not exists]

    @map_redis_errors
    async def delete(self, name: str, idle_since: float | None = None) -> bool:
        """Remove every key of the selector atomically, then its registry entry. With
        ``idle_since`` (an expiry), only if its last commit is still that one and nothing is
        pending; whether it was removed. NotFound if it does not exist."""
        k = self.core.keys(name)
        existed = await self.core.run(
            "delete",
            [
                *(k.meta, k.head, k.names, k.log, k.lease, k.fence, k.blobs, k.idems),
                *(k.feature_index, k.feature_name, k.segments, k.checkpoints),
                *(k.rejected, k.rejected_order, k.attempts, k.history, k.commits),
                *(k.baseline, k.alerts, k.alert_states, k.alert_events, k.alert_deliveries),
                *(k.outbox, k.outbox_events, k.sources, k.source_rejects),
            ],
            [
                "" if idle_since is None else _redis_time_text(idle_since),
                self.core.commits_channel,
                name,
            ],
        )
        if existed == -1:
            return False
        self.forget_meta(name)
        await self.core.redis.srem(self.core.registry_key, name)
        await self.core.redis.zrem(self.core.expiring_key, name)
        # Its pending mark, if any, goes at the next sweep (a new selector of the name may
        # have marked it already).
        # A create of the same name may have run between the script and SREM.
        if await self.core.redis.exists(k.meta):
            await self.core.redis.sadd(self.core.registry_key, name)
        if not existed:
            raise not_found(name)
        return True

    # -- expiry ------------------------------------------------------------------------------

    @map_redis_errors
    async def expire_after(self, name: str, when: float) -> None:
        """Note that ``name`` (a selector created with ``expires_after``) is due to be looked at
        for expiry at ``when`` (Redis time, seconds)."""
        await self.core.redis.zadd(self.core.expiring_key, {name: when})

    @map_redis_errors
    async def due_to_expire(self, limit: int) -> tuple[float, list[str]]:
        """Redis's time now, and up to ``limit`` selectors due to be looked at for expiry."""
        seconds, micros = await self.core.redis.time()
        now = seconds + micros / 1e6
        due: list[Any] = await self.core.redis.zrangebyscore(
            self.core.expiring_key, "-inf", now, start=0, num=limit
        )
        return now, [as_text(name) for name in due]

    @map_redis_errors
    async def forget_expiry(self, name: str) -> None:
        await self.core.redis.zrem(self.core.expiring_key, name)

    # -- the head ----------------------------------------------------------------------------

    @map_redis_errors
    async def get_head(self, name: str) -> Head:
        k = self.core.keys(name)
        values = await self.core.redis.hmget(k.head, list(HEAD_FIELDS))
        if values[0] is None:
            raise not_found(name)
        return head_from_reply(values)
