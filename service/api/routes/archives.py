"""Routes of selector archives: export one selector, import one (``Selectors.archives``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import Response

from service.api.deps import (
    SelectorName,
    get_principal,
    get_quotas,
    get_selectors,
    get_settings,
    read_body,
    result_response,
)
from service.api.guard import GuardedRoute
from service.api.schemas import NAME_PATTERN, PROBLEM_RESPONSES
from service.auth import Principal, requires
from service.errors import Forbidden
from service.selectors import Selectors
from service.selectors.archive import MEDIA_TYPE
from service.selectors.results import SelectorOut
from service.wire.media import require_media_type

router = APIRouter(prefix="/v1/selectors", tags=["archives"], route_class=GuardedRoute)
Service = Annotated[Selectors, Depends(get_selectors)]
Caller = Annotated[Principal, Depends(get_principal)]

#: Media types an import takes: the archive's own, or any binary body.
IMPORT_MEDIA_TYPES = (MEDIA_TYPE, "application/octet-stream")
_BINARY = {"schema": {"type": "string", "format": "binary"}}


@router.get(
    "/{name}/export",
    responses={200: {"content": {MEDIA_TYPE: _BINARY}}, **PROBLEM_RESPONSES},
    response_class=Response,
)
@requires("read")
async def export_selector(name: SelectorName, service: Service) -> Response:
    """The selector as a self-describing, checksummed archive (docs/export-import.md).

    Pending chunks are applied first (409 if that takes longer than the apply wait); the
    archive holds what is then committed. Idempotency records are not exported.
    """
    archive = await service.archives.export(name)
    return Response(
        archive,
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{name}.sift"'},
    )


@router.post(
    "/import",
    status_code=201,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "An archive from GET /v1/selectors/{name}/export.",
            "content": {media_type: _BINARY for media_type in IMPORT_MEDIA_TYPES},
        }
    },
    responses={201: {"model": SelectorOut}, **PROBLEM_RESPONSES},
)
@requires("admin")
async def import_selector(
    request: Request,
    service: Service,
    caller: Caller,
    name: Annotated[
        str | None,
        Query(
            pattern=NAME_PATTERN, description="Create it under this name (default: the archive's)."
        ),
    ] = None,
) -> Response:
    """Recreate an exported selector, at its version, so that it answers as the original and
    goes on from there; 409 if the name is taken, 413 over the archive limit, 422 for an
    archive that is damaged or of another format version."""
    require_media_type(request.headers.get("content-type"), IMPORT_MEDIA_TYPES)
    if name is not None and not caller.sees(name):
        raise Forbidden(
            f"this API key may only create selectors whose names start with '{caller.prefix}'; "
            f"got '{name}'"
        )
    body = await read_body(request, get_settings(request).archive_limit)
    quotas = get_quotas(request)
    tenancy = await quotas.tenancy(caller)
    async with quotas.locked(tenancy):
        created = await service.archives.import_(body, name, caller.sees, tenancy.admit)
    return result_response(created, 201, {"Location": f"/v1/selectors/{created.name}"})
