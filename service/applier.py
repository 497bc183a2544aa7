"""The applier: folds a selector's pending log entries into its state, exactly once.

One applier per selector at a time, across every replica: it holds the selector's lease and
a fencing token. It reads all entries after the committed cursor, coalesces them into one
update, computes off the event loop, and commits state + version + cursor with a
compare-and-set that rejects a stale applier (DESIGN.md, "The write path", steps 3 and 5).
Recovery after a crash is the same code: whatever is in the log after the cursor is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from service.algorithms import get_method
from service.algorithms.base import (
    SEGMENT_PREFIX,
    LabelledMethod,
    Matrix,
    Method,
    State,
    Stream,
    StreamingMethod,
)
from service.algorithms.labels import LabelledRows, join
from service.config import Settings
from service.errors import CodecError, NotFound, StaleApplier, Unavailable
from service.metrics import Metrics
from service.store.chunks import decode_chunk
from service.store.codec import decode_state, encode_array, encode_state
from service.store.records import Head, Lease, LogEntry, SelectorMeta
from service.store.redis_store import SelectorStore

log = logging.getLogger("sift.applier")

#: Selectors whose last committed state this process keeps to skip reading it back.
LAST_STATE_CACHE_SIZE = 16


def stream_id(text: str) -> tuple[int, int]:
    """A Redis Stream ID ``"ms-seq"`` as a tuple that orders like the stream."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def is_applied(head: Head, log_id: str) -> bool:
    return stream_id(head.cursor) >= stream_id(log_id)


def coalesce(
    chunks: Sequence[Matrix | LabelledRows], stream: Stream = "rows"
) -> Matrix | LabelledRows:
    """Join chunks into one update, in log order.

    Rows are stacked (dense if all are dense, else CSR: never densify sparse); feature columns
    are put side by side, which a ``"columns"`` method processes exactly as one by one;
    labelled rows keep their labels (classes in order of first appearance).
    """
    if len(chunks) == 1:
        return chunks[0]
    if any(isinstance(chunk, LabelledRows) for chunk in chunks):
        if not all(isinstance(chunk, LabelledRows) for chunk in chunks):
            raise CodecError("a selector's log mixes labelled and unlabelled chunks")
        return join(cast(Sequence[LabelledRows], chunks))
    matrices = cast(Sequence[Matrix], chunks)
    if stream == "columns":
        return np.hstack([c if isinstance(c, np.ndarray) else c.toarray() for c in matrices])
    if any(sp.issparse(chunk) for chunk in matrices):
        return sp.vstack([sp.csr_matrix(chunk) for chunk in matrices], format="csr")
    return np.vstack(matrices)


@dataclass(frozen=True)
class Batch:
    """Log entries taken into one update, bounded in count and rows."""

    entries: list[LogEntry]

    @property
    def row_count(self) -> int:
        return sum(entry.rows for entry in self.entries)


def compute_update(
    meta: SelectorMeta, raw_state: dict[str, bytes], payloads: list[bytes]
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Decode state and chunks, run the method's update on the coalesced rows, encode.

    Returns the encoded state and the new immutable segments (``SEGMENT_PREFIX`` fields, by
    id). Pure CPU work (checksums, numerics): the applier runs it in a worker thread.
    """
    method = get_method(meta.method)
    state = decode_state(raw_state)
    chunks = [decode_chunk(payload) for payload in payloads]
    new_state = run_update(method, state, meta.params, coalesce(chunks, method.stream))
    segments = {
        field.removeprefix(SEGMENT_PREFIX): encode_array(np.asarray(value))
        for field, value in new_state.items()
        if field.startswith(SEGMENT_PREFIX)
    }
    kept = {f: v for f, v in new_state.items() if not f.startswith(SEGMENT_PREFIX)}
    return encode_state(kept), segments


def run_update(
    method: Method, state: State, params: dict[str, Any], chunk: Matrix | LabelledRows
) -> State:
    """The method's update on a chunk of the kind it takes (labelled or not)."""
    if isinstance(chunk, LabelledRows) != method.labelled:
        raise CodecError(
            f"method {method.name} takes {'labelled' if method.labelled else 'unlabelled'} "
            "chunks; the log holds the other kind"
        )
    if isinstance(chunk, LabelledRows):
        return cast(LabelledMethod, method).update(state, params, chunk)
    return cast(StreamingMethod, method).update(state, params, chunk)


class Applier:
    """Drives the appliers of this process; any replica may apply any selector."""

    def __init__(self, store: SelectorStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self._running: dict[str, asyncio.Task[None]] = {}
        # Set (and replaced) on every commit made here, so local waiters wake at once instead
        # of at their next poll; waiters still poll for commits made by other replicas.
        self._committed: dict[str, asyncio.Event] = {}
        # The encoded state this process committed last, per selector: the next update here
        # starts from it instead of reading it back. Keyed by the immutable state key.
        self._last_state: OrderedDict[str, tuple[str, dict[str, bytes]]] = OrderedDict()
        self._closing = False

    def kick(self, name: str) -> None:
        """Start draining ``name`` in the background unless this process already is."""
        if self._closing:
            return
        task = self._running.get(name)
        if task is not None and not task.done():
            return
        task = asyncio.create_task(self._drain_logged(name), name=f"drain:{name}")
        self._running[name] = task

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop the sweeper and every drain; an unfinished update is simply redone later.

        Bounded: a task that does not end within ``timeout_s`` after its cancellation (a
        client library that swallowed it, say) is left behind rather than hanging shutdown.
        """
        self._closing = True
        tasks = [task for task in self._running.values() if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=timeout_s)
            for task in stuck:
                log.warning("task %s did not stop within %.0f s", task.get_name(), timeout_s)

    async def _drain_logged(self, name: str) -> None:
        try:
            await self.drain(name)
        except (NotFound, Unavailable) as exc:
            log.info("drain of %s stopped: %s", name, exc.detail)
        except Exception:
            log.exception("drain of %s failed", name)

    async def drain(self, name: str) -> None:
        """Apply everything pending for ``name`` while holding its lease.

        After releasing the lease, look once more: an entry appended while we were finishing
        would otherwise wait for the sweeper, because its poster found the lease taken.
        """
        while True:
            lease = await self.store.acquire_lease(name, self.settings.lease_ms)
            if lease is None:
                return
            try:
                head = await self._apply_all(name, lease)
            finally:
                with contextlib.suppress(Unavailable):
                    await self.store.release_lease(lease)
            if not await self.store.pending(name, head.cursor, 1):
                return

    async def _apply_all(self, name: str, lease: Lease) -> Head:
        """Apply batches until the log is empty; returns the last head this applier saw."""
        meta = await self.store.get_meta(name)
        keepalive = asyncio.create_task(self._keep_lease(lease))
        try:
            # Read the head once: from then on, each commit returns the next one.
            head = await self.store.get_head(name)
            while True:
                batch = await self._next_batch(meta, head)
                if batch is None:
                    return head
                head = await self._apply_batch(meta, lease, head, batch)
        finally:
            keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keepalive

    async def _next_batch(self, meta: SelectorMeta, head: Head) -> Batch | None:
        coalesces = get_method(meta.method).coalesces
        limit = self.settings.max_coalesce_entries if coalesces else 1
        entries = await self.store.pending(meta.name, head.cursor, limit)
        if not entries:
            return None
        taken: list[LogEntry] = []
        total = 0
        for entry in entries:
            # Always take the first entry, even alone above the bound: it must make progress.
            if taken and total + entry.rows > self.settings.max_coalesce_rows:
                break
            taken.append(entry)
            total += entry.rows
        return Batch(taken)

    async def _apply_batch(
        self, meta: SelectorMeta, lease: Lease, head: Head, batch: Batch
    ) -> Head:
        started = time.perf_counter()
        cached = self._last_state.pop(meta.name, None)
        if cached is not None and cached[0] == head.state_key:
            raw_state = cached[1]
        else:
            raw_state = await self.store.load_state(meta.name, head)
        payloads = [entry.payload for entry in batch.entries]
        new_state, segments = await asyncio.to_thread(compute_update, meta, raw_state, payloads)
        await self.store.put_segments(meta.name, segments)
        applied_keys = [e.idempotency_key for e in batch.entries if e.idempotency_key]
        try:
            committed_head = await self.store.commit(
                lease,
                expected_version=head.version,
                state=new_state,
                cursor=batch.entries[-1].log_id,
                rows_seen=head.rows_seen + batch.row_count,
                applied_keys=applied_keys,
            )
        except StaleApplier:
            self.metrics.stale_commits.inc()
            raise
        self.metrics.observe_apply(
            meta.method, len(batch.entries), batch.row_count, time.perf_counter() - started
        )
        self._last_state[meta.name] = (committed_head.state_key, new_state)
        while len(self._last_state) > LAST_STATE_CACHE_SIZE:
            self._last_state.popitem(last=False)
        committed = self._committed.pop(meta.name, None)
        if committed is not None:
            committed.set()
        return committed_head

    async def _keep_lease(self, lease: Lease) -> None:
        """Renew the lease while a long update computes; the fence still guards the commit."""
        interval = self.settings.lease_ms / 3000
        while True:
            await asyncio.sleep(interval)
            if not await self.store.renew_lease(lease, self.settings.lease_ms):
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
            delay = min(delay * 2, 0.1)

    async def sweep_forever(self) -> None:
        """Apply entries that nobody is waiting for (``wait=false``, crashed appliers).

        Runs until ``close``. The flag matters, not only the cancellation: a cancellation that
        lands inside a Redis call may come back as a connection error, which is caught here.
        """
        while not self._closing:
            try:
                for name in await self.store.names_with_pending():
                    self.kick(name)
            except Unavailable as exc:
                log.warning("sweep skipped: %s", exc.detail)
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self.settings.sweep_interval_seconds)
