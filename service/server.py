"""How ``sift serve`` runs the app: uvicorn, with guards at the connection level.

uvicorn bounds neither how long a client may take to send a request's headers nor how many
connections a process holds: 20,500 idle connections that each sent half a header used up the
process's file descriptors, normal requests timed out for ~40 s, and asyncio logged one traceback
per refused ``accept`` (580,000 of them). The HTTP protocol classes here add:

* a **header deadline**: a connection that has not sent a whole request head within
  ``SIFT_HEADER_TIMEOUT_SECONDS`` of opening (or of its previous answer, on a kept-alive
  connection) is closed;
* a **connection bound**: at ``SIFT_MAX_CONNECTIONS`` open connections, a new one takes the place
  of the connection that has waited longest for a request head (an idle keep-alive, a slow
  client), or is closed at once when every connection is serving a request; so the process
  never runs out of file descriptors (the bound is lowered to fit the descriptors the process
  may open, which start-up raises to the hard limit), and clients that send their requests get
  in even while slow ones fill the bound;
* **quiet refusals**: both are logged at most once per ``REPORT_EVERY_SECONDS`` with their count,
  and asyncio's own "out of system resource" errors of ``accept`` likewise.

nginx in front would do the same; ``sift serve`` is what people run, so it does it itself.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import socket
import sys
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from service.config import Settings

log = logging.getLogger("sift.server")

#: Refusals of one kind are reported at most this often (with how many there were).
REPORT_EVERY_SECONDS = 10.0
#: File descriptors kept free of client connections: Redis connections, the embedded Redis's
#: pipes, files, the listening socket.
RESERVED_DESCRIPTORS = 256
#: The environment variable that hands a worker of ``sift serve --workers`` (``service.workers``)
#: the listening socket's descriptor.
LISTEN_FD_VARIABLE = "SIFT_LISTEN_FD"
#: The collector's youngest generation is collected after this many allocations (Python's
#: default is 700): a source's batch makes thousands of small objects, and at 700 each
#: batch paid for several collections, each traversing what the one before left.
GC_YOUNG_THRESHOLD = 10_000


class RateLimitedReport:
    """Counts events and logs them at most once per ``every`` seconds, with the count since
    (events after a report are reported together when the interval is over). Used on the event
    loop only."""

    def __init__(self, message: str, every: float = REPORT_EVERY_SECONDS) -> None:
        self.message = message
        self.every = every
        self._unreported = 0
        self._last = float("-inf")
        self._flush: asyncio.TimerHandle | None = None

    def note(self) -> None:
        self._unreported += 1
        wait = self._last + self.every - time.monotonic()
        if wait <= 0:
            self._report()
        elif self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(wait, self._report)

    def _report(self) -> None:
        self._flush = None
        if self._unreported:
            log.warning("%s: %d since the last report", self.message, self._unreported)
            self._last, self._unreported = time.monotonic(), 0


class ConnectionGuards:
    """The header deadline and the connection bound, shared by every connection of a server
    (``guarded_protocol`` gives each protocol class its own)."""

    def __init__(self, header_timeout_s: float, max_connections: int) -> None:
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        #: Connections waiting for a request head, the longest-waiting first.
        self.waiting: dict[asyncio.Protocol, None] = {}
        self.evicted = RateLimitedReport(
            f"closed connections waiting for a request head to make room for new ones at "
            f"{max_connections} open (SIFT_MAX_CONNECTIONS)"
        )
        self.slow_headers = RateLimitedReport(
            f"closed connections that sent no whole request head within {header_timeout_s:g} s "
            "(SIFT_HEADER_TIMEOUT_SECONDS)"
        )
        self.refused = RateLimitedReport(
            f"refused connections beyond {max_connections} open ones, all serving requests "
            "(SIFT_MAX_CONNECTIONS)"
        )

    def make_room(self) -> bool:
        """At the bound: close the connection that has waited longest for a request head;
        False if none is waiting (every connection is serving a request)."""
        if not self.waiting:
            return False
        oldest = next(iter(self.waiting))
        del self.waiting[oldest]
        self.evicted.note()
        oldest.transport.close()  # type: ignore[attr-defined]
        return True


def guarded_protocol(base: type[Any], guards: ConnectionGuards) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's h11 or httptools protocol) with ``guards``.

    Both bases keep the connections of their server in ``self.connections``, the request being
    served in ``self.cycle`` (a new one from the moment a request head is parsed) and call
    ``on_response_complete`` when an answer is done: the deadline is armed at the connection's
    start and after every answer, and met by the next request head.
    """

    class Guarded(base):  # type: ignore[misc]
        _refused = False
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            if len(self.connections) >= guards.max_connections and not guards.make_room():
                self._refused = True
                self.transport = transport
                guards.refused.note()
                transport.abort()
                return
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and self.cycle is not self._waiting_after:
                self._disarm()  # a request head arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # Pipelined requests may already have started the next cycle.
            if not self.transport.is_closing() and (
                self.cycle is None or self.cycle.response_complete
            ):
                self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._waiting_after = self.cycle
            self._deadline = self.loop.call_later(guards.header_timeout_s, self._overdue)
            guards.waiting[self] = None

        def _disarm(self) -> None:
            guards.waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _overdue(self) -> None:
            self._deadline = None
            guards.waiting.pop(self, None)
            if self.cycle is self._waiting_after and not self.transport.is_closing():
                guards.slow_headers.note()
                self.transport.close()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol on httptools (a C parser: about a fifth less CPU per request
    than h11's pure Python) where it is installed, as ``uvicorn[standard]`` installs it."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - uvicorn without its standard extras
        return H11Protocol
    return HttpToolsProtocol


def inherited_listener() -> socket.socket | None:
    """The listening socket a worker got from its parent, if it is one."""
    descriptor = os.environ.get(LISTEN_FD_VARIABLE)
    if not descriptor:
        return None
    return socket.socket(fileno=int(descriptor))


def descriptor_budget() -> int:
    """Raise this process's soft limit of open files to its hard limit; the connections that
    leaves room for (``RESERVED_DESCRIPTORS`` kept for everything else)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(soft - RESERVED_DESCRIPTORS, 16)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Report asyncio's ``accept`` failures (out of descriptors or memory) once per interval
    instead of one traceback each; everything else goes to the handler that was there."""
    report = RateLimitedReport("could not accept connections (out of system resources)")
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if "accept" in str(context.get("message", "")):
            report.note()
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


class _QuietStartupFailure(logging.Filter):
    """Drops uvicorn's report of a start-up that failed for a reason Sift names itself (its
    traceback, "Application startup failed"): ``serve`` says it in one line instead."""

    def __init__(self, app: Any) -> None:
        super().__init__()
        self.app = app

    def filter(self, record: logging.LogRecord) -> bool:
        return self.app.state.runtime.startup_error is None


def serve(settings: Settings, log_level: str, debug: bool = False) -> int:
    """Run the app under uvicorn with the guards above until it is stopped; the exit status.

    A start-up that fails for a reason Sift knows (no redis-server, a data directory in use,
    Redis unreachable or refusing the credentials) is printed as that one line on stderr with
    status 1; with ``debug``, uvicorn's traceback too.
    """
    import uvicorn

    from service.api.app import create_app

    max_connections = min(settings.max_connections, descriptor_budget())
    if max_connections < settings.max_connections:
        log.warning(
            "serving at most %d connections: the process may open too few files for "
            "SIFT_MAX_CONNECTIONS=%d",
            max_connections,
            settings.max_connections,
        )
    guards = ConnectionGuards(settings.header_timeout_seconds, max_connections)
    app = create_app(settings)
    quiet = _QuietStartupFailure(app)
    if not debug:
        logging.getLogger("uvicorn.error").addFilter(quiet)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        log_config=None,
        http=guarded_protocol(http_protocol(), guards),
        loop="auto",  # uvloop where installed (uvicorn[standard])
    )
    server = uvicorn.Server(config)

    # A worker of ``sift serve --workers`` accepts on the socket its parent bound.
    inherited = inherited_listener()

    # What the start made (modules, the app) lives as long as the process: set aside from
    # the collector, so that its full collections traverse only what came after.
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)  # the older two after 20 of the younger, not 10

    async def main() -> None:
        quiet_accept_errors(asyncio.get_running_loop())
        await server.serve(sockets=None if inherited is None else [inherited])

    try:
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(main())
    except SystemExit:  # uvicorn's own exit on a failed start-up
        if app.state.runtime.startup_error is None:
            raise
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)
    if app.state.runtime.startup_error is not None:
        print(f"sift serve: {app.state.runtime.startup_error}", file=sys.stderr)
        return 1
    return 0
