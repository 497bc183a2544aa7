"""Webhooks: where an alert may send its events, how they are signed, and their delivery.

**Where.** An alert's URL is ``http`` or ``https``, at most ``MAX_URL_LENGTH`` characters, with
a host and without credentials. ``SIFT_ALERT_HOSTS`` (comma-separated host names, ``*.`` for a
domain and its subdomains) limits the hosts; empty (the default), any host is allowed. That is
a decision about server-side request forgery: creating an alert takes the admin scope, which
may already do anything to any selector; a delivery sends only the event (never anything the
receiver answered back to whoever created the alert: its status code is all that is kept), and
follows no redirect. Set ``SIFT_ALERT_HOSTS`` where the service can reach hosts that its admins
must not (cloud metadata endpoints, internal services).

**Signed.** Every delivery carries ``Sift-Signature: t=<unix seconds>,v1=<hex>``, where ``v1``
is HMAC-SHA256 under the alert's secret of ``"<t>." + body`` (the bytes sent), and
``Sift-Event: <event id>``. A receiver recomputes ``v1`` from the raw body, compares in
constant time, refuses a ``t`` older than a few minutes (a replayed request), and drops an
event id it has seen (``verify``, and docs/stability-and-drift.md, do exactly that).

**Delivered.** By the process that claimed the crossing (``claim_crossing.lua``), in a
background task: never in a commit's way. A 2xx answer is a delivery; anything else (an error
status, a redirect, a timeout, a refused connection) is retried after ``SIFT_ALERT_BACKOFF_SECONDS``
doubling, up to ``SIFT_ALERT_ATTEMPTS`` attempts; every attempt is recorded with the event.
The same event (the same id) is sent on every attempt, so a receiver that answered too late
for a retry not to be sent recognises the repeat. A process that dies while delivering does
not hand the event on: at most one process delivers each crossing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from service.errors import InvalidInput

log = logging.getLogger("sift.alerts")

#: The longest URL an alert may have.
MAX_URL_LENGTH = 2048
#: A receiver should refuse a signature older than this (``verify``).
SIGNATURE_TOLERANCE_SECONDS = 300
SIGNATURE_HEADER = "Sift-Signature"
EVENT_HEADER = "Sift-Event"


def allowed_hosts(setting: str) -> list[str]:
    """``SIFT_ALERT_HOSTS`` as a list (empty: any host)."""
    return [host.strip().lower() for host in setting.split(",") if host.strip()]


def check_url(url: object, hosts: list[str]) -> str:
    """``url`` if an alert may send to it (module docstring), else InvalidInput saying why."""
    if not isinstance(url, str) or not url:
        raise InvalidInput(f"url must be an http or https URL; got {url!r}")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput(f"url must be at most {MAX_URL_LENGTH} characters; got {len(url)}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"url is not a valid URL ({exc}); got {url[:200]!r}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(f"url must use http or https; got {parts.scheme or 'no scheme'!r}")
    host = (parts.hostname or "").lower()
    if not host:
        raise InvalidInput(f"url must name a host; got {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("url must not carry credentials (user:password@): alerts are listed")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InvalidInput("url must not contain spaces or control characters")
    if hosts and not host_allowed(host, hosts):
        raise InvalidInput(
            f"alerts may send to {', '.join(hosts)} (SIFT_ALERT_HOSTS); got host {host!r}"
            + (f" port {port}" if port else "")
        )
    return url


def host_allowed(host: str, hosts: list[str]) -> bool:
    """Whether ``host`` is one of ``hosts`` (``*.example.com``: the domain and below)."""
    for allowed in hosts:
        if allowed.startswith("*."):
            domain = allowed[2:]
            if host == domain or host.endswith("." + domain):
                return True
        elif host == allowed:
            return True
    return False


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``v1``: HMAC-SHA256 of ``"<timestamp>." + body`` under ``secret``, in hex."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, event_id: str, body: bytes, now: float) -> dict[str, str]:
    timestamp = int(now)
    return {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: f"t={timestamp},v1={signature(secret, timestamp, body)}",
        EVENT_HEADER: event_id,
        "User-Agent": "sift-alerts",
    }


def verify(secret: str, header: str, body: bytes, now: float) -> bool:
    """What a receiver does with a delivery: the signature is this body's under ``secret``,
    and no older than ``SIGNATURE_TOLERANCE_SECONDS``."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > SIGNATURE_TOLERANCE_SECONDS:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), fields.get("v1", ""))


#: Records how a delivery went: ``(event id, status)``.
Recorder = Callable[[str, dict[str, Any]], Awaitable[None]]


class Webhooks:
    """Deliveries in flight in this process, each a background task (``deliver``)."""

    def __init__(
        self, hosts: list[str], attempts: int, backoff_seconds: float, timeout_seconds: float
    ) -> None:
        self.hosts = hosts
        self.attempts = attempts
        self.backoff_seconds = backoff_seconds
        self.timeout_seconds = timeout_seconds
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None

    def deliver(self, url: str, secret: str, event: dict[str, Any], record: Recorder) -> None:
        """Send ``event`` to ``url`` in the background, retrying (module docstring)."""
        task = asyncio.create_task(self._deliver(url, secret, event, record), name="webhook")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def _deliver(
        self, url: str, secret: str, event: dict[str, Any], record: Recorder
    ) -> None:
        event_id = str(event["id"])
        body = orjson.dumps(event)
        status: dict[str, Any] = {"status": "pending", "attempts": 0}
        for attempt in range(1, self.attempts + 1):
            outcome: dict[str, Any]
            refused = False
            try:
                check_url(url, self.hosts)  # the setting may have changed since the alert
                answer = await self._http().post(
                    url, content=body, headers=signed_headers(secret, event_id, body, time.time())
                )
                outcome = {"last_status": answer.status_code, "last_error": None}
                delivered = 200 <= answer.status_code < 300
            except asyncio.CancelledError:
                raise
            except InvalidInput as exc:  # a host no longer allowed: not retried
                outcome, delivered, refused = (
                    {"last_status": None, "last_error": exc.detail},
                    False,
                    True,
                )
            except Exception as exc:  # a refused connection, a timeout, a bad answer
                outcome = {"last_status": None, "last_error": f"{type(exc).__name__}: {exc}"[:300]}
                delivered = False
            done = delivered or refused or attempt >= self.attempts
            status = {
                "status": "delivered" if delivered else "failed" if done else "pending",
                "attempts": attempt,
                **outcome,
                "updated_at": time.time(),
            }
            try:
                await record(event_id, status)
            except Exception:  # the status is best effort; the delivery goes on
                log.warning("event %s: its delivery status could not be recorded", event_id)
            if done:
                if not delivered:
                    log.warning(
                        "event %s: not delivered to %s after %d attempts (%s)",
                        event_id,
                        url,
                        attempt,
                        outcome["last_error"] or f"status {outcome['last_status']}",
                    )
                return
            await asyncio.sleep(self.backoff_seconds * 2 ** (attempt - 1))

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.timeout_seconds, follow_redirects=False, trust_env=False
            )
        return self._client

    async def close(self, timeout: float) -> None:
        """Stop every delivery in flight (what is not delivered by now is not: at most once)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
