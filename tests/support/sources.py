"""What the source tests share: the loopback opt-in, waiting for a source or a selector, and
writing a Redis stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
import redis.asyncio as aioredis

#: The buses of these tests listen on loopback, which sources may reach only when the
#: operator opts it in (``SIFT_SOURCE_PRIVATE``): the tests' apps do, explicitly.
LOOPBACK = "127.0.0.0/8"


async def until(probe: Callable[[], Any], timeout_s: float = 20.0, every_s: float = 0.05) -> Any:
    """The first truthy answer of ``probe`` within ``timeout_s``, else AssertionError."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s; last: {value!r}")
        await asyncio.sleep(every_s)


async def settled(http: httpx.AsyncClient, source: str, entries: int) -> dict[str, Any]:
    """The source once it consumed ``entries`` entries and its target applied them."""

    async def probe() -> dict[str, Any] | None:
        described = (await http.get(f"/v1/sources/{source}")).json()
        return described if described["entries"] >= entries else None

    described = await until(probe)
    return dict(described)


async def applied(http: httpx.AsyncClient, selector: str, rows: int) -> None:
    """Once ``selector`` has applied ``rows`` rows."""

    async def probe() -> bool:
        return bool((await http.get(f"/v1/selectors/{selector}")).json()["rows_seen"] >= rows)

    await until(probe)


async def write(bus: aioredis.Redis, key: str, entries: list[dict[Any, Any]]) -> list[str]:
    """XADD each of ``entries`` to ``key``: their ids."""
    pipe = bus.pipeline(transaction=False)
    for fields in entries:
        pipe.xadd(key, fields)
    return [i.decode() for i in await pipe.execute()]


def source_body(name: str, url: str, key: str, **extra: Any) -> dict[str, Any]:
    """A Redis-stream source's creation body."""
    return {"name": name, "kind": "redis-stream", "url": url, "key": key, **extra}
