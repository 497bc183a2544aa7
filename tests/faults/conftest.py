"""Fixtures of the fault tests: a restartable redis-server and service processes on it.

Everything started here is stopped here, on failure too: services are SIGKILLed (a paused one
is resumed first) before their Redis is shut down. A failing test shows the tail of every
service log in its captured teardown output.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from tests.support.harness import RedisProcess, ServiceProcess


@pytest.fixture
def redis_proc(tmp_path: Path) -> Iterator[RedisProcess]:
    """A redis-server with ``appendfsync always`` on a free port, restartable on its AOF."""
    server = RedisProcess(tmp_path / "redis")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def spawn_service(
    redis_proc: RedisProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ServiceProcess]]:
    """``spawn_service(name, **env)``: a started service process on ``redis_proc``.

    ``env`` adds ``SIFT_*`` variables (e.g. ``SIFT_SWEEP_INTERVAL_SECONDS="0.2"``); nothing else
    of the calling environment's ``SIFT_*`` reaches the process.
    """
    started: list[ServiceProcess] = []

    def spawn(name: str, **env: str) -> ServiceProcess:
        service = ServiceProcess(name, redis_proc.url, tmp_path, env)
        started.append(service)
        service.start()
        return service

    try:
        yield spawn
    finally:
        for service in started:
            try:
                service.kill()
            except Exception as exc:  # keep killing the others
                print(f"could not kill {service}: {exc}")
        failed = getattr(request.node, "rep_call", None)
        if failed is None or failed.failed:
            for service in started:
                print(f"--- log tail of service {service.name} ({service.log_path}):")
                print(service.log_tail())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
