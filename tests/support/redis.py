"""Real redis-servers for the tests: free ports, an embedded server started on one."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.errors import SiftError
from service.store.embedded import EmbeddedRedis, find_redis_server


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
