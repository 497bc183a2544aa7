"""Real TCP peers on 127.0.0.1 that misbehave as a webhook receiver might: flood an endless
body, drip the status line a byte at a time, hang, or speak another protocol. Each runs in
threads over plain sockets, independent of the event loop under test, and counts what it sent.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: What a peer's handler gets: the accepted connection and the peer (to count what it sent).
Handler = Callable[[socket.socket, "Peer"], None]


@dataclass
class Peer:
    port: int
    connections: int = 0
    bytes_sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        with self.lock:
            self.bytes_sent += len(data)


@contextmanager
def tcp_peer(handler: Handler, host: str = "127.0.0.1") -> Iterator[Peer]:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(512)
    listener.settimeout(0.2)
    peer = Peer(listener.getsockname()[1])

    def serve(conn: socket.socket) -> None:
        # OSError: the service closed the connection, which is what these peers are for.
        with conn, contextlib.suppress(OSError):
            handler(conn, peer)

    def accept() -> None:
        while not peer.stopped.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with peer.lock:
                peer.connections += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        peer.stopped.set()
        thread.join(timeout=5)
        listener.close()


def read_request(conn: socket.socket) -> bytes:
    """What the service sent, up to the end of its headers and a little more."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 1 << 20:
        piece = conn.recv(65536)
        if not piece:
            break
        data += piece
    return data


def flood(conn: socket.socket, peer: Peer) -> None:
    """200, then an endless chunked body (up to 1 GB) as fast as the socket takes it."""
    read_request(conn)
    peer.send(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    for _ in range((1 << 30) // len(piece)):
        if peer.stopped.is_set():
            return
        peer.send(conn, piece)


def drip(conn: socket.socket, peer: Peer) -> None:
    """A status line one byte every 0.2 s, then an endless header."""
    read_request(conn)
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 10_000:
        if peer.stopped.is_set():
            return
        peer.send(conn, bytes([byte]))
        time.sleep(0.2)


def hang(conn: socket.socket, peer: Peer) -> None:
    """Reads the request, never answers."""
    read_request(conn)
    peer.stopped.wait(60)


def banner(conn: socket.socket, peer: Peer) -> None:
    """A service that greets with a secret-bearing banner, as some databases do."""
    peer.send(conn, b"SECRET_BANNER internal-db-password=hunter2\r\n")
    read_request(conn)
    peer.send(conn, b"-ERR unknown command 'POST', password=hunter2\r\n")


def binary(conn: socket.socket, peer: Peer) -> None:
    """A binary protocol's answer to anything."""
    read_request(conn)
    peer.send(conn, bytes(range(256)) + b"\n")


@contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that nothing listens on (bound, never listening, while in use)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def forward(port: int, host: str = "127.0.0.1") -> Handler:
    """A TCP proxy's handler: every connection relayed to ``host:port``, both ways."""

    def relay(conn: socket.socket, peer: Peer) -> None:
        with socket.create_connection((host, port), timeout=10) as upstream:
            upstream.settimeout(None)
            conn.settimeout(None)

            def pump(source: socket.socket, sink: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    while piece := source.recv(65536):
                        sink.sendall(piece)
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)

            back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
            back.start()
            pump(conn, upstream)
            back.join(timeout=10)

    return relay


def greeting(data: bytes) -> Handler:
    """A peer that sends ``data`` on accepting, and again after each thing it receives."""

    def greet(conn: socket.socket, peer: Peer) -> None:
        peer.send(conn, data)
        conn.settimeout(10)
        while conn.recv(65536):
            peer.send(conn, data)

    return greet
