"""``Applier``, the one entry point: the parts of the applier composed. Each part owns its
state and is an attribute, given the parts it calls when it is built:

- ``shared`` (``ApplierShared``): the store, the drains running here, the states held, the
  waiters, known heads and hand-over, the commit observers;
- ``scheduler`` (``Scheduler``): kicks, back-off, forgiveness, the sweeper;
- ``checkpoints`` (``Checkpointer``): checkpoints written and planned;
- ``committer`` (``Committer``): updates computed and committed, entries rejected, states
  rebuilt;
- ``direct`` (``DirectPath``): waited chunks handed to a drain;
- ``drains`` (``DrainLoop``): the drain loop;
- ``waits`` (``Waits``): waiting on commits and checkpoints.
"""

from __future__ import annotations

import asyncio

from service.applier.checkpoints import Checkpointer
from service.applier.committing import Committer
from service.applier.direct import DirectPath
from service.applier.drain import DrainLoop
from service.applier.scheduling import Scheduler
from service.applier.shared import ApplierShared, log
from service.applier.waits import Waits
from service.config import Settings
from service.metrics import Metrics
from service.store.redis_store import SelectorStore


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
        self.shared = ApplierShared(store, settings, metrics)
        self.scheduler = Scheduler(self.shared, self._drain, self.forget)
        self.checkpoints = Checkpointer(self.shared, self.scheduler.kick)
        self.committer = Committer(self.shared)
        self.direct = DirectPath(self.shared, self.committer, self.checkpoints)
        self.drains = DrainLoop(
            self.shared, self.scheduler, self.checkpoints, self.committer, self.direct
        )
        self.waits = Waits(self.shared, self.scheduler, self.checkpoints, self.drains)

    async def _drain(self, name: str) -> None:
        await self.drains.drain(name)

    def forget(self, name: str) -> None:
        """Let go of what this process holds of ``name`` (deleted, or detached from its
        stream: a drain lingering on the stream's log stops, and the next looks at its own)."""
        self.shared.forget(name)
        self.scheduler.forget(name)
        self.checkpoints.forget(name)

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop every drain; an unfinished update is simply redone later.

        Bounded: a task that does not end within ``timeout_s`` after its cancellation (a
        client library that swallowed it, say) is left behind rather than hanging shutdown.
        """
        self.shared.closing = True
        self.scheduler.stop()
        writing = self.checkpoints.stop()
        tasks = [
            task
            for task in [*(drain.task for drain in self.shared.running.values()), *writing]
            if not task.done()
        ]
        for task in tasks:
            task.cancel()
        if tasks:
            _done, stuck = await asyncio.wait(tasks, timeout=timeout_s)
            for task in stuck:
                log.warning("task %s did not stop within %.0f s", task.get_name(), timeout_s)
        await self.scheduler.forgive_all()
