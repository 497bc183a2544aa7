"""Routes of the selector resource: thin translations between HTTP and ``SelectorService``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from starlette.responses import Response

from service.api.deps import (
    get_service,
    get_settings,
    json_response,
    npy_response,
    read_body,
    version_headers,
    wants_npy,
)
from service.api.payloads import (
    COLUMN_MEDIA_TYPES,
    ROW_MEDIA_TYPES,
    require_media_type,
)
from service.api.schemas import (
    PROBLEM_RESPONSES,
    ChunkOut,
    ChunkPending,
    ClusterIn,
    ClusterOut,
    CreateSelector,
    FeaturePage,
    FeaturesOut,
    FeaturesPending,
    SelectorList,
    SelectorOut,
    TopOut,
    WeightsOut,
)
from service.selectors import SelectorService

router = APIRouter(prefix="/v1/selectors", tags=["selectors"])
Service = Annotated[SelectorService, Depends(get_service)]

ROW_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": "A chunk of rows (samples x n_features); labelled methods (ocfs, ioc) "
        "need one label per row: JSON 'labels' or an .npz from numpy.savez with 'labels'.",
        "content": {
            "application/json": {
                "schema": {"oneOf": [{"type": "array"}, {"type": "object"}]},
                "examples": {
                    "dense": {"value": {"rows": [[0.0, 1.5, 2.0], [1.0, 0.0, 0.5]]}},
                    "csr": {
                        "value": {
                            "shape": [2, 3],
                            "indptr": [0, 2, 3],
                            "indices": [1, 2, 0],
                            "data": [1.5, 2.0, 1.0],
                        }
                    },
                    "labelled (ocfs, ioc)": {
                        "value": {"rows": [[0.0, 1.5, 2.0], [1.0, 0.0, 0.5]], "labels": ["a", 7]}
                    },
                },
            },
            "application/x-npy": {"schema": {"type": "string", "format": "binary"}},
            "application/x-npz": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


COLUMN_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": "New feature columns, n_samples values each, processed in order.",
        "content": {
            "application/json": {
                "schema": {"type": "object"},
                "examples": {
                    "named": {
                        "value": {
                            "columns": [[0.1, 2.0, 0.0], [1.0, 1.0, 3.5]],
                            "names": ["a", "b"],
                        }
                    }
                },
            },
            "application/x-npy": {
                "schema": {"type": "string", "format": "binary"},
                "description": "n_samples x c numeric array (or 1-D for one column).",
            },
        },
    }
}


@router.post("", status_code=201, responses={201: {"model": SelectorOut}, **PROBLEM_RESPONSES})
async def create_selector(body: CreateSelector, service: Service) -> Response:
    """Create a selector; the answer echoes the resolved parameters (defaults filled in)."""
    created = await service.create(
        body.name,
        body.method,
        n_features=body.n_features,
        feature_names=body.feature_names,
        params=body.params,
        n_samples=body.n_samples,
        n_objects=body.n_objects,
        views=body.views,
    )
    return json_response(created, 201, {"Location": f"/v1/selectors/{created['name']}"})


@router.get("", responses={200: {"model": SelectorList}})
async def list_selectors(service: Service) -> Response:
    return json_response({"selectors": await service.list_selectors()})


@router.get("/{name}", responses={200: {"model": SelectorOut}, **PROBLEM_RESPONSES})
async def describe_selector(name: str, service: Service) -> Response:
    return json_response(await service.describe(name))


@router.delete("/{name}", status_code=204, responses=PROBLEM_RESPONSES)
async def delete_selector(name: str, service: Service) -> Response:
    await service.delete(name)
    return Response(status_code=204)


@router.post(
    "/{name}/chunks",
    openapi_extra=ROW_BODY_DOC,
    responses={200: {"model": ChunkOut}, 202: {"model": ChunkPending}, **PROBLEM_RESPONSES},
)
async def push_chunk(
    name: str,
    request: Request,
    service: Service,
    wait: Annotated[bool, Query(description="Wait until the chunk is applied.")] = True,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> Response:
    """Append a chunk of rows; by default answer once it is applied, with that version.

    With ``wait=false`` (or when applying takes longer than the configured bound) the answer
    is 202 with the log ID. A repeated ``Idempotency-Key`` returns the first answer.
    """
    media_type = require_media_type(request.headers.get("content-type"), ROW_MEDIA_TYPES)
    meta = await service.meta(name)  # 404 before reading a large body for nothing
    body = await read_body(request, get_settings(request).max_body_bytes)
    receipt = await service.push_chunk(meta, body, media_type, idempotency_key, wait)
    return json_response(receipt.body, 200 if receipt.applied else 202)


@router.post(
    "/{name}/features",
    openapi_extra=COLUMN_BODY_DOC,
    responses={
        200: {"model": FeaturesOut},
        202: {"model": FeaturesPending},
        **PROBLEM_RESPONSES,
    },
)
async def push_features(
    name: str,
    request: Request,
    service: Service,
    wait: Annotated[bool, Query(description="Wait until the columns are decided.")] = True,
    idempotency_key: Annotated[str | None, Header(max_length=256)] = None,
) -> Response:
    """Append new feature columns (OFS); answer what was decided for each, in order.

    Columns of one request are processed exactly as if sent one by one. With ``wait=false``
    the answer is 202; ``GET .../features?offset=<first_index>`` shows the decisions later.
    A repeated ``Idempotency-Key`` returns the same decisions.
    """
    media_type = require_media_type(request.headers.get("content-type"), COLUMN_MEDIA_TYPES)
    meta = await service.meta(name)
    body = await read_body(request, get_settings(request).max_body_bytes)
    receipt = await service.push_features(meta, body, media_type, idempotency_key, wait)
    return json_response(receipt.body, 200 if receipt.applied else 202)


@router.get("/{name}/features", responses={200: {"model": FeaturePage}, **PROBLEM_RESPONSES})
async def list_features(
    name: str,
    service: Service,
    offset: Annotated[int, Query(ge=0, description="First feature index.")] = 0,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Features to return.")] = 100,
) -> Response:
    """Decided features in arrival order: name, kept, leverage, probability, scale."""
    return json_response(await service.features(name, offset, limit))


@router.post("/{name}/cluster", responses={200: {"model": ClusterOut}, **PROBLEM_RESPONSES})
async def cluster_samples(name: str, body: ClusterIn, service: Service) -> Response:
    """k-means of the n samples on the kept, rescaled feature columns (OFS pipeline)."""
    return json_response(await service.cluster(name, body.k, body.seed))


@router.get("/{name}/chunks/{log_id}", responses=PROBLEM_RESPONSES)
async def chunk_status(name: str, log_id: str, service: Service) -> Response:
    """Whether a chunk answered with 202 has been applied yet."""
    return json_response(await service.chunk_status(name, log_id))


@router.get("/{name}/top", responses={200: {"model": TopOut}, **PROBLEM_RESPONSES})
async def top_features(
    name: str,
    service: Service,
    h: Annotated[int, Query(ge=1, description="How many features (capped at n_features).")] = 10,
    strategy: Annotated[
        Literal["score", "diverse"],
        Query(
            description="score: the h highest scores. diverse (fsds): the h features pivoted "
            "QR (IQRP) selects on the sketch, which together span the data."
        ),
    ] = "score",
    candidates: Annotated[
        int | None,
        Query(alias="l", ge=1, description="IQRP's candidate list length (default h)."),
    ] = None,
    view: Annotated[
        str | None, Query(description="Multi-view selectors: rank this view only.")
    ] = None,
) -> Response:
    """The h best features of the committed state (rank, index, name, score).

    For ``iqrp`` selectors (and ``strategy=diverse``) the answer is the exact pivoted-QR order
    with the pivots as scores and the pass account (passes, IO-passes, blocks read, flops).
    """
    return json_response(await service.top(name, h, strategy, candidates, view))


@router.get(
    "/{name}/weights",
    responses={
        200: {
            "model": WeightsOut,
            "content": {"application/x-npy": {"schema": {"type": "string", "format": "binary"}}},
        },
        **PROBLEM_RESPONSES,
    },
)
async def feature_weights(name: str, request: Request, service: Service) -> Response:
    """The score of every feature: JSON, or ``.npy`` with ``Accept: application/x-npy``."""
    npy = wants_npy(request)
    ranking = await service.ranking(name)
    headers = version_headers(ranking.head)
    if npy:
        return npy_response(ranking.weights, headers)
    body = {
        "name": name,
        "version": ranking.head.version,
        "rows_seen": ranking.head.rows_seen,
        "weights": ranking.weights,
    }
    return json_response(body, headers=headers)
