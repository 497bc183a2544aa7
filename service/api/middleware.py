"""The ASGI middleware of the service: request context, CORS, gzip, the Redis-restart gate.

Plain ASGI classes, not Starlette's ``BaseHTTPMiddleware``: that one runs the rest of the app
in another task (a context variable set there would not reach our logs), buffers streamed
answers and costs a thread hop per request.

Order, outermost first (``install_middleware``):

0. :class:`service.api.tracing.TraceRequests`: the request's server span, when traces are on;
1. :class:`RequestContext`: the request id (``X-Request-ID``) of every line logged while
   serving, echoed on every answer; the HTTP metrics; and the last net for an exception that
   escapes everything else (a 500 problem with the id, instead of a dropped connection);
2. CORS (``SIFT_CORS_ORIGINS``), when configured;
3. gzip (``SIFT_GZIP_MIN_BYTES``), when configured;
4. :class:`RedisRestartGate`: while the supervisor restarts the embedded Redis, every route but
   the probes, the metrics and the docs answers 503 at once, with the time the restart should
   still take as ``Retry-After``;
5. :class:`service.api.hot_path.HotPath`: plain chunk POSTs and top GETs answered past
   FastAPI's routing, by the same endpoints.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.hot_path import HotPath
from service.api.problems import internal_error, problem_response
from service.api.tracing import TraceRequests
from service.logs import accepted_request_id, request_id_var
from service.metrics import UNMATCHED_ROUTE, Metrics
from service.runtime import Runtime
from service.store.embedded import RedisSupervisor

REQUEST_ID_HEADER = "X-Request-ID"
#: Paths that answer while the embedded Redis restarts: they need no Redis, or say it is down;
#: and the prefixes of static pages (the docs, the dashboard's files).
OPEN_WHILE_RESTARTING = frozenset({"/v1/healthz", "/v1/readyz", "/metrics", "/openapi.json"})
OPEN_PREFIXES_WHILE_RESTARTING = ("/docs", "/ui")
#: Headers a browser may send across origins, and read from an answer.
CORS_ALLOWED_HEADERS = [
    "Authorization",
    "Content-Type",
    "Accept",
    "Idempotency-Key",
    "X-Request-ID",
]
CORS_EXPOSED_HEADERS = [
    "X-Request-ID",
    "Retry-After",
    "Location",
    "Content-Disposition",
    "Sift-Version",
    "Sift-Rows-Seen",
    "Sift-Features-Seen",
]
#: Bodies that are compressed already (or would barely shrink) are sent as they are.
GZIP_EXCLUDED = (
    *DEFAULT_EXCLUDED_CONTENT_TYPES,
    "application/x-npz",
    "application/vnd.sift.archive",
)


def route_template(scope: Scope) -> str:
    """The path template of the route that served ``scope`` (bounded label values)."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class RequestContext:
    """Request id, HTTP metrics and the last-resort 500 of every HTTP request."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        offered = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                offered = value.decode("latin-1")
                break
        request_id = accepted_request_id(offered)
        token = request_id_var.set(request_id)
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            # Everything below answers its own errors; this is for what escapes anyway. The
            # traceback goes to the log under an error id, the client gets the id only.
            if response_started:
                raise
            response = internal_error(Request(scope), exc)
            await response(scope, receive, send_with_id)
        finally:
            self.metrics.observe_request(
                route_template(scope),
                str(scope.get("method", "")),
                status,
                time.perf_counter() - started,
            )
            request_id_var.reset(token)


class RedisRestartGate:
    """503 with a meaningful ``Retry-After`` while the embedded Redis is being restarted."""

    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The runtime makes the supervisor when it starts, after the middleware exists.
        supervisor = self.runtime.supervisor
        if (
            supervisor is None
            or supervisor.healthy
            or scope["type"] != "http"
            or scope.get("path") in OPEN_WHILE_RESTARTING
            or str(scope.get("path", "")).startswith(OPEN_PREFIXES_WHILE_RESTARTING)
        ):
            await self.app(scope, receive, send)
            return
        retry_after = supervisor.retry_after()
        response = problem_response(
            503,
            "Service unavailable",
            "the service's Redis exited and is being restarted; retry after the time "
            "Retry-After gives",
            "unavailable",
            str(scope.get("path", "")),
            {"Retry-After": str(retry_after)},
            **supervisor_problem_fields(supervisor),
        )
        await response(scope, receive, send)


def supervisor_problem_fields(supervisor: RedisSupervisor) -> dict[str, Any]:
    """What a 503 during a restart adds to its problem body (the request id comes too)."""
    fields: dict[str, Any] = {"redis": "restarting", **supervisor.status()}
    request_id = request_id_var.get()
    if request_id is not None:
        fields["request_id"] = request_id
    return fields


def install_middleware(app: FastAPI, runtime: Runtime) -> None:
    """Wrap ``app`` in the middleware of the module docstring (added innermost first)."""
    settings = runtime.settings
    # Innermost: the hot path answers from inside the gate, the context and CORS/gzip.
    routes = [route for router in app.state.routers for route in router.routes]
    app.add_middleware(HotPath, routes=routes, enabled=settings.hot_path)
    app.add_middleware(RedisRestartGate, runtime=runtime)
    if settings.gzip_min_bytes > 0:
        app.add_middleware(
            GZipMiddleware,
            minimum_size=settings.gzip_min_bytes,
            compresslevel=6,
            exclude_content_types=GZIP_EXCLUDED,
        )
    origins = settings.cors_origin_list
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=CORS_ALLOWED_HEADERS,
            expose_headers=CORS_EXPOSED_HEADERS,
            max_age=600,
        )
    app.add_middleware(RequestContext, metrics=runtime.metrics)
    app.add_middleware(TraceRequests)  # outermost: its span covers everything (off: one test)
