"""What the applier holds in memory: a selector's state (``HeldState``), the entries of one update
(``Batch``), a drain running here (``Drain``) and all of them (``Running``), a selector backing
off (``Backoff``), a checkpoint to write (``CheckpointWork``), and whether a head covers an
entry (``is_applied``).

Plain data: no Redis, no tasks started here.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from opentelemetry.trace import SpanContext

from service.algorithms.base import State
from service.applier.checkpoint_policy import CheckpointFacts, Trigger
from service.applier.updates import Folded, Update
from service.store.keys import parse_stream_id
from service.store.records import AppendOutcome, Entry, Head, LogEntry, SelectorMeta
from service.wire.kinds import Chunk

#: One update in this many has its CPU time read (``HeldState.samples_cpu``).
CPU_SAMPLE_EVERY = 16


def is_applied(head: Head, log_id: str) -> bool:
    """Whether the committed cursor has passed ``log_id`` (applied, or rejected)."""
    return parse_stream_id(head.cursor) >= parse_stream_id(log_id)


@dataclass(frozen=True)
class Batch:
    """Log entries taken into one update, bounded in count and rows, and what each folds in:
    its payload, or the decoded chunk this process handed over (``HandOver``)."""

    entries: list[LogEntry]
    folded: list[Folded]
    #: Bytes of every entry's payload in the log (held chunks were read from none).
    sizes: list[int]

    @property
    def items(self) -> int:
        return sum(entry.items for entry in self.entries)

    @property
    def merge(self) -> bool:
        """A merge is applied alone (``_next_batch`` never puts one with other entries)."""
        return self.entries[0].merge

    @property
    def payload_bytes(self) -> int:
        return sum(self.sizes)


@dataclass
class HeldState:
    """A selector's whole state as this process holds it: the state of ``head`` (committed),
    and what accrued since the checkpoint it descends from (what a replay would redo)."""

    meta: SelectorMeta
    head: Head
    state: State
    state_bytes: int
    checkpoint_version: int
    #: Log payload bytes of the versions after the checkpoint, and the seconds a replay of
    #: them would redo (their updates' CPU: ``Computed.replay_seconds``).
    log_bytes: int = 0
    compute_seconds: float = 0.0
    #: Monotonic time of the first commit after the checkpoint (None: nothing to checkpoint).
    dirty_since: float | None = None
    #: Monotonic time of the last commit (or of the rebuild).
    last_commit: float = 0.0
    #: CPU seconds the last sampled update took, and the items it folded in (None: none yet).
    last_update_cpu: float | None = None
    last_update_items: int = 0
    #: Updates since the last one whose CPU time was read (``samples_cpu``).
    unsampled_updates: int = 0

    def samples_cpu(self) -> bool:
        """Whether the next update's CPU time is read: the first, then one in
        ``CPU_SAMPLE_EVERY``. Reading a thread's CPU clock is a system call on every update
        otherwise, a sizeable share of a one-row update; an update's cost changes slowly (with
        the state's size), so a sample is enough to choose where the next one runs."""
        if self.last_update_cpu is None or self.unsampled_updates >= CPU_SAMPLE_EVERY - 1:
            self.unsampled_updates = 0
            return True
        self.unsampled_updates += 1
        return False

    def expected_cpu(self, items: int) -> float | None:
        """CPU seconds an update of ``items`` items should take, by the last one."""
        if self.last_update_cpu is None:
            return None
        return self.last_update_cpu * max(1.0, items / max(self.last_update_items, 1))

    def checkpoint_facts(self, force: bool = False, idle: bool = False) -> CheckpointFacts:
        """What the checkpoint policy is asked of this state (``checkpoint_due``)."""
        return CheckpointFacts(
            version=self.head.version,
            checkpoint_version=self.checkpoint_version,
            compute_seconds=self.compute_seconds,
            log_bytes=self.log_bytes,
            state_bytes=self.state_bytes,
            last_commit=self.last_commit,
            force=force,
            idle=idle,
        )

    def checkpoint_work(self, trigger: Trigger) -> CheckpointWork:
        """The checkpoint of this state as it is now, due by ``trigger``."""
        return CheckpointWork(
            version=self.head.version,
            cursor=self.head.cursor,
            items_seen=self.head.items_seen,
            state=self.state,
            log_bytes=self.log_bytes,
            compute_seconds=self.compute_seconds,
            trigger=trigger,
        )

    def checkpointed(self, version: int) -> None:
        """The state of ``version``, this one, is the checkpoint now: nothing to replay."""
        self.checkpoint_version = version
        self.log_bytes = 0
        self.compute_seconds = 0.0
        self.dirty_since = None

    def committed(self, head: Head, update: Update, log_bytes: int, seconds: float) -> None:
        self.head = head
        self.state = update.state
        self.state_bytes = update.state_bytes
        self.log_bytes += log_bytes
        self.compute_seconds += seconds
        self.last_commit = time.monotonic()
        if self.dirty_since is None:
            self.dirty_since = self.last_commit


@dataclass
class DirectChunk:
    """A waited chunk handed to the drain that holds its selector's lease and state, to be
    computed before anything is written and then appended and committed in one script
    (``DirectPath.submit``). Its future gets the entry's outcome, or None: append it as
    usual (the drain could not take it: the script refused, the update failed, the drain
    ended)."""

    chunk: Chunk
    entry: Entry
    future: asyncio.Future[AppendOutcome | None]
    #: The span that handed it over, for the applier's span to link to (``service.tracing``).
    link: SpanContext | None = None

    @property
    def items(self) -> int:
        return self.entry.items


@dataclass
class Drain:
    """A drain of one selector running in this process, and the incarnation of the selector it
    holds the lease of (None until it has the lease)."""

    task: asyncio.Task[None]
    incarnation: str | None = None


class Running:
    """The drains running in this process, one per selector at most; those asked to stop
    lingering (what their drain watches changed under it: deleted, or detached from its stream,
    its entries now come to its own log); and whether the process is closing (no drain starts,
    no checkpoint is planned, nothing waits any more)."""

    def __init__(self) -> None:
        self._drains: dict[str, Drain] = {}
        self._stop_lingering: set[str] = set()
        self.closing = False

    def get(self, name: str) -> Drain | None:
        return self._drains.get(name)

    def live(self, name: str) -> Drain | None:
        """The drain of ``name`` here, if it has not ended."""
        running = self._drains.get(name)
        return running if running is not None and not running.task.done() else None

    def start(self, name: str, task: asyncio.Task[None]) -> None:
        self._drains[name] = Drain(task)

    def tasks(self) -> list[asyncio.Task[None]]:
        return [drain.task for drain in self._drains.values()]

    def is_current(self, name: str) -> bool:
        """Whether the running task is this process's drain of ``name`` (not one superseded
        by a drain of a newer incarnation)."""
        running = self._drains.get(name)
        return running is not None and running.task is asyncio.current_task()

    def stop_lingering(self, name: str) -> None:
        """A drain of ``name`` lingering here stops (it looks again at what it watches)."""
        if self.live(name) is not None:
            self._stop_lingering.add(name)

    def lingers(self, name: str) -> bool:
        """Whether the drain of ``name`` may go on lingering."""
        return name not in self._stop_lingering

    def watching(self, name: str) -> None:
        """The drain of ``name`` read what it watches anew: it may linger again."""
        self._stop_lingering.discard(name)


@dataclass(frozen=True)
class Backoff:
    """When a selector whose last drain failed may be drained again, and of which incarnation
    that drain was (a selector created anew under the name owes nothing to it)."""

    retry_at: float
    failures: int
    incarnation: str | None


@dataclass(frozen=True)
class CheckpointWork:
    """A checkpoint to write: the state of one committed version, and what it will cover."""

    version: int
    cursor: str
    items_seen: int
    state: State
    log_bytes: int
    compute_seconds: float
    trigger: Trigger
