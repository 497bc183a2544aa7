"""The one place where errors become RFC 9457 ``application/problem+json`` answers."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from service.errors import SiftError, Unavailable

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("sift.api")


def problem_response(
    status: int, title: str, detail: str, slug: str, instance: str, **extra: Any
) -> Response:
    body = {
        "type": f"urn:sift:problem:{slug}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        **extra,
    }
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON)


def _describe_validation_error(error: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    message = error.get("msg", "invalid value")
    got = error.get("input")
    shown = orjson.dumps(got, default=str).decode()[:80] if got is not None else "nothing"
    return f"{location or 'body'}: {message} (got {shown})"


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(SiftError)
    async def sift_error(request: Request, exc: SiftError) -> Response:
        response = problem_response(
            exc.status, exc.title, exc.detail, exc.type_slug, request.url.path, **exc.extra
        )
        if isinstance(exc, Unavailable):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        details = [_describe_validation_error(dict(error)) for error in exc.errors()]
        return problem_response(
            422, "Invalid input", "; ".join(details), "invalid-input", request.url.path
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        return problem_response(
            exc.status_code, detail, detail, f"http-{exc.status_code}", request.url.path
        )

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(
            500, "Internal error", f"{type(exc).__name__}: {exc}", "internal", request.url.path
        )
