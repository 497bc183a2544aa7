"""Selectors: create, describe, list, delete; rows and feature columns pushed to them; their
rankings, capabilities and archives; the methods' catalogue."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

import numpy as np

from siftstream import _inputs as inputs
from siftstream._api.core import (
    ARCHIVE,
    JSON_HEADERS,
    NPY_ACCEPT,
    PENDING_TIMEOUT_SECONDS,
    POLL_SECONDS,
    Api,
    ChunkingOptions,
    PushOptions,
    ShapeOptions,
    Written,
    _chunk_call,
    _created,
    _drop_none,
    _every_page,
    _headers_seen,
    _json,
    _names_of,
    _nothing,
    _only,
    _pushed,
    _read,
    _rejected,
    _row_chunks,
    _rows_body,
    _shape_document,
    chunk_side,
    json_body,
    new_key,
    npy_array,
    opened,
    selector_path,
    side_for,
)
from siftstream._http import Call, Sleep, Steps
from siftstream.errors import (
    SiftClientError,
)
from siftstream.results import (
    ChunkReceipt,
    ChunkStatus,
    Clustering,
    DeletedSelectors,
    FeaturePage,
    FeaturesReceipt,
    History,
    MethodInfo,
    Projection,
    PushSummary,
    SelectorInfo,
    SelectorPage,
    Top,
    Transformed,
    Weights,
)


class SelectorOptions(ShapeOptions, total=False):
    """``create``'s options (its docstring tells each one)."""

    params: Mapping[str, Any] | None
    data: Any
    expires_after: float | None
    stream: str | None
    from_: str | None
    temporary: bool


def create(
    api: Api, name: str, method: str, **options: Unpack[SelectorOptions]
) -> Steps[SelectorInfo]:
    """Create a selector: ``n_features`` for row methods, ``n_samples`` for feature-column
    methods (ofs, iqrp), ``views`` ({view: features}) for multi-view ones; ``params`` are
    the method's hyperparameters. The answer echoes the resolved parameters.
    ``expires_after``: the service deletes the selector after this many seconds without a
    commit. ``temporary``: a job's selector, that the job deletes when done (listings mark
    it; ``list_selectors(temporary=False)`` leaves it out).

    ``stream``: attach it to that stream instead (no shape: it takes the stream's), from
    ``from_`` (``"start"``, the default: every chunk the stream holds; ``"now"``: the
    chunks pushed from now on).

    ``data``: rows of the stream to come; ``n_features`` is taken from its width and
    ``feature_names`` from a DataFrame's columns when not given.

    A retry after a lost answer that meets "name exists" answers the selector the first
    attempt created.
    """
    _only(options, SelectorOptions, "create")
    params = options.get("params")
    document: dict[str, Any] = {"name": name, "method": method}
    document.update(_shape_document(options, options.get("data")))
    document.update(
        _drop_none(
            params=None if params is None else dict(params),
            expires_after=options.get("expires_after"),
            stream=options.get("stream"),
        )
    )
    if options.get("from_") is not None:
        document["from"] = options["from_"]
    if options.get("temporary"):
        document["temporary"] = True
    created: SelectorInfo | None = yield _created("/v1/selectors", document, SelectorInfo.from_json)
    if created is not None:
        return created
    existing: SelectorInfo = yield describe(api, name)
    if existing.method != method:
        raise SiftClientError(
            f"selector '{name}' exists with method {existing.method}, not {method}"
        )
    return existing


def methods(api: Api) -> Call[list[MethodInfo]]:
    """Every method the service runs, as ``GET /v1/methods`` describes it."""
    return Call(
        "GET",
        "/v1/methods",
        lambda r: [MethodInfo.from_json(m) for m in _json(r)["methods"]],
    )


def describe(api: Api, name: str) -> Call[SelectorInfo]:
    """The selector, the scalars of its state, its classes (labelled methods), pending
    entries."""
    return _read(name, (), SelectorInfo.from_json)


def list_page(
    api: Api,
    *,
    limit: int | None = None,
    after: str | None = None,
    prefix: str | None = None,
    q: str | None = None,
    method: str | None = None,
    temporary: bool | None = None,
) -> Call[SelectorPage]:
    """One page of the selectors this key may see, sorted by name, after ``after``; filtered
    on the service by ``prefix`` (names that start with it), ``q`` (names that contain it,
    ignoring case), ``method`` and ``temporary`` (True: only the ones jobs made, such as a
    scikit-learn fit's; False: none of them). A filtered page may hold fewer than ``limit``
    selectors and still have a ``next``."""
    return Call(
        "GET",
        "/v1/selectors",
        lambda r: SelectorPage.from_json(_json(r)),
        params=_drop_none(
            limit=limit,
            after=after,
            prefix=prefix,
            q=q,
            method=method,
            temporary=None if temporary is None else str(temporary).lower(),
        ),
    )


def list_selectors(
    api: Api,
    *,
    page_size: int | None = None,
    prefix: str | None = None,
    q: str | None = None,
    method: str | None = None,
    temporary: bool | None = None,
) -> Steps[list[SelectorInfo]]:
    """Every selector this key may see (those the filters of ``list_page`` take), following
    the pages."""
    found: list[SelectorInfo] = yield from _every_page(
        lambda after: list_page(
            api,
            limit=page_size,
            after=after,
            prefix=prefix,
            q=q,
            method=method,
            temporary=temporary,
        )
    )
    return found


def delete(api: Api, name: str) -> Call[None]:
    """Delete a selector and everything of it (a retry that finds it gone is done)."""
    return Call("DELETE", selector_path(name), _nothing, done_earlier=frozenset({404}))


def delete_selectors(
    api: Api,
    prefix: str | None = None,
    *,
    all_: bool = False,
    temporary: bool | None = None,
    batch: int | None = None,
) -> Steps[DeletedSelectors]:
    """Delete every selector whose name starts with ``prefix`` (``all_=True`` without a
    prefix: every selector this key may see), or only the temporary ones of them
    (``temporary=True``); the service deletes up to ``batch`` (1,000 by default) per request,
    and this follows its batches. A key limited to a name prefix deletes only its own.
    Returns every name deleted, and those that could not be (``failed``)."""
    deleted: list[str] = []
    failed: list[str] = []
    after: str | None = None
    while True:
        answer: DeletedSelectors = yield Call(
            "DELETE",
            "/v1/selectors",
            lambda r: DeletedSelectors.from_json(_json(r)),
            params=_drop_none(
                prefix=prefix,
                all="true" if all_ else None,
                temporary=None if temporary is None else str(temporary).lower(),
                limit=batch,
                after=after,
            ),
        )
        deleted.extend(answer.deleted)
        failed.extend(answer.failed)
        if answer.next is None or answer.next == after:
            return DeletedSelectors(deleted=deleted, failed=failed)
        after = answer.next


def detach(api: Api, name: str) -> Call[SelectorInfo]:
    """Detach a selector from its stream: it keeps its state, takes chunks directly from
    then on, and its stream keeps nothing more for it."""
    return Call("POST", selector_path(name, "detach"), lambda r: SelectorInfo.from_json(_json(r)))


def push(
    api: Api, name: str, data: Any, y: Any = None, **options: Unpack[PushOptions[ChunkReceipt]]
) -> Steps[PushSummary]:
    """Push rows in chunks (in order): a numpy array, a scipy sparse matrix or a DataFrame;
    ``y`` one value per row for the methods whose rows carry one (a sequence, a Series, or a
    DataFrame column's name): the class labels of labelled methods (integers or strings), the
    target of methods of rows with a target (finite numbers); or a mapping {view: rows} for
    multi-view selectors; or the path of a data file, read as ``sift push`` reads it (CSV with
    a header of feature names, Parquet, ``.npy``, ``.npz``; ``y`` names its column or array of
    labels or targets), in chunks, never whole.

    With ``y``, the selector's description says what it is (one request before the chunks); a
    ``y`` for a selector whose rows carry nothing, or that does not read as what they carry
    (class labels for a target, say), raises ``ValueError`` saying what the selector takes,
    before any chunk is sent.

    Chunks hold ``chunk_rows`` rows (default: about 8 MiB each); ``key_prefix``, ``wait``
    and ``on_chunk``: ``ChunkingOptions``.

    A DataFrame's column names (every view's, for views), or ``feature_names``, go with the
    rows: the service puts each column on the feature of its name, and refuses names it
    does not have (before any row is applied).
    """
    _only(options, PushOptions, "push")
    side: inputs.Side | None = None
    what = f"selector '{name}'"
    if y is not None:
        info: SelectorInfo = yield describe(api, name)
        what = f"selector '{name}' ({info.method})"
        side = side_for(info.chunk_kind, what)
    data = opened(data, y, side)
    names = options.get("feature_names")
    if names is None:
        names = _names_of(data, y)
    chunks = _row_chunks(data, y, side, options.get("chunk_rows"), api.chunk_bytes, what)
    prefix = options.get("key_prefix") or new_key()
    wait = options.get("wait", True)
    pushes = (
        _push_body(
            api,
            name,
            _rows_body(rows, side, values, names),
            idempotency_key=f"{prefix}-{i}",
            wait=wait,
        )
        for i, (rows, values) in enumerate(chunks)
    )
    summary = yield from _pushed(
        pushes, options.get("on_chunk"), "nothing to push: the input has no rows"
    )
    return summary


def push_chunk(
    api: Api,
    name: str,
    rows: Any,
    labels: Sequence[inputs.Label] | None = None,
    *,
    targets: Any = None,
    idempotency_key: str | None = None,
    wait: bool = True,
    feature_names: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
) -> Steps[ChunkReceipt]:
    """Push one chunk as it is (no splitting): rows, rows and labels, rows and ``targets``
    (one finite number per row), or {view: rows}.

    ``feature_names`` name the columns ({view: names} for views; a DataFrame's columns by
    default): the service matches them to the selector's names (see ``push``).
    With ``wait`` (the default) the answer is the applied receipt, polling if the service
    answered 202; a chunk the service set aside raises ``ChunkRejectedError``.
    """
    side, values = chunk_side(labels, targets)
    body = _rows_body(rows, side, values, feature_names)
    receipt = yield from _push_body(api, name, body, idempotency_key=idempotency_key, wait=wait)
    return receipt


def _push_body(
    api: Api, name: str, body: inputs.Body, *, idempotency_key: str | None, wait: bool
) -> Steps[ChunkReceipt]:
    receipt = yield from _write(
        api, name, "chunks", ChunkReceipt.from_json, body, idempotency_key, wait
    )
    return receipt


def chunk_status(api: Api, name: str, log_id: str) -> Call[ChunkStatus]:
    """Whether a chunk answered with 202 has been applied yet (or rejected, and why)."""
    return _read(name, ("chunks", log_id), ChunkStatus.from_json)


def _write(
    api: Api,
    name: str,
    route: str,
    receipt_of: Callable[[dict[str, Any]], Written],
    body: inputs.Body,
    idempotency_key: str | None,
    wait: bool,
) -> Steps[Written]:
    """POST a write to ``.../<route>`` with its Idempotency-Key (kept across retries);
    with ``wait``, follow a 202 up until the write is applied."""
    path = selector_path(name, route)
    receipt: Written = yield _chunk_call(path, receipt_of, body, idempotency_key, wait)
    if wait and not receipt.applied:
        receipt = yield from _settled(api, name, receipt)
    return receipt


def _settled(api: Api, name: str, receipt: Written) -> Steps[Written]:
    """``receipt`` once its chunk is applied (polling its status); rejected: raises."""
    deadline = time.monotonic() + PENDING_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        yield Sleep(POLL_SECONDS)
        status: ChunkStatus = yield chunk_status(api, name, receipt.log_id)
        if status.status == "rejected":
            raise _rejected(name, status)
        if status.applied:
            return receipt.once_applied(status)
    raise SiftClientError(
        f"chunk {receipt.log_id} of '{name}' still pending after {PENDING_TIMEOUT_SECONDS:.0f} s"
    )


class FeaturePushOptions(ChunkingOptions[FeaturesReceipt], total=False):
    """``chunk_columns`` feature columns per chunk (default: about 8 MiB each)."""

    chunk_columns: int | None


def push_features(
    api: Api,
    name: str,
    columns: Any,
    names: Sequence[str] | None = None,
    **options: Unpack[FeaturePushOptions],
) -> Steps[PushSummary]:
    """Push new feature columns (n_samples x c: numpy array or DataFrame, whose column names
    become the features' names) in chunks of ``chunk_columns``, in order (``key_prefix``,
    ``wait`` and ``on_chunk``: ``ChunkingOptions``). OFS answers a decision per column
    (``FeaturesReceipt.decisions``); IQRP where it stored them."""
    _only(options, FeaturePushOptions, "push_features")
    if names is None:
        names = inputs.column_names(columns)
    matrix = inputs.as_matrix(columns)
    if not isinstance(matrix, np.ndarray):
        matrix = matrix.toarray()
    step = options.get("chunk_columns") or inputs.columns_per_chunk(
        matrix.shape[0], names is not None
    )
    prefix = options.get("key_prefix") or new_key()
    wait = options.get("wait", True)
    pushes = (
        push_feature_chunk(
            api,
            name,
            matrix[:, part],
            None if names is None else names[part],
            idempotency_key=f"{prefix}-{index}",
            wait=wait,
        )
        for index, part in enumerate(inputs.row_slices(matrix.shape[1], step))
    )
    summary = yield from _pushed(
        pushes, options.get("on_chunk"), "nothing to push: the input has no columns"
    )
    return PushSummary(summary.receipts, int(matrix.shape[1]))


def push_feature_chunk(
    api: Api,
    name: str,
    columns: np.ndarray,
    names: Sequence[str] | None = None,
    *,
    idempotency_key: str | None = None,
    wait: bool = True,
) -> Steps[FeaturesReceipt]:
    """Push one chunk of feature columns (n_samples x c) as it is (no splitting)."""
    body = inputs.columns_body(columns, names)
    receipt = yield from _write(
        api, name, "features", FeaturesReceipt.from_json, body, idempotency_key, wait
    )
    return receipt


def features(api: Api, name: str, offset: int = 0, limit: int = 100) -> Call[FeaturePage]:
    """OFS: decided features in arrival order from ``offset``."""
    return _read(name, ("features",), FeaturePage.from_json, {"offset": offset, "limit": limit})


def top(
    api: Api,
    name: str,
    h: int = 10,
    *,
    strategy: str | None = None,
    l: int | None = None,  # noqa: E741 (IQRP's candidate list length, as the API names it)
    view: str | None = None,
    alpha: float | None = None,
    correction: str | None = None,
) -> Call[Top]:
    """The h best features of the committed state. ``strategy="diverse"`` (fsds): pivoted
    QR on the sketch; ``l``: IQRP's candidate list length; ``view``: one view only;
    ``alpha`` (anova, chi2): only the features a test at that level selects, with
    ``correction`` ``"none"``, ``"fdr"`` or ``"fwe"`` (scikit-learn's ``SelectFpr``,
    ``SelectFdr``, ``SelectFwe``)."""
    query = _drop_none(h=h, strategy=strategy, l=l, view=view, alpha=alpha, correction=correction)
    return _read(name, ("top",), Top.from_json, query)


def weights(api: Api, name: str) -> Call[Weights]:
    """Every feature's score, as a numpy array (fetched as ``.npy``)."""
    return Call(
        "GET",
        selector_path(name, "weights"),
        lambda r: Weights(int(r.headers["sift-version"]), npy_array(r).ravel(), **_headers_seen(r)),
        headers=NPY_ACCEPT,
    )


def history(api: Api, name: str, h: int = 10, limit: int = 20) -> Call[History]:
    """The top h of the selector's recent versions, newest first."""
    return _read(name, ("history",), History.from_json, {"h": h, "limit": limit})


def merge(
    api: Api, name: str, source: str, *, idempotency_key: str | None = None, wait: bool = True
) -> Steps[ChunkReceipt]:
    """Add selector ``source``'s state to ``name``'s, exactly (ocfs, variance). The key
    makes a retry safe; merging the same data twice on purpose counts it twice."""
    body = inputs.Body(json_body({"from": source}), inputs.JSON)
    receipt = yield from _write(
        api, name, "merge", ChunkReceipt.from_json, body, idempotency_key, wait
    )
    return receipt


def projection(api: Api, name: str, solution: str | None = None) -> Call[Projection]:
    """IOC's projection W (n_features x n_components), eigenvalues and agreement."""
    return _read(name, ("projection",), Projection.from_json, _drop_none(solution=solution))


def transform(api: Api, name: str, rows: Any, solution: str | None = None) -> Call[Transformed]:
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


def cluster(api: Api, name: str, k: int, seed: int = 0) -> Call[Clustering]:
    """OFS: k-means of the samples on the kept, rescaled columns."""
    return Call(
        "POST",
        selector_path(name, "cluster"),
        lambda r: Clustering.from_json(_json(r)),
        content=json_body({"k": k, "seed": seed}),
        headers=JSON_HEADERS,
    )


def export(api: Api, name: str) -> Call[bytes]:
    """The selector as a self-describing archive (bytes to keep, or to ``import_selector``)."""
    return Call(
        "GET", selector_path(name, "export"), lambda r: r.content, headers={"accept": ARCHIVE}
    )


def import_selector(api: Api, archive: bytes, name: str | None = None) -> Steps[SelectorInfo]:
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
    existing: SelectorInfo = yield describe(api, name)
    return existing
