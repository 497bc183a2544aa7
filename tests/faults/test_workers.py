"""``sift serve --workers 2`` (``service.workers``) as an operator runs it: a real parent process
with its embedded Redis and two workers on one port, broken from outside."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support.harness import ServiceProcess, wait_for
from tests.support.redis import RedisServer, free_port


def children(pid: int) -> list[int]:
    """The pids of a process's children (Linux's /proc: each thread lists those it started)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def workers_of(parent: int) -> list[int]:
    return sorted(p for p in children(parent) if "service serve" in command_line(p))


def two_workers(parent: int, without: int | None = None) -> list[int] | None:
    """The parent's two workers, once it has two (and ``without`` is not one of them)."""
    workers = workers_of(parent)
    return workers if len(workers) == 2 and without not in workers else None


def redis_of(parent: int) -> list[int]:
    return [p for p in children(parent) if "redis-server" in command_line(p)]


def gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (a zombie counts as gone: it is waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def served_by_others_while_stopped(url: str, stopped: int) -> None:
    """With ``stopped`` frozen (SIGSTOP), new connections are all taken by the other worker."""
    os.kill(stopped, signal.SIGSTOP)
    try:
        for _ in range(10):
            with httpx.Client(timeout=5) as fresh:  # a new connection each time
                assert fresh.get(f"{url}/v1/readyz").status_code == 200
    finally:
        os.kill(stopped, signal.SIGCONT)


@pytest.mark.slow
def test_two_workers_serve_one_port_survive_a_kill_and_stop_with_their_redis(
    tmp_path: Path,
) -> None:
    service = ServiceProcess(
        "workers",
        None,
        tmp_path,
        data_dir=tmp_path / "d",
        args=("--workers", "2", "--log-level", "warning"),
    )
    service.start()
    parent = service.pid
    redis_pids: list[int] = []
    try:
        workers = wait_for(lambda: two_workers(parent), 10, "the parent's two workers")
        redis_pids = redis_of(parent)
        assert len(redis_pids) == 1, command_line(parent)
        url = service.url
        http = httpx.Client(base_url=url, timeout=10)
        created = http.post("/v1/selectors", json={"name": "w", "method": "fsds", "n_features": 4})
        assert created.status_code == 201, created.text
        rows = np.random.default_rng(0).standard_normal((50, 4)).tolist()
        assert http.post("/v1/selectors/w/chunks", json=rows).status_code == 200
        # Each worker serves alone while the other is frozen.
        for worker in workers:
            served_by_others_while_stopped(url, worker)
        # A worker killed from outside is replaced; the service answers meanwhile.
        os.kill(workers[0], signal.SIGKILL)
        replaced = wait_for(
            lambda: two_workers(parent, without=workers[0]),
            15,
            "a worker in place of the killed one",
        )
        assert workers[1] in replaced
        with httpx.Client(base_url=url, timeout=10) as fresh:
            answered = fresh.post("/v1/selectors/w/chunks", json=rows)
            assert answered.status_code == 200, answered.text
            assert answered.json()["version"] == 2
            assert fresh.get("/v1/selectors/w").json()["rows_seen"] == 100
        # SIGTERM stops the workers, then the Redis, and the parent exits 0.
        everyone = [*replaced, *redis_pids]
        assert service.stop(timeout_s=30) == 0
        assert all(gone(pid) for pid in everyone), [command_line(p) for p in everyone]
    finally:
        for pid in {*workers_of(parent), *redis_of(parent), *redis_pids}:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        service.kill()


def test_workers_that_cannot_start_stop_the_service_with_one_line(
    redis_server: RedisServer,
) -> None:
    """A port already taken: the parent says so in one line and exits 1 (no traceback)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", free_port()))
    taken.listen(1)
    port = taken.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIFT_")}
    try:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "service", "serve", "--workers", "2", "--port", str(port)],
            env={**env, "SIFT_REDIS_URL": redis_server.url},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        taken.close()
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == [
        f"sift serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    ], done.stderr
    assert time.monotonic() - started < 30
