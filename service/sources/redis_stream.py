"""A Redis stream as a source's bus: one partition ('0'), positions are entry ids.

Entries are read with ``XREAD`` after the position Sift committed, never with a consumer group:
the position lives with the state it produced (``source_append.lua``), so nothing is
acknowledged to the bus and a crash can neither skip nor repeat an entry. The lag is Redis 7's
``entries-added`` (every entry the stream ever had) less the entries before the start and those
read since.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as rexc

from service.sources.bus import BusEntry, BusUnavailable, Start

PARTITION = "0"
#: Before the first entry of any stream.
FIRST = "0-0"
#: Bound on one call to the bus (a blocked read waits at most a second on top).
TIMEOUT_SECONDS = 5.0


class RedisStreamBus:
    """One Redis stream, read by position."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.key = key
        self._redis: aioredis.Redis | None = None

    async def connect(self) -> None:
        await self.close()
        client = aioredis.from_url(
            self.url,
            decode_responses=False,
            socket_timeout=TIMEOUT_SECONDS + 1,
            socket_connect_timeout=TIMEOUT_SECONDS,
            retry_on_timeout=False,
        )
        # The reply as Redis sends it: redis-py would make a dict of every entry.
        client.set_response_callback("XREAD", lambda response, **_options: response)
        self._redis = client
        await self._call(client.ping())

    async def partitions(self) -> Sequence[str]:
        return [PARTITION]

    async def start(self, partition: str, start: str) -> Start:
        info = await self._info()
        added = _int(info.get(b"entries-added")) if info else 0
        if start == "earliest":
            length = _int(info.get(b"length")) if info else 0
            return Start(FIRST, None if added is None or length is None else added - length)
        if start == "latest":
            last = info.get(b"last-generated-id") if info else None
            return Start(_text(last) if last else FIRST, added)
        return Start(start, None)

    async def read(
        self, partition: str, after: str, max_entries: int, max_wait_s: float
    ) -> list[BusEntry]:
        client = self._client()
        block_ms = max(1, int(max_wait_s * 1000))
        command = client.execute_command(  # type: ignore[no-untyped-call]
            "XREAD", "COUNT", max_entries, "BLOCK", block_ms, "STREAMS", self.key, after or FIRST
        )
        reply: Any = await self._call(command)
        if not reply:
            return []
        # [[key, [[id, [field, value, ...]], ...]]] (RESP2) or {key: [...]} (RESP3).
        items = reply[0][1] if isinstance(reply, list) else next(iter(reply.values()))
        return [BusEntry(entry_id.decode(), None, pairs=pairs) for entry_id, pairs in items]

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        info = await self._info()
        if not info:
            return 0
        last = info.get(b"last-generated-id")
        if last is not None and _text(last) == position:
            return 0
        added = _int(info.get(b"entries-added"))
        if added is None or before is None:
            return None
        return max(0, added - before - consumed)

    async def close(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    def _client(self) -> aioredis.Redis:
        if self._redis is None:
            raise BusUnavailable("not connected")
        return self._redis

    async def _info(self) -> dict[bytes, Any]:
        client = self._client()
        try:
            command = client.execute_command("XINFO", "STREAM", self.key)  # type: ignore[no-untyped-call]
            raw: Any = await self._call(command)
        except BusUnavailable as exc:
            if "no such key" in str(exc).lower():
                return {}
            raise
        if isinstance(raw, dict):
            return {k if isinstance(k, bytes) else str(k).encode(): v for k, v in raw.items()}
        return {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}

    async def _call(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        except rexc.ResponseError as exc:
            raise BusUnavailable(f"the bus's Redis refused: {exc}") from None
        except (rexc.RedisError, OSError) as exc:
            raise BusUnavailable(
                f"the bus's Redis does not answer ({type(exc).__name__}: {exc})"
            ) from None


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None
