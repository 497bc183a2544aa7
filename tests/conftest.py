"""Shared fixtures: a real redis-server per test session (never the machine's shared Redis).

* ``redis_server`` (session): an EmbeddedRedis on a free 127.0.0.1 port in a temp dir, with
  ``.url`` and ``.server`` (the EmbeddedRedis);
* ``bus_redis_server`` (session, started on first use): another redis-server, as the bus
  sources read (Sift refuses a source at its own Redis);
* ``redis_cluster`` (session, started on first use): a Redis Cluster of three masters
  (``tests.support.cluster.LocalCluster``: ``redis-server --cluster-enabled yes`` x 3 joined by
  ``redis-cli --cluster create``);
* ``redis_backend`` (session): ``"single"`` or ``"cluster"``. The tests of ``tests/store`` and
  ``tests/api`` run against both (``[single]`` and ``[cluster]`` in their ids; set
  ``SIFT_TEST_REDIS=single`` or ``cluster`` to run one); everything else uses the single one.
  A test that is single-node by nature (it restarts its redis-server, or reads a node's own
  counters) says so with ``@pytest.mark.single_redis("why")``: its cluster variant is skipped
  with that reason;
* ``redis_url`` (session): the URL of the backend (``redis+cluster://...`` for the cluster);
* ``redis_client`` (function): the service's own client of it (``connect``); FLUSHALL on *our*
  server or on every master of *our* cluster afterwards;
* ``store`` (function): ``SelectorStore(redis_client, prefix="sift")``;
* ``restartable_redis`` (function): an EmbeddedRedis (not started) in its own temp dir with a
  fixed free port, for tests that stop and restart Redis;
* ``kafka_broker`` (session, started on first use): a single-node KRaft Apache Kafka broker
  (``tests.support.kafka.KafkaBroker``) on free ports, from the jars ``scripts/setup`` fetched;
  one per session (per xdist worker), each test on topics of its own; ``kafka_restartable``
  (function): the same broker for a test that stops or kills it, started again afterwards.

A missing redis-server (or redis-cli, for the cluster) fails the fixtures loudly; nothing is
skipped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from service.store.connection import RedisClient, connect
from service.store.embedded import EmbeddedRedis
from service.store.redis_store import SelectorStore
from tests.support.cluster import LocalCluster
from tests.support.kafka import KafkaBroker
from tests.support.redis import RedisServer, free_port, require_redis_server, start_embedded

#: The Redis deployments the store and API suites run against.
REDIS_BACKENDS = ("single", "cluster")
#: Folders (under tests/) whose tests run against every backend of ``SIFT_TEST_REDIS``.
EVERY_BACKEND_UNDER = ("store", "api")
_TESTS = Path(__file__).resolve().parent


def _backends_asked() -> tuple[str, ...]:
    """``SIFT_TEST_REDIS``: ``single``, ``cluster`` or (unset, or ``both``) both."""
    asked = os.environ.get("SIFT_TEST_REDIS", "both").strip().lower()
    if asked in ("", "both"):
        return REDIS_BACKENDS
    if asked not in REDIS_BACKENDS:
        raise pytest.UsageError(f"SIFT_TEST_REDIS must be single, cluster or both; got {asked!r}")
    return (asked,)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "single_redis(reason): the test needs one redis-server (it restarts it, or reads one "
        "node's own counters); its Redis Cluster variant is skipped with the reason",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run the Redis-backed tests of ``EVERY_BACKEND_UNDER`` against each backend asked."""
    if "redis_backend" not in metafunc.fixturenames:
        return
    folder = Path(metafunc.definition.path).resolve().relative_to(_TESTS).parts[0]
    if folder not in EVERY_BACKEND_UNDER:
        return
    single_only = metafunc.definition.get_closest_marker("single_redis")
    params = []
    for backend in _backends_asked():
        marks = []
        if backend == "cluster" and single_only is not None:
            reason = single_only.args[0] if single_only.args else "single-node by nature"
            marks.append(pytest.mark.skip(reason=f"single Redis only: {reason}"))
        params.append(pytest.param(backend, id=backend, marks=marks))
    metafunc.parametrize("redis_backend", params, indirect=True, scope="session")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_embedded(tmp_path_factory.mktemp("redis"))
    assert server.url is not None
    try:
        yield RedisServer(url=server.url, server=server)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def bus_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of its own as the bus sources read: never the one holding Sift's state
    (a source may not read Sift's own Redis, ``service.sources.reach``)."""
    server = start_embedded(tmp_path_factory.mktemp("bus-redis"))
    assert server.url is not None
    try:
        yield RedisServer(url=server.url, server=server)
    finally:
        server.stop()


@pytest.fixture
async def bus(bus_redis_server: RedisServer) -> AsyncIterator[aioredis.Redis]:
    """The bus: a redis-server of its own (never Sift's), emptied afterwards."""
    client = aioredis.from_url(bus_redis_server.url)
    try:
        yield client
    finally:
        await client.flushall()
        await client.aclose()


@pytest.fixture
def bus_url(bus_redis_server: RedisServer) -> str:
    return bus_redis_server.url


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # fsync every second, as the single redis-server of the suites: they test logic (the
    # failover tests run their own cluster with ``appendfsync always``).
    root = tmp_path_factory.mktemp("redis-cluster")
    with LocalCluster(root, masters=3, appendfsync="everysec") as cluster:
        yield cluster


@pytest.fixture(scope="session")
def redis_backend(request: pytest.FixtureRequest) -> str:
    """``"single"`` unless ``pytest_generate_tests`` parametrised it."""
    return str(getattr(request, "param", "single"))


@pytest.fixture(scope="session")
def redis_url(redis_backend: str, request: pytest.FixtureRequest) -> str:
    if redis_backend == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        return cluster.url
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[RedisClient]:
    client = connect(redis_url)
    try:
        yield client
    finally:
        try:
            await client.flushall()  # our own server (or our cluster's masters) only
        finally:
            await client.aclose()


@pytest.fixture
async def store(redis_client: RedisClient) -> SelectorStore:
    return SelectorStore(redis_client, prefix="sift")


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(
        tmp_path / "redis",
        executable=require_redis_server(),
        port=free_port(),
        appendfsync="always",
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_restartable(kafka_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The session's broker, for a test that stops, kills and restarts it: running again
    (same ports, same data) when the test ends, whatever it left, for the tests after it."""
    try:
        yield kafka_broker
    finally:
        if not kafka_broker.running:
            kafka_broker.start()
