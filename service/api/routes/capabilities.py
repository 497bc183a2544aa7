"""Routes of what some methods offer (``service.algorithms.base`` capabilities): clustering the
samples (OFS), merging selectors (OCFS, variance), projections and transforms (IOC)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.algorithms import METHODS
from service.algorithms.base import Projects
from service.api.deps import (
    IdempotencyKey,
    SelectorName,
    body_limit,
    get_principal,
    get_selectors,
    get_settings,
    npy_response,
    read_body,
    result_response,
    version_headers,
    wants_npy,
)
from service.api.guard import GuardedRoute
from service.api.request_bodies import ROW_BODY
from service.api.schemas import PROBLEM_RESPONSES, ClusterIn, MergeIn
from service.auth import Principal, requires
from service.errors import NotFound
from service.selectors import Selectors
from service.selectors.results import (
    ChunkPending,
    ClusterOut,
    MergeOut,
    ProjectionOut,
    TransformOut,
)
from service.wire.media import NPY, ROW_MEDIA_TYPES, require_media_type

router = APIRouter(prefix="/v1/selectors", tags=["capabilities"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]
#: Every solution some projecting method offers (each method checks its own).
SOLUTIONS = sorted({s for m in METHODS.values() if isinstance(m, Projects) for s in m.solutions})
Solution = Annotated[
    str | None,
    Query(
        description="Which projection (default: the method's first). IOC: ioc, the vectors "
        "it learned (Table 1); exact, the batch OC solution, the leading eigenvectors of S_b "
        "computed from the class counts and sums.",
        json_schema_extra={"enum": SOLUTIONS},
    ),
]
NPY_ANSWER = {"content": {NPY: {"schema": {"type": "string", "format": "binary"}}}}


@router.post("/{name}/cluster", responses={200: {"model": ClusterOut}, **PROBLEM_RESPONSES})
@requires("write")
async def cluster_samples(name: SelectorName, body: ClusterIn, service: Service) -> Response:
    """k-means of the n samples on the kept, rescaled feature columns (OFS pipeline)."""
    return result_response(await service.clustering.cluster(name, body.k, body.seed))


@router.post(
    "/{name}/merge",
    responses={200: {"model": MergeOut}, 202: {"model": ChunkPending}, **PROBLEM_RESPONSES},
)
@requires("write")
async def merge_selector(
    name: SelectorName,
    body: MergeIn,
    service: Service,
    caller: Caller,
    wait: Annotated[bool, Query(description="Wait until the merge is applied.")] = True,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Add another selector's state, exactly (same method and features; disjoint data).

    The source's pending chunks are applied first; the source itself does not change. A
    repeated ``Idempotency-Key`` returns the first answer instead of merging twice.
    """
    if not caller.sees(body.source):  # merging reads the source: it must be visible too
        raise NotFound(f"selector '{body.source}' does not exist")
    receipt = await service.merging.merge(name, body.source, idempotency_key, wait)
    return result_response(receipt.result, 200 if receipt.applied else 202)


@router.get(
    "/{name}/projection",
    responses={200: {"model": ProjectionOut, **NPY_ANSWER}, **PROBLEM_RESPONSES},
)
@requires("read")
async def get_projection(
    name: SelectorName, request: Request, service: Service, solution: Solution = None
) -> Response:
    """IOC's projection W (n_features x n_components): JSON, or ``.npy`` by Accept header.

    ``agreement`` is |u^j . e_j| between IOC's vectors and the exact batch OC eigenvectors
    (which the class counts and sums determine): 1 when IOC has converged. 409 until all
    n_components vectors have started and at least n_components + 1 classes have been seen
    (S_b has rank at most c - 1).
    """
    npy = wants_npy(request)
    answer = await service.projections.projection(name, solution)
    if npy:
        headers = version_headers(answer.version, {"rows_seen": answer.rows_seen})
        return npy_response(answer.projection, headers)
    return result_response(answer)


@router.post(
    "/{name}/transform",
    openapi_extra={"requestBody": ROW_BODY},
    responses={200: {"model": TransformOut, **NPY_ANSWER}, **PROBLEM_RESPONSES},
)
@requires("write")
async def transform_rows(
    name: SelectorName, request: Request, service: Service, solution: Solution = None
) -> Response:
    """Map rows (as a chunk takes them, no labels) to n_components dimensions: ``W^T x``."""
    media_type = require_media_type(request.headers.get("content-type"), ROW_MEDIA_TYPES)
    npy = wants_npy(request)
    body = await read_body(request, body_limit(get_settings(request), media_type))
    answer = await service.projections.transform(name, body, media_type, solution)
    if npy:
        headers = version_headers(answer.version, {"rows_seen": answer.rows_seen})
        return npy_response(answer.rows, headers)
    return result_response(answer)
