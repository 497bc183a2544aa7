"""What a process knows of commits, for the requests that wait on them and for its applier.

* ``Waiters``: a POST that waits for its chunk gets a future resolved by the commit that covers
  its entry: this process's own commits (with exactly which entries they applied or rejected),
  and every other replica's, announced on one pub/sub channel that each process listens to
  once (``Commits.commit_notices``). Nobody polls the head while commits come; a waiter
  that hears nothing for ``FALLBACK_SECONDS`` (a notice lost while Redis restarted, say) reads
  the head once and waits again.
* ``KnownHeads``: the heads readers last saw, kept while no notice on the same channel says
  that they moved (a commit, or a deletion), so that a ranking read again when nothing changed
  costs no Redis round trip.
* ``HandOver``: the chunks this process appended, decoded, for its applier to fold in without
  reading the payloads back from Redis and decoding them again. The log stays the truth: an
  applier without the hand-over (another replica, or this one after a restart) reads the
  payloads; one is dropped once a commit covers its entry, or to stay within its bounds.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from service.cache import LRU
from service.store.keys import parse_stream_id
from service.store.records import Head
from service.wire.kinds import Chunk

#: A waiter that heard of no commit covering its entry this long reads the head itself.
FALLBACK_SECONDS = 0.25
#: Selectors whose last commit a process remembers (for waiters that come after it).
REACHED_KEPT = 65_536
#: Most chunks, and bytes of payload they stand for, one process holds for its applier.
HELD_CHUNKS = 100_000
HELD_BYTES = 256 * 2**20

#: A head kept in memory is read again after this long even if no notice moved it: a notice can
#: be lost without the listener's connection breaking (a Redis Cluster failover that loses the
#: last commits of a master), and this bounds how long an answer may then lag.
HEAD_TRUSTED_SECONDS = 1.0

StreamId = tuple[int, int]


class Commit(Protocol):
    """Where a commit got a selector: a head, or a commit notice."""

    @property
    def incarnation(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def cursor(self) -> str: ...
    @property
    def items_seen(self) -> int: ...


@dataclass(frozen=True)
class Reached:
    """How far a selector's commits had got when this process last heard."""

    incarnation: str
    version: int
    cursor: StreamId
    items_seen: int


@dataclass(frozen=True)
class Settled:
    """Where a waited-for entry got to: the version of the commit that covered it (or a later
    one) and its items seen, and why the entry was rejected: "" when it was applied, None when
    this process cannot tell (a commit heard of from another replica with rejections in it, or
    a head read): Redis's records say."""

    version: int
    items_seen: int
    rejected: str | None


@dataclass
class _Waiter:
    log_id: str
    after: StreamId
    incarnation: str | None
    future: asyncio.Future[Settled]


class Waiters:
    """Futures of the entries that POSTs wait on, resolved by the commits that cover them."""

    def __init__(self) -> None:
        self._waiting: dict[str, list[_Waiter]] = {}
        self._reached: LRU[str, Reached] = LRU(REACHED_KEPT)

    def known(self, name: str, log_id: str, incarnation: str | None) -> Settled | None:
        """The commit this process knows of that covers ``log_id``, if any (whether the entry
        was applied is then not known: ``rejected`` is None)."""
        reached = self._reached.get(name)
        if reached is None or (incarnation is not None and reached.incarnation != incarnation):
            return None
        if reached.cursor < parse_stream_id(log_id):
            return None
        return Settled(reached.version, reached.items_seen, None)

    def wait(self, name: str, log_id: str, incarnation: str | None) -> asyncio.Future[Settled]:
        future: asyncio.Future[Settled] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(log_id, parse_stream_id(log_id), incarnation, future)
        self._waiting.setdefault(name, []).append(waiter)
        return future

    def discard(self, name: str, future: asyncio.Future[Settled]) -> None:
        waiting = [w for w in self._waiting.get(name, ()) if w.future is not future]
        if waiting:
            self._waiting[name] = waiting
        else:
            self._waiting.pop(name, None)

    def committed(
        self,
        name: str,
        commit: Commit,
        *,
        after: str | None = None,
        rejections: Mapping[str, str] | None = None,
        rejected_any: bool = True,
    ) -> None:
        """A commit of ``name``: ``commit.version`` moved the cursor to ``commit.cursor``.

        This process's own commits say where the cursor was before (``after``) and which of
        the entries they moved past were rejected (``rejections``): the waiters of those
        entries learn exactly. A commit heard of from elsewhere says only whether it rejected
        any (``rejected_any``): its waiters learn the version, and that their entry was applied
        when it rejected none and it follows the last commit heard of without a gap.
        """
        incarnation, version, items_seen = commit.incarnation, commit.version, commit.items_seen
        moved_to = parse_stream_id(commit.cursor)
        previous = self._reached.get(name)
        if previous is not None and previous.incarnation == incarnation:
            if previous.version >= version:
                return  # heard of already (our own commit, announced back to us)
            if after is None and previous.version == version - 1:
                after = _stream_id_text(previous.cursor)
        self._reached.put(name, Reached(incarnation, version, moved_to, items_seen))
        waiting = self._waiting.get(name)
        if not waiting:
            return
        from_ = None if after is None else parse_stream_id(after)
        left = []
        for waiter in waiting:
            if waiter.future.done():
                continue
            if waiter.incarnation is not None and waiter.incarnation != incarnation:
                # Another incarnation's commit: a later one (the name deleted and created again
                # since this entry was appended) or, as often, an earlier one's notice arriving
                # late. Which, the head says: the waiter's next look at it (FALLBACK_SECONDS).
                left.append(waiter)
                continue
            if waiter.after > moved_to:
                left.append(waiter)
                continue
            rejected: str | None = None
            if from_ is not None and waiter.after > from_:  # in this very commit
                if rejections is not None:
                    rejected = rejections.get(waiter.log_id, "")
                elif not rejected_any:
                    rejected = ""
            waiter.future.set_result(Settled(version, items_seen, rejected))
        if left:
            self._waiting[name] = left
        else:
            self._waiting.pop(name, None)

    def forget(self, name: str) -> None:
        self._reached.pop(name)


class KnownHeads:
    """The heads of selectors as this process last saw them, for readers (``GET .../top``).

    A head is kept only while this process listens to the commit notices (``listening``):
    every commit and every deletion of every replica is announced there, and drops the head
    it moves (``heard``); this process's own commits replace it (``committed``), before their
    waiters are answered, so a waited POST's producer reads its own write. A reader then
    answers from memory when nothing changed. How stale an answer may be: by the delay of the
    notice (a pub/sub message, well under a millisecond on one host) and, should a notice be
    lost with the listener's connection up, ``HEAD_TRUSTED_SECONDS``. When the listener's
    connection breaks, every head is dropped and none is kept until it listens again.

    A read of Redis races with notices: a head read before a commit can arrive after its
    notice. ``mark`` before the read and ``read`` after it keep the head only if no notice of
    the selector came in between.
    """

    def __init__(self, trusted_seconds: float = HEAD_TRUSTED_SECONDS) -> None:
        self.trusted_seconds = trusted_seconds
        self._heads: LRU[str, tuple[Head, float]] = LRU(REACHED_KEPT)
        #: The mark of the last notice that moved each selector.
        self._moved: LRU[str, int] = LRU(REACHED_KEPT)
        self._marks = itertools.count(1)
        self._since = 0  # heads read before this mark are never kept (the listener restarted)
        self._listening = False

    def listening(self, live: bool) -> None:
        """The listener (re)subscribed (True) or lost its connection (False): either way, what
        was announced meanwhile may not have been heard, so every head kept goes."""
        self._listening = live
        self._heads.clear()
        self._since = next(self._marks)

    def get(self, name: str) -> Head | None:
        """The head of ``name`` as last seen, if it may be trusted still."""
        if not self._listening:
            return None
        kept = self._heads.get(name)
        if kept is None:
            return None
        head, seen_at = kept
        if time.monotonic() - seen_at > self.trusted_seconds:
            self._heads.pop(name)
            return None
        return head

    def mark(self) -> int:
        """Taken before reading a head from Redis (see ``read``)."""
        return next(self._marks)

    def read(self, name: str, head: Head, mark: int) -> None:
        """``head`` was read from Redis after ``mark``: keep it unless a notice of ``name``
        (or a break of the listener) came since."""
        if self._listening and mark > self._since and (self._moved.get(name) or 0) < mark:
            self._heads.put(name, (head, time.monotonic()))

    def committed(self, name: str, head: Head) -> None:
        """This process committed ``head``."""
        kept = self._heads.get(name)
        self._moved.put(name, next(self._marks))
        if not self._listening:
            return
        behind = (
            kept is None
            or kept[0].incarnation != head.incarnation
            or kept[0].version < head.version
        )
        if behind:
            self._heads.put(name, (head, time.monotonic()))

    def heard(self, name: str, incarnation: str, version: int | None) -> None:
        """A notice: ``name`` committed ``version`` (None: it was deleted). Our own commits come
        back announced too: a head of that version or later stays."""
        kept = self._heads.get(name)
        if (
            version is not None
            and kept is not None
            and kept[0].incarnation == incarnation
            and kept[0].version >= version
        ):
            return
        self._moved.put(name, next(self._marks))
        self._heads.pop(name)

    def forget(self, name: str) -> None:
        """``name`` was deleted here."""
        self.heard(name, "", None)


def _stream_id_text(stream_id: StreamId) -> str:
    return f"{stream_id[0]}-{stream_id[1]}"


class HandOver:
    """Decoded chunks this process appended, for its applier (see the module docstring)."""

    def __init__(self, most_chunks: int = HELD_CHUNKS, most_bytes: int = HELD_BYTES) -> None:
        self.most_chunks = most_chunks
        self.most_bytes = most_bytes
        #: name -> log id -> (chunk, the payload's bytes); in log order per selector.
        self._held: dict[str, dict[str, tuple[Chunk, int]]] = {}
        self._chunks = 0
        self._bytes = 0

    def put(self, name: str, log_id: str, chunk: Chunk, payload_bytes: int) -> None:
        """Hold ``chunk`` (entry ``log_id`` of ``name``), unless that would pass the bounds: the
        applier then reads its payload, as any other replica's would."""
        if self._chunks >= self.most_chunks or self._bytes + payload_bytes > self.most_bytes:
            return
        held = self._held.setdefault(name, {})
        last = next(reversed(held), None)
        held[log_id] = (chunk, payload_bytes)
        if last is not None and parse_stream_id(log_id) < parse_stream_id(last):
            # Appends answered out of log order (a source's partitions committed side by
            # side): the held chunks are kept in it.
            self._held[name] = dict(sorted(held.items(), key=lambda item: parse_stream_id(item[0])))
        self._chunks += 1
        self._bytes += payload_bytes

    def ids(self, name: str, most: int) -> list[str]:
        """The ids of the first ``most`` chunks held for ``name``."""
        held = self._held.get(name)
        return [] if not held else list(held)[:most]

    def get(self, name: str, log_id: str) -> tuple[Chunk, int] | None:
        held = self._held.get(name)
        return None if held is None else held.get(log_id)

    def applied(self, name: str, cursor: str) -> None:
        """Let go of the chunks of ``name`` up to ``cursor`` (committed past)."""
        held = self._held.get(name)
        if not held:
            return
        through = parse_stream_id(cursor)
        for log_id in [i for i in held if parse_stream_id(i) <= through]:
            _chunk, size = held.pop(log_id)
            self._chunks -= 1
            self._bytes -= size
        if not held:
            del self._held[name]

    def forget(self, name: str) -> None:
        for _chunk, size in self._held.pop(name, {}).values():
            self._chunks -= 1
            self._bytes -= size
