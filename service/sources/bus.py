"""The source protocol: what Sift needs of a bus to read it exactly once.

A bus is a set of *partitions* (a Redis stream has one, a JetStream stream one, a Kafka topic
several), each an ordered log whose entries have *positions* (a Redis entry id, a JetStream
sequence, a Kafka offset) written as text. Sift keeps the position of each partition in Redis
and moves it in the same script that appends what was read (``append.lua``), so the bus
itself is never asked to remember anything: an adapter reads *after* a position it is given,
and may be reconnected, restarted or replaced at any moment.

A partition may be *reset*: deleted and created again under its name, its positions starting
over (a JetStream stream's sequences at 1, a Kafka topic's offsets at 0, a Redis stream's ids
wherever its producer puts them). Reading after the committed position would then skip the new
entries up to it, so an adapter says what a partition is now (``check``): its incarnation where
the bus has one (``epoch``), its range, and whether the position is still on it; the consumer
compares, before the first read of every connection and every second, and follows the source's
policy (``on_reset``). Trimmed is not reset: a partition whose oldest entries went (retention,
``XTRIM``, a purge) still holds the position, or holds only what follows it.

An adapter is one module: a class implementing ``Bus`` and registered in
``service.sources.adapters.ADAPTERS`` under the ``kind`` a source names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol


class BusEntry(NamedTuple):
    """One entry as read: its position, and its fields, by name: a mapping (a JSON message's
    values are the JSON values), or a Redis entry's flat list ``[name, value, name, value,
    ...]`` of bytes as Redis sends it (``pairs``; building a dict per entry would cost more
    than the rest of its conversion), or a message's value as the bus carries it (``raw``, in
    the source's format, JSON or msgpack: a map keyed by feature name, or an array of numbers
    by position), decoded with its batch (``EntryShape.convert``). None of the three:
    ``problem`` says why the message holds no fields. ``size``: its bytes as the bus sent them
    (its fields' names and values), what a batch's byte budget counts."""

    position: str
    fields: Mapping[str, Any] | None
    problem: str | None = None
    pairs: list[bytes] | None = None
    raw: bytes | None = None
    size: int = 0


@dataclass(frozen=True)
class Start:
    """Where a partition's first read begins: after ``position`` ('' for before the first
    entry), with ``before`` entries of the partition at or before it (what the lag counts
    from; None where the bus cannot say), in the partition's incarnation ``epoch`` (None where
    the bus has none)."""

    position: str
    before: int | None = None
    epoch: str | None = None


@dataclass(frozen=True)
class Extent:
    """A partition as the bus holds it now: its incarnation (``epoch``, None where the bus has
    none), the positions of its first and last entries (None: it holds none), where a read of
    it from its beginning starts (``start``), and, against a position read so far, why that
    position is not on it any more (``reset``; None: it is, or the partition was trimmed)."""

    epoch: str | None
    first: str | None
    last: str | None
    start: Start
    reset: str | None = None


def changed_epoch(what: str, epoch: str | None, recorded: str | None) -> str | None:
    """Why a partition whose incarnation was ``recorded`` and is ``epoch`` now was reset
    (None: the same, or one of them unknown)."""
    if epoch is None or recorded is None or epoch == recorded:
        return None
    return f"{what} was created again (now {epoch}; read until then: {recorded})"


class BusUnavailable(Exception):
    """The bus does not answer, or refused: retried with backoff. Its text must not hold the
    URL's credentials (``spec.scrub`` is applied to it anyway)."""


class Bus(Protocol):
    """One source's connection to its bus."""

    #: Whether the processes running share its partitions (a lease each, taken by each
    #: process's consumer) rather than one process holding the whole source.
    shared: bool

    async def connect(self) -> None:
        """Connect (again); BusUnavailable if the bus cannot be reached."""

    async def partitions(self) -> Sequence[str]:
        """The partitions this source reads (their names)."""

    def keep(self, partitions: Iterable[str]) -> None:
        """Read only ``partitions`` from now on (those this process holds of a shared bus;
        a bus held whole reads them all and does nothing)."""

    async def start(self, partition: str, start: str) -> Start:
        """Resolve a source's start option (``earliest``, ``latest`` or a position) for
        ``partition``, the first time it is read."""

    async def read(
        self, partition: str, after: str, max_entries: int, max_bytes: int, max_wait_s: float
    ) -> list[BusEntry]:
        """Entries of ``partition`` after position ``after`` ('' for the first), in order: up
        to ``max_entries`` and about ``max_bytes`` (their ``size``; an entry larger than that
        comes alone, never jams), waiting up to ``max_wait_s`` for the first. An adapter may
        read ahead (within about ``max_bytes``); a call with another ``after`` than where it
        left off starts again there."""

    async def check(self, partition: str, position: str, epoch: str | None) -> Extent:
        """What ``partition`` holds now, and whether ``position`` (read in incarnation
        ``epoch``, None if not known) is still on it (``Extent.reset``)."""

    async def confirm(self, partition: str) -> None:
        """After a read of ``partition``: BusUnavailable if the partition was reset since this
        connection began, so that what was read is not committed (a bus whose reads cannot
        cross a reset does nothing)."""

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        """Entries of ``partition`` after ``position`` (``consumed`` entries were read since a
        start with ``before`` entries before it), or None where the bus cannot say."""

    async def committed(self, positions: Mapping[str, str]) -> None:
        """Sift committed ``positions`` (partition -> position) of the partitions this process
        owns: tell the bus's own offset tools, where it has them (others do nothing). Best
        effort, never waited on: Sift reads only the positions it committed itself."""

    async def close(self) -> None:
        """Drop the connection (never raises)."""


def within_bytes(entries: list[BusEntry], max_bytes: int) -> list[BusEntry]:
    """The first of ``entries`` whose sizes add up to at most ``max_bytes`` (the first one
    always: an entry larger than the budget moves alone)."""
    total = 0
    for i, entry in enumerate(entries):
        total += entry.size
        if total > max_bytes and i > 0:
            return entries[:i]
    return entries


def label_value(raw: Any) -> Any:
    """A label as a bus carries it: an integer written as text is that integer (a Redis entry
    holds text only), other text stays text."""
    if isinstance(raw, bytes | bytearray):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, str):
        text = raw.strip()
        if text.lstrip("-").isdigit() and len(text) <= 18:
            return int(text)
    return raw
