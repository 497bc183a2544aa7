"""Routes of the selector resource: create, list, describe, delete (``Selectors.lifecycle``)."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    DEFAULT_PAGE,
    MAX_PAGE,
    SelectorName,
    get_principal,
    get_selectors,
    result_response,
)
from service.api.guard import GuardedRoute, read_json
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES
from service.auth import Principal, requires
from service.errors import Forbidden, NotFound
from service.selectors import Selectors
from service.selectors.quotas import Quotas
from service.selectors.results import SelectorList, SelectorOut

router = APIRouter(prefix="/v1/selectors", tags=["selectors"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]


@router.post(
    "",
    status_code=201,
    responses={201: {"model": SelectorOut}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def create_selector(request: Request, service: Service, caller: Caller) -> Response:
    """Create a selector; the answer echoes the resolved parameters (defaults filled in).

    The body depends on the method: ``n_features`` for row methods (fsds, ocfs, ioc,
    variance), ``n_samples`` for feature-column methods (ofs, iqrp), ``views`` for omvfs; or
    ``stream`` (and ``from``): attached to a stream, whose shape and names it takes and whose
    chunks it applies.
    """
    document = await read_json(request)
    name = document.get("name") if isinstance(document, dict) else None
    if isinstance(name, str) and not caller.sees(name):
        raise Forbidden(
            f"this API key may only create selectors whose names start with '{caller.prefix}'; "
            f"got '{name}'"
        )
    stream = document.get("stream") if isinstance(document, dict) else None
    if isinstance(stream, str) and not caller.sees(stream):
        raise NotFound(f"stream '{stream}' does not exist")
    quotas: Quotas = request.app.state.quotas
    tenant = await quotas.tenant_of(caller)
    async with quotas.lock(tenant):
        created = await service.lifecycle.create(document, partial(quotas.admit, tenant))
    return result_response(created, 201, {"Location": f"/v1/selectors/{created.name}"})


@router.get("", responses={200: {"model": SelectorList}, **PROBLEM_RESPONSES})
@requires("read")
async def list_selectors(
    service: Service,
    caller: Caller,
    limit: Annotated[
        int, Query(ge=1, le=MAX_PAGE, description="At most this many selectors.")
    ] = DEFAULT_PAGE,
    after: Annotated[
        str | None,
        Query(
            pattern=NAME_PATTERN,
            description="Start after this name: the `next` of the previous page.",
        ),
    ] = None,
) -> Response:
    """The selectors this API key may see (all of them without a name prefix), sorted by name,
    a page at a time: ``next`` is the ``after`` of the following page, null on the last."""
    return result_response(await service.lifecycle.page(limit, after, caller.sees))


@router.get("/{name}", responses={200: {"model": SelectorOut}, **PROBLEM_RESPONSES})
@requires("read")
async def describe_selector(name: SelectorName, service: Service) -> Response:
    """The selector, the scalars of its state, what its method shows of it, what is pending."""
    return result_response(await service.lifecycle.describe(name))


@router.delete("/{name}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def delete_selector(name: SelectorName, service: Service) -> Response:
    await service.lifecycle.delete(name)
    return Response(status_code=204)


@router.post("/{name}/detach", responses={200: {"model": SelectorOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def detach_selector(name: SelectorName, service: Service) -> Response:
    """Detach a selector from its stream: it keeps its state and version, applies what the
    stream had given it, then takes chunks directly; the stream keeps nothing more for it."""
    return result_response(await service.lifecycle.detach(name))
