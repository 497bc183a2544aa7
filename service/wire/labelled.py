"""Row chunks with one value per row beside the rows: labelled rows (the class-statistics
methods) to validated ``LabelledRows``, rows with a target (F-regression, correlation) to
``TargetRows``. Both sides (``LABELS``, ``TARGETS``) come the same ways:

* ``application/json``: ``{"rows": [[...], ...], "labels": [...]}`` (``"targets"``) or a CSR
  object ``{"shape", "indptr", "indices", "data", "labels"}``;
* ``application/x-npz`` written by ``numpy.savez`` with ``labels`` (``targets``, or ``y``: 1-D)
  and either ``rows`` (2-D) or the CSR parts ``data``, ``indices``, ``indptr``, ``shape``; read
  by ``service.wire.arrays.read_npz`` (never ``np.load``, never pickle);
* ``text/csv`` and ``application/vnd.apache.arrow.stream`` (``service.wire.tables``): named
  columns, one of which holds the labels (the targets), named by the request
  (``?labels=<column>``, ``?target=<column>``).

A label is an integer or a string of 1-256 characters, one per row; a target a finite number
within the values' bound, one per row. ``.npy`` cannot carry either. Rows pass the same
checks as unlabelled ones (``service.wire.rows``: sparse parts before scipy sees them, values
finite and within ``MAX_ABS_VALUE``). Everything is validated before anything is written;
every rejection says what was expected and what came.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from service.algorithms.base import Matrix
from service.algorithms.labels import Label, LabelledRows, labelled
from service.algorithms.targets import TargetRows
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
    value_problem,
    within_limit,
)
from service.wire.tables import read_table

#: Most distinct classes one chunk may introduce (a selector keeps a row of sums per class).
MAX_CLASSES_PER_CHUNK = 10_000
_CSR_KEYS = ("shape", "indptr", "indices", "data")
_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True)
class Side:
    """What a chunk carries beside its rows, one per row, and how a body gives it."""

    #: What the chunks are, for messages ("labelled rows").
    chunks: str
    #: The key of a JSON body and of an .npz (``labels``, ``targets``) ...
    key: str
    #: ... the further names an .npz may give it (``y``) ...
    npz_aliases: tuple[str, ...]
    #: ... and the query parameter naming its column in a table body.
    parameter: str
    #: One of them, for messages ("label").
    one: str


LABELS = Side("labelled rows", "labels", (), "labels", "label")
TARGETS = Side("rows with a target", "targets", ("y",), "target", "target")


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
    rows, raw, names = _decode_sided(
        LABELS, body, media_type, n_features, max_bytes, selector_names, labels
    )
    return labelled(rows, validate_labels(raw, rows.shape[0])), names


def decode_target_rows(
    body: bytes,
    media_type: str,
    n_features: int,
    max_bytes: int,
    selector_names: Sequence[str] | None = None,
    target: str | None = None,
) -> tuple[TargetRows, list[str] | None]:
    """``decode_labelled_rows`` for rows with a target: ``target`` names the target column of
    a table body."""
    rows, raw, names = _decode_sided(
        TARGETS, body, media_type, n_features, max_bytes, selector_names, target
    )
    return TargetRows(rows, validate_targets(raw, rows.shape[0])), names


def _decode_sided(
    side: Side,
    body: bytes,
    media_type: str,
    n_features: int,
    max_bytes: int,
    selector_names: Sequence[str] | None,
    column: str | None,
) -> tuple[Matrix, Any, list[str] | None]:
    """The rows (validated, in the selector's column order), the side's values as sent and
    the names the chunk gave its columns."""
    names: list[str] | None
    if media_type in TABLE_MEDIA_TYPES:
        if column is None:
            raise SelectorMismatch(
                f"this selector needs {side.chunks}: a {media_type} chunk names the column "
                f"that holds the {side.key} with the {side.parameter} parameter "
                f"(?{side.parameter}=<column>); got none"
            )
        rows, raw, names = _from_table(side, body, media_type, column, max_bytes)
        order = column_order(names, selector_names, n_features)
    elif column is not None:
        # Each valid alone, the parameter and the body contradict each other.
        raise Inconsistent(
            f"{side.parameter}={column!r} names the {side.one} column of a text/csv or Arrow "
            f"body; a JSON or .npz chunk carries its {side.key} itself ('{side.key}'); got "
            f"{media_type}"
        )
    elif not body:
        raise InvalidInput(f"empty body: expected rows with one {side.one} each")
    elif media_type == JSON:
        document = parse_json(body)
        try:
            rows, raw = _from_json(side, document, n_features)  # first: is it such rows?
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
            rows, raw = _from_npz(side, arrays, n_features)
        except WidthMismatch:
            refuse_by_names(raw_names, selector_names, n_features)
            raise
        names = names_given(raw_names)
        order = column_order(names, selector_names, n_features)
    elif media_type == NPY:
        raise UnsupportedMediaType(
            f"a .npy holds one array and cannot carry {side.key}: send application/x-npz "
            f"(numpy.savez with rows and {side.key}) or JSON with rows and {side.key}"
        )
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    require_width(names, rows)
    return in_selector_order(validate_rows(rows, n_features), order), raw, names


def _from_table(
    side: Side, body: bytes, media_type: str, column: str, max_bytes: int
) -> tuple[Matrix, Any, list[str]]:
    """A table's feature columns, its side column's values and the features' names: labels
    as a label column, a target as a numeric column taken out of the rest."""
    if side is LABELS:
        table = read_table(body, media_type, column, max_bytes)
        return table.values, table.labels, table.names
    table = read_table(body, media_type, None, max_bytes)
    if column not in table.names:
        raise InvalidInput(
            f"{side.parameter}={column!r} names no column of the chunk; its columns are "
            f"{shown(table.names, 200)}"
        )
    if len(table.names) == 1:
        raise InvalidInput(
            f"the chunk has only the {side.one} column {column!r}: expected features"
        )
    at = table.names.index(column)
    values = table.values
    return (
        np.delete(values, at, axis=1),
        values[:, at].copy(),
        [name for i, name in enumerate(table.names) if i != at],
    )


def _from_json(side: Side, document: Any, n_features: int) -> tuple[Matrix, Any]:
    if not isinstance(document, dict) or side.key not in document:
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        # Rows without the side (or another method's chunk: views, feature columns, rows
        # with the other side) are fine chunks for other selectors.
        fits_another = is_rows_document(document) or (
            isinstance(document, dict) and ("views" in document or "columns" in document)
        )
        raise (SelectorMismatch if fits_another else InvalidInput)(
            f'this selector needs {side.chunks}: expected {{"rows": [[...], ...], "{side.key}": '
            f"[...]}} or a CSR object with {side.key}; got {got}"
        )
    if "rows" in document:
        unknown = sorted(set(document) - {"rows", side.key, FEATURE_NAMES})
        rows: Matrix = dense_from_json(document["rows"], "rows")
    else:
        unknown = sorted(set(document) - {side.key, FEATURE_NAMES, *_CSR_KEYS})
        rows = csr_from_json({k: v for k, v in document.items() if k in _CSR_KEYS}, n_features)
    if unknown:
        raise InvalidInput(f"unexpected keys {unknown} next to rows and {side.key}")
    return rows, document[side.key]


def _from_npz(side: Side, arrays: dict[str, np.ndarray], n_features: int) -> tuple[Matrix, Any]:
    given = [key for key in (side.key, *side.npz_aliases) if key in arrays]
    if len(given) != 1:
        names = " or ".join(repr(key) for key in (side.key, *side.npz_aliases))
        raise InvalidInput(
            f"expected one {names} array in the .npz next to the rows; got arrays {sorted(arrays)}"
        )
    values = arrays.pop(given[0])
    if "rows" in arrays:
        if len(arrays) > 1:
            raise InvalidInput(
                f"expected 'rows' and '{given[0]}' only; got also {sorted(set(arrays) - {'rows'})}"
            )
        return numeric_array(arrays["rows"]), values
    missing = [key for key in _CSR_KEYS if key not in arrays]
    if missing:
        raise InvalidInput(
            "expected 'rows' (2-D) or the CSR parts data, indices, indptr and shape next to "
            f"'{given[0]}'; got arrays {sorted([*arrays, given[0]])}"
        )
    return sparse_from_arrays("csr", arrays, n_features), values


def validate_targets(raw: Any, n_rows: int) -> np.ndarray:
    """One target per row: finite numbers within ``MAX_ABS_VALUE``, as float64."""
    if isinstance(raw, np.ndarray):
        if raw.ndim != 1:
            raise InvalidInput(f"targets must be a 1-D array; got shape {raw.shape}")
        if raw.dtype.kind not in "iuf":
            raise InvalidInput(f"targets must be numbers; got dtype {raw.dtype}")
        values = raw.astype(np.float64)
    elif isinstance(raw, list):
        for row, value in enumerate(raw):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInput(
                    f"targets must be numbers; target {row} is {shown(value)} "
                    f"({type(value).__name__})"
                )
        try:
            values = np.array(raw, dtype=np.float64)
        except OverflowError:
            raise InvalidInput("targets must be numbers within the values' bound") from None
    else:
        raise InvalidInput(f"targets must be a list (one per row); got {type(raw).__name__}")
    if values.shape != (n_rows,):
        raise Inconsistent(f"expected {n_rows} targets (one per row); got {values.shape[0]}")
    offending = np.flatnonzero(~within_limit(values))
    if offending.size:
        row = int(offending[0])
        raise InvalidInput(f"{value_problem(float(values[row]))} at target {row}")
    return values


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
