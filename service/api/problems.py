"""The one place where errors become RFC 9457 ``application/problem+json`` answers.

A 4xx says what was expected and what came. A 5xx never carries internal text (exception
messages, addresses, paths): the client gets a fixed sentence and an ``error_id`` that the log
line with the full traceback carries too, so an operator can find it.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match

from service.errors import HIDDEN_INPUT, SiftError, Unavailable, shown
from service.logs import current_request_id

PROBLEM_JSON = "application/problem+json"
log = logging.getLogger("sift.api")

#: Longest rendering of a rejected input inside a validation message.
_SHOWN_INPUT = 80


def problem_response(
    status: int,
    title: str,
    detail: str,
    slug: str,
    instance: str,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response:
    body = {
        "type": f"urn:sift:problem:{slug}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        **extra,
    }
    return Response(
        orjson.dumps(body), status_code=status, media_type=PROBLEM_JSON, headers=headers
    )


def request_id_field() -> dict[str, Any]:
    """The request id a 5xx body carries next to its error id, so that a client's report
    leads to every log line of its request (``service.logs``)."""
    request_id = current_request_id()
    return {} if request_id is None else {"request_id": request_id}


#: What the access log and the metrics record for a request whose client left before it was
#: read (nginx's "client closed request"): nobody receives the answer.
CLIENT_CLOSED_REQUEST = 499


def client_gone(request: Request) -> Response:
    """The answer to a request whose client disconnected while it was read: not an error."""
    log.info("client went away during %s %s", request.method, request.url.path)
    return Response(status_code=CLIENT_CLOSED_REQUEST)


def internal_error(request: Request, exc: BaseException) -> Response:
    """A 500 that shows nothing of ``exc``; the log gets the traceback under the same id."""
    error_id = secrets.token_hex(8)
    log.error(
        "internal error %s on %s %s",
        error_id,
        request.method,
        request.url.path,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    return problem_response(
        500,
        "Internal error",
        f"the server failed to answer this request; operators can find it in the log as "
        f"error {error_id}",
        "internal",
        request.url.path,
        error_id=error_id,
        **request_id_field(),
    )


def _shown(value: Any) -> str:
    """A short rendering of a rejected input that never fails (huge integers, odd types)."""
    if value is None:
        return "nothing"
    return shown(value, _SHOWN_INPUT)


#: What a value that misses its pattern should look like, by field (the regex says it less well).
_PATTERNS_MEAN = {
    "name": "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
    "from": "a selector name: 1-128 letters, digits, '.', '_' or '-'",
    "view": "a view name: 1-128 letters, digits, '.', '_' or '-'",
    "log_id": "a log id like '1732258800000-0', as a chunk's answer gives it",
    "key_id": "an API key id: 16 hex digits",
    "idempotency-key": "1-256 visible ASCII characters",
    "prefix": "letters, digits, '.', '_' or '-'",
}


def _describe_validation_error(error: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    message = error.get("msg", "invalid value")
    field = str(error.get("loc", ("",))[-1])
    if error.get("type") == "string_pattern_mismatch" and field in _PATTERNS_MEAN:
        message = f"expected {_PATTERNS_MEAN[field]}"
    if error.get("type") in _INPUT_NOT_SHOWN:
        return f"{location or 'body'}: {message}"
    return f"{location or 'body'}: {message} (got {_shown(error.get('input'))})"


#: Errors whose input is not repeated: one that may hold credentials, and a union's tag
#: missing or unknown (its input is the whole body; the message names the tag).
_INPUT_NOT_SHOWN = (HIDDEN_INPUT, "union_tag_not_found", "union_tag_invalid")


def allowed_methods(request: Request) -> list[str]:
    """The methods of the route this path names: of the routes whose templates match it, the
    most specific one's (a literal segment before a parameter, left to right), so that
    ``/v1/selectors/import`` answers the import's methods and not those of the selector named
    ``import``. Starlette's 405 names only the first route registered.

    ``app.state.routers`` lists the routers the app includes (their routes carry full paths).
    """
    by_template: dict[str, set[str]] = {}
    for router in getattr(request.app.state, "routers", ()):
        for route in router.routes:
            for method in getattr(route, "methods", None) or ():
                if route.matches({**request.scope, "method": method})[0] == Match.FULL:
                    template = getattr(route, "path_format", route.path)
                    by_template.setdefault(template, set()).add(method)
    if not by_template:
        return []
    specific = max(_specificity(template) for template in by_template)
    methods: set[str] = set()
    for template, served in by_template.items():
        if _specificity(template) == specific:
            methods |= served
    return sorted(methods)


def _specificity(template: str) -> tuple[int, ...]:
    """1 for each literal segment of a route's path, 0 for each parameter."""
    return tuple(0 if "{" in segment else 1 for segment in template.split("/"))


def sift_problem(request: Request, exc: SiftError) -> Response:
    """The answer to a ``SiftError``: its problem, or a bare 500 for a bug that raised one."""
    if exc.status >= 500 and not isinstance(exc, Unavailable):
        return internal_error(request, exc)
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Unavailable) else None
    extra = {**exc.extra, **request_id_field()} if exc.status >= 500 else exc.extra
    return problem_response(
        exc.status,
        exc.title,
        exc.detail,
        exc.type_slug,
        request.url.path,
        headers,
        **extra,
    )


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(SiftError)
    async def sift_error(request: Request, exc: SiftError) -> Response:
        return sift_problem(request, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        details = [_describe_validation_error(dict(error)) for error in exc.errors()]
        return problem_response(
            422, "Invalid input", "; ".join(details), "invalid-input", request.url.path
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code >= 500:
            return internal_error(request, exc)
        detail = exc.detail if isinstance(exc.detail, str) else "request refused"
        headers = dict(exc.headers or {})
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not served at {request.url.path}; allowed: " + (
                ", ".join(allowed)
            )
        return problem_response(
            exc.status_code,
            detail,
            detail,
            f"http-{exc.status_code}",
            request.url.path,
            headers or None,
        )

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        return internal_error(request, exc)
