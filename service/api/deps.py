"""Request-scoped helpers shared by the routes: the runtime's parts, the caller, answers, bodies."""

from __future__ import annotations

import io
from typing import Annotated, Any

import numpy as np
import orjson
from fastapi import Header, Path, Query, Request
from starlette.convertors import Convertor, register_url_convertor
from starlette.responses import Response

from service.api.schemas import NAME_PATTERN
from service.auth import Authenticator, Principal
from service.config import Settings
from service.errors import NotAcceptable, PayloadTooLarge
from service.runtime import Runtime
from service.selectors import Selectors
from service.selectors.ingest import Push
from service.selectors.quotas import Quotas
from service.selectors.results import Result
from service.sources.service import Sources
from service.wire.kinds import ChunkFormat
from service.wire.media import JSON, NPY, media_type_of, require_media_type
from service.wire.names import MAX_NAME_LENGTH

#: Names per page of a listing (``GET /v1/selectors``, ``GET /v1/streams``): by default, and at
#: most.
DEFAULT_PAGE = 100
MAX_PAGE = 1000

#: The ``Idempotency-Key`` header: 1-256 visible ASCII characters (it becomes part of a Redis key).
IDEMPOTENCY_KEY_PATTERN = r"^[\x21-\x7e]+$"
IDEMPOTENCY_KEY_MAX_LENGTH = 256
IdempotencyKey = Annotated[
    str | None,
    Header(
        min_length=1,
        max_length=IDEMPOTENCY_KEY_MAX_LENGTH,
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description="Retry safely: a repeated key answers what the first request answered.",
    ),
]

#: ``?labels=<column>``: which column of a table body (``text/csv``, Arrow) holds the labels.
LabelColumn = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Labelled methods, text/csv and Arrow bodies: the column that holds the "
        "labels (not a feature). JSON and .npz chunks carry their labels themselves.",
    ),
]

#: ``?target=<column>``: which column of a table body holds the targets.
TargetColumn = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="Methods of rows with a target, text/csv and Arrow bodies: the column that "
        "holds the targets (not a feature). JSON and .npz chunks carry their targets themselves.",
    ),
]


#: Path parameters, as documented (the service checks them again where it matters).
SelectorName = Annotated[
    str,
    Path(
        pattern=NAME_PATTERN,
        description="The selector's name: 1-128 letters, digits, '.', '_' or '-'.",
    ),
]
LogId = Annotated[
    str,
    Path(
        # Up to 19 digits a part: every such number fits a Redis stream id (64 bits each).
        pattern=r"^(0|[1-9][0-9]{0,18})-(0|[1-9][0-9]{0,18})$",
        description="The log id a chunk's answer gave, e.g. 1732258800000-0.",
    ),
]
KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$", description="An API key's id.")]
AlertId = Annotated[
    str, Path(pattern=r"^[0-9a-f]{16}$", description="An alert's id (from its creation).")
]


class AlertIdConvertor(Convertor[str]):
    """An alert id in a route's path (``{alert_id:alert_id}``): a template that matches no
    other word, so that ``.../alerts/events`` is never taken for an alert's path."""

    regex = "[0-9a-f]{16}"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("alert_id", AlertIdConvertor())
AlertEventId = Annotated[
    str,
    Path(
        pattern=r"^[0-9a-f]{16}-[1-9][0-9]{0,9}(-resolved)?$",
        description="An alert event's id: <alert id>-<crossing>[-resolved].",
    ),
]


def get_runtime(request: Request) -> Runtime:
    """What the process runs (``service.runtime``): every route's parts come from it."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_selectors(request: Request) -> Selectors:
    return get_runtime(request).selectors


def get_settings(request: Request) -> Settings:
    return get_runtime(request).settings


def get_quotas(request: Request) -> Quotas:
    return get_runtime(request).quotas


def get_sources(request: Request) -> Sources:
    return get_runtime(request).sources


def get_authenticator(request: Request) -> Authenticator:
    return get_runtime(request).auth


async def get_principal(request: Request) -> Principal:
    """The caller, as ``service.api.guard`` authenticated it before the route ran."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):  # a public route asking for a caller: a bug
        raise RuntimeError(f"no authenticated caller on {request.url.path}")
    return principal


def body_limit(settings: Settings, media_type: str) -> int:
    """The body limit of a chunk: JSON is parsed into Python objects, binary is not."""
    return settings.max_json_body_bytes if media_type == JSON else settings.max_body_bytes


def result_response(
    result: Result, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A typed answer of the selector service, rendered as JSON."""
    return Response(
        result.render(), status_code=status, media_type="application/json", headers=headers
    )


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
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
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


def version_headers(version: int, seen: dict[str, int]) -> dict[str, str]:
    """The committed version an answer comes from, for answers whose body is a bare array:
    ``Sift-Version`` and ``Sift-Rows-Seen`` (or ``Sift-Features-Seen`` for feature streams)."""
    headers = {"Sift-Version": str(version)}
    for field, count in seen.items():
        headers["Sift-" + "-".join(part.capitalize() for part in field.split("_"))] = str(count)
    return headers


async def push_items(
    request: Request,
    service: Selectors,
    name: str,
    kind: type[ChunkFormat],
    idempotency_key: str | None,
    wait: bool,
    labels: str | None = None,
    target: str | None = None,
) -> Response:
    """``POST .../<route>`` of chunks of ``kind`` (rows or feature columns): the media type
    and the selector are checked before a large body is read; 200 with the version that holds
    the items, or 202. ``labels`` and ``target`` name the label or target column of a table
    body."""
    media_type = require_media_type(request.headers.get("content-type"), kind.media_types)
    # 404 before reading a large body for nothing; the description as cached (the append
    # checks that it is still the selector's).
    meta = await service.store.registry.cached_meta(name)
    body = await read_body(request, body_limit(get_settings(request), media_type))
    push = Push(body, media_type, idempotency_key, wait, labels, target)
    receipt = await service.ingest.push(meta, kind.route, push)
    return result_response(receipt.result, 200 if receipt.applied else 202)
