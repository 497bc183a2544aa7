"""Quotas per tenant (``service.selectors.quotas``): read by the tenant's admins and the root,
set by the root only (an admin key without a name prefix, or the bootstrap token)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.responses import Response

from service.api.deps import get_principal, get_quotas, json_response
from service.api.guard import GuardedRoute
from service.api.schemas import PROBLEM_RESPONSES, whole_number
from service.auth import Principal, requires
from service.errors import Forbidden
from service.selectors.quotas import Quotas

#: The largest quota that may be set (2^53 - 1: every JSON reader keeps it exact).
MOST = 2**53 - 1

#: A quota: 0 to ``MOST`` (the bounds on the integer itself, so that the schema states them).
Amount = Annotated[int, Field(ge=0, le=MOST), BeforeValidator(whole_number)]

router = APIRouter(prefix="/v1/quotas", tags=["keys"], route_class=GuardedRoute)
Caller = Annotated[Principal, Depends(get_principal)]
Tenant = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="The tenant: an API key's name prefix (e.g. team-a-).",
    ),
]


class Amounts(BaseModel):
    selectors: int
    state_bytes: int = Field(description="State bytes the selectors declare (learned or not).")
    alerts: int
    streams: int
    sources: int


class QuotaOut(BaseModel):
    tenant: str
    limits: Amounts
    used: Amounts


class QuotaIn(BaseModel):
    """The quotas to set for a tenant; a field left out (or null) takes the default again."""

    model_config = ConfigDict(extra="forbid")

    selectors: Amount | None = None
    state_bytes: Amount | None = None
    alerts: Amount | None = None
    streams: Amount | None = None
    sources: Amount | None = None


def _quotas(request: Request) -> Quotas:
    return get_quotas(request)


async def _answer(quotas: Quotas, tenant: str) -> Response:
    limits, used = await quotas.limits(tenant), await quotas.usage(tenant)
    return json_response({"tenant": tenant, "limits": asdict(limits), "used": asdict(used)})


@router.get("/{tenant}", responses={200: {"model": QuotaOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def get_quota(tenant: Tenant, request: Request, caller: Caller) -> Response:
    """A tenant's quotas and what its names hold now. A key with a prefix reads those of
    the tenants that bind it (its own, and any with quotas set that encloses its prefix) and
    of the prefixes within its own."""
    quotas = _quotas(request)
    if not (await quotas.tenancy(caller)).reads(tenant):
        raise Forbidden(
            f"this API key may only read the quotas of the tenants that bind it, not '{tenant}'"
        )
    return await _answer(quotas, tenant)


@router.put("/{tenant}", responses={200: {"model": QuotaOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def set_quota(tenant: Tenant, body: QuotaIn, request: Request, caller: Caller) -> Response:
    """Set a tenant's quotas (the root only): those given replace the defaults
    (`SIFT_TENANT_*`), the others take them again. Lowering a quota below what is used refuses
    what would add more; nothing is deleted."""
    if caller.prefix:
        raise Forbidden("only an admin key without a name prefix may set quotas")
    quotas = _quotas(request)
    await quotas.set_limits(tenant, body.model_dump(exclude_none=True))
    return await _answer(quotas, tenant)
