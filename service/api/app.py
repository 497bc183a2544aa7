"""The FastAPI application factory and its lifespan (Redis connection, applier, sweeper)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from threadpoolctl import threadpool_limits

from service import tracing
from service.api.guard import BEARER_SCHEME
from service.api.middleware import install_middleware
from service.api.problems import install_problem_handlers
from service.api.request_bodies import create_request_body
from service.api.routes import (
    archives,
    capabilities,
    chunks,
    features,
    health,
    keys,
    methods,
    monitoring,
    quotas,
    rankings,
    selectors,
    sources,
    streams,
    ui,
)
from service.applier import Applier
from service.auth import Authenticator
from service.config import Settings
from service.errors import SiftError, Unavailable
from service.metrics import Metrics
from service.selectors import Selectors
from service.selectors.quotas import Quotas
from service.sources.service import Sources
from service.store.api_keys import ApiKeyStore
from service.store.connection import connect, is_cluster, without_password
from service.store.embedded import EmbeddedRedis, RedisSupervisor
from service.store.inventory import Inventory
from service.store.redis_store import SelectorStore

log = logging.getLogger("sift")

#: How long a thread may hold the GIL while another waits for it (Python's default: 5 ms).
GIL_SWITCH_INTERVAL_SECONDS = 0.001
#: Upper bound on each step of shutdown (stopping appliers, sweeper, Redis connections).
SHUTDOWN_STEP_SECONDS = 5.0

DESCRIPTION = """
Streaming feature selection as a service. Create a *selector* running one published streaming
method, push chunks of rows to it, and read its live top-h feature ranking.

Every error is `application/problem+json` (RFC 9457) with a `detail` that says what was
expected and what came.

With `SIFT_API_TOKEN` set, every `/v1` route but the probes needs `Authorization: Bearer <key>`:
the token itself (admin) or an API key from `POST /v1/keys` with scopes `read` (GET routes),
`write` (read plus chunks, features, merge, transform, cluster) or `admin` (everything).
"""


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Declare the bearer key in the OpenAPI document, or drop it when authentication is off;
    document the create body of every method registered when the document is built."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        # The body of POST /v1/selectors (read by the route, not declared to FastAPI).
        schema["paths"]["/v1/selectors"]["post"]["requestBody"] = create_request_body()
        if settings.api_token:
            schema.setdefault("components", {})["securitySchemes"] = {
                BEARER_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "SIFT_API_TOKEN (admin) or an API key from POST /v1/keys.",
                }
            }
        else:
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.pop("security", None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """``serving``, and why it could not start, for ``sift serve`` to say in one line (a
        redis-server missing, a data directory in use, Redis refusing the credentials)."""
        started = False
        try:
            with tracing.started():  # OTEL_* variables (service/tracing.py); else nothing
                async with serving(app):
                    started = True
                    yield
        except SiftError as exc:
            if not started:
                app.state.startup_error = exc.detail
            raise

    @contextlib.asynccontextmanager
    async def serving(app: FastAPI) -> AsyncIterator[None]:
        # Updates compute in worker threads; the event loop must get the GIL back quickly for
        # readers' small requests (5 ms by default, per hand-over: it dominated GET .../top
        # while a big update ran).
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
        # Concurrent updates must not oversubscribe the cores with BLAS threads (config.py).
        threadpool_limits(settings.blas_threads, user_api="blas")
        embedded: EmbeddedRedis | None = None
        supervisor: RedisSupervisor | None = None
        url = settings.redis_url
        if url is None:
            embedded = EmbeddedRedis(
                settings.data_dir,
                executable=settings.redis_server,
                appendfsync=settings.redis_appendfsync,
            )
            started_at = time.monotonic()
            url = await asyncio.to_thread(embedded.start)
            log.info("embedded Redis started at %s (data in %s)", url, settings.data_dir)
            # Restarted whenever it exits; meanwhile requests get 503 (api/middleware.py).
            supervisor = RedisSupervisor(
                embedded,
                expected_start_s=time.monotonic() - started_at,
                on_restart=metrics.redis_restarts.inc,
            )
        app.state.redis_supervisor = supervisor
        client = connect(url, cluster=settings.redis_cluster)
        store = SelectorStore(
            client,
            prefix=settings.key_prefix,
            idempotency_ttl_s=settings.idempotency_ttl_seconds,
            idempotency_max_records=settings.idempotency_max_records,
            wait_replicas=settings.redis_wait_replicas,
            wait_ms=settings.redis_wait_ms,
        )
        app.state.auth = Authenticator(settings.api_token, ApiKeyStore(client, settings.key_prefix))
        applier = Applier(store, settings, metrics)
        app.state.selectors = Selectors(store, applier, settings, metrics)
        app.state.redis_mode = (
            "embedded"
            if embedded or settings.redis_from_parent
            else "cluster"
            if is_cluster(client)
            else "external"
        )
        app.state.inventory = Inventory(store)
        app.state.quotas = Quotas(app.state.inventory, app.state.auth.keys, settings)
        app.state.sources = Sources(store, applier, settings, metrics)
        sweeper: asyncio.Task[None] | None = None
        listener: asyncio.Task[None] | None = None
        expiry: asyncio.Task[None] | None = None
        stop_expiring = asyncio.Event()
        supervising: asyncio.Task[None] | None = None
        try:
            try:
                await store.ensure_scripts()
            except Unavailable as exc:
                raise SiftError(
                    f"Redis at {without_password(url)} does not answer ({exc.detail}); check "
                    "SIFT_REDIS_URL, or unset it for the embedded Redis"
                ) from exc
            # The first sweep also recovers entries a crashed process left unapplied.
            sweeper = asyncio.create_task(applier.scheduler.sweep_forever(), name="sweeper")
            listener = asyncio.create_task(applier.waits.listen_forever(), name="commit-listener")
            app.state.selectors.monitor.outbox.start()
            app.state.sources.start()
            expiry = asyncio.create_task(
                app.state.selectors.lifecycle.expire_forever(
                    settings.sweep_interval_seconds, stop_expiring
                ),
                name="expiry",
            )
            if supervisor is not None:
                supervising = asyncio.create_task(supervisor.run(), name="redis-supervisor")
            yield
        finally:
            # Every step is bounded: shutdown must finish even if Redis or a task misbehaves.
            if supervising is not None:  # first: a stop must not look like a crash to restart
                supervising.cancel()
                await asyncio.wait([supervising], timeout=SHUTDOWN_STEP_SECONDS)
            await app.state.sources.close(SHUTDOWN_STEP_SECONDS)
            await applier.close(SHUTDOWN_STEP_SECONDS)
            await app.state.selectors.monitor.close(SHUTDOWN_STEP_SECONDS)
            stop_expiring.set()
            if expiry is not None:
                await asyncio.wait([expiry], timeout=SHUTDOWN_STEP_SECONDS)
            for task in (sweeper, listener):
                if task is not None:
                    task.cancel()
                    await asyncio.wait([task], timeout=SHUTDOWN_STEP_SECONDS)
            await asyncio.wait_for(store.close(), SHUTDOWN_STEP_SECONDS)
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
        # /docs is served by service.api.routes.ui with Swagger UI's files from this server (no
        # CDN: FastAPI's own page renders blank offline); ReDoc is not offered.
        docs_url=None,
        redoc_url=None,
        # Sift traces its requests itself (service/api/tracing.py: the hot path's routes too).
        telemetry={"tracing": False},
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.redis_supervisor = None
    app.state.startup_error = None
    install_problem_handlers(app)
    # Authentication and scopes are checked by every route's GuardedRoute (service.api.guard).
    install_openapi(app, settings)
    app.state.routers = [
        health.router,
        selectors.router,
        methods.router,
        archives.router,
        chunks.router,
        features.router,
        rankings.router,
        monitoring.router,
        capabilities.router,
        streams.router,
        sources.router,
        keys.router,
        quotas.router,
        ui.router,
    ]
    for router in app.state.routers:
        app.include_router(router)
    install_middleware(app, settings, metrics)  # after the routes: the hot path finds its own
    return app
