"""What a source is, as ``POST /v1/sources`` takes it: one model per kind of bus (the schema, the
refusals and the documentation come from them), and the URL shown without its credentials.

A bus URL may carry credentials (``redis://user:secret@host``, ``nats://token@host``; a Kafka
source's SASL user and password make ``kafka://user:secret@brokers``). They are
kept with the source's definition, which only the consuming process reads; every answer, log
line, metric and recorded error shows ``redacted(url)`` (and errors go through ``scrub``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.names import ANCHORED_NAME, NAME_RULE

#: Rows per chunk a source appends: by default, and at most.
DEFAULT_BATCH_ROWS = 2000
MAX_BATCH_ROWS = 100_000
#: How long a source gathers entries before appending what it has (ms).
DEFAULT_BATCH_MS = 200
MAX_BATCH_MS = 10_000

Name = Annotated[
    str,
    Field(pattern=ANCHORED_NAME, description=NAME_RULE),
]


class IntoSelector(BaseModel):
    """Append to a selector's log."""

    model_config = ConfigDict(extra="forbid")

    selector: Name

    @property
    def kind(self) -> Literal["selector", "stream"]:
        return "selector"

    @property
    def name(self) -> str:
        return self.selector


class IntoStream(BaseModel):
    """Append to a stream's log: every selector attached to it applies the rows."""

    model_config = ConfigDict(extra="forbid")

    stream: Name

    @property
    def kind(self) -> Literal["selector", "stream"]:
        return "stream"

    @property
    def name(self) -> str:
        return self.stream


class SourceBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    into: IntoSelector | IntoStream = Field(
        description='Where the rows go: {"selector": name} or {"stream": name}.'
    )
    batch_rows: int = Field(
        DEFAULT_BATCH_ROWS,
        ge=1,
        le=MAX_BATCH_ROWS,
        description="Most rows per chunk appended (a chunk goes when full, or after batch_ms).",
    )
    batch_ms: int = Field(
        DEFAULT_BATCH_MS,
        ge=1,
        le=MAX_BATCH_MS,
        description="Most milliseconds a chunk gathers entries after its first.",
    )
    label_field: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The field holding each entry's label (labelled selectors and streams).",
    )

    def definition(self) -> dict[str, Any]:
        """What the registry keeps (the URL as given: the consumer needs its credentials)."""
        return self.model_dump(mode="json")


class RedisStreamSource(SourceBase):
    """A Redis stream: each entry holds one field per feature name (and the label field)."""

    kind: Literal["redis-stream"]
    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^(rediss?://[^/?#\s]+|unix://\S+)",
        description="The bus's Redis: redis://, rediss:// or unix://. Credentials in it are "
        "kept, used, and never shown.",
    )
    key: str = Field(min_length=1, max_length=1024, description="The stream's key.")
    start: str = Field(
        "earliest",
        pattern=r"^(earliest|latest|[0-9]{1,20}-[0-9]{1,20})$",
        description="Where the first read begins: earliest, latest (what the stream holds "
        "then is skipped), or after this entry id.",
    )


class NatsSource(SourceBase):
    """A NATS JetStream stream: each message is a JSON object keyed by feature name."""

    kind: Literal["nats"]
    stream: str = Field(
        min_length=1, max_length=256, pattern=r"^[^.*>\s]+$", description="The stream's name."
    )
    subject: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="Only the stream's messages on this subject (wildcards allowed).",
    )

    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^(nats|tls)://[^/?#\s]+",
        description="The NATS server: nats:// or tls://. Credentials in it (user:password, or "
        "a token) are kept, used, and never shown.",
    )
    start: str = Field(
        "earliest",
        pattern=r"^(earliest|latest|[0-9]{1,20})$",
        description="Where the first read begins: earliest, latest (what the stream holds "
        "then is skipped), or after this stream sequence.",
    )


class KafkaSource(SourceBase):
    """A Kafka topic: each message's value is a JSON object keyed by feature name (or a JSON
    array of numbers, for a selector without names). Its partitions are shared by the Sift
    processes running: each takes a fair share, under a lease per partition."""

    kind: Literal["kafka"]
    bootstrap: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^[A-Za-z0-9._\[\]:-]+:[0-9]{1,5}(,[A-Za-z0-9._\[\]:-]+:[0-9]{1,5})*$",
        description="The brokers to start from: host:port, comma-separated.",
    )
    topic: str = Field(
        min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$", description="The topic."
    )
    group: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description="The consumer group whose committed offsets Sift updates after its own "
        "commits, for Kafka's lag tools (default: sift-<name>). Sift reads from the offsets "
        "it keeps with the state, never from these.",
    )
    username: str | None = Field(
        None, min_length=1, max_length=256, description="SASL user (with password)."
    )
    password: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="SASL password: kept, used, and never shown.",
    )
    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "PLAIN", description="The SASL mechanism, when a username is given."
    )
    tls: bool = Field(False, description="Connect over TLS (the system's trusted CAs).")
    start: str = Field(
        "earliest",
        pattern=r"^(earliest|latest|-1|[0-9]{1,20})$",
        description="Where the first read of each partition begins: earliest, latest (what "
        "the partition holds then is skipped), or after this offset.",
    )

    @model_validator(mode="after")
    def _named_group(self) -> KafkaSource:
        """The group said at creation, so that answers name the one Kafka's tools show."""
        if self.group is None:
            self.group = f"sift-{self.name}"
        return self

    @property
    def url(self) -> str:
        """The brokers as a URL, the credentials in it (shown as ``redacted(url)``)."""
        if self.username is None:
            return f"kafka://{self.bootstrap}"
        return f"kafka://{self.username}:{self.password or ''}@{self.bootstrap}"

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "url": self.url}


AnySource = RedisStreamSource | NatsSource | KafkaSource
SourceIn = Annotated[AnySource, Field(discriminator="kind")]


def redacted(url: str) -> str:
    """``url`` without its credentials: the user kept, the password (or a token given as
    the user, NATS's way) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***" if parts.password is not None and parts.username else "***"
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def credentials(url: str) -> list[str]:
    """The secret parts of ``url`` (password, or a token given as the user)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    secret = [parts.password] if parts.password else [parts.username] if parts.username else []
    return [s for s in secret if s]


def scrub(text: str, url: str) -> str:
    """``text`` (an error a library raised) with the URL's credentials taken out."""
    text = text.replace(url, redacted(url))
    for secret in credentials(url):
        text = text.replace(secret, "***")
    return text
