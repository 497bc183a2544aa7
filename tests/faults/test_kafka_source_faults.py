"""Fault tests of the Kafka source: real service processes reading a four-partition topic of a
real Apache Kafka broker (``tests/support/kafka``) into a variance selector on a real
redis-server, while the processes are SIGKILLed, the broker restarted, and two replicas split
the partitions and take them over from each other.

The promise under test, as for the other sources (``test_source_faults``): every message is in
the state exactly once, or set aside exactly once. The variance selector keeps exact moments,
so its weights must equal numpy's variance of the good messages (to 1e-9).

Every test prints its figures (``-s`` or ``-rP``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from tests.faults.test_source_faults import check_exact, describe, entries, must, setup
from tests.support.harness import RedisProcess, ServiceProcess, poll
from tests.support.kafka import KafkaBroker, create_topic, produce

pytestmark = pytest.mark.slow

PARTITIONS = 4

#: The buses listen on loopback, which sources reach only when the operator opts it in.
BUSES_ON_LOOPBACK = {"SIFT_SOURCE_PRIVATE": "127.0.0.0/8"}


def documents_of(fields: list[dict[str, str]]) -> list[Any]:
    """The entries as JSON messages: numbers, and the bad value left as the text 'oops'."""
    return [{k: (v if v == "oops" else float(v)) for k, v in f.items()} for f in fields]


def kafka_source(broker: KafkaBroker, topic: str, **options: int) -> dict[str, Any]:
    return {
        "name": "s",
        "kind": "kafka",
        "bootstrap": broker.bootstrap,
        "topic": topic,
        "into": {"selector": "v"},
        **options,
    }


def send(broker: KafkaBroker, topic: str, documents: list[Any]) -> None:
    asyncio.run(produce(broker.bootstrap, topic, documents))


def holders(state: RedisProcess) -> dict[str, int | None]:
    """Each partition's lease holder (its pid), or None."""
    client = state.client()
    out: dict[str, int | None] = {}
    for p in range(PARTITIONS):
        raw = client.get(f"sift:source:{{s}}:lease:{p}")
        text = raw.decode() if isinstance(raw, bytes) else raw
        out[str(p)] = None if text is None else int(text.split(":")[1])
    return out


def test_sigkills_and_a_broker_restart_neither_lose_nor_double_a_message(
    redis_proc: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
    kafka_restartable: KafkaBroker,
) -> None:
    """The session's broker, stopped and killed here (and running again afterwards)."""
    broker, topic = kafka_restartable, "restarts"
    asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
    service = spawn_service("a", **BUSES_ON_LOOPBACK)
    fields, good = entries(16_000, seed=11)
    documents = documents_of(fields)
    setup(service, kafka_source(broker, topic, batch_rows=300, batch_ms=20))
    for step, part in enumerate(range(0, len(documents), 4000)):
        send(broker, topic, documents[part : part + 4000])
        time.sleep(0.5)
        if step == 1:
            service.kill()
            service.start()
        if step == 2:
            broker.stop()
            poll(lambda: describe(service, "s")["state"] == "retrying", 30)
            assert describe(service, "s")["state"] == "retrying"
            broker.start()
            print(f"broker restarted in {broker.started_in:.1f} s")
    check_exact(service, len(documents), good)
    # A SIGKILL of the broker too, then more messages: still exact.
    broker.restart(kill=True)
    more, more_good = entries(2000, seed=12)
    send(broker, topic, documents_of(more))
    fields += more
    check_exact(service, len(fields), np.vstack([good, more_good]))


def test_two_replicas_split_the_partitions_and_take_over_a_dead_ones(
    redis_proc: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
    kafka_broker: KafkaBroker,
) -> None:
    """Only the replicas die here: the session's broker serves throughout."""
    broker, topic = kafka_broker, "takeovers"
    asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
    a, b = spawn_service("a", **BUSES_ON_LOOPBACK), spawn_service("b", **BUSES_ON_LOOPBACK)
    fields, good = entries(24_000, seed=13)
    documents = documents_of(fields)
    send(broker, topic, documents[:6000])
    setup(a, kafka_source(broker, topic, batch_rows=200, batch_ms=20))

    def split() -> dict[str, int | None] | None:
        held = holders(redis_proc)
        pids = list(held.values())
        fair = pids.count(a.pid) == pids.count(b.pid) == PARTITIONS // 2
        return held if fair else None

    print(f"split: {must(split, 30)}")
    send(broker, topic, documents[6000:12000])
    takeovers = []
    for victim, other in ((a, b), (b, a)):
        victim.kill()
        killed_at = time.monotonic()

        def all_taken(other: ServiceProcess = other) -> bool:
            return set(holders(redis_proc).values()) == {other.pid}

        must(all_taken, 30)
        takeovers.append(time.monotonic() - killed_at)
        victim.start()
        print(f"split again: {must(split, 30)}")
    send(broker, topic, documents[12000:])
    print(f"takeovers of a SIGKILLed replica's partitions: {[round(t, 1) for t in takeovers]} s")
    assert max(takeovers) < 15
    check_exact(a, len(documents), good)


def test_a_broker_that_stops_answering_turns_the_source_retrying_and_back(
    redis_proc: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
    kafka_restartable: KafkaBroker,
) -> None:
    """The broker SIGSTOPped for 8 s (a hung machine: its sockets stay open, nothing answers):
    the source says ``retrying`` within about 5 s, in Sift's words, its lag unknown; back to
    ``running`` once the broker answers, and nothing lost or doubled."""
    broker, topic = kafka_restartable, "silences"
    asyncio.run(create_topic(broker.bootstrap, topic, PARTITIONS))
    service = spawn_service("a", **BUSES_ON_LOOPBACK)
    fields, good = entries(4000, seed=13)
    documents = documents_of(fields)
    setup(service, kafka_source(broker, topic, batch_rows=300, batch_ms=20))
    send(broker, topic, documents[:2000])

    def running() -> dict[str, Any] | None:
        described = describe(service, "s")
        return described if described["state"] == "running" else None

    must(lambda: (d := running()) is not None and d["entries"] >= 2000, 60)
    assert broker.process is not None
    os.kill(broker.process.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:

        def retrying() -> dict[str, Any] | None:
            described = describe(service, "s")
            return described if described["state"] == "retrying" else None

        described = must(retrying, 15)
        took = time.monotonic() - stopped
        print(f"retrying {took:.1f} s after the broker stopped answering")
        assert took < 7.0, took
        assert "the Kafka brokers do not answer" in str(described["last_error"])
        assert described["lag"] is None
        time.sleep(max(0.0, 8.0 - (time.monotonic() - stopped)))
        assert describe(service, "s")["state"] == "retrying"
        assert httpx.get(f"{service.url}/v1/readyz", timeout=5).status_code == 200
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    resumed = time.monotonic()
    must(running, 60)
    print(f"running {time.monotonic() - resumed:.1f} s after the broker answered again")
    send(broker, topic, documents[2000:])
    check_exact(service, len(documents), good)
