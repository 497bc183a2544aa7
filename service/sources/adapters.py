"""The buses a source may read, by the ``kind`` its definition names: one module each."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from service.sources.bus import Bus
from service.sources.kafka import KafkaBus, KafkaSecurity
from service.sources.nats import NatsBus
from service.sources.reach import Reach
from service.sources.redis_stream import RedisStreamBus
from service.sources.spec import DEFAULT_BATCH_BYTES

ADAPTERS: Mapping[str, Callable[[Mapping[str, Any], Reach], Bus]] = {
    "redis-stream": lambda d, reach: RedisStreamBus(
        str(d["url"]), str(d["key"]), reach, d.get("value_field")
    ),
    "nats": lambda d, reach: NatsBus(str(d["url"]), str(d["stream"]), d.get("subject"), reach),
    "kafka": lambda d, reach: KafkaBus(
        str(d["bootstrap"]),
        str(d["topic"]),
        str(d.get("group") or f"sift-{d['name']}"),
        KafkaSecurity(
            d.get("username"),
            d.get("password"),
            str(d.get("mechanism") or "PLAIN"),
            bool(d.get("tls")),
        ),
        reach=reach,
        name=str(d["name"]),
        batch_bytes=int(d.get("batch_bytes") or DEFAULT_BATCH_BYTES),
    ),
}


#: Each kind's bus class: what it says of itself (``shared``) before one is built.
BUS_CLASSES: Mapping[str, type[Bus]] = {
    "redis-stream": RedisStreamBus,
    "nats": NatsBus,
    "kafka": KafkaBus,
}


def shared(definition: Mapping[str, Any]) -> bool:
    """Whether a source's partitions are shared by the processes (a lease per partition,
    taken by its consumer) rather than the whole source held by one (a lease per source):
    as its bus class says, the one the consumer asks of the bus it reads."""
    return bool(BUS_CLASSES[str(definition["kind"])].shared)


def bus_for(definition: Mapping[str, Any], reach: Reach) -> Bus:
    """A (not yet connected) bus for a source's definition, connecting where ``reach``
    allows."""
    return ADAPTERS[str(definition["kind"])](definition, reach)
