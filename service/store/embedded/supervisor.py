"""The supervisor of the embedded ``redis-server``: restarts it whenever it exits and says what
happened meanwhile.

When the child exits (a crash, the OOM killer, a stray SIGKILL) :class:`RedisSupervisor` notices
within its poll interval and restarts it on the same directory, keeping the lock all along; the
append-only file replays everything that was acknowledged (``appendfsync always``). A server
that keeps dying is restarted with exponential backoff. Meanwhile the supervisor says what
happened (exit status or signal, since when, restarts so far) and how long the restart should
still take, from the backoff left, the server's own loading estimate and how long the last start
took.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import signal
import time
from collections.abc import Callable
from typing import Any, Literal

from service.store.embedded.server import EmbeddedRedis

log = logging.getLogger("sift.embedded")


def describe_exit(status: int) -> dict[str, Any]:
    """An exit status as ``{"exit_code": ..., "signal": ...}`` (one of them None)."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return {"exit_code": None, "signal": name}
    return {"exit_code": status, "signal": None}


@dataclasses.dataclass(frozen=True)
class Incident:
    """One exit of the supervised server and, once it is back, its recovery."""

    exit_code: int | None
    signal: str | None
    #: When the exit was noticed (Unix time).
    at: float
    #: When the server answered again (Unix time); None while it is still down.
    recovered_at: float | None = None
    #: Restart attempts it took (failed ones included).
    attempts: int = 0

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "exit_code": self.exit_code,
            "signal": self.signal,
            "at": self.at,
            "attempts": self.attempts,
        }
        if self.recovered_at is not None:
            body["recovered_at"] = self.recovered_at
            body["down_seconds"] = round(self.recovered_at - self.at, 3)
        return body


SupervisedState = Literal["running", "restarting", "stopped"]


@dataclasses.dataclass(frozen=True)
class SupervisorTimings:
    """How a supervisor paces itself: it polls the child every ``poll_interval_s``; a restart
    that fails, or a server that dies again within ``stable_after_s`` of its restart, doubles
    the pause before the next attempt, from ``backoff_initial_s`` up to ``backoff_max_s``; a
    restart may take ``restart_timeout_s``."""

    poll_interval_s: float = 0.2
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    stable_after_s: float = 30.0
    restart_timeout_s: float = 120.0


class RedisSupervisor:
    """Restarts an :class:`EmbeddedRedis` whenever it exits; says what happened meanwhile.

    ``run`` is the task (``service.runtime`` starts it, after the first start). It polls the
    child (a ``waitpid``, no Redis round trip) and backs off as its ``timings`` say.
    """

    def __init__(
        self,
        server: EmbeddedRedis,
        timings: SupervisorTimings = SupervisorTimings(),
        *,
        expected_start_s: float = 0.5,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.server = server
        self.timings = timings
        #: How long the last successful start took: the estimate of the next one.
        self.expected_start_s = expected_start_s
        self.on_restart = on_restart
        self.state: SupervisedState = "running"
        self.restarts = 0
        self.incident: Incident | None = None
        self._attempt_started: float | None = None
        self._next_attempt_at: float | None = None
        self._recovered_monotonic: float | None = None
        self._failures_in_a_row = 0

    @property
    def healthy(self) -> bool:
        return self.state == "running"

    def retry_after(self) -> int:
        """Whole seconds until the server should answer again (at least 1).

        From the restart's progress: the backoff pause left, then the server's own estimate of
        its AOF replay if it gives one, else what the last start took minus what this one has
        taken so far.
        """
        now = time.monotonic()
        left = 0.0
        if self._next_attempt_at is not None and now < self._next_attempt_at:
            left = (self._next_attempt_at - now) + self.expected_start_s
        elif self.server.loading_eta_s is not None:
            left = self.server.loading_eta_s
        elif self._attempt_started is not None:
            left = self.expected_start_s - (now - self._attempt_started)
        return max(1, math.ceil(left))

    def status(self) -> dict[str, Any]:
        """What ``/v1/readyz`` shows: the state, restarts so far, the last incident."""
        body: dict[str, Any] = {"restarts": self.restarts}
        if self.incident is not None:
            key = "since" if self.state == "restarting" else "last_incident"
            body[key] = self.incident.at if key == "since" else self.incident.as_dict()
            if self.state == "restarting":
                body["last_exit"] = self.incident.as_dict()
        return body

    def _backoff(self) -> float:
        if self._failures_in_a_row == 0:
            return 0.0
        return float(
            min(
                self.timings.backoff_max_s,
                self.timings.backoff_initial_s * 2 ** (self._failures_in_a_row - 1),
            )
        )

    async def run(self) -> None:
        """Watch and restart until cancelled."""
        while True:
            await asyncio.sleep(self.timings.poll_interval_s)
            status = self.server.exit_status()
            if status is None:
                if self.server.process is None:  # stopped on purpose: nothing to watch
                    self.state = "stopped"
                    return
                continue
            await self._recover(status)

    async def _recover(self, status: int) -> None:
        exited = describe_exit(status)
        self.incident = Incident(exited["exit_code"], exited["signal"], time.time())
        self.state = "restarting"
        # Dying again soon after a restart counts as one more failure: back off.
        recently = self._recovered_monotonic is not None and (
            time.monotonic() - self._recovered_monotonic < self.timings.stable_after_s
        )
        self._failures_in_a_row = self._failures_in_a_row if recently else 0
        log.error(
            "the embedded redis-server exited (%s); restarting it on %s",
            f"signal {exited['signal']}" if exited["signal"] else f"status {exited['exit_code']}",
            self.server.data_dir,
        )
        attempts = 0
        while True:
            pause = self._backoff()
            self._next_attempt_at = time.monotonic() + pause
            await asyncio.sleep(pause)
            self._next_attempt_at = None
            attempts += 1
            self.incident = dataclasses.replace(self.incident, attempts=attempts)
            started = self._attempt_started = time.monotonic()
            try:
                await asyncio.to_thread(self.server.restart, self.timings.restart_timeout_s)
            except Exception as exc:  # whatever it was, the supervisor tries again later
                self._failures_in_a_row += 1
                log.error(
                    "restarting the embedded redis-server failed (attempt %d; next in %.1f s): %s",
                    attempts,
                    self._backoff(),
                    exc,
                )
                continue
            finally:
                self._attempt_started = None
            break
        self._recovered_monotonic = time.monotonic()
        self.expected_start_s = max(0.1, self._recovered_monotonic - started)
        self._failures_in_a_row += 1  # until it has stayed up for stable_after_s
        self.restarts += 1
        self.incident = Incident(
            self.incident.exit_code,
            self.incident.signal,
            self.incident.at,
            recovered_at=time.time(),
            attempts=attempts,
        )
        self.state = "running"
        log.warning(
            "the embedded redis-server is back after %.2f s (restart %d, %d attempt(s))",
            self.incident.recovered_at - self.incident.at if self.incident.recovered_at else 0.0,
            self.restarts,
            attempts,
        )
        if self.on_restart is not None:
            self.on_restart()
