"""Labelled row chunks (OCFS, IOC): request bodies to validated ``LabelledRows``.

Supported bodies:

* ``application/json``: ``{"rows": [[...], ...], "labels": [...]}`` or a CSR object
  ``{"shape", "indptr", "indices", "data", "labels"}``;
* ``application/x-npz`` written by ``numpy.savez`` with ``labels`` (1-D, integers or strings)
  and either ``rows`` (2-D) or the CSR parts ``data``, ``indices``, ``indptr``, ``shape``; read
  by ``service.wire.arrays.read_npz`` (never ``np.load``, never pickle);
* ``text/csv`` and ``application/vnd.apache.arrow.stream`` (``service.wire.tables``): named
  columns, one of which holds the labels, named by the request (``?labels=<column>``).

A label is an integer or a string of 1-256 characters, one per row. ``.npy`` cannot carry
labels. Rows pass the same checks as unlabelled ones (``service.wire.rows``: sparse parts
before scipy sees them, values finite and within ``MAX_ABS_VALUE``). Everything is validated
before anything is written; every rejection says what was expected and what came.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from service.algorithms.base import Matrix
from service.algorithms.labels import Label, LabelledRows, labelled
from service.errors import Inconsistent, InvalidInput, SelectorMismatch, UnsupportedMediaType, shown
from service.wire.arrays import read_npz
from service.wire.media import (
    JSON,
    NPY,
    NPZ,
    TABLE_MEDIA_TYPES,
    parse_json,
    whole_floats_as_ints,
)
from service.wire.names import (
    FEATURE_NAMES,
    MAX_NAME_LENGTH,
    WidthMismatch,
    column_order,
    in_selector_order,
    names_given,
    refuse_by_names,
    require_width,
)
from service.wire.rows import (
    csr_from_json,
    dense_from_json,
    is_rows_document,
    numeric_array,
    sparse_from_arrays,
    validate_rows,
)
from service.wire.tables import read_table

#: Most distinct classes one chunk may introduce (a selector keeps a row of sums per class).
MAX_CLASSES_PER_CHUNK = 10_000
_CSR_KEYS = ("shape", "indptr", "indices", "data")
_INT64 = np.iinfo(np.int64)


def decode_labelled_rows(
    body: bytes,
    media_type: str,
    n_features: int,
    max_bytes: int,
    selector_names: Sequence[str] | None = None,
    labels: str | None = None,
) -> tuple[LabelledRows, list[str] | None]:
    """Decode and fully validate a chunk of labelled rows for ``n_features`` features (named
    ``selector_names``, if the selector has names); the chunk, with its rows in the selector's
    column order, and the names it gave its columns (None: positional). ``labels`` names the
    label column of a table body (and only of one)."""
    names: list[str] | None
    if media_type in TABLE_MEDIA_TYPES:
        if labels is None:
            raise SelectorMismatch(
                f"this selector needs labelled rows: a {media_type} chunk names the column "
                "that holds the labels with the labels parameter (?labels=<column>); got none"
            )
        table = read_table(body, media_type, labels, max_bytes)
        rows, raw_labels, names = table.values, table.labels, table.names
        order = column_order(names, selector_names, n_features)
    elif labels is not None:
        # Each valid alone, the parameter and the body contradict each other.
        raise Inconsistent(
            f"labels={labels!r} names the label column of a text/csv or Arrow body; a JSON or "
            f".npz chunk carries its labels itself ('labels'); got {media_type}"
        )
    elif not body:
        raise InvalidInput("empty body: expected rows with one label each")
    elif media_type == JSON:
        document = parse_json(body)
        try:
            rows, raw_labels = _from_json(document, n_features)  # first: is it labelled rows?
        except WidthMismatch:
            refuse_by_names(document.get(FEATURE_NAMES), selector_names, n_features)
            raise
        names = names_given(document.get(FEATURE_NAMES))
        order = column_order(names, selector_names, n_features)
    elif media_type == NPZ:
        # Labels may be strings; rows and CSR parts are checked to be numeric below.
        arrays = read_npz(body, max_bytes, allow_strings=True)
        raw_names = arrays.pop(FEATURE_NAMES, None)
        try:
            rows, raw_labels = _from_npz(arrays, n_features)
        except WidthMismatch:
            refuse_by_names(raw_names, selector_names, n_features)
            raise
        names = names_given(raw_names)
        order = column_order(names, selector_names, n_features)
    elif media_type == NPY:
        raise UnsupportedMediaType(
            "a .npy holds one array and cannot carry labels: send application/x-npz "
            "(numpy.savez with rows and labels) or JSON with rows and labels"
        )
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    require_width(names, rows)
    rows = in_selector_order(validate_rows(rows, n_features), order)
    return labelled(rows, validate_labels(raw_labels, rows.shape[0])), names


def _from_json(document: Any, n_features: int) -> tuple[Matrix, Any]:
    if not isinstance(document, dict) or "labels" not in document:
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        # Rows without labels (or another method's chunk: views, feature columns) are fine
        # chunks for other selectors.
        fits_another = is_rows_document(document) or (
            isinstance(document, dict) and ("views" in document or "columns" in document)
        )
        raise (SelectorMismatch if fits_another else InvalidInput)(
            'this selector needs labelled rows: expected {"rows": [[...], ...], "labels": '
            f"[...]}} or a CSR object with labels; got {got}"
        )
    if "rows" in document:
        unknown = sorted(set(document) - {"rows", "labels", FEATURE_NAMES})
        rows: Matrix = dense_from_json(document["rows"], "rows")
    else:
        unknown = sorted(set(document) - {"labels", FEATURE_NAMES, *_CSR_KEYS})
        rows = csr_from_json({k: v for k, v in document.items() if k in _CSR_KEYS}, n_features)
    if unknown:
        raise InvalidInput(f"unexpected keys {unknown} next to rows and labels")
    return rows, document["labels"]


def _from_npz(arrays: dict[str, np.ndarray], n_features: int) -> tuple[Matrix, Any]:
    if "labels" not in arrays:
        raise InvalidInput(
            f"expected a labels array in the .npz next to the rows; got arrays {sorted(arrays)}"
        )
    labels = arrays.pop("labels")
    if "rows" in arrays:
        if len(arrays) > 1:
            raise InvalidInput(
                f"expected 'rows' and 'labels' only; got also {sorted(set(arrays) - {'rows'})}"
            )
        return numeric_array(arrays["rows"]), labels
    missing = [key for key in _CSR_KEYS if key not in arrays]
    if missing:
        raise InvalidInput(
            "expected 'rows' (2-D) or the CSR parts data, indices, indptr and shape next to "
            f"'labels'; got arrays {sorted([*arrays, 'labels'])}"
        )
    return sparse_from_arrays("csr", arrays, n_features), labels


def validate_labels(raw: Any, n_rows: int) -> list[Label]:
    """One label per row: integers (64-bit) or strings of 1-256 characters."""
    if isinstance(raw, np.ndarray):
        if raw.ndim != 1:
            raise InvalidInput(f"labels must be a 1-D array; got shape {raw.shape}")
        if raw.dtype.kind not in "iuUS":
            raise InvalidInput(f"labels must be integers or strings; got dtype {raw.dtype}")
        raw = raw.tolist()
        if raw and isinstance(raw[0], bytes):
            raw = _decoded(raw)
    if not isinstance(raw, list):
        raise InvalidInput(f"labels must be a list (one per row); got {type(raw).__name__}")
    raw = whole_floats_as_ints(raw)  # JSON's 2.0 is the integer label 2
    if len(raw) != n_rows:
        raise Inconsistent(f"expected {n_rows} labels (one per row); got {len(raw)}")
    for row, label in enumerate(raw):
        if isinstance(label, bool) or not isinstance(label, int | str):
            raise InvalidInput(
                f"labels must be integers or strings; label {row} is {shown(label)} "
                f"({type(label).__name__})"
            )
        if isinstance(label, int) and not _INT64.min <= label <= _INT64.max:
            raise InvalidInput(f"integer labels must fit 64 bits; label {row} is {label}")
        if isinstance(label, str) and not 1 <= len(label) <= MAX_NAME_LENGTH:
            raise InvalidInput(
                f"string labels must have 1-{MAX_NAME_LENGTH} characters; label {row} has "
                f"{len(label)}"
            )
    distinct = len({(type(label), label) for label in raw})
    if distinct > MAX_CLASSES_PER_CHUNK:
        raise InvalidInput(
            f"a chunk may bring at most {MAX_CLASSES_PER_CHUNK} classes; got {distinct}"
        )
    return cast(list[Label], raw)


def _decoded(labels: list[bytes]) -> list[str]:
    """Byte-string labels (numpy ``S`` arrays) as the strings they spell, in UTF-8."""
    try:
        return [label.decode("utf-8") for label in labels]
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"byte-string labels must be UTF-8; got {exc.object[:40]!r}") from None
