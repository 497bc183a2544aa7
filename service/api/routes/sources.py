"""Routes of the source resource (``service.sources``): create, list, describe, restart after a
bus reset, delete. A source reads a bus (a Redis stream, a NATS JetStream stream, a Kafka topic)
into a selector or a stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Request
from starlette.responses import Response

from service.api.deps import get_principal, get_quotas, get_sources, result_response
from service.api.guard import GuardedRoute
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES
from service.auth import Principal, requires
from service.sources.results import SourceList, SourceOut
from service.sources.service import Sources
from service.sources.spec import SourceIn, SourceRestart

router = APIRouter(prefix="/v1/sources", tags=["sources"], route_class=GuardedRoute)
Caller = Annotated[Principal, Depends(get_principal)]
SourceName = Annotated[
    str,
    Path(
        pattern=NAME_PATTERN,
        description="The source's name: 1-128 letters, digits, '.', '_' or '-'.",
    ),
]


def _sources(request: Request) -> Sources:
    return get_sources(request)


@router.post("", status_code=201, responses={201: {"model": SourceOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def create_source(
    body: Annotated[SourceIn, Body()], request: Request, caller: Caller
) -> Response:
    """Create a source: Sift reads a bus and appends what it reads to a selector's log (or a
    stream's), exactly once: each batch is committed with the bus position it reached.

    `kind: redis-stream` reads a Redis stream (`url`, `key`): one field per feature name in
    each entry, or, with `value_field`, that one field holding the entry's message. `kind:
    nats` reads a JetStream stream (`url`, `stream`, optional `subject`): each message an
    object keyed by feature name. `kind: kafka` reads a Kafka topic (`bootstrap`, `topic`;
    optional `group`, SASL `username`, `password`, `mechanism`, and `tls`): each message's
    value an object keyed by feature name. A message is written in the source's `format`:
    `json` (the default) or `msgpack`; an array of numbers stands for a selector without
    names. A labelled target takes the label from
    `label_field`. Entries become chunks of up to `batch_rows` rows or `batch_ms` ms; an entry
    that cannot be a row is set aside with its position and reason. The source's name and
    its target must be within the key's prefix. The bus must be at a global address unless
    the operator opts its host or network in (`SIFT_SOURCE_PRIVATE`), and never Sift's own
    Redis (422 `destination-not-allowed`, also for a URL no client could connect with)."""
    quotas = get_quotas(request)
    tenancy = await quotas.tenancy(caller)
    async with quotas.locked(tenancy):
        created = await _sources(request).create(
            body, caller.sees, caller.prefix, lambda: tenancy.admit(body.name, sources=1)
        )
    return result_response(created, 201, {"Location": f"/v1/sources/{created.name}"})


@router.get("", responses={200: {"model": SourceList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_sources(request: Request, caller: Caller) -> Response:
    """The sources this API key may see, sorted by name, each as `GET /v1/sources/{name}`
    describes it."""
    return result_response(await _sources(request).page(caller.sees))


@router.get("/{name}", responses={200: {"model": SourceOut}, **PROBLEM_RESPONSES})
@requires("read")
async def describe_source(name: SourceName, request: Request, caller: Caller) -> Response:
    """The source: what it reads (its URL without credentials), its committed positions, its
    lag, the rows it appended, the entries it set aside (the newest, with their positions and
    reasons), and its state with the last error."""
    return result_response(await _sources(request).describe(name, caller.sees))


@router.post("/{name}/restart", responses={200: {"model": SourceOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def restart_source(
    name: SourceName, body: Annotated[SourceRestart, Body()], request: Request, caller: Caller
) -> Response:
    """Restart a source that stopped at a reset of its bus (state `reset`: the stream or topic
    was created again below its position, and its `on_reset` is `stop`): each partition it
    stopped reads again from `start` (`earliest` by default: `{}` restarts from the start;
    `latest`, or after a position), in the bus as it is now. A 409 for a source that is not
    stopped at a reset."""
    return result_response(await _sources(request).restart(name, body.start, caller.sees))


@router.delete("/{name}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def delete_source(name: SourceName, request: Request, caller: Caller) -> Response:
    """Delete a source: its consumer stops (within a second, on whichever process runs it);
    what it appended stays in its target."""
    await _sources(request).delete(name, caller.sees)
    return Response(status_code=204)
