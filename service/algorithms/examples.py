"""What a method carries for its tests: example selectors of it (River's estimators carry
``_unit_test_params`` for the same reason).

A method declares ``examples`` (``MethodBase.examples``): the creation body of a small
selector of it (its shape and its ``params``) and how many items each example chunk holds.
The test suite derives everything it runs every method with from them and the registry
(``service.algorithms.METHODS``): the conformance checks run each example's ``params`` besides
the defaults, the archive and replay tests create the first example and push its chunks, and
the contract test fills its pool with it. So a method added to the registry is tested without
a line of the tests changing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Example"]


@dataclass(frozen=True)
class Example:
    """A small selector of a method, as its tests create it."""

    #: The shape fields of its creation body (``n_features``, ``n_samples`` or ``views``,
    #: and ``feature_names`` if it names them), as ``service.wire.kinds`` reads them.
    shape: Mapping[str, Any]
    #: Its ``params`` (what a user passes; the method resolves them).
    params: Mapping[str, Any] = field(default_factory=dict)
    #: Rows (or, for feature columns, columns) in each example chunk.
    items: int = 8
    #: The least value of the example chunks (-1; 0 for a method of nonnegative data).
    low: float = -1.0
