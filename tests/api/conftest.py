"""API fixtures: the real app (lifespan included) against the test redis-server, via httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.api.app import create_app
from service.config import Settings


def make_settings(redis_url: str | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "sweep_interval_seconds": 0.1,
        "lease_ms": 2000,
        "apply_wait_seconds": 30.0,
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Start the app with its lifespan (as uvicorn would) and an httpx client bound to it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sift") as client:
            yield app, client


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
