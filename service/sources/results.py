"""The answers of ``/v1/sources``: a source as it is defined (its URL without credentials) and
how its consumption goes."""

from __future__ import annotations

from typing import ClassVar, Literal

import orjson
from pydantic import Field

from service.selectors.results import Result

SourceState = Literal["starting", "running", "paused", "retrying", "reset", "failed"]


class RejectedEntry(Result):
    """An entry the source set aside: where it is on the bus, and why."""

    partition: str
    position: str
    reason: str
    at: float = Field(description="When it was set aside (seconds since the epoch).")


class ResetEvent(Result):
    """A reset of the source's bus: a partition created again below the committed position
    (what a read after it would skip), when it was met, and what the source did."""

    shows_nulls: ClassVar[bool] = True

    partition: str
    at: float = Field(description="When it was met (seconds since the epoch).")
    position: str = Field(description="The source's committed position then.")
    first: str | None = Field(
        description="The position of the partition's first entry then (null: it held none)."
    )
    last: str | None = Field(
        description="The position of its last entry then (null: it held none; for a Redis "
        "stream its newest id)."
    )
    why: str = Field(description="What told the reset: a new incarnation, or a range below.")
    action: Literal["stopped", "restarted"] = Field(
        description="stopped (on_reset: stop; the source waits for an operator) or restarted "
        "(on_reset: restart; it read the partition again from its start)."
    )
    restarted_at: float | None = Field(
        None, description="When reading resumed (by the policy, or an operator's restart)."
    )
    restarted_from: str | None = Field(
        None, description="Where reading resumed: a start option, or after a position."
    )


class SourceOut(Result):
    """A source: what it reads, where it appends, and how far it got."""

    shows_nulls: ClassVar[bool] = True

    name: str
    kind: Literal["redis-stream", "nats", "kafka"]
    url: str = Field(description="The bus's URL, its credentials replaced by ***.")
    key: str | None = Field(None, description="The Redis stream's key (redis-stream).")
    stream: str | None = Field(None, description="The JetStream stream (nats).")
    subject: str | None = Field(None, description="The subject filter (nats).")
    topic: str | None = Field(None, description="The topic (kafka).")
    group: str | None = Field(
        None, description="The consumer group whose committed offsets follow Sift's (kafka)."
    )
    into: dict[str, str] = Field(description='{"selector": name} or {"stream": name}.')
    batch_rows: int
    batch_bytes: int = Field(description="Most bytes of entries per batch read.")
    batch_ms: int
    start: str
    label_field: str | None
    target_field: str | None = Field(
        None, description="The field holding each entry's target (rows with a target)."
    )
    format: Literal["json", "msgpack"] = Field(
        "json", description="What each message's value is written in: json or msgpack."
    )
    value_field: str | None = Field(
        None,
        description="The one field of each entry holding its message (redis-stream; null: a "
        "field per feature name).",
    )
    on_reset: Literal["stop", "restart"] = Field(
        "stop", description="What the source does when its bus is reset: stop, or restart."
    )
    created_at: float
    state: SourceState = Field(
        description="starting (no process consumes it yet), running, paused (the target has "
        "too many chunks to apply: consumption waits), retrying (the bus or Sift's Redis does "
        "not answer: see last_error), reset (its bus was reset and it stopped there, as its "
        "on_reset says: see last_error and resets; POST /v1/sources/{name}/restart), failed "
        "(it cannot feed its target: see last_error)."
    )
    last_error: str | None
    positions: dict[str, str] = Field(
        description="Each partition's committed position: the last entry read (a Redis entry "
        "id, a JetStream sequence, a Kafka offset: -1 before the first)."
    )
    lag: int | None = Field(
        description="Entries on the bus after the committed positions (null: the bus cannot say)."
    )
    partition_lag: dict[str, int | None] = Field(
        default_factory=dict,
        description="The lag of each partition (null: the bus cannot say), as its consumers "
        "last said it.",
    )
    entries: int = Field(description="Entries consumed (rows and rejected entries).")
    rows: int = Field(description="Rows appended to the target.")
    rejected: int = Field(description="Entries set aside (the newest in rejected_entries).")
    rejected_entries: list[RejectedEntry]
    resets: list[ResetEvent] = Field(
        default_factory=list, description="The resets of its bus met, newest first (20 kept)."
    )
    reset_count: int = Field(0, description="Resets of its bus met in all.")
    rows_per_second: float = Field(description="Rows appended per second, recently.")
    updated_at: float | None = Field(description="The last commit (seconds since the epoch).")


class SourceList(Result):
    """The sources this key may see, sorted by name."""

    sources: list[SourceOut]

    def render(self) -> bytes:
        body = {"sources": [orjson.loads(s.render()) for s in self.sources]}
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
