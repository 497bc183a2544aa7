"""The source protocol: what Sift needs of a bus to read it exactly once.

A bus is a set of *partitions* (a Redis stream has one, a JetStream stream one, a Kafka topic
several), each an ordered log whose entries have *positions* (a Redis entry id, a JetStream
sequence, a Kafka offset) written as text. Sift keeps the position of each partition in Redis
and moves it in the same script that appends what was read (``source_append.lua``), so the bus
itself is never asked to remember anything: an adapter reads *after* a position it is given,
and may be reconnected, restarted or replaced at any moment.

An adapter is one module: a class implementing ``Bus`` and registered in
``service.sources.adapters.ADAPTERS`` under the ``kind`` a source names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol


class BusEntry(NamedTuple):
    """One entry as read: its position, and its fields, by name: a mapping (a JSON message's
    values are the JSON values), or a Redis entry's flat list ``[name, value, name, value,
    ...]`` of bytes as Redis sends it (``pairs``; building a dict per entry would cost more
    than the rest of its conversion), or a JSON message's value as the bus carries it
    (``raw``: an object keyed by feature name, or an array of numbers by position), parsed
    with its batch (``EntryShape.convert``). None of the three: ``problem`` says why the
    message holds no fields."""

    position: str
    fields: Mapping[str, Any] | None
    problem: str | None = None
    pairs: list[bytes] | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class Start:
    """Where a partition's first read begins: after ``position`` ('' for before the first
    entry), with ``before`` entries of the partition at or before it (what the lag counts
    from; None where the bus cannot say)."""

    position: str
    before: int | None = None


class BusUnavailable(Exception):
    """The bus does not answer, or refused: retried with backoff. Its text must not hold the
    URL's credentials (``spec.scrub`` is applied to it anyway)."""


class Bus(Protocol):
    """One source's connection to its bus."""

    async def connect(self) -> None:
        """Connect (again); BusUnavailable if the bus cannot be reached."""

    async def partitions(self) -> Sequence[str]:
        """The partitions this source reads (their names)."""

    async def start(self, partition: str, start: str) -> Start:
        """Resolve a source's start option (``earliest``, ``latest`` or a position) for
        ``partition``, the first time it is read."""

    async def read(
        self, partition: str, after: str, max_entries: int, max_wait_s: float
    ) -> list[BusEntry]:
        """Entries of ``partition`` after position ``after`` ('' for the first), in order: up
        to ``max_entries``, waiting up to ``max_wait_s`` for the first. An adapter may read
        ahead; a call with another ``after`` than where it left off starts again there."""

    async def lag(
        self, partition: str, position: str, consumed: int, before: int | None
    ) -> int | None:
        """Entries of ``partition`` after ``position`` (``consumed`` entries were read since a
        start with ``before`` entries before it), or None where the bus cannot say."""

    async def close(self) -> None:
        """Drop the connection (never raises)."""


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
