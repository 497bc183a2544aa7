"""The route class of every Sift endpoint: checks that must come before anything else.

FastAPI reads and parses a route's JSON body before it runs the route's dependencies, so an
authentication dependency would come too late: an unauthenticated caller could make the server
parse hundreds of megabytes first. :class:`GuardedRoute` wraps the handler instead:

1. authenticate the caller and check the scope the endpoint declares (``service.auth.requires``)
   and, for ``/v1/selectors/{name}/...`` (and ``/v1/streams/{name}/...``), that the key's
   prefix lets it see ``name``;
2. for endpoints with a JSON body model, read the body under ``SIFT_MAX_JSON_BODY_BYTES`` and
   parse it with orjson (nesting and size bounded) before FastAPI would;
3. turn any unexpected exception into a 500 that carries no internal text, here, so that
   Starlette's server-error middleware never re-raises it (which would drop the connection); a
   client that went away before its request was read is no error of ours (a 499 in the access
   log and the metrics, as nginx says it, and one line at INFO).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from service.api.deps import read_body
from service.api.problems import client_gone, internal_error
from service.auth import PUBLIC, SCOPE_ATTRIBUTE, Authenticator
from service.errors import InvalidInput, NotFound, SiftError, UnsupportedMediaType
from service.wire.media import JSON, media_type_of, parse_json

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
#: The name of the bearer-key security scheme in the OpenAPI document.
BEARER_SCHEME = "apiKey"


def is_json(media_type: str) -> bool:
    return media_type == JSON or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


async def preload_json(request: Request, limit: int) -> None:
    """Read and parse the JSON body now, under ``limit``; FastAPI then uses what we parsed.

    Starlette caches a request's body and JSON in ``_body`` and ``_json``; filling them here is
    how the parse FastAPI does afterwards becomes ours (orjson: bounded nesting, no huge ints).
    """
    media_type = media_type_of(request.headers.get("content-type"))
    if not is_json(media_type):
        got = f"'{media_type}'" if media_type else "no Content-Type"
        raise UnsupportedMediaType(f"expected Content-Type application/json; got {got}")
    body = await read_body(request, limit)
    request._body = body
    if body:
        request._json = parse_json(body)


async def read_json(request: Request) -> Any:
    """The JSON body of a route that reads it itself, under the JSON body limit."""
    await preload_json(request, request.app.state.runtime.settings.max_json_body_bytes)
    if not request._body:
        raise InvalidInput("empty body: expected a JSON object")
    return request._json


class GuardedRoute(APIRoute):
    """An APIRoute whose handler is wrapped by the checks of the module docstring.

    Its OpenAPI operation says which scope it needs and asks for the bearer key (the app drops
    that requirement when authentication is off).
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        scope = getattr(endpoint, SCOPE_ATTRIBUTE, None)
        if scope is None:
            raise RuntimeError(f"route {path} does not declare its scope (service.auth)")
        if scope != PUBLIC:
            extra = dict(kwargs.get("openapi_extra") or {})
            extra["security"] = [{BEARER_SCHEME: []}]
            extra["x-sift-scope"] = scope
            kwargs["openapi_extra"] = extra
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Handler:
        return guard(
            super().get_route_handler(),
            getattr(self.endpoint, SCOPE_ATTRIBUTE),
            takes_json=self.body_field is not None,
        )


async def admit(request: Request, scope: str) -> None:
    """Authenticate the caller and check that it holds ``scope`` and, for a route about
    ``/v1/selectors/{name}``, that its key's prefix lets it see ``name``; the caller goes to
    ``request.state.principal``."""
    if scope == PUBLIC:
        return
    auth: Authenticator = request.app.state.runtime.auth
    principal = await auth.authenticate(request.headers.get("authorization"))
    principal.require(scope)
    name = request.path_params.get("name")
    if isinstance(name, str) and not principal.sees(name):
        what = "stream" if request.url.path.startswith("/v1/streams/") else "selector"
        raise NotFound(f"{what} '{name}' does not exist")
    request.state.principal = principal


def guard(handler: Handler, scope: str, takes_json: bool = False) -> Handler:
    """``handler`` behind the checks of the module docstring (``service.api.hot_path`` wraps
    its endpoints in the same)."""

    async def guarded(request: Request) -> Response:
        try:
            await admit(request, scope)
            if takes_json:
                await preload_json(request, request.app.state.runtime.settings.max_json_body_bytes)
            return await handler(request)
        except (SiftError, HTTPException, RequestValidationError):
            raise  # answered by the problem handlers
        except ClientDisconnect:
            return client_gone(request)
        except Exception as exc:
            return internal_error(request, exc)

    return guarded
