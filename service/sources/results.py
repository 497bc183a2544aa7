"""The answers of ``/v1/sources``: a source as it is defined (its URL without credentials) and
how its consumption goes."""

from __future__ import annotations

from typing import ClassVar, Literal

import orjson
from pydantic import Field

from service.selectors.results import Result

SourceState = Literal["starting", "running", "paused", "retrying", "failed"]


class RejectedEntry(Result):
    """An entry the source set aside: where it is on the bus, and why."""

    partition: str
    position: str
    reason: str
    at: float = Field(description="When it was set aside (seconds since the epoch).")


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
    batch_ms: int
    start: str
    label_field: str | None
    created_at: float
    state: SourceState = Field(
        description="starting (no process consumes it yet), running, paused (the target has "
        "too many chunks to apply: consumption waits), retrying (the bus or Sift's Redis does "
        "not answer: see last_error), failed (it cannot feed its target: see last_error)."
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
    rows_per_second: float = Field(description="Rows appended per second, recently.")
    updated_at: float | None = Field(description="The last commit (seconds since the epoch).")


class SourceList(Result):
    """The sources this key may see, sorted by name."""

    sources: list[SourceOut]

    def render(self) -> bytes:
        body = {"sources": [orjson.loads(s.render()) for s in self.sources]}
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
