"""The Kafka broker of the tests (``tests/support/kafka.py``) is a real one: a topic of several
partitions created, messages produced with ``acks=all`` read back in order from each partition
by aiokafka (the service's client), through a restart of the broker on its own data."""

from __future__ import annotations

import secrets

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.kafka import KafkaBroker, create_topic, produce


async def read_all(bootstrap: str, topic: str, partitions: int, count: int) -> list[list[bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        out: list[list[bytes]] = [[] for _ in range(partitions)]
        while sum(map(len, out)) < count:
            batches = await consumer.getmany(timeout_ms=5000)
            assert batches, "nothing more within 5 s"
            for tp, records in batches.items():
                out[tp.partition] += [r.value for r in records if r.value is not None]
        return out
    finally:
        await consumer.stop()


async def test_produced_messages_are_consumed_in_order_per_partition(kafka_broker: KafkaBroker):
    print(f"broker started in {kafka_broker.started_in:.1f} s")
    topic = f"t-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=3)
    documents = [{"i": i} for i in range(300)]
    placed = await produce(kafka_broker.bootstrap, topic, documents, partition=lambda i: i % 3)
    assert [p for p, _ in placed] == [i % 3 for i in range(300)]
    assert [o for p, o in placed if p == 1] == list(range(100))
    read = await read_all(kafka_broker.bootstrap, topic, 3, 300)
    assert read[2] == [f'{{"i": {i}}}'.encode() for i in range(2, 300, 3)]


async def test_the_broker_restarts_on_its_data(kafka_restartable: KafkaBroker):
    broker = kafka_restartable
    await create_topic(broker.bootstrap, "kept", partitions=2)
    await produce(broker.bootstrap, "kept", [{"i": i} for i in range(10)])
    broker.restart(kill=True)
    print(f"broker restarted in {broker.started_in:.1f} s")
    await produce(broker.bootstrap, "kept", [{"i": i} for i in range(10, 20)])
    read = await read_all(broker.bootstrap, "kept", 2, 20)
    assert sorted(int(v[6:-1]) for part in read for v in part) == list(range(20))
