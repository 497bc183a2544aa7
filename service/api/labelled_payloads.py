"""Labelled row chunks (OCFS, IOC): request bodies to validated ``LabelledRows``.

Supported bodies:

* ``application/json``: ``{"rows": [[...], ...], "labels": [...]}`` or a CSR object
  ``{"shape", "indptr", "indices", "data", "labels"}``;
* ``application/x-npz`` written by ``numpy.savez`` with ``labels`` (1-D, integers or strings)
  and either ``rows`` (2-D) or the CSR parts ``data``, ``indices``, ``indptr``, ``shape``.

A label is an integer or a string of 1-256 characters, one per row. ``.npy`` cannot carry
labels. Everything is validated before anything is written; every rejection says what was
expected and what came.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.algorithms.base import Matrix
from service.algorithms.labels import Label, LabelledRows, labelled
from service.api.payloads import (
    JSON,
    MAX_NAME_LENGTH,
    NPY,
    NPZ,
    arrays_from_npz,
    build_csr,
    csr_from_json,
    dense_from_json,
    numeric_array,
    parse_json,
    validate_rows,
)
from service.errors import InvalidInput, UnsupportedMediaType

#: Most distinct classes one chunk may introduce (a selector keeps a row of sums per class).
MAX_CLASSES_PER_CHUNK = 10_000
_CSR_KEYS = ("shape", "indptr", "indices", "data")
_INT64 = np.iinfo(np.int64)


def decode_labelled_rows(
    body: bytes, media_type: str, n_features: int, max_bytes: int
) -> LabelledRows:
    """Decode and fully validate a chunk of labelled rows for ``n_features`` features."""
    if not body:
        raise InvalidInput("empty body: expected rows with one label each")
    if media_type == JSON:
        rows, raw_labels = _from_json(parse_json(body))
    elif media_type == NPZ:
        rows, raw_labels = _from_npz(arrays_from_npz(body, max_bytes))
    elif media_type == NPY:
        raise UnsupportedMediaType(
            "a .npy holds one array and cannot carry labels: send application/x-npz "
            "(numpy.savez with rows and labels) or JSON with rows and labels"
        )
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    rows = validate_rows(rows, n_features)
    labels = validate_labels(raw_labels, rows.shape[0])
    return labelled(rows, labels)


def _from_json(document: Any) -> tuple[Matrix, Any]:
    if not isinstance(document, dict) or "labels" not in document:
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise InvalidInput(
            'this selector needs labelled rows: expected {"rows": [[...], ...], "labels": '
            f"[...]}} or a CSR object with labels; got {got}"
        )
    if "rows" in document:
        unknown = sorted(set(document) - {"rows", "labels"})
        rows: Matrix = dense_from_json(document["rows"], "rows")
    else:
        unknown = sorted(set(document) - {"labels", *_CSR_KEYS})
        rows = csr_from_json(document)
    if unknown:
        raise InvalidInput(f"unexpected keys {unknown} next to rows and labels")
    return rows, document["labels"]


def _from_npz(arrays: dict[str, Any]) -> tuple[Matrix, Any]:
    if "labels" not in arrays:
        raise InvalidInput(
            f"expected a labels array in the .npz next to the rows; got arrays {sorted(arrays)}"
        )
    if "rows" in arrays:
        return numeric_array(arrays["rows"]), arrays["labels"]
    missing = [key for key in _CSR_KEYS if key not in arrays]
    if missing:
        raise InvalidInput(
            "expected 'rows' (2-D) or the CSR parts data, indices, indptr and shape next to "
            f"'labels'; got arrays {sorted(arrays)}"
        )
    shape = np.asarray(arrays["shape"])
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise InvalidInput(f"'shape' must be two non-negative integers; got {shape.tolist()}")
    parts = {}
    for key, kinds in (("data", "biuf"), ("indices", "iu"), ("indptr", "iu")):
        part = np.asarray(arrays[key])
        if part.ndim != 1 or part.dtype.kind not in kinds:
            raise InvalidInput(f"CSR '{key}' must be a 1-D numeric array; got {part.dtype}")
        parts[key] = part
    rows = build_csr(
        parts["data"], parts["indices"], parts["indptr"], (int(shape[0]), int(shape[1]))
    )
    return rows, arrays["labels"]


def validate_labels(raw: Any, n_rows: int) -> list[Label]:
    """One label per row: integers (64-bit) or strings of 1-256 characters."""
    if isinstance(raw, np.ndarray):
        if raw.ndim != 1:
            raise InvalidInput(f"labels must be a 1-D array; got shape {raw.shape}")
        if raw.dtype.kind not in "iuU":
            raise InvalidInput(f"labels must be integers or strings; got dtype {raw.dtype}")
        raw = raw.tolist()
    if not isinstance(raw, list):
        raise InvalidInput(f"labels must be a list (one per row); got {type(raw).__name__}")
    if len(raw) != n_rows:
        raise InvalidInput(f"expected {n_rows} labels (one per row); got {len(raw)}")
    for row, label in enumerate(raw):
        if isinstance(label, bool) or not isinstance(label, int | str):
            shown = repr(label)[:40]
            raise InvalidInput(
                f"labels must be integers or strings; label {row} is {shown} "
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
    return raw
