"""What every part of the applier shares: the store, the settings and the metrics, the drains
running in this process, the states it holds (``Hot``), its waiters and hand-over, the
checkpoints being written or planned, and whether it is closing. The parts build on it in
turn: ``scheduling``, ``checkpoints``, ``drain``, ``waits``, and ``Applier`` on top.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from service.applier.state import DirectChunk, Drain, Hot
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
HOT_STATES_MAX = 256


class ApplierCore:
    """The applier's shared state (see the module)."""

    def __init__(self, store: SelectorStore, settings: Settings, metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self._running: dict[str, Drain] = {}
        # POSTs waiting on their entries, resolved by the commits that cover them (this
        # process's, and every replica's as announced: ``listen_forever``).
        self.waiters = Waiters()
        # The heads readers saw, kept while no commit notice moves them (``listen_forever``).
        self.heads = KnownHeads()
        # Chunks appended here, decoded, for this process's drains (the log stays the truth).
        self.handed = HandOver()
        # The state of every selector this process applied lately, bounded in bytes.
        self._hot: LRU[str, Hot] = LRU(
            HOT_STATES_MAX,
            max_weight=max(settings.hot_state_bytes, 1),
            weigh=lambda hot: hot.state_bytes,
        )
        # Waited chunks handed to this process's drain of their selector (``submit_direct``),
        # and the event that wakes a lingering drain for them.
        self._direct: dict[str, list[DirectChunk]] = {}
        self._direct_arrived: dict[str, asyncio.Event] = {}
        # Selectors whose drain here takes direct chunks now (lease held, state in memory).
        self._direct_open: set[str] = set()
        # A lingering drain's blocked read of its log, kept across direct chunks.
        self._linger_reads: dict[str, asyncio.Future[bool]] = {}
        # A checkpoint being written while the applier goes on, per selector.
        self._checkpointing: dict[str, asyncio.Task[None]] = {}
        # Selectors whose drain here should stop lingering and checkpoint now (a reader asked).
        self._checkpoint_wanted: set[str] = set()
        # Selectors whose drain here should stop lingering: what it watches changed under it
        # (detached from its stream: its entries now come to its own log).
        self._let_go: set[str] = set()
        # Selectors whose state will be due for a checkpoint by age, when nothing else comes.
        self._checkpoint_timers: dict[str, asyncio.TimerHandle] = {}
        self._closing = False
        # Called right after every commit of this process with the selector, the new head and
        # the update (the monitor's ``committed``): they must return at once and not raise.
        self.observers: list[Callable[[SelectorMeta, Head, Update], None]] = []

    def hand_over(self, name: str, log_id: str, chunk: Chunk, payload_bytes: int) -> None:
        """The chunk of entry ``log_id`` of ``name``, just appended here, decoded: this
        process's applier folds it in without reading its payload back (``HandOver``)."""
        self.handed.put(name, log_id, chunk, payload_bytes)

    def _is_current_drain(self, name: str) -> bool:
        """Whether the running task is this process's drain of ``name`` (not one superseded
        by a drain of a newer incarnation)."""
        running = self._running.get(name)
        return running is not None and running.task is asyncio.current_task()
