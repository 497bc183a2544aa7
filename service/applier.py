"""The applier: folds a selector's pending log entries into its state, exactly once.

The log of accepted chunks is the truth (ARCHITECTURE.md, "The write path"). One applier per
selector at a time, across every replica, holds the selector's lease and a fencing token. It
keeps the selector's state in memory (``Hot``), reads the entries after the committed cursor,
coalesces them into one update computed off the event loop, and commits with one script: the
next version's head, what readers need of it (the published fields: scores, decisions,
projections, scalars), its place in the ranking history, and a commit record saying which
entries it applied, all behind a compare-and-set that rejects a stale applier. The whole state
is written only as a checkpoint, in pieces, when one is due (``Applier._checkpoint_due``). An
applier that does not hold a selector's state (after a crash, a lease handover, a restart)
loads the last checkpoint and replays the log after it batch by batch as the commit records
say, so it continues exactly where the last commit left off.

An entry that cannot be applied is rejected (dead-lettered) instead of retried forever: see
``Applier``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from service.algorithms import get_method
from service.algorithms.base import State
from service.cache import LRU
from service.config import Settings
from service.errors import Conflict, NotFound, StaleApplier, Unavailable
from service.metrics import Metrics
from service.store.codec import cut_fields, encode_state
from service.store.keys import parse_stream_id
from service.store.records import (
    Head,
    HistoryEntry,
    Lease,
    LogEntry,
    Rejection,
    SelectorMeta,
)
from service.store.redis_store import SelectorStore
from service.updates import (
    StateUnreadable,
    Update,
    UpdateFailed,
    compute_update,
    decode_checkpoint,
    publish,
    rank,
    replay,
    state_sizes,
)
from service.wire.kinds import kind_of

log = logging.getLogger("sift.applier")

#: Longest pause between two drains of a selector whose drains keep failing.
MAX_BACKOFF_SECONDS = 60.0
#: Most selectors whose state one process keeps in memory (their bytes are bounded too).
HOT_STATES_MAX = 256
#: How often the sweeper lets go of states of selectors deleted through another replica.
FORGET_DELETED_EVERY_SWEEPS = 10
#: Longest single blocking read of a lingering applier (shutdown, or a reader asking for a
#: checkpoint, waits at most this).
LINGER_SLICE = 0.1
#: How long a reader waits to bring a checkpoint up to date before using the last one.
CHECKPOINT_NOW_SECONDS = 10.0


def is_applied(head: Head, log_id: str) -> bool:
    """Whether the committed cursor has passed ``log_id`` (applied, or rejected)."""
    return parse_stream_id(head.cursor) >= parse_stream_id(log_id)


@dataclass(frozen=True)
class Batch:
    """Log entries taken into one update, bounded in count and rows."""

    entries: list[LogEntry]

    @property
    def items(self) -> int:
        return sum(entry.items for entry in self.entries)

    @property
    def merge(self) -> bool:
        """A merge is applied alone (``_next_batch`` never puts one with other entries)."""
        return self.entries[0].merge

    @property
    def payload_bytes(self) -> int:
        return sum(len(entry.payload) for entry in self.entries)


@dataclass
class Hot:
    """A selector's whole state as this process holds it: the state of ``head`` (committed),
    and what accrued since the checkpoint it descends from (what a replay would redo)."""

    meta: SelectorMeta
    head: Head
    state: State
    state_bytes: int
    checkpoint_version: int
    #: Log payload bytes and computing seconds of the versions after the checkpoint.
    log_bytes: int = 0
    compute_seconds: float = 0.0
    #: Monotonic time of the first commit after the checkpoint (None: nothing to checkpoint).
    dirty_since: float | None = None
    #: Monotonic time of the last commit (or of the rebuild).
    last_commit: float = 0.0

    def committed(self, head: Head, update: Update, log_bytes: int, seconds: float) -> None:
        self.head = head
        self.state = update.state
        self.state_bytes = update.state_bytes
        self.log_bytes += log_bytes
        self.compute_seconds += seconds
        self.last_commit = time.monotonic()
        if self.dirty_since is None:
            self.dirty_since = self.last_commit


@dataclass(frozen=True)
class CheckpointWork:
    """A checkpoint to write: the state of one committed version, and what it will cover."""

    version: int
    cursor: str
    items_seen: int
    state: State
    log_bytes: int
    compute_seconds: float
    trigger: str


class Applier:
    """Drives the appliers of this process; any replica may apply any selector.

    Poison entries never jam a selector: an entry whose update fails because of what it holds
    is rejected (moved aside with its reason, see ``SelectorStore.commit``) and the log goes
    on. A failing batch of several entries is retried one entry at a time, so only the culprit
    is rejected. Failures that may not repeat (out of memory, the applying process dying) are
    counted per entry in Redis and reject it after ``max_apply_attempts``. Failures that are
    not any entry's fault (Redis unavailable, a damaged state) back off per selector instead,
    so the log is not flooded.

    Every version's top features go to the selector's ranking history (``SIFT_HISTORY_TOP`` of
    them, ``SIFT_HISTORY_VERSIONS`` versions kept), computed in the worker thread with the
    update and written by the commit script itself.
    """

    def __init__(self, store: SelectorStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self._running: dict[str, asyncio.Task[None]] = {}
        # Set (and replaced) on every commit made here, so local waiters wake at once instead
        # of at their next poll; waiters still poll for commits made by other replicas.
        self._committed: dict[str, asyncio.Event] = {}
        # The state of every selector this process applied lately, bounded in bytes.
        self._hot: LRU[str, Hot] = LRU(
            HOT_STATES_MAX,
            max_weight=max(settings.hot_state_bytes, 1),
            weigh=lambda hot: hot.state_bytes,
        )
        # A checkpoint being written while the applier goes on, per selector.
        self._checkpointing: dict[str, asyncio.Task[None]] = {}
        # Selectors whose drain here should stop lingering and checkpoint now (a reader asked).
        self._checkpoint_wanted: set[str] = set()
        # Selectors whose state will be due for a checkpoint by age, when nothing else comes.
        self._checkpoint_timers: dict[str, asyncio.TimerHandle] = {}
        # Selectors whose last drain failed: (monotonic time of the next try, failures so far).
        self._backoff: dict[str, tuple[float, int]] = {}
        # Selectors to look at again when another applier's lease expires.
        self._retries: dict[str, asyncio.TimerHandle] = {}
        self._closing = False

    def kick(self, name: str) -> None:
        """Start draining ``name`` in the background unless this process already is (or is
        backing off after a failure)."""
        if self._closing:
            return
        task = self._running.get(name)
        if task is not None and not task.done():
            return
        retry_at, _failures = self._backoff.get(name, (0.0, 0))
        if time.monotonic() < retry_at:
            return
        task = asyncio.create_task(self._drain_logged(name), name=f"drain:{name}")
        self._running[name] = task

    def forget(self, name: str) -> None:
        """Let go of what this process holds of ``name`` (deleted)."""
        self._hot.pop(name)
        timer = self._checkpoint_timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop every drain; an unfinished update is simply redone later.

        Bounded: a task that does not end within ``timeout_s`` after its cancellation (a
        client library that swallowed it, say) is left behind rather than hanging shutdown.
        """
        self._closing = True
        for handle in [*self._retries.values(), *self._checkpoint_timers.values()]:
            handle.cancel()
        tasks = [
            task
            for task in [*self._running.values(), *self._checkpointing.values()]
            if not task.done()
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=timeout_s)
            for task in stuck:
                log.warning("task %s did not stop within %.0f s", task.get_name(), timeout_s)

    async def _drain_logged(self, name: str) -> None:
        try:
            await self.drain(name)
        except NotFound:
            self._backoff.pop(name, None)
            self.forget(name)
        except (Unavailable, StaleApplier) as exc:
            # Not this selector's fault: Redis is down, or another replica took over.
            self._back_off(name, exc.detail, logging.INFO)
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

    def _back_off(self, name: str, why: str, level: int) -> None:
        """Wait 1, 2, 4 ... up to 60 s before draining ``name`` again, and say so once."""
        _retry_at, failures = self._backoff.get(name, (0.0, 0))
        delay = min(2.0**failures, MAX_BACKOFF_SECONDS)
        self._backoff[name] = (time.monotonic() + delay, failures + 1)
        log.log(level, "drain of %s stopped (%s); next try in %.0f s", name, why, delay)

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
                await self._try_again_when_free(name)
                return
            try:
                head = await self._apply_all(name, lease)
            finally:
                with contextlib.suppress(Unavailable):
                    await self.store.release_lease(lease)
            if not await self.store.pending(name, head.cursor, 1):
                return

    async def checkpoint_now(self, name: str, timeout_s: float = CHECKPOINT_NOW_SECONDS) -> Head:
        """Apply what is pending and make the checkpoint the current version's; the head.

        For readers of fields served from checkpoints and for exports. When the lease stays
        taken for ``timeout_s`` (another replica busy applying), gives up and returns the head
        as it is: its checkpoint is then a version or a few behind, which its answer says.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            head = await self.store.get_head(name)
            if head.recovery_point.version == head.version and not await self.store.pending(
                name, head.cursor, 1
            ):
                return head
            draining = self._running.get(name)
            if draining is not None and not draining.done():
                # This process holds the lease (maybe lingering): ask its drain to checkpoint.
                self._checkpoint_wanted.add(name)
                await asyncio.wait({draining}, timeout=max(deadline - time.monotonic(), 0.0))
                if time.monotonic() >= deadline:
                    return await self.store.get_head(name)
                continue
            lease = await self.store.acquire_lease(name, self.settings.lease_ms)
            if lease is not None:
                try:
                    return await self._apply_all(name, lease, force_checkpoint=True)
                finally:
                    with contextlib.suppress(Unavailable):
                        await self.store.release_lease(lease)
            if time.monotonic() >= deadline:
                return head
            await asyncio.sleep(0.02)

    async def _try_again_when_free(self, name: str) -> None:
        """Another applier holds the lease: look again the moment it would expire.

        If that applier died, its work is taken over as soon as the lease allows, instead of
        at the next sweep; if it is alive, the second look finds nothing to do or a fresh
        lease, at the cost of one Redis call.
        """
        if name in self._retries:
            return
        remaining_ms = await self.store.lease_ttl_ms(name)
        if remaining_ms <= 0:
            return
        loop = asyncio.get_running_loop()

        def retry() -> None:
            self._retries.pop(name, None)
            self.kick(name)

        self._retries[name] = loop.call_later(remaining_ms / 1000 + 0.01, retry)

    async def _apply_all(self, name: str, lease: Lease, force_checkpoint: bool = False) -> Head:
        """Apply batches until the log is empty, then see to the checkpoint; returns the last
        head this applier saw."""
        meta = await self.store.get_meta(name)
        if name in self._checkpoint_wanted:
            force_checkpoint = True
        stop_renewing = asyncio.Event()
        keepalive = asyncio.create_task(self._keep_lease(lease, stop_renewing))
        try:
            # Read the head once: from then on, each commit returns the next one.
            head = await self.store.get_head(name)
            hot = self._hot_if_current(name, head)
            # After a batch failed, entries up to its last one go one at a time.
            isolating_through: str | None = None
            while True:
                batch, attempt = await self._next_batch(meta, head, isolating_through is not None)
                if batch is None:
                    if not force_checkpoint and await self._linger(name, head):
                        continue
                    break
                if hot is None:
                    hot = await self._rebuild(meta, head)
                if attempt > self.settings.max_apply_attempts:
                    reason = (
                        f"applying this chunk was started {attempt - 1} times and never finished "
                        "(the applying process died or ran out of memory each time)"
                    )
                    head = await self._reject(hot, lease, batch.entries[0], reason)
                    continue
                try:
                    head = await self._apply_batch(hot, lease, batch)
                except UpdateFailed as failure:
                    if len(batch.entries) > 1:
                        isolating_through = batch.entries[-1].log_id
                        continue
                    if failure.transient:
                        raise  # the next attempt is counted; enough of them reject the entry
                    head = await self._reject(hot, lease, batch.entries[0], failure.reason)
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

    async def _linger(self, name: str, head: Head) -> bool:
        """Wait (``SIFT_APPLIER_LINGER_SECONDS``, lease held) for an entry after ``head``;
        whether one came. A replica that rebuilt the state for every few chunks it happened to
        be kicked for would spend its time replaying: the one that holds the state keeps
        applying while chunks keep coming, whichever replica they were posted to."""
        deadline = time.monotonic() + self.settings.applier_linger_seconds
        while (
            not self._closing
            and name not in self._checkpoint_wanted
            and (remaining := deadline - time.monotonic()) > 0
        ):
            # In slices, so that shutdown never waits on a blocked read.
            if await self.store.wait_for_entry(name, head.cursor, min(remaining, LINGER_SLICE)):
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
        self, meta: SelectorMeta, head: Head, one_at_a_time: bool
    ) -> tuple[Batch | None, int]:
        """The next entries to apply together, and the attempt number on the first of them.

        A first entry that was attempted before (its update crashed a process, or failed in a
        batch) goes alone, so that a poison entry is found among innocent ones.
        """
        coalesces = get_method(meta.method).coalesces and not one_at_a_time
        limit = self.settings.max_coalesce_entries if coalesces else 1
        attempt, entries = await self.store.take(meta.name, head.cursor, limit)
        if not entries:
            return None, 0
        if attempt > 1:
            entries = entries[:1]
        taken: list[LogEntry] = []
        total = 0
        for entry in entries:
            # A merge goes alone: it is folded in by the method's merge, not its update.
            if taken and (entry.merge or taken[0].merge):
                break
            # Always take the first entry, even alone above the bound: it must make progress.
            if taken and total + entry.items > self.settings.max_coalesce_rows:
                break
            taken.append(entry)
            total += entry.items
        return Batch(taken), attempt

    async def _apply_batch(self, hot: Hot, lease: Lease, batch: Batch) -> Head:
        started = time.perf_counter()
        update = await asyncio.to_thread(
            compute_update,
            hot.meta,
            hot.state,
            [entry.payload for entry in batch.entries],
            self.settings.max_state_bytes,
            batch.merge,
            self.settings.history_top,
        )
        computed = time.perf_counter() - started
        head = await self._commit(
            hot,
            lease,
            update,
            cursor=batch.entries[-1].log_id,
            items=batch.items,
            entries=len(batch.entries),
            applied_keys=[e.idempotency_key for e in batch.entries if e.idempotency_key],
        )
        hot.committed(head, update, batch.payload_bytes, computed)
        self._hot.put(hot.meta.name, hot)  # weighed again: the state may have grown
        self.metrics.observe_apply(
            hot.meta.method, len(batch.entries), batch.items, time.perf_counter() - started
        )
        self._checkpoint_in_background(hot, lease)
        return head

    async def _reject(self, hot: Hot, lease: Lease, entry: LogEntry, reason: str) -> Head:
        """Move ``entry`` aside: commit past it with the state unchanged (or with what its
        chunk kind leaves in its place, ``Kind.placeholder``) and record why, for its producer
        to read."""
        meta = hot.meta
        log.warning("selector %s: rejected log entry %s: %s", meta.name, entry.log_id, reason)
        kind = kind_of(get_method(meta.method).chunk_kind)
        stand_in = None if entry.merge else kind.placeholder(meta, entry.items)
        items = 0
        top = self.settings.history_top
        if stand_in is None:

            def unchanged() -> Update:
                ranking = rank(meta, hot.state, top)
                return Update(
                    hot.state, publish(meta, hot.state, ranking), {}, hot.state_bytes, ranking
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
            applied_keys=[],
            rejections=[Rejection(entry.log_id, reason, entry.idempotency_key)],
        )
        hot.committed(head, update, len(entry.payload), 0.0)
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
        applied_keys: list[str],
        rejections: list[Rejection] | None = None,
    ) -> Head:
        """Write the new segments, then commit the next version (head, published fields,
        commit record, history entry) in one script, and wake local waiters."""
        name = hot.meta.name
        await self.store.put_segments(name, update.segments)
        items_seen = hot.head.items_seen + items
        history = None
        if update.ranking is not None:
            history = HistoryEntry(hot.head.version + 1, items_seen, 0.0, update.ranking)
        try:
            committed_head = await self.store.commit(
                lease,
                expected_version=hot.head.version,
                published=update.published,
                cursor=cursor,
                items_seen=items_seen,
                entries=entries,
                applied_keys=applied_keys,
                rejections=rejections or [],
                history=history,
                history_kept=self.settings.history_versions,
            )
        except StaleApplier:
            self.metrics.stale_commits.inc()
            self._hot.pop(name)  # someone else moved the selector on: this state is stale
            raise
        committed = self._committed.pop(name, None)
        if committed is not None:
            committed.set()
        return committed_head

    # -- checkpoints -------------------------------------------------------------------------

    def _checkpoint_due(self, hot: Hot, force: bool = False, idle: bool = False) -> str | None:
        """What makes a checkpoint of ``hot`` due now (None: not due).

        ``replay``: the updates since the last checkpoint took ``SIFT_CHECKPOINT_REPLAY_SECONDS``
        of computing (a takeover would redo them); ``log``: the log since holds
        ``SIFT_CHECKPOINT_LOG_RATIO`` times the state's bytes (so checkpoints cost at most that
        share of what producers send, and the log's memory stays bounded); ``idle``: nothing
        was committed for ``SIFT_CHECKPOINT_INTERVAL_SECONDS`` (a selector at rest gets its log
        trimmed and restarts without replay; under load the first two bound the cost).
        """
        if hot.head.version <= hot.checkpoint_version:
            return None
        if force:
            return "request"
        settings = self.settings
        if hot.compute_seconds >= settings.checkpoint_replay_seconds:
            return "replay"
        if hot.log_bytes >= settings.checkpoint_log_ratio * max(hot.state_bytes, 1):
            return "log"
        if idle and time.monotonic() - hot.last_commit >= settings.checkpoint_interval_seconds:
            return "idle"
        return None

    def _work(self, hot: Hot, trigger: str) -> CheckpointWork:
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
            self._plan_checkpoint(name, hot.last_commit + self.settings.checkpoint_interval_seconds)

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

    async def _write_checkpoint(self, hot: Hot, lease: Lease, work: CheckpointWork) -> None:
        """Encode ``work``'s state (off the event loop) and store it as the checkpoint."""
        started = time.perf_counter()
        pieces = await asyncio.to_thread(lambda: cut_fields(encode_state(work.state)))
        point = await self.store.checkpoint(
            lease, work.version, work.cursor, work.items_seen, pieces
        )
        if point is None:
            return
        self.metrics.checkpoints.labels(work.trigger).inc()
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - started)
        if hot.checkpoint_version < work.version:
            hot.checkpoint_version = work.version
            # What accrued while the checkpoint was written is still uncheckpointed.
            hot.log_bytes -= work.log_bytes
            hot.compute_seconds -= work.compute_seconds
            hot.dirty_since = time.monotonic() if hot.head.version > work.version else None

    async def _keep_lease(self, lease: Lease, stop: asyncio.Event) -> None:
        """Renew the lease every third of it until ``stop`` is set (the fence, not the lease,
        is what keeps a stalled applier from committing)."""
        interval = self.settings.lease_ms / 3000
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
                return
            try:
                renewed = await self.store.renew_lease(lease, self.settings.lease_ms)
            except Unavailable:
                continue  # Redis away: the commit will tell whether the lease survived
            if not renewed:
                log.warning("lost the lease of %s (token %s)", lease.name, lease.token)
                return

    async def wait_applied(self, name: str, log_id: str, timeout_s: float) -> Head | None:
        """Wait until the committed cursor of ``name`` has passed ``log_id``; None on timeout.

        Wakes on every local commit, and otherwise polls the head with a growing delay (for
        commits by other replicas); kicks a drain whenever nobody here is draining: if another
        replica holds the lease the kick is a cheap no-op.
        """
        deadline = time.monotonic() + timeout_s
        delay = 0.01
        while True:
            # Take the event before reading the head: a commit in between still wakes us.
            committed = self._committed.setdefault(name, asyncio.Event())
            head = await self.store.get_head(name)
            if is_applied(head, log_id):
                return head
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.kick(name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(committed.wait(), timeout=min(delay, remaining))
            # While this process applies the selector, its commits wake us: polling the head
            # would only take the GIL from the update. Otherwise poll, up to every 100 ms.
            draining = name in self._running and not self._running[name].done()
            delay = 1.0 if draining else min(delay * 2, 0.1)

    async def settle(self, name: str, timeout_s: float) -> bool:
        """Wait (bounded) until everything appended to ``name`` so far is applied; False if
        ``timeout_s`` passed first. NotFound for a selector that does not exist."""
        last = await self.store.last_log_id(name)
        if last is None:
            await self.store.get_head(name)
            return True
        return await self.wait_applied(name, last, timeout_s) is not None

    async def sweep_forever(self) -> None:
        """Apply entries that nobody is waiting for (``wait=false``, crashed appliers), and let
        go of the states of selectors deleted elsewhere.

        Runs until ``close``. The flag matters, not only the cancellation: a cancellation that
        lands inside a Redis call may come back as a connection error, which is caught here.
        """
        unavailable = False  # say when Redis goes away and comes back, not every sweep
        sweeps = 0
        while not self._closing:
            try:
                for name in await self.store.names_with_pending():
                    self.kick(name)
                sweeps += 1
                if sweeps % FORGET_DELETED_EVERY_SWEEPS == 0:
                    for name in await self.store.missing(self._hot.keys()):
                        self.forget(name)
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
