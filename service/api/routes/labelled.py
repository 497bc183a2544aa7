"""Routes of labelled selectors: merging OCFS selectors, IOC's projection and transform."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response

from service.api.deps import (
    get_labelled,
    get_settings,
    json_response,
    npy_response,
    read_body,
    version_headers,
    wants_npy,
)
from service.api.payloads import NPY, ROW_MEDIA_TYPES, require_media_type
from service.api.routes.selectors import ROW_BODY_DOC
from service.api.schemas import (
    PROBLEM_RESPONSES,
    ChunkPending,
    MergeIn,
    MergeOut,
    ProjectionOut,
    TransformOut,
)
from service.labelled_selectors import LabelledSelectors
from service.store.records import Head, SelectorMeta

router = APIRouter(prefix="/v1/selectors", tags=["labelled selectors"])
Labelled = Annotated[LabelledSelectors, Depends(get_labelled)]
Solution = Annotated[
    Literal["ioc", "exact"],
    Query(
        description="ioc: the vectors IOC learned (Table 1). exact: the batch OC solution, "
        "the leading eigenvectors of S_b computed from the class counts and sums."
    ),
]
NPY_ANSWER = {"content": {NPY: {"schema": {"type": "string", "format": "binary"}}}}


@router.post(
    "/{name}/merge",
    responses={200: {"model": MergeOut}, 202: {"model": ChunkPending}, **PROBLEM_RESPONSES},
)
async def merge_selector(
    name: str,
    body: MergeIn,
    labelled: Labelled,
    wait: Annotated[bool, Query(description="Wait until the merge is applied.")] = True,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> Response:
    """Add another ocfs selector's class counts and sums (disjoint data: exact OCFS scores).

    The source's pending chunks are applied first; the source itself does not change. A
    repeated ``Idempotency-Key`` returns the first answer instead of merging twice.
    """
    receipt = await labelled.merge(name, body.source, idempotency_key, wait)
    return json_response(receipt.body, 200 if receipt.applied else 202)


@router.get(
    "/{name}/projection",
    responses={200: {"model": ProjectionOut, **NPY_ANSWER}, **PROBLEM_RESPONSES},
)
async def get_projection(
    name: str, request: Request, labelled: Labelled, solution: Solution = "ioc"
) -> Response:
    """IOC's projection W (n_features x n_components): JSON, or ``.npy`` by Accept header.

    ``agreement`` is |u^j . e_j| between IOC's vectors and the exact batch OC eigenvectors
    (which the class counts and sums determine): 1 when IOC has converged. 409 until all
    n_components vectors have started and at least n_components + 1 classes have been seen
    (S_b has rank at most c - 1).
    """
    npy = wants_npy(request)
    meta, head, learned = await labelled.projection(name, solution)
    if npy:
        return npy_response(learned["projection"], version_headers(head))
    return _answer(meta, head, solution, **learned)


@router.post(
    "/{name}/transform",
    openapi_extra=ROW_BODY_DOC,
    responses={200: {"model": TransformOut, **NPY_ANSWER}, **PROBLEM_RESPONSES},
)
async def transform_rows(
    name: str, request: Request, labelled: Labelled, solution: Solution = "ioc"
) -> Response:
    """Map rows (as a chunk takes them, no labels) to n_components dimensions: ``W^T x``."""
    media_type = require_media_type(request.headers.get("content-type"), ROW_MEDIA_TYPES)
    npy = wants_npy(request)
    body = await read_body(request, get_settings(request).max_body_bytes)
    meta, head, projected = await labelled.transform(name, body, media_type, solution)
    if npy:
        return npy_response(projected, version_headers(head))
    return _answer(meta, head, solution, rows=projected)


def _answer(meta: SelectorMeta, head: Head, solution: str, **arrays: Any) -> Response:
    """A projection or transform answer: which selector, version and W, then the arrays."""
    body = {
        "name": meta.name,
        "version": head.version,
        "rows_seen": head.rows_seen,
        "n_components": meta.params["n_components"],
        "solution": solution,
        **arrays,
    }
    return json_response(body, headers=version_headers(head))
