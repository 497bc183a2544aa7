"""Shared fixtures: a real redis-server per test session (never the machine's shared Redis).

* ``redis_server`` (session): an EmbeddedRedis on a free 127.0.0.1 port in a temp dir, with
  ``.url`` and ``.server`` (the EmbeddedRedis);
* ``redis_url`` (session): its URL;
* ``redis_client`` (function): ``redis.asyncio`` client; FLUSHALL on *our* server afterwards;
* ``store`` (function): ``SelectorStore(redis_client, prefix="sift")``;
* ``restartable_redis`` (function): an EmbeddedRedis (not started) in its own temp dir with a
  fixed free port, for tests that stop and restart Redis.

A missing redis-server fails the fixtures loudly; nothing is skipped.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from service.errors import SiftError
from service.store.embedded import EmbeddedRedis, find_redis_server
from service.store.redis_store import SelectorStore


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_redis_server() -> str:
    try:
        return find_redis_server()
    except SiftError as exc:
        pytest.fail(f"the tests need a real redis-server: {exc.detail}", pytrace=False)


def start_embedded(
    data_dir: Path, appendfsync: str = "everysec", attempts: int = 3
) -> EmbeddedRedis:
    """Start an EmbeddedRedis on a free port (retrying if another process grabs the port)."""
    executable = _require_redis_server()
    last: Exception | None = None
    for _ in range(attempts):
        server = EmbeddedRedis(
            data_dir, executable=executable, port=free_port(), appendfsync=appendfsync
        )
        try:
            server.start()
            return server
        except SiftError as exc:
            last = exc
    raise AssertionError(f"could not start redis-server in {data_dir}: {last}")


@dataclass
class RedisServer:
    url: str
    server: EmbeddedRedis

    @property
    def embedded(self) -> EmbeddedRedis:
        return self.server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_embedded(tmp_path_factory.mktemp("redis"))
    assert server.url is not None
    try:
        yield RedisServer(url=server.url, server=server)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    try:
        yield client
    finally:
        try:
            await client.flushall()  # our own server only (redis_url)
        finally:
            await client.aclose()


@pytest.fixture
async def store(redis_client: aioredis.Redis) -> SelectorStore:
    return SelectorStore(redis_client, prefix="sift")


@pytest.fixture
def restartable_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(
        tmp_path / "redis",
        executable=_require_redis_server(),
        port=free_port(),
        appendfsync="always",
    )
    try:
        yield server
    finally:
        server.stop()
