"""What a source is, as ``POST /v1/sources`` takes it: one model per kind of bus (the schema, the
refusals and the documentation come from them), and the URL shown without its credentials.

A bus URL may carry credentials (``redis://user:secret@host``, ``unix:///s.sock?password=...``,
``nats://token@host``; a Kafka source's SASL user and password make
``kafka://user:secret@brokers``). They are kept with the source's definition, which only the
consuming process reads; every answer, log line, metric and recorded error shows
``redacted(url)``, built from the parts of the URL that are not secret as the bus's client
library reads them (``service.sources.endpoints``), and errors go through ``scrub``. A URL
refused here is described, never repeated (``HIDDEN_INPUT``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from service.errors import HIDDEN_INPUT
from service.names import ANCHORED_NAME, NAME_RULE
from service.sources.endpoints import (
    MAX_URL_LENGTH,
    NATS_FORM,
    REDIS_FORM,
    BadUrl,
    Endpoint,
    checked_text,
    endpoint,
    kafka_url,
)

#: Rows per chunk a source appends: by default, and at most.
DEFAULT_BATCH_ROWS = 2000
MAX_BATCH_ROWS = 100_000
#: Bytes of entries per batch a source reads (their fields' names and values as the bus sends
#: them): by default, at least and at most. An entry larger than the budget is read alone.
DEFAULT_BATCH_BYTES = 8 << 20
MIN_BATCH_BYTES = 64 << 10
MAX_BATCH_BYTES = 64 << 20
#: What a message's value may be written in (``format``).
Format = Literal["json", "msgpack"]
#: The formats a Redis entry's fields cannot hold (they are text): read from a value_field.
FIELD_FORMATS = [f for f in get_args(Format) if f != "json"]
#: How long a source gathers entries before appending what it has (ms).
DEFAULT_BATCH_MS = 200
MAX_BATCH_MS = 10_000

Name = Annotated[
    str,
    Field(pattern=ANCHORED_NAME, description=NAME_RULE),
]


#: The URL patterns the schema states (``_stated_url`` checks them first, without repeating
#: the URL; the rules it cannot state are the creation's, ``service.sources.endpoints``).
REDIS_URL_PATTERN = r"^(?:rediss?://[^/?#\x00-\x20\x7f]+|unix://[^\x00-\x20\x7f])[^\x00-\x20\x7f]*$"
NATS_URL_PATTERN = r"^(?:nats|tls)://[^/?#\x00-\x20\x7f]+[^\x00-\x20\x7f]*$"


def _stated_url(pattern: str, form: str) -> BeforeValidator:
    """A bus URL checked for what the schema states (a string, its length, its pattern) before
    pydantic sees it: a refusal says what was expected, never what came (it may hold
    credentials)."""
    compiled = re.compile(pattern)

    def check(value: object) -> object:
        try:
            text = checked_text(value)
        except BadUrl as exc:
            raise PydanticCustomError(HIDDEN_INPUT, "{detail}", {"detail": exc.detail}) from None
        if not compiled.match(text):
            raise PydanticCustomError(HIDDEN_INPUT, "url must be {form}", {"form": form})
        return value

    return BeforeValidator(check)


def _hidden(value: object) -> object:
    try:
        return _secret_text(value)
    except BadUrl as exc:
        raise PydanticCustomError(HIDDEN_INPUT, "{detail}", {"detail": exc.detail}) from None


def _secret_text(value: object) -> object:
    if not isinstance(value, str):
        raise BadUrl(f"password must be a string; got {type(value).__name__}")
    if not 1 <= len(value) <= 1024:
        raise BadUrl(f"password must have 1 to 1024 characters; got {len(value)}")
    return value


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
    batch_bytes: int = Field(
        DEFAULT_BATCH_BYTES,
        ge=MIN_BATCH_BYTES,
        le=MAX_BATCH_BYTES,
        description="Most bytes of entries per batch read (their fields' names and values as "
        "the bus sends them; 64 KiB to 64 MiB, 8 MiB by default): a batch ends with the entry "
        "that reaches it, and an entry larger than it is read alone.",
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
    target_field: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The field holding each entry's target, a finite number checked as the "
        "features are (selectors and streams of rows with a target).",
    )
    format: Format = Field(
        "json",
        description="What each message's value is written in: json (an object keyed by "
        "feature name, or an array of numbers for a selector without feature names) or "
        "msgpack (a map keyed by feature name, or an array of numbers, alike). A message that "
        "is not of it is set aside with its position and reason. For a Redis stream, the "
        "value_field's value.",
    )
    on_reset: Literal["stop", "restart"] = Field(
        "stop",
        description="What the source does when its bus is reset (a stream or topic created "
        "again below the committed position): stop (state reset, until an operator restarts "
        "it with POST /v1/sources/{name}/restart) or restart (read the new stream or topic "
        "from its start). Either way the reset is recorded and counted.",
    )

    def definition(self) -> dict[str, Any]:
        """What the registry keeps (the URL as given: the consumer needs its credentials)."""
        return self.model_dump(mode="json")


class RedisStreamSource(SourceBase):
    """A Redis stream: each entry holds one field per feature name (and the label or target
    field), as text; or, with ``value_field``, that one field, holding the entry's message in
    the source's format."""

    # The rule of ``_format_in_a_field``, stated in the schema: a client (and a contract
    # test) that reads it knows a msgpack source names its value_field.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"format": {"enum": FIELD_FORMATS}}, "required": ["format"]},
            "then": {
                "properties": {"value_field": {"type": "string"}},
                "required": ["value_field"],
            },
        }
    )

    kind: Literal["redis-stream"]
    url: Annotated[str, _stated_url(REDIS_URL_PATTERN, REDIS_FORM)] = Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        pattern=REDIS_URL_PATTERN,
        description="The bus's Redis: redis://[user:password@]host[:port][/db], rediss://... "
        "or unix:///path/to/socket; query options db, protocol, username and password only. "
        "Credentials in it are kept, used, and never shown.",
    )
    key: str = Field(min_length=1, max_length=1024, description="The stream's key.")
    start: str = Field(
        "earliest",
        pattern=r"^(earliest|latest|[0-9]{1,20}-[0-9]{1,20})$",
        description="Where the first read begins: earliest, latest (what the stream holds "
        "then is skipped), or after this entry id.",
    )
    value_field: str | None = Field(
        None,
        min_length=1,
        max_length=1024,
        description="The one field of each entry that holds its message, in the source's "
        "format (as producers write `XADD key * data '{\"a\": 1, ...}'`: value_field "
        "data): an object keyed by feature name (and the label or target field), or an "
        "array of numbers. Without it, each entry holds one field per feature name, as text. "
        "An entry without that field, or with another, is set aside.",
    )

    @model_validator(mode="after")
    def _format_in_a_field(self) -> RedisStreamSource:
        """msgpack is a message's format, and a Redis entry's fields are text: it is the
        value_field's."""
        if self.format in FIELD_FORMATS and self.value_field is None:
            raise PydanticCustomError(
                HIDDEN_INPUT,
                "format {format} is read from one field of each entry: expected "
                "value_field, the field holding the message",
                {"format": self.format},
            )
        return self


class NatsSource(SourceBase):
    """A NATS JetStream stream: each message is an object keyed by feature name (or an array
    of numbers, for a selector without names), in the source's format (JSON or msgpack)."""

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

    url: Annotated[str, _stated_url(NATS_URL_PATTERN, NATS_FORM)] = Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
        pattern=NATS_URL_PATTERN,
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
    """A Kafka topic: each message's value is an object keyed by feature name (or an array of
    numbers, for a selector without names), in the source's format (JSON or msgpack). Its
    partitions are shared by the Sift processes running: each takes a fair share, under a
    lease per partition."""

    kind: Literal["kafka"]
    bootstrap: str = Field(
        min_length=1,
        max_length=MAX_URL_LENGTH,
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
    password: Annotated[str, BeforeValidator(_hidden)] | None = Field(
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
        return kafka_url(self.bootstrap, self.username, self.password)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "url": self.url}


AnySource = RedisStreamSource | NatsSource | KafkaSource
SourceIn = Annotated[AnySource, Field(discriminator="kind")]

#: Each kind's source model, by its ``kind``.
KINDS: dict[str, type[AnySource]] = {
    "redis-stream": RedisStreamSource,
    "nats": NatsSource,
    "kafka": KafkaSource,
}


class SourceRestart(BaseModel):
    """Where a source stopped at a bus reset reads again."""

    model_config = ConfigDict(extra="forbid")

    start: str = Field(
        "earliest",
        max_length=64,
        pattern=r"^(earliest|latest|-1|[0-9]{1,20}(-[0-9]{1,20})?)$",
        description="earliest (the stream's or partition's first entry), latest (what it holds "
        "now is skipped), or after a position of the source's kind (a Redis entry id, a "
        "JetStream sequence, a Kafka offset, for each partition stopped).",
    )


def restart_start(kind: str, start: str) -> str | None:
    """Why ``start`` is not a start of a source of ``kind`` (None: it is)."""
    field = KINDS[kind].model_fields["start"]
    patterns = [getattr(m, "pattern", None) for m in field.metadata]
    pattern = next((p for p in patterns if p), None)
    if pattern is None or re.fullmatch(pattern, start):
        return None
    return f"expected start to be earliest, latest or a position of a {kind} source; got {start!r}"


def parsed(url: str) -> Endpoint | None:
    """A stored definition's URL as its bus's library reads it (None: it does not parse)."""
    try:
        return endpoint(url)
    except BadUrl:
        return None


def redacted(url: str) -> str:
    """``url`` without its credentials (``Endpoint.shown``): the user kept when a password
    goes with it; a password, or a user alone (a token, NATS's way), shown as ``***``."""
    where = parsed(url)
    if where is None:
        return "<a URL that does not parse>"
    return where.shown


def credentials(url: str) -> list[str]:
    """The secret parts of ``url``, in every spelling (the whole URL if it does not parse)."""
    where = parsed(url)
    return [url] if where is None else list(where.secrets)


def scrub(text: str, url: str) -> str:
    """``text`` (an error) with the URL's credentials taken out."""
    text = text.replace(url, redacted(url))
    for secret in sorted(credentials(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
