"""A real HTTP receiver of alert webhooks for the tests: a ``ThreadingHTTPServer`` on a free
127.0.0.1 port that records every POST (headers, body, when) and answers as told: fail the
first ``failures`` requests with 500, or take ``delay`` seconds before answering."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float
    status: int

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    url: str
    failures: int = 0
    delay: float = 0.0
    requests: list[Received] = field(default_factory=list)
    #: Requests read and not yet answered (held for ``delay``).
    pending: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self) -> list[Received]:
        """The requests answered 2xx."""
        with self.lock:
            return [r for r in self.requests if r.status < 300]

    def all(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


@contextmanager
def webhook_receiver(failures: int = 0, delay: float = 0.0) -> Iterator[Receiver]:
    receiver = Receiver(url="", failures=failures, delay=delay)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if receiver.delay:
                with receiver.lock:
                    receiver.pending += 1
                time.sleep(receiver.delay)
            with receiver.lock:
                failing = receiver.failures > 0
                if failing:
                    receiver.failures -= 1
                status = 500 if failing else 204
                receiver.requests.append(
                    Received(dict(self.headers.items()), body, time.time(), status)
                )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
