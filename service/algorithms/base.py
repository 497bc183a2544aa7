"""What every streaming method module provides, so the service can drive any of them alike.

A method is pure numpy/scipy: no Redis, no HTTP, no globals. Its learned state is a flat
mapping of named arrays and scalars (``State``) that the store encodes without pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeAlias

import numpy as np
import scipy.sparse as sp

#: A chunk of rows (samples x features): dense float array or CSR matrix.
Matrix: TypeAlias = np.ndarray | sp.csr_matrix | sp.csr_array
#: Scalars a state may hold next to its arrays (all JSON-representable).
Scalar: TypeAlias = int | float | str | bool | None
#: The learned state of one selector: named arrays and scalars, nothing else.
State: TypeAlias = dict[str, np.ndarray | Scalar]


class StreamingMethod(Protocol):
    """The contract between a method module and the service."""

    #: The name users pass as ``"method"`` when creating a selector.
    name: str

    def resolve_params(self, params: Mapping[str, Any], n_features: int) -> dict[str, Any]:
        """Validate user parameters and fill in defaults.

        Raises ``service.errors.InvalidParams`` with a detail saying what was expected and what
        came. Unknown parameter names are an error too (a typo must not silently use a default).
        The result is JSON-serialisable and is echoed back to the user.
        """
        ...

    def initial_state(self, params: Mapping[str, Any], n_features: int) -> State:
        """The state of a selector that has seen no data."""
        ...

    def update(self, state: State, params: Mapping[str, Any], rows: Matrix) -> State:
        """Fold a chunk of rows into the state; returns a new state, never mutates the input.

        ``rows`` is already validated (2-D, ``n_features`` columns, finite, at least one row).
        """
        ...

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        """The current score of every feature (length ``n_features``), higher is better."""
        ...
