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
from collections.abc import Collection
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
    Taken,
    TakeRequest,
)
from service.store.redis_store import SelectorStore
from service.updates import (
    Entry,
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
from service.waiting import FALLBACK_SECONDS, HandOver, Settled, Waiters
from service.wire.kinds import Chunk, kind_of

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
#: Most selectors whose state one process keeps in memory (their bytes are bounded too).
HOT_STATES_MAX = 256
#: How often the sweeper lets go of states of selectors deleted through another replica.
FORGET_DELETED_EVERY_SWEEPS = 10
#: Longest single blocking read of a lingering applier (shutdown, or a reader asking for a
#: checkpoint, waits at most this).
LINGER_SLICE = 0.1
#: How long a reader waits to bring a checkpoint up to date before using the last one.
CHECKPOINT_NOW_SECONDS = 10.0
#: After this process found a selector's lease held by another replica, kicks within this long
#: make one attempt at its end instead of one each: the holder applies what is appended
#: meanwhile (it looks once more before it lets go), and a replica serving a stream of chunks
#: to a selector another one applies tried to take the lease twice per chunk otherwise.
LEASE_BUSY_SECONDS = 0.05
#: An update expected to take at most this much CPU is computed on the event loop: handing it
#: to a worker thread costs more (two hops, and the thread waiting for the GIL while the loop
#: serves requests: a 0.7 ms update of a few rows took 1.9 ms there under load).
INLINE_COMPUTE_SECONDS = 0.001


def is_applied(head: Head, log_id: str) -> bool:
    """Whether the committed cursor has passed ``log_id`` (applied, or rejected)."""
    return parse_stream_id(head.cursor) >= parse_stream_id(log_id)


@dataclass(frozen=True)
class Batch:
    """Log entries taken into one update, bounded in count and rows, and what each folds in:
    its payload, or the decoded chunk this process handed over (``HandOver``)."""

    entries: list[LogEntry]
    folded: list[Entry]
    #: Bytes of every entry's payload in the log (held chunks were read from none).
    sizes: list[int]

    @property
    def items(self) -> int:
        return sum(entry.items for entry in self.entries)

    @property
    def merge(self) -> bool:
        """A merge is applied alone (``_next_batch`` never puts one with other entries)."""
        return self.entries[0].merge

    @property
    def payload_bytes(self) -> int:
        return sum(self.sizes)


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
    #: CPU seconds the last update took, and the items it folded in (None: none yet).
    last_update_cpu: float | None = None
    last_update_items: int = 0

    def expected_cpu(self, items: int) -> float | None:
        """CPU seconds an update of ``items`` items should take, by the last one."""
        if self.last_update_cpu is None:
            return None
        return self.last_update_cpu * max(1.0, items / max(self.last_update_items, 1))

    def committed(self, head: Head, update: Update, log_bytes: int, seconds: float) -> None:
        self.head = head
        self.state = update.state
        self.state_bytes = update.state_bytes
        self.log_bytes += log_bytes
        self.compute_seconds += seconds
        self.last_commit = time.monotonic()
        if self.dirty_since is None:
            self.dirty_since = self.last_commit


@dataclass
class Drain:
    """A drain of one selector running in this process, and the incarnation of the selector it
    holds the lease of (None until it has the lease)."""

    task: asyncio.Task[None]
    incarnation: str | None = None


@dataclass(frozen=True)
class Backoff:
    """When a selector whose last drain failed may be drained again, and of which incarnation
    that drain was (a selector created anew under the name owes nothing to it)."""

    retry_at: float
    failures: int
    incarnation: str | None


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
    counted per entry in Redis and reject it after ``max_apply_attempts``: every attempt is
    counted when it starts (``TAKE``), and a process that is alive takes its attempt back
    (``forgive_attempts``) when it ended for a reason that is no fault of the entry
    (``NOT_THE_ENTRYS_FAULT``: Redis paused or slow, the lease lost), so that only processes
    that died computing, and computations that failed, count. Failures that are not any
    entry's fault back off per selector instead, so the log is not flooded.

    A selector deleted and created again under its name is another selector (its
    ``incarnation``): a drain, a backoff and a waiter belong to one incarnation, and a chunk to
    the new one is applied at once, whatever is left of the old one here.

    Every version's top features go to the selector's ranking history (``SIFT_HISTORY_TOP`` of
    them, ``SIFT_HISTORY_VERSIONS`` versions kept), computed in the worker thread with the
    update and written by the commit script itself.
    """

    def __init__(self, store: SelectorStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self._running: dict[str, Drain] = {}
        # POSTs waiting on their entries, resolved by the commits that cover them (this
        # process's, and every replica's as announced: ``listen_forever``).
        self.waiters = Waiters()
        # Chunks appended here, decoded, for this process's drains (the log stays the truth).
        self.handed = HandOver()
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
        self._closing = False

    def kick(self, name: str, incarnation: str | None = None) -> None:
        """Start draining ``name`` in the background unless this process already is (or is
        backing off after a failure).

        With the ``incarnation`` a caller knows (it just appended to it), a drain or a backoff
        of an earlier incarnation of the name does not hold the new one up: the old drain can
        no longer read or commit anything, and stops at its next look.
        """
        if self._closing:
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
        running = self._running.get(name)
        if (
            running is not None
            and not running.task.done()
            and (incarnation is None or running.incarnation in (None, incarnation))
        ):
            return
        backoff = self._backoff.get(name)
        if backoff is not None:
            if incarnation is not None and backoff.incarnation not in (None, incarnation):
                del self._backoff[name]
            elif time.monotonic() < backoff.retry_at:
                return
        task = asyncio.create_task(self._drain_logged(name), name=f"drain:{name}")
        self._running[name] = Drain(task)

    def _deferred_kick(self, name: str, incarnation: str | None) -> None:
        self._deferred_kicks.pop(name, None)
        self.kick(name, incarnation)

    def hand_over(self, name: str, log_id: str, chunk: Chunk, payload_bytes: int) -> None:
        """The chunk of entry ``log_id`` of ``name``, just appended here, decoded: this
        process's applier folds it in without reading its payload back (``HandOver``)."""
        self.handed.put(name, log_id, chunk, payload_bytes)

    def _is_current_drain(self, name: str) -> bool:
        """Whether the running task is this process's drain of ``name`` (not one superseded
        by a drain of a newer incarnation)."""
        running = self._running.get(name)
        return running is not None and running.task is asyncio.current_task()

    def forget(self, name: str) -> None:
        """Let go of what this process holds of ``name`` (deleted)."""
        self._hot.pop(name)
        self._backoff.pop(name, None)
        self.handed.forget(name)
        self.waiters.forget(name)
        self._lease_busy.pop(name, None)
        for timers in (self._checkpoint_timers, self._deferred_kicks):
            timer = timers.pop(name, None)
            if timer is not None:
                timer.cancel()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop every drain; an unfinished update is simply redone later.

        Bounded: a task that does not end within ``timeout_s`` after its cancellation (a
        client library that swallowed it, say) is left behind rather than hanging shutdown.
        """
        self._closing = True
        for handle in [
            *self._retries.values(),
            *self._checkpoint_timers.values(),
            *self._deferred_kicks.values(),
        ]:
            handle.cancel()
        tasks = [
            task
            for task in [
                *(drain.task for drain in self._running.values()),
                *self._checkpointing.values(),
            ]
            if not task.done()
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=timeout_s)
            for task in stuck:
                log.warning("task %s did not stop within %.0f s", task.get_name(), timeout_s)
        # Attempts cut short by the shutdown are no fault of their entries: say so once.
        for forgiving in self._forgiving.values():
            forgiving.cancel()
        for name, holders in list(self._unproven.items()):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.forgive_attempts(name, sorted(holders)), 1.0)

    async def _drain_logged(self, name: str) -> None:
        try:
            await self.drain(name)
        except NotFound:
            if self._is_current_drain(name):
                self.forget(name)
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

    def _forgive_soon(self, name: str) -> None:
        """Deliver the attempts of ``name`` to take back as soon as Redis answers (bounded by
        ``FORGIVE_SECONDS``), unless a ``take`` of this process carries them first."""
        running = self._forgiving.get(name)
        if self._closing or (running is not None and not running.done()):
            return
        self._forgiving[name] = asyncio.create_task(
            self._deliver_forgiveness(name), name=f"forgive:{name}"
        )

    async def _deliver_forgiveness(self, name: str) -> None:
        deadline = time.monotonic() + FORGIVE_SECONDS
        while name in self._unproven and time.monotonic() < deadline:
            holders = sorted(self._unproven[name])
            try:
                await self.store.forgive_attempts(name, holders)
            except Unavailable:
                await asyncio.sleep(FORGIVE_RETRY_SECONDS)
                continue
            except Exception:
                log.exception("selector %s: taking back attempts failed", name)
                return
            self._forgiven(name, holders)

    def _forgiven(self, name: str, holders: Collection[str]) -> None:
        left = self._unproven.get(name, set()) - set(holders)
        if left:
            self._unproven[name] = left
        else:
            self._unproven.pop(name, None)

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
            running = self._running.get(name)
            if running is not None and not running.task.done():
                # This process holds the lease (maybe lingering): ask its drain to checkpoint.
                self._checkpoint_wanted.add(name)
                await asyncio.wait({running.task}, timeout=max(deadline - time.monotonic(), 0.0))
                if time.monotonic() >= deadline:
                    return await self.store.get_head(name)
                continue
            lease = await self.store.acquire_lease(name, self.settings.lease_ms)
            if lease is not None:
                try:
                    return await self._apply_all_owned(name, lease, force_checkpoint=True)
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
            taken: Taken | None = None
            while True:
                batch, attempt = await self._next_batch(
                    meta, head, lease, isolating_through is not None, taken
                )
                taken = None
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

    async def _linger(self, name: str, head: Head) -> bool:
        """Wait (``SIFT_APPLIER_LINGER_SECONDS``, lease held) for an entry after ``head``;
        whether one came. A replica that rebuilt the state for every few chunks it happened to
        be kicked for would spend its time replaying: the one that holds the state keeps
        applying while chunks keep coming, whichever replica they were posted to."""
        deadline = time.monotonic() + self.settings.applier_linger_seconds
        while (
            not self._closing
            and name not in self._checkpoint_wanted
            and self._is_current_drain(name)
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
        self,
        meta: SelectorMeta,
        head: Head,
        lease: Lease,
        one_at_a_time: bool,
        taken: Taken | None = None,
    ) -> tuple[Batch | None, int]:
        """The next entries to apply together, and the attempt number on the first of them:
        ``taken`` (what the last commit's take brought along), or taken now.

        A first entry that was attempted before (its update crashed a process, or failed in a
        batch) goes alone, so that a poison entry is found among innocent ones.
        """
        if taken is None:
            request = self._take_request(meta, head.cursor, one_at_a_time)
            attempt, entries = await self.store.take(
                lease, request.after, request.count, request.forgive, request.held
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

        def computed_update() -> tuple[Update, float]:
            cpu_started = time.thread_time()
            update = compute_update(
                hot.meta,
                hot.state,
                batch.folded,
                self.settings.max_state_bytes,
                batch.merge,
                self.settings.history_top,
            )
            return update, time.thread_time() - cpu_started

        expected = hot.expected_cpu(batch.items)
        if expected is not None and expected <= INLINE_COMPUTE_SECONDS:
            update, cpu = computed_update()
        else:
            update, cpu = await asyncio.to_thread(computed_update)
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
            history = HistoryEntry(hot.head.version + 1, items_seen, 0.0, update.ranking)
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
        self.waiters.committed(
            name,
            committed_head.incarnation,
            committed_head.version,
            cursor,
            committed_head.items_seen,
            after=hot.head.cursor,
            rejections={r.log_id: r.reason for r in rejections or ()},
        )
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

    async def wait_applied(
        self, name: str, log_id: str, timeout_s: float, incarnation: str | None = None
    ) -> Settled | None:
        """Wait until a commit of ``name`` covers entry ``log_id``; where it got to (None on
        timeout).

        Resolved by the commit itself (``Waiters``): this process's, or another replica's as
        announced. Only when nothing was heard for ``FALLBACK_SECONDS`` (a notice lost) is the
        head read, and a drain kicked again. With the ``incarnation`` the entry was appended
        to, NotFound once the name holds another selector (deleted and created again while the
        entry waited: it was never applied, and never will be).
        """
        known = self.waiters.known(name, log_id, incarnation)
        if known is not None:
            return known
        future = self.waiters.wait(name, log_id, incarnation)
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(
                        asyncio.shield(future), min(FALLBACK_SECONDS, remaining)
                    )
                head = await self.store.get_head(name)
                if incarnation is not None and head.incarnation != incarnation:
                    raise NotFound(
                        f"selector '{name}' was deleted (and created anew) before the chunk "
                        f"with log id {log_id} was applied"
                    )
                self.waiters.committed(
                    name, head.incarnation, head.version, head.cursor, head.items_seen
                )
                if future.done():
                    return future.result()
                self.kick(name, incarnation)
        finally:
            self.waiters.discard(name, future)

    async def listen_forever(self) -> None:
        """Hear every replica's commits (``SelectorStore.commit_notices``) for the waiters of
        this process, and for its hand-over (chunks another replica applied are let go), until
        ``close``. While Redis is away, listen again every second."""
        while not self._closing:
            try:
                async for notice in self.store.commit_notices():
                    self.waiters.committed(
                        notice.name,
                        notice.incarnation,
                        notice.version,
                        notice.cursor,
                        notice.items_seen,
                        rejected_any=notice.rejected,
                    )
                    self.handed.applied(notice.name, notice.cursor)
                    if self._closing:
                        return
            except Unavailable:
                pass  # the sweeper says it; waiters read heads meanwhile
            except Exception:
                log.exception("listening for commits failed")
            await asyncio.sleep(1.0)

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

        Every append marks its selector in the pending set; a sweep reads the marks, not every
        selector, so that an idle service costs nothing however many selectors it holds.

        Runs until ``close``. The flag matters, not only the cancellation: a cancellation that
        lands inside a Redis call may come back as a connection error, which is caught here.
        """
        unavailable = False  # say when Redis goes away and comes back, not every sweep
        sweeps = 0
        while not self._closing:
            try:
                # The first sweep reads every selector (what a crash left before the pending
                # marks existed, or where marking failed); later ones only the marked.
                if sweeps == 0:
                    pending = await self.store.names_with_pending()
                else:
                    pending = await self.store.names_marked_pending()
                for name in pending:
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
