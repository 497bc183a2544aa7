"""Multi-view rows (chunk kind ``"views"``): the same rows of every view.

``application/json`` ``{"views": {"<view>": <rows or CSR object>, ...}}`` or
``application/x-npz`` written by ``numpy.savez`` with one 2-D array per view, named after it.
Every view present (and no other), the same rows, its own width, values as
``service.wire.rows`` requires them and nonnegative (NMF).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import Inconsistent, InvalidInput, SelectorMismatch, UnsupportedMediaType
from service.wire.arrays import read_npz
from service.wire.media import JSON, NPZ, parse_json
from service.wire.rows import first_offending, is_rows_document, rows_from_json, validate_rows


def decode_views(
    body: bytes, media_type: str, views: list[tuple[str, int]], max_bytes: int
) -> Matrix:
    """Decode and validate a multi-view chunk; the views side by side, in ``views`` order.

    Every view must be present (and no other), have the same rows, its own number of
    features, values as ``validate_rows`` requires and nonnegative (NMF). CSR if any view came
    sparse.
    """
    if not body:
        raise InvalidInput("empty body: expected a chunk with one matrix per view")
    if media_type == JSON:
        document = parse_json(body)
        if not isinstance(document, dict) or not isinstance(document.get("views"), dict):
            wanted = 'expected a JSON object {"views": {"<view>": <rows>, ...}}'
            if is_rows_document(document):
                raise SelectorMismatch(f"this multi-view selector takes every view: {wanted}")
            raise InvalidInput(wanted)
        parts: dict[str, Any] = document["views"]
        decode: Callable[[Any, int], Matrix] = rows_from_json
    elif media_type == NPZ:
        parts = read_npz(body, max_bytes)
        decode = _dense_view
    else:
        raise UnsupportedMediaType(
            f"a multi-view chunk is application/json or application/x-npz; got '{media_type}'"
        )
    expected = [name for name, _ in views]
    missing = [name for name in expected if name not in parts]
    extra = sorted(set(parts) - set(expected))
    if missing or extra:
        raise SelectorMismatch(
            f"expected exactly the views {expected}; missing {missing}, unexpected {extra}"
        )
    matrices = []
    for name, dim in views:
        try:
            rows = validate_rows(decode(parts[name], dim), dim)
        except InvalidInput as exc:
            raise type(exc)(f"view '{name}': {exc.detail}") from None
        found = first_offending(rows, lambda values: values >= 0)
        if found is not None:
            value, row, col = found
            raise InvalidInput(
                f"view '{name}' must be nonnegative (NMF); got {value} at row {row}, column {col}"
            )
        matrices.append(rows)
    counts = {name: m.shape[0] for (name, _), m in zip(views, matrices, strict=True)}
    if len(set(counts.values())) > 1:
        raise Inconsistent(f"every view must have the same rows; got row counts {counts}")
    if any(sp.issparse(m) for m in matrices):
        return sp.hstack([sp.csr_matrix(m) for m in matrices], format="csr")
    return np.hstack([np.asarray(m, dtype=np.float64) for m in matrices])


def _dense_view(array: np.ndarray, _n_features: int) -> np.ndarray:
    """A view of a ``numpy.savez`` multi-view chunk (``read_npz`` already made it numeric)."""
    return array
