"""Sources: the buses Sift reads, and how far it got."""

from __future__ import annotations

from dataclasses import dataclass, field

from siftstream.results._common import Answer, Json


@dataclass(frozen=True)
class RejectedEntry(Answer):
    """An entry a source set aside: where it is on the bus (its partition and position: a
    Redis entry id, a JetStream sequence, a Kafka offset), why, and when (seconds since the
    epoch)."""

    partition: str
    position: str
    reason: str
    at: float


@dataclass(frozen=True)
class ResetEvent(Answer):
    """A reset of a source's bus: a partition created again below the committed ``position``
    (the bus then held ``first`` to ``last``; None: nothing), ``why`` it was told, when
    (``at``), and what the source did (``action``: stopped or restarted; where and when it
    read again: ``restarted_from``, ``restarted_at``)."""

    partition: str
    at: float
    position: str
    why: str
    action: str
    first: str | None = None
    last: str | None = None
    restarted_at: float | None = None
    restarted_from: str | None = None


@dataclass(frozen=True)
class Source(Answer):
    """A source (create, list, describe): the bus it reads (``url`` with its credentials shown
    as ``***``; ``key`` for a Redis stream, ``stream`` and ``subject`` for JetStream, ``topic``
    and ``group`` for Kafka), where it
    appends (``into``: ``{"selector": name}`` or ``{"stream": name}``), and how far it got.

    ``state``: starting, running, paused (its target is behind: consumption waits), retrying
    (the bus or Sift's Redis does not answer: see ``last_error``), reset (its bus was reset and
    it stopped there, as its ``on_reset`` says: ``restart_source`` reads again) or failed (it
    cannot feed its target: see ``last_error``). ``positions``: each partition's committed
    position; ``lag``: entries on the bus after them (None: the bus cannot say), and
    ``partition_lag`` each partition's. ``rejected_entries``: the newest
    of the ``rejected`` entries, newest first; ``resets``: the newest resets of its bus met
    (``reset_count`` in all)."""

    name: str
    kind: str
    url: str
    into: dict[str, str]
    batch_rows: int
    batch_ms: int
    start: str
    created_at: float
    state: str
    positions: dict[str, str]
    entries: int
    rows: int
    rejected: int
    rejected_entries: list[RejectedEntry]
    rows_per_second: float = 0.0
    #: Most bytes of entries per batch read (None: a service that does not say).
    batch_bytes: int | None = None
    lag: int | None = None
    last_error: str | None = None
    key: str | None = None
    stream: str | None = None
    subject: str | None = None
    topic: str | None = None
    group: str | None = None
    partition_lag: dict[str, int | None] = field(default_factory=dict)
    label_field: str | None = None
    target_field: str | None = None
    #: What each message's value is written in (json or msgpack), and the one field of a Redis
    #: entry holding it (None: a field per feature name).
    format: str = "json"
    value_field: str | None = None
    updated_at: float | None = None
    on_reset: str = "stop"
    resets: list[ResetEvent] = field(default_factory=list)
    reset_count: int = 0
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @property
    def into_kind(self) -> str:
        """``selector`` or ``stream``: what it appends to."""
        return "stream" if "stream" in self.into else "selector"

    @property
    def into_name(self) -> str:
        """The name of the selector (or stream) it appends to."""
        return self.into[self.into_kind]

    @property
    def reads(self) -> str:
        """What it reads on the bus: the Redis stream's key, the JetStream stream (and its
        subject filter), or the Kafka topic."""
        if self.kind == "nats":
            return f"{self.stream}" + (f" ({self.subject})" if self.subject else "")
        if self.kind == "kafka":
            return str(self.topic)
        return str(self.key)
