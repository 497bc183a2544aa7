"""Independent parts of one update computed on the machine's cores, and what they cost.

An update of a resampled method folds a chunk into the whole stream's state and into each
stored subsample with its rows: computations that read only the chunk and their own state, so
they may run at once (``ResampledMethod.update_with_subsamples``). ``run_parts`` runs them on
``threads()`` threads (the caller's and a shared pool's), each with the process's BLAS threads;
with one thread, or one part, they run in order on the caller's. The results are the same
either way, to the bit: each part computes what it would alone.

A replay redoes the same parts the same way, so what it will take is not the caller's CPU (the
pool's threads did some of the work) nor the time on the clock (a busy machine's waits are not
redone): ``counting_cpu`` adds, for every parallel section, how much longer than the caller's
own parts the section keeps the cores busy (the longest-first schedule of the parts' CPU over
the threads), and takes off the work a replay does not redo (``not_replayed``: the kept
subsample scores, which a replay takes from the version it rebuilds); the applier's replay
budget counts the caller's thread CPU with that adjustment.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar, cast

T = TypeVar("T")

_lock = threading.Lock()
_threads = 1
_pool: ThreadPoolExecutor | None = None
_local = threading.local()


def configure(threads: int) -> None:
    """Let one update use ``threads`` threads for its parts (at least 1; the process's start
    sets it from ``SIFT_UPDATE_THREADS``)."""
    global _threads, _pool
    if threads < 1:
        raise ValueError(f"an update needs at least one thread; got {threads}")
    with _lock:
        if threads != _threads and _pool is not None:
            _pool.shutdown(wait=False)
            _pool = None
        _threads = threads


def threads() -> int:
    """The threads one update may use for its parts."""
    return _threads


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_threads - 1, thread_name_prefix="sift-part")
        return _pool


@dataclass
class CpuLedger:
    """What a replay of an update would redo beside the CPU of the thread that ran it
    (``counting_cpu``): the seconds its parallel sections kept the cores busy beyond that
    thread's share, and the seconds of work a replay does not redo (``not_replayed``)."""

    beyond_caller: float = 0.0
    not_redone: float = 0.0

    @property
    def adjustment(self) -> float:
        """Seconds to add to the thread's CPU for what a replay redoes."""
        return self.beyond_caller - self.not_redone


def not_replayed(seconds: float) -> None:
    """Tell the calling thread's ledger (``counting_cpu``) that ``seconds`` of its CPU went to
    work a replay does not redo."""
    ledger: CpuLedger | None = getattr(_local, "ledger", None)
    if ledger is not None:
        ledger.not_redone += seconds


@contextlib.contextmanager
def counting_cpu() -> Iterator[CpuLedger]:
    """Count, for the calling thread, what a replay would redo beside its own CPU."""
    ledger = CpuLedger()
    outer = getattr(_local, "ledger", None)
    _local.ledger = ledger
    try:
        yield ledger
    finally:
        _local.ledger = outer
        if outer is not None:
            outer.beyond_caller += ledger.beyond_caller
            outer.not_redone += ledger.not_redone


def makespan(costs: Sequence[float], workers: int) -> float:
    """How long ``workers`` threads take for parts of these CPU costs, longest first, each
    to the thread with the least work so far."""
    loads = [0.0] * max(1, min(workers, len(costs)))
    for cost in sorted(costs, reverse=True):
        least = loads.index(min(loads))
        loads[least] += cost
    return max(loads, default=0.0)


class _Section:
    """Parts shared out to the threads that take them: each takes the next part not taken,
    until none is left; the caller waits for the parts, not for the threads (a pool thread
    busy elsewhere finds nothing left when it comes)."""

    def __init__(self, calls: Sequence[Callable[[], object]]) -> None:
        self.calls = calls
        self.results: list[object] = [None] * len(calls)
        self.costs = [0.0] * len(calls)
        self.errors: dict[int, BaseException] = {}
        self._next = 0
        self._left = len(calls)
        self._lock = threading.Lock()
        self.done = threading.Event()

    def take(self) -> float:
        """Run parts until none is left untaken; the CPU seconds of those run here."""
        ran = 0.0
        while True:
            with self._lock:
                index = self._next
                if index >= len(self.calls):
                    return ran
                self._next += 1
            started = time.thread_time()
            try:
                self.results[index] = self.calls[index]()
            except BaseException as exc:
                self.errors[index] = exc
            cost = time.thread_time() - started
            self.costs[index] = cost
            ran += cost
            with self._lock:
                self._left -= 1
                if not self._left:
                    self.done.set()


def run_parts(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Every call's result, in order: shared out to ``threads()`` threads (the caller's among
    them, taking the first) when there are several parts, else one after another. Put the
    longest part first. The exception of the first part that raised is raised once every
    part has ended."""
    if _threads < 2 or len(calls) < 2:
        return [call() for call in calls]
    section = _Section(calls)
    pool = _executor()
    for _ in range(min(_threads, len(calls)) - 1):
        try:
            pool.submit(section.take)
        except RuntimeError:  # reconfigured meanwhile: this thread takes what is left
            break
    own = section.take()
    section.done.wait()
    if section.errors:
        raise section.errors[min(section.errors)]
    ledger: CpuLedger | None = getattr(_local, "ledger", None)
    if ledger is not None:
        ledger.beyond_caller += max(0.0, makespan(section.costs, _threads) - own)
    return cast(list[T], section.results)
