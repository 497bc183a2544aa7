"""Source fixtures: the app with its sources allowed on loopback, the bus (a redis-server of
its own, never Sift's) and a NATS JetStream server per module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.nats import NatsServer
from tests.support.sources import LOOPBACK


@pytest.fixture
async def client(app_factory: Callable[..., Any]) -> AsyncIterator[httpx.AsyncClient]:
    """The app, its sources allowed to reach the tests' buses on loopback."""
    async with app_factory(source_private=LOOPBACK) as (_, http):
        yield http


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """``nats-server -js`` for the module, with a user and password (its URL carries them)."""
    server = NatsServer(tmp_path_factory.mktemp("nats"), user="sift", password="nats-secret-pw")
    server.start()
    try:
        yield server
    finally:
        server.stop()
