"""The outbox: alert events delivered at least once, whichever process dies.

A crossing's event is put in its selector's outbox by the script that claims the crossing
(``claim_crossing.lua``), due at once, in the same step: from then on it is Redis's, not a
process's. Every process runs one ``Outbox`` that delivers what is due:

1. **Marks.** The selectors whose outbox may hold something due are marked in one sorted set
   (``{prefix}:outboxes``), each scored by when to look at it: the process that claimed a
   crossing marks its selector at once and wakes its own outbox; a retry marks it for when it
   is due. A process's first pass, and one every ``FULL_PASS_SECONDS``, looks at every
   selector's outbox (what a crash, or Redis failing between a claim and its mark, left
   unmarked: delivered late, never lost).
2. **Claims.** For a marked selector, ``claim_deliveries.lua`` takes what is due (no more than
   the selector has free slots here) and makes each event due again after a lease: an attempt
   that never settles, because its process died, is attempted again by whoever comes next,
   here after a restart or in another replica. Each claim counts as an attempt.
3. **Attempts.** ``Webhooks.attempt``, bounded per destination and per selector, one deadline;
   the body as the alert's kind has it (``formats``: the event, or an Alertmanager alert).
4. **Settling.** ``settle_delivery.lua`` records the outcome with the event and takes it out
   of the outbox (delivered, given up after ``SIFT_ALERT_ATTEMPTS``, or a destination the
   settings forbid), or sets it due after ``SIFT_ALERT_BACKOFF_SECONDS`` doubling.

A receiver may so get an event twice (a process killed after the receiver answered, before
the outcome was recorded): receivers drop the ``webhook-id`` they have seen. An event given up
stays listed as failed; ``Alerts.redeliver`` puts it back in the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from service.config import Settings
from service.errors import Unavailable
from service.metrics import Metrics
from service.monitoring import formats
from service.monitoring.http_post import Outcome
from service.monitoring.webhooks import PER_SELECTOR, Webhooks
from service.store.monitoring_records import ClaimedDelivery
from service.store.redis_store import SelectorStore

log = logging.getLogger("sift.alerts")

#: How often the outbox looks at its marks when nothing woke it.
POLL_SECONDS = 1.0
#: Marks read per pass.
MARKS_PER_PASS = 100
#: How often every selector's outbox is looked at, marked or not (one ZCARD each, pipelined).
FULL_PASS_SECONDS = 300.0


def now_ms() -> float:
    return time.time() * 1000.0


class Outbox:
    """This process's deliveries from the outbox (module docstring)."""

    def __init__(
        self, store: SelectorStore, webhooks: Webhooks, settings: Settings, metrics: Metrics
    ) -> None:
        self.store = store
        self.webhooks = webhooks
        self.settings = settings
        self.metrics = metrics
        #: An attempt may take its deadline, and wait for a slot as long again.
        self.lease_ms = int((2 * settings.alert_timeout_seconds + 5.0) * 1000)
        self._wake = asyncio.Event()
        self._attempts: set[asyncio.Task[None]] = set()
        #: Events being attempted here, per selector (a lease that ran out while an attempt
        #: waited for its slot may be claimed again: not attempted twice at once here).
        self._in_flight: dict[str, set[str]] = {}
        self._closing = False
        self._running: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run ``run_forever`` in the background until ``close``."""
        self._running = asyncio.create_task(self.run_forever(), name="alert-outbox")

    async def queued(self, name: str) -> None:
        """An event of ``name`` was just put in its outbox: mark it and look at once."""
        await self.store.monitoring.mark_outbox(name, now_ms())
        self._wake.set()

    async def run_forever(self) -> None:
        """Deliver what is due until ``close`` (module docstring)."""
        unavailable = False
        full_pass_at = 0.0
        while not self._closing:
            try:
                if time.monotonic() >= full_pass_at:
                    now = now_ms()
                    for name in await self.store.monitoring.names_with_outbox():
                        await self.store.monitoring.mark_outbox(name, now)
                    full_pass_at = time.monotonic() + FULL_PASS_SECONDS
                for name, score in await self.store.monitoring.due_outboxes(
                    now_ms(), MARKS_PER_PASS
                ):
                    await self._claim(name, score)
                if unavailable:
                    log.warning("alert deliveries resumed: Redis answers again")
                unavailable = False
            except Unavailable as exc:
                if not unavailable:
                    log.warning("alert deliveries paused: %s", exc.detail)
                unavailable = True
            except Exception:
                log.exception("the alert outbox failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            self._wake.clear()

    async def _claim(self, name: str, score: float) -> None:
        in_flight = self._in_flight.setdefault(name, set())
        free = PER_SELECTOR - len(in_flight)
        if free <= 0:
            return  # its attempts wake the outbox as they settle
        gone, claimed, next_due = await self.store.monitoring.claim_deliveries(
            name, self.lease_ms, free
        )
        if gone:
            await self.store.monitoring.remark_outbox(name, score, None)
            return
        for delivery in claimed:
            if delivery.event_id in in_flight:
                continue
            in_flight.add(delivery.event_id)
            task = asyncio.create_task(self._attempt(name, delivery), name="alert-delivery")
            self._attempts.add(task)
            task.add_done_callback(self._attempts.discard)
        if not in_flight:
            self._in_flight.pop(name, None)
        await self.store.monitoring.remark_outbox(name, score, next_due)

    async def _attempt(self, name: str, delivery: ClaimedDelivery) -> None:
        try:
            outcome = await self._deliver(name, delivery)
            done = not outcome.retried or delivery.attempts >= self.settings.alert_attempts
            status = delivery_status(outcome, delivery.attempts, done)
            backoff = self.settings.alert_backoff_seconds * 2 ** (delivery.attempts - 1)
            due = None if done else now_ms() + backoff * 1000
            await self.store.monitoring.settle_delivery(name, delivery.event_id, status, due)
            self.metrics.labelled(self.metrics.alert_deliveries, status["status"]).inc()
            if done and not outcome.delivered:
                self.metrics.alert_events_failed.inc()
                log.warning(
                    "event %s of selector %s: not delivered after %d attempts (%s)",
                    delivery.event_id,
                    name,
                    delivery.attempts,
                    outcome.text,
                )
            if due is not None:
                await self.store.monitoring.mark_outbox(name, due)
                asyncio.get_running_loop().call_later(backoff, self._wake.set)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the lease runs out and the event is attempted again
            detail = exc.detail if isinstance(exc, Unavailable) else type(exc).__name__
            log.warning("event %s of selector %s: attempt not settled (%s)", delivery, name, detail)
        finally:
            in_flight = self._in_flight.get(name)
            if in_flight is not None:
                in_flight.discard(delivery.event_id)
                if not in_flight:
                    self._in_flight.pop(name, None)
            self._wake.set()  # a slot is free: what waited for it may go

    async def _deliver(self, name: str, delivery: ClaimedDelivery) -> Outcome:
        alert = await self.store.monitoring.alert_or_none(name, delivery.alert_id)
        if alert is None:
            return Outcome("dropped")
        url, body = formats.delivery(
            alert.kind, alert.url, delivery.raw, delivery.event, self.store.prefix
        )
        return await self.webhooks.attempt(
            name, url, alert.signing_secrets(time.time()), delivery.event_id, body
        )

    async def close(self, timeout: float) -> None:
        """Stop attempting (what is not settled is attempted again after its lease, here
        after a restart or by another replica)."""
        self._closing = True
        self._wake.set()
        tasks = list(self._attempts)
        if self._running is not None:
            tasks.append(self._running)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)


def delivery_status(outcome: Outcome, attempts: int, done: bool) -> dict[str, Any]:
    """What an event's delivery record says after an attempt."""
    return {
        "status": "delivered" if outcome.delivered else "failed" if done else "pending",
        "attempts": attempts,
        "outcome": outcome.kind,
        "last_status": outcome.status,
        "last_error": None if outcome.delivered else outcome.text,
        "updated_at": time.time(),
    }
