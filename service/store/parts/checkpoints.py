"""The checkpoints part of the store: a selector's state beyond what readers read of a version.

Checkpoints (the whole state of one version, written piece by piece, then made current by one
script that trims what it covers), immutable segments the state refers to, a consistent
snapshot of a selector as of its last checkpoint, and reads of fields of the current state.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from service.errors import CheckpointReplaced, CodecError, Conflict, SiftError
from service.store.codec import join_fields
from service.store.core import Room, StoreCore, not_found
from service.store.keys import WRITER_FIELD, StreamKeys, parse_stream_id
from service.store.parts.registry import Registry
from service.store.records import Checkpoint, Head, Lease, Snapshot, as_text
from service.store.redis_errors import map_redis_errors
from service.store.replies import HEAD_FIELDS, head_from_reply

#: How often ``snapshot`` retries when a newer checkpoint replaces the one it is reading.
_SNAPSHOT_ATTEMPTS = 5
#: Checkpoint fields read per command (each a piece of at most ``codec.PIECE_BYTES``).
_PIECES_PER_READ = 4


class Checkpoints(Room):
    """Checkpoints, segments and state reads. (Reads follow the registry's head, and a snapshot
    holds the description.)"""

    def __init__(self, core: StoreCore, registry: Registry) -> None:
        super().__init__(core)
        self.registry = registry

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
        in pieces (``codec.cut_state(state)``, done off the event loop by the
        caller), as the selector's checkpoint, piece by piece; then make it current with one
        script (which also trims the log and the commit records it covers and drops older
        checkpoints).

        Returns the checkpoint, or None if it was not needed (a newer one exists) or this
        applier lost its lease meanwhile (the pieces written are removed). NotFound if the
        selector was deleted.
        """
        parse_stream_id(cursor)
        k = self.core.keys(lease.name)
        key = k.checkpoint(version, lease.token, secrets.token_hex(8))
        # Registered first, so that a crash before the flip leaves an orphan the next
        # checkpoint removes.
        await self.core.redis.sadd(k.checkpoints, key)
        await self.core.write_pieces(key, pieces)
        reply = await self.core.run_acknowledged(
            "checkpoint",
            [k.head, k.lease, k.fence, k.checkpoints, k.log, k.commits, key],
            [lease.holder, lease.token, int(version), cursor, int(items_seen)],
        )
        status = as_text(reply[0])
        if status == "OK":
            return Checkpoint(key, int(version), cursor, int(items_seen))
        await self.core.redis.unlink(key)
        await self.core.redis.srem(k.checkpoints, key)
        if status == "NOTFOUND":
            raise not_found(lease.name)
        if status == "AHEAD":
            raise SiftError(
                f"checkpoint of version {version} of '{lease.name}' is ahead of its head "
                f"(version {as_text(reply[1])})"
            )
        return None

    @map_redis_errors
    async def load_checkpoint(
        self, name: str, checkpoint: Checkpoint
    ) -> dict[str, bytes | memoryview]:
        """The encoded whole state of ``checkpoint``, its pieces joined (a field cut in pieces
        as a read-only view of the joined bytes, joined off the event loop).

        Read a few pieces per command, so that Redis never serializes a whole large state in
        one reply. Raises Conflict if a newer checkpoint replaced it meanwhile (re-read the
        head), CodecError if it is damaged, NotFound if the selector is gone.
        """
        fields = [as_text(f) for f in await self.core.redis.hkeys(checkpoint.key)]
        stored: dict[str, bytes | memoryview] = {}
        for start in range(0, len(fields), _PIECES_PER_READ):
            wanted = fields[start : start + _PIECES_PER_READ]
            values: list[Any] = await self.core.redis.hmget(checkpoint.key, wanted)
            if any(value is None for value in values):
                fields = []  # replaced while it was read
                break
            stored.update(zip(wanted, values, strict=True))
        if not fields:
            current = await self.registry.get_head(name)
            if current.recovery_point.key != checkpoint.key:
                raise CheckpointReplaced(
                    f"checkpoint of version {checkpoint.version} of selector '{name}' was "
                    f"replaced by version {current.recovery_point.version}; re-read the head"
                )
            raise CodecError(f"checkpoint {checkpoint.key} of '{name}' is missing")
        stored.pop(WRITER_FIELD, None)
        if not checkpoint.cut:
            return stored
        return await asyncio.to_thread(join_fields, stored)

    @map_redis_errors
    async def snapshot(self, name: str) -> Snapshot:
        """The selector as of its last checkpoint: description, head of that version, every
        state field and the names of the items it counts, read consistently."""
        meta = await self.registry.get_meta(name)
        for attempt in range(_SNAPSHOT_ATTEMPTS):
            head = await self.registry.get_head(name)
            point = head.recovery_point
            try:
                state = await self.load_checkpoint(name, point)
                break
            except Conflict:
                if attempt == _SNAPSHOT_ATTEMPTS - 1:
                    raise
        at = Head(point.version, point.cursor, point.items_seen, point.key, head.updated_at, point)
        # Names are registered when items are appended: keep only those the state counts. A
        # selector attached to a stream numbers the stream's items from its ``stream_base``.
        base, source = 0, self.core.keys(name)
        if meta.stream is not None:
            base, source = meta.stream_base, StreamKeys(self.core.prefix, meta.stream)
        names: dict[Any, Any] = await self.core.redis.hgetall(source.feature_name)
        item_names = {
            int(i) - base: as_text(n)
            for i, n in names.items()
            if 0 <= int(i) - base < point.items_seen
        }
        return Snapshot(meta=meta, head=at, state=state, item_names=item_names)

    # -- segments ----------------------------------------------------------------------------

    @map_redis_errors
    async def put_segments(self, name: str, segments: Mapping[str, bytes]) -> None:
        """Write immutable segments (before the commit that refers to them).

        A segment id always names the same bytes (methods derive both from the log order), so
        ``SET NX`` makes a retry, or a stale applier racing the current one, harmless; a segment
        written by an applier whose commit then fails is reused by the next one.
        """
        if not segments:
            return
        k = self.core.keys(name)
        # Registered before it is written (like a checkpoint), so that no segment is ever left
        # out of the set that ``delete`` removes. Not a MULTI: redis-py's cluster client runs
        # transactions on an event loop of their own, which breaks its connections.
        pipe = self.core.redis.pipeline(transaction=False)
        for segment_id, payload in segments.items():
            pipe.sadd(k.segments, k.segment(segment_id))
            pipe.set(k.segment(segment_id), payload, nx=True)
        await pipe.execute()

    @map_redis_errors
    async def get_segment(self, name: str, segment_id: str) -> bytes:
        payload = await self.core.redis.get(self.core.keys(name).segment(segment_id))
        if payload is None:
            if not await self.core.redis.exists(self.core.keys(name).head):
                raise not_found(name)
            raise CodecError(f"segment '{segment_id}' of selector '{name}' is missing")
        if isinstance(payload, str):  # pragma: no cover - the store requires a bytes client
            raise CodecError("the Redis client decodes responses; expected raw bytes")
        return payload

    @map_redis_errors
    async def get_segments(self, name: str, segment_ids: Sequence[str]) -> dict[str, bytes]:
        """Segments by id (CodecError if one is missing): immutable, so any time after the
        head that refers to them was read gives the same bytes."""
        out: dict[str, bytes] = {}
        for segment_id in segment_ids:
            out[segment_id] = await self.get_segment(name, segment_id)
        return out

    # -- the current state -------------------------------------------------------------------

    @map_redis_errors
    async def read_state_fields(
        self, name: str, fields: Sequence[str]
    ) -> tuple[Head, dict[str, bytes]]:
        """The head and the requested fields of its state, read atomically.

        Fields the state does not have are absent from the answer.
        """
        wanted = [str(f) for f in fields]
        k = self.core.keys(name)
        reply = await self.core.run("read_fields", [k.head], wanted)
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise not_found(name)
        if status == "NOSTATE":
            raise CodecError(
                f"state {as_text(reply[1])} of the current head of '{name}' is missing"
            )
        head = head_from_reply(reply[1 : 1 + len(HEAD_FIELDS)])
        values = reply[1 + len(HEAD_FIELDS) :]
        return head, {
            f: v
            for f, v in zip(wanted, values, strict=False)
            if v is not None and f != WRITER_FIELD
        }
