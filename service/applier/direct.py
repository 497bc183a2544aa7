"""The direct path: a waited chunk handed to this process's drain of its selector (lease and
state held) is computed before anything of it is written, then appended and committed in one
script, one round trip and one fsync. Whatever cannot go so is appended as usual by its
request.
"""

from __future__ import annotations

import asyncio
import logging
import time

from service import tracing
from service.applier.basis import Basis
from service.applier.checkpoints import Checkpointer
from service.applier.committing import Committer
from service.applier.state import DirectChunk, HeldState
from service.applier.updates import UpdateFailed
from service.errors import SiftError, Unavailable
from service.store.codec import cut_state
from service.store.records import AppendOutcome, Entry, Head, Lease
from service.wire.kinds import Chunk

log = logging.getLogger("sift.applier")

#: A direct commit sends the new state (as the checkpoint) instead of its chunks' payloads
#: when the state is smaller, up to this many bytes (one script writes it whole: a larger
#: state is checkpointed in pieces, in the background, as usual).
DIRECT_STATE_BYTES = 1024 * 1024

#: What a waited request hears when its direct commit's reply was lost.
COMMIT_UNKNOWN = (
    "the chunk's commit got no answer from Redis; retry with the same Idempotency-Key to learn "
    "whether it was applied"
)


class DirectPath:
    """Waited chunks handed to a drain, and applied by it (see the module)."""

    def __init__(self, basis: Basis, committer: Committer, checkpoints: Checkpointer) -> None:
        self.store, self.settings, self.metrics = basis.store, basis.settings, basis.metrics
        self._running = basis.running
        self._held = basis.held
        self.committer = committer
        self.checkpoints = checkpoints
        # Waited chunks handed to this process's drain of their selector, and the event that
        # wakes a lingering drain for them.
        self._queued: dict[str, list[DirectChunk]] = {}
        self._arrived: dict[str, asyncio.Event] = {}
        # Selectors whose drain here takes direct chunks now (lease held, state in memory).
        self._open: set[str] = set()

    def open(self, name: str) -> None:
        """The drain of ``name`` here holds its lease and state: it takes direct chunks."""
        self._open.add(name)

    def waiting(self, name: str) -> bool:
        """Whether direct chunks of ``name`` wait for its drain."""
        return bool(self._queued.get(name))

    def arrival(self, name: str) -> asyncio.Event:
        """Set when a direct chunk of ``name`` arrives (a lingering drain waits on it)."""
        return self._arrived.setdefault(name, asyncio.Event())

    def turn_away(self, name: str) -> None:
        """The chunks waiting for the drain of ``name`` are appended as usual by their
        requests (the log goes first)."""
        _answer(self._queued.pop(name, []), None)

    def close(self, name: str) -> None:
        """The drain of ``name`` ends: it takes no more direct chunks, and those it did not
        take are appended as usual by their requests."""
        self._open.discard(name)
        self._arrived.pop(name, None)
        self.turn_away(name)

    async def submit(
        self, name: str, incarnation: str, chunk: Chunk, entry: Entry
    ) -> AppendOutcome | None:
        """Hand a waited chunk to this process's drain of ``name``, when one holds its lease and
        state (lingering or applying): it computes the chunk before anything is written, then
        appends and commits it in one script (``apply``, by the drain). The entry's
        outcome, applied; None when it did not go so (no such drain here, or it could not take
        the chunk): the caller appends it as usual, and nothing of it was written."""
        running = self._running.live(name)
        if (
            self._running.closing
            or name not in self._open
            or running is None
            or running.incarnation != incarnation
        ):
            return None
        future: asyncio.Future[AppendOutcome | None] = asyncio.get_running_loop().create_future()
        with tracing.span("sift.direct", {"sift.selector": name, "sift.rows": entry.items}) as span:
            self._queued.setdefault(name, []).append(
                DirectChunk(chunk, entry, future, tracing.here())
            )
            arrived = self._arrived.get(name)
            if arrived is not None:
                arrived.set()
            outcome = await future
            tracing.annotate(span, {"sift.applied": outcome is not None})
            return outcome

    async def apply(self, held: HeldState, lease: Lease) -> Head:
        """Apply the waited chunks handed to this drain (``submit``) before anything of
        them is written: compute the update, then append them and commit it in one script
        (``append_and_commit``), so each costs one round trip and one fsync. Whatever cannot
        go so (the script refused: entries pending, a key seen before, the lease or the
        version moved; or the update failed) is answered None and appended as usual by its
        request, and the drain applies it from the log. Returns the head."""
        name = held.meta.name
        # Those whose requests still wait, bounded as a batch is; the rest go next time.
        queued = [item for item in self._queued.pop(name, []) if not item.future.done()]
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
            self._queued[name] = queued[len(live) :] + self._queued.get(name, [])
        if not live:
            return held.head
        links = [item.link for item in live]
        with tracing.applying(name, held.meta.method, rows, links, "direct"):
            return await self._apply_live(held, lease, live, rows)

    async def _apply_live(
        self, held: HeldState, lease: Lease, live: list[DirectChunk], rows: int
    ) -> Head:
        """``apply`` of the chunks taken (``live``, ``rows`` in all)."""
        name = held.meta.name
        try:
            update, computed = await self.committer.compute(
                held, [item.chunk for item in live], False, rows
            )
        except UpdateFailed:
            _answer(live, None)  # appended as usual: the drain finds the culprit
            return held.head
        started = time.perf_counter()
        before = held.head
        payload_bytes = sum(len(item.entry.payload) for item in live)
        # Whichever is smaller goes to Redis: the chunks (logged), or the state they make
        # (the checkpoint, the chunks logged without their payloads).
        as_state = update.state_bytes < min(payload_bytes, DIRECT_STATE_BYTES)
        try:
            state = None
            if as_state:
                state = await asyncio.to_thread(lambda: cut_state(update.state))
            await self.store.checkpoints.put_segments(name, update.segments)
            with tracing.span("sift.commit", {"sift.version": before.version + 1}):
                result = await self.store.commits.append_and_commit(
                    lease,
                    self.committer.next_version(before, before.cursor, rows, update),
                    [item.entry for item in live],
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
        self.committer.announce(held, committed, update, [])
        held.committed(committed, update, 0 if as_state else payload_bytes, computed.replay_seconds)
        if as_state:
            held.checkpointed(committed.version)
        self._held.put(name, held)
        self.metrics.observe_apply(
            held.meta.method, len(live), rows, computed.wall + time.perf_counter() - started
        )
        for item, outcome in zip(live, outcomes, strict=True):
            if not item.future.done():
                item.future.set_result(outcome)
        self.checkpoints.in_background(held, lease)
        return committed


def _fail(items: list[DirectChunk], error: BaseException) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_exception(error)


def _answer(items: list[DirectChunk], outcome: AppendOutcome | None) -> None:
    for item in items:
        if not item.future.done():
            item.future.set_result(outcome)
