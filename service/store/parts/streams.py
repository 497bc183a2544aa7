"""The streams part of the store: streams, their logs, and the selectors attached to them.

A stream is a log with a shape (``StreamMeta``) that several selectors apply, each exactly once
with its own state (ARCHITECTURE.md, "Streams"). Every key of a stream carries the stream's hash
tag (``StreamKeys``) and every script here touches the stream's keys only, so it runs in the
stream's slot; an attached selector's own keys, cursor included, stay in its slot.

Here: creating, describing and deleting a stream; appending to its log (the one append of every
log, ``Appends``); attaching a selector (where it
starts), releasing what its checkpoint covers (which trims the log up to the lowest cursor of
every attachment), detaching it; and the names its feature columns were given on arrival.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from service.cache import LRU
from service.errors import (
    Conflict,
    NotFound,
    SiftError,
    StaleMeta,
)
from service.store.core import PIPELINE_BATCH, Room, StoreCore
from service.store.keys import StreamKeys, streams_registry_key
from service.store.parts.appends import LogTarget, outcome
from service.store.parts.log import Log
from service.store.parts.registry import NAMELESS_META_SECONDS, Registry
from service.store.records import (
    AppendOutcome,
    Attached,
    Attachment,
    Entry,
    SelectorMeta,
    StreamHead,
    StreamMeta,
    as_text,
)
from service.store.redis_errors import map_redis_errors
from service.store.refusals import append_refusal

#: Streams whose description one store keeps for pushes (``cached_stream``).
_STREAMS_CACHED = 1024


def stream_not_found(name: str) -> NotFound:
    return NotFound(f"stream '{name}' does not exist")


class Streams(Room):
    """Streams: create, describe, append, attach, release, detach, delete."""

    _streams: LRU[str, tuple[StreamMeta, float]]

    def __init__(self, core: StoreCore, registry: Registry, log: Log) -> None:
        super().__init__(core)
        self.registry = registry
        self.log = log
        # Descriptions as last read: a stream's shape and names never change for one
        # incarnation, and every append names the incarnation it was checked against.
        self._streams = LRU(_STREAMS_CACHED)

    def stream_keys(self, name: str) -> StreamKeys:
        """The keys of stream ``name`` (InvalidInput for a name that cannot be one)."""
        return StreamKeys(self.core.prefix, name)

    @property
    def _streams_registry(self) -> str:
        return streams_registry_key(self.core.prefix)

    # -- lifecycle ---------------------------------------------------------------------------

    @map_redis_errors
    async def create_stream(self, meta: StreamMeta) -> float:
        """Create a stream with an empty log; its creation time (Redis clock). Conflict if
        the name is taken."""
        k = self.stream_keys(meta.name)
        names = "" if meta.feature_names is None else json.dumps(meta.feature_names)
        # Registered before and after (as a selector's create): a delete racing it never leaves
        # the new stream out of the registry.
        await self.core.redis.sadd(self._streams_registry, meta.name)
        reply = await self.core.run_acknowledged(
            "stream_create", [k.meta, k.head, k.names], [meta.to_json(), names, meta.incarnation]
        )
        if as_text(reply[0]) == "CONFLICT":
            raise Conflict(f"stream '{meta.name}' already exists")
        await self.core.redis.sadd(self._streams_registry, meta.name)
        return float(reply[1])

    @map_redis_errors
    async def get_stream(self, name: str) -> StreamMeta:
        """The stream's description with its feature names (read, and cached)."""
        k = self.stream_keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.get(k.meta)
        pipe.get(k.names)
        raw, names = await pipe.execute()
        if raw is None:
            self._streams.pop(name)
            raise stream_not_found(name)
        feature_names = None if names is None else [str(n) for n in json.loads(names)]
        meta = StreamMeta.from_json(raw, feature_names)
        self._streams.put(name, (meta, time.monotonic()))
        return meta

    async def cached_stream(self, name: str) -> StreamMeta:
        """The description of ``name`` as this process last read it (``get_stream``
        otherwise): for pushes, whose append names the incarnation they were checked against
        (StaleMeta when the name holds another stream since). One without feature names is
        trusted for ``NAMELESS_META_SECONDS`` only, as a selector's: its first named chunk
        (through another replica) may give it names."""
        entry = self._streams.get(name)
        if entry is not None:
            meta, read_at = entry
            fresh = time.monotonic() - read_at < NAMELESS_META_SECONDS
            if meta.feature_names is not None or fresh:
                return meta
        return await self.get_stream(name)

    def forget_stream(self, name: str) -> None:
        self._streams.pop(name)

    @map_redis_errors
    async def stream_head(self, name: str) -> StreamHead:
        k = self.stream_keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.hmget(k.head, ["incarnation", "appended", "entries", "last_id", "trimmed", "closing"])
        pipe.xlen(k.log)
        (incarnation, appended, entries, last_id, trimmed, closing), length = await pipe.execute()
        if incarnation is None:
            raise stream_not_found(name)
        return StreamHead(
            incarnation=as_text(incarnation),
            appended=int(appended or 0),
            entries=int(entries or 0),
            last_id=as_text(last_id or b"0-0"),
            trimmed=as_text(trimmed or b"0-0"),
            length=int(length),
            closing=closing is not None,
        )

    @map_redis_errors
    async def list_streams(self) -> list[str]:
        """Names of every stream, sorted (registry entries without a description skipped)."""
        names = sorted(as_text(n) for n in await self.core.redis.smembers(self._streams_registry))
        out: list[str] = []
        for start in range(0, len(names), PIPELINE_BATCH):
            batch = names[start : start + PIPELINE_BATCH]
            metas = [self.stream_keys(n).meta for n in batch]
            exists = await self.core.read_each(metas, lambda pipe, key: pipe.exists(key))
            out.extend(n for n, e in zip(batch, exists, strict=True) if e)
        return out

    @map_redis_errors
    async def close_stream(self, name: str) -> list[str]:
        """Begin a forced delete: the stream takes no more chunks nor attachments; the names
        of the selectors attached to it now."""
        keys = self._stream_delete_keys(name)
        reply = await self.core.run("stream_delete", keys, ["close", len(keys)])
        if as_text(reply[0]) == "NOTFOUND":
            raise stream_not_found(name)
        return sorted(as_text(n) for n in reply[1])

    @map_redis_errors
    async def delete_stream(self, name: str) -> bool:
        """Remove every key of the stream, unless a selector is attached (Conflict naming
        them in ``extra["selectors"]``); whether it existed."""
        keys = self._stream_delete_keys(name)
        reply = await self.core.run("stream_delete", keys, ["delete", len(keys)])
        if as_text(reply[0]) == "ATTACHED":
            attached = sorted(as_text(n) for n in reply[1])
            raise Conflict(
                f"stream '{name}' has selectors attached ({', '.join(attached)}); delete or "
                "detach them first, or delete the stream with ?force=true (which detaches them)",
                selectors=attached,
            )
        self.forget_stream(name)
        await self.core.redis.srem(self._streams_registry, name)
        # A create of the same name may have run between the script and SREM.
        if await self.core.redis.exists(self.stream_keys(name).meta):
            await self.core.redis.sadd(self._streams_registry, name)
        return bool(int(reply[1]))

    def _stream_delete_keys(self, name: str) -> list[str]:
        k = self.stream_keys(name)
        return [
            *(k.meta, k.head, k.names, k.log, k.idems),
            *(k.feature_index, k.feature_name, k.attachments, k.sources, k.source_rejects),
            k.detaching,  # last: STREAM_DELETE finds it there
        ]

    # -- names -------------------------------------------------------------------------------

    @map_redis_errors
    async def adopt_stream_names(self, name: str, names: Sequence[str]) -> list[str]:
        """Give stream ``name`` (created without feature names) these names unless it has
        names already; the names it has now (as ``adopt_feature_names``)."""
        k = self.stream_keys(name)
        raw = await self.core.adopt_names(k.meta, k.names, names)
        if raw is None:
            raise stream_not_found(name)
        self.forget_stream(name)
        return [str(n) for n in json.loads(raw)]

    @map_redis_errors
    async def stream_item_names(self, name: str, indices: Sequence[int]) -> list[str | None]:
        """Names given on arrival to the stream's items at ``indices`` (None where unnamed)."""
        return await self.core.item_names(self.stream_keys(name).feature_name, indices)

    @map_redis_errors
    async def stream_item_names_from(self, name: str, first: int, count: int) -> dict[int, str]:
        """The names given on arrival to the stream's items ``first`` .. ``first + count - 1``,
        numbered from 0 (as a selector attached at item ``first`` numbers them)."""
        if count <= 0:
            return {}
        given: dict[Any, Any] = await self.core.redis.hgetall(self.stream_keys(name).feature_name)
        out = {}
        for index, item in given.items():
            position = int(index) - first
            if 0 <= position < count:
                out[position] = as_text(item)
        return out

    # -- appending ---------------------------------------------------------------------------

    @map_redis_errors
    async def append_to_stream(
        self, name: str, entry: Entry
    ) -> tuple[AppendOutcome, list[Attachment]]:
        """Append ``entry`` to the stream's log with its idempotency record (atomically), as
        ``Log.append`` does for a selector; the outcome and the selectors attached as of the
        append (those that apply it: each is marked pending). StaleMeta when the stream is
        another incarnation than the entry's; Conflict while the stream is being deleted, or
        for a name on arrival that is taken."""
        reply, raw_attached = await self.log.appends.append(LogTarget("stream", name), entry)
        status = as_text(reply[0])
        if status == "NOTFOUND":
            self.forget_stream(name)
            raise stream_not_found(name)
        if status == "INCARNATION":
            self.forget_stream(name)
            raise StaleMeta(f"stream '{name}' was deleted and created again; describe it again")
        if status == "CLOSING":
            raise Conflict(
                f"stream '{name}' is being deleted and takes no more chunks (DELETE it again "
                "with ?force=true to finish)"
            )
        refused = append_refusal(status, reply, "stream", name, entry.key)
        if refused is not None:
            raise refused
        appended = outcome(reply)
        if appended is None:
            raise SiftError(f"appending to stream '{name}' failed: {status}")
        attached = sorted(
            (
                Attachment.parse(raw_attached[i], raw_attached[i + 1])
                for i in range(0, len(raw_attached), 2)
            ),
            key=lambda attachment: attachment.selector,
        )
        return appended, attached

    # -- attachments -------------------------------------------------------------------------

    @map_redis_errors
    async def attach(
        self, stream: str, selector: str, incarnation: str, start: str, stream_incarnation: str
    ) -> Attached:
        """Attach selector ``selector`` (of ``incarnation``) to ``stream`` from ``start``
        (``"start"``: the oldest entry the stream holds; ``"now"``: its next entry): where it
        starts. Conflict if that name is attached already or the stream is being deleted."""
        k = self.stream_keys(stream)
        reply = await self.core.run_acknowledged(
            "attach",
            [k.head, k.log, k.attachments],
            [selector, incarnation, start, stream_incarnation],
        )
        status = as_text(reply[0])
        if status == "NOTFOUND":
            raise stream_not_found(stream)
        if status == "CLOSING":
            raise Conflict(f"stream '{stream}' is being deleted; no selector may attach")
        if status == "TAKEN":
            raise Conflict(f"a selector named '{selector}' is attached to stream '{stream}'")
        return Attached(
            cursor=as_text(reply[1]),
            items=int(reply[2]),
            entries=int(reply[3]),
            stream_incarnation=as_text(reply[4]),
        )

    @map_redis_errors
    async def attachments(self, stream: str) -> list[Attachment]:
        """The selectors attached to ``stream``, by name (as the stream's slot records them:
        ``Streams.reap`` in the service removes those whose selector is gone)."""
        raw: dict[Any, Any] = await self.core.redis.hgetall(self.stream_keys(stream).attachments)
        return sorted(
            (Attachment.parse(selector, value) for selector, value in raw.items()),
            key=lambda attachment: attachment.selector,
        )

    @map_redis_errors
    async def detaching(self, stream: str) -> list[Attachment]:
        """The selectors being detached from ``stream`` (``cut_stream``), by name."""
        raw: dict[Any, Any] = await self.core.redis.hgetall(self.stream_keys(stream).detaching)
        return sorted(
            (Attachment.parse(selector, value) for selector, value in raw.items()),
            key=lambda attachment: attachment.selector,
        )

    @map_redis_errors
    async def cut_stream(self, stream: str, selector: str, incarnation: str) -> str | None:
        """The first step of a detach (``STREAM_CUT``, the stream's slot): where the stream is
        cut for ``selector`` (its newest entry now, or the cut of a detach begun before); from
        here on no entry appended is the selector's. None when it is not attached (any more)."""
        k = self.stream_keys(stream)
        reply = await self.core.run_acknowledged(
            "stream_cut", [k.head, k.attachments, k.detaching], [selector, incarnation]
        )
        return as_text(reply[1]) if as_text(reply[0]) == "OK" else None

    @map_redis_errors
    async def cut_selector(self, meta: SelectorMeta, cut: str | None) -> str:
        """The second step of a detach (``DETACH_CUT``, the selector's slot): the selector
        takes none of its stream's entries after ``cut`` (None: its cursor) from here on, and
        an applier that read some before cannot commit them. The cut it holds: ``cut``, its
        cursor if past it, or the cut of a detach begun before. Conflict if it is not
        attached to ``meta.stream``."""
        k = self.core.keys(meta.name)
        reply = await self.core.run_acknowledged(
            "detach_cut", [k.head, k.fence], [meta.stream or "", cut or ""]
        )
        _check_attached(meta, as_text(reply[0]))
        return as_text(reply[1])

    @map_redis_errors
    async def release(self, stream: str, selector: str, incarnation: str, cursor: str) -> str:
        """Report that ``selector``'s checkpoint covers the stream's log through ``cursor``:
        the log is trimmed through the lowest such cursor of every attached selector. The id
        the log is trimmed through now."""
        return await self._release(stream, selector, incarnation, cursor)

    @map_redis_errors
    async def detach_from_stream(self, stream: str, selector: str, incarnation: str) -> None:
        """Remove ``selector``'s attachment (if it is of ``incarnation``): it holds nothing of
        the log back any more."""
        await self._release(stream, selector, incarnation, "")

    async def _release(self, stream: str, selector: str, incarnation: str, cursor: str) -> str:
        k = self.stream_keys(stream)
        reply = await self.core.run(
            "release", [k.attachments, k.log, k.head, k.detaching], [selector, incarnation, cursor]
        )
        return "" if as_text(reply[0]) != "OK" else as_text(reply[1])

    @map_redis_errors
    async def attached_heads(self, names: Sequence[str]) -> list[tuple[str, str] | None]:
        """For each selector: its incarnation and the stream its head reads ("" for none), or
        None where it does not exist (a master that does not answer: as if it existed)."""
        replies = await self.core.read_each(
            [self.core.keys(n).head for n in names],
            lambda pipe, key: pipe.hmget(key, ["incarnation", "stream"]),
            raise_on_error=False,
        )
        out: list[tuple[str, str] | None] = []
        for reply in replies:
            if isinstance(reply, Exception) or reply is None or not isinstance(reply, list):
                out.append(("", "?"))  # unknown: never taken for gone
                continue
            incarnation, stream = reply
            out.append(
                None
                if incarnation is None
                else (as_text(incarnation), "" if stream is None else as_text(stream))
            )
        return out

    @map_redis_errors
    async def detach(
        self, meta: SelectorMeta, standalone: SelectorMeta, item_names: Mapping[int, str]
    ) -> bool:
        """Make attached selector ``meta`` standalone (``standalone``: its description without
        the stream), in its own slot (``DETACH``): True, or False while its checkpoint is not
        its current version (bring it there and try again). Conflict if it is not attached to
        ``meta.stream`` (any more)."""
        k = self.core.keys(meta.name)
        names: list[Any] = []
        for index, item in sorted(item_names.items()):
            names += [str(index), item]
        reply = await self.core.run_acknowledged(
            "detach",
            [k.head, k.fence, k.meta, k.feature_index, k.feature_name],
            [meta.stream or "", standalone.to_json(), *names],
        )
        status = as_text(reply[0])
        _check_attached(meta, status)
        self.registry.forget_meta(meta.name)
        return status == "OK"


def _check_attached(meta: SelectorMeta, status: str) -> None:
    """Raise what a detach's step answered (``status``) when ``meta`` is gone or not attached
    to its stream (any more)."""
    if status == "NOTFOUND":
        raise NotFound(f"selector '{meta.name}' does not exist")
    if status == "NOTATTACHED":
        raise Conflict(f"selector '{meta.name}' is not attached to stream '{meta.stream}'")
