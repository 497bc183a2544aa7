"""The server span of every HTTP request, when traces are on (``service.tracing``).

A plain ASGI middleware, outermost, rather than ``opentelemetry-instrumentation-fastapi`` or
FastAPI's own telemetry (turned off in ``create_app``): the hot path (``api/hot_path.py``)
answers chunk POSTs and top GETs past FastAPI's routing, which would leave those spans without
their route; this one names every span by the route template the scope carries when the answer
is sent, as the HTTP metrics label it. When traces are off it costs one test per request.

The producer's W3C ``traceparent`` (and ``tracestate``) is continued; no other propagator is
read. The probes and ``/metrics`` are not traced: they would be most of the spans.
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import tracing

#: Paths polled by machines: not traced.
UNTRACED = frozenset({"/v1/healthz", "/v1/readyz", "/metrics"})
_PROPAGATOR = TraceContextTextMapPropagator()
_CARRIED = (b"traceparent", b"tracestate")


class TraceRequests:
    """ASGI middleware: a ``SERVER`` span per HTTP request (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not tracing.enabled() or scope["type"] != "http" or scope["path"] in UNTRACED:
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name in _CARRIED
        }
        parent = _PROPAGATOR.extract(carrier) if carrier else otel_context.Context()
        method = str(scope.get("method", ""))
        attributes: dict[str, AttributeValue] = {
            "http.request.method": method,
            "url.path": str(scope["path"]),
            "url.scheme": str(scope.get("scheme", "http")),
        }
        if scope.get("http_version"):
            attributes["network.protocol.version"] = str(scope["http_version"])
        span = tracing.server_span(method, parent, attributes)
        status: int | None = None

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        token = otel_context.attach(trace.set_span_in_context(span, parent))
        try:
            await self.app(scope, receive, send_status)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(StatusCode.ERROR)
            raise
        finally:
            otel_context.detach(token)
            route = getattr(scope.get("route"), "path", None)
            if isinstance(route, str):
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
                name = scope.get("path_params", {}).get("name")
                if isinstance(name, str) and route.startswith("/v1/selectors/{name}"):
                    span.set_attribute("sift.selector", name)
            request_id = scope.get("state", {}).get("request_id")
            if isinstance(request_id, str):
                span.set_attribute("sift.request_id", request_id)
            if status is not None:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_attribute("error.type", str(status))
                    span.set_status(StatusCode.ERROR)
            span.end()
