"""Routes of feature columns: columns in (``Selectors.ingest``), decisions out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    IdempotencyKey,
    SelectorName,
    get_selectors,
    push_items,
    result_response,
)
from service.api.guard import GuardedRoute
from service.api.request_bodies import COLUMN_BODY
from service.api.schemas import PROBLEM_RESPONSES
from service.auth import requires
from service.selectors import Selectors
from service.selectors.decisions import MAX_FEATURE_PAGE
from service.selectors.results import ColumnsStored, FeaturePage, FeaturesOut, FeaturesPending
from service.wire.kinds import ColumnsFormat

router = APIRouter(prefix="/v1/selectors", tags=["features"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]


@router.post(
    "/{name}/features",
    openapi_extra={"requestBody": COLUMN_BODY},
    responses={
        200: {"model": FeaturesOut | ColumnsStored, "description": "ofs: decisions; iqrp: stored"},
        202: {"model": FeaturesPending},
        **PROBLEM_RESPONSES,
    },
)
@requires("write")
async def push_features(
    name: SelectorName,
    request: Request,
    service: Service,
    wait: Annotated[bool, Query(description="Wait until the columns are decided.")] = True,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Append new feature columns; answer what was decided for each (OFS), in order, or where
    they were stored (IQRP).

    Columns of one request are processed exactly as if sent one by one. With ``wait=false``
    the answer is 202; ``GET .../features?offset=<first_index>`` shows the decisions later.
    A repeated ``Idempotency-Key`` returns the same decisions.
    """
    return await push_items(request, service, name, ColumnsFormat, idempotency_key, wait)


@router.get("/{name}/features", responses={200: {"model": FeaturePage}, **PROBLEM_RESPONSES})
@requires("read")
async def list_features(
    name: SelectorName,
    service: Service,
    offset: Annotated[int, Query(ge=0, le=2**53, description="First feature index.")] = 0,
    limit: Annotated[
        int, Query(ge=1, le=MAX_FEATURE_PAGE, description="Features to return.")
    ] = 100,
) -> Response:
    """Decided features in arrival order: name, kept, leverage, probability, scale."""
    return result_response(await service.decisions.page(name, offset, limit))
