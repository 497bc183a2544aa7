"""Checkpoints of the states this process holds: whether one is due (by ``checkpoint_policy``),
what it covers, writing it in the background while the drain goes on or at the drain's end,
and the look planned for when one will be due by age.
"""

from __future__ import annotations

import asyncio
import time

from service.applier.checkpoint_policy import (
    CheckpointFacts,
    Thresholds,
    Trigger,
    checkpoint_due,
    due_by_age_at,
)
from service.applier.core import log
from service.applier.scheduling import Scheduling
from service.applier.state import CheckpointWork, Hot
from service.errors import NotFound, Unavailable
from service.store.codec import cut_fields, encode_state
from service.store.records import Lease


class Checkpoints(Scheduling):
    """Checkpoints written, and planned (see the module)."""

    def _checkpoint_due(self, hot: Hot, force: bool = False, idle: bool = False) -> Trigger | None:
        """What makes a checkpoint of ``hot`` due now (None: not due): ``checkpoint_due``."""
        facts = CheckpointFacts(
            version=hot.head.version,
            checkpoint_version=hot.checkpoint_version,
            compute_seconds=hot.compute_seconds,
            log_bytes=hot.log_bytes,
            state_bytes=hot.state_bytes,
            last_commit=hot.last_commit,
            force=force,
            idle=idle,
        )
        return checkpoint_due(facts, Thresholds.of(self.settings), time.monotonic())

    def _work(self, hot: Hot, trigger: Trigger) -> CheckpointWork:
        return CheckpointWork(
            version=hot.head.version,
            cursor=hot.head.cursor,
            items_seen=hot.head.items_seen,
            state=hot.state,
            log_bytes=hot.log_bytes,
            compute_seconds=hot.compute_seconds,
            trigger=trigger,
        )

    def _checkpoint_in_background(self, hot: Hot, lease: Lease) -> None:
        """Start writing a checkpoint if one is due and none is being written: the state of a
        committed version never changes, so the applier goes on meanwhile."""
        name = hot.meta.name
        running = self._checkpointing.get(name)
        if running is not None and not running.done():
            return
        trigger = self._checkpoint_due(hot)
        if trigger is None:
            return
        work = self._work(hot, trigger)
        self._checkpointing[name] = asyncio.create_task(
            self._write_checkpoint_logged(hot, lease, work), name=f"checkpoint:{name}"
        )

    async def _settle_checkpoint(self, hot: Hot, lease: Lease, force: bool) -> None:
        """At the end of a drain (the lease still held): let a checkpoint being written finish,
        write one if due now, or else plan a look when one will be due by age."""
        name = hot.meta.name
        running = self._checkpointing.pop(name, None)
        if running is not None:
            await running
        trigger = self._checkpoint_due(hot, force, idle=True)
        if trigger is not None:
            await self._write_checkpoint(hot, lease, self._work(hot, trigger))
        elif hot.dirty_since is not None and not self._closing:
            self._plan_checkpoint(
                name, due_by_age_at(hot.last_commit, Thresholds.of(self.settings))
            )

    def _plan_checkpoint(self, name: str, when: float) -> None:
        """Drain ``name`` again at monotonic time ``when``, when its checkpoint is due by age
        even if no chunk comes (a drain with nothing pending only checkpoints)."""
        previous = self._checkpoint_timers.pop(name, None)
        if previous is not None:
            previous.cancel()
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._checkpoint_timers.pop(name, None)
            self.kick(name)

        delay = max(when - time.monotonic(), 0.0) + 0.01
        self._checkpoint_timers[name] = loop.call_later(delay, due)

    async def _write_checkpoint_logged(self, hot: Hot, lease: Lease, work: CheckpointWork) -> None:
        try:
            await self._write_checkpoint(hot, lease, work)
        except (Unavailable, NotFound) as exc:
            log.info(
                "selector %s: checkpoint of version %d not written: %s",
                hot.meta.name,
                work.version,
                exc,
            )
        except Exception:
            log.exception(
                "selector %s: checkpoint of version %d failed", hot.meta.name, work.version
            )

    async def _release_to_stream(self, hot: Hot, cursor: str) -> None:
        """Tell the stream a selector is attached to that its checkpoint now covers the log
        through ``cursor`` (the stream trims up to the lowest such cursor of its selectors).
        Best effort: a later checkpoint says it again, and until then the log is only held a
        little longer."""
        meta = hot.meta
        if meta.stream is None:
            return
        try:
            await self.store.streams.release(meta.stream, meta.name, meta.incarnation, cursor)
        except Unavailable as exc:
            log.info(
                "selector %s: stream %s not told of its checkpoint: %s", meta.name, meta.stream, exc
            )

    async def _write_checkpoint(self, hot: Hot, lease: Lease, work: CheckpointWork) -> None:
        """Encode ``work``'s state (off the event loop) and store it as the checkpoint."""
        started = time.perf_counter()
        pieces = await asyncio.to_thread(lambda: cut_fields(encode_state(work.state)))
        point = await self.store.checkpoints.checkpoint(
            lease, work.version, work.cursor, work.items_seen, pieces
        )
        if point is None:
            return
        await self._release_to_stream(hot, point.cursor)
        self.metrics.checkpoints.labels(work.trigger).inc()
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - started)
        if hot.checkpoint_version < work.version:  # else a newer one was made meanwhile
            hot.checkpoint_version = work.version
            # What accrued while the checkpoint was written is still uncheckpointed.
            hot.log_bytes -= work.log_bytes
            hot.compute_seconds -= work.compute_seconds
            hot.dirty_since = time.monotonic() if hot.head.version > work.version else None
