"""The drain loop: with a selector's lease held, take the pending entries after the committed
cursor, batch them, have each update computed and committed (``Committer``), and what cannot
be applied rejected; take the waited chunks handed to it (``DirectPath``); linger for more
before letting go, and see to the checkpoint at the end (``Checkpointer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Literal

from service import tracing
from service.algorithms import get_method
from service.applier.basis import Basis
from service.applier.checkpoints import Checkpointer
from service.applier.committing import Committer, Covered
from service.applier.direct import DirectPath
from service.applier.keepalive import keep_lease
from service.applier.scheduling import NOT_THE_ENTRYS_FAULT, Scheduler
from service.applier.state import Batch, HeldState, is_applied
from service.applier.updates import (
    Folded,
    StateUnreadable,
    UpdateFailed,
)
from service.errors import Unavailable
from service.store.records import (
    Head,
    Lease,
    LogEntry,
    SelectorMeta,
    Taken,
    TakeRequest,
)

log = logging.getLogger("sift.applier")

#: Longest single blocking read of a lingering applier (shutdown, or a reader asking for a
#: checkpoint, waits at most this).
LINGER_SLICE = 0.1


class DrainLoop:
    """Drains: batches taken, applied, committed or rejected (see the module)."""

    def __init__(
        self,
        basis: Basis,
        scheduler: Scheduler,
        checkpoints: Checkpointer,
        committer: Committer,
        direct: DirectPath,
    ) -> None:
        self.store, self.settings, self.metrics = basis.store, basis.settings, basis.metrics
        self._running = basis.running
        self._held = basis.held
        self._handed = basis.handed
        self.scheduler = scheduler
        self.checkpoints = checkpoints
        self.committer = committer
        self.direct = direct
        # A lingering drain's blocked read of its log, kept across direct chunks.
        self._linger_reads: dict[str, asyncio.Future[bool]] = {}

    async def drain(self, name: str) -> None:
        """Apply everything pending for ``name`` while holding its lease.

        After releasing the lease, look once more: an entry appended while we were finishing
        would otherwise wait for the sweeper, because its poster found the lease taken.
        """
        while True:
            lease = await self.store.leases.acquire_lease(name, self.settings.lease_ms)
            if lease is None and await self.store.leases.break_dead_lease(name):
                log.info("selector %s: took over the lease of a process that died", name)
                lease = await self.store.leases.acquire_lease(name, self.settings.lease_ms)
            if lease is None:
                self.scheduler.held_elsewhere(name)
                await self.scheduler.try_again_when_free(name)
                return
            running = self._running.get(name)
            if running is not None and self._running.is_current(name):
                running.incarnation = lease.incarnation
            head = await self.apply_all_owned(name, lease)
            if not self._running.is_current(name) or not await self.store.log.pending(
                name, head.cursor, 1
            ):
                return

    async def apply_all_owned(
        self, name: str, lease: Lease, force_checkpoint: bool = False
    ) -> Head:
        """``_apply_all``, then let ``lease`` go. When it ends for a reason that is no fault of
        the entry it was on (``NOT_THE_ENTRYS_FAULT``), take that attempt back: only processes
        that die computing an entry, and computations that fail, may count against it."""
        try:
            return await self._apply_all(name, lease, force_checkpoint)
        except NOT_THE_ENTRYS_FAULT:
            self.scheduler.unproven(name, lease.holder)
            raise
        finally:
            with contextlib.suppress(Unavailable):
                await self.store.leases.release_lease(lease)

    async def _apply_all(self, name: str, lease: Lease, force_checkpoint: bool = False) -> Head:
        """Apply batches until the log is empty, then see to the checkpoint; returns the last
        head this applier saw."""
        meta = await self.store.registry.get_meta(name)
        # The description read now is the one this drain follows.
        self._running.watching(name)
        force_checkpoint = force_checkpoint or name in self.checkpoints.wanted
        async with self._lease_renewed(lease):
            try:
                # Read the head once: from then on, each commit returns the next one.
                head = await self.store.registry.get_head(name)
                head, held = await self._apply_batches(meta, lease, head, force_checkpoint)
                force_checkpoint = force_checkpoint or name in self.checkpoints.wanted
                self.checkpoints.wanted.discard(name)
                if force_checkpoint and held is None and head.recovery_point.version < head.version:
                    held = await self.committer.rebuild(meta, head)
                if held is not None:
                    await self.checkpoints.settle(held, lease, force_checkpoint)
                return head
            finally:
                self._close_direct(name)

    async def _apply_batches(
        self, meta: SelectorMeta, lease: Lease, head: Head, force_checkpoint: bool
    ) -> tuple[Head, HeldState | None]:
        """Apply the log's batches and the direct chunks after ``head`` while they come (and
        the drain lingers for them); the last head, and the state held of it (None: not
        rebuilt, nothing was applied)."""
        name = meta.name
        held = self._held_if_current(name, head)
        # After a batch failed, entries up to its last one go one at a time.
        isolating_through: str | None = None
        taken: Taken | None = None
        # Entries that came while this drain lingered, lease held: nobody attempted them.
        woke = False
        # The log woke the drain: its entries go before direct chunks (which must follow
        # every entry in the log, and would be computed for nothing).
        log_first = False
        while True:
            if held is not None and isolating_through is None:
                self.direct.open(name)
                if (
                    self.direct.waiting(name)
                    and not log_first
                    and (taken is None or not taken.entries)
                ):
                    head = await self.direct.apply(held, lease)
                    taken, woke = None, True
                    continue
            batch, attempt = await self._next_batch(
                meta, head, lease, isolating_through is not None, taken, counts=not woke
            )
            taken, woke, log_first = None, False, False
            if batch is None:
                why = None if force_checkpoint else await self._linger(name, head, lease)
                if why is None:
                    return head, held
                woke, log_first = True, why == "log"
                continue
            # The log goes first: direct chunks waiting meanwhile are appended after it as
            # usual rather than wait for a quiet log (another replica may keep it busy).
            self.direct.turn_away(name)
            if held is None:
                held = await self.committer.rebuild(meta, head)
            if attempt > self.settings.max_apply_attempts:
                reason = (
                    f"applying this chunk was started {attempt - 1} times and never finished "
                    "(the applying process died or ran out of memory each time)"
                )
                head = await self._reject_first(held, lease, batch, reason)
                continue
            try:
                head, taken = await self._apply_batch(
                    held, lease, batch, isolating_through is not None
                )
            except UpdateFailed as failure:
                if len(batch.entries) > 1:
                    isolating_through = batch.entries[-1].log_id
                    continue
                if failure.transient:
                    raise  # the next attempt is counted; enough of them reject the entry
                head = await self._reject_first(held, lease, batch, failure.reason)
            if isolating_through is not None and is_applied(head, isolating_through):
                isolating_through = None

    async def _reject_first(self, held: HeldState, lease: Lease, batch: Batch, why: str) -> Head:
        """Reject the first entry of ``batch`` (alone in it, or first attempted too often)."""
        return await self.committer.reject(held, lease, batch.entries[0], why, batch.sizes[0])

    @contextlib.asynccontextmanager
    async def _lease_renewed(self, lease: Lease) -> AsyncIterator[None]:
        """``lease`` renewed while the body runs (``keep_lease``)."""
        stop_renewing = asyncio.Event()
        keepalive = asyncio.create_task(
            keep_lease(self.store, lease, self.settings.lease_ms, stop_renewing)
        )
        try:
            yield
        finally:
            # Stopped by the event, not by cancelling: a cancellation that lands inside a Redis
            # call can be swallowed by the client, and the renewals would then go on forever
            # while this drain waited for them (seen: a selector whose lease was renewed every
            # second and never applied again). The wait is bounded whatever happens.
            stop_renewing.set()
            _done, running = await asyncio.wait({keepalive}, timeout=self.settings.lease_ms / 1000)
            for task in running:
                task.cancel()

    async def _linger(self, name: str, head: Head, lease: Lease) -> Literal["log", "direct"] | None:
        """Wait (``SIFT_APPLIER_LINGER_SECONDS``, lease held) for an entry after ``head`` (in
        the log of the stream the lease reads, for a selector attached to one), or a direct
        chunk; which came (None: nothing). A replica that rebuilt the state for every few
        chunks it happened to be kicked for would spend its time replaying: the one that holds
        the state keeps applying while chunks keep coming, whichever replica they were posted
        to. A selector applied through the cut of its detach waits for nothing: no entry after
        the cut is its."""
        stream = lease.stream
        if lease.stream_cut is not None and is_applied(head, lease.stream_cut):
            return None
        deadline = time.monotonic() + self.settings.applier_linger_seconds
        while (
            not self._running.closing
            and name not in self.checkpoints.wanted
            and self._running.lingers(name)
            and self._running.is_current(name)
            and (remaining := deadline - time.monotonic()) > 0
        ):
            if self.direct.waiting(name):
                return "direct"
            # In slices, so that shutdown never waits on a blocked read. A read that a direct
            # chunk interrupted goes on (cancelling a blocked read mid-reply would cost its
            # connection) and is waited on again here; it may wake the drain for entries it
            # committed since, and the take then finds nothing.
            read = self._linger_reads.get(name)
            if read is None:
                slice_s = min(remaining, LINGER_SLICE)
                read = asyncio.ensure_future(
                    self.store.log.wait_for_entry(name, head.cursor, slice_s, stream)
                )
                self._linger_reads[name] = read
            arrived = self.direct.arrival(name)
            arrival: asyncio.Future[bool] = asyncio.ensure_future(arrived.wait())
            try:
                await asyncio.wait((read, arrival), return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrival.cancel()
            arrived.clear()
            if not read.done():
                return "direct"
            del self._linger_reads[name]
            if read.result():
                return "log"
        return None

    def _held_if_current(self, name: str, head: Head) -> HeldState | None:
        """This process's state of ``name`` if it is the state of ``head`` (nobody else has
        committed since this process did)."""
        held = self._held.get(name)
        if held is None or held.head.state_key != head.state_key:
            return None
        return held

    async def _next_batch(
        self,
        meta: SelectorMeta,
        head: Head,
        lease: Lease,
        one_at_a_time: bool,
        taken: Taken | None = None,
        counts: bool = True,
    ) -> tuple[Batch | None, int]:
        """The next entries to apply together, and the attempt number on the first of them:
        ``taken`` (what the last commit's take brought along), or taken now.

        A first entry that was attempted before (its update crashed a process, or failed in a
        batch) goes alone, so that a poison entry is found among innocent ones. ``counts``
        false: the take records no attempt (entries appended while this drain lingered: a
        write, and its fsync, on every wake-up would only say that nobody tried them yet;
        should one kill this process, the next taker counts it).
        """
        if taken is None:
            request = self._take_request(meta, head.cursor, one_at_a_time, counts)
            taken = await self.store.log.take_for(lease, request)
            if request.forgive:
                self.scheduler.forgiven(meta.name, request.forgive)
        attempt, entries = taken.attempt, taken.entries
        if not entries:
            return None, 0
        if attempt > 1:
            entries = entries[:1]
        chosen: list[LogEntry] = []
        folded: list[Folded] = []
        sizes: list[int] = []
        total = 0
        for entry in entries:
            # A merge goes alone: it is folded in by the method's merge, not its update.
            if chosen and (entry.merge or chosen[0].merge):
                break
            # Always take the first entry, even alone above the bound: it must make progress.
            if chosen and total + entry.items > self.settings.max_coalesce_rows:
                break
            handed = self._handed.get(meta.name, entry.log_id) if not entry.payload else None
            if handed is None and not entry.payload:  # pragma: no cover - held, then dropped
                raise StateUnreadable(f"entry {entry.log_id} came without its payload")
            chosen.append(entry)
            folded.append(entry.payload if handed is None else handed[0])
            sizes.append(len(entry.payload) if handed is None else handed[1])
            total += entry.items
        return Batch(chosen, folded, sizes), attempt

    def _take_request(
        self, meta: SelectorMeta, after: str, one_at_a_time: bool, counts: bool = True
    ) -> TakeRequest:
        """The take of the entries after ``after``: as many as may go in one update, those this
        process holds without their payloads, and the attempts to take back first (``counts``:
        whether it counts an attempt)."""
        coalesces = get_method(meta.method).coalesces and not one_at_a_time
        limit = self.settings.max_coalesce_entries if coalesces else 1
        return TakeRequest(
            after,
            limit,
            self.scheduler.unproven_holders(meta.name),
            tuple(self._handed.ids(meta.name, 2 * limit)),
            counts=counts,
        )

    async def _apply_batch(
        self, held: HeldState, lease: Lease, batch: Batch, one_at_a_time: bool
    ) -> tuple[Head, Taken | None]:
        """Compute and commit ``batch``; the new head, and the next entries, taken in the
        commit's round trip (None: take them as usual)."""
        name, ids = held.meta.name, [entry.log_id for entry in batch.entries]
        links = tracing.appenders(name, ids)
        with tracing.applying(name, held.meta.method, batch.items, links, "log"):
            return await self._compute_and_commit(held, lease, batch, one_at_a_time)

    async def _compute_and_commit(
        self, held: HeldState, lease: Lease, batch: Batch, one_at_a_time: bool
    ) -> tuple[Head, Taken | None]:
        started = time.perf_counter()
        update, computed = await self.committer.compute(
            held, batch.folded, batch.merge, batch.items
        )
        then_take = self._take_request(held.meta, batch.entries[-1].log_id, one_at_a_time)
        covered = Covered(
            batch.entries[-1].log_id,
            batch.items,
            len(batch.entries),
            [e.idem_record for e in batch.entries if e.idem_record],
        )
        head = await self.committer.commit(held, lease, update, covered, then_take)
        if then_take.taken is not None and then_take.forgive:
            self.scheduler.forgiven(held.meta.name, then_take.forgive)
        held.committed(head, update, batch.payload_bytes, computed.replay_seconds)
        self._held.put(held.meta.name, held)  # weighed again: the state may have grown
        self.metrics.observe_apply(
            held.meta.method, len(batch.entries), batch.items, time.perf_counter() - started
        )
        self.checkpoints.in_background(held, lease)
        return head, then_take.taken

    def _close_direct(self, name: str) -> None:
        """This drain ends: it takes no more direct chunks, and its linger's read is left to
        end by itself."""
        self.direct.close(name)
        read = self._linger_reads.pop(name, None)
        if read is not None:
            read.add_done_callback(_ignore_outcome)


def _ignore_outcome(task: asyncio.Future[bool]) -> None:
    """A linger's read left to end by itself: its outcome is not needed (and its error, if
    any, is the next read's to meet)."""
    if not task.cancelled():
        task.exception()
