"""What every operation module shares: the paths, bodies and readers of answers, paging,
and ``Api``, the settings the operations run with (see the package's docstring)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypedDict, TypeVar
from urllib.parse import quote

import httpx
import numpy as np

from siftstream import _inputs as inputs
from siftstream._http import Call, Steps
from siftstream._npy import read_npy
from siftstream.errors import (
    PROBLEM_TYPE_PREFIX,
    ChunkRejectedError,
)
from siftstream.files import DataFile, open_data
from siftstream.results import (
    ChunkReceipt,
    ChunkStatus,
    FeaturesReceipt,
    Page,
    PushSummary,
    StreamInfo,
    StreamReceipt,
)

T = TypeVar("T")
Written = TypeVar("Written", ChunkReceipt, FeaturesReceipt)
R = TypeVar("R", ChunkReceipt, FeaturesReceipt, StreamReceipt)

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


def _only(options: Mapping[str, Any], allowed: type, operation: str) -> None:
    """A keyword argument that ``operation``'s options (a ``TypedDict``) do not have is a
    ``TypeError``, as it is for a parameter a signature does not have."""
    for option in options:
        if option not in allowed.__annotations__:
            raise TypeError(f"{operation}() got an unexpected keyword argument {option!r}")


def _created(path: str, document: dict[str, Any], read: Callable[[Any], T]) -> Call[T | None]:
    """POST a creation: what ``read`` makes of the answer, or None when the name exists
    (``done_earlier``: a retry after a lost answer meets the first attempt's)."""
    return Call(
        "POST",
        path,
        lambda r: None if r.status_code == 409 else read(_json(r)),
        content=json_body(document),
        headers=JSON_HEADERS,
        done_earlier=frozenset({409}),
    )


def _chunk_call(
    path: str,
    read: Callable[[Any], T],
    body: inputs.Body,
    idempotency_key: str | None,
    wait: bool,
) -> Call[T]:
    """POST a chunk to ``path`` with its Idempotency-Key (kept across retries); without
    ``wait`` the service answers before applying it."""
    return Call(
        "POST",
        path,
        lambda r: read(_json(r)),
        content=body.content,
        headers={"content-type": body.media_type, "idempotency-key": idempotency_key or new_key()},
        params=None if wait else {"wait": "false"},
    )


class ShapeOptions(TypedDict, total=False):
    """The shape of a selector or a stream: ``n_features`` for rows, ``n_samples`` for
    feature columns (ofs, iqrp), ``views`` ({view: features}) for multi-view ones;
    ``feature_names`` (a list, or {view: names}) name the features."""

    n_features: int | None
    n_samples: int | None
    views: Mapping[str, int] | None
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None


def _shapeless(shape: ShapeOptions) -> bool:
    return all(shape.get(field) is None for field in ("n_features", "n_samples", "views"))


def _shape_document(shape: ShapeOptions, data: Any) -> dict[str, Any]:
    """The shape's creation fields; without one, ``data``'s width and (DataFrame) column
    names (``feature_names`` when given)."""
    n_features, n_samples = shape.get("n_features"), shape.get("n_samples")
    views, names = shape.get("views"), shape.get("feature_names")
    if data is not None and _shapeless(shape):
        n_features = inputs.width_of(data)
        if names is None:
            names = inputs.column_names(data)
    return _drop_none(
        n_features=n_features,
        n_samples=n_samples,
        views=None if views is None else dict(views),
        feature_names=None if names is None else _names(names),
    )


class ChunkingOptions(TypedDict, Generic[R], total=False):
    """How an input is pushed in chunks: chunk ``i`` carries the Idempotency-Key
    ``<key_prefix>-<i>`` (a fresh prefix by default: pushing the same data again with the
    same prefix is answered as duplicates and changes nothing); ``wait`` (the default) for
    each to be applied; ``on_chunk`` is called with each chunk's receipt."""

    key_prefix: str | None
    wait: bool
    on_chunk: Callable[[R], None] | None


class PushOptions(ChunkingOptions[R], total=False):
    """``chunk_rows`` rows per chunk (default: about 8 MiB each); ``feature_names`` name the
    columns ({view: names} for views; a DataFrame's columns by default)."""

    chunk_rows: int | None
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None


def _pushed(
    pushes: Iterable[Steps[R]], on_chunk: Callable[[R], None] | None, empty: str
) -> Steps[PushSummary]:
    """Run the pushes of the chunks in order, calling ``on_chunk`` with each receipt; none
    at all is a ``ValueError`` (``empty``)."""
    receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt] = []
    items = 0
    for push in pushes:
        receipt = yield from push
        receipts.append(receipt)
        items += receipt.items
        if on_chunk is not None:
            on_chunk(receipt)
    if not receipts:
        raise ValueError(empty)
    return PushSummary(receipts, items)


P = TypeVar("P", bound=Page[Any])


def _every_page(page_after: Callable[[str | None], Call[P]]) -> Steps[list[Any]]:
    """Every item of a listing, following its pages from the first."""
    found: list[Any] = []
    after: str | None = None
    while True:
        page: P = yield page_after(after)
        found.extend(page.items)
        # A filtered page may be empty and still have a next (the service looked at as many
        # selectors as one page may): follow it while it moves on.
        if page.next is None or page.next == after:
            return found
        after = page.next


class Api:
    """The operations of the API as calls and plans (see the module docstring).

    ``chunk_bytes`` sizes the chunks that ``push`` and ``push_features`` cut large inputs into.
    """

    def __init__(self, chunk_bytes: int = inputs.DEFAULT_CHUNK_BYTES) -> None:
        self.chunk_bytes = chunk_bytes


def _stream_bodies(
    stream: StreamInfo,
    data: Any,
    y: Any,
    chunk_rows: int | None,
    chunk_bytes: int,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> Iterator[inputs.Body]:
    """The chunks of an input pushed to ``stream``: feature columns for a stream of them (as
    ``push_features`` cuts them), else rows (as ``push`` does, with ``y`` the labels or the
    targets the stream's rows carry)."""
    side = None if y is None else side_for(stream.chunk_kind, f"stream '{stream.name}'")
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
    chunks = _row_chunks(data, y, side, chunk_rows, chunk_bytes, f"stream '{stream.name}'")
    for rows, values in chunks:
        yield _rows_body(rows, side, values, names)


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


#: What each chunk kind without labels or a target holds, for messages.
_CARRIES_NOTHING = {
    "rows": "rows without labels or a target",
    "views": "views, without labels or a target",
    "columns": "feature columns, which carry no labels or target",
}


def side_for(chunk_kind: str, what: str) -> inputs.Side:
    """What a ``y`` pushed to ``what`` (a selector or a stream whose chunks are
    ``chunk_kind``) is: its labels (``labelled rows``) or its targets (``rows with a
    target``); a ``ValueError`` saying what it takes for any other kind."""
    side = inputs.SIDES.get(chunk_kind)
    if side is None:
        takes = _CARRIES_NOTHING.get(chunk_kind, chunk_kind)
        raise ValueError(f"{what} takes {takes}: push without y")
    return side


def _rows_body(
    rows: Any,
    side: inputs.Side | None,
    values: inputs.Values | None,
    names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> inputs.Body:
    """One chunk's body: rows (with their ``side``'s values: labels or targets), or
    {view: rows}."""
    if isinstance(rows, Mapping):
        by_view = names if isinstance(names, Mapping) else inputs.view_names(rows)
        return inputs.views_body(inputs.views_of(rows), by_view)
    flat = None if isinstance(names, Mapping) else names
    if flat is None:
        flat = inputs.column_names(rows)
    matrix = inputs.as_matrix(rows)
    if side is None or values is None:
        return inputs.rows_body(matrix, flat)
    return inputs.sided_body(matrix, side, values, flat)


def chunk_side(
    labels: Sequence[inputs.Label] | None, targets: Any
) -> tuple[inputs.Side | None, inputs.Values | None]:
    """What one chunk pushed as it is carries: its ``labels`` or its ``targets`` (not both),
    checked as ``push`` checks them."""
    if labels is not None and targets is not None:
        raise ValueError("a chunk carries labels or targets, not both")
    if targets is not None:
        return inputs.TARGETS, inputs.targets_of(targets)
    if labels is not None:
        return inputs.LABELS, inputs.labels_of(labels)
    return None, None


def opened(data: Any, y: Any, side: inputs.Side | None = None) -> Any:
    """``data`` as ``push`` reads it: a path (``str`` or ``os.PathLike``) is opened with the
    reader of ``sift push`` (``siftstream.files``: CSV, Parquet, ``.npy``, ``.npz``; ``y`` a
    string names its labels column or array, or its target's with ``side`` ``TARGETS``);
    anything else is returned as it is."""
    if isinstance(data, str | os.PathLike):
        column = y if isinstance(y, str) else None
        if side is inputs.TARGETS:
            return open_data(os.fspath(data), target=column)
        return open_data(os.fspath(data), column)
    return data


def _names_of(data: Any, y: Any) -> list[str] | dict[str, list[str]] | None:
    """The feature names of pushed rows: a DataFrame's columns (without the column of labels
    or targets named by ``y``), every view's (all views DataFrames), or a file's header."""
    if isinstance(data, DataFile):
        return data.feature_names
    if isinstance(data, Mapping):
        return inputs.view_names(data)
    if isinstance(y, str) and inputs.is_dataframe(data) and y in data.columns:
        data = data.drop(columns=[y])
    return inputs.column_names(data)


def _row_chunks(
    data: Any,
    y: Any,
    side: inputs.Side | None,
    chunk_rows: int | None,
    chunk_bytes: int,
    what: str,
) -> Iterator[tuple[Any, inputs.Values | None]]:
    """``data`` (rows, {view: rows} or an opened file) and its labels or targets (``y``, read
    as ``side`` says) cut into chunks of rows. ``y`` is read and checked at once, before any
    chunk: a ``ValueError`` says what ``what`` (the selector or stream) takes."""
    if isinstance(data, DataFile):
        return _file_chunks(data, y, side, chunk_rows, chunk_bytes, what)
    if isinstance(data, Mapping):
        return _view_chunks(data, chunk_rows, chunk_bytes)
    if side is None:
        features, values = data, None
    else:
        try:
            features, values = inputs.split_side(data, y, side)
        except ValueError as exc:
            raise _refused(what, side, exc) from None
    matrix = inputs.as_matrix(features)
    if side is not None and values is not None and len(values) != matrix.shape[0]:
        got = f"expected {matrix.shape[0]} {side.key} (one per row); got {len(values)}"
        raise _refused(what, side, got)
    step = chunk_rows or inputs.rows_per_chunk(matrix, chunk_bytes)
    return (
        (matrix[part], None if values is None else values[part])
        for part in inputs.row_slices(int(matrix.shape[0]), step)
    )


def _refused(what: str, side: inputs.Side, problem: object) -> ValueError:
    """A ``y`` that is not what ``what`` takes, and what it takes."""
    return ValueError(f"{what} takes {side.kind} ({side.expects}): {problem}")


def _view_chunks(
    data: Mapping[str, Any], chunk_rows: int | None, chunk_bytes: int
) -> Iterator[tuple[Any, None]]:
    views = inputs.views_of(data)
    widest = max(views.values(), key=lambda v: v.shape[1])
    n_rows = int(widest.shape[0])
    step = chunk_rows or inputs.rows_per_chunk(widest, chunk_bytes // max(len(views), 1))
    for part in inputs.row_slices(n_rows, step):
        yield {view: rows[part] for view, rows in views.items()}, None


def _file_chunks(
    data: DataFile,
    y: Any,
    side: inputs.Side | None,
    chunk_rows: int | None,
    chunk_bytes: int,
    what: str,
) -> Iterator[tuple[Any, inputs.Values | None]]:
    """An opened file's rows in chunks, with its column of labels or targets (``y`` its name)
    or ``y``'s values (one per row of the file)."""
    given: inputs.Values | None = None
    if side is not None and y is not None and not isinstance(y, str):
        try:
            given = side.of(y)
        except ValueError as exc:
            raise _refused(what, side, exc) from None
        if len(given) != data.n_rows:
            got = (
                f"expected {data.n_rows} {side.key} (one per row of {data.path}); got {len(given)}"
            )
            raise _refused(what, side, got)
    step = chunk_rows or max(1, chunk_bytes // (8 * max(data.n_features, 1)))

    def chunks() -> Iterator[tuple[Any, inputs.Values | None]]:
        start = 0
        for block in data.blocks(step):
            n_rows = int(block.rows.shape[0])
            values = block.values if given is None else given[start : start + n_rows]
            yield block.rows, values
            start += n_rows

    return chunks()
