"""Source fixtures of this folder's live tests: the real app (lifespan included) on the test
redis-server with its sources allowed on loopback, the bus (a redis-server of its own, never
Sift's) and a NATS JetStream server per module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.support.api import make_settings, running_app
from tests.support.nats import NatsServer
from tests.support.sources import LOOPBACK


@pytest.fixture
async def client(redis_url: str, redis_client: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app, its sources allowed to reach the tests' buses on loopback (``redis_client``
    flushes Sift's Redis afterwards)."""
    async with running_app(make_settings(redis_url, source_private=LOOPBACK)) as (_, http):
        yield http


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """``nats-server -js`` for the module."""
    server = NatsServer(tmp_path_factory.mktemp("nats"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
