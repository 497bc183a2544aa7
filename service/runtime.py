"""The composition root: everything one serving process runs, in one object.

``async with Runtime(settings):`` starts, in this order, the embedded Redis (unless
``SIFT_REDIS_URL`` names one), the connection and the store (its scripts loaded: a Redis that
does not answer stops the start here), then in one task group the applier's sweeper and commit
listener, the expiry of idle selectors, the monitor's outbox, the sources and the embedded Redis's
supervisor; leaving it stops them in the reverse order, each step bounded by
``SHUTDOWN_STEP_SECONDS`` so that shutdown ends even when Redis does not answer (a task is
asked to stop, then cancelled; the task group waits only for what survives a cancellation). The
supervisor stops first (a stop must not look like a crash to restart) and the Redis last.

What the routes use (``service.api.deps``): ``settings``, ``metrics``, ``selectors``,
``sources``, ``quotas``, ``auth``, ``inventory``, ``supervisor`` and ``redis_mode``, available
once started; ``startup_error`` says why a start failed, for ``sift serve`` to say in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any

from threadpoolctl import threadpool_limits

from service import tracing
from service.algorithms import parallel
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


class Runtime:
    """What one serving process runs (module docstring); ``async with`` it."""

    settings: Settings
    metrics: Metrics
    store: SelectorStore
    selectors: Selectors
    sources: Sources
    quotas: Quotas
    auth: Authenticator
    inventory: Inventory
    #: The embedded Redis's supervisor, if this process started the Redis.
    supervisor: RedisSupervisor | None = None
    #: ``embedded``, ``cluster`` or ``external``.
    redis_mode: str = "external"
    #: Why the start failed, when it failed for a reason Sift knows.
    startup_error: str | None = None

    def __init__(self, settings: Settings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Runtime:
        self.supervisor, self.startup_error = None, None
        try:
            async with contextlib.AsyncExitStack() as stack:
                await self._start(stack)
                self._stack = stack.pop_all()
        except SiftError as exc:
            self.startup_error = exc.detail
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def _start(self, stack: contextlib.AsyncExitStack) -> None:
        """Start every part, pushing its stop on ``stack`` (which runs them in reverse)."""
        settings = self.settings
        stack.enter_context(tracing.started())  # OTEL_* variables (service/tracing.py)
        # Updates compute in worker threads; the event loop must get the GIL back quickly for
        # readers' small requests (5 ms by default, per hand-over: it dominated GET .../top
        # while a big update ran).
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECONDS)
        # Concurrent updates must not oversubscribe the cores with BLAS threads (config.py).
        threadpool_limits(settings.blas_threads, user_api="blas")
        parallel.configure(settings.parts_threads)
        url = settings.redis_url or await self._start_embedded(stack)
        client = connect(url, cluster=settings.redis_cluster)
        stack.push_async_callback(self._close_client, client)
        self.store = store = SelectorStore(
            client,
            prefix=settings.key_prefix,
            idempotency_ttl_s=settings.idempotency_ttl_seconds,
            idempotency_max_records=settings.idempotency_max_records,
            wait_replicas=settings.redis_wait_replicas,
            wait_ms=settings.redis_wait_ms,
        )
        stack.push_async_callback(_bounded, store.close)
        self.auth = Authenticator(settings.api_token, ApiKeyStore(client, settings.key_prefix))
        applier = Applier(store, settings, self.metrics)
        self.selectors = Selectors(store, applier, settings, self.metrics)
        embedded = self.supervisor is not None or settings.redis_from_parent
        self.redis_mode = (
            "embedded" if embedded else "cluster" if is_cluster(client) else "external"
        )
        self.inventory = Inventory(store)
        self.quotas = Quotas(self.inventory, self.auth.keys, settings)
        self.sources = Sources(store, applier, settings, self.metrics)
        try:
            await store.ensure_scripts()
        except Unavailable as exc:
            raise SiftError(
                f"Redis at {without_password(url)} does not answer ({exc.detail}); check "
                "SIFT_REDIS_URL, or unset it for the embedded Redis"
            ) from exc
        tasks = await stack.enter_async_context(asyncio.TaskGroup())

        def run(coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
            return tasks.create_task(_logged(coroutine, name), name=name)

        # The applier's sweeper (its first sweep also recovers entries a crashed process left
        # unapplied) and commit listener; they stop when the applier closes (below), then the
        # task is cancelled.
        stack.push_async_callback(_cancel, run(applier.run(), "applier"))
        stop_expiring = asyncio.Event()
        expiry = run(
            self.selectors.lifecycle.expire_forever(settings.sweep_interval_seconds, stop_expiring),
            "expiry",
        )
        stack.push_async_callback(_stop, stop_expiring.set, expiry)
        monitor = self.selectors.monitor
        monitor.outbox.start()
        stack.push_async_callback(monitor.close, SHUTDOWN_STEP_SECONDS)
        stack.push_async_callback(applier.close, SHUTDOWN_STEP_SECONDS)
        self.sources.start()
        stack.push_async_callback(self.sources.close, SHUTDOWN_STEP_SECONDS)
        if self.supervisor is not None:
            stack.push_async_callback(_cancel, run(self.supervisor.run(), "redis-supervisor"))

    async def _start_embedded(self, stack: contextlib.AsyncExitStack) -> str:
        """Start the embedded Redis (stopped last) and make its supervisor; its URL."""
        settings = self.settings
        embedded = EmbeddedRedis(
            settings.data_dir,
            executable=settings.redis_server,
            appendfsync=settings.redis_appendfsync,
        )
        started_at = time.monotonic()
        url = await asyncio.to_thread(embedded.start)
        stack.push_async_callback(asyncio.to_thread, embedded.stop)
        log.info("embedded Redis started at %s (data in %s)", url, settings.data_dir)
        # Restarted whenever it exits; meanwhile requests get 503 (api/middleware.py).
        self.supervisor = RedisSupervisor(
            embedded,
            expected_start_s=time.monotonic() - started_at,
            on_restart=self.metrics.redis_restarts.inc,
        )
        return url

    @staticmethod
    async def _close_client(client: Any) -> None:
        try:
            await asyncio.wait_for(client.aclose(), SHUTDOWN_STEP_SECONDS)
        except TimeoutError:
            log.warning("closing the Redis connections took over %s s", SHUTDOWN_STEP_SECONDS)


async def _bounded(close: Callable[[], Awaitable[None]]) -> None:
    await asyncio.wait_for(close(), SHUTDOWN_STEP_SECONDS)


async def _logged(coroutine: Awaitable[None], name: str) -> None:
    """A background task that fails is logged, not a reason to stop the others."""
    try:
        await coroutine
    except Exception:
        log.exception("%s stopped", name)


async def _stop(ask: Callable[[], None], task: asyncio.Task[None]) -> None:
    """Ask ``task`` to stop (``ask``), then cancel it if it has not within a step."""
    ask()
    await asyncio.wait([task], timeout=SHUTDOWN_STEP_SECONDS)
    await _cancel(task)


async def _cancel(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
        await asyncio.wait([task], timeout=SHUTDOWN_STEP_SECONDS)
