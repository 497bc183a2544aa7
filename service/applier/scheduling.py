"""Scheduling: when this process drains a selector. Kicks (and kicks deferred while another
replica holds the lease, or until that lease expires), back-off after failed drains, attempts
taken back when they were no fault of their entry (forgiveness), letting go of a deleted
selector, shutdown, and the sweeper that kicks what nobody waits for.

The drain itself is ``drain.DrainLoop.drain``, which the scheduler is given to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Collection

from service.applier.basis import Basis
from service.applier.state import Backoff
from service.applier.updates import StateUnreadable, UpdateFailed
from service.errors import NotFound, StaleApplier, Unavailable

log = logging.getLogger("sift.applier")

#: Longest pause between two drains of a selector whose drains keep failing.
MAX_BACKOFF_SECONDS = 60.0
#: Longest pause after a drain that Redis being away (or slow) stopped: short, so that
#: whatever waits is applied moments after Redis answers again.
MAX_UNAVAILABLE_BACKOFF_SECONDS = 2.0
#: How long a process keeps trying to take back an attempt that was no fault of its entry.
FORGIVE_SECONDS = 60.0
#: Pause between two tries to take back attempts while Redis does not answer.
FORGIVE_RETRY_SECONDS = 0.25
#: How often the sweeper lets go of states of selectors deleted through another replica.
FORGET_DELETED_EVERY_SWEEPS = 10
#: After this process found a selector's lease held by another replica, kicks within this long
#: make one attempt at its end instead of one each: the holder applies what is appended
#: meanwhile (it looks once more before it lets go), and a replica serving a stream of chunks
#: to a selector another one applies tried to take the lease twice per chunk otherwise.
LEASE_BUSY_SECONDS = 0.05


#: Failures that say nothing about the entry an attempt was on: Redis away or slow, the lease
#: lost (to a pause, to another replica, to a delete), the selector gone, a damaged stored
#: state, this process shutting down.
NOT_THE_ENTRYS_FAULT = (
    Unavailable,
    StaleApplier,
    NotFound,
    StateUnreadable,
    asyncio.CancelledError,
)


class Scheduler:
    """Kicks, back-off, forgiveness and the sweeper (see the module)."""

    def __init__(
        self,
        basis: Basis,
        drain: Callable[[str], Awaitable[None]],
        forget_selector: Callable[[str], None],
    ) -> None:
        self.store, self.settings, self.metrics = basis.store, basis.settings, basis.metrics
        self._running = basis.running
        # What a kick starts (``DrainLoop.drain``), how a selector found gone is let go of by
        # every part (``Applier.forget``), and the selectors whose state is held here.
        self._drain = drain
        self._forget_selector = forget_selector
        self._held_names = basis.held.keys
        # Selectors whose last drain failed, and when to try again.
        self._backoff: dict[str, Backoff] = {}
        # Lease holders of this process whose last attempt on a selector's first pending entry
        # is to be taken back (``NOT_THE_ENTRYS_FAULT``), per selector; sent with the next
        # ``take`` of the selector and by ``_forgive_soon``, whichever reaches Redis first.
        self._unproven: dict[str, set[str]] = {}
        self._forgiving: dict[str, asyncio.Task[None]] = {}
        # Selectors to look at again when another applier's lease expires.
        self._retries: dict[str, asyncio.TimerHandle] = {}
        # Selectors whose lease another replica held a moment ago, and the kick deferred until
        # then (``LEASE_BUSY_SECONDS``).
        self._lease_busy: dict[str, float] = {}
        self._deferred_kicks: dict[str, asyncio.TimerHandle] = {}

    def kick(self, name: str, incarnation: str | None = None) -> None:
        """Start draining ``name`` in the background unless this process already is (or is
        backing off after a failure).

        With the ``incarnation`` a caller knows (it just appended to it), a drain or a backoff
        of an earlier incarnation of the name does not hold the new one up: the old drain can
        no longer read or commit anything, and stops at its next look.
        """
        if self._running.closing:
            return
        busy_until = self._lease_busy.get(name)
        if busy_until is not None:
            wait = busy_until - time.monotonic()
            if wait > 0:
                if name not in self._deferred_kicks:
                    self._deferred_kicks[name] = asyncio.get_running_loop().call_later(
                        wait, self._deferred_kick, name, incarnation
                    )
                return
            del self._lease_busy[name]
        running = self._running.live(name)
        if running is not None and (
            incarnation is None or running.incarnation in (None, incarnation)
        ):
            return
        backoff = self._backoff.get(name)
        if backoff is not None:
            if incarnation is not None and backoff.incarnation not in (None, incarnation):
                del self._backoff[name]
            elif time.monotonic() < backoff.retry_at:
                return
        task = asyncio.create_task(self._drain_logged(name), name=f"drain:{name}")
        self._running.start(name, task)

    def _deferred_kick(self, name: str, incarnation: str | None) -> None:
        self._deferred_kicks.pop(name, None)
        self.kick(name, incarnation)

    def forget(self, name: str) -> None:
        """Let go of the scheduling of ``name``: its backoff, its deferred kick."""
        self._backoff.pop(name, None)
        self._lease_busy.pop(name, None)
        timer = self._deferred_kicks.pop(name, None)
        if timer is not None:
            timer.cancel()

    def stop(self) -> None:
        """No more kicks: the timers of deferred kicks and of looks at leases stop."""
        for handle in [*self._retries.values(), *self._deferred_kicks.values()]:
            handle.cancel()

    async def forgive_all(self) -> None:
        """At shutdown, once the drains stopped: attempts cut short by the shutdown are no
        fault of their entries: say so once."""
        for forgiving in self._forgiving.values():
            forgiving.cancel()
        for name, holders in list(self._unproven.items()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.log.forgive_attempts(name, sorted(holders)), 1.0)

    async def _drain_logged(self, name: str) -> None:
        try:
            await self._drain_once(name)
        finally:
            if self._running.is_current(name):
                self._running.watching(name)

    async def _drain_once(self, name: str) -> None:
        try:
            await self._drain(name)
        except NotFound:
            if self._running.is_current(name):
                self._forget_selector(name)
        except StaleApplier as exc:
            # Not a failure: another applier holds or held the lease (a replica took over, the
            # lease ran out while Redis was paused, the name was deleted). Whoever kicks next
            # finds the lease taken (and looks again when it expires) or free.
            log.info("drain of %s stopped: %s", name, exc.detail)
            self._backoff.pop(name, None)
        except Unavailable as exc:
            self._back_off(name, exc.detail, logging.INFO, MAX_UNAVAILABLE_BACKOFF_SECONDS)
        except UpdateFailed as exc:
            self.metrics.apply_failures.labels("transient").inc()
            self._back_off(name, f"update failed, will retry: {exc.reason}", logging.WARNING)
        except StateUnreadable as exc:
            self.metrics.apply_failures.labels("state").inc()
            self._back_off(name, f"stored state cannot be rebuilt: {exc}", logging.ERROR)
        except Exception:
            self.metrics.apply_failures.labels("internal").inc()
            log.exception("drain of %s failed", name)
            self._back_off(name, "internal error (logged above)", logging.DEBUG)
        else:
            self._backoff.pop(name, None)

    def _back_off(
        self, name: str, why: str, level: int, longest: float = MAX_BACKOFF_SECONDS
    ) -> None:
        """Wait 1, 2, 4 ... up to ``longest`` seconds before draining ``name`` again (a kick
        for a newer incarnation does not wait), and say so once."""
        running = self._running.get(name)
        incarnation = running.incarnation if running is not None else None
        failures = self._backoff[name].failures if name in self._backoff else 0
        delay = min(2.0**failures, longest)
        self._backoff[name] = Backoff(time.monotonic() + delay, failures + 1, incarnation)
        log.log(level, "drain of %s stopped (%s); next try in %.0f s", name, why, delay)

    async def try_again_when_free(self, name: str) -> None:
        """Another applier holds the lease: look again the moment it would expire.

        If that applier died, its work is taken over as soon as the lease allows, instead of
        at the next sweep; if it is alive, the second look finds nothing to do or a fresh
        lease, at the cost of one Redis call.
        """
        if name in self._retries:
            return
        remaining_ms = await self.store.leases.lease_ttl_ms(name)
        if remaining_ms <= 0:
            return
        loop = asyncio.get_running_loop()

        def retry() -> None:
            self._retries.pop(name, None)
            self.kick(name)

        self._retries[name] = loop.call_later(remaining_ms / 1000 + 0.01, retry)

    def held_elsewhere(self, name: str) -> None:
        """Another replica holds the lease of ``name`` now: kicks within
        ``LEASE_BUSY_SECONDS`` make one attempt at its end."""
        self._lease_busy[name] = time.monotonic() + LEASE_BUSY_SECONDS

    def unproven(self, name: str, holder: str) -> None:
        """The last attempt of ``holder`` on the first pending entry of ``name`` ended for a
        reason that is no fault of the entry (``NOT_THE_ENTRYS_FAULT``): take it back with the
        next ``take``, or as soon as Redis answers."""
        self._unproven.setdefault(name, set()).add(holder)
        self._forgive_soon(name)

    def unproven_holders(self, name: str) -> tuple[str, ...]:
        """The holders whose attempts on ``name`` are to be taken back, in order."""
        return tuple(sorted(self._unproven.get(name, ())))

    def _forgive_soon(self, name: str) -> None:
        """Deliver the attempts of ``name`` to take back as soon as Redis answers (bounded by
        ``FORGIVE_SECONDS``), unless a ``take`` of this process carries them first."""
        running = self._forgiving.get(name)
        if self._running.closing or (running is not None and not running.done()):
            return
        self._forgiving[name] = asyncio.create_task(
            self._deliver_forgiveness(name), name=f"forgive:{name}"
        )

    async def _deliver_forgiveness(self, name: str) -> None:
        deadline = time.monotonic() + FORGIVE_SECONDS
        while name in self._unproven and time.monotonic() < deadline:
            holders = sorted(self._unproven[name])
            try:
                await self.store.log.forgive_attempts(name, holders)
            except Unavailable:
                await asyncio.sleep(FORGIVE_RETRY_SECONDS)
                continue
            except Exception:
                log.exception("selector %s: taking back attempts failed", name)
                return
            self.forgiven(name, holders)

    def forgiven(self, name: str, holders: Collection[str]) -> None:
        left = self._unproven.get(name, set()) - set(holders)
        if left:
            self._unproven[name] = left
        else:
            self._unproven.pop(name, None)

    async def sweep_forever(self) -> None:
        """Apply entries that nobody is waiting for (``wait=false``, crashed appliers), and let
        go of the states of selectors deleted elsewhere.

        Every append marks its selector in the pending set; a sweep reads the marks, not every
        selector, so that an idle service costs nothing however many selectors it holds.

        Runs until ``close``. The flag matters, not only the cancellation: a cancellation that
        lands inside a Redis call may come back as a connection error, which is caught here.
        """
        unavailable = False  # say when Redis goes away and comes back, not every sweep
        sweeps = 0
        while not self._running.closing:
            try:
                # The first sweep reads every selector (what a crash left before the pending
                # marks existed, or where marking failed); later ones only the marked.
                if sweeps == 0:
                    pending = await self.store.log.names_with_pending()
                else:
                    pending = await self.store.log.names_marked_pending()
                for name in pending:
                    self.kick(name)
                sweeps += 1
                if sweeps % FORGET_DELETED_EVERY_SWEEPS == 0:
                    for name in await self.store.registry.missing(self._held_names()):
                        self._forget_selector(name)
                if unavailable:
                    log.warning("sweeps resumed: Redis answers again")
                unavailable = False
            except Unavailable as exc:
                if not unavailable:
                    log.warning("sweeps paused: %s", exc.detail)
                unavailable = True
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self.settings.sweep_interval_seconds)
