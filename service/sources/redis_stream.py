"""A Redis stream as a source's bus: one partition ('0'), positions are entry ids.

Entries are read with ``XREAD`` after the position Sift committed, never with a consumer group:
the position lives with the state it produced (``append.lua``), so nothing is
acknowledged to the bus and a crash can neither skip nor repeat an entry. The lag is Redis 7's
``entries-added`` (every entry the stream ever had) less the entries before the start and those
read since.

A stream has no identity beyond its key: one deleted and written again is told from the one
read by its newest id (``last-generated-id``, which trimming and ``XDEL`` never lower) below the
position, which is what a read after the position would skip. One written again with ids above
the position is read on (nothing of it is skipped).

An entry holds one field per feature name, as text; or, for a source with a ``value_field``,
that one field, whose value is the entry's message (JSON or msgpack, as the source's format
says: ``XADD key * data '{"a": 1, ...}'``), handed on as a message bus's value is (``raw``) and
decoded with its batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis import exceptions as rexc

from service.sources.bus import BusEntry, BusUnavailable, Extent, Start, within_bytes
from service.sources.endpoints import BadUrl, parse_redis
from service.sources.entries import given_twice
from service.sources.reach import Reach, network_failure, redis_connection_class, refusal
from service.store.keys import compare_stream_ids

PARTITION = "0"
#: Before the first entry of any stream.
FIRST = "0-0"
#: Bound on one call to the bus (a blocked read waits at most a second on top).
TIMEOUT_SECONDS = 5.0
#: Entries asked by a connection's first read, before their size is known.
FIRST_COUNT = 16


class RedisStreamBus:
    """One Redis stream, read by position."""

    #: One process holds the whole source (one lease).
    shared = False

    def __init__(self, url: str, key: str, reach: Reach, value_field: str | None = None) -> None:
        self.url = url
        self.key = key
        self.reach = reach
        #: The one field holding each entry's message (None: a field per feature name).
        self.value_field = value_field
        self._value_key = None if value_field is None else value_field.encode()
        self._shown = (value_field or "")[:200]
        self._redis: aioredis.Redis | None = None
        #: The largest entry of the last read (bytes): how many entries a read may ask for
        #: within its byte budget (None: none read yet on this connection).
        self._entry_bytes: int | None = None

    async def connect(self) -> None:
        await self.close()
        try:
            where = parse_redis(self.url)
        except BadUrl as exc:
            raise BusUnavailable(f"the source's URL does not parse: {exc.detail}") from None
        # Connections go where the reach allows, and never to Sift's own Redis
        # (``service.sources.reach``); the URL as parsed, nothing else of it.
        at: dict[str, Any] = (
            {"path": where.path}
            if where.path is not None
            else {"host": where.hosts[0][0], "port": where.hosts[0][1]}
        )
        at.update(where.options)
        pool = aioredis.ConnectionPool(
            connection_class=redis_connection_class(self.reach, where),
            **at,
            username=where.username,
            password=where.password,
            decode_responses=False,
            socket_timeout=TIMEOUT_SECONDS + 1,
            socket_connect_timeout=TIMEOUT_SECONDS,
            retry_on_timeout=False,
        )
        client = aioredis.Redis(connection_pool=pool)
        # The reply as Redis sends it: redis-py would make a dict of every entry.
        client.set_response_callback("XREAD", lambda response, **_options: response)
        self._redis = client
        self._entry_bytes = None
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
        self, partition: str, after: str, max_entries: int, max_bytes: int, max_wait_s: float
    ) -> list[BusEntry]:
        """``XREAD`` asks for as many entries as the budget holds of entries the size of the
        largest of the last read (Redis bounds a reply in entries only): a stream of large
        entries is read a few at a time, one at a time when one outgrows the budget."""
        client = self._client()
        block_ms = max(1, int(max_wait_s * 1000))
        largest = self._entry_bytes
        count = min(max_entries, FIRST_COUNT if largest is None else max_bytes // max(largest, 1))
        command = client.execute_command(  # type: ignore[no-untyped-call]
            "XREAD", "COUNT", max(1, count), "BLOCK", block_ms, "STREAMS", self.key, after or FIRST
        )
        reply: Any = await self._call(command)
        if not reply:
            return []
        # [[key, [[id, [field, value, ...]], ...]]] (RESP2) or {key: [...]} (RESP3).
        items = reply[0][1] if isinstance(reply, list) else next(iter(reply.values()))
        if self._value_key is None:
            entries = [
                BusEntry(entry_id.decode(), None, pairs=pairs, size=sum(map(len, pairs)))
                for entry_id, pairs in items
            ]
        else:
            entries = [self._message(entry_id.decode(), pairs) for entry_id, pairs in items]
        if not entries:
            return []
        self._entry_bytes = max(entry.size for entry in entries)
        return within_bytes(entries, max_bytes)

    def _message(self, position: str, pairs: list[bytes]) -> BusEntry:
        """An entry of a source with a ``value_field``: its value as the message (``raw``),
        or why it holds none."""
        size = sum(map(len, pairs))
        key = self._value_key or b""
        if len(pairs) == 2 and pairs[0] == key:
            return BusEntry(position, None, None, None, pairs[1], size)
        names = pairs[0::2]
        if names.count(key) > 1:
            problem = given_twice(self._shown)
        elif key not in names:
            problem = (
                f"missing field '{self._shown}': expected the entry's message in it "
                "(the source's value_field)"
            )
        else:
            other = next(name for name in names if name != key)
            problem = (
                f"unknown field '{other.decode('utf-8', 'replace')[:200]}': expected only "
                f"the field '{self._shown}' (the source's value_field)"
            )
        return BusEntry(position, None, problem, size=size)

    async def check(self, partition: str, position: str, epoch: str | None) -> Extent:
        info = await self._info()
        if not info:  # no stream (yet): nothing to skip
            return Extent(None, None, None, Start(FIRST, 0))
        added = _int(info.get(b"entries-added"))
        length = _int(info.get(b"length"))
        first_entry = info.get(b"first-entry")
        first = _text(first_entry[0]) if first_entry else None
        newest = info.get(b"last-generated-id")
        last = _text(newest) if newest is not None else None
        start = Start(FIRST, None if added is None or length is None else added - length)
        reset = None
        if last is not None and position and _below(last, position):
            reset = (
                f"the stream's newest entry id {last} is below the position {position}: "
                "it was created again"
            )
        return Extent(None, first, last, start, reset)

    def keep(self, partitions: Iterable[str]) -> None:
        """Nothing: one process reads every partition."""

    async def committed(self, positions: Mapping[str, str]) -> None:
        """The bus keeps no offsets of Sift's: nothing to tell it."""

    async def confirm(self, partition: str) -> None:
        """Nothing: an entry read after the position is never one a reset made it skip."""

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
        lag = added - before - consumed
        # Below 0: the stream was written again above the position since; it cannot say.
        return lag if lag >= 0 else None

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
            cause = exc.__cause__
            if isinstance(cause, rexc.ResponseError) and "no such key" in str(cause).lower():
                return {}
            raise
        if isinstance(raw, dict):
            return {k if isinstance(k, bytes) else str(k).encode(): v for k, v in raw.items()}
        return {raw[i]: raw[i + 1] for i in range(0, len(raw), 2)}

    async def _call(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        except Exception as exc:  # a peer that is not Redis makes the client fail anyhow
            raise _why(exc) from exc


#: What the bus's Redis said, by its error's code, in Sift's words (never the peer's text: a
#: service that is not Redis would have its banner shown).
_REFUSALS = {
    "WRONGTYPE": "the key holds another type than a stream",
    "NOAUTH": "it needs credentials",
    "WRONGPASS": "it refused the credentials",
    "NOPERM": "the user may not run a command Sift needs (INFO, XINFO, XREAD)",
    "LOADING": "it is loading its data",
    "BUSY": "it is busy running a script",
    "MASTERDOWN": "its master is down",
    "CLUSTERDOWN": "its cluster is down",
    "MOVED": "it is a Redis Cluster node (a source reads a stream of one server)",
    "ASK": "it is a Redis Cluster node (a source reads a stream of one server)",
    "CROSSSLOT": "it is a Redis Cluster node (a source reads a stream of one server)",
}


def _why(exc: BaseException) -> BusUnavailable:
    """The bus's failure in Sift's words."""
    refused = refusal(exc)
    if refused is not None:
        return type(refused)(str(refused))
    if isinstance(exc, rexc.AuthenticationError | rexc.AuthenticationWrongNumberOfArgsError):
        return BusUnavailable("the bus's Redis refused the credentials")
    if isinstance(exc, rexc.ResponseError):
        code = str(exc).split(" ", 1)[0].upper()
        why = _REFUSALS.get(code, "it answered a command with an error")
        return BusUnavailable(f"the bus's Redis refused: {why}")
    if isinstance(exc, rexc.RedisError | OSError) and not isinstance(
        exc, rexc.InvalidResponse | rexc.DataError
    ):
        return BusUnavailable(f"the bus's Redis does not answer: {network_failure(exc)}")
    return BusUnavailable("the bus does not answer as a Redis server does")


def _below(entry_id: str, position: str) -> bool:
    try:
        return compare_stream_ids(entry_id, position) < 0
    except ValueError:
        return False


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _int(raw: Any) -> int | None:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None
