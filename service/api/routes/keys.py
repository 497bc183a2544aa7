"""API keys: create (the secret is shown once), list without secrets, revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from service.api.deps import KeyId, get_authenticator, get_principal, get_quotas, json_response
from service.api.guard import GuardedRoute
from service.api.schemas import PROBLEM_RESPONSES, KeyIn, KeyList, KeyOut
from service.auth import Authenticator, Principal, requires
from service.errors import Conflict, Forbidden, NotFound

router = APIRouter(prefix="/v1/keys", tags=["keys"], route_class=GuardedRoute)
Caller = Annotated[Principal, Depends(get_principal)]


def _authenticator(request: Request) -> Authenticator:
    auth = get_authenticator(request)
    if not auth.enabled:
        raise Conflict(
            "authentication is off (SIFT_API_TOKEN is unset), so API keys would not be checked; "
            "set SIFT_API_TOKEN, the bootstrap admin key, first"
        )
    return auth


@router.post("", status_code=201, responses={201: {"model": KeyOut}, **PROBLEM_RESPONSES})
@requires("admin")
async def create_key(body: KeyIn, request: Request, caller: Caller) -> Response:
    """A new API key with these scopes (and name prefix); its secret is in this answer only.

    A key with a prefix may only create keys whose prefix extends its own; the new key
    belongs to its creator's tenant, whose quotas bind it whatever becomes of its creator.
    """
    auth = _authenticator(request)
    if not body.prefix.startswith(caller.prefix):
        raise Forbidden(
            f"this API key may only create keys whose prefix starts with '{caller.prefix}'; "
            f"got '{body.prefix}'"
        )
    scopes = tuple(dict.fromkeys(body.scopes))  # as given, without repeats
    quotas = get_quotas(request)
    tenant = await quotas.tenant_of(caller) if caller.prefix else body.prefix
    record, secret = await auth.keys.create(scopes, body.prefix, body.label, tenant)
    return json_response(
        {**record.public(), "key": secret}, 201, {"Location": f"/v1/keys/{record.id}"}
    )


@router.get("", responses={200: {"model": KeyList}, **PROBLEM_RESPONSES})
@requires("admin")
async def list_keys(request: Request, caller: Caller) -> Response:
    """Every key this caller may manage, without secrets."""
    auth = _authenticator(request)
    keys = [k.public() for k in await auth.keys.all() if k.prefix.startswith(caller.prefix)]
    return json_response({"keys": keys})


@router.delete("/{key_id}", status_code=204, responses=PROBLEM_RESPONSES)
@requires("admin")
async def revoke_key(key_id: KeyId, request: Request, caller: Caller) -> Response:
    """Revoke a key: every replica refuses it from the next request on."""
    auth = _authenticator(request)
    record = await auth.keys.get(key_id)
    if record is None or not record.prefix.startswith(caller.prefix):
        raise NotFound(f"API key '{key_id}' does not exist")
    await auth.keys.delete(key_id)
    return Response(status_code=204)
