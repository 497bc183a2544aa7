"""The Kafka bus's checks of its partitions, against a real broker: one round of offsets serves
the checks of every partition it covers, and a position read after the round is checked on a
new one (against the round's end offsets it would look like a topic created again)."""

from __future__ import annotations

import json
import secrets

import pytest

from service.sources import kafka
from service.sources.kafka import KafkaBus
from service.sources.reach import Reach
from service.store.connection import RedisClient
from tests.support.kafka import KafkaBroker, create_topic, produce


async def test_a_position_read_after_a_round_of_offsets_is_checked_on_a_new_one(
    kafka_broker: KafkaBroker, redis_client: RedisClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A round that would serve every check of this test, were the positions not asked about.
    monkeypatch.setattr(kafka, "ROUND_SECONDS", 600.0)
    bootstrap, topic = kafka_broker.bootstrap, f"t-{secrets.token_hex(4)}"
    await create_topic(bootstrap, topic, partitions=2)
    await produce(bootstrap, topic, [{"i": i} for i in range(10)], partition=lambda i: i % 2)
    bus = KafkaBus(
        bootstrap, topic, f"g-{topic}", reach=Reach.of("127.0.0.0/8", redis_client), name="t"
    )
    await bus.connect()
    try:
        read = await bus.read("0", "-1", 100, 1 << 20, 5.0)
        assert [entry.position for entry in read] == ["0", "1", "2", "3", "4"]
        checked = await bus.check("0", "4", None)
        assert (checked.reset, checked.first, checked.last) == (None, "0", "4")
        # Partition 1, nothing read of it yet: the same round says what it holds.
        other = await bus.check("1", "-1", checked.epoch)
        assert (other.reset, other.first, other.last) == (None, "0", "4")

        await produce(bootstrap, topic, [{"i": i} for i in range(10, 20)], partition=lambda i: 0)
        read = await bus.read("0", "4", 100, 1 << 20, 5.0)
        assert read[-1].position == "14"
        checked = await bus.check("0", "14", checked.epoch)
        assert checked.reset is None, checked.reset
        assert checked.last == "14"
    finally:
        await bus.close()


async def test_a_read_from_another_position_returns_that_positions_entries_only(
    kafka_broker: KafkaBroker, redis_client: RedisClient
) -> None:
    """The consumer's thread has fetched ahead; a read from an earlier position (a commit
    that lost, a restart) starts the partition again there, and nothing fetched for the
    old position comes back; a partition let go (``keep``) and read again starts where it
    is read from."""
    bootstrap, topic = kafka_broker.bootstrap, f"t-{secrets.token_hex(4)}"
    await create_topic(bootstrap, topic, partitions=1)
    await produce(bootstrap, topic, [{"i": i} for i in range(300)], partition=lambda i: 0)
    bus = KafkaBus(
        bootstrap, topic, f"g-{topic}", reach=Reach.of("127.0.0.0/8", redis_client), name="t"
    )
    await bus.connect()
    try:
        first = await bus.read("0", "-1", 10, 1 << 20, 5.0)
        assert [entry.position for entry in first] == [str(i) for i in range(10)]
        again = await bus.read("0", "2", 5, 1 << 20, 5.0)
        assert [entry.position for entry in again] == ["3", "4", "5", "6", "7"]
        ahead = await bus.read("0", "250", 100, 1 << 20, 5.0)
        assert [entry.position for entry in ahead] == [str(i) for i in range(251, 300)]
        bus.keep([])
        back = await bus.read("0", "99", 3, 1 << 20, 5.0)
        assert [entry.position for entry in back] == ["100", "101", "102"]
        # Each is the message at its offset.
        assert [json.loads(entry.raw or b"")["i"] for entry in back] == [100, 101, 102]
    finally:
        await bus.close()
