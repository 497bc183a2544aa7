"""One source consumed: read its bus in batches, commit each batch with its position, say how it
goes. Run by the one process that holds the source's lease (``service.sources.service``).

Each batch (up to ``batch_rows`` entries, gathered until they reach ``batch_bytes``, or what came
within ``batch_ms`` of the first; an entry larger than ``batch_bytes`` is read alone) becomes
one chunk of the target's log, committed by ``SourceStore.commit`` together with the entries
set aside and the partition's new position: a crash before the commit leaves the position
where it was (the batch is read again), a crash after it leaves the new one (it is not), and a
second consumer that read the same entries finds the position moved and reads from there. The
chunk is handed to this process's applier decoded, as a POSTed chunk is.

Backpressure: before reading, the consumer counts the chunks it appended that the target has
not applied yet (every attached selector, for a stream); over ``max_pending`` it waits, so the
bus holds what the service cannot take yet and memory stays one batch.

Resets: before the first read of each connection, and every second, each partition is checked
against the bus (``Bus.check``): a partition created again below the position (its entries up
to it would never be read) is a reset, counted, recorded with the source's progress, and met as
the source's ``on_reset`` says: ``stop`` holds the partition (state ``reset``) until an operator
restarts the source, ``restart`` moves its position to the new partition's start. Every batch is
confirmed (``Bus.confirm``) before its commit, so none read across a reset is committed.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from service.algorithms import get_method
from service.applier import Applier
from service.errors import NotFound, SelectorMismatch, SiftError, StaleMeta, Unavailable
from service.metrics import Metrics
from service.sources.bus import Bus, BusEntry, BusUnavailable
from service.sources.entries import EntryShape, Rows
from service.sources.resets import Checker, counted_from, halted_reason
from service.sources.spec import DEFAULT_BATCH_BYTES, scrub
from service.store.keys import compare_stream_ids, parse_stream_id
from service.store.parts.appends import SourceStep
from service.store.records import Attachment, Entry
from service.store.redis_store import SelectorStore
from service.store.sources import Gone, Moved, PartitionMove, Progress, SourceStore, Target
from service.wire.kinds import CHUNK_FORMATS, ENTRY_SIDES, ChunkFormat, ChunkTarget, chunk_format
from service.wire.log import encode_chunk

log = logging.getLogger("sift.sources")

#: Backoff after a failure (the bus or Sift's Redis away): doubled up to the most.
FIRST_BACKOFF_SECONDS = 0.25
MOST_BACKOFF_SECONDS = 10.0
#: How often the status is written while nothing changes, and the lag asked of the bus.
STATUS_EVERY_SECONDS = 1.0
#: Over how long the rate of rows is measured.
RATE_WINDOW_SECONDS = 10.0
#: How often a paused consumer looks whether the target caught up.
PAUSE_POLL_SECONDS = 0.05
#: A shared source (Kafka): each partition's lease, taken over this long after its process
#: stopped renewing it; how often a consumer renews its partitions and takes its share.
PARTITION_LEASE_MS = 5000
CLAIM_EVERY_SECONDS = 1.0
#: How often each partition is checked for a reset (and before the first read of every
#: connection); how often a consumer whose partitions are all stopped at one looks again.
CHECK_EVERY_SECONDS = 1.0
HALTED_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class Batch:
    """Entries read from one partition, and their rows for the shape they were converted
    for (None: no entries)."""

    entries: list[BusEntry]
    shape: EntryShape
    converted: Rows | None


class CannotFeed(SelectorMismatch):
    """The target cannot take this source's rows (gone, replaced, or of a kind sources do not
    feed): the source fails, until it is deleted."""


@dataclass
class Feeding:
    """What the consumer knows of its target: how an entry must look, the kind of chunk its
    batches make, and who applies it."""

    shape: EntryShape
    kind: ChunkFormat
    incarnation: str
    #: The selectors that apply the target's log, with their incarnations.
    selectors: list[tuple[str, str]]


async def describe_target(
    store: SelectorStore, target: Target, definition: Mapping[str, Any]
) -> Feeding:
    """How the entries of a source (its ``definition``: its label or target field, its format)
    must look for ``target``; NotFound if it does not exist, CannotFeed if a source cannot feed
    it, or the source names a field the target's kind does not take (or not the one it
    needs)."""
    shaped: ChunkTarget
    if target.kind == "stream":
        stream = await store.streams.get_stream(target.name)
        kind, shaped, incarnation = chunk_format(stream.kind), stream, stream.incarnation
        attachments = await store.streams.attachments(target.name)
        selectors = [(a.selector, a.incarnation) for a in attachments]
    else:
        meta = await store.registry.get_meta(target.name)
        if meta.partitioned:
            raise CannotFeed(
                f"selector '{target.name}' has partitions: a source feeds a selector "
                "without partitions, or a stream"
            )
        if meta.stream is not None:
            raise CannotFeed(
                f"selector '{target.name}' is attached to stream '{meta.stream}': "
                f'expected "into": {{"stream": "{meta.stream}"}}'
            )
        kind = chunk_format(get_method(meta.method).chunk_kind)
        shaped, incarnation = meta, meta.incarnation
        selectors = [(meta.name, meta.incarnation)]
    what = f"{target.kind} '{target.name}' takes {kind.name}"
    if not kind.from_sources:
        fed = [k.name for k in CHUNK_FORMATS.values() if k.from_sources]
        raise CannotFeed(f"{what}: a source feeds {', '.join(fed[:-1])} or {fed[-1]}")
    # What an entry holds beside its features, in the field the source names: the kind says.
    side = kind.entry_side
    needed = None if side is None else f"{side.setting}, the field holding each entry's {side.what}"
    for other in ENTRY_SIDES:
        if other != side and definition.get(other.setting) is not None:
            takers = " or ".join(k.name for k in CHUNK_FORMATS.values() if k.entry_side == other)
            expected = f"{needed}, and no {other.setting}" if needed else f"no {other.setting}"
            raise CannotFeed(f"{what}: expected {expected} ({other.setting} is for {takers})")
    names = shaped.feature_names or [f"f{i}" for i in range(shaped.size)]
    field: str | None = None
    if side is not None:
        field = definition.get(side.setting)
        if field is None:
            raise CannotFeed(f"{what}: expected {needed}")
        if field in names:
            raise CannotFeed(
                f"{what}: {side.setting} '{field}' is one of its feature names: expected the "
                f"field holding each entry's {side.what}, apart from the features"
            )
    numeric = side is not None and side.numeric
    shape = EntryShape(
        names,
        None if numeric else field,
        str(definition.get("format") or "json"),
        target_field=field if numeric else None,
    )
    return Feeding(shape, kind, incarnation, selectors)


@dataclass(frozen=True)
class Host:
    """What the consumers of one process share: the store and the sources' records in it, the
    applier chunks are handed to, the metrics, the name the process holds leases by, and how
    many chunks a target may have unapplied before its sources pause
    (``SIFT_SOURCE_MAX_PENDING``)."""

    store: SelectorStore
    sources: SourceStore
    applier: Applier
    metrics: Metrics
    holder: str
    max_pending: int


class Consumer:
    """Consumes one source while its task runs (cancelled when the lease is lost or the
    source deleted)."""

    def __init__(self, name: str, definition: dict[str, Any], bus: Bus, host: Host) -> None:
        self.name = name
        self.definition = definition
        self.id = str(definition["id"])
        self.url = str(definition["url"])
        self.target = Target.of(definition["into"])
        self.batch_rows = int(definition["batch_rows"])
        self.batch_bytes = int(definition.get("batch_bytes") or DEFAULT_BATCH_BYTES)
        self.batch_s = int(definition["batch_ms"]) / 1000
        self.on_reset = str(definition.get("on_reset") or "stop")
        self.bus = bus
        self.store, self.sources, self.applier = host.store, host.sources, host.applier
        self.metrics, self.holder, self.max_pending = host.metrics, host.holder, host.max_pending
        self.state = "starting"
        self.last_error: str | None = None
        self.lag: dict[str, int | None] = {}
        self._appended: collections.deque[str] = collections.deque()
        self._rates: collections.deque[tuple[float, int]] = collections.deque()
        self._status_at = 0.0
        self._feeding: Feeding | None = None
        #: The batch being read (and converted) ahead of each partition: after which
        #: position, and the read.
        self._ahead: dict[str, tuple[str, asyncio.Task[Batch]]] = {}
        #: A bus whose partitions the processes share (a lease each, ``_claim``), and the
        #: partitions this one holds.
        self.shared = bus.shared
        self.owned: list[str] = []
        self._claimed_at = 0.0
        #: When each partition was last checked for a reset (this connection).
        self._checked: dict[str, float] = {}
        self.checker = Checker(
            name, self.id, self.target, self.on_reset, bus, host.sources, host.metrics
        )

    async def run(self) -> None:
        """Consume until cancelled, or until the source can no longer feed its target."""
        backoff = FIRST_BACKOFF_SECONDS
        connected = False
        try:
            while True:
                try:
                    if not connected:
                        await self.bus.connect()
                        connected = True
                        self._checked = {}
                    await self._step()
                    backoff = FIRST_BACKOFF_SECONDS
                    continue
                except (CannotFeed, Gone, NotFound) as exc:
                    await self._say("failed", str(exc))
                    log.warning("source '%s' stopped: %s", self.name, self.last_error)
                    return
                except BusUnavailable as exc:
                    self._drop_ahead()
                    connected = False
                    # Unknown while the bus does not answer (0 would say it was caught up).
                    self.lag = dict.fromkeys(self.lag)
                    await self.bus.close()
                    why = f"{exc}; retrying in {backoff:g} s"
                except Unavailable as exc:
                    why = f"Sift's Redis does not answer ({exc.detail}); retrying in {backoff:g} s"
                except (Moved, StaleMeta):
                    self._feeding = None  # read the position (and the target) again
                    self._drop_ahead()
                    continue
                except Exception as exc:
                    # Said, not swallowed with the task: the service tries it again later.
                    log.exception("source '%s' stopped by an unexpected error", self.name)
                    with contextlib.suppress(SiftError):
                        await self._say(
                            "failed",
                            f"an unexpected error stopped it ({type(exc).__name__}); it is "
                            "tried again in 30 s",
                        )
                    return
                self._drop_ahead()
                await self._retry(why, backoff)
                backoff = min(backoff * 2, MOST_BACKOFF_SECONDS)
        finally:
            self._drop_ahead()
            await self.bus.close()
            if self.shared:
                await self._let_go()

    async def _let_go(self) -> None:
        """A shared source's partitions released (and this process no longer counted), so
        that the others take them at once rather than when the leases end."""
        owned, self.owned = self.owned, []
        with contextlib.suppress(SiftError, asyncio.CancelledError):
            for partition in owned:
                await self.sources.release_lease(self.name, self.holder, partition)
            await self.sources.leave(self.name, self.holder)

    async def _claim(self, partitions: list[str]) -> list[str]:
        """The partitions of a shared source this process reads: those whose leases it renewed,
        and free ones taken, up to its share (all of them over the processes consuming it,
        rounded up); beyond its share it lets the last go. Called between batches, so a
        partition let go has no read or commit of this process in flight: it stops before
        another takes it (and a commit racing a takeover finds its position moved anyway)."""
        if time.monotonic() - self._claimed_at < CLAIM_EVERY_SECONDS:
            return self.owned
        self._claimed_at = time.monotonic()
        members = await self.sources.join(self.name, self.holder, PARTITION_LEASE_MS)
        share = -(-len(partitions) // max(members, 1))
        kept = []
        for partition in self.owned:
            if partition in partitions and await self.sources.renew_lease(
                self.name, self.holder, PARTITION_LEASE_MS, partition
            ):
                kept.append(partition)
            else:
                self._drop_ahead(partition)
        while len(kept) > share:
            partition = kept.pop()
            self._drop_ahead(partition)
            await self.sources.release_lease(self.name, self.holder, partition)
        for partition in partitions:
            if len(kept) >= share:
                break
            if partition not in kept and await self.sources.take_lease(
                self.name, self.holder, PARTITION_LEASE_MS, partition
            ):
                kept.append(partition)
        if sorted(kept) != sorted(self.owned):
            log.info("source '%s': this process reads partitions %s", self.name, sorted(kept))
        self.owned = sorted(kept, key=lambda p: (len(p), p))
        self.bus.keep(self.owned)
        self.lag = {p: lag for p, lag in self.lag.items() if p in self.owned}
        return self.owned

    async def _retry(self, why: str, backoff: float) -> None:
        with contextlib.suppress(SiftError):
            await self._say("retrying", why)
        log.warning("source '%s': %s", self.name, self.last_error)
        await asyncio.sleep(backoff)

    async def _step(self) -> None:
        """One batch of each partition (or a pause while the target is behind)."""
        if self._feeding is None:
            self._feeding = await describe_target(self.store, self.target, self.definition)
        progress = await self._progress()
        partitions = list(await self.bus.partitions())
        if self.shared:
            partitions = await self._claim(partitions)
            if not partitions:  # the others hold them all: wait for a share
                await self._maybe_status(progress)
                await asyncio.sleep(CLAIM_EVERY_SECONDS / 4)
                return
        if await self._behind():
            if self.state != "paused":
                await self._say("paused", None)
            await asyncio.sleep(PAUSE_POLL_SECONDS)
            await self._maybe_status(progress)
            return
        readable = [p for p in partitions if p not in progress.halted]
        if readable:
            progress = await self._partitions_step(readable, progress)
        halted = {p: e for p, e in progress.halted.items() if p in partitions}
        if halted:
            reason = halted_reason(self.name, halted)
            if self.state != "reset" or self.last_error != reason:
                await self._say("reset", reason)
            if len(halted) == len(partitions):
                await asyncio.sleep(HALTED_POLL_SECONDS)
        elif self.state != "running":
            await self._say("running", None)
        await self._maybe_status(progress)

    async def _partitions_step(self, partitions: list[str], progress: Progress) -> Progress:
        """One batch of each of ``partitions``: a partition without a position first gets
        its start; the others are read and committed side by side (each commit is fenced by
        its own partition's position, so they need no order between them, and a partition
        whose batch is ready is committed while another's is still read). Every one is seen
        to its end (a commit is never cut short); the first failure, in partition order, is
        then raised. The source's progress after them."""
        reading = []
        for partition in partitions:
            if partition in progress.positions:
                reading.append(partition)
            else:
                progress = await self._start(partition, progress)
        done = await asyncio.gather(
            *(self._partition_step(p, progress) for p in reading), return_exceptions=True
        )
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome
        moved = [outcome for outcome in done if isinstance(outcome, Progress)]
        if len(moved) <= 1:
            return moved[0] if moved else progress
        # Each knows its own partition's move: the document holds them all.
        return await self._progress()

    async def _progress(self) -> Progress:
        """The source's committed progress; Gone once the source was deleted (or created
        again: another id)."""
        progress = await self.sources.progress(self.name, self.target)
        if progress is None or progress.id != self.id:
            raise Gone(f"source '{self.name}' was deleted")
        return progress

    async def _start(self, partition: str, progress: Progress) -> Progress:
        """The position ``partition`` is first read after (the source's start, or where an
        operator's restart said)."""
        option = progress.starts.get(partition) or str(self.definition["start"])
        start = await self.bus.start(partition, option)
        before = counted_from(start.before, progress)
        move = PartitionMove(partition, "", start.position, before, start.epoch)
        progress = await self.sources.move(self.name, self.id, self.target, move)
        self._checked[partition] = time.monotonic()
        return progress

    async def _partition_step(self, partition: str, progress: Progress) -> Progress | None:
        """One batch of ``partition`` read and committed, or a reset met; the source's
        progress as that left it (None: nothing moved)."""
        assert self._feeding is not None
        position = progress.positions[partition]
        if time.monotonic() - self._checked.get(partition, -CHECK_EVERY_SECONDS) >= (
            CHECK_EVERY_SECONDS
        ):
            checked = await self._check(partition, position, progress)
            if checked.positions.get(partition) != position or partition in checked.halted:
                return checked  # restarted or stopped at a reset: the next step goes on
        batch = await self._gather(partition, position, self._feeding.shape)
        if not batch.entries:
            return None
        return await self._commit(partition, position, batch, self._feeding)

    async def _check(self, partition: str, position: str, progress: Progress) -> Progress:
        """Check ``partition`` for a reset (``Checker``); what was read ahead of a reset met
        is dropped."""
        checked = await self.checker.check(partition, position, progress)
        self._checked[partition] = time.monotonic()
        if checked.positions.get(partition) != position or partition in checked.halted:
            self._drop_ahead(partition)
        return checked

    async def _gather(self, partition: str, after: str, shape: EntryShape) -> Batch:
        """The batch after ``after``, converted for ``shape``: the one read and converted
        ahead while the previous batch was committed, if it was read from there; and the
        next one read ahead (a batch in memory besides the one being committed, at most).
        Converting ahead overlaps the conversion with the commit's round trip to Redis."""
        ahead = self._ahead.pop(partition, None)
        if ahead is not None and ahead[0] == after:
            batch = await ahead[1]
        else:
            if ahead is not None:
                ahead[1].cancel()
            batch = await self._read_batch(partition, after, shape)
        if batch.entries:
            after = batch.entries[-1].position
            task = asyncio.create_task(self._read_batch(partition, after, shape))
            self._ahead[partition] = (after, task)
        return batch

    def _drop_ahead(self, partition: str | None = None) -> None:
        """Forget the batches read ahead (of one partition: it was let go; of all: the
        position moved, or the bus failed)."""
        if partition is None:
            dropped, self._ahead = list(self._ahead.values()), {}
        else:
            one = self._ahead.pop(partition, None)
            dropped = [] if one is None else [one]
        for _after, task in dropped:
            task.cancel()
            # Its failure, if any, is the next read's to meet.
            task.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def _read_batch(self, partition: str, after: str, shape: EntryShape) -> Batch:
        """Up to ``batch_rows`` entries and about ``batch_bytes`` after ``after`` (what came
        within ``batch_ms`` of the first, waiting at most that long for the first), converted
        for ``shape``."""
        entries = await self._read_entries(partition, after)
        if not entries:
            return Batch(entries, shape, None)
        # Confirmed read from the partition the source reads, while it is converted.
        confirming = asyncio.ensure_future(self.bus.confirm(partition))
        try:
            converted = await _convert(shape, entries)
        except BaseException:
            confirming.cancel()
            raise
        await confirming  # its failure (a reset) is the batch's
        return Batch(entries, shape, converted)

    async def _read_entries(self, partition: str, after: str) -> list[BusEntry]:
        budget = self.batch_bytes
        entries = await self.bus.read(partition, after, self.batch_rows, budget, self.batch_s)
        if not entries:
            return entries
        size = sum(entry.size for entry in entries)
        deadline = time.monotonic() + self.batch_s
        while len(entries) < self.batch_rows and size < budget:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            more = await self.bus.read(
                partition,
                entries[-1].position,
                self.batch_rows - len(entries),
                budget - size,
                left,
            )
            if not more:
                break
            entries += more
            size += sum(entry.size for entry in more)
        return entries

    async def _commit(
        self, partition: str, expected: str, batch: Batch, feeding: Feeding
    ) -> Progress | None:
        """Commit ``batch`` (its rows, rejects and position) and hand its chunk to the
        applier; the source's progress as the commit left it."""
        entries = batch.entries
        converted = batch.converted
        if converted is None or batch.shape is not feeding.shape:  # the target changed since
            converted = await _convert(feeding.shape, entries)
        rows = converted.rows
        payload, chunk = None, None
        if len(rows):
            chunk = feeding.kind.from_entries(rows, converted.labels or [])
            payload = encode_chunk(chunk)
        step = SourceStep(
            self.name,
            self.id,
            partition,
            expected,
            entries[-1].position,
            len(entries),
            converted.rejects,
        )
        entry = None
        if payload is not None:
            entry = Entry(payload, len(rows), incarnation=feeding.incarnation)
        if self.state in ("starting", "retrying"):
            # Said before the commit: whoever reads what it committed reads this state too.
            await self._say("running", None)
        committed = await self.sources.commit(self.target, step, entry)
        self.metrics.source_rows.labels(self.name).inc(len(rows))
        self.metrics.source_rejected.labels(self.name).inc(len(converted.rejects))
        self._rates.append((time.monotonic(), len(rows)))
        if committed.log_id is None or chunk is None or payload is None:
            return committed.progress
        # In log order (commits of partitions side by side may answer out of it).
        bisect.insort(self._appended, committed.log_id, key=parse_stream_id)
        fed: list[tuple[str, str | None]] = [(self.target.name, feeding.incarnation)]
        if self.target.kind == "stream":
            attached = [Attachment.parse(s, v) for s, v in committed.attached]
            fed = [
                (attachment.selector, attachment.incarnation)
                for attachment in attached
                if compare_stream_ids(attachment.start, committed.log_id) < 0
            ]
        self.applier.appended(committed.log_id, chunk, len(payload), fed)
        return committed.progress

    async def _behind(self) -> bool:
        """Whether more than ``max_pending`` of the chunks this consumer appended wait for
        the target (every selector applying it)."""
        if len(self._appended) <= self.max_pending:
            return False
        assert self._feeding is not None
        cursors = []
        for selector, _incarnation in self._feeding.selectors:
            with contextlib.suppress(NotFound):
                cursors.append((await self.store.registry.get_head(selector)).cursor)
        if not cursors:
            self._appended.clear()
            return False
        lowest = min(cursors, key=parse_stream_id)
        while self._appended and compare_stream_ids(self._appended[0], lowest) <= 0:
            self._appended.popleft()
        return len(self._appended) > self.max_pending

    async def _maybe_status(self, progress: Progress) -> None:
        if time.monotonic() - self._status_at >= STATUS_EVERY_SECONDS:
            positions = progress.positions
            if self.shared:
                positions = {p: v for p, v in positions.items() if p in self.owned}
                await self.bus.committed(positions)
            for partition, position in positions.items():
                # A bus that does not answer is met as a read's failure would be (the state
                # says so, the lag is unknown).
                self.lag[partition] = await self.bus.lag(
                    partition, position, progress.entries, progress.before.get(partition)
                )
                known = self.lag[partition]
                if known is not None:
                    self.metrics.source_lag.labels(self.name, partition).set(known)
            await self._write_status()

    async def _say(self, state: str, error: str | None) -> None:
        self.state = state
        self.last_error = None if error is None else scrub(error, self.url)
        await self._write_status()

    def rows_per_second(self) -> float:
        now = time.monotonic()
        while self._rates and now - self._rates[0][0] > RATE_WINDOW_SECONDS:
            self._rates.popleft()
        if not self._rates:
            return 0.0
        span = max(now - self._rates[0][0], 1.0)
        return sum(rows for _, rows in self._rates) / span

    async def _write_status(self) -> None:
        self._status_at = time.monotonic()
        await self.sources.write_status(
            self.name,
            {
                "id": self.id,
                "state": self.state,
                "last_error": self.last_error,
                "holder": self.holder,
                "lag": self.lag,
                "rows_per_second": round(self.rows_per_second(), 1),
                "at": time.time(),
            },
            self.holder if self.shared else None,
        )


async def _convert(shape: EntryShape, entries: list[BusEntry]) -> Rows:
    """Entries as rows: small batches on the event loop, large ones in a worker thread."""
    if len(entries) * shape.width <= 20_000:
        return shape.convert(entries)
    return await asyncio.to_thread(shape.convert, entries)
