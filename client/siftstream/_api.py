"""Every operation of the Sift API as a plan: the requests to make and how to read their answers.

``Api`` builds ``Call``s (one request) and plans (generators of calls, for operations of several
requests: pushing in chunks, following pages, waiting for a pending chunk). It does no I/O:
``Client`` runs its plans with ``SyncDriver`` and ``AsyncClient`` with ``AsyncDriver``
(``siftstream._http``), so both clients share every request, retry and parse.

Writes carry an ``Idempotency-Key`` chosen here, once per logical chunk (``new_key``, or a
caller's key or key prefix): the drivers resend the same call, key included, on a retry.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
import numpy as np

from siftstream import _inputs as inputs
from siftstream._http import Call, Sleep, Steps
from siftstream._npy import read_npy
from siftstream.errors import (
    PROBLEM_TYPE_PREFIX,
    ChunkRejectedError,
    SiftClientError,
)
from siftstream.results import (
    Alert,
    AlertEvent,
    ApiKey,
    Baseline,
    ChunkReceipt,
    ChunkStatus,
    Clustering,
    CreatedAlert,
    CreatedKey,
    Drift,
    FeaturePage,
    FeaturesReceipt,
    Health,
    History,
    MethodInfo,
    Projection,
    PushSummary,
    RotatedSecret,
    SelectorInfo,
    SelectorPage,
    Source,
    StreamInfo,
    StreamPage,
    StreamRankings,
    StreamReceipt,
    TenantQuota,
    Top,
    Transformed,
    Weights,
)

T = TypeVar("T")
Written = TypeVar("Written", ChunkReceipt, FeaturesReceipt)

JSON_HEADERS = {"content-type": "application/json"}
NPY_ACCEPT = {"accept": inputs.NPY}
ARCHIVE = "application/vnd.sift.archive"
#: How often a pending chunk's status is asked for, and for how long at most.
POLL_SECONDS = 0.2
PENDING_TIMEOUT_SECONDS = 600.0


def new_key() -> str:
    """A fresh Idempotency-Key (128 random bits)."""
    return "sift-" + uuid.uuid4().hex


def selector_path(name: str, *rest: str) -> str:
    return "/".join(["/v1/selectors", quote(name, safe=""), *rest])


def stream_path(name: str, *rest: str) -> str:
    return "/".join(["/v1/streams", quote(name, safe=""), *rest])


def source_path(name: str) -> str:
    return "/v1/sources/" + quote(name, safe="")


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays in JSON bodies (parameters taken from numpy computations)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def json_body(document: Any) -> bytes:
    return json.dumps(document, default=_json_default).encode()


def _json(response: httpx.Response) -> dict[str, Any]:
    document = response.json()
    if not isinstance(document, dict):
        raise ValueError(f"expected a JSON object; got {type(document).__name__}")
    return document


def _headers_seen(response: httpx.Response) -> dict[str, int | None]:
    """``Sift-Rows-Seen`` / ``Sift-Features-Seen`` of a ``.npy`` answer."""
    seen: dict[str, int | None] = {}
    for field in ("rows_seen", "features_seen"):
        value = response.headers.get("sift-" + field.replace("_", "-"))
        seen[field] = None if value is None else int(value)
    return seen


def npy_array(response: httpx.Response) -> np.ndarray:
    """A ``.npy`` answer, parsed by the client's safe reader (never ``np.load``, never
    unpickled)."""
    try:
        return read_npy(response.content, max_ndim=2)
    except ValueError as exc:
        raise ValueError(f"the .npy answer does not parse: {exc}") from None


def _nothing(response: httpx.Response) -> None:
    return None


def _read(
    name: str,
    route: Sequence[str],
    model: Callable[[dict[str, Any]], T],
    params: Mapping[str, Any] | None = None,
) -> Call[T]:
    """A GET of one selector's resource whose JSON answer ``model`` reads."""
    return Call("GET", selector_path(name, *route), lambda r: model(_json(r)), params=params)


def _drop_none(**query: Any) -> dict[str, Any]:
    return {key: value for key, value in query.items() if value is not None}


class _Page(Protocol):
    """A page of a listing: ``next`` is the ``after`` of the following one (None: the last)."""

    @property
    def next(self) -> str | None: ...


P = TypeVar("P", bound=_Page)
Item = TypeVar("Item")


def _every_page(
    page_after: Callable[[str | None], Call[P]], items_of: Callable[[P], list[Item]]
) -> Steps[list[Item]]:
    """Every item of a listing, following its pages from the first."""
    found: list[Item] = []
    after: str | None = None
    while True:
        page: P = yield page_after(after)
        items = items_of(page)
        found.extend(items)
        if page.next is None or not items:
            return found
        after = page.next


class Api:
    """The operations of the API as calls and plans (see the module docstring).

    ``chunk_bytes`` sizes the chunks that ``push`` and ``push_features`` cut large inputs into.
    """

    def __init__(self, chunk_bytes: int = inputs.DEFAULT_CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes

    # -- probes -------------------------------------------------------------------------------

    def health(self) -> Call[Health]:
        """Liveness: the process serves (says nothing about Redis)."""
        return Call("GET", "/v1/healthz", lambda r: Health.from_json(_json(r)))

    def ready(self) -> Call[Health]:
        """Readiness (Redis answers); raises ``UnavailableError`` at once when not ready."""
        return Call(
            "GET", "/v1/readyz", lambda r: Health.from_json(_json(r)), retry_unavailable=False
        )

    def metrics(self) -> Call[str]:
        """The Prometheus text of ``/metrics`` (the client's key must be the metrics token when
        the service has one)."""
        return Call("GET", "/metrics", lambda r: r.text)

    # -- selectors ----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        method: str,
        *,
        n_features: int | None = None,
        n_samples: int | None = None,
        views: Mapping[str, int] | None = None,
        feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        params: Mapping[str, Any] | None = None,
        data: Any = None,
        expires_after: float | None = None,
        stream: str | None = None,
        from_: str | None = None,
    ) -> Steps[SelectorInfo]:
        """Create a selector: ``n_features`` for row methods, ``n_samples`` for feature-column
        methods (ofs, iqrp), ``views`` ({view: features}) for multi-view ones; ``params`` are
        the method's hyperparameters. The answer echoes the resolved parameters.
        ``expires_after``: the service deletes the selector after this many seconds without a
        commit.

        ``stream``: attach it to that stream instead (no shape: it takes the stream's), from
        ``from_`` (``"start"``, the default: every chunk the stream holds; ``"now"``: the
        chunks pushed from now on).

        ``data``: rows of the stream to come; ``n_features`` is taken from its width and
        ``feature_names`` from a DataFrame's columns when not given.

        A retry after a lost answer that meets "name exists" answers the selector the first
        attempt created.
        """
        if data is not None and n_features is None and n_samples is None and views is None:
            n_features = inputs.width_of(data)
            if feature_names is None:
                feature_names = inputs.column_names(data)
        document: dict[str, Any] = {"name": name, "method": method}
        document.update(
            _drop_none(
                n_features=n_features,
                n_samples=n_samples,
                views=None if views is None else dict(views),
                feature_names=None if feature_names is None else _names(feature_names),
                params=None if params is None else dict(params),
                expires_after=expires_after,
                stream=stream,
            )
        )
        if from_ is not None:
            document["from"] = from_
        created: SelectorInfo | None = yield Call(
            "POST",
            "/v1/selectors",
            lambda r: None if r.status_code == 409 else SelectorInfo.from_json(_json(r)),
            content=json_body(document),
            headers=JSON_HEADERS,
            done_earlier=frozenset({409}),
        )
        if created is not None:
            return created
        existing: SelectorInfo = yield self.describe(name)
        if existing.method != method:
            raise SiftClientError(
                f"selector '{name}' exists with method {existing.method}, not {method}"
            )
        return existing

    def methods(self) -> Call[list[MethodInfo]]:
        """Every method the service runs, as ``GET /v1/methods`` describes it."""
        return Call(
            "GET",
            "/v1/methods",
            lambda r: [MethodInfo.from_json(m) for m in _json(r)["methods"]],
        )

    def describe(self, name: str) -> Call[SelectorInfo]:
        """The selector, the scalars of its state, its classes (labelled methods), pending
        entries."""
        return _read(name, (), SelectorInfo.from_json)

    def list_page(
        self, *, limit: int | None = None, after: str | None = None
    ) -> Call[SelectorPage]:
        """One page of the selectors this key may see, sorted by name, after ``after``."""
        return Call(
            "GET",
            "/v1/selectors",
            lambda r: SelectorPage.from_json(_json(r)),
            params=_drop_none(limit=limit, after=after),
        )

    def list_selectors(self, *, page_size: int | None = None) -> Steps[list[SelectorInfo]]:
        """Every selector this key may see, following the pages."""
        found: list[SelectorInfo] = yield from _every_page(
            lambda after: self.list_page(limit=page_size, after=after),
            lambda page: page.selectors,
        )
        return found

    def delete(self, name: str) -> Call[None]:
        """Delete a selector and everything of it (a retry that finds it gone is done)."""
        return Call("DELETE", selector_path(name), _nothing, done_earlier=frozenset({404}))

    def detach(self, name: str) -> Call[SelectorInfo]:
        """Detach a selector from its stream: it keeps its state, takes chunks directly from
        then on, and its stream keeps nothing more for it."""
        return Call(
            "POST", selector_path(name, "detach"), lambda r: SelectorInfo.from_json(_json(r))
        )

    # -- streams --------------------------------------------------------------------------------

    def create_stream(
        self,
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
        existing: StreamInfo = yield self.describe_stream(name)
        return existing

    def describe_stream(self, name: str) -> Call[StreamInfo]:
        """The stream, its log, and the selectors attached to it."""
        return Call("GET", stream_path(name), lambda r: StreamInfo.from_json(_json(r)))

    def stream_page(
        self, *, limit: int | None = None, after: str | None = None
    ) -> Call[StreamPage]:
        """One page of the streams this key may see, sorted by name, after ``after``."""
        return Call(
            "GET",
            "/v1/streams",
            lambda r: StreamPage.from_json(_json(r)),
            params=_drop_none(limit=limit, after=after),
        )

    def list_streams(self, *, page_size: int | None = None) -> Steps[list[StreamInfo]]:
        """Every stream this key may see, following the pages."""
        found: list[StreamInfo] = yield from _every_page(
            lambda after: self.stream_page(limit=page_size, after=after),
            lambda page: page.streams,
        )
        return found

    def delete_stream(self, name: str, *, force: bool = False) -> Call[None]:
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
        self,
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
        stream: StreamInfo = yield self.describe_stream(name)
        prefix = key_prefix or new_key()
        receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt] = []
        items = 0
        for index, body in enumerate(
            _stream_bodies(stream, data, y, chunk_rows, self.chunk_bytes, feature_names)
        ):
            receipt = yield from self._push_stream_body(name, body, f"{prefix}-{index}", wait)
            receipts.append(receipt)
            items += receipt.items
            if on_chunk is not None:
                on_chunk(receipt)
        if not receipts:
            raise ValueError("nothing to push: the input is empty")
        return PushSummary(receipts, items)

    def push_stream_chunk(
        self,
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
        receipt = yield from self._push_stream_body(name, body, idempotency_key, wait)
        return receipt

    def push_stream_columns(
        self,
        name: str,
        columns: np.ndarray,
        names: Sequence[str] | None = None,
        *,
        idempotency_key: str | None = None,
        wait: bool = True,
    ) -> Steps[StreamReceipt]:
        """Push one chunk of feature columns (n_samples x c) to a stream of them, as it is."""
        body = inputs.columns_body(columns, names)
        receipt = yield from self._push_stream_body(name, body, idempotency_key, wait)
        return receipt

    def _push_stream_body(
        self, name: str, body: inputs.Body, idempotency_key: str | None, wait: bool
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
            status: StreamReceipt = yield self.stream_chunk_status(name, receipt.log_id)
            receipt = receipt.once_settled(status)
        return receipt

    def stream_chunk_status(self, name: str, log_id: str) -> Call[StreamReceipt]:
        """Where a chunk pushed to a stream is in each selector that applies it."""
        return Call(
            "GET",
            stream_path(name, "chunks", log_id),
            lambda r: StreamReceipt.from_json(_json(r)),
        )

    def stream_rankings(
        self, name: str, h: int = 10, p: float | None = None
    ) -> Call[StreamRankings]:
        """Every attached selector's top h side by side, and how much every pair agrees
        (Jaccard, rank-biased overlap with persistence ``p``, default 0.9)."""
        return Call(
            "GET",
            stream_path(name, "rankings"),
            lambda r: StreamRankings.from_json(_json(r)),
            params=_drop_none(h=h, p=p),
        )

    # -- sources --------------------------------------------------------------------------------

    def create_source(
        self,
        name: str,
        kind: str,
        url: str,
        *,
        into_selector: str | None = None,
        into_stream: str | None = None,
        key: str | None = None,
        stream: str | None = None,
        subject: str | None = None,
        batch_rows: int | None = None,
        batch_ms: int | None = None,
        start: str | None = None,
        label_field: str | None = None,
    ) -> Steps[Source]:
        """Create a source (admin): the service reads a bus and appends what it reads to the
        selector ``into_selector`` or to the stream ``into_stream`` (exactly one of them, else
        ``ValueError``), exactly once.

        ``kind="redis-stream"``: the Redis stream ``key`` at ``url`` (``redis://``,
        ``rediss://``, ``unix://``), one field per feature name in each entry.
        ``kind="nats"``: the JetStream ``stream`` at ``url`` (``nats://``, ``tls://``), only
        its messages on ``subject`` if given, each a JSON object keyed by feature name.
        A labelled target takes each entry's label from ``label_field``. Entries become chunks
        of up to ``batch_rows`` rows, or what ``batch_ms`` milliseconds gathered; ``start``:
        ``earliest`` (the default), ``latest``, or after this position (a Redis entry id, a
        JetStream sequence). Credentials in ``url`` are kept by the service and never shown.

        A retry after a lost answer that meets "name exists" answers the source the first
        attempt created."""
        if (into_selector is None) == (into_stream is None):
            raise ValueError("expected exactly one of into_selector and into_stream")
        into = _drop_none(selector=into_selector, stream=into_stream)
        document: dict[str, Any] = {"name": name, "kind": kind, "url": url, "into": into}
        document.update(
            _drop_none(
                key=key,
                stream=stream,
                subject=subject,
                batch_rows=batch_rows,
                batch_ms=batch_ms,
                start=start,
                label_field=label_field,
            )
        )
        created: Source | None = yield Call(
            "POST",
            "/v1/sources",
            lambda r: None if r.status_code == 409 else Source.from_json(_json(r)),
            content=json_body(document),
            headers=JSON_HEADERS,
            done_earlier=frozenset({409}),
        )
        if created is not None:
            return created
        existing: Source = yield self.describe_source(name)
        if existing.kind != kind or existing.into != into:
            raise SiftClientError(
                f"source '{name}' exists as {existing.kind} into {existing.into_kind} "
                f"'{existing.into_name}', not as {kind} into {into}"
            )
        return existing

    def describe_source(self, name: str) -> Call[Source]:
        """The source: what it reads (its URL without credentials), its state and last error,
        its committed positions and lag, the rows it appended, and the newest entries it set
        aside (``Source.rejected_entries``, each with its position and reason)."""
        return Call("GET", source_path(name), lambda r: Source.from_json(_json(r)))

    def list_sources(self) -> Call[list[Source]]:
        """Every source this key may see, sorted by name, each as ``describe_source`` has it."""
        return Call(
            "GET",
            "/v1/sources",
            lambda r: [Source.from_json(s) for s in _json(r)["sources"]],
        )

    def delete_source(self, name: str) -> Call[None]:
        """Delete a source (admin): its consumer stops within a second; what it appended stays
        in its target. A retry that finds it gone is done."""
        return Call("DELETE", source_path(name), _nothing, done_earlier=frozenset({404}))

    # -- rows -------------------------------------------------------------------------------------

    def push(
        self,
        name: str,
        data: Any,
        y: Any = None,
        *,
        chunk_rows: int | None = None,
        key_prefix: str | None = None,
        wait: bool = True,
        on_chunk: Callable[[ChunkReceipt], None] | None = None,
        feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    ) -> Steps[PushSummary]:
        """Push rows in chunks (in order): a numpy array, a scipy sparse matrix or a DataFrame;
        ``y`` the labels for labelled methods (a sequence, a Series, or a DataFrame column's
        name); or a mapping {view: rows} for multi-view selectors.

        Chunks hold ``chunk_rows`` rows (default: about 8 MiB each). Each carries the
        Idempotency-Key ``<key_prefix>-<i>`` (a fresh prefix by default): pushing the same data
        again with the same prefix is answered as duplicates and changes nothing.

        A DataFrame's column names (every view's, for views), or ``feature_names``, go with the
        rows: the service puts each column on the feature of its name, and refuses names it
        does not have (before any row is applied).
        """
        names = feature_names if feature_names is not None else _names_of(data, y)
        chunks = _row_chunks(data, y, chunk_rows, self.chunk_bytes)
        prefix = key_prefix or new_key()
        receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt] = []
        items = 0
        for index, (rows, labels) in enumerate(chunks):
            receipt = yield from self.push_chunk(
                name,
                rows,
                labels,
                idempotency_key=f"{prefix}-{index}",
                wait=wait,
                feature_names=names,
            )
            receipts.append(receipt)
            items += receipt.items
            if on_chunk is not None:
                on_chunk(receipt)
        if not receipts:
            raise ValueError("nothing to push: the input has no rows")
        return PushSummary(receipts, items)

    def push_chunk(
        self,
        name: str,
        rows: Any,
        labels: Sequence[inputs.Label] | None = None,
        *,
        idempotency_key: str | None = None,
        wait: bool = True,
        feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    ) -> Steps[ChunkReceipt]:
        """Push one chunk as it is (no splitting): rows, rows and labels, or {view: rows}.

        ``feature_names`` name the columns ({view: names} for views; a DataFrame's columns by
        default): the service matches them to the selector's names (see ``push``).
        With ``wait`` (the default) the answer is the applied receipt, polling if the service
        answered 202; a chunk the service set aside raises ``ChunkRejectedError``.
        """
        body = _rows_body(rows, labels, feature_names)
        receipt = yield from self._write(
            name, "chunks", ChunkReceipt.from_json, body, idempotency_key, wait
        )
        return receipt

    def chunk_status(self, name: str, log_id: str) -> Call[ChunkStatus]:
        """Whether a chunk answered with 202 has been applied yet (or rejected, and why)."""
        return _read(name, ("chunks", log_id), ChunkStatus.from_json)

    def _write(
        self,
        name: str,
        route: str,
        receipt_of: Callable[[dict[str, Any]], Written],
        body: inputs.Body,
        idempotency_key: str | None,
        wait: bool,
    ) -> Steps[Written]:
        """POST a write to ``.../<route>`` with its Idempotency-Key (kept across retries);
        with ``wait``, follow a 202 up until the write is applied."""
        receipt: Written = yield Call(
            "POST",
            selector_path(name, route),
            lambda r: receipt_of(_json(r)),
            content=body.content,
            headers={
                "content-type": body.media_type,
                "idempotency-key": idempotency_key or new_key(),
            },
            params=None if wait else {"wait": "false"},
        )
        if wait and not receipt.applied:
            receipt = yield from self._settled(name, receipt)
        return receipt

    def _settled(self, name: str, receipt: Written) -> Steps[Written]:
        """``receipt`` once its chunk is applied (polling its status); rejected: raises."""
        deadline = time.monotonic() + PENDING_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            yield Sleep(POLL_SECONDS)
            status: ChunkStatus = yield self.chunk_status(name, receipt.log_id)
            if status.status == "rejected":
                raise _rejected(name, status)
            if status.applied:
                return receipt.once_applied(status)
        raise SiftClientError(
            f"chunk {receipt.log_id} of '{name}' still pending after "
            f"{PENDING_TIMEOUT_SECONDS:.0f} s"
        )

    # -- feature columns ------------------------------------------------------------------------

    def push_features(
        self,
        name: str,
        columns: Any,
        names: Sequence[str] | None = None,
        *,
        chunk_columns: int | None = None,
        key_prefix: str | None = None,
        wait: bool = True,
        on_chunk: Callable[[FeaturesReceipt], None] | None = None,
    ) -> Steps[PushSummary]:
        """Push new feature columns (n_samples x c: numpy array or DataFrame, whose column names
        become the features' names) in chunks of ``chunk_columns``, in order. OFS answers a
        decision per column (``FeaturesReceipt.decisions``); IQRP where it stored them."""
        if names is None:
            names = inputs.column_names(columns)
        matrix = inputs.as_matrix(columns)
        if not isinstance(matrix, np.ndarray):
            matrix = matrix.toarray()
        step = chunk_columns or inputs.columns_per_chunk(matrix.shape[0], names is not None)
        prefix = key_prefix or new_key()
        receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt] = []
        for index, part in enumerate(inputs.row_slices(matrix.shape[1], step)):
            receipt = yield from self.push_feature_chunk(
                name,
                matrix[:, part],
                None if names is None else names[part],
                idempotency_key=f"{prefix}-{index}",
                wait=wait,
            )
            receipts.append(receipt)
            if on_chunk is not None:
                on_chunk(receipt)
        if not receipts:
            raise ValueError("nothing to push: the input has no columns")
        return PushSummary(receipts, int(matrix.shape[1]))

    def push_feature_chunk(
        self,
        name: str,
        columns: np.ndarray,
        names: Sequence[str] | None = None,
        *,
        idempotency_key: str | None = None,
        wait: bool = True,
    ) -> Steps[FeaturesReceipt]:
        """Push one chunk of feature columns (n_samples x c) as it is (no splitting)."""
        body = inputs.columns_body(columns, names)
        receipt = yield from self._write(
            name, "features", FeaturesReceipt.from_json, body, idempotency_key, wait
        )
        return receipt

    def features(self, name: str, offset: int = 0, limit: int = 100) -> Call[FeaturePage]:
        """OFS: decided features in arrival order from ``offset``."""
        return _read(name, ("features",), FeaturePage.from_json, {"offset": offset, "limit": limit})

    # -- rankings -------------------------------------------------------------------------------

    def top(
        self,
        name: str,
        h: int = 10,
        *,
        strategy: str | None = None,
        l: int | None = None,  # noqa: E741 (IQRP's candidate list length, as the API names it)
        view: str | None = None,
    ) -> Call[Top]:
        """The h best features of the committed state. ``strategy="diverse"`` (fsds): pivoted
        QR on the sketch; ``l``: IQRP's candidate list length; ``view``: one view only."""
        query = _drop_none(h=h, strategy=strategy, l=l, view=view)
        return _read(name, ("top",), Top.from_json, query)

    def weights(self, name: str) -> Call[Weights]:
        """Every feature's score, as a numpy array (fetched as ``.npy``)."""
        return Call(
            "GET",
            selector_path(name, "weights"),
            lambda r: Weights(
                int(r.headers["sift-version"]), npy_array(r).ravel(), **_headers_seen(r)
            ),
            headers=NPY_ACCEPT,
        )

    def history(self, name: str, h: int = 10, limit: int = 20) -> Call[History]:
        """The top h of the selector's recent versions, newest first."""
        return _read(name, ("history",), History.from_json, {"h": h, "limit": limit})

    # -- drift and alerts -----------------------------------------------------------------------

    def drift(self, name: str, h: int = 10) -> Call[Drift]:
        """How far the top h moved since the previous version and since the baseline."""
        return _read(name, ("drift",), Drift.from_json, {"h": h})

    def set_baseline(self, name: str) -> Call[Baseline]:
        """Pin the current version as the baseline drift and alerts are measured against."""
        return Call("POST", selector_path(name, "baseline"), lambda r: Baseline.from_json(_json(r)))

    def forget_baseline(self, name: str) -> Call[None]:
        """Forget the baseline: the next version whose ranking is stable becomes it."""
        return Call("DELETE", selector_path(name, "baseline"), _nothing)

    def create_alert(
        self,
        name: str,
        url: str,
        threshold: float,
        *,
        h: int = 10,
        min_stability: float | None = None,
        label: str = "",
        kind: str = "webhook",
    ) -> Call[CreatedAlert]:
        """An alert on ``name`` (admin): ``url`` gets a signed event when a committed version's
        drift since the baseline reaches ``threshold`` (``kind="alertmanager"``: ``url`` is a
        Prometheus Alertmanager, which gets an alert that fires and resolves). Its secret
        (``CreatedAlert.secret``, which verifies the signatures) is in this answer only."""
        body: dict[str, Any] = {
            "url": url,
            "threshold": threshold,
            "h": h,
            "label": label,
            "kind": kind,
        }
        if min_stability is not None:
            body["min_stability"] = min_stability
        return Call(
            "POST",
            selector_path(name, "alerts"),
            lambda r: CreatedAlert.from_json(_json(r)),
            content=json_body(body),
            headers=JSON_HEADERS,
            replay_safe=False,  # a replay would make a second alert, its secret never shown
        )

    def list_alerts(self, name: str) -> Call[list[Alert]]:
        """The selector's alerts (without their secrets), with their last judgement."""
        return Call(
            "GET",
            selector_path(name, "alerts"),
            lambda r: [Alert.from_json(a) for a in _json(r)["alerts"]],
        )

    def rotate_alert_secret(self, name: str, alert_id: str) -> Call[RotatedSecret]:
        """A new secret for the alert (admin), in this answer only; the previous one signs
        every delivery beside it for a day, so that receivers switch at their own pace."""
        return Call(
            "POST",
            selector_path(name, "alerts", quote(alert_id, safe=""), "secret"),
            lambda r: RotatedSecret.from_json(_json(r)),
            replay_safe=False,  # a replay would rotate again, this answer's secret never used
        )

    def delete_alert(self, name: str, alert_id: str) -> Call[None]:
        return Call(
            "DELETE",
            selector_path(name, "alerts", quote(alert_id, safe="")),
            _nothing,
            done_earlier=frozenset({404}),
        )

    def alert_events(
        self, name: str, limit: int = 20, status: str | None = None
    ) -> Call[list[AlertEvent]]:
        """The events the selector's alerts raised (one per crossing), newest first; with
        ``status`` (pending, delivered, failed), only those whose delivery has it."""
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        return Call(
            "GET",
            selector_path(name, "alerts", "events"),
            lambda r: [AlertEvent.from_json(e) for e in _json(r)["events"]],
            params=params,
        )

    def redeliver_alert_event(self, name: str, event_id: str) -> Call[bool]:
        """Send a kept event again (admin): back in the outbox, due now, its attempts counted
        afresh. False if it was in the outbox already."""
        return Call(
            "POST",
            selector_path(name, "alerts", "events", quote(event_id, safe=""), "redeliver"),
            lambda r: bool(_json(r)["queued"]),
        )

    def rearm_alert(self, name: str, alert_id: str) -> Call[Alert]:
        """Re-arm an alert left firing (admin): the next version over its threshold is a
        crossing again, with a new event."""
        return Call(
            "POST",
            selector_path(name, "alerts", quote(alert_id, safe=""), "rearm"),
            lambda r: Alert.from_json(_json(r)),
        )

    # -- capabilities ---------------------------------------------------------------------------

    def merge(
        self, name: str, source: str, *, idempotency_key: str | None = None, wait: bool = True
    ) -> Steps[ChunkReceipt]:
        """Add selector ``source``'s state to ``name``'s, exactly (ocfs, variance). The key
        makes a retry safe; merging the same data twice on purpose counts it twice."""
        body = inputs.Body(json_body({"from": source}), inputs.JSON)
        receipt = yield from self._write(
            name, "merge", ChunkReceipt.from_json, body, idempotency_key, wait
        )
        return receipt

    def projection(self, name: str, solution: str | None = None) -> Call[Projection]:
        """IOC's projection W (n_features x n_components), eigenvalues and agreement."""
        return _read(name, ("projection",), Projection.from_json, _drop_none(solution=solution))

    def transform(self, name: str, rows: Any, solution: str | None = None) -> Call[Transformed]:
        """Rows mapped by the projection, ``W^T x`` each (one request: the rows must fit)."""
        body = inputs.rows_body(inputs.as_matrix(rows))
        return Call(
            "POST",
            selector_path(name, "transform"),
            lambda r: Transformed(
                int(r.headers["sift-version"]),
                int(r.headers["sift-rows-seen"]),
                np.atleast_2d(npy_array(r)),
            ),
            content=body.content,
            headers={"content-type": body.media_type, **NPY_ACCEPT},
            params=_drop_none(solution=solution),
        )

    def cluster(self, name: str, k: int, seed: int = 0) -> Call[Clustering]:
        """OFS: k-means of the samples on the kept, rescaled columns."""
        return Call(
            "POST",
            selector_path(name, "cluster"),
            lambda r: Clustering.from_json(_json(r)),
            content=json_body({"k": k, "seed": seed}),
            headers=JSON_HEADERS,
        )

    # -- archives -------------------------------------------------------------------------------

    def export(self, name: str) -> Call[bytes]:
        """The selector as a self-describing archive (bytes to keep, or to ``import_selector``)."""
        return Call(
            "GET", selector_path(name, "export"), lambda r: r.content, headers={"accept": ARCHIVE}
        )

    def import_selector(self, archive: bytes, name: str | None = None) -> Steps[SelectorInfo]:
        """Create a selector from an archive (under ``name``, or the name it was exported as)."""
        created: SelectorInfo | None = yield Call(
            "POST",
            "/v1/selectors/import",
            lambda r: None if r.status_code == 409 else SelectorInfo.from_json(_json(r)),
            content=archive,
            headers={"content-type": ARCHIVE},
            params=_drop_none(name=name),
            done_earlier=frozenset({409}),
        )
        if created is not None:
            return created
        # A retry met the name taken: by the first attempt, whose answer was lost.
        if name is None:
            raise SiftClientError(
                "importing met 'name exists' on a retry, and the archive's own name is not "
                "known here: pass name= to import under a name of your choice"
            )
        existing: SelectorInfo = yield self.describe(name)
        return existing

    # -- API keys -------------------------------------------------------------------------------

    def create_key(
        self, scopes: Sequence[str], prefix: str = "", label: str = ""
    ) -> Call[CreatedKey]:
        """A new API key (admin). Its secret (``CreatedKey.key``) is in this answer only."""
        return Call(
            "POST",
            "/v1/keys",
            lambda r: CreatedKey.from_json(_json(r)),
            content=json_body({"scopes": list(scopes), "prefix": prefix, "label": label}),
            headers=JSON_HEADERS,
            replay_safe=False,  # a replay would make a second key, never shown to anyone
        )

    def list_keys(self) -> Call[list[ApiKey]]:
        """The API keys this key may manage, without secrets."""
        return Call("GET", "/v1/keys", lambda r: [ApiKey.from_json(k) for k in _json(r)["keys"]])

    def revoke_key(self, key_id: str) -> Call[None]:
        """Revoke a key on every replica at once."""
        return Call(
            "DELETE", f"/v1/keys/{quote(key_id, safe='')}", _nothing, done_earlier=frozenset({404})
        )

    def quota(self, tenant: str) -> Call[TenantQuota]:
        """A tenant's quotas and what its names hold (the root, or the tenant's own admin)."""
        return Call(
            "GET",
            f"/v1/quotas/{quote(tenant, safe='')}",
            lambda r: TenantQuota.from_json(_json(r)),
        )

    def set_quota(
        self,
        tenant: str,
        *,
        selectors: int | None = None,
        state_bytes: int | None = None,
        alerts: int | None = None,
        streams: int | None = None,
    ) -> Call[TenantQuota]:
        """Set a tenant's quotas (the root only); those left out (None) take the defaults
        again."""
        given = {"selectors": selectors, "state_bytes": state_bytes, "alerts": alerts}
        limits = {k: v for k, v in {**given, "streams": streams}.items() if v is not None}
        return Call(
            "PUT",
            f"/v1/quotas/{quote(tenant, safe='')}",
            lambda r: TenantQuota.from_json(_json(r)),
            content=json_body(limits),
            headers=JSON_HEADERS,
        )


def _stream_bodies(
    stream: StreamInfo,
    data: Any,
    y: Any,
    chunk_rows: int | None,
    chunk_bytes: int,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> Iterator[inputs.Body]:
    """The chunks of an input pushed to ``stream``: feature columns for a stream of them (as
    ``push_features`` cuts them), else rows (as ``push`` does)."""
    if stream.is_feature_stream:
        names = feature_names if feature_names is not None else inputs.column_names(data)
        flat = None if names is None or isinstance(names, Mapping) else list(names)
        matrix = inputs.as_matrix(data)
        if not isinstance(matrix, np.ndarray):
            matrix = matrix.toarray()
        step = chunk_rows or inputs.columns_per_chunk(matrix.shape[0], flat is not None)
        for part in inputs.row_slices(int(matrix.shape[1]), step):
            yield inputs.columns_body(matrix[:, part], None if flat is None else flat[part])
        return
    names = feature_names if feature_names is not None else _names_of(data, y)
    for rows, labels in _row_chunks(data, y, chunk_rows, chunk_bytes):
        yield _rows_body(rows, labels, names)


def _names(names: Sequence[str] | Mapping[str, Sequence[str]]) -> Any:
    if isinstance(names, Mapping):
        return {view: [str(n) for n in items] for view, items in names.items()}
    return [str(n) for n in names]


def _rejected(name: str, status: ChunkStatus) -> ChunkRejectedError:
    """The error a waiting push raises for a chunk the service set aside after a 202."""
    problem = {
        "type": PROBLEM_TYPE_PREFIX + "chunk-rejected",
        "title": "Chunk rejected",
        "status": 422,
        "detail": f"the chunk (log id {status.log_id}) could not be applied and was set aside: "
        f"{status.reason}",
        "log_id": status.log_id,
    }
    return ChunkRejectedError(422, problem, "GET", selector_path(name, "chunks", status.log_id))


def _rows_body(
    rows: Any,
    labels: Sequence[inputs.Label] | None,
    names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> inputs.Body:
    if isinstance(rows, Mapping):
        by_view = names if isinstance(names, Mapping) else inputs.view_names(rows)
        return inputs.views_body(inputs.views_of(rows), by_view)
    flat = None if isinstance(names, Mapping) else names
    if flat is None:
        flat = inputs.column_names(rows)
    matrix = inputs.as_matrix(rows)
    if labels is None:
        return inputs.rows_body(matrix, flat)
    return inputs.labelled_body(matrix, labels, flat)


def _names_of(data: Any, y: Any) -> list[str] | dict[str, list[str]] | None:
    """The feature names of pushed rows: a DataFrame's columns (without a labels column named
    by ``y``), or every view's (all views DataFrames)."""
    if isinstance(data, Mapping):
        return inputs.view_names(data)
    features, _labels = inputs.split_labels(data, y) if isinstance(y, str) else (data, None)
    return inputs.column_names(features)


def _row_chunks(
    data: Any, y: Any, chunk_rows: int | None, chunk_bytes: int
) -> Iterator[tuple[Any, list[inputs.Label] | None]]:
    """``data`` (rows, or {view: rows}) and its labels cut into chunks of rows."""
    if isinstance(data, Mapping):
        views = inputs.views_of(data)
        widest = max(views.values(), key=lambda v: v.shape[1])
        n_rows = int(widest.shape[0])
        step = chunk_rows or inputs.rows_per_chunk(widest, chunk_bytes // max(len(views), 1))
        for part in inputs.row_slices(n_rows, step):
            yield {view: rows[part] for view, rows in views.items()}, None
        return
    features, labels = inputs.split_labels(data, y)
    matrix = inputs.as_matrix(features)
    if labels is not None and len(labels) != matrix.shape[0]:
        raise ValueError(f"expected {matrix.shape[0]} labels (one per row); got {len(labels)}")
    step = chunk_rows or inputs.rows_per_chunk(matrix, chunk_bytes)
    for part in inputs.row_slices(int(matrix.shape[0]), step):
        yield matrix[part], None if labels is None else labels[part]
