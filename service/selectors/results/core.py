"""What every answer shares: ``Result`` (rendered with orjson, numpy arrays as they are) and
the array types of the documented schema."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeAlias

import numpy as np
import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
)


def _checked(ndim: int, dtype: type) -> Any:
    def check(value: Any) -> np.ndarray:
        array: np.ndarray = np.asarray(value, dtype=dtype)
        if array.ndim != ndim:
            raise ValueError(f"expected a {ndim}-D array; got {array.ndim}-D")
        return array

    return PlainValidator(check)


_AS_LIST = PlainSerializer(lambda a: a.tolist(), when_used="json")


_NUMBER = {"type": "number"}


#: A vector of floats, a matrix of floats, a vector of integers: carried as numpy arrays.
Floats: TypeAlias = Annotated[
    np.ndarray, _checked(1, float), _AS_LIST, WithJsonSchema({"type": "array", "items": _NUMBER})
]


FloatMatrix: TypeAlias = Annotated[
    np.ndarray,
    _checked(2, float),
    _AS_LIST,
    WithJsonSchema({"type": "array", "items": {"type": "array", "items": _NUMBER}}),
]


Integers: TypeAlias = Annotated[
    np.ndarray,
    _checked(1, int),
    _AS_LIST,
    WithJsonSchema({"type": "array", "items": {"type": "integer"}}),
]


class Result(BaseModel):
    """Base of every answer: rendered without the optional fields it does not have (unless it
    ``shows_nulls``: every field said, null where there is nothing)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    shows_nulls: ClassVar[bool] = False

    def render(self) -> bytes:
        return orjson.dumps(
            self.model_dump(exclude_none=not self.shows_nulls, by_alias=True),
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
