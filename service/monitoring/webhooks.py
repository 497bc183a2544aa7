"""Webhooks: one attempt at delivering an alert event, as a receiver cannot turn it against
the service.

**Where.** ``service.monitoring.destinations``: URLs normalised when an alert is created, and
by default no loopback, private, link-local or other non-global address, judged on the
address connected to.

**Signed.** ``service.monitoring.signing``: the Standard Webhooks headers, under every secret
of the alert in force.

**Bounded.** Each attempt is one ``http_post.post``: its own connection, one deadline
(``SIFT_ALERT_TIMEOUT_SECONDS``) for everything, the status line read and nothing else, an
outcome in Sift's own words. At most ``PER_DESTINATION`` attempts run at once per destination
and ``PER_SELECTOR`` per selector; the others wait their turn without their deadline running,
so a receiver that hangs delays its own events only.

When attempts are made, retried and recorded, and why no event is lost: ``outbox``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from service.monitoring.destinations import DestinationPolicy, parse_destination
from service.monitoring.http_post import Outcome, post
from service.monitoring.signing import signed_headers

#: Attempts in flight at once to one destination (scheme, host, port), and for one selector.
PER_DESTINATION = 4
PER_SELECTOR = 8


class Slots:
    """At most ``limit`` holders at once per key; a key is forgotten when nobody holds or
    waits for it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._keys: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        semaphore, users = self._keys.get(key) or (asyncio.Semaphore(self.limit), 0)
        self._keys[key] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = self._keys[key]
            if users == 1:
                del self._keys[key]
            else:
                self._keys[key] = (semaphore, users - 1)


class Webhooks:
    """Attempts at delivering events, bounded per destination and per selector."""

    def __init__(self, policy: DestinationPolicy, timeout_seconds: float) -> None:
        self.policy = policy
        self.timeout_seconds = timeout_seconds
        self._destinations = Slots(PER_DESTINATION)
        self._selectors = Slots(PER_SELECTOR)

    async def attempt(
        self,
        selector: str,
        url: str,
        signing_secrets: Sequence[str],
        event_id: str,
        body: bytes,
    ) -> Outcome:
        """POST ``body`` (event ``event_id``'s) to ``url`` once, signed under
        ``signing_secrets``, when a slot of its selector and of its destination is free
        (module docstring)."""
        destination = parse_destination(url)
        where = f"{destination.scheme}://{destination.host}:{destination.port}"
        async with self._selectors.slot(selector), self._destinations.slot(where):
            headers = signed_headers(signing_secrets, event_id, body, time.time())
            return await post(destination, body, headers, self.policy, self.timeout_seconds)
