"""Routes of chunks: rows in (``Selectors.ingest``), and where a chunk got to."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    IdempotencyKey,
    LabelColumn,
    LogId,
    SelectorName,
    TargetColumn,
    get_selectors,
    push_items,
    result_response,
)
from service.api.guard import GuardedRoute
from service.api.request_bodies import ROW_BODY
from service.api.schemas import PROBLEM_RESPONSES
from service.auth import requires
from service.selectors import Selectors
from service.selectors.results import ChunkOut, ChunkPending, ChunkStatus
from service.store.records import MAX_PARTITIONS
from service.wire.kinds import RowsFormat

router = APIRouter(prefix="/v1/selectors", tags=["chunks"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Wait = Annotated[bool, Query(description="Wait until the chunk is applied.")]


@router.post(
    "/{name}/chunks",
    openapi_extra={"requestBody": ROW_BODY},
    responses={200: {"model": ChunkOut}, 202: {"model": ChunkPending}, **PROBLEM_RESPONSES},
)
@requires("write")
async def push_chunk(
    name: SelectorName,
    request: Request,
    service: Service,
    wait: Wait = True,
    idempotency_key: IdempotencyKey = None,
    labels: LabelColumn = None,
    target: TargetColumn = None,
) -> Response:
    """Append a chunk of rows; by default answer once it is applied, with that version.

    With ``wait=false`` (or when applying takes longer than the configured bound) the answer
    is 202 with the log ID. A repeated ``Idempotency-Key`` returns the first answer. A
    ``text/csv`` or Arrow chunk for a labelled method names its label column with ``labels``,
    for a method of rows with a target its target column with ``target``.
    """
    return await push_items(
        request, service, name, RowsFormat, idempotency_key, wait, labels, target
    )


@router.get("/{name}/chunks/{log_id}", responses={200: {"model": ChunkStatus}, **PROBLEM_RESPONSES})
@requires("read")
async def chunk_status(
    name: SelectorName,
    log_id: LogId,
    service: Service,
    partition: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_PARTITIONS - 1,
            description="Partitioned selectors: the partition the chunk's answer named.",
        ),
    ] = None,
) -> Response:
    """Whether a chunk answered with 202 has been applied yet (or was rejected, and why)."""
    return result_response(await service.ingest.status(name, log_id, partition))
