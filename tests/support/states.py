"""Typed reads of one field of a method's state (``service.algorithms.base.State``).

A state maps names to arrays or scalars; a test that reads a field knows which it holds, and
these say so to the type checker by asserting it, so a field of the wrong kind fails the test
with its name instead of an error further on.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def array_field(state: Mapping[str, object], name: str) -> np.ndarray:
    """``state[name]``, an array."""
    value = state[name]
    assert isinstance(value, np.ndarray), f"state field {name!r} is a {type(value).__name__}"
    return value


def number_field(state: Mapping[str, object], name: str) -> float:
    """``state[name]`` as a float: a number, or an array of one (a decoded state's scalars)."""
    value = state[name]
    assert isinstance(value, int | float | np.number | np.ndarray), (
        f"state field {name!r} is a {type(value).__name__}"
    )
    return float(value)
