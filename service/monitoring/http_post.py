"""One webhook POST that a receiver cannot turn against the service.

A general HTTP client is the wrong tool for a request aimed at a URL a tenant chose: it follows
the resolver wherever it points, keeps a connection pool every receiver shares, times out per
read (a receiver dripping a byte a second never times out) and reads whatever body comes back.
``post`` does one thing, in order, all under one deadline (``asyncio.timeout``):

1. resolves the host and picks the first address the ``DestinationPolicy`` allows; the address
   judged is the address connected to (no second lookup a rebinding resolver could answer
   differently);
2. opens its own connection (TLS verified against the host name for ``https``), sends the
   request with ``Connection: close``;
3. reads the status line, at most ``STATUS_LINE_LIMIT`` bytes, skipping ``1xx`` interim
   answers, and closes. Nothing else of the answer is read, so a 1 GB body costs nothing.

What comes back is an ``Outcome``: a kind and, for an HTTP answer, its status code. Its text is
Sift's own, the same for every peer of a kind: none of the peer's bytes (a banner, an error
page) is ever kept or shown, so an alert cannot read another service's secrets, and the
outcomes do not tell one non-HTTP service from another.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Literal

from service.monitoring.destinations import Destination, DestinationPolicy, IPAddress

#: The most bytes a status line (or an interim answer's header line) may have.
STATUS_LINE_LIMIT = 1024
#: The most header lines of ``1xx`` interim answers read before the final status line.
INTERIM_LINES_LIMIT = 64
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])(?: [^\r\n]*)?\r?\n")

OutcomeKind = Literal[
    "delivered",  # a 2xx answer
    "status",  # another HTTP status
    "timeout",  # no answer within the deadline, whatever stage it was at
    "refused",  # the connection was refused
    "reset",  # the connection was closed or reset before an answer
    "unreachable",  # no route, network down, and the like
    "dns",  # the name does not resolve
    "tls",  # the TLS handshake or the certificate failed
    "not-http",  # something answered, but not HTTP
    "forbidden",  # the host resolves only to addresses alerts may not reach
    "dropped",  # not attempted: the alert was deleted since the event was raised
]

_TEXT: dict[OutcomeKind, str] = {
    "delivered": "delivered",
    "status": "the receiver answered with a status other than 2xx",
    "timeout": "no answer within the deadline (SIFT_ALERT_TIMEOUT_SECONDS)",
    "refused": "the connection was refused",
    "reset": "the connection was closed before an answer",
    "unreachable": "the host could not be reached",
    "dns": "the host name does not resolve",
    "tls": "the TLS handshake or the receiver's certificate failed",
    "not-http": "the receiver did not answer in HTTP",
    "forbidden": (
        "the host resolves only to addresses alerts may not reach (loopback, private, "
        "link-local...; SIFT_ALERT_PRIVATE opts them in)"
    ),
    "dropped": "not attempted: the alert was deleted",
}


@dataclass(frozen=True)
class Outcome:
    """How one attempt went: its kind, and the HTTP status when there was one."""

    kind: OutcomeKind
    status: int | None = None

    @property
    def delivered(self) -> bool:
        return self.kind == "delivered"

    @property
    def retried(self) -> bool:
        """Whether another attempt may go otherwise (a forbidden host stays forbidden while
        the settings stay as they are, a deleted alert stays deleted: not retried)."""
        return self.kind not in ("delivered", "forbidden", "dropped")

    @property
    def text(self) -> str:
        if self.status is not None:
            return f"status {self.status}"
        return _TEXT[self.kind]


class NotHTTP(Exception):
    """The peer's first line is not an HTTP status line."""


async def post(
    destination: Destination,
    body: bytes,
    headers: dict[str, str],
    policy: DestinationPolicy,
    deadline_seconds: float,
    tls: ssl.SSLContext | None = None,
) -> Outcome:
    """POST ``body`` to ``destination`` once (module docstring)."""
    try:
        async with asyncio.timeout(deadline_seconds):
            address = await _allowed_address(destination, policy)
            if address is None:
                return Outcome("forbidden")
            status = await _exchange(destination, address, body, headers, tls)
    except TimeoutError:
        return Outcome("timeout")
    except socket.gaierror:
        return Outcome("dns")
    except ssl.SSLError:  # CertificateError is one
        return Outcome("tls")
    except ConnectionRefusedError:
        return Outcome("refused")
    except (ConnectionError, asyncio.IncompleteReadError):
        return Outcome("reset")
    except (NotHTTP, asyncio.LimitOverrunError, ValueError):
        return Outcome("not-http")
    except OSError:
        return Outcome("unreachable")
    if 200 <= status < 300:
        return Outcome("delivered", status)
    return Outcome("status", status)


async def _allowed_address(destination: Destination, policy: DestinationPolicy) -> IPAddress | None:
    """The first address ``destination``'s host resolves to that the policy allows."""
    allowed = await policy.allowed_addresses(destination.host, destination.port)
    return allowed[0] if allowed else None


async def _exchange(
    destination: Destination,
    address: IPAddress,
    body: bytes,
    headers: dict[str, str],
    tls: ssl.SSLContext | None,
) -> int:
    """Connect to ``address``, send the request, and the final status code."""
    secure = destination.scheme == "https"
    reader, writer = await asyncio.open_connection(
        str(address),
        destination.port,
        ssl=(tls or ssl.create_default_context()) if secure else None,
        server_hostname=destination.host if secure else None,
        limit=STATUS_LINE_LIMIT,
    )
    try:
        head = [
            f"POST {destination.target} HTTP/1.1",
            f"Host: {destination.authority}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        status = await _status(reader)
        while 100 <= status < 200:  # interim answers (100 Continue, 103 Early Hints)
            for _ in range(INTERIM_LINES_LIMIT):
                if (await reader.readuntil(b"\n")).strip() == b"":
                    break
            else:
                raise NotHTTP
            status = await _status(reader)
        return status
    finally:
        writer.transport.abort()  # nothing more is read: no graceful close to wait for


async def _status(reader: asyncio.StreamReader) -> int:
    line = await reader.readuntil(b"\n")
    match = _STATUS_LINE.fullmatch(line)
    if match is None:
        raise NotHTTP
    return int(match.group(1))
