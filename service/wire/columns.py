"""Feature columns (chunk kind ``"columns"``): new features over a selector's fixed samples.

``application/json`` ``{"columns": [[...n values...], ...], "names": [...optional...]}`` or
``application/x-npy`` (``n x c``, or 1-D for one column). Values as ``service.wire.rows``
requires them; names unique, 1-256 characters.
"""

from __future__ import annotations

import numpy as np

from service.errors import InvalidInput, SelectorMismatch, UnsupportedMediaType
from service.wire.arrays import read_npy
from service.wire.media import JSON, NPY, parse_json
from service.wire.names import validate_names
from service.wire.rows import dense_from_json, first_offending, value_problem, within_limit


def decode_columns(
    body: bytes, media_type: str, n_samples: int
) -> tuple[np.ndarray, list[str] | None]:
    """Decode and fully validate new feature columns: ``(n_samples x c, names or None)``."""
    if not body:
        raise InvalidInput("empty body: expected at least one feature column")
    names: list[str] | None = None
    if media_type == JSON:
        document = parse_json(body)
        if not isinstance(document, dict) or "columns" not in document:
            got = sorted(document) if isinstance(document, dict) else type(document).__name__
            raise InvalidInput(
                f'expected a JSON object {{"columns": [[...], ...], "names": [...]}}; got {got}'
            )
        unknown = sorted(set(document) - {"columns", "names"})
        if unknown:
            raise InvalidInput(f"unexpected keys {unknown}; expected 'columns' and 'names'")
        columns = dense_from_json(document["columns"], "columns", "column").T
        names = validate_names(document.get("names"), columns.shape[1], "names", "column")
    elif media_type == NPY:
        columns = read_npy(body)
        if columns.ndim == 1:
            columns = columns.reshape(-1, 1)
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    if columns.ndim != 2:
        raise InvalidInput(
            f"expected a 2-D array of n_samples={n_samples} x new features; got {columns.ndim}-D"
        )
    if columns.shape[0] != n_samples:
        raise SelectorMismatch(
            f"expected columns of n_samples={n_samples} values; got {columns.shape[0]}"
        )
    if columns.shape[1] == 0:
        raise InvalidInput("no columns: expected at least one feature column")
    values = np.require(columns, dtype=np.float64, requirements=["C", "A"])
    found = first_offending(values, within_limit)
    if found is not None:
        value, sample, column = found
        raise InvalidInput(f"{value_problem(value)} in column {column} at sample {sample}")
    return values, names
