"""Sources from the Python client and the ``sift source`` commands, against the live service
process: the bus is a real Redis stream (the session's own redis-server, ``redis_server``, which
the service does not otherwise use), written with XADD; the service reads it into a selector or a
stream, and the client shows what it reads, where it got, the entries it set aside and why, and
never the bus's password."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest
import redis
import redis.asyncio as aioredis

from siftstream import (
    AsyncClient,
    Client,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)
from siftstream.results import RejectedEntry, ResetEvent, Source
from tests.support.client import sift as run_sift
from tests.support.harness import RedisProcess, ServiceProcess, wait_for
from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.redis import RedisServer

NAMES = ["alpha", "beta", "gamma"]
#: How long a source may take to consume what a test wrote (and its target to apply it).
SETTLE_S = 30.0


@dataclass
class Bus:
    """The Redis the sources read, and the stream keys a test wrote (deleted afterwards)."""

    url: str
    redis: redis.Redis
    keys: list[str] = field(default_factory=list)

    def write(self, key: str, entries: Sequence[dict[Any, Any]]) -> list[str]:
        """XADD each entry to ``key``; their entry ids."""
        self.keys.append(key)
        pipe = self.redis.pipeline(transaction=False)
        for fields in entries:
            pipe.xadd(key, fields)
        return [text(i) for i in pipe.execute()]


@pytest.fixture
def bus(redis_server: RedisServer) -> Iterator[Bus]:
    client = redis.Redis.from_url(redis_server.url)
    written = Bus(redis_server.url, client)
    try:
        yield written
    finally:
        if written.keys:
            client.delete(*set(written.keys))
        client.close()


def as_fields(row: np.ndarray, names: Sequence[str] = NAMES) -> dict[Any, Any]:
    return dict(zip(names, (repr(float(v)) for v in row), strict=True))


def text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def consumed(sift: Client, name: str, entries: int) -> Source:
    """The source once it consumed ``entries`` entries."""

    def probe() -> Source | None:
        source = sift.describe_source(name)
        return source if source.entries >= entries else None

    return wait_for(probe, SETTLE_S, f"source {name} to consume {entries} entries")


def applied(sift: Client, selector: str, rows: int) -> None:
    wait_for(
        lambda: sift.describe(selector).seen >= rows, SETTLE_S, f"{selector} to apply {rows} rows"
    )


def caught_up(sift: Client, name: str) -> Source:
    def probe() -> Source | None:
        source = sift.describe_source(name)
        return source if source.lag == 0 else None

    return wait_for(probe, SETTLE_S, f"source {name} to have no lag")


def test_a_redis_stream_is_read_into_a_selector(sift: Client, bus: Bus, selector_name: str) -> None:
    sift.create(selector_name, "variance", n_features=3, feature_names=NAMES)
    rows = np.random.default_rng(5).normal(size=(200, 3)) * [1, 10, 100]
    entries = [as_fields(row) for row in rows]
    bad = {20: {**entries[20], "beta": "twelve"}, 75: {**entries[75], "omega": "1"}}
    entries = [bad.get(i, fields) for i, fields in enumerate(entries)]
    key, name = f"{selector_name}-bus", f"{selector_name}-src"
    ids = bus.write(key, entries[:120])

    created = sift.create_source(
        name, "redis-stream", bus.url, key=key, into_selector=selector_name, batch_rows=50
    )
    assert isinstance(created, Source)
    assert (created.name, created.kind, created.url, created.key) == (
        name,
        "redis-stream",
        bus.url,
        key,
    )
    assert created.into == {"selector": selector_name}
    assert (created.into_kind, created.into_name) == ("selector", selector_name)
    assert (created.batch_rows, created.batch_ms, created.start) == (50, 200, "earliest")
    assert created.stream is None and created.label_field is None
    assert created.state in ("starting", "running")

    ids += bus.write(key, entries[120:])
    described = consumed(sift, name, 200)
    good = [i for i in range(200) if i not in bad]
    assert (described.rows, described.rejected) == (len(good), len(bad))
    assert described.positions == {"0": ids[-1]}
    assert all(isinstance(r, RejectedEntry) for r in described.rejected_entries)
    reasons = {r.position: r.reason for r in described.rejected_entries}
    assert set(reasons) == {ids[20], ids[75]}
    assert "'beta' is not a number" in reasons[ids[20]]
    assert "unknown field 'omega'" in reasons[ids[75]]
    # The newest first, each with its partition and when it was set aside.
    assert [r.position for r in described.rejected_entries] == [ids[75], ids[20]]
    assert {r.partition for r in described.rejected_entries} == {"0"}
    assert all(abs(r.at - time.time()) < 120 for r in described.rejected_entries)
    applied(sift, selector_name, len(good))
    np.testing.assert_allclose(
        sift.weights(selector_name).weights, np.var(rows[good], axis=0), rtol=1e-9
    )
    settled = caught_up(sift, name)
    assert settled.state in ("running", "paused") and settled.last_error is None
    assert settled.updated_at is not None and settled.raw["name"] == name

    listed = {s.name: s for s in sift.list_sources()}
    assert listed[name].into == {"selector": selector_name} and listed[name].rows == len(good)

    sift.delete_source(name)
    assert name not in {s.name for s in sift.list_sources()}
    with pytest.raises(NotFoundError) as missing:
        sift.describe_source(name)
    assert missing.value.status == 404 and name in missing.value.detail
    with pytest.raises(NotFoundError):  # a first attempt that finds it gone says so
        sift.delete_source(name)
    # What it appended stays in the selector.
    assert sift.describe(selector_name).rows_seen == len(good)


def test_refusals_are_the_clients_typed_errors(sift: Client, bus: Bus, selector_name: str) -> None:
    name = f"{selector_name}-src"
    with pytest.raises(NotFoundError) as missing:
        sift.describe_source(f"{selector_name}-none")
    assert missing.value.status == 404 and missing.value.kind == "not-found"
    with pytest.raises(NotFoundError) as no_target:  # its selector does not exist
        sift.create_source(name, "redis-stream", bus.url, key="k", into_selector=selector_name)
    assert f"'{selector_name}'" in no_target.value.detail

    sift.create(selector_name, "ocfs", n_features=3)
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"key": "k", "into_selector": selector_name, "start": "yesterday"}, "yesterday"),
        ({"key": "k", "into_selector": selector_name}, "label_field"),
        ({"into_selector": selector_name, "label_field": "y"}, "key"),
    ]
    for options, said in refusals:
        with pytest.raises(InvalidInputError) as invalid:
            sift.create_source(name, "redis-stream", bus.url, **options)
        assert invalid.value.status == 422 and said in invalid.value.detail, invalid.value
    targets: list[dict[str, Any]] = [{}, {"into_selector": selector_name, "into_stream": "s"}]
    for into in targets:
        with pytest.raises(ValueError, match="exactly one of into_selector and into_stream"):
            sift.create_source(name, "redis-stream", bus.url, key="k", **into)
    with pytest.raises(InvalidInputError) as wrong_scheme:
        sift.create_source(name, "nats", bus.url, stream="s", into_selector=selector_name)
    # What was expected, never the URL itself (a URL may hold credentials).
    detail = wrong_scheme.value.detail
    assert "url" in detail and "nats://" in detail and bus.url not in detail
    assert name not in {s.name for s in sift.list_sources()}

    sift.create_source(
        name, "redis-stream", bus.url, key="k", into_selector=selector_name, label_field="y"
    )
    try:
        with pytest.raises(ConflictError) as taken:
            sift.create_source(
                name,
                "redis-stream",
                bus.url,
                key="k2",
                into_selector=selector_name,
                label_field="y",
            )
        assert taken.value.status == 409 and "already exists" in taken.value.detail
    finally:
        sift.delete_source(name)


def test_the_bus_password_is_never_shown(
    sift: Client,
    bus: Bus,
    selector_name: str,
    capsys: pytest.CaptureFixture[str],
    cli_env: dict[str, str],
) -> None:
    sift.create(selector_name, "variance", n_features=3, feature_names=NAMES)
    secret = "hunter2-sources-secret"
    where = urlsplit(bus.url)
    url = f"redis://sift:{secret}@{where.hostname}:{where.port}/0"
    shown = f"redis://sift:***@{where.hostname}:{where.port}/0"
    name = f"{selector_name}-src"
    created = sift.create_source(name, "redis-stream", url, key="k", into_selector=selector_name)
    try:
        assert created.url == shown and secret not in json.dumps(created.raw)

        def refused() -> Source | None:  # the bus's Redis has no user sift: AUTH fails
            source = sift.describe_source(name)
            return source if source.state == "retrying" and source.last_error else None

        retrying = wait_for(refused, SETTLE_S, f"source {name} to retry")
        assert retrying.url == shown and secret not in str(retrying.last_error)
        listed = next(s for s in sift.list_sources() if s.name == name)
        assert listed.url == shown and secret not in json.dumps(listed.raw)
        for argv in (("show", name), ("show", name, "--json"), ("ls",), ("ls", "--json")):
            status, out, err = run_sift(capsys, "source", *argv)
            assert status == 0, err
            assert secret not in out and (shown in out or argv == ("ls",))
        status, out, err = run_sift(capsys, "source", "show", name)
        assert "state: retrying" in out and "last error: " in out
    finally:
        sift.delete_source(name)


def test_the_async_client_reads_a_source_into_a_stream(
    service: ServiceProcess, redis_server: RedisServer, selector_name: str
) -> None:
    stream, key, name = f"{selector_name}-st", f"{selector_name}-bus", f"{selector_name}-src"
    rows = np.arange(20.0).reshape(10, 2) ** 1.5

    async def main() -> tuple[list[str], Source, list[Source], int, np.ndarray]:
        bus = aioredis.from_url(redis_server.url)
        try:
            ids = [text(await bus.xadd(key, as_fields(row, ["x", "y"]))) for row in rows]
            async with AsyncClient(service.url) as sift:
                await sift.create_stream(stream, n_features=2, feature_names=["x", "y"])
                await sift.create(f"{stream}-v", "variance", stream=stream)
                created = await sift.create_source(
                    name,
                    "redis-stream",
                    redis_server.url,
                    key=key,
                    into_stream=stream,
                    start=ids[4],  # after the fifth entry
                    batch_ms=20,
                )
                assert created.into == {"stream": stream} and created.into_kind == "stream"
                deadline = time.monotonic() + SETTLE_S
                while True:
                    described = await sift.describe_source(name)
                    seen = (await sift.describe(f"{stream}-v")).seen
                    if (described.entries, seen) == (5, 5) or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.05)
                listed = await sift.list_sources()
                await sift.delete_source(name)
                with pytest.raises(NotFoundError):
                    await sift.describe_source(name)
                weights = (await sift.weights(f"{stream}-v")).weights
                return ids, described, listed, seen, weights
        finally:
            await bus.delete(key)
            await bus.aclose()

    ids, described, listed, seen, weights = asyncio.run(main())
    assert (described.entries, described.rows, seen) == (5, 5, 5)
    assert described.start == ids[4] and described.positions == {"0": ids[-1]}
    assert name in {s.name for s in listed}
    np.testing.assert_allclose(weights, np.var(rows[5:], axis=0), rtol=1e-9)


@pytest.fixture
def cli_env(
    service: ServiceProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    env = {"SIFT_URL": service.url, "SIFT_STATE_DIR": str(tmp_path / "state")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SIFT_API_KEY", raising=False)
    return env


def test_sift_source_create_ls_show_rm(
    cli_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    sift: Client,
    bus: Bus,
    selector_name: str,
) -> None:
    sift.create(selector_name, "variance", n_features=3, feature_names=NAMES)
    rows = np.random.default_rng(9).normal(size=(40, 3))
    entries = [as_fields(row) for row in rows]
    entries[7] = {**entries[7], "gamma": "oops"}
    key, name = f"{selector_name}-bus", f"{selector_name}-src"
    ids = bus.write(key, entries)
    create = ["source", "create", name, bus.url, "--kind", "redis-stream", "--key", key]

    status, _, err = run_sift(capsys, *create, "--into-selector", selector_name, "--stream", "x")
    assert status == 1 and "--stream applies to --kind nats" in err
    status, _, err = run_sift(
        capsys, *create, "--into-selector", selector_name, "--start", "yesterday"
    )
    assert status == 1 and "yesterday" in err and "(422 " in err
    status, _, err = run_sift(capsys, *create)
    assert status == 2 and "--into-selector" in err  # argparse: one target is required

    status, out, err = run_sift(
        capsys, *create, "--into-selector", selector_name, "--batch-rows", "8", "--batch-ms", "50"
    )
    assert status == 0, err
    assert out == (
        f"created source {name}: redis-stream {bus.url}, key {key}, into selector "
        f"{selector_name}; start earliest\n"
    )
    status, _, err = run_sift(capsys, *create, "--into-selector", selector_name)
    assert status == 1 and "already exists" in err and "(409 Conflict)" in err

    consumed(sift, name, 40)
    applied(sift, selector_name, 39)
    caught_up(sift, name)

    status, out, err = run_sift(capsys, "source", "ls")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "name",
        "kind",
        "reads",
        "into",
        "state",
        "rows",
        "rejected",
        "lag",
    ]
    row = next(line for line in lines if line.startswith(name + " "))
    cells = row.split()
    assert cells[:5] == [name, "redis-stream", key, "selector", selector_name]
    assert cells[5] in ("running", "paused") and cells[6:] == ["39", "1", "0"]
    status, out, _ = run_sift(capsys, "source", "ls", "--json")
    mine = [s for s in json.loads(out) if s["name"] == name]
    assert len(mine) == 1 and mine[0]["rows"] == 39

    status, out, err = run_sift(capsys, "source", "show", name)
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        f"source {name}: redis-stream {bus.url}, key {key}, into selector {selector_name}"
    )
    assert re.fullmatch(r"state: (running|paused)", lines[1]), lines[1]
    assert lines[2:4] == [f"positions: 0: {ids[-1]}", "lag: 0 entries"]
    assert re.fullmatch(
        r"consumed: 40 entries: 39 rows appended, 1 rejected; [0-9.,]+ rows/s", lines[4]
    ), lines[4]
    assert lines[5] == (
        "batches: up to 8 rows or 50 ms; start earliest; label field -; target field -; on "
        "reset stop"
    )
    assert lines[6].startswith("updated: ")
    assert lines[7] == "rejected entries (the newest 1 of 1):"
    assert lines[8].split() == ["partition", "position", "at", "reason"]
    assert lines[9].split()[:2] == ["0", ids[7]] and "'gamma' is not a number" in lines[9]
    status, out, _ = run_sift(capsys, "source", "show", name, "--json")
    shown = json.loads(out)
    assert shown["positions"] == {"0": ids[-1]} and shown["rejected"] == 1

    status, out, err = run_sift(capsys, "source", "rm", name)
    assert status == 0 and out == f"deleted source {name}\n", err
    status, _, err = run_sift(capsys, "source", "show", name)
    assert status == 1 and "does not exist" in err and "(404 Not found)" in err
    status, _, err = run_sift(capsys, "source", "rm", name)
    assert status == 1 and "(404 Not found)" in err


def test_a_bus_reset_from_the_client_and_the_cli(
    cli_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    sift: Client,
    bus: Bus,
    selector_name: str,
) -> None:
    """A stream deleted and written again below the position: the source stops (state
    reset), the client and ``sift source show`` say why, ``sift source restart`` reads the
    new stream from its start, exactly once."""
    sift.create(selector_name, "variance", n_features=1, feature_names=["x"])
    key, name = f"{selector_name}-bus", f"{selector_name}-src"
    bus.keys.append(key)
    for i in range(1, 21):
        bus.redis.xadd(key, {"x": str(i)}, id=f"{i}-0")
    created = sift.create_source(
        name, "redis-stream", bus.url, key=key, into_selector=selector_name, on_reset="stop"
    )
    assert created.on_reset == "stop" and created.resets == [] and created.reset_count == 0
    consumed(sift, name, 20)
    with pytest.raises(ConflictError):
        sift.restart_source(name)
    bus.redis.delete(key)
    for i in range(1, 6):
        bus.redis.xadd(key, {"x": str(100 * i)}, id=f"{i}-0")

    def stopped() -> Source | None:
        source = sift.describe_source(name)
        return source if source.state == "reset" else None

    source = wait_for(stopped, SETTLE_S, f"source {name} to stop at the reset")
    [event] = source.resets
    assert isinstance(event, ResetEvent) and source.reset_count == 1
    assert (event.position, event.first, event.last, event.action) == (
        "20-0",
        "1-0",
        "5-0",
        "stopped",
    )
    assert "created again" in event.why and source.last_error and "reset" in source.last_error
    status, out, err = run_sift(capsys, "source", "show", name)
    assert status == 0, err
    assert "state: reset" in out and "bus resets (the newest 1 of 1):" in out
    status, out, err = run_sift(capsys, "source", "restart", name, "--start", "earliest")
    assert status == 0 and out == f"restarted source {name} from earliest\n", err
    source = consumed(sift, name, 25)
    assert (source.rows, source.resets[0].restarted_from) == (25, "earliest")
    applied(sift, selector_name, 25)
    values = list(range(1, 21)) + [100 * i for i in range(1, 6)]
    np.testing.assert_allclose(sift.weights(selector_name).weights, [np.var(values)], rtol=1e-9)
    status, _, err = run_sift(capsys, "source", "restart", name)
    assert status == 1 and "(409 Conflict)" in err
    sift.delete_source(name)


def test_a_kafka_topic_from_the_client_and_the_cli(
    cli_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    sift: Client,
    kafka_broker: KafkaBroker,
    selector_name: str,
) -> None:
    """``create_source(kind="kafka")`` and ``sift source create --kind kafka`` name the brokers
    and the topic; the answers carry the topic and each partition's lag, and the password read
    from standard input is kept and never shown."""
    topic = f"{selector_name}-topic"
    rows = np.random.default_rng(10).normal(size=(20, 3))
    documents = [dict(zip(NAMES, map(float, row), strict=True)) for row in rows]

    async def fill() -> None:
        await create_topic(kafka_broker.bootstrap, topic, 2)
        await produce(kafka_broker.bootstrap, topic, documents, lambda i: i % 2)

    asyncio.run(fill())
    sift.create(selector_name, "variance", n_features=3, feature_names=NAMES)
    name = f"{selector_name}-src"
    created = sift.create_source(
        name, "kafka", kafka_broker.bootstrap, into_selector=selector_name, topic=topic
    )
    assert (created.kind, created.topic, created.reads) == ("kafka", topic, topic)
    assert created.group == f"sift-{name}"
    consumed(sift, name, 20)
    settled = caught_up(sift, name)
    assert settled.partition_lag == {"0": 0, "1": 0}
    applied(sift, selector_name, 20)

    other = f"{selector_name}-cli"
    sift.create(other, "variance", n_features=3, feature_names=NAMES)
    create = ["source", "create", other, kafka_broker.bootstrap, "--kind", "kafka"]
    status, _, err = run_sift(capsys, *create, "--into-selector", other, "--key", "k")
    assert status == 1 and "--key applies to --kind redis-stream" in err
    status, out, err = run_sift(capsys, *create, "--topic", topic, "--into-selector", other)
    assert status == 0, err
    assert out == (
        f"created source {other}: kafka kafka://{kafka_broker.bootstrap}, topic {topic}, "
        f"into selector {other}; start earliest\n"
    )
    consumed(sift, other, 20)
    caught_up(sift, other)
    status, out, err = run_sift(capsys, "source", "show", other)
    assert status == 0, err
    assert "lag: 0 entries (0: 0, 1: 0)" in out, out


def test_the_lag_is_unknown_while_the_bus_is_down(
    cli_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    sift: Client,
    service: ServiceProcess,
    tmp_path: Path,
    selector_name: str,
) -> None:
    """A source whose bus stopped answering says ``retrying`` and that its lag is not known:
    null in the answer, ``-`` in ``sift source ls`` and ``unknown`` in ``sift source show``,
    never the 0 it last knew."""
    down = RedisProcess(tmp_path / "bus")
    try:
        sift.create(selector_name, "variance", n_features=3, feature_names=NAMES)
        rows = np.random.default_rng(21).normal(size=(20, 3))
        client = down.client()
        for row in rows:
            client.xadd("events", as_fields(row))
        client.close()
        name = f"{selector_name}-src"
        created = sift.create_source(
            name,
            "redis-stream",
            down.url,
            key="events",
            into_selector=selector_name,
            batch_bytes=1 << 20,
        )
        assert created.batch_bytes == 1 << 20
        consumed(sift, name, 20)
        caught_up(sift, name)
        down.stop()

        def retrying() -> dict[str, Any] | None:
            answer = httpx.get(f"{service.url}/v1/sources/{name}", timeout=5).json()
            return answer if answer["state"] == "retrying" else None

        answer = wait_for(retrying, SETTLE_S, f"source {name} to be retrying")
        assert answer["lag"] is None and answer["partition_lag"] == {"0": None}, answer
        assert answer["last_error"] and "does not answer" in answer["last_error"]
        assert sift.describe_source(name).lag is None
        status, out, err = run_sift(capsys, "source", "ls")
        assert status == 0, err
        cells = next(line for line in out.splitlines() if line.startswith(name + " ")).split()
        assert cells[5] == "retrying" and cells[-1] == "-", cells
        status, out, err = run_sift(capsys, "source", "show", name)
        assert status == 0, err
        assert "lag: unknown" in out.splitlines()
        status, out, _ = run_sift(capsys, "source", "ls", "--json")
        assert [s["lag"] for s in json.loads(out) if s["name"] == name] == [None]
        # Back: the lag is known again.
        down.start()
        assert caught_up(sift, name).state in ("running", "paused")
        sift.delete_source(name)
    finally:
        down.kill()


def test_a_source_reads_each_entrys_target_into_an_f_regression_selector(
    sift: Client, bus: Bus, selector_name: str
) -> None:
    """``target_field``: the client creates the source and shows the field; the selector's
    F and p-values are scikit-learn's on the rows and targets the entries held."""
    from sklearn.feature_selection import f_regression

    sift.create(selector_name, "f_regression", n_features=3, feature_names=NAMES)
    rng = np.random.default_rng(9)
    rows = rng.normal(size=(150, 3))
    target = 3 * rows[:, 0] - rows[:, 2] + rng.normal(size=150)
    key, name = f"{selector_name}-bus", f"{selector_name}-src"
    bus.write(
        key, [{**as_fields(row), "y": repr(float(t))} for row, t in zip(rows, target, strict=True)]
    )
    created = sift.create_source(
        name, "redis-stream", bus.url, key=key, into_selector=selector_name, target_field="y"
    )
    try:
        assert created.target_field == "y" and created.label_field is None
        consumed(sift, name, 150)
        applied(sift, selector_name, 150)
        top = sift.top(selector_name, h=3)
        f, p = f_regression(rows, target)
        by_index = {feature.index: feature for feature in top.features}
        np.testing.assert_allclose([by_index[i].score for i in range(3)], f, rtol=1e-9)
        np.testing.assert_allclose(
            [float(by_index[i].p_value or 0) for i in range(3)], p, rtol=1e-9
        )
        assert sift.describe(selector_name).target is not None
    finally:
        sift.delete_source(name)
