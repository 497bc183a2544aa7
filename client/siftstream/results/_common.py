"""What every answer shares: ``Answer``, whose ``from_json`` is one converter for them all.

An answer is a frozen dataclass; its fields and their type hints are its declaration, and
``from_json`` builds it from the service's JSON by those hints alone: nested answers, lists,
dicts, tuples, ``X | None``, ``Literal``, numpy arrays (``field(metadata=array(dtype))``).
A field the answer names differently says so (``field(metadata=wire("from"))``); a field
absent or null in the answer takes its default (None for an optional one without a default);
a field named ``raw`` keeps the JSON the answer came from. The few answers whose fields are not
one-to-one with the JSON (a pending receipt has no version yet; a created key is the key it
describes plus its secret) say so in ``wire_doc``, a reshaping of the JSON before conversion.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import (
    Any,
    ClassVar,
    Generic,
    Literal,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import numpy as np

Json = dict[str, Any]

T = TypeVar("T")


def wire(name: str) -> dict[str, Any]:
    """A field's metadata: the answer names it ``name``."""
    return {"wire": name}


def array(dtype: type) -> dict[str, Any]:
    """A numpy field's metadata: the array's dtype (float64 unless it says)."""
    return {"dtype": dtype}


def _seen(rows_seen: int | None, features_seen: int | None) -> int:
    return rows_seen if rows_seen is not None else (features_seen or 0)


_Convert = Callable[[Any], Any]


def _converter(hint: Any, meta: Any, typevars: dict[Any, Any]) -> _Convert:
    """How one value of type ``hint`` reads from JSON."""
    if isinstance(hint, TypeVar):
        hint = typevars[hint]
    origin = get_origin(hint)
    args = get_args(hint)
    if hint is Any:
        return lambda value: value
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) > 1:  # int | str: the value as it came, if it is one of them
            scalars = tuple(options)
            return lambda value: value if isinstance(value, scalars) else str(value)
        read = _converter(options[0], meta, typevars)
        if len(options) == len(args):
            return read
        return lambda value: None if value is None else read(value)
    if origin is Literal:
        return lambda value: value
    if origin is list:
        item = _converter(args[0], meta, typevars)
        return lambda value: [item(v) for v in value]
    if origin is dict:
        key, item = _converter(args[0], meta, typevars), _converter(args[1], meta, typevars)
        return lambda value: {key(k): item(v) for k, v in value.items()}
    if origin is tuple:
        parts = [_converter(a, meta, typevars) for a in args]
        return lambda value: tuple(part(v) for part, v in zip(parts, value, strict=True))
    if hint is np.ndarray:
        dtype = meta.get("dtype", np.float64)
        return lambda value: np.asarray(value, dtype=dtype)
    if dataclasses.is_dataclass(hint):
        return lambda value: convert(hint, value)  # type: ignore[arg-type]
    if hint in (int, float, str, bool):
        return hint  # type: ignore[no-any-return]
    raise TypeError(f"an answer's field of type {hint!r} has no conversion")


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    read: _Convert
    has_default: bool
    optional: bool


_PLANS: dict[type, list[_Field]] = {}


def _plan(cls: type) -> list[_Field]:
    """The fields of ``cls`` and how each reads, worked out once per class."""
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    typevars: dict[Any, Any] = {}
    for base in getattr(cls, "__orig_bases__", ()):
        origin = get_origin(base)
        if origin is not None and hasattr(origin, "__parameters__"):
            typevars.update(zip(origin.__parameters__, get_args(base), strict=False))
    hints = get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        plan.append(
            _Field(
                name=f.name,
                key=f.metadata.get("wire", f.name),
                read=_converter(hint, f.metadata, typevars),
                has_default=f.default is not dataclasses.MISSING
                or f.default_factory is not dataclasses.MISSING,
                optional=type(None) in get_args(hint),
            )
        )
    _PLANS[cls] = plan
    return plan


def convert(cls: type[T], doc: Json) -> T:
    """The answer ``cls`` that the JSON ``doc`` holds."""
    shaped = cls.wire_doc(doc) if issubclass(cls, Answer) else doc
    values: dict[str, Any] = {}
    for f in _plan(cls):
        if f.name == "raw":
            values["raw"] = doc
            continue
        value = shaped.get(f.key)
        if value is None:
            if f.has_default:
                continue
            if not f.optional:
                raise ValueError(f"{cls.__name__}: the answer has no {f.key!r}")
            values[f.name] = None
            continue
        values[f.name] = f.read(value)
    return cls(**values)


class Answer:
    """Base of the answers: ``from_json`` reads one from the service's JSON."""

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        """The JSON as the fields read it (the answer itself, unless a class says)."""
        return doc

    @classmethod
    def from_json(cls, doc: Json) -> Self:
        return convert(cls, doc)


Item = TypeVar("Item")


@dataclass(frozen=True)
class Page(Answer, Generic[Item]):
    """One page of a listing: its ``items``, and ``next``, the ``after`` of the following page
    (None on the last).

    A listing's page says which key of the answer holds its items (``items_key``: the answer
    names them, ``"selectors"``, ``"streams"``).
    """

    items: list[Item]
    next: str | None

    #: The key of the answer that holds the items.
    items_key: ClassVar[str]

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        return {"items": doc[cls.items_key], "next": doc.get("next")}
