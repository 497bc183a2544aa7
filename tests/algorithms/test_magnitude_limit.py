"""Every method stays finite on values at the magnitude limit the API enforces.

``service.wire.rows.MAX_ABS_VALUE`` is chosen so that no method's arithmetic overflows:
these tests feed each method chunks whose values reach +-MAX_ABS_VALUE (both signs where the
method allows them, several chunks, hundreds of rows or columns) and require every float in
the resulting state, and the weights, to be finite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from service.algorithms import get_method
from service.algorithms.base import MAX_ABS_VALUE, State
from service.algorithms.labels import labelled

#: Width of every chunk: features per row, or samples per column.
M = 50
CHUNKS = 3
#: Rows per chunk (row methods) or columns per chunk (column methods).
PER_CHUNK = 120


def extreme(rng: np.random.Generator, shape: tuple[int, int], signed: bool) -> np.ndarray:
    """Values at the limit: about a third exactly +-MAX_ABS_VALUE, the rest within a factor 10."""
    values = MAX_ABS_VALUE * rng.uniform(0.1, 1.0, size=shape)
    values[rng.random(shape) < 0.35] = MAX_ABS_VALUE
    if signed:
        values *= rng.choice([-1.0, 1.0], size=shape)
    return values


def floats_of(state: State) -> Iterator[tuple[str, np.ndarray]]:
    """Every float array and float scalar of a state, by field name."""
    for key, value in state.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            yield key, value
        elif isinstance(value, float):
            yield key, np.asarray(value)


CASES: list[tuple[str, dict[str, object], bool, bool]] = [
    # (method, params, signed values, labelled)
    ("fsds", {"normalize_rows": True}, True, False),
    ("fsds", {"normalize_rows": False}, True, False),
    ("fsds", {"kernel": "gaussian"}, True, False),
    ("ofs", {"ridge": 0.0}, True, False),
    ("ofs", {"ridge": 1.0}, True, False),
    ("iqrp", {}, True, False),
    ("omvfs", {"views": {"a": 30, "b": 20}, "normalize_rows": False}, False, False),
    ("ocfs", {}, True, True),
    ("ioc", {"n_components": 3}, True, True),
]


@pytest.mark.parametrize(
    ("name", "params", "signed", "is_labelled"),
    CASES,
    ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items() if k != 'views')}" for c in CASES],
)
def test_values_at_the_limit_keep_every_state_finite(
    name: str, params: dict[str, Any], signed: bool, is_labelled: bool
) -> None:
    method: Any = get_method(name)
    resolved = method.resolve_params(params, M)
    state = method.initial_state(resolved)
    rng = np.random.default_rng(7)
    for _ in range(CHUNKS):
        if method.chunk_kind == "columns":
            chunk: Any = extreme(rng, (M, PER_CHUNK), signed)
        else:
            chunk = extreme(rng, (PER_CHUNK, M), signed)
        if is_labelled:
            chunk = labelled(chunk, [int(c) for c in rng.integers(0, 4, size=PER_CHUNK)])
        state = method.update(state, resolved, chunk)
        for key, values in floats_of(state):
            assert np.isfinite(values).all(), f"{name}: state field {key!r} is not finite"
    weights = method.weights(state, resolved)
    assert weights.size and np.isfinite(weights).all(), f"{name}: weights are not finite"
