"""Checks every method's parameter resolution shares: an object, and no unknown names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from service.errors import InvalidParams


def require_known(
    params: Any, known: Sequence[str], method: str, expected: Sequence[str] | None = None
) -> Mapping[str, Any]:
    """``params`` as a mapping whose names are all in ``known``; ``InvalidParams`` otherwise.

    A typo must not silently fall back to a default. ``expected`` is what the message lists
    (``known`` unless given, e.g. without names the service fills in itself).
    """
    if not isinstance(params, Mapping):
        raise InvalidParams(f"params must be an object; got {type(params).__name__}")
    unknown = sorted(str(key) for key in params if key not in known)
    if unknown:
        listed = known if expected is None else expected
        raise InvalidParams(
            f"unknown parameter(s) for {method}: {', '.join(repr(u) for u in unknown)}; "
            f"expected some of: {', '.join(listed)}"
        )
    return params
