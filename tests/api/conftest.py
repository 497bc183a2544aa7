"""API fixtures: the real app (lifespan included) against the test redis-server, via httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.support.api import make_settings, running_app


@pytest.fixture
async def app_factory(redis_url: str, redis_client: Any) -> Callable[..., Any]:
    """Build apps on the test Redis with extra settings; ``redis_client`` flushes afterwards."""

    def factory(**overrides: Any) -> Any:
        return running_app(make_settings(redis_url, **overrides))

    return factory


@pytest.fixture
async def client(app_factory: Callable[..., Any]) -> AsyncIterator[httpx.AsyncClient]:
    async with app_factory() as (_, http):
        yield http
