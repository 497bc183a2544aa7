"""The FastAPI application factory and its lifespan (Redis connection, applier, sweeper)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import redis.asyncio as redis
from fastapi import Depends, FastAPI

from service.api.deps import require_token
from service.api.problems import install_problem_handlers
from service.api.routes import health, labelled, selectors
from service.applier import Applier
from service.config import Settings
from service.labelled_selectors import LabelledSelectors
from service.metrics import Metrics
from service.selectors import SelectorService
from service.store.embedded import EmbeddedRedis
from service.store.redis_store import SelectorStore

log = logging.getLogger("sift")

#: Upper bound on each step of shutdown (stopping appliers, sweeper, Redis connections).
SHUTDOWN_STEP_SECONDS = 5.0

DESCRIPTION = """
Streaming feature selection as a service. Create a *selector* running one published streaming
method, push chunks of rows to it, and read its live top-h feature ranking.

Every error is `application/problem+json` (RFC 9457) with a `detail` that says what was
expected and what came.
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        embedded: EmbeddedRedis | None = None
        url = settings.redis_url
        if url is None:
            embedded = EmbeddedRedis(
                settings.data_dir,
                executable=settings.redis_server,
                appendfsync=settings.redis_appendfsync,
            )
            url = await asyncio.to_thread(embedded.start)
            log.info("embedded Redis started at %s (data in %s)", url, settings.data_dir)
        client = redis.from_url(url)
        store = SelectorStore(
            client, prefix=settings.key_prefix, idempotency_ttl_s=settings.idempotency_ttl_seconds
        )
        applier = Applier(store, settings, metrics)
        app.state.service = SelectorService(store, applier, settings, metrics)
        app.state.labelled = LabelledSelectors(app.state.service)
        app.state.redis_mode = "embedded" if embedded else "external"
        sweeper: asyncio.Task[None] | None = None
        try:
            await store.ensure_scripts()
            # The first sweep also recovers entries a crashed process left unapplied.
            sweeper = asyncio.create_task(applier.sweep_forever(), name="sweeper")
            yield
        finally:
            # Every step is bounded: shutdown must finish even if Redis or a task misbehaves.
            await applier.close(SHUTDOWN_STEP_SECONDS)
            if sweeper is not None:
                sweeper.cancel()
                await asyncio.wait([sweeper], timeout=SHUTDOWN_STEP_SECONDS)
            try:
                await asyncio.wait_for(client.aclose(), SHUTDOWN_STEP_SECONDS)
            except TimeoutError:
                log.warning("closing the Redis connections took over %s s", SHUTDOWN_STEP_SECONDS)
            if embedded is not None:
                await asyncio.to_thread(embedded.stop)

    app = FastAPI(
        title="Sift",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(selectors.router, dependencies=[Depends(require_token)])
    app.include_router(labelled.router, dependencies=[Depends(require_token)])
    return app
