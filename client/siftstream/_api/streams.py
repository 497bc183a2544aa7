"""Streams: create, describe, list, delete; chunks pushed to them; their rankings side by side."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

import numpy as np

from siftstream import _inputs as inputs
from siftstream._api.core import (
    PENDING_TIMEOUT_SECONDS,
    POLL_SECONDS,
    Api,
    PushOptions,
    ShapeOptions,
    _chunk_call,
    _created,
    _drop_none,
    _every_page,
    _json,
    _nothing,
    _only,
    _pushed,
    _rows_body,
    _shape_document,
    _shapeless,
    _stream_bodies,
    chunk_side,
    new_key,
    stream_path,
)
from siftstream._http import Call, Sleep, Steps
from siftstream.errors import (
    SiftClientError,
)
from siftstream.results import (
    PushSummary,
    StreamInfo,
    StreamPage,
    StreamRankings,
    StreamReceipt,
)


class StreamOptions(ShapeOptions, total=False):
    """``create_stream``'s options (its docstring tells each one)."""

    labelled: bool
    targets: bool
    data: Any
    y: Any


def create_stream(api: Api, name: str, **options: Unpack[StreamOptions]) -> Steps[StreamInfo]:
    """Create a stream: one log that several selectors apply (attach them with
    ``create(..., stream=name)``). Its shape is a selector's: ``n_features`` (rows;
    ``labelled=True``: rows with one label each; ``targets=True``: rows with one numeric
    target each), ``views`` or ``n_samples`` (feature columns). ``data``: rows to come, whose
    width and (DataFrame) column names it takes, without the column named by ``y``: its labels,
    which makes it labelled, or with ``targets=True`` its target.

    A retry after a lost answer that meets "name exists" answers the stream the first
    attempt created."""
    _only(options, StreamOptions, "create_stream")
    data, y = options.get("data"), options.get("y")
    labelled = options.get("labelled", False)
    targets = options.get("targets", False)
    if data is not None and _shapeless(options):
        side = inputs.TARGETS if targets else inputs.LABELS
        data, values = inputs.split_side(data, y, side) if isinstance(y, str) else (data, y)
        labelled = labelled or (values is not None and not targets)
    document: dict[str, Any] = {"name": name, **_shape_document(options, data)}
    if labelled:
        document["labelled"] = True
    if targets:
        document["targets"] = True
    created: StreamInfo | None = yield _created("/v1/streams", document, StreamInfo.from_json)
    if created is not None:
        return created
    existing: StreamInfo = yield describe_stream(api, name)
    return existing


def describe_stream(api: Api, name: str) -> Call[StreamInfo]:
    """The stream, its log, and the selectors attached to it."""
    return Call("GET", stream_path(name), lambda r: StreamInfo.from_json(_json(r)))


def stream_page(
    api: Api, *, limit: int | None = None, after: str | None = None
) -> Call[StreamPage]:
    """One page of the streams this key may see, sorted by name, after ``after``."""
    return Call(
        "GET",
        "/v1/streams",
        lambda r: StreamPage.from_json(_json(r)),
        params=_drop_none(limit=limit, after=after),
    )


def list_streams(api: Api, *, page_size: int | None = None) -> Steps[list[StreamInfo]]:
    """Every stream this key may see, following the pages."""
    found: list[StreamInfo] = yield from _every_page(
        lambda after: stream_page(api, limit=page_size, after=after)
    )
    return found


def delete_stream(api: Api, name: str, *, force: bool = False) -> Call[None]:
    """Delete a stream. While selectors are attached the service refuses (409, a
    ``ConflictError`` naming them) unless ``force``, which detaches them first (they keep
    their state). A retry that finds it gone is done."""
    return Call(
        "DELETE",
        stream_path(name),
        _nothing,
        params={"force": "true"} if force else None,
        done_earlier=frozenset({404}),
    )


def push_stream(
    api: Api, name: str, data: Any, y: Any = None, **options: Unpack[PushOptions[StreamReceipt]]
) -> Steps[PushSummary]:
    """Push an input to a stream in chunks, once for every selector attached to it: the
    inputs of ``push`` (rows, ``y`` the labels of a labelled stream or the targets of a
    stream of rows with a target, {view: rows}), or for a stream of feature columns those of
    ``push_features`` (n_samples x c, ``feature_names`` naming the columns; ``chunk_rows``
    then counts columns). A ``y`` the stream's rows do not carry raises ``ValueError``, as
    ``push``'s. Chunk ``i`` carries the
    Idempotency-Key ``<key_prefix>-<i>``. Each receipt says, per selector, what became of
    its chunk; a chunk every selector set aside raises ``ChunkRejectedError``."""
    _only(options, PushOptions, "push_stream")
    stream: StreamInfo = yield describe_stream(api, name)
    prefix = options.get("key_prefix") or new_key()
    wait = options.get("wait", True)
    bodies = _stream_bodies(
        stream, data, y, options.get("chunk_rows"), api.chunk_bytes, options.get("feature_names")
    )
    pushes = (
        _push_stream_body(api, name, body, f"{prefix}-{index}", wait)
        for index, body in enumerate(bodies)
    )
    summary = yield from _pushed(
        pushes, options.get("on_chunk"), "nothing to push: the input is empty"
    )
    return summary


def push_stream_chunk(
    api: Api,
    name: str,
    rows: Any,
    labels: Sequence[inputs.Label] | None = None,
    *,
    targets: Any = None,
    idempotency_key: str | None = None,
    wait: bool = True,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> Steps[StreamReceipt]:
    """Push one chunk of rows (rows and labels, rows and ``targets``, or {view: rows}) to a
    stream as it is."""
    side, values = chunk_side(labels, targets)
    body = _rows_body(rows, side, values, feature_names)
    receipt = yield from _push_stream_body(api, name, body, idempotency_key, wait)
    return receipt


def push_stream_columns(
    api: Api,
    name: str,
    columns: np.ndarray,
    names: Sequence[str] | None = None,
    *,
    idempotency_key: str | None = None,
    wait: bool = True,
) -> Steps[StreamReceipt]:
    """Push one chunk of feature columns (n_samples x c) to a stream of them, as it is."""
    body = inputs.columns_body(columns, names)
    receipt = yield from _push_stream_body(api, name, body, idempotency_key, wait)
    return receipt


def _push_stream_body(
    api: Api, name: str, body: inputs.Body, idempotency_key: str | None, wait: bool
) -> Steps[StreamReceipt]:
    path = stream_path(name, "chunks")
    receipt: StreamReceipt = yield _chunk_call(
        path, StreamReceipt.from_json, body, idempotency_key, wait
    )
    deadline = time.monotonic() + PENDING_TIMEOUT_SECONDS
    while wait and not receipt.applied:
        if time.monotonic() > deadline:
            raise SiftClientError(
                f"chunk {receipt.log_id} of stream '{name}' still pending after "
                f"{PENDING_TIMEOUT_SECONDS:.0f} s"
            )
        yield Sleep(POLL_SECONDS)
        status: StreamReceipt = yield stream_chunk_status(api, name, receipt.log_id)
        receipt = receipt.once_settled(status)
    return receipt


def stream_chunk_status(api: Api, name: str, log_id: str) -> Call[StreamReceipt]:
    """Where a chunk pushed to a stream is in each selector that applies it."""
    return Call(
        "GET",
        stream_path(name, "chunks", log_id),
        lambda r: StreamReceipt.from_json(_json(r)),
    )


def stream_rankings(
    api: Api, name: str, h: int = 10, p: float | None = None
) -> Call[StreamRankings]:
    """Every attached selector's top h side by side, and how much every pair agrees
    (Jaccard, rank-biased overlap with persistence ``p``, default 0.9)."""
    return Call(
        "GET",
        stream_path(name, "rankings"),
        lambda r: StreamRankings.from_json(_json(r)),
        params=_drop_none(h=h, p=p),
    )
