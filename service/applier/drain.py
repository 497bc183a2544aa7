"""The drain loop: with a selector's lease held, take the pending entries after the committed
cursor, batch them, compute each update (on the event loop when it is tiny, else in a worker
thread), commit it, and reject what cannot be applied; rebuild the state from its checkpoint
and the log when this process does not hold it; linger for more before letting go.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Literal

from service.algorithms import get_method
from service.algorithms.base import State
from service.applier.checkpoints import Checkpoints
from service.applier.core import log
from service.applier.keepalive import keep_lease
from service.applier.scheduling import LEASE_BUSY_SECONDS, NOT_THE_ENTRYS_FAULT
from service.applier.state import Batch, DirectChunk, Hot, is_applied
from service.errors import Conflict, SiftError, StaleApplier, Unavailable
from service.store.codec import cut_fields, encode_state
from service.store.monitoring_records import HistoryEntry
from service.store.records import (
    AppendOutcome,
    Head,
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
#: A direct commit sends the new state (as the checkpoint) instead of its chunks' payloads
#: when the state is smaller, up to this many bytes (one script writes it whole: a larger
#: state is checkpointed in pieces, in the background, as usual).
DIRECT_STATE_BYTES = 1024 * 1024
#: An update expected to take at most this much CPU is computed on the event loop: handing it
#: to a worker thread costs more (two hops, and the thread waiting for the GIL while the loop
#: serves requests). 3 ms covers a one-row fsds update with its resamples at m = 1000; a
#: request behind it waits at most that, less than the GIL's 5 ms switch interval it would
#: wait behind a thread's Python work. (Measured: benchmarks/README.md, the request path.)
INLINE_COMPUTE_SECONDS = 0.003


class DrainLoop(Checkpoints):
    """Drains: batches applied, committed or rejected, states rebuilt (see the module)."""

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
                self._lease_busy[name] = time.monotonic() + LEASE_BUSY_SECONDS
                await self._try_again_when_free(name)
                return
            if self._is_current_drain(name):
                self._running[name].incarnation = lease.incarnation
            try:
                head = await self._apply_all_owned(name, lease)
            finally:
                with contextlib.suppress(Unavailable):
                    await self.store.leases.release_lease(lease)
            if not self._is_current_drain(name) or not await self.store.log.pending(
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
        meta = await self.store.registry.get_meta(name)
        self._let_go.discard(name)  # the description read now is the one this drain follows
        if name in self._checkpoint_wanted:
            force_checkpoint = True
        stop_renewing = asyncio.Event()
        keepalive = asyncio.create_task(
            keep_lease(self.store, lease, self.settings.lease_ms, stop_renewing)
        )
        try:
            # Read the head once: from then on, each commit returns the next one.
            head = await self.store.registry.get_head(name)
            hot = self._hot_if_current(name, head)
            # After a batch failed, entries up to its last one go one at a time.
            isolating_through: str | None = None
            taken: Taken | None = None
            # Entries that came while this drain lingered, lease held: nobody attempted them.
            woke = False
            # The log woke the drain: its entries go before direct chunks (which must follow
            # every entry in the log, and would be computed for nothing).
            log_first = False
            while True:
                if hot is not None and isolating_through is None:
                    self._direct_open.add(name)
                if (
                    self._direct.get(name)
                    and hot is not None
                    and isolating_through is None
                    and not log_first
                    and (taken is None or not taken.entries)
                ):
                    head = await self._apply_direct(hot, lease)
                    taken, woke = None, True
                    continue
                batch, attempt = await self._next_batch(
                    meta, head, lease, isolating_through is not None, taken, counts=not woke
                )
                taken, woke, log_first = None, False, False
                if batch is not None:
                    # The log goes first: direct chunks waiting meanwhile are appended after it
                    # as usual rather than wait for a quiet log (another replica may keep it
                    # busy).
                    _answer(self._direct.pop(name, []), None)
                if batch is None:
                    why = None if force_checkpoint else await self._linger(name, head, lease.stream)
                    if why is not None:
                        woke, log_first = True, why == "log"
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
            self._close_direct(name)
            # Stopped by the event, not by cancelling: a cancellation that lands inside a Redis
            # call can be swallowed by the client, and the renewals would then go on forever
            # while this drain waited for them (seen: a selector whose lease was renewed every
            # second and never applied again). The wait is bounded whatever happens.
            stop_renewing.set()
            _done, running = await asyncio.wait({keepalive}, timeout=self.settings.lease_ms / 1000)
            for task in running:
                task.cancel()

    async def _linger(
        self, name: str, head: Head, stream: str | None
    ) -> Literal["log", "direct"] | None:
        """Wait (``SIFT_APPLIER_LINGER_SECONDS``, lease held) for an entry after ``head`` (in
        ``stream``'s log for a selector attached to one), or a direct chunk; which came
        (None: nothing). A replica that rebuilt the state for every few chunks it happened to
        be kicked for would spend its time replaying: the one that holds the state keeps
        applying while chunks keep coming, whichever replica they were posted to."""
        deadline = time.monotonic() + self.settings.applier_linger_seconds
        while (
            not self._closing
            and name not in self._checkpoint_wanted
            and name not in self._let_go
            and self._is_current_drain(name)
            and (remaining := deadline - time.monotonic()) > 0
        ):
            if self._direct.get(name):
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
            arrived = self._direct_arrived.setdefault(name, asyncio.Event())
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
                fields = await self.store.checkpoints.load_checkpoint(meta.name, point)
                break
            except Conflict:
                if attempt == 2:
                    raise
                head = await self.store.registry.get_head(meta.name)
        records = [
            record
            for record in await self.store.commits.commits_after(meta.name, point.version)
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
            await self.store.log.log_between(meta.name, point.cursor, head.cursor)
            if records
            else []
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
            attempt, entries = await self.store.log.take(
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
        update, computed = await self._computed(hot, batch.folded, batch.merge, batch.items)
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

    async def _computed(
        self, hot: Hot, folded: Sequence[Entry], merge: bool, items: int
    ) -> tuple[Update, float]:
        """The update of ``hot``'s state by ``folded`` (``items`` rows or columns) and the
        seconds it took: on the event loop when the last update says it is tiny, else in a
        worker thread."""
        started = time.perf_counter()
        sampled = hot.samples_cpu()

        def computed_update() -> tuple[Update, float | None]:
            # The thread's CPU clock is a system call: read on a sample of updates only.
            cpu_started = time.thread_time() if sampled else 0.0
            update = compute_update(
                hot.meta,
                hot.state,
                list(folded),
                self.settings.max_state_bytes,
                merge,
                self.settings.history_top,
            )
            return update, time.thread_time() - cpu_started if sampled else None

        expected = hot.expected_cpu(items)
        if expected is not None and expected <= INLINE_COMPUTE_SECONDS:
            update, cpu = computed_update()
        else:
            update, cpu = await asyncio.to_thread(computed_update)
        if cpu is not None:
            hot.last_update_cpu, hot.last_update_items = cpu, items
        return update, time.perf_counter() - started

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
        await self.store.checkpoints.put_segments(name, update.segments)
        items_seen = hot.head.items_seen + items
        history = self._history_entry(hot.head, items, update)
        try:
            committed_head = await self.store.commits.commit(
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
        self._announce(hot, committed_head, update, rejections or [])
        return committed_head

    @staticmethod
    def _history_entry(before: Head, items: int, update: Update) -> HistoryEntry | None:
        """The ranking history's entry of the version after ``before`` (None: no ranking)."""
        if update.ranking is None:
            return None
        return HistoryEntry(
            before.version + 1,
            before.items_seen + items,
            0.0,
            update.ranking,
            None if update.stability is None else update.stability.as_dict(),
        )

    def _announce(
        self, hot: Hot, committed: Head, update: Update, rejections: list[Rejection]
    ) -> None:
        """What follows a commit of this process, before anything else runs: held chunks let
        go, the head kept for readers, waiters answered, observers told."""
        name = hot.meta.name
        self.handed.applied(name, committed.cursor)
        self.heads.committed(name, committed)  # before the waiters: read-your-writes
        self.waiters.committed(
            name,
            committed.incarnation,
            committed.version,
            committed.cursor,
            committed.items_seen,
            after=hot.head.cursor,
            rejections={r.log_id: r.reason for r in rejections},
        )
        for observe in self.observers:
            try:
                observe(hot.meta, committed, update)
            except Exception:  # an observer never fails a commit
                log.exception("selector %s: a commit observer failed", name)

    # -- the direct path ---------------------------------------------------------------------

    async def _apply_direct(self, hot: Hot, lease: Lease) -> Head:
        """Apply the waited chunks handed to this drain (``submit_direct``) before anything of
        them is written: compute the update, then append them and commit it in one script
        (``append_and_commit``), so each costs one round trip and one fsync. Whatever cannot
        go so (the script refused: entries pending, a key seen before, the lease or the
        version moved; or the update failed) is answered None and appended as usual by its
        request, and the drain applies it from the log. Returns the head."""
        name = hot.meta.name
        # Those whose requests still wait, bounded as a batch is; the rest go next time.
        queued = [item for item in self._direct.pop(name, []) if not item.future.done()]
        live: list[DirectChunk] = []
        rows = 0
        for item in queued:
            if live and (
                len(live) >= self.settings.max_coalesce_entries
                or rows + item.items > self.settings.max_coalesce_rows
            ):
                break
            live.append(item)
            rows += item.items
        if len(live) < len(queued):
            self._direct[name] = queued[len(live) :] + self._direct.get(name, [])
        if not live:
            return hot.head
        try:
            update, computed = await self._computed(hot, [item.chunk for item in live], False, rows)
        except UpdateFailed:
            _answer(live, None)  # appended as usual: the drain finds the culprit
            return hot.head
        started = time.perf_counter()
        before = hot.head
        payload_bytes = sum(len(item.entry.payload) for item in live)
        # Whichever is smaller goes to Redis: the chunks (logged), or the state they make
        # (the checkpoint, the chunks logged without their payloads).
        as_state = update.state_bytes < min(payload_bytes, DIRECT_STATE_BYTES)
        try:
            state = None
            if as_state:
                state = await asyncio.to_thread(lambda: cut_fields(encode_state(update.state)))
            await self.store.checkpoints.put_segments(name, update.segments)
            result = await self.store.commits.append_and_commit(
                lease,
                before.version,
                before.cursor,
                update.published,
                before.items_seen + rows,
                [item.entry for item in live],
                history=self._history_entry(before, rows, update),
                history_kept=self.settings.history_versions,
                checkpoint=state,
            )
        except Exception as exc:
            # Whether the script ran is not known (its reply was lost): the requests fail as an
            # append that lost its reply would, and a retry with the same key finds out.
            _fail(live, exc if isinstance(exc, SiftError) else Unavailable(COMMIT_UNKNOWN))
            raise
        except BaseException:
            _fail(live, Unavailable(COMMIT_UNKNOWN))
            raise
        if isinstance(result, str):
            log.debug("selector %s: direct commit refused (%s)", name, result)
            _answer(live, None)
            return before
        committed, outcomes = result
        self._announce(hot, committed, update, [])
        hot.committed(committed, update, 0 if as_state else payload_bytes, computed)
        if as_state:
            hot.checkpointed(committed.version)
        self._hot.put(name, hot)
        self.metrics.observe_apply(
            hot.meta.method, len(live), rows, computed + time.perf_counter() - started
        )
        for item, outcome in zip(live, outcomes, strict=True):
            if not item.future.done():
                item.future.set_result(outcome)
        self._checkpoint_in_background(hot, lease)
        return committed

    def _close_direct(self, name: str) -> None:
        """This drain ends: it takes no more direct chunks, and those it did not take are
        appended as usual by their requests."""
        self._direct_open.discard(name)
        self._direct_arrived.pop(name, None)
        _answer(self._direct.pop(name, []), None)
        read = self._linger_reads.pop(name, None)
        if read is not None:
            read.add_done_callback(_ignore_outcome)


#: What a waited request hears when its direct commit's reply was lost.
COMMIT_UNKNOWN = (
    "the chunk's commit got no answer from Redis; retry with the same Idempotency-Key to learn "
    "whether it was applied"
)


def _fail(items: list[DirectChunk], error: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(error)


def _answer(items: list[DirectChunk], outcome: AppendOutcome | None) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_result(outcome)


def _ignore_outcome(task: asyncio.Future[bool]) -> None:
    """A linger's read left to end by itself: its outcome is not needed (and its error, if
    any, is the next read's to meet)."""
    if not task.cancelled():
        task.exception()
