"""Computing and committing: an update of a held state computed (on the event loop when it is
tiny, else in a worker thread), committed with one script (head, published fields, commit
record, history entry), or a poison entry rejected in its place; what follows a commit (held
chunks let go, heads, waiters, observers); and a state rebuilt from its checkpoint and the log
when this process does not hold it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service import tracing
from service.algorithms import get_method, parallel
from service.algorithms.base import State
from service.applier.basis import Basis
from service.applier.state import HeldState
from service.applier.updates import (
    Folded,
    StateUnreadable,
    Update,
    UpdateFailed,
    assess_resamples,
    compute_update,
    decode_checkpoint,
    publish,
    rank,
    replay,
    replay_takes,
    state_sizes,
    taken_fields,
)
from service.errors import Conflict, StaleApplier
from service.store.codec import SCALARS_FIELD
from service.store.monitoring_records import HistoryEntry
from service.store.records import (
    Head,
    Lease,
    LogEntry,
    NextVersion,
    Rejection,
    SelectorMeta,
    TakeRequest,
)
from service.wire.kinds import chunk_format

log = logging.getLogger("sift.applier")

#: An update expected to take at most this much CPU is computed on the event loop: handing it
#: to a worker thread costs more (two hops, and the thread waiting for the GIL while the loop
#: serves requests), and a request behind it waits less than the GIL's 5 ms switch interval it
#: would wait behind a thread's Python work. (Chosen by measurement: BENCHMARKS.md, the
#: request path.)
INLINE_COMPUTE_SECONDS = 0.003


@dataclass(frozen=True)
class Computed:
    """What an update took: seconds on the clock, and of CPU: the thread's, with what its
    parallel parts kept the cores busy beyond it (``parallel.counting_cpu``); None: not
    read, or not all of it on the threads' clocks (BLAS threads beside them)."""

    wall: float
    cpu: float | None

    @property
    def replay_seconds(self) -> float:
        """What a replay of it would redo: its CPU, where read (the waits of a busy machine,
        readers' requests and other selectors' updates holding the cores, are not redone);
        else its time on the clock, which bounds the CPU."""
        return self.wall if self.cpu is None else self.cpu


@dataclass(frozen=True)
class Covered:
    """The log entries a commit moves past: ``entries`` of them through ``cursor``, bringing
    ``items``; the idempotency records of those applied (``applied_records``), and those
    rejected instead (``rejections``)."""

    cursor: str
    items: int
    entries: int
    applied_records: Sequence[str] = ()
    rejections: Sequence[Rejection] = ()


#: Told of every commit of this process, right after it: the selector, the new head and the
#: update. It must return at once and not raise.
Observer = Callable[[SelectorMeta, Head, Update], None]


class Committer:
    """Updates computed and committed, entries rejected, states rebuilt (see the module)."""

    def __init__(self, basis: Basis) -> None:
        self.store, self.settings, self.metrics = basis.store, basis.settings, basis.metrics
        self._held = basis.held
        self._handed = basis.handed
        self._heads = basis.heads
        self._waiters = basis.waiters
        #: Called right after every commit of this process (the monitor's ``committed``).
        self.observers: list[Observer] = []

    async def rebuild(self, meta: SelectorMeta, head: Head) -> HeldState:
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

        taken = await self._taken(meta, head) if records else None

        def rebuild() -> tuple[State, int]:
            state = decode_checkpoint(meta, fields)
            return replay(meta, state, point.items_seen, records, entries, taken)

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
        held = HeldState(
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
        self._held.put(meta.name, held)
        return held

    async def _taken(self, meta: SelectorMeta, head: Head) -> State | None:
        """What a replay to ``head`` takes from it as published (``replay_takes``); None if
        nothing, or if it is not there to take (the replay then computes it)."""
        takes = replay_takes(meta)
        if not takes:
            return None
        at, published = await self.store.checkpoints.read_state_fields(
            meta.name, [*takes, SCALARS_FIELD]
        )
        return taken_fields(meta, published) if at.version == head.version else None

    async def compute(
        self, held: HeldState, folded: Sequence[Folded], merge: bool, items: int
    ) -> tuple[Update, Computed]:
        """The update of ``held``'s state by ``folded`` (``items`` rows or columns) and what it
        took: on the event loop when the last update says it is tiny, else in a worker
        thread."""
        started = time.perf_counter()
        expected = held.expected_cpu(items)
        inline = expected is not None and expected <= INLINE_COMPUTE_SECONDS
        # The thread's CPU clock is a system call: read on a sample of tiny updates, and on
        # every one in a worker thread (whose cost dwarfs the call's).
        sampled = held.samples_cpu() or not inline

        def computed_update() -> tuple[Update, float | None]:
            cpu_started = time.thread_time() if sampled else 0.0
            with parallel.counting_cpu() as parts:
                update = compute_update(
                    held.meta,
                    held.state,
                    list(folded),
                    self.settings.max_state_bytes,
                    merge,
                    self.settings.history_top,
                )
            if not sampled:
                return update, None
            return update, max(0.0, time.thread_time() - cpu_started + parts.adjustment)

        with tracing.span("sift.compute", {"sift.rows": items, "sift.inline": inline}):
            if inline:
                update, cpu = computed_update()
            else:
                update, cpu = await asyncio.to_thread(computed_update)
        if cpu is not None:
            held.last_update_cpu, held.last_update_items = cpu, items
        # With BLAS threads beside it, the thread's own clock misses their share.
        alone = cpu if self.settings.blas_threads == 1 else None
        return update, Computed(time.perf_counter() - started, alone)

    async def reject(
        self, held: HeldState, lease: Lease, entry: LogEntry, reason: str, size: int
    ) -> Head:
        """Move ``entry`` aside: commit past it with the state unchanged (or with what its
        chunk kind leaves in its place, ``ChunkFormat.placeholder``) and record why, for its
        producer to read. ``size``: its payload's bytes in the log (``Batch.sizes``)."""
        meta = held.meta
        log.warning("selector %s: rejected log entry %s: %s", meta.name, entry.log_id, reason)
        kind = chunk_format(get_method(meta.method).chunk_kind)
        stand_in = None if entry.merge else kind.placeholder(meta, entry.items)
        items = 0
        top = self.settings.history_top
        if stand_in is None:

            def unchanged() -> Update:
                ranking = rank(meta, held.state, top)
                resampled, stability = assess_resamples(meta, held.state, top)
                published = publish(meta, held.state, ranking, resampled)
                return Update(
                    held.state, published, {}, held.state_bytes, ranking, resampled, stability
                )

            update = await asyncio.to_thread(unchanged)
        else:
            try:
                update = await asyncio.to_thread(
                    compute_update,
                    meta,
                    held.state,
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
        rejection = Rejection(entry.log_id, reason, entry.idem_record)
        head = await self.commit(
            held, lease, update, Covered(entry.log_id, items, 1, rejections=(rejection,))
        )
        held.committed(head, update, size, 0.0)
        self.metrics.chunks_dead_lettered.labels(meta.method).inc()
        return head

    async def commit(
        self,
        held: HeldState,
        lease: Lease,
        update: Update,
        covered: Covered,
        then_take: TakeRequest | None = None,
    ) -> Head:
        """Write the new segments, then commit the next version (head, published fields,
        commit record, history entry) in one script, and wake local waiters."""
        name = held.meta.name
        await self.store.checkpoints.put_segments(name, update.segments)
        version = self.next_version(held.head, covered.cursor, covered.items, update)
        try:
            with tracing.span("sift.commit", {"sift.version": version.version}):
                committed_head = await self.store.commits.commit(
                    lease,
                    version,
                    covered.applied_records,
                    covered.rejections,
                    entries=covered.entries,
                    then_take=then_take,
                )
        except StaleApplier:
            self.metrics.stale_commits.inc()
            self._held.pop(name)  # someone else moved the selector on: this state is stale
            raise
        self.announce(held, committed_head, update, covered.rejections)
        return committed_head

    def next_version(self, before: Head, cursor: str, items: int, update: Update) -> NextVersion:
        """The version after ``before`` that ``update`` makes, ``items`` more folded in and its
        cursor at ``cursor``; its ranking history's entry with it (none without a ranking)."""
        history = None
        if update.ranking is not None:
            history = HistoryEntry(
                before.version + 1,
                before.items_seen + items,
                0.0,
                update.ranking,
                None if update.stability is None else update.stability.as_dict(),
            )
        return NextVersion(
            before.version,
            update.published,
            cursor,
            before.items_seen + items,
            history,
            self.settings.history_versions,
        )

    def announce(
        self, held: HeldState, committed: Head, update: Update, rejections: Sequence[Rejection]
    ) -> None:
        """What follows a commit of this process, before anything else runs: held chunks let
        go, the head kept for readers, waiters answered, observers told."""
        name = held.meta.name
        self._handed.applied(name, committed.cursor)
        self._heads.committed(name, committed)  # before the waiters: read-your-writes
        self._waiters.committed(
            name,
            committed,
            after=held.head.cursor,
            rejections={r.log_id: r.reason for r in rejections},
        )
        for observe in self.observers:
            try:
                observe(held.meta, committed, update)
            except Exception:  # an observer never fails a commit
                log.exception("selector %s: a commit observer failed", name)
