"""Real redis-servers for the tests: free ports, an embedded server started on one."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.errors import SiftError
from service.store.embedded import EmbeddedRedis, find_redis_server

#: Under pytest-xdist each worker takes its ports from a block of its own, below the kernel's
#: ephemeral range (32768 and up), so that two workers never race for the port one of them
#: saw free, and no outgoing connection is handed one. A cluster node's bus port (+10000)
#: stays below that range too for up to ten workers.
FIRST_WORKER_PORT = 11_000
PORTS_PER_WORKER = 1_000
_next_port = itertools.count()


def _xdist_worker() -> int | None:
    """The number of this pytest-xdist worker (``gw3`` -> 3), None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(also_free_at: int | None = None, taken: Collection[int] = ()) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (and, with ``also_free_at``, whose
    ``port + also_free_at`` was too: a cluster node's bus port), never 6379 nor one of
    ``taken``. Outside xdist the kernel picks it; under xdist the worker's own block does."""
    worker = _xdist_worker()
    for _ in range(PORTS_PER_WORKER):
        if worker is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
        else:
            port = FIRST_WORKER_PORT + PORTS_PER_WORKER * worker
            port += next(_next_port) % PORTS_PER_WORKER
            if not _bindable(port):
                continue
        if port == 6379 or port in taken:
            continue
        if also_free_at is not None:
            other = port + also_free_at
            if other > 65_535 or other in taken or not _bindable(other):
                continue
        return port
    raise AssertionError("found no free port")


def require_redis_server() -> str:
    try:
        return find_redis_server()
    except SiftError as exc:
        pytest.fail(f"the tests need a real redis-server: {exc.detail}", pytrace=False)


def start_embedded(
    data_dir: Path, appendfsync: str = "everysec", attempts: int = 3
) -> EmbeddedRedis:
    """Start an EmbeddedRedis on a free port (retrying if another process grabs the port)."""
    executable = require_redis_server()
    last: Exception | None = None
    for _ in range(attempts):
        server = EmbeddedRedis(
            data_dir, executable=executable, port=free_port(), appendfsync=appendfsync
        )
        try:
            server.start()
            return server
        except SiftError as exc:
            last = exc
    raise AssertionError(f"could not start redis-server in {data_dir}: {last}")


@dataclass
class RedisServer:
    url: str
    server: EmbeddedRedis

    @property
    def embedded(self) -> EmbeddedRedis:
        return self.server
