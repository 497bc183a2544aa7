"""Streams: create, describe, list, delete; chunks pushed to them; their rankings side by side."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from siftstream import _inputs as inputs
from siftstream._api.core import (
    JSON_HEADERS,
    PENDING_TIMEOUT_SECONDS,
    POLL_SECONDS,
    Api,
    _drop_none,
    _every_page,
    _json,
    _names,
    _nothing,
    _rows_body,
    _stream_bodies,
    json_body,
    new_key,
    stream_path,
)
from siftstream._http import Call, Sleep, Steps
from siftstream.errors import (
    SiftClientError,
)
from siftstream.results import (
    ChunkReceipt,
    FeaturesReceipt,
    PushSummary,
    StreamInfo,
    StreamPage,
    StreamRankings,
    StreamReceipt,
)


def create_stream(
    api: Api,
    name: str,
    *,
    n_features: int | None = None,
    n_samples: int | None = None,
    views: Mapping[str, int] | None = None,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    labelled: bool = False,
    data: Any = None,
    y: Any = None,
) -> Steps[StreamInfo]:
    """Create a stream: one log that several selectors apply (attach them with
    ``create(..., stream=name)``). Its shape is a selector's: ``n_features`` (rows;
    ``labelled=True``: rows with one label each), ``views`` or ``n_samples`` (feature
    columns). ``data``: rows to come, whose width and (DataFrame) column names it takes
    (without the labels column named by ``y``, which makes it labelled).

    A retry after a lost answer that meets "name exists" answers the stream the first
    attempt created."""
    if data is not None and n_features is None and n_samples is None and views is None:
        features, labels = inputs.split_labels(data, y) if isinstance(y, str) else (data, y)
        n_features = inputs.width_of(features)
        if feature_names is None:
            feature_names = inputs.column_names(features)
        labelled = labelled or labels is not None
    document: dict[str, Any] = {"name": name}
    document.update(
        _drop_none(
            n_features=n_features,
            n_samples=n_samples,
            views=None if views is None else dict(views),
            feature_names=None if feature_names is None else _names(feature_names),
        )
    )
    if labelled:
        document["labelled"] = True
    created: StreamInfo | None = yield Call(
        "POST",
        "/v1/streams",
        lambda r: None if r.status_code == 409 else StreamInfo.from_json(_json(r)),
        content=json_body(document),
        headers=JSON_HEADERS,
        done_earlier=frozenset({409}),
    )
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
    api: Api,
    name: str,
    data: Any,
    y: Any = None,
    *,
    chunk_rows: int | None = None,
    key_prefix: str | None = None,
    wait: bool = True,
    on_chunk: Callable[[StreamReceipt], None] | None = None,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> Steps[PushSummary]:
    """Push an input to a stream in chunks, once for every selector attached to it: the
    inputs of ``push`` (rows, ``y`` labels for a labelled stream, {view: rows}), or for a
    stream of feature columns those of ``push_features`` (n_samples x c, ``feature_names``
    naming the columns; ``chunk_rows`` then counts columns). Chunk ``i`` carries the
    Idempotency-Key ``<key_prefix>-<i>``. Each receipt says, per selector, what became of
    its chunk; a chunk every selector set aside raises ``ChunkRejectedError``."""
    stream: StreamInfo = yield describe_stream(api, name)
    prefix = key_prefix or new_key()
    receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt] = []
    items = 0
    for index, body in enumerate(
        _stream_bodies(stream, data, y, chunk_rows, api.chunk_bytes, feature_names)
    ):
        receipt = yield from _push_stream_body(api, name, body, f"{prefix}-{index}", wait)
        receipts.append(receipt)
        items += receipt.items
        if on_chunk is not None:
            on_chunk(receipt)
    if not receipts:
        raise ValueError("nothing to push: the input is empty")
    return PushSummary(receipts, items)


def push_stream_chunk(
    api: Api,
    name: str,
    rows: Any,
    labels: Sequence[inputs.Label] | None = None,
    *,
    idempotency_key: str | None = None,
    wait: bool = True,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> Steps[StreamReceipt]:
    """Push one chunk of rows (rows and labels, or {view: rows}) to a stream as it is."""
    body = _rows_body(rows, labels, feature_names)
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
    receipt: StreamReceipt = yield Call(
        "POST",
        stream_path(name, "chunks"),
        lambda r: StreamReceipt.from_json(_json(r)),
        content=body.content,
        headers={
            "content-type": body.media_type,
            "idempotency-key": idempotency_key or new_key(),
        },
        params=None if wait else {"wait": "false"},
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
