"""A method's parameters, declared once: ``MethodParams``.

Each method declares its parameters as one pydantic model (``FSDSParams``, ``OFSParams``, ...):
name, type, range, default and description in one line per parameter. Everything else is
derived from that declaration:

* the resolution (``resolve``): validation, the defaults, and the rules a field alone cannot
  state (a default that depends on the stream's size, ``k < ell``) in ``complete``;
* the resolved parameters: the model itself, which carries the size it was resolved for
  (``size``) and is what every call of the method takes, and its JSON (``as_params``), which
  the service stores and echoes and which resolves to itself;
* the JSON Schema (``documented_schema``) that the OpenAPI create body, ``GET /v1/methods`` and
  the CLI's ``sift methods`` (``--param`` help) show, with the defaults that hold at every size;
* the messages of a refusal (``InvalidParams``): what was expected, read off the same schema,
  and what came.

A default that depends on the size (or on another parameter) is declared with ``computed`` and
filled in by ``complete``; the schema documents it without a ``default`` (its description says
how it is computed).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from service.errors import InvalidParams
from service.names import ANCHORED_NAME

__all__ = [
    "VIEW_NAME",
    "MethodParams",
    "computed",
    "integer_param",
    "real_param",
]

#: View names, anchored for JSON Schema (the service's rule: ``service.names``).
VIEW_NAME = ANCHORED_NAME


def integer_param(
    name: str, value: Any, minimum: int, maximum: int | None = None, maximum_is: str = ""
) -> int:
    """An integer (not a bool) in ``[minimum, maximum]``; InvalidParams saying the range
    (``maximum_is`` names where the maximum comes from, e.g. ``"n_features="``).

    For arguments of the maths helpers (``kernels``); a method's parameters are declared in its
    ``MethodParams``."""
    bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum_is}{maximum}]"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParams(f"{name} must be an integer {bound}; got {value!r}")
    if int(value) < minimum or (maximum is not None and int(value) > maximum):
        raise InvalidParams(f"{name} must be an integer {bound}; got {int(value)}")
    return int(value)


def real_param(name: str, value: Any) -> float:
    """A finite real number (not a bool); ranges are each caller's to say."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise InvalidParams(f"{name} must be a finite number; got {value!r}")
    return float(value)


def _without_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def computed(description: str, **constraints: Any) -> Any:
    """A parameter whose default is computed (from the size, or from other parameters) by the
    model's ``complete``: absent, it is ``None`` until then; documented without a default."""
    return Field(None, description=description, json_schema_extra=_without_default, **constraints)


class MethodParams(BaseModel):
    """The parameters of one method (a subclass per method declares them as fields).

    Strict: an integer is not a bool or ``2.0``, a number is finite, and a name the model does
    not declare is refused (a typo must not silently fall back to a default).
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    #: The method's name, for messages.
    method: ClassVar[str]
    #: Parameters the service fills in from the selector's shape (OMVFS's ``views``): refused
    #: by nobody, but not listed to users.
    filled_by_service: ClassVar[tuple[str, ...]] = ()
    #: Said after the list of expected names when an unknown one comes.
    unknown_hint: ClassVar[str] = ""

    #: The stream's fixed dimension these parameters were resolved for (``resolve``).
    _size: int = PrivateAttr(default=0)

    @property
    def size(self) -> int:
        """The fixed dimension of the stream these parameters were resolved for: features per
        row for row kinds, samples per column for ``"columns"``, all views' features together
        for ``"views"`` (``Method.resolve_params``)."""
        return self._size

    def complete(self, size: int, stored: bool) -> None:
        """Fill the ``computed`` defaults and check the rules between parameters (raising
        ``InvalidParams``). ``size`` is the stream's fixed dimension (``Method.resolve_params``);
        ``stored``: these are parameters resolved earlier (a parameter added since may default
        differently for selectors created before it)."""

    def omitted(self) -> set[str]:
        """Parameters ``as_params`` leaves out (ones that do not apply to this configuration)."""
        return set()

    @classmethod
    def ordered_fields(cls) -> list[str]:
        """The parameters as users read them: the method's own first (in the order declared),
        then those it shares with other methods (declared by a base class)."""
        own = inspect.get_annotations(cls)
        inherited = [n for n in cls.model_fields if n not in own]
        return [n for n in cls.model_fields if n not in inherited] + inherited

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> Self:
        context = info.context or {}
        self._size = context["size"]
        self.complete(self._size, context.get("stored", False))
        return self

    @classmethod
    def resolve(cls, params: Any, size: int, *, stored: bool = False) -> Self:
        """Validated parameters with every default filled in; ``InvalidParams`` saying what was
        expected and what came."""
        if isinstance(size, bool) or not isinstance(size, Integral) or size < 1:
            raise InvalidParams(f"the size must be an integer >= 1; got {size!r}")
        try:
            return cls.model_validate(params, context={"size": int(size), "stored": stored})
        except ValidationError as exc:
            raise InvalidParams(cls._refusal(params, exc)) from None

    def as_params(self) -> dict[str, Any]:
        """The resolved parameters as JSON (stored with the selector and echoed to users)."""
        return self.model_dump(mode="json", exclude=self.omitted())

    @classmethod
    def documented_schema(cls) -> dict[str, Any]:
        """The JSON Schema of what users may pass: the fields but those the service fills in,
        the defaults that hold at every size, no titles; described by the model's docstring."""
        schema = _untitled(cls.model_json_schema())
        given = schema.get("properties", {})
        properties = {
            name: given[name]
            for name in cls.ordered_fields()
            if name in given and name not in cls.filled_by_service
        }
        return {
            "type": "object",
            "description": schema.get("description", ""),
            "properties": properties,
            "additionalProperties": False,
        }

    # -- refusals ------------------------------------------------------------------------------

    @classmethod
    def _refusal(cls, params: Any, exc: ValidationError) -> str:
        if not isinstance(params, Mapping):
            return f"params must be an object; got {type(params).__name__}"
        errors = exc.errors()
        unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
        if unknown:
            listed = [n for n in cls.ordered_fields() if n not in cls.filled_by_service]
            expected = f"expected some of: {', '.join(listed)}" if listed else "it has none"
            return (
                f"unknown parameter(s) for {cls.method}: {', '.join(map(repr, unknown))}; "
                f"{expected}{cls.unknown_hint}"
            )
        properties = cls.model_json_schema()["properties"]
        wrong: list[str] = []
        for error in errors:
            name = str(error["loc"][0]) if error["loc"] else ""
            if name in properties and name not in wrong:
                wrong.append(name)
        if not wrong:  # not one field's fault (cannot happen with these models; said plainly)
            return f"params are not valid for {cls.method}: {exc.errors()[0]['msg']}"
        return "; ".join(
            f"{name} must be {_expected(properties[name])}; got {params.get(name)!r}"
            for name in wrong
        )


def _untitled(schema: Any) -> Any:
    """``schema`` without pydantic's generated titles (names of properties are kept)."""
    if isinstance(schema, dict):
        return {
            key: (
                {name: _untitled(prop) for name, prop in value.items()}
                if key == "properties"
                else _untitled(value)
            )
            for key, value in schema.items()
            if key != "title"
        }
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    return schema


def _number_text(value: float) -> str:
    if isinstance(value, int) and value >= 2**32 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _expected(schema: Mapping[str, Any]) -> str:
    """What a JSON Schema accepts, said in words (``an integer >= 1``, ``a number in (0, 1]``)."""
    if "anyOf" in schema:
        return ", or ".join(_expected(option) for option in schema["anyOf"])
    kind = schema.get("type")
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    if kind == "null":
        return "null"
    if kind == "boolean":
        return "true or false"
    if kind == "object":
        return "an object {view: " + _expected(schema.get("additionalProperties", {})) + "}"
    noun = "an integer" if kind == "integer" else "a finite number"
    low = ("[", schema["minimum"]) if "minimum" in schema else None
    if "exclusiveMinimum" in schema:
        low = ("(", schema["exclusiveMinimum"])
    high = ("]", schema["maximum"]) if "maximum" in schema else None
    if "exclusiveMaximum" in schema:
        high = (")", schema["exclusiveMaximum"])
    if low and high:
        return f"{noun} in {low[0]}{_number_text(low[1])}, {_number_text(high[1])}{high[0]}"
    if low:
        return f"{noun} {'>=' if low[0] == '[' else '>'} {_number_text(low[1])}"
    if high:
        return f"{noun} {'<=' if high[0] == ']' else '<'} {_number_text(high[1])}"
    return noun
