"""What every answer's parsing shares."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _seen(rows_seen: int | None, features_seen: int | None) -> int:
    return rows_seen if rows_seen is not None else (features_seen or 0)
