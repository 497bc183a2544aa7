"""Request-scoped helpers shared by the routes: the service object, auth, JSON answers, bodies."""

from __future__ import annotations

import hmac
import io
from typing import Any

import numpy as np
import orjson
from fastapi import Request
from starlette.responses import Response

from service.api.payloads import NPY, media_type_of
from service.config import Settings
from service.errors import NotAcceptable, PayloadTooLarge, Unauthorized
from service.labelled_selectors import LabelledSelectors
from service.selectors import SelectorService
from service.store.records import Head


def get_service(request: Request) -> SelectorService:
    service: SelectorService = request.app.state.service
    return service


def get_labelled(request: Request) -> LabelledSelectors:
    labelled: LabelledSelectors = request.app.state.labelled
    return labelled


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def require_token(request: Request) -> None:
    """Bearer-token check, active only when ``SIFT_API_TOKEN`` is set."""
    expected = get_settings(request).api_token
    if not expected:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip(), expected):
        raise Unauthorized("expected header 'Authorization: Bearer <token>' with the API token")


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it exceeds ``limit`` (never read whole)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"body of {declared} bytes exceeds the limit of {limit} bytes")
    parts: list[bytes] = []
    received = 0
    async for part in request.stream():
        received += len(part)
        if received > limit:
            raise PayloadTooLarge(
                f"body exceeds the limit of {limit} bytes (read {received} so far)"
            )
        parts.append(part)
    return b"".join(parts)


def wants_npy(request: Request) -> bool:
    """True for ``Accept: application/x-npy``, False for JSON; 406 for anything else."""
    accept = request.headers.get("accept", "*/*")
    accepted = {media_type_of(part) for part in accept.split(",")}
    if NPY in accepted:
        return True
    if accepted & {"application/json", "*/*", "application/*", ""}:
        return False
    raise NotAcceptable(f"expected Accept application/json or {NPY}; got '{accept}'")


def npy_response(array: Any, headers: dict[str, str] | None = None) -> Response:
    """An array as a ``.npy`` body (little-endian float64, never pickled)."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array, dtype="<f8"), allow_pickle=False)
    return Response(buffer.getvalue(), media_type=NPY, headers=headers)


def version_headers(head: Head) -> dict[str, str]:
    """The committed version an answer comes from, for answers whose body is a bare array."""
    return {"Sift-Version": str(head.version), "Sift-Rows-Seen": str(head.rows_seen)}
