"""Multi-view rows (chunk kind ``"views"``): the same rows of every view.

``application/json`` ``{"views": {"<view>": <rows or CSR object>, ...}}`` (optionally with
``"feature_names": {"<view>": [...], ...}``, matched to the selector's) or
``application/x-npz`` written by ``numpy.savez`` with one 2-D array per view, named after it.
Every view present (and no other), the same rows, its own width, values as
``service.wire.rows`` requires them and nonnegative (NMF).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import Inconsistent, InvalidInput, SelectorMismatch, UnsupportedMediaType
from service.wire.arrays import read_npz
from service.wire.media import JSON, NPZ, parse_json
from service.wire.names import (
    FEATURE_NAMES,
    column_order,
    in_selector_order,
    names_given,
    require_width,
    validate_names,
)
from service.wire.rows import first_offending, is_rows_document, rows_from_json, validate_rows


def decode_views(
    body: bytes,
    media_type: str,
    views: list[tuple[str, int]],
    max_bytes: int,
    selector_names: Sequence[str] | None = None,
    labels: str | None = None,
) -> tuple[Matrix, list[str] | None]:
    """Decode and validate a multi-view chunk; the views side by side, in ``views`` order, and
    the names the chunk gave the features of every view (flat, in view order; None if it gave
    none).

    Every view must be present (and no other), have the same rows, its own number of
    features, values as ``validate_rows`` requires and nonnegative (NMF). CSR if any view came
    sparse. A JSON chunk may name every view's columns (``"feature_names": {"<view>": [...]}``):
    each view's are matched to the selector's names for that view (``service.wire.names``).
    """
    if labels is not None:
        raise SelectorMismatch(
            f"labels={labels!r} names a label column; labels apply to labelled methods (ocfs, "
            "ioc) and this multi-view selector takes every view's rows"
        )
    if not body:
        raise InvalidInput("empty body: expected a chunk with one matrix per view")
    parts, decode, named = _parts(body, media_type, views, max_bytes)
    expected = [name for name, _ in views]
    missing = [name for name in expected if name not in parts]
    extra = sorted(set(parts) - set(expected))
    if missing or extra:
        raise SelectorMismatch(
            f"expected exactly the views {expected}; missing {missing}, unexpected {extra}"
        )
    matrices = []
    offset = 0
    for name, dim in views:
        ours = None if selector_names is None else selector_names[offset : offset + dim]
        offset += dim
        matrices.append(_view(name, dim, decode, parts[name], named[name], ours))
    counts = {name: m.shape[0] for (name, _), m in zip(views, matrices, strict=True)}
    if len(set(counts.values())) > 1:
        raise Inconsistent(f"every view must have the same rows; got row counts {counts}")
    given = [named[name] for name, _ in views]
    flat = None if all(n is None for n in given) else [n for names in given for n in names or ()]
    if flat is not None and any(n is None for n in given):
        raise Inconsistent(f"{FEATURE_NAMES} must name every view's columns or none")
    if any(sp.issparse(m) for m in matrices):
        return sp.hstack([sp.csr_matrix(m) for m in matrices], format="csr"), flat
    return np.hstack([np.asarray(m, dtype=np.float64) for m in matrices]), flat


def _parts(
    body: bytes, media_type: str, views: list[tuple[str, int]], max_bytes: int
) -> tuple[dict[str, Any], Callable[[Any, int], Matrix], dict[str, list[str] | None]]:
    """The views a body holds by name, how one of them becomes a matrix, and the names the
    body gives each view's columns (None: none)."""
    if media_type == JSON:
        document = parse_json(body)
        if not isinstance(document, dict) or not isinstance(document.get("views"), dict):
            wanted = 'expected a JSON object {"views": {"<view>": <rows>, ...}}'
            if is_rows_document(document):
                raise SelectorMismatch(f"this multi-view selector takes every view: {wanted}")
            raise InvalidInput(wanted)
        named = _names_of_views(document.get(FEATURE_NAMES), views)
        return document["views"], rows_from_json, named
    if media_type == NPZ:
        return read_npz(body, max_bytes), _dense_view, {view: None for view, _ in views}
    # A table (text/csv, Arrow) has one header: it cannot say which columns are which view.
    raise UnsupportedMediaType(
        "a multi-view chunk is application/json or application/x-npz (one matrix per "
        f"view); got '{media_type}'"
    )


def _view(
    name: str,
    dim: int,
    decode: Callable[[Any, int], Matrix],
    part: Any,
    named: list[str] | None,
    ours: Sequence[str] | None,
) -> Matrix:
    """View ``name`` (``part`` of the body, ``decode``d) validated: ``dim`` nonnegative
    columns, in the selector's order; ``named``: the names the chunk gave them, ``ours``: the
    selector's."""
    try:
        order = column_order(named, ours, dim)
        raw = decode(part, dim)
        require_width(named, raw)
        rows = in_selector_order(validate_rows(raw, dim), order)
    except InvalidInput as exc:
        raise type(exc)(f"view '{name}': {exc.detail}") from None
    found = first_offending(rows, lambda values: values >= 0)
    if found is not None:
        value, row, col = found
        raise InvalidInput(
            f"view '{name}' must be nonnegative (NMF); got {value} at row {row}, column {col}"
        )
    return rows


def _names_of_views(raw: Any, views: list[tuple[str, int]]) -> dict[str, list[str] | None]:
    """The names a JSON multi-view chunk gives each view's columns (``{"<view>": [...]}``)."""
    if raw is None:
        return {view: None for view, _ in views}
    if not isinstance(raw, dict) or set(raw) != {view for view, _ in views}:
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise Inconsistent(
            f"{FEATURE_NAMES} of a multi-view chunk must be an object with a list for every view "
            f"{[view for view, _ in views]}; got {got}"
        )
    return {view: names_given(raw[view], f"view '{view}': ") for view, _ in views}


def _dense_view(array: np.ndarray, _n_features: int) -> np.ndarray:
    """A view of a ``numpy.savez`` multi-view chunk (``read_npz`` already made it numeric)."""
    return array


def validate_view_names(names: Any, views: Sequence[tuple[str, int]]) -> list[str] | None:
    """Optional ``{"<view>": [names...]}``, flattened in view order (stored like any names)."""
    if names is None:
        return None
    if not isinstance(names, dict) or set(names) != {view for view, _ in views}:
        got = sorted(names) if isinstance(names, dict) else type(names).__name__
        error = Inconsistent if isinstance(names, dict) else InvalidInput
        raise error(
            f"feature_names of a multi-view selector must be an object with a list for every "
            f"view {[view for view, _ in views]}; got {got}"
        )
    flat: list[str] = []
    for view, dim in views:
        flat += validate_names(names[view], dim, f"feature_names['{view}']", "feature") or []
    return flat
