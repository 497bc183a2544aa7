"""Source batches bounded in bytes as well as rows, against a live app and real buses: large
entries (a Redis stream of 1 MiB entries, JetStream and Kafka messages of 300 KB) flow through to
the last, exactly, one at a time where one outgrows ``batch_bytes``, and the service's memory
stays within a few batches of them, whatever ``batch_rows`` allows."""

from __future__ import annotations

import asyncio
import gc
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.nats import add_stream, publish
from tests.support.sources import applied, settled, source_body

MIB = 1 << 20


def padded(value: float, size: int) -> str:
    """``value`` written in ``size`` characters or more (zeros after its digits: the same
    number)."""
    text = f"{value:.6f}"
    return text + "0" * max(0, size - len(text))


def rss_bytes() -> int:
    """This process's resident memory (the app runs in it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


async def peak_while(done: Callable[[], Any]) -> int:
    """The highest resident memory seen until ``done()`` answers true (every 20 ms)."""
    peak = rss_bytes()
    deadline = asyncio.get_running_loop().time() + 120
    while not await done():
        peak = max(peak, rss_bytes())
        assert asyncio.get_running_loop().time() < deadline, "the source did not get through"
        await asyncio.sleep(0.02)
    return max(peak, rss_bytes())


async def variance_of(http: httpx.AsyncClient, name: str, rows: np.ndarray) -> None:
    await applied(http, name, len(rows))
    weights = (await http.get(f"/v1/selectors/{name}/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)


@pytest.mark.slow
async def test_redis_entries_of_a_mib_flow_within_a_few_batches_of_memory(client, bus, bus_url):
    http = client
    body = {"name": "big", "method": "variance", "n_features": 2, "feature_names": ["a", "b"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.round(np.random.default_rng(5).normal(size=(300, 2)), 6)
    for start in range(0, len(rows), 10):
        pipe = bus.pipeline(transaction=False)
        for a, b in rows[start : start + 10]:
            pipe.xadd("large", {"a": padded(float(a), MIB), "b": padded(float(b), 8)})
        await pipe.execute()
    gc.collect()
    before = rss_bytes()
    source = source_body("large", bus_url, "large", into={"selector": "big"}, batch_rows=100_000)
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    assert answer.json()["batch_bytes"] == 8 * MIB

    async def through() -> bool:
        described = (await http.get("/v1/sources/large")).json()
        return bool(described["entries"] >= 300)

    peak = await peak_while(through)
    described = await settled(http, "large", 300)
    assert (described["rows"], described["rejected"]) == (300, 0)
    await variance_of(http, "big", rows)
    # 300 MiB went through; a batch is 8 MiB (one ahead, one committed, their chunks and
    # conversions): far below what the stream holds.
    assert peak - before < 160 * MIB, f"+{(peak - before) / MIB:.0f} MiB"


@pytest.mark.slow
async def test_redis_entries_larger_than_the_budget_move_one_at_a_time(client, bus, bus_url):
    http = client
    body = {"name": "big", "method": "variance", "n_features": 1, "feature_names": ["a"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.round(np.random.default_rng(6).normal(size=(40, 1)), 6)
    for (a,) in rows:
        await bus.xadd("huge", {"a": padded(float(a), 200 * 1024)})
    source = source_body(
        "huge", bus_url, "huge", into={"selector": "big"}, batch_rows=1000, batch_bytes=65536
    )
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "huge", 40)
    assert (described["rows"], described["rejected"]) == (40, 0)
    await variance_of(http, "big", rows)


@pytest.mark.slow
async def test_jetstream_messages_of_300_kb_reach_the_end(client, nats_server):
    http = client
    subject = f"large.{secrets.token_hex(4)}"
    stream = subject.replace(".", "-")
    await add_stream(nats_server.url, stream, [subject])
    body = {"name": "big", "method": "variance", "n_features": 2, "feature_names": ["a", "b"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.round(np.random.default_rng(7).normal(size=(400, 2)), 6)
    for start in range(0, len(rows), 50):
        documents = [
            f'{{"a": {padded(float(a), 300_000)}, "b": {b!r}}}'.encode()
            for a, b in rows[start : start + 50].tolist()
        ]
        await publish(nats_server.url, subject, documents)
    source = {
        "name": "js",
        "kind": "nats",
        "url": nats_server.url,
        "stream": stream,
        "subject": subject,
        "into": {"selector": "big"},
        "batch_rows": 1200,
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "js", 400)
    assert (described["rows"], described["rejected"]) == (400, 0), described["rejected_entries"]
    await variance_of(http, "big", rows)
    # One message larger than the budget moves alone.
    await publish(nats_server.url, subject, [f'{{"a": {padded(0.5, 100_000)}, "b": 1.0}}'.encode()])
    patched = await http.delete("/v1/sources/js")
    assert patched.status_code == 204
    small = {**source, "name": "js2", "batch_bytes": 65536, "into": {"selector": "alone"}}
    body = {**body, "name": "alone"}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    assert (await http.post("/v1/sources", json=small)).status_code == 201
    described = await settled(http, "js2", 401)
    assert (described["rows"], described["rejected"]) == (401, 0)


@pytest.mark.slow
async def test_kafka_messages_of_300_kb_flow_one_at_a_time(client, kafka_broker: KafkaBroker):
    http = client
    topic = f"large-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=2)
    body = {"name": "big", "method": "variance", "n_features": 2, "feature_names": ["a", "b"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.round(np.random.default_rng(8).normal(size=(120, 2)), 6)
    documents = [
        f'{{"a": {padded(float(a), 300_000)}, "b": {b!r}}}'.encode() for a, b in rows.tolist()
    ]
    await produce(kafka_broker.bootstrap, topic, documents, lambda i: i % 2)
    source = {
        "name": "k",
        "kind": "kafka",
        "bootstrap": kafka_broker.bootstrap,
        "topic": topic,
        "into": {"selector": "big"},
        "batch_rows": 5000,
        "batch_bytes": 65536,
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "k", 120)
    assert (described["rows"], described["rejected"]) == (120, 0), described["rejected_entries"]
    assert described["positions"] == {"0": "59", "1": "59"}
    await variance_of(http, "big", rows)


async def test_batch_bytes_is_bounded_and_said(client, bus_url):
    http = client
    body = {"name": "v", "method": "variance", "n_features": 1}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    for wrong in (1000, 65 * MIB, "big"):
        source = source_body("s", bus_url, "k", into={"selector": "v"}, batch_bytes=wrong)
        answer = await http.post("/v1/sources", json=source)
        assert answer.status_code == 422, answer.text
        assert "batch_bytes" in answer.text
    source = source_body("s", bus_url, "k", into={"selector": "v"}, batch_bytes=MIB)
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    assert answer.json()["batch_bytes"] == MIB
    schema = (await http.get("/openapi.json")).json()
    stated = schema["components"]["schemas"]["RedisStreamSource"]["properties"]["batch_bytes"]
    assert (stated["minimum"], stated["maximum"], stated["default"]) == (65536, 64 * MIB, 8 * MIB)
