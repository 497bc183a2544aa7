"""Bus resets against a live app and real buses: a Redis stream (on the tests' bus redis-server)
deleted and written again with ids below the committed position, a JetStream stream
(``nats-server -js``) deleted and created again (its sequences from 1), a Kafka topic (the
session's broker) deleted and created again (its offsets from 0). Each is met as the source's
``on_reset`` says: ``stop`` (state ``reset``, the event in the answer, ``sift_source_resets``
counted, nothing of the new stream read until ``POST /v1/sources/{name}/restart``) or
``restart`` (the new stream read from its start); either way every entry of both streams lands
exactly once (a variance selector keeps exact moments: its weights are numpy's variance of every
value read, and its rows seen their number). A stream trimmed (``XTRIM``, a JetStream purge, Kafka
records deleted as retention does) is not reset: no event, the source runs on.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import nats
import numpy as np
import pytest
import redis.asyncio as aioredis

from tests.support.api import assert_problem
from tests.support.kafka import (
    KafkaBroker,
    create_topic,
    delete_records,
    delete_topic,
    produce,
)
from tests.support.nats import NatsServer, add_stream, publish
from tests.support.sources import LOOPBACK, applied, settled, source_body, until


async def selector(http: httpx.AsyncClient) -> None:
    body = {"name": "v", "method": "variance", "n_features": 1, "feature_names": ["x"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201


async def exact(http: httpx.AsyncClient, values: list[float]) -> None:
    """The selector holds exactly ``values``: their number, and their variance."""
    await applied(http, "v", len(values))
    described = (await http.get("/v1/selectors/v")).json()
    assert described["rows_seen"] == len(values)
    weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
    np.testing.assert_allclose(weights, [np.var(values)], rtol=1e-9)


async def state_of(http: httpx.AsyncClient, state: str, timeout_s: float = 20.0) -> Any:
    async def probe() -> dict[str, Any] | None:
        described = (await http.get("/v1/sources/s")).json()
        return described if described["state"] == state else None

    try:
        return await until(probe, timeout_s)
    except AssertionError:
        print("the source then:", (await http.get("/v1/sources/s")).json())
        raise


async def resets_counted(http: httpx.AsyncClient) -> float:
    for line in (await http.get("/metrics")).text.splitlines():
        if line.startswith('sift_source_resets_total{source="s"}'):
            return float(line.split()[-1])
    return 0.0


async def no_reset_for_a_while(http: httpx.AsyncClient) -> dict[str, Any]:
    """Over two checks of the bus (a second apart), the source met no reset."""
    await asyncio.sleep(2.2)
    described = (await http.get("/v1/sources/s")).json()
    assert described["state"] == "running", described
    assert (described["reset_count"], described["resets"]) == (0, [])
    assert await resets_counted(http) == 0.0
    return dict(described)


async def stopped_at_reset(
    http: httpx.AsyncClient,
    position: str,
    first: str | None,
    last: str | None,
    rows: int,
    or_empty: bool = False,
) -> dict[str, Any]:
    """The source stopped at a reset met at ``position``, the bus then holding ``first`` to
    ``last`` (``or_empty``: or nothing yet, a bus recreated in steps and met between them);
    nothing of the new stream read meanwhile."""
    described = await state_of(http, "reset")
    assert described["reset_count"] == 1
    [event] = described["resets"]
    assert (event["partition"], event["position"], event["action"]) == ("0", position, "stopped")
    extents = [(first, last), (None, None)] if or_empty else [(first, last)]
    assert (event["first"], event["last"]) in extents, event
    assert "created again" in event["why"]
    assert "reset" in described["last_error"] and "/restart" in described["last_error"]
    assert await resets_counted(http) == 1.0
    await asyncio.sleep(1.0)
    described = (await http.get("/v1/sources/s")).json()
    assert (described["state"], described["rows"]) == ("reset", rows)
    return dict(described)


async def restart(http: httpx.AsyncClient, body: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = await http.post("/v1/sources/s/restart", json=body or {})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


# -- Redis streams -----------------------------------------------------------------------------


async def xadd(bus: aioredis.Redis, key: str, values: list[float], first_id: int) -> None:
    """Entries with explicit ids first_id-0, first_id+1-0, ..."""
    pipe = bus.pipeline(transaction=False)
    for i, value in enumerate(values):
        pipe.xadd(key, {"x": repr(value)}, id=f"{first_id + i}-0")
    await pipe.execute()


async def test_a_redis_stream_created_again_below_the_position_stops_the_source(
    client, bus, bus_redis_server
):
    http = client
    await selector(http)
    old = [float(i) for i in range(1, 31)]
    await xadd(bus, "rk", old, 1)
    source = source_body("s", bus_redis_server.url, "rk", into={"selector": "v"}, batch_rows=7)
    made = await http.post("/v1/sources", json=source)
    assert made.status_code == 201, made.text
    assert made.json()["on_reset"] == "stop"
    await settled(http, "s", 30)
    # Trimmed is not reset: the position inside what is left, then above all of it.
    await bus.xtrim("rk", maxlen=5)
    more = [float(i) * 1.5 for i in range(31, 41)]
    await xadd(bus, "rk", more, 31)
    await settled(http, "s", 40)
    await bus.xtrim("rk", maxlen=0)
    await no_reset_for_a_while(http)
    old += more
    await exact(http, old)
    refused = await http.post("/v1/sources/s/restart", json={})
    assert_problem(refused, 409, "not stopped at a bus reset")

    # Deleted and written again from id 1-0: a read after 40-0 would skip all of it.
    await bus.delete("rk")
    new = [100.0 + i * i for i in range(12)]
    await xadd(bus, "rk", new, 1)
    await stopped_at_reset(http, "40-0", "1-0", "12-0", 40)
    await exact(http, old)
    assert_problem(await http.post("/v1/sources/s/restart", json={"start": "7"}), 422, "start")
    restarted = await restart(http)  # from the start, by default
    assert restarted["resets"][0]["restarted_from"] == "earliest"
    assert restarted["resets"][0]["restarted_at"] is not None
    described = await settled(http, "s", 52)
    assert described["state"] == "running" and described["reset_count"] == 1
    assert described["positions"] == {"0": "12-0"}
    assert (described["rows"], described["rejected"]) == (52, 0)
    await exact(http, old + new)
    await xadd(bus, "rk", [7.0], 13)
    await settled(http, "s", 53)
    await exact(http, old + new + [7.0])
    await asyncio.sleep(1.2)
    assert (await http.get("/v1/sources/s")).json()["lag"] == 0


async def test_a_redis_stream_created_again_is_read_from_its_start_when_the_source_says_restart(
    client, bus, bus_redis_server
):
    http = client
    await selector(http)
    old = [float(i) ** 0.5 for i in range(1, 26)]
    await xadd(bus, "rk", old, 1)
    source = source_body(
        "s", bus_redis_server.url, "rk", into={"selector": "v"}, on_reset="restart"
    )
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    await settled(http, "s", 25)
    await bus.delete("rk")
    new = [-3.0 * i for i in range(9)]
    await xadd(bus, "rk", new, 1)

    async def restarted() -> dict[str, Any] | None:
        described = (await http.get("/v1/sources/s")).json()
        return described if described["reset_count"] == 1 and described["entries"] >= 34 else None

    described = await until(restarted)
    [event] = described["resets"]
    assert (event["position"], event["action"], event["restarted_from"]) == (
        "25-0",
        "restarted",
        "0-0",
    )
    assert (event["first"], event["last"]) == ("1-0", "9-0")
    assert described["state"] == "running"
    assert described["entries"] == described["rows"] == 34
    assert await resets_counted(http) == 1.0
    await exact(http, old + new)
    refused = await http.post("/v1/sources/s/restart", json={})
    assert_problem(refused, 409, "not stopped")


# -- JetStream ---------------------------------------------------------------------------------


async def recreate_stream(url: str, stream: str, subject: str) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.delete_stream(stream)
        await js.add_stream(name=stream, subjects=[subject])
    finally:
        await nc.close()


def nats_source(server: NatsServer, stream: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "s",
        "kind": "nats",
        "url": server.url,
        "stream": stream,
        "into": {"selector": "v"},
        "batch_rows": 8,
        **extra,
    }


@pytest.mark.parametrize("on_reset", ["stop", "restart"])
async def test_a_jetstream_stream_created_again_is_a_reset(client, nats_server, on_reset):
    """The new stream gets more messages than the old position: its creation time tells it
    from the old one, not its sequences."""
    http = client
    await selector(http)
    subject = f"r.{secrets.token_hex(4)}"
    stream = subject.replace(".", "-")
    await add_stream(nats_server.url, stream, [subject])
    old = [float(i) * 0.25 for i in range(30)]
    await publish(nats_server.url, subject, [{"x": v} for v in old])
    source = nats_source(nats_server, stream, on_reset=on_reset)
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    await settled(http, "s", 30)
    # A purge keeping the last 5 is a trim: the sequences go on.
    nc = await nats.connect(nats_server.url)
    try:
        await nc.jetstream().purge_stream(stream, keep=5)
    finally:
        await nc.close()
    more = [10.0 + i for i in range(10)]
    await publish(nats_server.url, subject, [{"x": v} for v in more])
    await settled(http, "s", 40)
    await no_reset_for_a_while(http)
    old += more
    await exact(http, old)

    await recreate_stream(nats_server.url, stream, subject)
    new = [50.0 - i * 0.5 for i in range(55)]
    await publish(nats_server.url, subject, [{"x": v} for v in new])
    if on_reset == "stop":
        await stopped_at_reset(http, "40", "1", "55", 40)
        await exact(http, old)
        await restart(http, {"start": "earliest"})
    described = await settled(http, "s", 95)
    assert (described["entries"], described["rows"]) == (95, 95)
    assert described["positions"] == {"0": "55"}
    [event] = described["resets"]
    assert event["position"] == "40" and "created again" in event["why"]
    assert event["action"] == ("stopped" if on_reset == "stop" else "restarted")
    assert await resets_counted(http) == 1.0
    await exact(http, old + new)
    await state_of(http, "running")


# -- Kafka -------------------------------------------------------------------------------------


def kafka_source(broker: KafkaBroker, topic: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "s",
        "kind": "kafka",
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "into": {"selector": "v"},
        "batch_rows": 10,
        **extra,
    }


@pytest.mark.parametrize(("on_reset", "new_count"), [("stop", 35), ("restart", 8)])
async def test_a_kafka_topic_created_again_is_a_reset(
    client, kafka_broker: KafkaBroker, on_reset, new_count
):
    """The new topic gets more messages than the old position (its id tells it), or fewer
    (its end offset below the position)."""
    http = client
    await selector(http)
    topic = f"reset-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic)
    old = [float(i) ** 1.5 for i in range(20)]
    await produce(kafka_broker.bootstrap, topic, [{"x": v} for v in old])
    source = kafka_source(kafka_broker, topic, on_reset=on_reset)
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    await settled(http, "s", 20)
    # Records deleted up to offset 12, as retention deletes them: a trim.
    await delete_records(kafka_broker.bootstrap, topic, {0: 12})
    more = [-1.0 * i for i in range(5)]
    await produce(kafka_broker.bootstrap, topic, [{"x": v} for v in more])
    await settled(http, "s", 25)
    await no_reset_for_a_while(http)
    old += more
    await exact(http, old)

    await delete_topic(kafka_broker.bootstrap, topic)
    await create_topic(kafka_broker.bootstrap, topic)
    new = [3.0 + 0.1 * i * i for i in range(new_count)]
    await produce(kafka_broker.bootstrap, topic, [{"x": v} for v in new])
    if on_reset == "stop":
        # The topic is deleted, created and written in three steps: the consumer may meet it
        # between the last two, empty.
        await stopped_at_reset(http, "24", "0", str(new_count - 1), 25, or_empty=True)
        await exact(http, old)
        await restart(http)
    total = len(old) + new_count
    described = await settled(http, "s", total)
    assert (described["entries"], described["rows"]) == (total, total)
    assert described["positions"] == {"0": str(new_count - 1)}
    [event] = described["resets"]
    assert event["position"] == "24" and "created again" in event["why"]
    assert await resets_counted(http) == 1.0
    await exact(http, old + new)
    await state_of(http, "running")


async def test_restarting_takes_an_admin_key_and_a_known_source(app_factory, bus_redis_server):
    async with app_factory(api_token="root", source_private=LOOPBACK) as (_app, http):
        root = {"authorization": "Bearer root"}
        body = {"name": "v", "method": "variance", "n_features": 1}
        assert (await http.post("/v1/selectors", json=body, headers=root)).status_code == 201
        source = source_body("s", bus_redis_server.url, "rk", into={"selector": "v"})
        assert (await http.post("/v1/sources", json=source, headers=root)).status_code == 201
        made = await http.post("/v1/keys", json={"scopes": ["write"]}, headers=root)
        writer = {"authorization": f"Bearer {made.json()['key']}"}
        refused = await http.post("/v1/sources/s/restart", json={}, headers=writer)
        assert_problem(refused, 403)
        refused = await http.post("/v1/sources/none/restart", json={}, headers=root)
        assert_problem(refused, 404, "none")
        bad = await http.post("/v1/sources/s/restart", json={"start": "soon"}, headers=root)
        assert_problem(bad, 422, "start")
        bad = await http.post("/v1/sources/s/restart", json={"from": "x"}, headers=root)
        assert_problem(bad, 422)
        assert_problem(await http.post("/v1/sources/s/restart", json={}, headers=root), 409)
        assert_problem(await http.post("/v1/sources/s/restart", headers=root), 415)
        refused = await http.post("/v1/sources", json={**source, "name": "t", "on_reset": "skip"})
        assert refused.status_code in (401, 422)
        refused = await http.post(
            "/v1/sources", json={**source, "name": "t", "on_reset": "skip"}, headers=root
        )
        assert_problem(refused, 422, "on_reset")
