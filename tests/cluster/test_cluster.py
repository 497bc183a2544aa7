"""Sift on a real Redis Cluster, and with replicas to wait for.

The store and API suites run on a cluster too (``tests/conftest.py``); this file checks what
only a cluster (or a replica) has: how the service connects, what readiness says, that each
selector's keys share one slot while selectors spread over the masters, what a master that is
down costs (its own selectors' answers, nobody else's), and ``SIFT_REDIS_WAIT_REPLICAS``.
The failover of a master to its replica under load is ``tests/faults/test_cluster_failover.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pydantic
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from service.config import Settings
from service.errors import Unavailable
from service.store.connection import cluster_url, connect
from service.store.keys import SelectorKeys, pending_key, registry_key
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector, make_settings, npy_bytes, running_app
from tests.support.cluster import LocalCluster, NodeProcess, ReplicatedRedis
from tests.support.harness import internal_text
from tests.support.redis import free_port

N_FEATURES = 6
#: SIFT_REDIS_WAIT_MS of the tests that wait for replicas: long enough that a healthy replica
#: always confirms on a loaded CI machine (300 ms did not, once), short enough for a paused one.
WAIT_MS = 1500


def rows(seed: int, n: int = 5) -> bytes:
    return npy_bytes(np.random.default_rng(seed).standard_normal((n, N_FEATURES)))


async def push(
    http: httpx.AsyncClient, name: str, seed: int, key: str | None = None
) -> httpx.Response:
    headers = {"content-type": "application/x-npy"}
    if key is not None:
        headers["idempotency-key"] = key
    return await http.post(f"/v1/selectors/{name}/chunks", content=rows(seed), headers=headers)


def unavailable_defects(response: httpx.Response, *internal: str) -> list[str]:
    """What is wrong with ``response`` as a retryable 503 (empty: nothing)."""
    found = []
    if response.status_code != 503:
        found.append(f"status {response.status_code}: {response.text[:300]}")
        return found
    if not response.headers.get("retry-after", "").isdigit():
        found.append(f"Retry-After {response.headers.get('retry-after')!r}")
    if not response.headers["content-type"].startswith("application/problem+json"):
        found.append(f"content-type {response.headers['content-type']}")
    leaked = internal_text(str(response.json().get("detail", "")), internal)
    if leaked:
        found.append(f"internal text {leaked} in {response.text}")
    return found


# -- connecting --------------------------------------------------------------------------------


async def test_the_url_or_the_setting_chooses_the_cluster_client() -> None:
    plain = connect("redis://127.0.0.1:1/0")
    by_url = connect("redis+cluster://127.0.0.1:1")
    by_setting = connect("redis://127.0.0.1:1", cluster=True)
    try:
        assert type(plain) is aioredis.Redis
        assert isinstance(by_url, RedisCluster) and isinstance(by_setting, RedisCluster)
    finally:
        for client in (plain, by_url, by_setting):
            await client.aclose()
    assert cluster_url("rediss+cluster://u:p@h:7000/?ssl_cert_reqs=none") == (
        "rediss://u:p@h:7000/?ssl_cert_reqs=none",
        True,
    )
    assert cluster_url("redis://h:1/0") == ("redis://h:1/0", False)
    # The embedded Redis is one server without replicas: neither setting makes sense there.
    with pytest.raises(pydantic.ValidationError, match="SIFT_REDIS_CLUSTER needs"):
        Settings(redis_url=None, redis_cluster=True)
    with pytest.raises(pydantic.ValidationError, match="embedded Redis has no replicas"):
        Settings(redis_url=None, redis_wait_replicas=1)
    assert Settings(redis_url="redis://h:1", redis_wait_replicas=1).redis_wait_ms == 1000


async def test_a_cluster_nobody_answers_for_is_a_503_without_its_address() -> None:
    port = free_port()
    store = SelectorStore(connect(f"redis+cluster://127.0.0.1:{port}"))
    try:
        with pytest.raises(Unavailable) as caught:
            await store.registry.get_head("anything")
    finally:
        await store.redis.aclose()
    assert caught.value.retry_after >= 1
    assert internal_text(caught.value.detail, [str(port)]) == []


# -- on the session's cluster ------------------------------------------------------------------


@pytest.fixture
async def on_cluster(
    redis_cluster: LocalCluster,
) -> AsyncIterator[tuple[LocalCluster, httpx.AsyncClient]]:
    """The app on the session's cluster (flushed afterwards)."""
    async with running_app(make_settings(redis_cluster.url, api_token="admin-token")) as (
        _app,
        http,
    ):
        http.headers["authorization"] = "Bearer admin-token"
        try:
            yield redis_cluster, http
        finally:
            flusher = connect(redis_cluster.url)
            await flusher.flushall()
            await flusher.aclose()


async def test_readiness_says_cluster_and_that_every_master_answers(
    on_cluster: tuple[LocalCluster, httpx.AsyncClient],
) -> None:
    _cluster, http = on_cluster
    ready = await http.get("/v1/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ready",
        "redis": "cluster",
        "cluster": {"state": "ok", "masters": 3, "masters_answering": 3},
    }


async def test_each_selector_is_one_slot_and_selectors_spread_over_the_masters(
    on_cluster: tuple[LocalCluster, httpx.AsyncClient],
) -> None:
    cluster, http = on_cluster
    names = [f"spread-{i}" for i in range(9)]
    for i, name in enumerate(names):
        await create_selector(http, name, n_features=N_FEATURES)
        answer = await push(http, name, i, key=f"k{i}")
        assert answer.status_code == 200, answer.text
    created = await http.post("/v1/keys", json={"scopes": ["read"], "label": "reader"})
    assert created.status_code == 201, created.text
    reader = {"authorization": f"Bearer {created.json()['key']}"}
    listed = await http.get("/v1/selectors", headers=reader)
    assert [s["name"] for s in listed.json()["selectors"]] == sorted(names)

    with cluster.client() as client:
        slots_of: dict[str, set[int]] = defaultdict(set)
        for key in client.scan_iter(match="sift:*", target_nodes=client.PRIMARIES):
            text = key.decode()
            if text.startswith("sift:{"):
                slots_of[text[len("sift:{") : text.index("}")]].add(client.keyslot(text))
        masters = {name: cluster.master_of(SelectorKeys("sift", name).head).port for name in names}
        registry_slot = client.keyslot(registry_key("sift"))
    assert sorted(slots_of) == sorted(names)
    # Every key of a selector (head, log, state, checkpoint, idempotency records...) in one slot.
    assert all(len(slots) == 1 for slots in slots_of.values()), dict(slots_of)
    assert len(set(masters.values())) == 3, masters
    assert all(registry_slot not in slots for slots in slots_of.values())


# -- a master down, nobody to replace it -----------------------------------------------------


@pytest.mark.slow
async def test_a_master_down_costs_its_own_selectors_only(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, masters=3, appendfsync="everysec") as cluster:
        async with running_app(make_settings(cluster.url)) as (_app, http):
            on: dict[int, list[str]] = defaultdict(list)
            for i in range(12):
                name = f"m{i}"
                await create_selector(http, name, n_features=N_FEATURES)
                assert (await push(http, name, i)).status_code == 200
                on[cluster.master_of(SelectorKeys("sift", name).head).port].append(name)
            assert len(on) == 3
            # Not the master of the registry's slot: while that one is down, listings and the
            # sweeper answer 503 too (docs/operations/redis-cluster.md says so); here every other
            # read goes on.
            registry_master = cluster.master_of(registry_key("sift")).port
            victim_port = next(port for port in on if port != registry_master)
            doomed = on[victim_port]
            fine = [name for port, names in on.items() if port != victim_port for name in names]
            cluster.node(victim_port).kill()

            for name in doomed[:2]:
                for response in (
                    await http.get(f"/v1/selectors/{name}"),
                    await push(http, name, 100),
                ):
                    assert unavailable_defects(response, str(victim_port)) == []
            for i, name in enumerate(fine):
                assert (await push(http, name, 200 + i)).status_code == 200
                described = await http.get(f"/v1/selectors/{name}")
                assert described.status_code == 200
                assert described.json()["rows_seen"] == 10
            # A listing describes every selector of its page: one that cannot be read makes it
            # a 503 too (until a replica takes over). The gauges skip what they cannot read.
            assert unavailable_defects(await http.get("/v1/selectors"), str(victim_port)) == []
            metrics = await http.get("/metrics")
            assert metrics.status_code == 200
            assert "sift_selectors 12" in metrics.text
            ready = await http.get("/v1/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["cluster"] == {"state": "ok", "masters": 3, "masters_answering": 2}


async def test_the_pending_sets_master_paused_does_not_slow_appends_elsewhere(
    tmp_path: Path,
) -> None:
    """The pending set is one key on one master; a cluster's appends mark it in the background,
    so that a selector on another master appends at its usual pace while that master is
    frozen, and the marks arrive once it answers again."""
    # No sweeps after the first: a sweep removes the mark of a selector with nothing left, and
    # the chunks may well be applied before their mark is written (under load, a sweep between
    # two polls made the mark come and go unseen).
    with LocalCluster(tmp_path, masters=3, appendfsync="everysec") as cluster:
        settings = make_settings(cluster.url, sweep_interval_seconds=3600)
        async with running_app(settings) as (_app, http):
            pending_master = cluster.master_of(pending_key("sift"))
            names = [f"p{i}" for i in range(12)]
            name = next(
                name
                for name in names
                if cluster.master_of(SelectorKeys("sift", name).head).port != pending_master.port
            )
            await create_selector(http, name, n_features=N_FEATURES)
            pending_master.pause()
            try:
                started = time.monotonic()
                for i in range(5):
                    answer = await http.post(
                        f"/v1/selectors/{name}/chunks",
                        params={"wait": "false"},
                        content=rows(i),
                        headers={"content-type": "application/x-npy"},
                    )
                    assert answer.status_code == 202, answer.text
                took = time.monotonic() - started
            finally:
                pending_master.resume()
            # Awaiting the mark, each append waited for the frozen master: 5 appends took 30 s.
            # Unloaded they take about 0.05 s; 1.04 s was seen on a machine running two suites.
            assert took < 5.0, f"5 appends took {took:.2f} s with the pending set's master frozen"
            client = connect(cluster.url)
            try:
                deadline = time.monotonic() + 10
                while await client.zscore(pending_key("sift"), name) is None:
                    assert time.monotonic() < deadline, "the mark never arrived"
                    await asyncio.sleep(0.05)
            finally:
                await client.aclose()


# -- waiting for replicas ----------------------------------------------------------------------


async def test_wait_replicas_makes_an_answer_wait_for_the_replica(tmp_path: Path) -> None:
    """A primary and its replica: with ``SIFT_REDIS_WAIT_REPLICAS=1`` a chunk is answered only
    once the replica has it; a replica that does not answer makes it a 503 (the master has the
    chunk: the retry with the same key finds it and is answered once the replica is back)."""
    with ReplicatedRedis(tmp_path) as pair:
        assert pair.replica is not None
        replica = pair.replica
        settings = make_settings(pair.url, redis_wait_replicas=1, redis_wait_ms=WAIT_MS)
        async with running_app(settings) as (_app, http):
            await create_selector(http, "w", n_features=N_FEATURES)
            assert (await push(http, "w", 1, key="k1")).status_code == 200
            with replica.client() as replica_client:
                assert replica_client.xlen(SelectorKeys("sift", "w").log) == 1

            replica.pause()
            try:
                started = time.monotonic()
                refused = await push(http, "w", 2, key="k2")
                waited = time.monotonic() - started
                assert unavailable_defects(refused, str(pair.replica.port)) == []
                assert "replicas" in refused.json()["detail"]
                assert waited >= WAIT_MS / 1000
                async with running_app(make_settings(pair.url)) as (_app2, unwaiting):
                    # Without the setting nothing waits for the replica.
                    assert (await push(unwaiting, "w", 3, key="k3")).status_code == 200
            finally:
                replica.resume()
            pair.wait_in_sync()
            retried = await push(http, "w", 2, key="k2")
            assert retried.status_code == 200, retried.text
            assert retried.json()["duplicate"] is True
            described = (await http.get("/v1/selectors/w")).json()
            assert described["rows_seen"] == 15  # k1, k2 and k3 once each


def replica_of(cluster: LocalCluster, master: NodeProcess) -> NodeProcess:
    for node in cluster.nodes:
        info = node.info("replication")
        if info.get("role") == "slave" and info.get("master_port") == str(master.port):
            return node
    raise AssertionError(f"{master.address} has no replica")


@pytest.mark.slow
async def test_wait_replicas_on_a_cluster_waits_on_the_selectors_own_master(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, masters=3, replicas=1) as cluster:
        settings = make_settings(cluster.url, redis_wait_replicas=1, redis_wait_ms=WAIT_MS)
        async with running_app(settings) as (_app, http):
            masters: dict[str, NodeProcess] = {}
            for i in range(9):
                await create_selector(http, f"c{i}", n_features=N_FEATURES)
                assert (await push(http, f"c{i}", i, key=f"c{i}-a")).status_code == 200
                masters[f"c{i}"] = cluster.master_of(SelectorKeys("sift", f"c{i}").head)
            silenced = replica_of(cluster, masters["c0"])
            silenced.pause()
            try:
                answers: dict[str, Any] = {}
                for i, name in enumerate(masters):
                    answers[name] = await push(http, name, 10 + i, key=f"{name}-b")
            finally:
                silenced.resume()
            for name, response in answers.items():
                if masters[name] is masters["c0"]:
                    assert unavailable_defects(response) == [], name
                else:
                    assert response.status_code == 200, (name, response.text)
