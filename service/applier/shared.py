"""What the parts of the applier share (``ApplierShared``): the store, the settings and the
metrics, the drains running in this process, the states it holds (``HeldState``), its waiters,
known heads and hand-over, the commit observers, and whether it is closing. Each part
(``Scheduler``, ``Checkpointer``, ``Committer``, ``DirectPath``, ``DrainLoop``, ``Waits``) owns
the rest of its state itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from service.applier.state import Drain, HeldState
from service.cache import LRU
from service.config import Settings
from service.metrics import Metrics
from service.store.records import Head, SelectorMeta
from service.store.redis_store import SelectorStore
from service.updates import Update
from service.waiting import HandOver, KnownHeads, Waiters
from service.wire.kinds import Chunk

log = logging.getLogger("sift.applier")

#: Most selectors whose state one process keeps in memory (their bytes are bounded too).
HELD_STATES_MAX = 256


class ApplierShared:
    """The applier's shared state (see the module)."""

    def __init__(self, store: SelectorStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        #: This process's drain of each selector it drains.
        self.running: dict[str, Drain] = {}
        #: POSTs waiting on their entries, resolved by the commits that cover them (this
        #: process's, and every replica's as announced: ``Waits.listen_forever``).
        self.waiters = Waiters()
        #: The heads readers saw, kept while no commit notice moves them.
        self.heads = KnownHeads()
        #: Chunks appended here, decoded, for this process's drains (the log stays the truth).
        self.handed = HandOver()
        #: The state of every selector this process applied lately, bounded in bytes.
        self.held: LRU[str, HeldState] = LRU(
            HELD_STATES_MAX,
            max_weight=max(settings.hot_state_bytes, 1),
            weigh=lambda held: held.state_bytes,
        )
        #: Selectors whose drain here should stop lingering: what it watches changed under it
        #: (deleted, or detached from its stream: its entries now come to its own log).
        self.stop_lingering: set[str] = set()
        #: Called right after every commit of this process with the selector, the new head and
        #: the update (the monitor's ``committed``): they must return at once and not raise.
        self.observers: list[Callable[[SelectorMeta, Head, Update], None]] = []
        self.closing = False

    def hand_over(self, name: str, log_id: str, chunk: Chunk, payload_bytes: int) -> None:
        """The chunk of entry ``log_id`` of ``name``, just appended here, decoded: this
        process's applier folds it in without reading its payload back (``HandOver``)."""
        self.handed.put(name, log_id, chunk, payload_bytes)

    def is_current_drain(self, name: str) -> bool:
        """Whether the running task is this process's drain of ``name`` (not one superseded
        by a drain of a newer incarnation)."""
        running = self.running.get(name)
        return running is not None and running.task is asyncio.current_task()

    def forget(self, name: str) -> None:
        """Let go of the shared part of what this process holds of ``name``; a drain of it
        lingering here stops."""
        running = self.running.get(name)
        if running is not None and not running.task.done():
            self.stop_lingering.add(name)
        self.held.pop(name)
        self.handed.forget(name)
        self.waiters.forget(name)
        self.heads.forget(name)


class Part:
    """A part of the applier: the shared state, and the store, settings and metrics it holds."""

    def __init__(self, shared: ApplierShared) -> None:
        self.shared = shared
        self.store = shared.store
        self.settings = shared.settings
        self.metrics = shared.metrics
