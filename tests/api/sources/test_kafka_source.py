"""The Kafka source against a live app and a real Apache Kafka broker (``tests/support/kafka``):
a topic of several partitions read into a variance selector exactly (the weights are numpy's
variance of the good messages, to 1e-9), bad messages set aside with their partition, offset
and reason, each partition's position and lag in the answer and /metrics, Kafka's committed
offsets brought up to Sift's afterwards, numeric arrays for a selector without names, only what
transactions committed (an aborted transaction's messages never, an open one's at its commit),
and the broker's credentials never shown."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.support.kafka import KafkaBroker, Transactions, create_topic, produce
from tests.support.sources import applied, settled, until

NAMES = ["alpha", "beta", "gamma"]


async def test_a_topic_of_four_partitions_lands_exactly(client, kafka_broker: KafkaBroker):
    http = client
    topic = f"events-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=4)
    body = {"name": "v", "method": "variance", "n_features": 3, "feature_names": NAMES}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.random.default_rng(3).normal(size=(800, 3)) * [1, 40, 1600]
    documents: list[Any] = [dict(zip(NAMES, row.tolist(), strict=True)) for row in rows]
    bad = {
        5: [1, 2, 3],
        6: b"not json",
        100: {**documents[100], "beta": "12"},
        101: {**documents[101], "omega": 1.0},
        400: {k: v for k, v in documents[400].items() if k != "gamma"},
    }
    documents = [bad.get(i, d) for i, d in enumerate(documents)]
    placed = await produce(kafka_broker.bootstrap, topic, documents[:300], lambda i: i % 4)
    source = {
        "name": "k",
        "kind": "kafka",
        "bootstrap": kafka_broker.bootstrap,
        "topic": topic,
        "into": {"selector": "v"},
        "batch_rows": 50,
    }
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    assert answer.json()["url"] == f"kafka://{kafka_broker.bootstrap}"
    assert answer.json()["topic"] == topic
    placed += await produce(kafka_broker.bootstrap, topic, documents[300:], lambda i: i % 4)
    described = await settled(http, "k", 800)
    good = [i for i in range(800) if i not in bad]
    await applied(http, "v", len(good))
    weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows[good], axis=0), rtol=1e-9)
    assert (described["entries"], described["rows"], described["rejected"]) == (800, 795, 5)
    assert described["positions"] == {str(p): "199" for p in range(4)}
    where = {(str(placed[i][0]), str(placed[i][1])): i for i in bad}
    reasons = {(r["partition"], r["position"]): r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == set(where)
    by_index = {where[k]: reason for k, reason in reasons.items()}
    assert "got list" not in by_index[5]  # an array is read as f0, f1, ...
    assert "unknown field 'f0'" in by_index[5]
    assert "not JSON" in by_index[6]
    assert "'beta' is not a number" in by_index[100]
    assert "unknown field 'omega'" in by_index[101]
    assert "missing field 'gamma'" in by_index[400]

    async def caught_up() -> dict[str, Any] | None:
        out = (await http.get("/v1/sources/k")).json()
        return out if out["lag"] == 0 and len(out["partition_lag"]) == 4 else None

    described = await until(caught_up)
    assert described["partition_lag"] == {str(p): 0 for p in range(4)}
    assert described["state"] == "running"
    metrics = (await http.get("/metrics")).text
    assert 'sift_source_lag{partition="3",source="k"} 0.0' in metrics

    # Kafka's committed offsets of the group follow Sift's, for Kafka's tools.
    async def kafka_committed() -> dict[int, int] | None:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id="sift-k")
        await consumer.start()
        try:
            out = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(4)}
        finally:
            await consumer.stop()
        return out if all(v == 200 for v in out.values()) else None

    await until(kafka_committed)


async def test_numeric_arrays_for_a_selector_without_names(client, kafka_broker: KafkaBroker):
    http = client
    topic = f"arrays-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=2)
    body = {"name": "u", "method": "variance", "n_features": 4}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.random.default_rng(4).normal(size=(200, 4)) * [1, 2, 3, 4]
    await produce(kafka_broker.bootstrap, topic, [r.tolist() for r in rows])
    source = {
        "name": "a",
        "kind": "kafka",
        "bootstrap": kafka_broker.bootstrap,
        "topic": topic,
        "into": {"selector": "u"},
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    await settled(http, "a", 200)
    await applied(http, "u", 200)
    weights = (await http.get("/v1/selectors/u/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)


async def test_a_refused_login_is_retried_and_never_shown(client, kafka_broker: KafkaBroker):
    """The broker here speaks PLAINTEXT: a SASL login fails; the state says retrying, the
    service stays ready, and the password is nowhere in the answers, /metrics or the logs."""
    http = client
    body = {"name": "w", "method": "variance", "n_features": 1}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    source = {
        "name": "bad",
        "kind": "kafka",
        "bootstrap": kafka_broker.bootstrap,
        "topic": "nowhere",
        "into": {"selector": "w"},
        "username": "sift",
        "password": "kafka-secret-pw",
    }
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    assert "kafka-secret-pw" not in answer.text
    assert answer.json()["url"] == f"kafka://sift:***@{kafka_broker.bootstrap}"

    async def retrying() -> dict[str, Any] | None:
        out = (await http.get("/v1/sources/bad")).json()
        return out if out["state"] == "retrying" else None

    described = await until(retrying, timeout_s=40)
    assert "kafka-secret-pw" not in str(described)
    assert (await http.get("/v1/readyz")).status_code == 200
    assert "kafka-secret-pw" not in (await http.get("/v1/sources")).text
    assert "kafka-secret-pw" not in (await http.get("/metrics")).text


async def test_only_committed_transactions_are_read(client, kafka_broker: KafkaBroker):
    """A transactional producer commits 5 messages and aborts 7 (interleaved, over two
    partitions): the selector gets the 5, exactly; a transaction left open is not read
    until it commits; the lag comes to 0 over the transactions' markers."""
    http = client
    topic = f"txn-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=2)
    body = {"name": "t", "method": "variance", "n_features": 3, "feature_names": NAMES}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.random.default_rng(8).normal(size=(16, 3)) * [1, 10, 100]
    documents = [dict(zip(NAMES, row.tolist(), strict=True)) for row in rows]
    # A value no good message has: a read aborted message would show in the variance.
    aborted = [{name: 1e6 for name in NAMES} for _ in range(7)]
    spread = lambda i: i % 2  # noqa: E731
    async with Transactions(kafka_broker.bootstrap, f"sift-test-{topic}") as producer:
        await producer.transaction(topic, documents[:3], True, spread)
        await producer.transaction(topic, aborted[:4], False, spread)
        await producer.transaction(topic, documents[3:5], True, spread)
        await producer.transaction(topic, aborted[4:], False, spread)
        source = {
            "name": "tx",
            "kind": "kafka",
            "bootstrap": kafka_broker.bootstrap,
            "topic": topic,
            "into": {"selector": "t"},
            "batch_rows": 4,
            "batch_ms": 20,
        }
        assert (await http.post("/v1/sources", json=source)).status_code == 201
        described = await settled(http, "tx", 5)
        await applied(http, "t", 5)

        async def caught_up() -> dict[str, Any] | None:
            out = (await http.get("/v1/sources/tx")).json()
            done = out["lag"] == 0 and len(out["partition_lag"]) == 2
            return out if done and out["state"] == "running" else None

        described = await until(caught_up)
        assert (described["entries"], described["rows"], described["rejected"]) == (5, 5, 0)
        weights = (await http.get("/v1/selectors/t/weights")).json()["weights"]
        np.testing.assert_allclose(weights, np.var(rows[:5], axis=0), rtol=1e-9)

        # An open transaction: written, acknowledged, not read until it commits.
        await producer.open(topic, documents[5:], spread)
        await asyncio.sleep(1.5)
        described = (await http.get("/v1/sources/tx")).json()
        assert (described["entries"], described["rows"]) == (5, 5)
        await producer.finish(True)
        described = await settled(http, "tx", 16)
        await applied(http, "t", 16)
        assert (described["entries"], described["rows"]) == (16, 16)
        weights = (await http.get("/v1/selectors/t/weights")).json()["weights"]
        np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)
        await until(caught_up)
