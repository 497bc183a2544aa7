"""The two requests a busy service answers by the thousand, served past FastAPI's routing.

A chunk's ``POST /v1/selectors/{name}/chunks`` and a ranking's ``GET /v1/selectors/{name}/top``
come in streams; FastAPI spent about a third of such a request matching it against every route,
solving its dependencies and validating its parameters (``benchmarks/bench_request_path.py``).
:class:`HotPath` recognises the plain form of these two requests and calls the very endpoint
function of the route, with the same guard (authentication, scope, the caller's prefix, a 500
that says nothing), the same problem answers and the same route in the scope (for the metrics'
labels and the access log). The FastAPI routes stay the declaration, the documentation and the
answer to everything else: a request with any other parameter, or one whose value is not in its
plain form (``wait=1``, ``h=010``, an empty Idempotency-Key), goes on to them, so that what a
parameter accepts and how a bad one is refused is decided in one place.

``SIFT_HOT_PATH=false`` turns it off (every request through FastAPI), which the tests use to
check that both ways answer alike.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.deps import IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_PATTERN
from service.api.guard import guard
from service.api.problems import sift_problem
from service.api.routes.chunks import push_chunk
from service.api.routes.rankings import top_features
from service.auth import SCOPE_ATTRIBUTE
from service.errors import SiftError
from service.store.keys import NAME_PATTERN

SELECTORS = "/v1/selectors/"
_IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
#: ``h`` in its plain form: a positive integer without leading zeros (and not absurdly long).
_COUNT = re.compile(rb"[1-9][0-9]{0,8}")
#: ``wait`` in its plain form, and what it means.
_WAIT = {b"": None, b"wait=true": True, b"wait=false": False}

#: How a hot request calls its endpoint: what to await, or None when it is not in plain form.
Call = Callable[[Request, str, bytes], Callable[[], Coroutine[Any, Any, Response]] | None]


@dataclass(frozen=True)
class HotRoute:
    """One request served here: the FastAPI route it stands for, and how to call its endpoint
    (None when the request is not in the plain form: FastAPI takes it)."""

    route: APIRoute
    call: Call

    @property
    def scope(self) -> str:
        """The scope the endpoint requires (``service.auth.requires``)."""
        return str(getattr(self.route.endpoint, SCOPE_ATTRIBUTE))


def _default(endpoint: Callable[..., Any], parameter: str) -> Any:
    """The default the endpoint declares for ``parameter`` (declared there, and only there)."""
    return inspect.signature(endpoint).parameters[parameter].default


def _push_chunk(
    request: Request, name: str, query: bytes
) -> Callable[[], Coroutine[Any, Any, Response]] | None:
    if query not in _WAIT:
        return None
    wait = _WAIT[query]
    key = request.headers.get("idempotency-key")
    if key is not None and not (
        len(key) <= IDEMPOTENCY_KEY_MAX_LENGTH and _IDEMPOTENCY_KEY.match(key)
    ):
        return None
    return lambda: push_chunk(
        name=name,
        request=request,
        service=request.app.state.runtime.selectors,
        wait=_default(push_chunk, "wait") if wait is None else wait,
        idempotency_key=key,
    )


def _top_features(
    request: Request, name: str, query: bytes
) -> Callable[[], Coroutine[Any, Any, Response]] | None:
    if query == b"":
        h = _default(top_features, "h")
    elif query.startswith(b"h=") and _COUNT.fullmatch(query, 2):
        h = int(query[2:])
    else:
        return None
    return lambda: top_features(name=name, service=request.app.state.runtime.selectors, h=h)


#: (method, the path's last segment) -> the endpoint and how a plain request calls it.
_SERVED: dict[tuple[str, str], tuple[Callable[..., Any], Call]] = {
    ("POST", "chunks"): (push_chunk, _push_chunk),
    ("GET", "top"): (top_features, _top_features),
}


class HotPath:
    """ASGI middleware, innermost of ours: plain hot requests answered here (module docstring);
    everything else passed on to FastAPI."""

    def __init__(self, app: ASGIApp, routes: list[BaseRoute], enabled: bool = True) -> None:
        self.app = app
        self.enabled = enabled
        self._hot: dict[tuple[str, str], HotRoute] = {}
        for (method, tail), (endpoint, call) in _SERVED.items():
            matches = [
                route
                for route in routes
                if isinstance(route, APIRoute)
                and route.endpoint is endpoint
                and method in (route.methods or ())
                and route.path == SELECTORS + "{name}/" + tail
            ]
            if len(matches) != 1:
                raise RuntimeError(f"no single route {method} .../{tail} for the hot path")
            self._hot[(method, tail)] = HotRoute(matches[0], call)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hot = self._match(scope) if self.enabled else None
        if hot is None:
            await self.app(scope, receive, send)
            return
        route, name = hot
        scope["route"] = route.route
        scope["endpoint"] = route.route.endpoint
        scope["path_params"] = {"name": name}
        request = Request(scope, receive)
        answer = route.call(request, name, scope["query_string"])
        if answer is None:
            await self.app(scope, receive, send)
            return
        guarded = guard(lambda _request: answer(), route.scope)
        try:
            response = await guarded(request)
        except SiftError as exc:
            response = sift_problem(request, exc)
        await response(scope, receive, send)

    def _match(self, scope: Scope) -> tuple[HotRoute, str] | None:
        """The hot route and the selector's name of a request to one, if it is one."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        if not path.startswith(SELECTORS):
            return None
        name, _, tail = path[len(SELECTORS) :].partition("/")
        hot = self._hot.get((scope["method"], tail))
        if hot is None or not NAME_PATTERN.fullmatch(name):
            return None
        return hot, name
