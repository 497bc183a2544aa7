"""Checks every method's parameter resolution shares: an object, and no unknown names."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

from service.errors import InvalidParams


def integer_param(
    name: str, value: Any, minimum: int, maximum: int | None = None, maximum_is: str = ""
) -> int:
    """An integer (not a bool) in ``[minimum, maximum]``; InvalidParams saying the range
    (``maximum_is`` names where the maximum comes from, e.g. ``"n_features="``)."""
    bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum_is}{maximum}]"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParams(f"{name} must be an integer {bound}; got {value!r}")
    if int(value) < minimum or (maximum is not None and int(value) > maximum):
        raise InvalidParams(f"{name} must be an integer {bound}; got {int(value)}")
    return int(value)


def real_param(name: str, value: Any) -> float:
    """A finite real number (not a bool); ranges are each method's to say."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise InvalidParams(f"{name} must be a finite number; got {value!r}")
    return float(value)


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


# -- JSON Schema of a method's parameters (documented in the OpenAPI create body) ---------------

#: View names, anchored for JSON Schema (the service's rule: ``service.store.keys``).
VIEW_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


def integer(
    minimum: int | None = None,
    *,
    maximum: int | None = None,
    below: int | None = None,
    nullable: bool = False,
    doc: str = "",
) -> dict[str, Any]:
    """An integer parameter (``below``: exclusive maximum); ``nullable``: null means a default."""
    schema: dict[str, Any] = {"type": "integer"}
    for key, value in (("minimum", minimum), ("maximum", maximum), ("exclusiveMaximum", below)):
        if value is not None:
            schema[key] = value
    if doc:
        schema["description"] = doc
    return _nullable(schema, nullable)


def number(
    minimum: float | None = None,
    *,
    above: float | None = None,
    maximum: float | None = None,
    below: float | None = None,
    nullable: bool = False,
    doc: str = "",
) -> dict[str, Any]:
    """A real parameter (``above``/``below``: exclusive bounds)."""
    schema: dict[str, Any] = {"type": "number"}
    bounds = (
        ("minimum", minimum),
        ("exclusiveMinimum", above),
        ("maximum", maximum),
        ("exclusiveMaximum", below),
    )
    for key, value in bounds:
        if value is not None:
            schema[key] = value
    if doc:
        schema["description"] = doc
    return _nullable(schema, nullable)


def boolean(doc: str = "") -> dict[str, Any]:
    return {"type": "boolean", **({"description": doc} if doc else {})}


def one_of(*values: str, doc: str = "") -> dict[str, Any]:
    return {"type": "string", "enum": list(values), **({"description": doc} if doc else {})}


def per_view(item: dict[str, Any], doc: str = "") -> dict[str, Any]:
    """A number for every view, an object ``{view: number}``, or null for the default."""
    by_view = {
        "type": "object",
        "propertyNames": {"pattern": VIEW_NAME},
        "additionalProperties": item,
    }
    schema: dict[str, Any] = {"anyOf": [item, by_view, {"type": "null"}]}
    if doc:
        schema["description"] = doc
    return schema


def params_object(doc: str, **properties: dict[str, Any]) -> dict[str, Any]:
    """The schema of a method's ``params``: these properties, each optional, nothing else."""
    return {
        "type": "object",
        "description": doc,
        "properties": properties,
        "additionalProperties": False,
    }
