"""Sources: the buses Sift reads into a selector or a stream."""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from siftstream._api.core import (
    JSON_HEADERS,
    Api,
    _created,
    _drop_none,
    _json,
    _nothing,
    _only,
    json_body,
    source_path,
)
from siftstream._http import Call, Steps
from siftstream.errors import (
    SiftClientError,
)
from siftstream.results import (
    Source,
)


class SourceOptions(TypedDict, total=False):
    """``create_source``'s options on what to read and how (its docstring tells each one)."""

    key: str | None
    stream: str | None
    subject: str | None
    topic: str | None
    group: str | None
    username: str | None
    password: str | None
    mechanism: str | None
    tls: bool | None
    batch_rows: int | None
    batch_bytes: int | None
    batch_ms: int | None
    start: str | None
    label_field: str | None
    target_field: str | None
    on_reset: str | None
    format: str | None
    value_field: str | None


def create_source(
    api: Api,
    name: str,
    kind: str,
    url: str,
    *,
    into_selector: str | None = None,
    into_stream: str | None = None,
    **options: Unpack[SourceOptions],
) -> Steps[Source]:
    """Create a source (admin): the service reads a bus and appends what it reads to the
    selector ``into_selector`` or to the stream ``into_stream`` (exactly one of them, else
    ``ValueError``), exactly once.

    ``kind="redis-stream"``: the Redis stream ``key`` at ``url`` (``redis://``,
    ``rediss://``, ``unix://``), one field per feature name in each entry, or, with
    ``value_field``, that one field holding the entry's message.
    ``kind="nats"``: the JetStream ``stream`` at ``url`` (``nats://``, ``tls://``), only
    its messages on ``subject`` if given, each an object keyed by feature name.
    ``kind="kafka"``: the topic ``topic`` of the brokers ``url`` (``host:port``,
    comma-separated), each message an object keyed by feature name; ``group`` (whose
    committed offsets Sift brings up to its own, for Kafka's tools), SASL ``username``,
    ``password`` and ``mechanism``, and ``tls``.
    ``format``: what a message is written in, ``json`` (the default) or ``msgpack`` (a map
    keyed by feature name; an array of numbers, as in JSON, for a selector without names).
    A labelled target takes each entry's label from ``label_field``, one of rows with a target
    its numeric target from ``target_field``. Entries become chunks
    of up to ``batch_rows`` rows and about ``batch_bytes`` of entries (8 MiB by default), or
    what ``batch_ms`` milliseconds gathered; ``start``:
    ``earliest`` (the default), ``latest``, or after this position (a Redis entry id, a
    JetStream sequence, a Kafka offset). ``on_reset``: what it does when its bus is reset (a
    stream or topic created again below its position): ``stop`` (the default; state reset
    until ``restart_source``) or ``restart`` (read the new one from its start). Credentials
    in ``url`` (and a Kafka ``password``) are kept by the service and never shown.

    A retry after a lost answer that meets "name exists" answers the source the first
    attempt created."""
    _only(options, SourceOptions, "create_source")
    if (into_selector is None) == (into_stream is None):
        raise ValueError("expected exactly one of into_selector and into_stream")
    into = _drop_none(selector=into_selector, stream=into_stream)
    # A Kafka source names its brokers (bootstrap), the others a URL.
    where = "bootstrap" if kind == "kafka" else "url"
    document: dict[str, Any] = {"name": name, "kind": kind, where: url, "into": into}
    document.update(_drop_none(**options))
    created: Source | None = yield _created("/v1/sources", document, Source.from_json)
    if created is not None:
        return created
    existing: Source = yield describe_source(api, name)
    if existing.kind != kind or existing.into != into:
        raise SiftClientError(
            f"source '{name}' exists as {existing.kind} into {existing.into_kind} "
            f"'{existing.into_name}', not as {kind} into {into}"
        )
    return existing


def describe_source(api: Api, name: str) -> Call[Source]:
    """The source: what it reads (its URL without credentials), its state and last error,
    its committed positions and lag, the rows it appended, and the newest entries it set
    aside (``Source.rejected_entries``, each with its position and reason)."""
    return Call("GET", source_path(name), lambda r: Source.from_json(_json(r)))


def list_sources(api: Api) -> Call[list[Source]]:
    """Every source this key may see, sorted by name, each as ``describe_source`` has it."""
    return Call(
        "GET",
        "/v1/sources",
        lambda r: [Source.from_json(s) for s in _json(r)["sources"]],
    )


def restart_source(api: Api, name: str, start: str = "earliest") -> Call[Source]:
    """Restart a source stopped at a reset of its bus (admin; state reset): each partition it
    stopped reads again from ``start`` (``earliest``, ``latest``, or after a position), in the
    bus as it is now; the source as it is then. A source not stopped at a reset: ConflictError.
    """
    return Call(
        "POST",
        f"{source_path(name)}/restart",
        lambda r: Source.from_json(_json(r)),
        content=json_body({"start": start}),
        headers=JSON_HEADERS,
    )


def delete_source(api: Api, name: str) -> Call[None]:
    """Delete a source (admin): its consumer stops within a second; what it appended stays
    in its target. A retry that finds it gone is done."""
    return Call("DELETE", source_path(name), _nothing, done_earlier=frozenset({404}))
