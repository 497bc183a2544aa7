"""The drain loop: with a selector's lease held, take the pending entries after the committed
cursor, batch them, compute each update (on the event loop when it is tiny, else in a worker
thread), commit it, and reject what cannot be applied; rebuild the state from its checkpoint
and the log when this process does not hold it; linger for more before letting go.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from service.algorithms import get_method
from service.algorithms.base import State
from service.applier.checkpoints import Checkpoints
from service.applier.core import log
from service.applier.keepalive import keep_lease
from service.applier.scheduling import LEASE_BUSY_SECONDS, NOT_THE_ENTRYS_FAULT
from service.applier.state import Batch, Hot, is_applied
from service.errors import Conflict, StaleApplier, Unavailable
from service.store.records import (
    Head,
    HistoryEntry,
    Lease,
    LogEntry,
    Rejection,
    SelectorMeta,
    Taken,
    TakeRequest,
)
from service.updates import (
    Entry,
    StateUnreadable,
    Update,
    UpdateFailed,
    assess_resamples,
    compute_update,
    decode_checkpoint,
    publish,
    rank,
    replay,
    state_sizes,
)
from service.wire.kinds import kind_of

#: Longest single blocking read of a lingering applier (shutdown, or a reader asking for a
#: checkpoint, waits at most this).
LINGER_SLICE = 0.1
#: An update expected to take at most this much CPU is computed on the event loop: handing it
#: to a worker thread costs more (two hops, and the thread waiting for the GIL while the loop
#: serves requests: a 0.7 ms update of a few rows took 1.9 ms there under load). 3 ms: a
#: one-row fsds update with its two resamples (m = 1000) takes 1.4 ms, and sent to a thread it
#: cost waited one-row POSTs 40% of their throughput (446 against 716 req/s, p50 17.8 against
#: 11.0 ms, wrk with 8 connections); a request behind it waits at most that, less than the
#: GIL's 5 ms switch interval it waits behind a thread's Python work.
INLINE_COMPUTE_SECONDS = 0.003


class DrainLoop(Checkpoints):
    """Drains: batches applied, committed or rejected, states rebuilt (see the module)."""

    async def drain(self, name: str) -> None:
        """Apply everything pending for ``name`` while holding its lease.

        After releasing the lease, look once more: an entry appended while we were finishing
        would otherwise wait for the sweeper, because its poster found the lease taken.
        """
        while True:
            lease = await self.store.acquire_lease(name, self.settings.lease_ms)
            if lease is None and await self.store.break_dead_lease(name):
                log.info("selector %s: took over the lease of a process that died", name)
                lease = await self.store.acquire_lease(name, self.settings.lease_ms)
            if lease is None:
                self._lease_busy[name] = time.monotonic() + LEASE_BUSY_SECONDS
                await self._try_again_when_free(name)
                return
            if self._is_current_drain(name):
                self._running[name].incarnation = lease.incarnation
            try:
                head = await self._apply_all_owned(name, lease)
            finally:
                with contextlib.suppress(Unavailable):
                    await self.store.release_lease(lease)
            if not self._is_current_drain(name) or not await self.store.pending(
                name, head.cursor, 1
            ):
                return

    async def _apply_all_owned(
        self, name: str, lease: Lease, force_checkpoint: bool = False
    ) -> Head:
        """``_apply_all``, and when it ends for a reason that is no fault of the entry it was on
        (``NOT_THE_ENTRYS_FAULT``), take that attempt back: only processes that die computing
        an entry, and computations that fail, may count against it."""
        try:
            return await self._apply_all(name, lease, force_checkpoint)
        except NOT_THE_ENTRYS_FAULT:
            self._unproven.setdefault(name, set()).add(lease.holder)
            self._forgive_soon(name)
            raise

    async def _apply_all(self, name: str, lease: Lease, force_checkpoint: bool = False) -> Head:
        """Apply batches until the log is empty, then see to the checkpoint; returns the last
        head this applier saw."""
        meta = await self.store.get_meta(name)
        self._let_go.discard(name)  # the description read now is the one this drain follows
        if name in self._checkpoint_wanted:
            force_checkpoint = True
        stop_renewing = asyncio.Event()
        keepalive = asyncio.create_task(
            keep_lease(self.store, lease, self.settings.lease_ms, stop_renewing)
        )
        try:
            # Read the head once: from then on, each commit returns the next one.
            head = await self.store.get_head(name)
            hot = self._hot_if_current(name, head)
            # After a batch failed, entries up to its last one go one at a time.
            isolating_through: str | None = None
            taken: Taken | None = None
            # Entries that came while this drain lingered, lease held: nobody attempted them.
            woke = False
            while True:
                batch, attempt = await self._next_batch(
                    meta, head, lease, isolating_through is not None, taken, counts=not woke
                )
                taken, woke = None, False
                if batch is None:
                    if not force_checkpoint and await self._linger(name, head, lease.stream):
                        woke = True
                        continue
                    break
                if hot is None:
                    hot = await self._rebuild(meta, head)
                if attempt > self.settings.max_apply_attempts:
                    reason = (
                        f"applying this chunk was started {attempt - 1} times and never finished "
                        "(the applying process died or ran out of memory each time)"
                    )
                    head = await self._reject(hot, lease, batch.entries[0], reason, batch.sizes[0])
                    continue
                try:
                    head, taken = await self._apply_batch(
                        hot, lease, batch, isolating_through is not None
                    )
                except UpdateFailed as failure:
                    if len(batch.entries) > 1:
                        isolating_through = batch.entries[-1].log_id
                        continue
                    if failure.transient:
                        raise  # the next attempt is counted; enough of them reject the entry
                    head = await self._reject(
                        hot, lease, batch.entries[0], failure.reason, batch.sizes[0]
                    )
                if isolating_through is not None and is_applied(head, isolating_through):
                    isolating_through = None
            force_checkpoint = force_checkpoint or name in self._checkpoint_wanted
            self._checkpoint_wanted.discard(name)
            if force_checkpoint and hot is None and head.recovery_point.version < head.version:
                hot = await self._rebuild(meta, head)
            if hot is not None:
                await self._settle_checkpoint(hot, lease, force_checkpoint)
            return head
        finally:
            # Stopped by the event, not by cancelling: a cancellation that lands inside a Redis
            # call can be swallowed by the client, and the renewals would then go on forever
            # while this drain waited for them (seen: a selector whose lease was renewed every
            # second and never applied again). The wait is bounded whatever happens.
            stop_renewing.set()
            _done, running = await asyncio.wait({keepalive}, timeout=self.settings.lease_ms / 1000)
            for task in running:
                task.cancel()

    async def _linger(self, name: str, head: Head, stream: str | None) -> bool:
        """Wait (``SIFT_APPLIER_LINGER_SECONDS``, lease held) for an entry after ``head`` (in
        ``stream``'s log for a selector attached to one); whether one came. A replica that
        rebuilt the state for every few chunks it happened to be kicked for would spend its
        time replaying: the one that holds the state keeps applying while chunks keep coming,
        whichever replica they were posted to."""
        deadline = time.monotonic() + self.settings.applier_linger_seconds
        while (
            not self._closing
            and name not in self._checkpoint_wanted
            and name not in self._let_go
            and self._is_current_drain(name)
            and (remaining := deadline - time.monotonic()) > 0
        ):
            # In slices, so that shutdown never waits on a blocked read.
            slice_s = min(remaining, LINGER_SLICE)
            if await self.store.wait_for_entry(name, head.cursor, slice_s, stream):
                return True
        return False

    def _hot_if_current(self, name: str, head: Head) -> Hot | None:
        """This process's state of ``name`` if it is the state of ``head`` (nobody else has
        committed since this process did)."""
        hot = self._hot.get(name)
        if hot is None or hot.head.state_key != head.state_key:
            return None
        return hot

    async def _rebuild(self, meta: SelectorMeta, head: Head) -> Hot:
        """The state of ``head``: its last checkpoint with the log after it replayed.

        Called with the lease held, so the head does not move meanwhile; a checkpoint that a
        newer one replaces while it is read (a stale applier's) is read again.
        """
        started = time.perf_counter()
        for attempt in range(3):
            point = head.recovery_point
            try:
                fields = await self.store.load_checkpoint(meta.name, point)
                break
            except Conflict:
                if attempt == 2:
                    raise
                head = await self.store.get_head(meta.name)
        records = [
            record
            for record in await self.store.commits_after(meta.name, point.version)
            if record.version <= head.version
        ]
        expected = list(range(point.version + 1, head.version + 1))
        if [r.version for r in records] != expected or (
            records and records[-1].cursor != head.cursor
        ):
            raise StateUnreadable(
                f"the commit records of '{meta.name}' do not lead from its checkpoint "
                f"(version {point.version}) to its head (version {head.version})"
            )
        entries = (
            await self.store.log_between(meta.name, point.cursor, head.cursor) if records else []
        )

        def rebuild() -> tuple[State, int]:
            state = decode_checkpoint(meta, fields)
            return replay(meta, state, point.items_seen, records, entries)

        state, items_seen = await asyncio.to_thread(rebuild)
        if items_seen != head.items_seen:
            raise StateUnreadable(
                f"replaying the log of '{meta.name}' counts {items_seen} items; its head says "
                f"{head.items_seen}"
            )
        seconds = time.perf_counter() - started
        self.metrics.replay_seconds.observe(seconds)
        self.metrics.replayed_versions.inc(len(records))
        if records:
            log.info(
                "selector %s: rebuilt version %d from checkpoint %d (%d versions replayed) in "
                "%.2f s",
                meta.name,
                head.version,
                point.version,
                len(records),
                seconds,
            )
        hot = Hot(
            meta=meta,
            head=head,
            state=state,
            state_bytes=sum(state_sizes(state).values()),
            checkpoint_version=point.version,
            log_bytes=sum(len(entry.payload) for entry in entries),
            # What was replayed would be replayed again after another crash: it counts.
            compute_seconds=seconds if records else 0.0,
            dirty_since=time.monotonic() if records else None,
            last_commit=time.monotonic(),
        )
        self._hot.put(meta.name, hot)
        return hot

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
            request = self._take_request(meta, head.cursor, one_at_a_time)
            attempt, entries = await self.store.take(
                lease, request.after, request.count, request.forgive, request.held, counts
            )
            if request.forgive:
                self._forgiven(meta.name, request.forgive)
        else:
            attempt, entries = taken.attempt, taken.entries
        if not entries:
            return None, 0
        if attempt > 1:
            entries = entries[:1]
        chosen: list[LogEntry] = []
        folded: list[Entry] = []
        sizes: list[int] = []
        total = 0
        for entry in entries:
            # A merge goes alone: it is folded in by the method's merge, not its update.
            if chosen and (entry.merge or chosen[0].merge):
                break
            # Always take the first entry, even alone above the bound: it must make progress.
            if chosen and total + entry.items > self.settings.max_coalesce_rows:
                break
            handed = self.handed.get(meta.name, entry.log_id) if not entry.payload else None
            if handed is None and not entry.payload:  # pragma: no cover - held, then dropped
                raise StateUnreadable(f"entry {entry.log_id} came without its payload")
            chosen.append(entry)
            folded.append(entry.payload if handed is None else handed[0])
            sizes.append(len(entry.payload) if handed is None else handed[1])
            total += entry.items
        return Batch(chosen, folded, sizes), attempt

    def _take_request(self, meta: SelectorMeta, after: str, one_at_a_time: bool) -> TakeRequest:
        """The take of the entries after ``after``: as many as may go in one update, those this
        process holds without their payloads, and the attempts to take back first."""
        coalesces = get_method(meta.method).coalesces and not one_at_a_time
        limit = self.settings.max_coalesce_entries if coalesces else 1
        return TakeRequest(
            after,
            limit,
            tuple(sorted(self._unproven.get(meta.name, ()))),
            tuple(self.handed.ids(meta.name, 2 * limit)),
        )

    async def _apply_batch(
        self, hot: Hot, lease: Lease, batch: Batch, one_at_a_time: bool
    ) -> tuple[Head, Taken | None]:
        """Compute and commit ``batch``; the new head, and the next entries, taken in the
        commit's round trip (None: take them as usual)."""
        started = time.perf_counter()

        sampled = hot.samples_cpu()

        def computed_update() -> tuple[Update, float | None]:
            # The thread's CPU clock is a system call: read on a sample of updates only.
            cpu_started = time.thread_time() if sampled else 0.0
            update = compute_update(
                hot.meta,
                hot.state,
                batch.folded,
                self.settings.max_state_bytes,
                batch.merge,
                self.settings.history_top,
            )
            return update, time.thread_time() - cpu_started if sampled else None

        expected = hot.expected_cpu(batch.items)
        if expected is not None and expected <= INLINE_COMPUTE_SECONDS:
            update, cpu = computed_update()
        else:
            update, cpu = await asyncio.to_thread(computed_update)
        if cpu is not None:
            hot.last_update_cpu, hot.last_update_items = cpu, batch.items
        computed = time.perf_counter() - started
        then_take = self._take_request(hot.meta, batch.entries[-1].log_id, one_at_a_time)
        head = await self._commit(
            hot,
            lease,
            update,
            cursor=batch.entries[-1].log_id,
            items=batch.items,
            entries=len(batch.entries),
            applied_records=[e.idem_record for e in batch.entries if e.idem_record],
            then_take=then_take,
        )
        if then_take.taken is not None and then_take.forgive:
            self._forgiven(hot.meta.name, then_take.forgive)
        hot.committed(head, update, batch.payload_bytes, computed)
        self._hot.put(hot.meta.name, hot)  # weighed again: the state may have grown
        self.metrics.observe_apply(
            hot.meta.method, len(batch.entries), batch.items, time.perf_counter() - started
        )
        self._checkpoint_in_background(hot, lease)
        return head, then_take.taken

    async def _reject(
        self, hot: Hot, lease: Lease, entry: LogEntry, reason: str, size: int
    ) -> Head:
        """Move ``entry`` aside: commit past it with the state unchanged (or with what its
        chunk kind leaves in its place, ``Kind.placeholder``) and record why, for its producer
        to read. ``size``: its payload's bytes in the log (``Batch.sizes``)."""
        meta = hot.meta
        log.warning("selector %s: rejected log entry %s: %s", meta.name, entry.log_id, reason)
        kind = kind_of(get_method(meta.method).chunk_kind)
        stand_in = None if entry.merge else kind.placeholder(meta, entry.items)
        items = 0
        top = self.settings.history_top
        if stand_in is None:

            def unchanged() -> Update:
                ranking = rank(meta, hot.state, top)
                resampled, stability = assess_resamples(meta, hot.state, top)
                published = publish(meta, hot.state, ranking, resampled)
                return Update(
                    hot.state, published, {}, hot.state_bytes, ranking, resampled, stability
                )

            update = await asyncio.to_thread(unchanged)
        else:
            try:
                update = await asyncio.to_thread(
                    compute_update,
                    meta,
                    hot.state,
                    [stand_in],
                    self.settings.max_state_bytes,
                    False,
                    top,
                )
            except UpdateFailed as exc:
                raise StateUnreadable(
                    f"not even the placeholder of rejected entry {entry.log_id} can be applied: "
                    f"{exc.reason}"
                ) from exc
            items = entry.items
        head = await self._commit(
            hot,
            lease,
            update,
            cursor=entry.log_id,
            items=items,
            entries=1,
            applied_records=[],
            rejections=[Rejection(entry.log_id, reason, entry.idem_record)],
        )
        hot.committed(head, update, size, 0.0)
        self.metrics.chunks_dead_lettered.labels(meta.method).inc()
        return head

    async def _commit(
        self,
        hot: Hot,
        lease: Lease,
        update: Update,
        *,
        cursor: str,
        items: int,
        entries: int,
        applied_records: list[str],
        rejections: list[Rejection] | None = None,
        then_take: TakeRequest | None = None,
    ) -> Head:
        """Write the new segments, then commit the next version (head, published fields,
        commit record, history entry) in one script, and wake local waiters."""
        name = hot.meta.name
        await self.store.put_segments(name, update.segments)
        items_seen = hot.head.items_seen + items
        history = None
        if update.ranking is not None:
            history = HistoryEntry(
                hot.head.version + 1,
                items_seen,
                0.0,
                update.ranking,
                None if update.stability is None else update.stability.as_dict(),
            )
        try:
            committed_head = await self.store.commit(
                lease,
                expected_version=hot.head.version,
                published=update.published,
                cursor=cursor,
                items_seen=items_seen,
                entries=entries,
                applied_records=applied_records,
                rejections=rejections or [],
                history=history,
                history_kept=self.settings.history_versions,
                then_take=then_take,
            )
        except StaleApplier:
            self.metrics.stale_commits.inc()
            self._hot.pop(name)  # someone else moved the selector on: this state is stale
            raise
        self.handed.applied(name, cursor)
        self.heads.committed(name, committed_head)  # before the waiters: read-your-writes
        self.waiters.committed(
            name,
            committed_head.incarnation,
            committed_head.version,
            cursor,
            committed_head.items_seen,
            after=hot.head.cursor,
            rejections={r.log_id: r.reason for r in rejections or ()},
        )
        for observe in self.observers:
            try:
                observe(hot.meta, committed_head, update)
            except Exception:  # an observer never fails a commit
                log.exception("selector %s: a commit observer failed", name)
        return committed_head
