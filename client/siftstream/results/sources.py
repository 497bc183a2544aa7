"""Sources: the buses Sift reads, and how far it got."""

from __future__ import annotations

from dataclasses import dataclass, field

from siftstream.results._common import Json, _int_or_none


@dataclass(frozen=True)
class RejectedEntry:
    """An entry a source set aside: where it is on the bus (its partition and position: a
    Redis entry id, a JetStream sequence), why, and when (seconds since the epoch)."""

    partition: str
    position: str
    reason: str
    at: float

    @classmethod
    def from_json(cls, doc: Json) -> RejectedEntry:
        return cls(
            str(doc["partition"]), str(doc["position"]), str(doc["reason"]), float(doc["at"])
        )


@dataclass(frozen=True)
class Source:
    """A source (create, list, describe): the bus it reads (``url`` with its credentials shown
    as ``***``; ``key`` for a Redis stream, ``stream`` and ``subject`` for JetStream, ``topic``
    and ``group`` for Kafka), where it
    appends (``into``: ``{"selector": name}`` or ``{"stream": name}``), and how far it got.

    ``state``: starting, running, paused (its target is behind: consumption waits), retrying
    (the bus or Sift's Redis does not answer: see ``last_error``) or failed (it cannot feed its
    target: see ``last_error``). ``positions``: each partition's committed position; ``lag``:
    entries on the bus after them (None: the bus cannot say), and ``partition_lag`` each
    partition's. ``rejected_entries``: the newest
    of the ``rejected`` entries, newest first."""

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
    lag: int | None = None
    last_error: str | None = None
    key: str | None = None
    stream: str | None = None
    subject: str | None = None
    topic: str | None = None
    group: str | None = None
    partition_lag: dict[str, int | None] = field(default_factory=dict)
    label_field: str | None = None
    updated_at: float | None = None
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

    @classmethod
    def from_json(cls, doc: Json) -> Source:
        updated = doc.get("updated_at")
        return cls(
            name=str(doc["name"]),
            kind=str(doc["kind"]),
            url=str(doc["url"]),
            into={str(k): str(v) for k, v in doc["into"].items()},
            batch_rows=int(doc["batch_rows"]),
            batch_ms=int(doc["batch_ms"]),
            start=str(doc["start"]),
            created_at=float(doc["created_at"]),
            state=str(doc["state"]),
            positions={str(k): str(v) for k, v in (doc.get("positions") or {}).items()},
            entries=int(doc.get("entries") or 0),
            rows=int(doc.get("rows") or 0),
            rejected=int(doc.get("rejected") or 0),
            rejected_entries=[RejectedEntry.from_json(r) for r in doc.get("rejected_entries", [])],
            rows_per_second=float(doc.get("rows_per_second") or 0.0),
            lag=_int_or_none(doc.get("lag")),
            last_error=None if doc.get("last_error") is None else str(doc["last_error"]),
            key=None if doc.get("key") is None else str(doc["key"]),
            stream=None if doc.get("stream") is None else str(doc["stream"]),
            subject=None if doc.get("subject") is None else str(doc["subject"]),
            topic=None if doc.get("topic") is None else str(doc["topic"]),
            group=None if doc.get("group") is None else str(doc["group"]),
            partition_lag={
                str(p): _int_or_none(lag) for p, lag in (doc.get("partition_lag") or {}).items()
            },
            label_field=None if doc.get("label_field") is None else str(doc["label_field"]),
            updated_at=None if updated is None else float(updated),
            raw=doc,
        )
