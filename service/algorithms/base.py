"""What every streaming method module provides, so the service can drive any of them alike.

A method is pure numpy/scipy: no Redis, no HTTP, no globals. Its learned state is a flat
mapping of named arrays and scalars (``State``) that the store encodes without pickle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from service.algorithms.labels import LabelledRows

#: A chunk of rows (samples x features): dense float array or CSR matrix.
Matrix: TypeAlias = np.ndarray | sp.csr_matrix | sp.csr_array
#: Scalars a state may hold next to its arrays (all JSON-representable).
Scalar: TypeAlias = int | float | str | bool | None
#: The learned state of one selector: named arrays and scalars, nothing else.
State: TypeAlias = dict[str, np.ndarray | Scalar]
#: State fields named ``segment:<id>`` are immutable blobs (a full block of stored columns,
#: say): the applier writes each once as its own Redis key and never again, and they are not
#: part of the state a method receives back. ``<id>`` must always name the same bytes, which a
#: method guarantees by deriving both from the log order. This keeps a commit from rewriting
#: data that only grows.
SEGMENT_PREFIX = "segment:"
#: What one pushed chunk holds. ``"rows"``: new samples over a fixed set of ``n_features``
#: features (``POST .../chunks``). ``"columns"``: new feature columns over a fixed set of
#: ``n_samples`` samples (``POST .../features``), each chunk ``n_samples x c``.
Stream: TypeAlias = Literal["rows", "columns"]


class MethodInfo(Protocol):
    """What the service asks of every method, labelled or not."""

    #: The name users pass as ``"method"`` when creating a selector.
    name: str
    #: Whether chunks are rows (fixed features) or feature columns (fixed samples).
    stream: Stream
    #: The state field holding the score of every feature (read alone for rankings).
    score_field: str
    #: Whether the applier may join pending chunks into one update. A method whose result
    #: depends on chunk boundaries (a buffer of the last s chunks) says no.
    coalesces: bool
    #: Whether every row comes with a class label (``LabelledRows`` chunks, OCFS and IOC).
    labelled: bool

    def resolve_params(self, params: Mapping[str, Any], n_features: int) -> dict[str, Any]:
        """Validate user parameters and fill in defaults.

        ``n_features`` is the fixed size of the stream: features per row for ``"rows"``
        methods, samples per column for ``"columns"`` methods.

        Raises ``service.errors.InvalidParams`` with a detail saying what was expected and what
        came. Unknown parameter names are an error too (a typo must not silently use a default).
        The result is JSON-serialisable and is echoed back to the user.
        """
        ...

    def initial_state(self, params: Mapping[str, Any], n_features: int) -> State:
        """The state of a selector that has seen no data."""
        ...

    def weights(self, state: State, params: Mapping[str, Any]) -> np.ndarray:
        """The current score of every feature seen, higher is better."""
        ...


class StreamingMethod(MethodInfo, Protocol):
    """A method over unlabelled chunks (``labelled = False``)."""

    def update(self, state: State, params: Mapping[str, Any], rows: Matrix) -> State:
        """Fold a chunk into the state; returns a new state, never mutates the input.

        ``rows`` is already validated: finite, not empty, and ``samples x n_features`` for a
        ``"rows"`` method or ``n_samples x new features`` (dense) for a ``"columns"`` method.
        """
        ...


class LabelledMethod(MethodInfo, Protocol):
    """A method over labelled row chunks (``labelled = True``)."""

    def update(self, state: State, params: Mapping[str, Any], rows: LabelledRows) -> State:
        """Fold a chunk of labelled rows into the state (a new state; the input is untouched)."""
        ...


#: Any registered method.
Method: TypeAlias = "StreamingMethod | LabelledMethod"
