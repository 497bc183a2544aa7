"""Fault tests of sources: real service processes reading a real bus (a redis-server of its own,
or ``nats-server -js``) into a variance selector on a real redis-server, while the processes
are SIGKILLed, the buses and the state's Redis restarted, two replicas share the work, or the
source is deleted mid-stream.

The promise under test: every entry the bus holds is in the state exactly once, or set aside
exactly once. The variance selector keeps exact moments, so its weights must equal numpy's
variance of the good entries (to 1e-9) and its rows seen their number; the source must count
every entry consumed, and every bad one rejected, once.

Every test prints its figures (``-s`` or ``-rP``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import pytest
import redis

from tests.support.harness import RedisProcess, ServiceProcess, poll
from tests.support.nats import NatsServer, add_stream, publish

pytestmark = pytest.mark.slow

NAMES = [f"x{i}" for i in range(8)]
#: Every BAD_EVERY-th entry is bad (a value that is not a number).
BAD_EVERY = 97

#: The buses listen on loopback, which sources reach only when the operator opts it in.
BUSES_ON_LOOPBACK = {"SIFT_SOURCE_PRIVATE": "127.0.0.0/8"}


def entries(count: int, seed: int) -> tuple[list[dict[str, str]], np.ndarray]:
    """``count`` entries of named features, every ``BAD_EVERY``-th bad; the good rows."""
    rows = np.random.default_rng(seed).normal(size=(count, len(NAMES))) * np.arange(1, 9)
    out = []
    good = []
    for i, row in enumerate(rows):
        fields = {name: repr(float(v)) for name, v in zip(NAMES, row, strict=True)}
        if i % BAD_EVERY == BAD_EVERY - 1:
            fields["x3"] = "oops"
        else:
            good.append(row)
        out.append(fields)
    return out, np.array(good)


class Writer:
    """Writes entries to a Redis stream in pipelined slices, a little at a time, retrying a
    slice while the bus is down (XADD with explicit ids, so a retried slice is never written
    twice: Redis refuses an id at or below the last)."""

    def __init__(self, url_port: int, key: str, fields: list[dict[str, str]], slice_: int = 500):
        self.port = url_port
        self.key = key
        self.fields = fields
        self.slice = slice_
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        at = 0
        while at < len(self.fields):
            try:
                client = redis.Redis(port=self.port, socket_timeout=2)
                last = (
                    client.xinfo_stream(self.key)["last-generated-id"]
                    if client.exists(self.key)
                    else b"0-0"
                )
                written = int(last.decode().split("-")[0]) if last != b"0-0" else 0
                at = written  # ids are 1-0, 2-0, ...: the count written so far
                pipe = client.pipeline(transaction=False)
                for i in range(at, min(at + self.slice, len(self.fields))):
                    fields: dict[Any, Any] = dict(self.fields[i])
                    pipe.xadd(self.key, fields, id=f"{i + 1}-0")
                pipe.execute()
                at = min(at + self.slice, len(self.fields))
                client.close()
                time.sleep(0.02)
            except redis.RedisError:
                time.sleep(0.2)
        self.done.set()


T = TypeVar("T")


def must(probe: Callable[[], T | None], timeout_s: float) -> T:
    """``probe``'s first truthy value within ``timeout_s``; fails the test otherwise."""
    value = poll(probe, timeout_s)
    assert value, f"not within {timeout_s} s: {value!r}"
    return value


def describe(service: ServiceProcess, name: str) -> dict[str, Any]:
    answer = httpx.get(f"{service.url}/v1/sources/{name}", timeout=5)
    answer.raise_for_status()
    return dict(answer.json())


def setup(service: ServiceProcess, source: dict[str, Any]) -> None:
    body = {"name": "v", "method": "variance", "n_features": len(NAMES), "feature_names": NAMES}
    assert httpx.post(f"{service.url}/v1/selectors", json=body, timeout=10).status_code == 201
    answer = httpx.post(f"{service.url}/v1/sources", json=source, timeout=10)
    assert answer.status_code == 201, answer.text


def stream_source(bus: RedisProcess, **options: int) -> dict[str, Any]:
    """Source ``s``: the bus's stream ``events`` into selector ``v``."""
    into = {"selector": "v"}
    return {
        "name": "s",
        "kind": "redis-stream",
        "url": bus.url,
        "key": "events",
        "into": into,
        **options,
    }


def check_exact(service: ServiceProcess, total: int, good: np.ndarray) -> None:
    """The source consumed every entry once and the state holds exactly the good ones."""

    def consumed() -> dict[str, Any] | None:
        try:
            described = describe(service, "s")
        except httpx.HTTPError:
            return None
        return described if described["entries"] >= total else None

    described = must(consumed, 120)
    bad = total - len(good)
    print(
        f"entries {described['entries']}, rows {described['rows']}, "
        f"rejected {described['rejected']} (expected {total}, {len(good)}, {bad})"
    )
    assert (described["entries"], described["rows"], described["rejected"]) == (
        total,
        len(good),
        bad,
    )

    def applied() -> dict[str, Any] | None:
        try:
            selector = httpx.get(f"{service.url}/v1/selectors/v", timeout=5).json()
        except httpx.HTTPError:
            return None
        return selector if selector["rows_seen"] >= len(good) else None

    assert must(applied, 120)["rows_seen"] == len(good)
    weights = httpx.get(f"{service.url}/v1/selectors/v/weights", timeout=10).json()["weights"]
    np.testing.assert_allclose(weights, np.var(good, axis=0), rtol=1e-9)


def holder_pid(state: RedisProcess) -> int | None:
    raw = state.client().get("sift:source:{s}:lease")
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    return int(text.split(":")[1])


@pytest.fixture
def bus_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "bus")
    try:
        yield server
    finally:
        server.close()


def test_sigkills_of_two_replicas_neither_lose_nor_double_an_entry(
    redis_proc: RedisProcess,
    bus_redis: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    replicas = {name: spawn_service(name, **BUSES_ON_LOOPBACK) for name in ("a", "b")}
    fields, good = entries(30_000, seed=5)
    setup(replicas["a"], stream_source(bus_redis, batch_rows=500, batch_ms=20))
    writer = Writer(bus_redis.port, "events", fields)
    kills = 0
    takeovers = []
    while kills < 4:
        time.sleep(1.0)

        def live_holder() -> ServiceProcess | None:
            pid = holder_pid(redis_proc)
            return next((s for s in replicas.values() if s.alive and s.pid == pid), None)

        victim = must(live_holder, 30)
        other = next(s for s in replicas.values() if s is not victim)
        victim.kill()
        kills += 1
        killed_at = time.monotonic()
        before = describe(other, "s")["entries"]

        def moved_on(other: ServiceProcess = other, before: int = before) -> bool:
            taken = holder_pid(redis_proc) == other.pid
            return taken and (describe(other, "s")["entries"] > before or writer.done.is_set())

        poll(moved_on, 30)
        takeovers.append(time.monotonic() - killed_at)
        victim.start()
    writer.done.wait(120)
    print(f"takeovers after a SIGKILL: {[round(t, 1) for t in takeovers]} s")
    assert max(takeovers) < 15
    check_exact(replicas["a"], len(fields), good)


def test_the_bus_and_the_state_redis_restarted_while_consuming(
    redis_proc: RedisProcess,
    bus_redis: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    service = spawn_service("a", **BUSES_ON_LOOPBACK)
    fields, good = entries(20_000, seed=6)
    setup(service, stream_source(bus_redis, batch_rows=300, batch_ms=20))
    writer = Writer(bus_redis.port, "events", fields, slice_=200)
    time.sleep(1.0)
    bus_redis.kill()

    def retrying() -> bool:
        return bool(describe(service, "s")["state"] == "retrying")

    poll(retrying, 20)
    assert httpx.get(f"{service.url}/v1/readyz", timeout=5).status_code == 200
    bus_redis.start()
    time.sleep(1.0)
    redis_proc.kill()
    time.sleep(1.0)
    redis_proc.start()
    writer.done.wait(120)
    check_exact(service, len(fields), good)


def test_a_source_deleted_while_consuming_stops_within_a_second(
    redis_proc: RedisProcess,
    bus_redis: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    replicas = [spawn_service("a", **BUSES_ON_LOOPBACK), spawn_service("b", **BUSES_ON_LOOPBACK)]
    fields, _good = entries(40_000, seed=7)
    Writer(bus_redis.port, "events", fields, slice_=5000).done.wait(60)
    setup(replicas[0], stream_source(bus_redis, batch_rows=50, batch_ms=5))
    poll(lambda: describe(replicas[0], "s")["entries"] > 500, 30)
    # Deleted through the replica that does not consume it, when there is one.
    pid = holder_pid(redis_proc)
    other = next((s for s in replicas if s.pid != pid), replicas[0])
    assert httpx.delete(f"{other.url}/v1/sources/s", timeout=5).status_code == 204
    deleted_at = time.monotonic()
    state = redis_proc.client()

    def appended() -> int:
        return int(state.hget("sift:{v}:head", "appended") or 0)

    time.sleep(1.0)
    after_a_second = appended()
    time.sleep(1.5)
    print(f"rows appended 1 s after the delete: {after_a_second}; 2.5 s after: {appended()}")
    assert appended() == after_a_second < len(fields)
    assert time.monotonic() - deleted_at < 5
    assert state.get("sift:source:{s}:lease") is None


def test_jetstream_through_sigkills_and_a_nats_server_restart(
    redis_proc: RedisProcess,
    spawn_service: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> None:
    nats_server = NatsServer(tmp_path / "nats")
    nats_server.start()
    try:
        asyncio.run(add_stream(nats_server.url, "events", ["events.>"]))
        service = spawn_service("a", **BUSES_ON_LOOPBACK)
        fields, good = entries(12_000, seed=8)
        documents: list[Any] = [
            {k: (v if v == "oops" else float(v)) for k, v in f.items()} for f in fields
        ]
        source = {
            "name": "s",
            "kind": "nats",
            "url": nats_server.url,
            "stream": "events",
            "into": {"selector": "v"},
            "batch_rows": 300,
            "batch_ms": 20,
        }
        setup(service, source)
        published = 0
        for step, part in enumerate(range(0, len(documents), 3000)):
            asyncio.run(publish(nats_server.url, "events.x", documents[part : part + 3000]))
            published += len(documents[part : part + 3000])
            time.sleep(0.3)
            if step == 1:
                service.kill()
                service.start()
            if step == 2:
                nats_server.stop()
                poll(lambda: describe(service, "s")["state"] == "retrying", 20)
                nats_server.start()
        assert published == len(documents)
        check_exact(service, len(documents), good)
    finally:
        nats_server.stop()
