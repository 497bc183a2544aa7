"""Media types of request bodies, and the JSON parser every body goes through."""

from __future__ import annotations

from typing import Any

import orjson

from service.errors import BadRequest, UnsupportedMediaType

JSON = "application/json"

NPY = "application/x-npy"

NPZ = "application/x-npz"

#: Rows as a table with a header of column names (``service.wire.tables``).
CSV = "text/csv"
#: Rows as an Arrow IPC stream of named columns (``service.wire.tables``; needs pyarrow).
ARROW = "application/vnd.apache.arrow.stream"

ROW_MEDIA_TYPES = (JSON, NPY, NPZ, CSV, ARROW)
#: Media types whose bodies name their columns in a table: a label column is named by the
#: request (``?labels=<column>``), where JSON and ``.npz`` bodies carry ``labels`` themselves.
TABLE_MEDIA_TYPES = (CSV, ARROW)

COLUMN_MEDIA_TYPES = (JSON, NPY)
#: Media types whose bodies inflate when decoded (a zip archive): never decoded on the event
#: loop, whatever their size.
INFLATING_MEDIA_TYPES = (NPZ,)
#: Containers ``whole_floats_as_ints`` descends into: no body Sift accepts nests deeper.
_WHOLE_FLOATS_DEPTH = 32


def media_type_of(content_type: str | None) -> str:
    """The bare media type of a Content-Type header (parameters such as charset dropped)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def require_media_type(content_type: str | None, accepted: tuple[str, ...]) -> str:
    media_type = media_type_of(content_type)
    if media_type not in accepted:
        got = f"'{media_type}'" if media_type else "no Content-Type"
        raise UnsupportedMediaType(f"expected Content-Type one of {', '.join(accepted)}; got {got}")
    return media_type


def parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None


def whole_floats_as_ints(value: Any, _depth: int = 0) -> Any:
    """``value`` with every float that is a whole number made an int, recursively (down to
    ``_WHOLE_FLOATS_DEPTH`` levels: anything deeper is refused by whatever reads it, as it is).

    JSON does not tell ``3`` from ``3.0`` (JSON Schema calls both integers), but a parser
    does: parameters that must be integers accept both.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if _depth >= _WHOLE_FLOATS_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: whole_floats_as_ints(item, _depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_floats_as_ints(item, _depth + 1) for item in value]
    return value
