"""The buses a source may read, by the ``kind`` its definition names: one module each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from service.sources.bus import Bus
from service.sources.nats import NatsBus
from service.sources.redis_stream import RedisStreamBus

ADAPTERS: Mapping[str, Callable[[Mapping[str, Any]], Bus]] = {
    "redis-stream": lambda d: RedisStreamBus(str(d["url"]), str(d["key"])),
    "nats": lambda d: NatsBus(str(d["url"]), str(d["stream"]), d.get("subject")),
}


def bus_for(definition: Mapping[str, Any]) -> Bus:
    """A (not yet connected) bus for a source's definition."""
    return ADAPTERS[str(definition["kind"])](definition)
