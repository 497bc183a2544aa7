"""Checkpoints of the states this process holds: whether one is due (by ``checkpoint_policy``),
what it covers, writing it in the background while the drain goes on or at the drain's end,
the look planned for when one will be due by age, and the checkpoints readers asked for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from service.applier.basis import Basis
from service.applier.checkpoint_policy import Thresholds, Trigger, checkpoint_due, due_by_age_at
from service.applier.state import CheckpointWork, HeldState
from service.errors import NotFound, Unavailable
from service.store.codec import cut_state
from service.store.records import Lease

log = logging.getLogger("sift.applier")


class Checkpointer:
    """Checkpoints written, and planned (see the module)."""

    def __init__(self, basis: Basis, kick: Callable[[str], None]) -> None:
        self.store = basis.store
        self.metrics = basis.metrics
        self._thresholds = Thresholds.of(basis.settings)
        self._running = basis.running
        # A drain of a selector whose checkpoint is due by age (``Scheduler.kick``).
        self._kick = kick
        # A checkpoint being written while the applier goes on, per selector.
        self._writing: dict[str, asyncio.Task[None]] = {}
        # Selectors whose state will be due for a checkpoint by age, when nothing else comes.
        self._timers: dict[str, asyncio.TimerHandle] = {}
        #: Selectors whose drain here should stop lingering and checkpoint now (a reader
        #: asked: ``Waits.checkpoint_now``).
        self.wanted: set[str] = set()

    def forget(self, name: str) -> None:
        """No checkpoint of ``name`` is planned any more."""
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def stop(self) -> list[asyncio.Task[None]]:
        """No more planned checkpoints; the checkpoints being written (for shutdown to end)."""
        for timer in self._timers.values():
            timer.cancel()
        return list(self._writing.values())

    def due(self, held: HeldState, force: bool = False, idle: bool = False) -> Trigger | None:
        """What makes a checkpoint of ``held`` due now (None: not due): ``checkpoint_due``."""
        return checkpoint_due(
            held.checkpoint_facts(force, idle), self._thresholds, time.monotonic()
        )

    def in_background(self, held: HeldState, lease: Lease) -> None:
        """Start writing a checkpoint if one is due and none is being written: the state of a
        committed version never changes, so the applier goes on meanwhile."""
        name = held.meta.name
        running = self._writing.get(name)
        if running is not None and not running.done():
            return
        trigger = self.due(held)
        if trigger is None:
            return
        work = held.checkpoint_work(trigger)
        self._writing[name] = asyncio.create_task(
            self._write_logged(held, lease, work), name=f"checkpoint:{name}"
        )

    async def settle(self, held: HeldState, lease: Lease, force: bool) -> None:
        """At the end of a drain (the lease still held): let a checkpoint being written finish,
        write one if due now, or else plan a look when one will be due by age."""
        name = held.meta.name
        running = self._writing.pop(name, None)
        if running is not None:
            await running
        trigger = self.due(held, force, idle=True)
        if trigger is not None:
            await self._write(held, lease, held.checkpoint_work(trigger))
        elif held.dirty_since is not None and not self._running.closing:
            self._plan(name, due_by_age_at(held.last_commit, self._thresholds))

    def _plan(self, name: str, when: float) -> None:
        """Drain ``name`` again at monotonic time ``when``, when its checkpoint is due by age
        even if no chunk comes (a drain with nothing pending only checkpoints)."""
        previous = self._timers.pop(name, None)
        if previous is not None:
            previous.cancel()
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._timers.pop(name, None)
            self._kick(name)

        delay = max(when - time.monotonic(), 0.0) + 0.01
        self._timers[name] = loop.call_later(delay, due)

    async def _write_logged(self, held: HeldState, lease: Lease, work: CheckpointWork) -> None:
        try:
            await self._write(held, lease, work)
        except (Unavailable, NotFound) as exc:
            log.info(
                "selector %s: checkpoint of version %d not written: %s",
                held.meta.name,
                work.version,
                exc,
            )
        except Exception:
            log.exception(
                "selector %s: checkpoint of version %d failed", held.meta.name, work.version
            )

    async def _release_to_stream(self, held: HeldState, cursor: str) -> None:
        """Tell the stream a selector is attached to that its checkpoint now covers the log
        through ``cursor`` (the stream trims up to the lowest such cursor of its selectors).
        Best effort: a later checkpoint says it again, and until then the log is only held a
        little longer."""
        meta = held.meta
        if meta.stream is None:
            return
        try:
            await self.store.streams.release(meta.stream, meta.name, meta.incarnation, cursor)
        except Unavailable as exc:
            log.info(
                "selector %s: stream %s not told of its checkpoint: %s", meta.name, meta.stream, exc
            )

    async def _write(self, held: HeldState, lease: Lease, work: CheckpointWork) -> None:
        """Encode ``work``'s state (off the event loop) and store it as the checkpoint."""
        started = time.perf_counter()
        pieces = await asyncio.to_thread(lambda: cut_state(work.state))
        point = await self.store.checkpoints.checkpoint(
            lease, work.version, work.cursor, work.items_seen, pieces
        )
        if point is None:
            return
        await self._release_to_stream(held, point.cursor)
        self.metrics.checkpoints.labels(work.trigger).inc()
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - started)
        if held.checkpoint_version < work.version:  # else a newer one was made meanwhile
            held.checkpoint_version = work.version
            # What accrued while the checkpoint was written is still uncheckpointed.
            held.log_bytes -= work.log_bytes
            held.compute_seconds -= work.compute_seconds
            held.dirty_since = time.monotonic() if held.head.version > work.version else None
