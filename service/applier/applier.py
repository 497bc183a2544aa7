"""``Applier``, the applier's door: what the rest of the service asks of it, and the parts it
composes (private; each is given what it needs of the state the applier owns).

What the applier owns, and shares with the parts that need it: the drains running here
and whether it is closing (``Running``), the states held (bounded in bytes), the waiters, the
known heads and the chunks handed over (``service.applier.waiting``). The parts:

- ``Scheduler``: kicks, back-off, forgiveness, the sweeper;
- ``Checkpointer``: checkpoints written and planned;
- ``Committer``: updates computed and committed, entries rejected, states rebuilt, commit
  observers told;
- ``DirectPath``: waited chunks handed to a drain;
- ``DrainLoop``: the drain loop;
- ``Waits``: waiting on commits and checkpoints; commits heard from every replica.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from service.applier.basis import Basis
from service.applier.checkpoints import Checkpointer
from service.applier.committing import Committer, Observer
from service.applier.direct import DirectPath
from service.applier.drain import DrainLoop
from service.applier.scheduling import Scheduler
from service.applier.state import HeldState, Running
from service.applier.waiting import HandOver, KnownHeads, Settled, Waiters
from service.applier.waits import CHECKPOINT_NOW_SECONDS, Waits
from service.cache import LRU
from service.config import Settings
from service.metrics import Metrics
from service.store.records import AppendOutcome, Entry, Head
from service.store.redis_store import SelectorStore
from service.wire.kinds import Chunk

log = logging.getLogger("sift.applier")

#: Most selectors whose state one process keeps in memory (their bytes are bounded too).
HELD_STATES_MAX = 256


class Applier:
    """Drives the appliers of this process; any replica may apply any selector.

    Poison entries never jam a selector: an entry whose update fails because of what it holds
    is rejected (moved aside with its reason, see ``Commits.commit``) and the log goes
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
        self._running = Running()
        self._held: LRU[str, HeldState] = LRU(
            HELD_STATES_MAX,
            max_weight=max(settings.hot_state_bytes, 1),
            weigh=lambda held: held.state_bytes,
        )
        # POSTs waiting on their entries, resolved by the commits that cover them (this
        # process's, and every replica's as announced: ``Waits.listen_forever``).
        self._waiters = Waiters()
        # The heads readers saw, kept while no commit notice moves them.
        self._heads = KnownHeads()
        # Chunks appended here, decoded, for this process's drains (the log stays the truth).
        self._handed = HandOver()
        basis = Basis(
            store,
            settings,
            metrics,
            self._running,
            self._held,
            self._waiters,
            self._heads,
            self._handed,
        )
        self._scheduler = Scheduler(basis, self._drain, self.forget)
        self._checkpoints = Checkpointer(basis, self._scheduler.kick)
        self._committer = Committer(basis)
        self._direct = DirectPath(basis, self._committer, self._checkpoints)
        self._drains = DrainLoop(
            basis, self._scheduler, self._checkpoints, self._committer, self._direct
        )
        self._waits = Waits(basis, self._scheduler, self._checkpoints, self._drains)

    async def _drain(self, name: str) -> None:
        await self._drains.drain(name)

    # -- the door ----------------------------------------------------------------------------

    @property
    def heads(self) -> KnownHeads:
        """The heads readers saw, kept until a commit notice moves them (readers share them)."""
        return self._heads

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` of every commit of this process, right after it (the selector, the
        new head, the update): it must return at once and not raise."""
        self._committer.observers.append(observer)

    def appended(
        self,
        log_id: str,
        chunk: Chunk | None,
        payload_bytes: int,
        selectors: Iterable[tuple[str, str | None]],
    ) -> None:
        """Entry ``log_id``, just appended here, feeds each of ``selectors`` (a name and the
        incarnation it was appended to): its ``chunk``, decoded, is handed to this process's
        drains so that they fold it in without reading its payload back (None: nothing to hand
        over, a duplicate), and each selector is kicked."""
        for name, incarnation in selectors:
            if chunk is not None:
                self._handed.put(name, log_id, chunk, payload_bytes)
            self._scheduler.kick(name, incarnation)

    async def try_direct(
        self, name: str, incarnation: str, chunk: Chunk, entry: Entry
    ) -> AppendOutcome | None:
        """The direct path: a waited chunk applied by this process's drain of ``name`` (lease
        and state held) before anything of it is written, then appended and committed in one
        script; the entry's outcome, applied. None: it did not go so, nothing of it was
        written, and the caller appends it as usual (``DirectPath.submit``)."""
        return await self._direct.submit(name, incarnation, chunk, entry)

    async def wait_applied(
        self, name: str, log_id: str, timeout_s: float, incarnation: str | None = None
    ) -> Settled | None:
        """Wait until a commit of ``name`` covers entry ``log_id``; where it got to (None on
        timeout; NotFound once the name holds another incarnation than ``incarnation``)."""
        return await self._waits.wait_applied(name, log_id, timeout_s, incarnation)

    async def settle(self, name: str, timeout_s: float) -> bool:
        """Wait (bounded) until everything appended to ``name`` so far is applied; False if
        ``timeout_s`` passed first."""
        return await self._waits.settle(name, timeout_s)

    async def checkpoint_now(self, name: str, timeout_s: float = CHECKPOINT_NOW_SECONDS) -> Head:
        """Apply what is pending and bring the checkpoint to the current version; the head
        (a version or a few behind when the lease stays taken for ``timeout_s``)."""
        return await self._waits.checkpoint_now(name, timeout_s)

    def holds(self, name: str) -> HeldState | None:
        """The state this process holds of ``name`` in memory (None: not held)."""
        return self._held.get(name)

    def forget(self, name: str) -> None:
        """Let go of what this process holds of ``name`` (deleted, or detached from its
        stream: a drain lingering on the stream's log stops, and the next looks at its own)."""
        self._running.stop_lingering(name)
        self._held.pop(name)
        self._handed.forget(name)
        self._waiters.forget(name)
        self._heads.forget(name)
        self._scheduler.forget(name)
        self._checkpoints.forget(name)

    async def run(self) -> None:
        """The applier's background work, until ``close`` (or cancelled): the sweeper, which
        kicks what nobody waits for (its first sweep recovers what a crashed process left
        unapplied), and the listener of every replica's commits."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._scheduler.sweep_forever(), name="sweeper")
            tasks.create_task(self._waits.listen_forever(), name="commit-listener")

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop every drain; an unfinished update is simply redone later.

        Bounded: a task that does not end within ``timeout_s`` after its cancellation (a
        client library that swallowed it, say) is left behind rather than hanging shutdown.
        """
        self._running.closing = True
        self._scheduler.stop()
        writing = self._checkpoints.stop()
        tasks = [task for task in [*self._running.tasks(), *writing] if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=timeout_s)
            for task in stuck:
                log.warning("task %s did not stop within %.0f s", task.get_name(), timeout_s)
        await self._scheduler.forgive_all()
