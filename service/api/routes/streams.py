"""Routes of the stream resource (``Selectors.streams``): create, list, describe, delete; chunks
in, where a chunk got to, and the attached selectors' rankings side by side."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.responses import Response

from service.algorithms.agreement import DEFAULT_PERSISTENCE
from service.api.deps import (
    DEFAULT_PAGE,
    MAX_PAGE,
    IdempotencyKey,
    LabelColumn,
    LogId,
    TargetColumn,
    body_limit,
    get_principal,
    get_quotas,
    get_selectors,
    get_settings,
    read_body,
    result_response,
)
from service.api.guard import GuardedRoute, read_json
from service.api.request_bodies import STREAM_CHUNK_BODY, stream_create_body
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES
from service.auth import Principal, requires
from service.errors import Forbidden
from service.selectors import Selectors
from service.selectors.ingest import Push
from service.selectors.results import StreamChunkOut, StreamList, StreamOut, StreamRankings
from service.wire.kinds import chunk_format
from service.wire.media import require_media_type

router = APIRouter(prefix="/v1/streams", tags=["streams"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]
StreamName = Annotated[
    str,
    Path(
        pattern=NAME_PATTERN,
        description="The stream's name: 1-128 letters, digits, '.', '_' or '-'.",
    ),
]
#: Most features side by side per selector (``GET .../rankings?h=``).
MAX_H = 1000


@router.post(
    "",
    status_code=201,
    openapi_extra={"requestBody": stream_create_body()},
    responses={201: {"model": StreamOut}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def create_stream(request: Request, service: Service, caller: Caller) -> Response:
    """Create a stream: one log that several selectors apply. Its shape is a selector's
    (``n_features``, ``views`` or ``n_samples``, with optional ``feature_names``), fixed at
    creation; ``labelled: true`` makes its rows carry labels. Attach selectors with
    ``POST /v1/selectors {"name", "method", "stream"}``."""
    document = await read_json(request)
    name = document.get("name") if isinstance(document, dict) else None
    if isinstance(name, str) and not caller.sees(name):
        raise Forbidden(
            f"this API key may only create streams whose names start with '{caller.prefix}'; "
            f"got '{name}'"
        )
    quotas = get_quotas(request)
    tenancy = await quotas.tenancy(caller)
    async with quotas.locked(tenancy):
        await tenancy.admit(name if isinstance(name, str) else None, streams=1)
        created = await service.streams.create(document)
    return result_response(created, 201, {"Location": f"/v1/streams/{created.name}"})


@router.get("", responses={200: {"model": StreamList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_streams(
    service: Service,
    caller: Caller,
    limit: Annotated[
        int, Query(ge=1, le=MAX_PAGE, description="At most this many streams.")
    ] = DEFAULT_PAGE,
    after: Annotated[
        str | None,
        Query(
            pattern=NAME_PATTERN,
            description="Start after this name: the `next` of the previous page.",
        ),
    ] = None,
) -> Response:
    """The streams this API key may see, sorted by name, a page at a time."""
    return result_response(await service.streams.page(limit, after, caller.sees))


@router.get("/{name}", responses={200: {"model": StreamOut}, **PROBLEM_RESPONSES})
@requires("read")
async def describe_stream(name: StreamName, service: Service, caller: Caller) -> Response:
    """The stream, its log, and the selectors attached to it (that this key may see)."""
    return result_response(await service.streams.describe(name, caller.sees))


@router.delete("/{name}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def delete_stream(
    name: StreamName,
    service: Service,
    caller: Caller,
    force: Annotated[
        bool,
        Query(
            description="Also when selectors are attached: they are detached first (each keeps "
            "its state and takes chunks directly from then on)."
        ),
    ] = False,
) -> Response:
    """Delete a stream: 409 naming its attached selectors, unless ``force=true``."""
    await service.streams.delete(name, force, caller.sees)
    return Response(status_code=204)


@router.post(
    "/{name}/chunks",
    openapi_extra={"requestBody": STREAM_CHUNK_BODY},
    responses={
        200: {"model": StreamChunkOut},
        202: {"model": StreamChunkOut},
        **PROBLEM_RESPONSES,
    },
)
@requires("write")
async def push_stream_chunk(
    name: StreamName,
    request: Request,
    service: Service,
    caller: Caller,
    wait: Annotated[
        bool, Query(description="Wait until every attached selector has applied the chunk.")
    ] = True,
    idempotency_key: IdempotencyKey = None,
    labels: LabelColumn = None,
    target: TargetColumn = None,
) -> Response:
    """Append a chunk to the stream's log, once: every selector attached to it applies it,
    exactly once. By default answer once each has (200, with each one's version), else 202.

    A repeated ``Idempotency-Key`` answers the first request's chunk. A chunk one selector
    cannot apply is that selector's rejection (its status says why); 422 ``chunk-rejected``
    only when every selector set it aside.
    """
    meta = await service.store.streams.cached_stream(name)
    media_type = require_media_type(
        request.headers.get("content-type"), chunk_format(meta.kind).media_types
    )
    body = await read_body(request, body_limit(get_settings(request), media_type))
    push = Push(body, media_type, idempotency_key, wait, labels, target)
    receipt = await service.streams.push(name, push, caller.sees)
    return result_response(receipt.result, 200 if receipt.applied else 202)


@router.get(
    "/{name}/chunks/{log_id}", responses={200: {"model": StreamChunkOut}, **PROBLEM_RESPONSES}
)
@requires("read")
async def stream_chunk_status(
    name: StreamName, log_id: LogId, service: Service, caller: Caller
) -> Response:
    """Where a pushed chunk is in each selector that applies it: applied, pending, rejected."""
    return result_response(await service.streams.status(name, log_id, caller.sees))


@router.get("/{name}/rankings", responses={200: {"model": StreamRankings}, **PROBLEM_RESPONSES})
@requires("read")
async def stream_rankings(
    name: StreamName,
    service: Service,
    caller: Caller,
    h: Annotated[
        int, Query(ge=1, le=MAX_H, description="How many features of each selector.")
    ] = 10,
    p: Annotated[
        float,
        Query(
            gt=0,
            lt=1,
            description="Rank-biased overlap's persistence: the first 1/(1-p) ranks weigh most.",
        ),
    ] = DEFAULT_PERSISTENCE,
) -> Response:
    """Every attached selector's top h at its current version, side by side, and the
    agreement of every pair: Jaccard of the two sets and rank-biased overlap (RBO_ext) of the
    two orders (per view for multi-view streams)."""
    return result_response(await service.streams.rankings(name, h, caller.sees, p))
