"""What every part of the applier is built on (``Basis``): the store, the settings, the
metrics, and the state the applier owns and its parts share.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.applier.state import HeldState, Running
from service.applier.waiting import HandOver, KnownHeads, Waiters
from service.cache import LRU
from service.config import Settings
from service.metrics import Metrics
from service.store.redis_store import SelectorStore


@dataclass(frozen=True)
class Basis:
    """The applier's store, settings and metrics, and what it owns: the drains running here
    and whether it is closing (``running``), the states held (bounded in bytes), the waiters,
    the heads known and the chunks handed over. Each part keeps what it needs of it."""

    store: SelectorStore
    settings: Settings
    metrics: Metrics
    running: Running
    held: LRU[str, HeldState]
    waiters: Waiters
    heads: KnownHeads
    handed: HandOver
