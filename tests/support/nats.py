"""A real NATS server with JetStream (Debian's ``nats-server -js``) for the tests: on a free
port, its store in a folder of the test's, started, stopped (SIGKILL too) and started again on
the same port with the same store, as a bus a source reads."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import nats

from tests.support import processes
from tests.support.redis import free_port

#: Debian installs it in /usr/sbin, which is not on every user's PATH.
CANDIDATES = ("nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server")


def nats_binary() -> str:
    for candidate in CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise RuntimeError("nats-server is not installed (scripts/setup installs it)")


class NatsServer:
    """``nats-server -js`` on 127.0.0.1:<port>, with an optional user and password."""

    def __init__(self, folder: Path, user: str | None = None, password: str | None = None) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.user = user
        self.password = password
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL a client connects with (credentials included)."""
        if self.user:
            return f"nats://{self.user}:{self.password}@127.0.0.1:{self.port}"
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> None:
        command = [
            nats_binary(),
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-sd",
            str(self.folder / "store"),
        ]
        if self.user:
            command += ["--user", self.user, "--pass", str(self.password)]
        log = (self.folder / "nats.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    if sock.recv(4096).startswith(b"INFO"):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not start: {self.log_tail()}")
            time.sleep(0.05)

    def kill(self) -> None:
        processes.kill(self.process)

    def stop(self) -> None:
        processes.stop(self.process, timeout_s=10)

    def log_tail(self) -> str:
        path = self.folder / "nats.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


async def add_stream(url: str, name: str, subjects: list[str]) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(name=name, subjects=subjects)
    finally:
        await nc.close()


async def publish(url: str, subject: str, documents: list[Any]) -> list[int]:
    """Publish each document (JSON; bytes as they are) and wait for JetStream's
    acknowledgements; their stream sequences."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        futures = []
        for document in documents:
            data = document if isinstance(document, bytes) else json.dumps(document).encode()
            futures.append(js.publish(subject, data))
        sequences = []
        for start in range(0, len(futures), 500):
            acks = await asyncio.gather(*futures[start : start + 500])
            sequences += [ack.seq for ack in acks]
        return sequences
    finally:
        await nc.close()
