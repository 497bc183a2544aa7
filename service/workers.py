"""``sift serve --workers N``: N processes serve one port, each a replica on the same Redis.

One Python process is one event loop on one core. The parent binds the listening socket and
starts N worker processes (``sift serve`` each) that inherit it: the kernel hands every new
connection to a worker waiting in ``accept``, so the least busy one takes it. Every worker is a
full replica, exactly as replicas behind a load balancer are: it appends, applies what it holds
the lease of, answers its waiters from every worker's commits (``service.applier.waiting``)
and reads.

With the embedded default the parent starts, supervises (``RedisSupervisor``: restarted when it
exits) and finally stops the Redis, and the workers use it through its unix socket; with
``SIFT_REDIS_URL`` they use that. A worker that dies is started again (after a pause that grows
while it keeps dying young); when the first workers cannot start at all (a worker exits with a
status before any worker lived ``YOUNG_SECONDS``: Redis refusing the credentials, say, and it
says why on stderr) the service stops with status 1. SIGTERM or SIGINT
stops the workers gracefully (each finishes what it serves), then the Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from service.config import Settings
from service.errors import SiftError
from service.server import LISTEN_FD_VARIABLE
from service.store.embedded import EmbeddedRedis, RedisSupervisor

log = logging.getLogger("sift.workers")

#: A worker that exits this soon after it started died young: the next start waits longer.
YOUNG_SECONDS = 10.0
#: Pause before starting a worker again after it died young, doubling up to the maximum.
RESTART_PAUSE_SECONDS = 0.5
MAX_RESTART_PAUSE_SECONDS = 30.0
#: How long stopped workers may take to finish what they serve before they are killed.
STOP_SECONDS = 30.0
#: How often the parent looks at its workers.
WATCH_SECONDS = 0.2


@dataclass
class Worker:
    """One worker process and its history."""

    number: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    #: Deaths in a row of this worker, each within ``YOUNG_SECONDS`` of its start.
    young_deaths: int = 0
    restart_at: float | None = None
    #: Whether it ever lived past ``YOUNG_SECONDS`` (a service that worked once keeps trying).
    proven: bool = field(default=False)


def bind(settings: Settings) -> socket.socket:
    """The listening socket every worker accepts on (what uvicorn's own bind does)."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((settings.host, settings.port))
    except OSError as exc:
        listener.close()
        raise SiftError(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}"
        ) from None
    listener.listen(2048)
    listener.set_inheritable(True)
    return listener


class Workers:
    """The parent: the listening socket, the embedded Redis if any, and the workers."""

    def __init__(self, settings: Settings, count: int, worker_args: list[str]) -> None:
        self.settings = settings
        self.count = count
        #: ``sift serve`` options every worker gets (log level and format).
        self.worker_args = worker_args
        self.workers = [Worker(number) for number in range(1, count + 1)]
        self.embedded: EmbeddedRedis | None = None
        self.listener: socket.socket | None = None
        self.redis_url = settings.redis_url
        self._stopping = asyncio.Event()

    async def run(self) -> int:
        """Serve until stopped; the exit status (1: the workers could not start)."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stopping.set)
        supervising: asyncio.Task[None] | None = None
        try:
            if self.redis_url is None:
                self.embedded = EmbeddedRedis(
                    self.settings.data_dir,
                    executable=self.settings.redis_server,
                    appendfsync=self.settings.redis_appendfsync,
                )
                started = time.monotonic()
                self.redis_url = await asyncio.to_thread(self.embedded.start)
                supervisor = RedisSupervisor(
                    self.embedded, expected_start_s=time.monotonic() - started
                )
                supervising = asyncio.create_task(supervisor.run(), name="redis-supervisor")
            self.listener = bind(self.settings)
            log.info(
                "serving on %s:%d with %d workers",
                self.settings.host,
                self.settings.port,
                self.count,
            )
            return await self._watch()
        finally:
            await self._stop_workers()
            if supervising is not None:
                supervising.cancel()
                await asyncio.wait([supervising], timeout=5)
            if self.listener is not None:
                self.listener.close()
            if self.embedded is not None:
                await asyncio.to_thread(self.embedded.stop)

    def _environment(self) -> dict[str, str]:
        assert self.listener is not None and self.redis_url is not None
        env = dict(os.environ)
        env.update(
            SIFT_REDIS_URL=self.redis_url,
            SIFT_WORKERS="1",
            **{LISTEN_FD_VARIABLE: str(self.listener.fileno())},
        )
        if self.embedded is not None:
            env["SIFT_REDIS_FROM_PARENT"] = "true"
        return env

    def _start(self, worker: Worker) -> None:
        assert self.listener is not None
        worker.process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", *self.worker_args],
            env=self._environment(),
            pass_fds=[self.listener.fileno()],
            stdin=subprocess.DEVNULL,
        )
        worker.started_at = time.monotonic()
        worker.restart_at = None
        log.info("worker %d started (pid %d)", worker.number, worker.process.pid)

    async def _watch(self) -> int:
        for worker in self.workers:
            self._start(worker)
        while not self._stopping.is_set():
            now = time.monotonic()
            for worker in self.workers:
                if worker.process is None:
                    if worker.restart_at is not None and now >= worker.restart_at:
                        self._start(worker)
                    continue
                status = worker.process.poll()
                if status is None:
                    if not worker.proven and now - worker.started_at >= YOUNG_SECONDS:
                        worker.proven, worker.young_deaths = True, 0
                    continue
                if self._died(worker, status, now):
                    return 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), WATCH_SECONDS)
        return 0

    def _died(self, worker: Worker, status: int, now: float) -> bool:
        """Note a worker's death and plan its restart; True when the service should stop (no
        worker ever got going, and this one could not start)."""
        assert worker.process is not None
        pid = worker.process.pid
        worker.process = None
        young = now - worker.started_at < YOUNG_SECONDS
        # A worker that exits with a status before any worker got going could not start (it
        # said why); one killed by a signal (SIGKILL, the OOM killer) is started again.
        if young and status > 0 and not any(w.proven for w in self.workers):
            log.error("worker %d (pid %d) could not start (status %d)", worker.number, pid, status)
            return True
        worker.young_deaths = worker.young_deaths + 1 if young else 0
        pause = 0.0
        if worker.young_deaths:
            pause = min(
                MAX_RESTART_PAUSE_SECONDS, RESTART_PAUSE_SECONDS * 2 ** (worker.young_deaths - 1)
            )
        how = f"signal {-status}" if status < 0 else f"status {status}"
        log.warning(
            "worker %d (pid %d) exited (%s); starting another in %.1f s",
            worker.number,
            pid,
            how,
            pause,
        )
        worker.restart_at = now + pause
        return False

    async def _stop_workers(self) -> None:
        running = [w.process for w in self.workers if w.process is not None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for process in running:
            try:
                await asyncio.to_thread(process.wait, max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning("worker pid %d did not stop within %.0f s", process.pid, STOP_SECONDS)
                process.kill()
                await asyncio.to_thread(process.wait)


def serve_workers(settings: Settings, count: int, worker_args: list[str]) -> int:
    """Run ``count`` workers (see the module docstring); the exit status."""
    workers = Workers(settings, count, worker_args)
    try:
        return asyncio.run(workers.run())
    except SiftError as exc:
        print(f"sift serve: {exc.detail}", file=sys.stderr)
        return 1
