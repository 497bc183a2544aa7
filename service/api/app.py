"""The FastAPI application: the routes, the problem handlers, the OpenAPI document and the
middleware, mounted on the runtime (``service.runtime``) its lifespan runs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from service.api.guard import BEARER_SCHEME
from service.api.middleware import install_middleware
from service.api.problems import install_problem_handlers
from service.api.request_bodies import create_request_body
from service.api.routes import (
    archives,
    capabilities,
    chunks,
    features,
    health,
    keys,
    methods,
    monitoring,
    quotas,
    rankings,
    selectors,
    sources,
    streams,
    ui,
)
from service.api.schemas import settings_maximum
from service.config import Settings
from service.runtime import Runtime

DESCRIPTION = """
Streaming feature selection as a service. Create a *selector* running one published streaming
method, push chunks of rows to it, and read its live top-h feature ranking.

Every error is `application/problem+json` (RFC 9457) with a `detail` that says what was
expected and what came.

With `SIFT_API_TOKEN` set, every `/v1` route but the probes needs `Authorization: Bearer <key>`:
the token itself (admin) or an API key from `POST /v1/keys` with scopes `read` (GET routes),
`write` (read plus chunks, features, merge, transform, cluster) or `admin` (everything).
"""


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Declare the bearer key in the OpenAPI document, or drop it when authentication is off;
    document the create body of every method registered when the document is built."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        # The body of POST /v1/selectors (read by the route, not declared to FastAPI).
        schema["paths"]["/v1/selectors"]["post"]["requestBody"] = create_request_body()
        settings_maximum(schema, settings)
        selectors.state_deletion_rules(schema["paths"]["/v1/selectors"]["delete"])
        if settings.api_token:
            schema.setdefault("components", {})["securitySchemes"] = {
                BEARER_SCHEME: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "SIFT_API_TOKEN (admin) or an API key from POST /v1/keys.",
                }
            }
        else:
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.pop("security", None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


#: Every router the app includes, in order (``app.state.routers`` for the docs and the problems).
ROUTERS = [
    health.router,
    selectors.router,
    methods.router,
    archives.router,
    chunks.router,
    features.router,
    rankings.router,
    monitoring.router,
    capabilities.router,
    streams.router,
    sources.router,
    keys.router,
    quotas.router,
    ui.router,
]


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app: the routes on a ``Runtime`` (``service.runtime``) that its lifespan runs."""
    runtime = Runtime(settings or Settings())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with runtime:
            yield

    app = FastAPI(
        title="Sift",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # /docs is served by service.api.routes.ui with Swagger UI's files from this server (no
        # CDN: FastAPI's own page renders blank offline); ReDoc is not offered.
        docs_url=None,
        redoc_url=None,
        # Sift traces its requests itself (service/api/tracing.py: the hot path's routes too).
        telemetry={"tracing": False},
    )
    app.state.runtime = runtime
    app.state.routers = ROUTERS
    install_problem_handlers(app)
    # Authentication and scopes are checked by every route's GuardedRoute (service.api.guard).
    install_openapi(app, runtime.settings)
    for router in ROUTERS:
        app.include_router(router)
    install_middleware(app, runtime)  # after the routes: the hot path finds its own
    return app
