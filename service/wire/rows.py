"""Rows (chunk kinds ``"rows"`` and, with labels, ``"labelled rows"``): validated matrices.

Bodies (``decode_rows``):

* ``application/json``: dense rows ``[[...], ...]`` or ``{"rows": [[...], ...]}``, or sparse CSR
  ``{"shape": [n, m], "indptr": [...], "indices": [...], "data": [...]}``; an object may name
  its columns (``"feature_names"``);
* ``application/x-npy``: one 2-D numeric array (``numpy.save``), never unpickled;
* ``application/x-npz``: ``numpy.savez`` with ``rows``, or a ``scipy.sparse.save_npz`` matrix
  (CSR, CSC or COO), and optionally a ``feature_names`` array;
* ``text/csv`` and ``application/vnd.apache.arrow.stream``: a table whose header (schema) names
  every column (``service.wire.tables``).

A chunk that names its columns is matched to the selector's names (``service.wire.names``).

What every decoded chunk guarantees (so that an accepted chunk can always be applied):

* ``.npy`` and ``.npz`` bodies are read by ``service.wire.arrays`` (never ``np.load``, never
  pickle, nothing allocated beyond the body);
* JSON elements are numbers (not booleans, lists, null or strings), checked before numpy sees
  them;
* sparse parts are checked by Sift before scipy touches them (``build_csr``, ``build_csc``,
  ``build_coo``): integer 1-D index arrays, lengths that agree, a monotone ``indptr`` from 0 to
  the number of values, every index inside the shape, the width the selector takes and at most
  ``MAX_CHUNK_ROWS`` rows; the result is a canonical CSR (duplicates summed, as scipy would);
* every value is finite with ``|x| <= MAX_ABS_VALUE`` (``validate_rows``).

Everything here is CPU work on possibly large bodies: callers run it off the event loop.
Every rejection says what was expected and what came: ``BadRequest`` (400) for bytes that do
not parse, ``InvalidInput`` (422) for content that does, with ``Inconsistent`` for parts that
contradict each other and ``SelectorMismatch`` for a chunk that does not fit the selector.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from service.algorithms.base import MAX_ABS_VALUE, Matrix
from service.errors import (
    Inconsistent,
    InvalidInput,
    SelectorMismatch,
    UnsupportedMediaType,
    shown,
)
from service.wire.arrays import read_npy, read_npz
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
    WidthMismatch,
    column_order,
    in_selector_order,
    names_given,
    refuse_by_names,
    require_width,
)
from service.wire.tables import MAX_CHUNK_ROWS as MAX_CHUNK_ROWS  # every format holds to it
from service.wire.tables import read_table

#: The index arrays of each sparse format Sift accepts, as ``scipy.sparse.save_npz`` names them.
SPARSE_INDEX_PARTS = {
    "csr": ("indptr", "indices"),
    "csc": ("indptr", "indices"),
    "coo": ("row", "col"),
}
#: Python types of the numbers orjson produces (``bool`` is a subclass of ``int``: excluded
#: because ``type`` is compared exactly).
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_INT_TYPES: frozenset[type] = frozenset({int})
_INT64 = np.iinfo(np.int64)
#: The limit as a float64 scalar: compared with a float32 array, a Python float would be cast
#: to float32 (where 1e50 is infinite) and let infinities through.
_LIMIT = np.float64(MAX_ABS_VALUE)


@dataclass(frozen=True)
class NamedRows:
    """Validated rows in the selector's column order, and the names the chunk gave its columns
    (None: a positional chunk)."""

    rows: Matrix
    names: list[str] | None


def decode_rows(
    body: bytes,
    media_type: str,
    n_features: int,
    max_bytes: int,
    selector_names: Sequence[str] | None = None,
    labels: str | None = None,
    target: str | None = None,
) -> NamedRows:
    """Decode and fully validate a chunk of rows for a selector with ``n_features`` columns
    (named ``selector_names``, if it has names): a chunk that names its columns is matched to
    them (``service.wire.names``).

    ``max_bytes`` is the body limit: an ``.npz`` (or the floats of a table) may inflate to at
    most that much. ``labels`` and ``target`` (a table's label or target column) are refused:
    these rows have neither.
    """
    if labels is not None:
        raise SelectorMismatch(
            f"labels={labels!r} names a label column; labels apply to labelled methods and "
            "this selector takes rows only"
        )
    if target is not None:
        raise SelectorMismatch(
            f"target={target!r} names a target column; targets apply to methods of rows with a "
            "target and this selector takes rows only"
        )
    names: list[str] | None = None
    if media_type in TABLE_MEDIA_TYPES:
        table = read_table(body, media_type, None, max_bytes)
        names, rows = table.names, table.values
        order = column_order(names, selector_names, n_features)
    elif not body:
        raise InvalidInput("empty body: expected a chunk with at least one row")
    elif media_type == JSON:
        document = parse_json(body)
        raw_names = document.get(FEATURE_NAMES) if isinstance(document, dict) else None
        try:
            rows = rows_from_json(document, n_features)  # first: is it rows at all?
        except WidthMismatch:
            refuse_by_names(raw_names, selector_names, n_features)
            raise
        names = names_given(raw_names)
        order = column_order(names, selector_names, n_features)
    elif media_type == NPY:
        order, rows = None, read_npy(body)
    elif media_type == NPZ:
        arrays = read_npz(body, max_bytes, allow_strings=True, max_ndim=3)
        raw_names = arrays.pop(FEATURE_NAMES, None)
        try:
            rows = _rows_from_arrays(arrays, n_features)
        except WidthMismatch:
            refuse_by_names(raw_names, selector_names, n_features)
            raise
        names = names_given(raw_names)
        order = column_order(names, selector_names, n_features)
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    require_width(names, rows)
    return NamedRows(in_selector_order(validate_rows(rows, n_features), order), names)


def is_rows_document(document: Any) -> bool:
    """Whether a JSON chunk has the form of rows (dense, ``{"rows"}`` or CSR), labelled or not."""
    return isinstance(document, list) or (
        isinstance(document, dict) and ("rows" in document or "indptr" in document)
    )


def rows_from_json(document: Any, n_features: int) -> Matrix:
    if isinstance(document, list):
        return dense_from_json(document, "body")
    if isinstance(document, dict):
        if "labels" in document:
            raise SelectorMismatch(
                "labels apply to labelled methods; this selector takes rows only"
            )
        if "targets" in document:
            raise SelectorMismatch(
                "targets apply to methods of rows with a target; this selector takes rows only"
            )
        if "rows" in document:
            unknown = sorted(set(document) - {"rows", FEATURE_NAMES})
            if unknown:
                raise InvalidInput(f"unexpected keys {unknown} next to rows")
            return dense_from_json(document["rows"], "rows")
        if "indptr" in document:
            return csr_from_json(
                {k: v for k, v in document.items() if k != FEATURE_NAMES}, n_features
            )
        if "views" in document:
            raise SelectorMismatch(
                'multi-view chunks ({"views": ...}) are for omvfs selectors; this selector '
                "takes rows"
            )
        raise InvalidInput(
            'expected a JSON list of rows, {"rows": [...]} or a CSR object with '
            f"shape, indptr, indices and data; got an object with keys {sorted(document)}"
        )
    raise InvalidInput(f"expected a JSON list of rows or an object; got {type(document).__name__}")


# -- JSON numbers -----------------------------------------------------------------------------


def _only(values: list[Any], types: frozenset[type]) -> bool:
    """Whether every element has one of ``types`` (one pass in C, no numpy conversion)."""
    return types.issuperset(map(type, values))


def _first_other(values: list[Any], types: frozenset[type]) -> tuple[int, str]:
    """Position and JSON text of the first element whose type is not one of ``types``."""
    for j, value in enumerate(values):
        if type(value) not in types:
            return j, shown(value)
    raise AssertionError("every element has an expected type")  # pragma: no cover


def dense_from_json(rows: Any, where: str, item: str = "row") -> np.ndarray:
    """A dense 2-D float64 array from JSON lists (one per ``item``: row, or column as sent).

    Every element must be an int or a float: numpy would turn ``null`` into NaN, ``"1.5"`` into
    1.5 and ``true`` into 1.0, and fail with its own error on a nested list, so the types are
    checked first and the first offender is named.
    """
    if not isinstance(rows, list):
        raise InvalidInput(f"'{where}' must be a list of {item}s; got {type(rows).__name__}")
    if not rows:
        chunk = "an empty chunk" if item == "row" else "empty"
        raise InvalidInput(f"'{where}' is {chunk}: expected at least one {item}")
    if item == "row":
        _require_chunk_rows(len(rows))
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise InvalidInput(f"{where}[{i}] must be a list of numbers; got {type(row).__name__}")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise Inconsistent(
                f"{where} is ragged: {item} 0 has {width} values but {item} {i} has {len(row)}"
            )
    inner = "column" if item == "row" else "sample"
    for i, row in enumerate(rows):
        if not _only(row, _NUMBER_TYPES):
            j, text = _first_other(row, _NUMBER_TYPES)
            raise InvalidInput(f"{where} must hold numbers only; {item} {i}, {inner} {j} is {text}")
    # orjson gives ints of at most 64 bits (larger ones come as floats): all fit a float64.
    return np.array(rows, dtype=np.float64).reshape(len(rows), width)


def _json_numbers(values: Any, what: str) -> np.ndarray:
    """A flat JSON list of numbers as float64 values."""
    if not isinstance(values, list):
        raise InvalidInput(f"{what} must be a list; got {type(values).__name__}")
    if not _only(values, _NUMBER_TYPES):
        j, text = _first_other(values, _NUMBER_TYPES)
        raise InvalidInput(f"{what} must be a flat list of numbers; element {j} is {text}")
    return np.array(values, dtype=np.float64)


def _json_integers(values: Any, what: str) -> np.ndarray:
    """A flat JSON list of integers as int64 (range checks against the shape come later)."""
    if not isinstance(values, list):
        raise InvalidInput(f"{what} must be a list; got {type(values).__name__}")
    values = whole_floats_as_ints(values)
    if not _only(values, _INT_TYPES):
        j, text = _first_other(values, _INT_TYPES)
        raise InvalidInput(f"{what} must be a flat list of integers; element {j} is {text}")
    if values and (max(values) > _INT64.max or min(values) < _INT64.min):
        raise InvalidInput(f"{what} holds an integer beyond 64 bits")
    return np.array(values, dtype=np.int64)


# -- sparse matrices ---------------------------------------------------------------------------


def csr_from_json(document: dict[str, Any], n_features: int) -> sp.csr_matrix:
    """A validated CSR from a JSON object ``{"shape", "indptr", "indices", "data"}``."""
    missing = [key for key in ("shape", "indptr", "indices", "data") if key not in document]
    if missing:
        raise InvalidInput(f"CSR object is missing {', '.join(missing)}")
    shape = sparse_shape(document["shape"], n_features, "CSR")
    return build_csr(
        _json_numbers(document["data"], "CSR 'data'"),
        _json_integers(document["indices"], "CSR 'indices'"),
        _json_integers(document["indptr"], "CSR 'indptr'"),
        shape,
    )


def sparse_from_arrays(
    fmt: str, arrays: Mapping[str, np.ndarray], n_features: int
) -> sp.csr_matrix:
    """A validated CSR from the arrays of a CSR, CSC or COO matrix (``shape``, ``data`` and the
    format's index arrays, as ``scipy.sparse.save_npz`` or ``numpy.savez`` wrote them)."""
    if fmt not in SPARSE_INDEX_PARTS:
        raise InvalidInput(f"expected a CSR, CSC or COO matrix in the .npz; got {fmt}")
    label = fmt.upper()
    expected = {"shape", "data", *SPARSE_INDEX_PARTS[fmt]}
    missing = sorted(expected - set(arrays))
    unexpected = sorted(set(arrays) - expected)
    if missing or unexpected:
        raise InvalidInput(
            f"a {label} matrix is the arrays {sorted(expected)}; missing {missing}, "
            f"unexpected {unexpected}"
        )
    shape = sparse_shape(arrays["shape"], n_features, label)
    data = arrays["data"]
    if data.ndim != 1 or data.dtype.kind not in "biuf":
        raise InvalidInput(
            f"{label} 'data' must be a 1-D numeric array; got dtype {data.dtype}, {data.ndim}-D"
        )
    index = {key: index_array(arrays[key], f"{label} '{key}'") for key in SPARSE_INDEX_PARTS[fmt]}
    if fmt == "coo":
        return build_coo(data, index["row"], index["col"], shape)
    build = build_csr if fmt == "csr" else build_csc
    return build(data, index["indices"], index["indptr"], shape)


def sparse_shape(raw: Any, n_features: int, label: str) -> tuple[int, int]:
    """Two non-negative integers (a JSON list or a 1-D integer array), checked against the
    selector's width and ``MAX_CHUNK_ROWS`` before anything of that shape is built."""
    if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu" and raw.shape == (2,):
        raw = raw.tolist()
    raw = whole_floats_as_ints(raw)
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(type(v) is int and v >= 0 for v in raw)
    ):
        given = raw.tolist() if isinstance(raw, np.ndarray) else raw
        raise InvalidInput(
            f"{label} 'shape' must be [rows, columns] of non-negative integers; "
            f"got {shown(given, 80)}"
        )
    n_rows, n_cols = raw
    if n_cols != n_features:
        raise WidthMismatch(f"expected {n_features} features per row; got {n_cols}")
    _require_chunk_rows(n_rows)
    return n_rows, n_cols


def index_array(array: np.ndarray, what: str) -> np.ndarray:
    """A 1-D integer array as int64 (an index array of a sparse matrix, as sent)."""
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise InvalidInput(
            f"{what} must be a 1-D integer array; got dtype {array.dtype}, {array.ndim}-D"
        )
    if array.dtype == np.uint64 and array.size and int(array.max()) > _INT64.max:
        raise InvalidInput(f"{what} holds {int(array.max())}, beyond 64-bit indices")
    return array.astype(np.int64, copy=False)


def _require_in_range(indices: np.ndarray, bound: int, what: str) -> None:
    if not indices.size:
        return
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= bound:
        raise Inconsistent(f"{what} {low if low < 0 else high} is out of range [0, {bound})")


def _check_compressed(
    label: str, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> None:
    """The invariants of a CSR (rows major) or CSC (columns major) structure, as scipy assumes
    them: breaking any makes its conversions read or write out of bounds."""
    n_rows, n_cols = shape
    major, minor = (n_rows, n_cols) if label == "CSR" else (n_cols, n_rows)
    majors, minor_name = ("rows", "column") if label == "CSR" else ("columns", "row")
    if len(indptr) != major + 1:
        raise Inconsistent(
            f"{label} indptr must have {majors} + 1 = {major + 1} entries; got {len(indptr)}"
        )
    if len(indices) != len(data):
        raise Inconsistent(
            f"{label} indices and data must have the same length; "
            f"got {len(indices)} and {len(data)}"
        )
    if indptr[0] != 0:
        raise Inconsistent(f"{label} indptr must start at 0; got {indptr[0]}")
    steps = np.diff(indptr)
    if np.any(steps < 0):
        at = int(np.argmax(steps < 0))
        raise Inconsistent(
            f"{label} indptr must be non-decreasing; indptr[{at + 1}] = {indptr[at + 1]} "
            f"< indptr[{at}] = {indptr[at]}"
        )
    if indptr[-1] != len(indices):
        raise Inconsistent(
            f"{label} indptr[-1] must equal the number of stored values {len(indices)}; "
            f"got {indptr[-1]}"
        )
    _require_in_range(indices, minor, f"{label} {minor_name} index")


def build_csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A canonical CSR from its parts (int64 indices, numeric data), after every structural
    check: scipy would accept some broken structures and fail (or read out of bounds) later."""
    _check_compressed("CSR", data, indices, indptr, shape)
    return _canonical(sp.csr_matrix((_floats(data), indices, indptr), shape=shape))


def build_csc(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A canonical CSR from CSC parts, checked first: scipy's CSC -> CSR conversion writes
    wherever the row indices point (an index past the end crashed the process)."""
    _check_compressed("CSC", data, indices, indptr, shape)
    return _canonical(sp.csc_matrix((_floats(data), indices, indptr), shape=shape).tocsr())


def build_coo(
    data: np.ndarray, row: np.ndarray, col: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A canonical CSR from COO parts, checked first (lengths agree, every index in range)."""
    if not len(row) == len(col) == len(data):
        raise Inconsistent(
            f"COO row, col and data must have the same length; "
            f"got {len(row)}, {len(col)} and {len(data)}"
        )
    _require_in_range(row, shape[0], "COO row index")
    _require_in_range(col, shape[1], "COO column index")
    return _canonical(sp.coo_matrix((_floats(data), (row, col)), shape=shape).tocsr())


def _floats(data: np.ndarray) -> np.ndarray:
    return np.asarray(data, dtype=np.float64)


def _canonical(matrix: Any) -> sp.csr_matrix:
    """A float64 ``csr_matrix`` with sorted indices and duplicate entries summed (as scipy's
    own conversions would), so that every later check sees each position once."""
    csr = sp.csr_matrix(matrix, dtype=np.float64)
    if not csr.has_canonical_format:
        # Parts read from a body are read-only views of it: sort and sum in a copy.
        csr = csr.copy()
        csr.sum_duplicates()
    return csr


def _rows_from_arrays(arrays: dict[str, np.ndarray], n_features: int) -> Matrix:
    """The rows of an ``.npz`` (3-D members are read so that a BSR matrix, whose data is 3-D,
    is refused for its format): ``numpy.savez`` with ``rows`` (dense), or a
    ``scipy.sparse.save_npz`` archive (CSR, CSC or COO) as a CSR."""
    if "rows" in arrays:
        if len(arrays) > 1:
            raise InvalidInput(
                f"expected 'rows' (and '{FEATURE_NAMES}') only; got also "
                f"{sorted(set(arrays) - {'rows'})}"
            )
        return numeric_array(arrays["rows"])
    if "format" not in arrays:
        raise InvalidInput(
            "expected 'rows' (numpy.savez) or a scipy.sparse .npz (save_npz) with a 'format' "
            f"array; got arrays {sorted(arrays)}"
        )
    fmt = arrays.pop("format")
    if fmt.shape != () or fmt.dtype.kind not in "SU":
        raise InvalidInput(f"the .npz 'format' must be a string; got dtype {fmt.dtype}")
    name = fmt.item()
    if isinstance(name, bytes):
        name = name.decode("ascii", errors="replace")
    arrays.pop("_is_array", None)  # scipy marks sparse arrays (vs matrices): the same rows here
    return sparse_from_arrays(name[:20], arrays, n_features)


# -- values -------------------------------------------------------------------------------------


def _require_chunk_rows(n_rows: int) -> None:
    if n_rows > MAX_CHUNK_ROWS:
        raise InvalidInput(f"a chunk holds at most {MAX_CHUNK_ROWS} rows; got {n_rows}")


def first_offending(
    matrix: Matrix, fits: Callable[[np.ndarray], np.ndarray]
) -> tuple[float, int, int] | None:
    """The first stored value (in row-major order) that does not fit, with its row and column.

    ``fits`` maps the stored values to a boolean mask. A CSR must be canonical (sorted indices).
    """
    values = matrix if isinstance(matrix, np.ndarray) else np.asarray(matrix.data)
    mask = fits(values)
    if mask.all():
        return None
    flat = int(np.argmin(mask.ravel()))  # the first False
    if isinstance(matrix, np.ndarray):
        row, col = divmod(flat, matrix.shape[1])
    else:
        row = int(np.searchsorted(matrix.indptr, flat, side="right")) - 1
        col = int(matrix.indices[flat])
    return float(values.ravel()[flat]), row, col


def within_limit(values: np.ndarray) -> np.ndarray:
    # NaN compares False, so this is also the finiteness check.
    return np.asarray(np.abs(values) <= _LIMIT)


def value_problem(value: float) -> str:
    if not np.isfinite(value):
        return f"values must be finite; got {value}"
    return (
        f"values must lie within +-{MAX_ABS_VALUE:g} (larger ones would overflow the methods' "
        f"arithmetic); got {value}"
    )


def validate_rows(rows: Matrix, n_features: int) -> Matrix:
    """Shape, emptiness, row count and values (finite, ``|x| <= MAX_ABS_VALUE``): the checks
    every row payload passes, whatever its format. Sparse rows come back as a canonical float64
    CSR; dense ones as a C-contiguous float64 array, or float32 as sent (half the bytes in the
    log; the methods compute in float64)."""
    if rows.ndim != 2:
        raise InvalidInput(
            f"expected a 2-D array of rows x {n_features} features; got {rows.ndim}-D"
        )
    n_rows, n_cols = rows.shape
    if n_cols != n_features:
        raise SelectorMismatch(f"expected {n_features} features per row; got {n_cols}")
    if n_rows == 0:
        raise InvalidInput("empty chunk: expected at least one row")
    _require_chunk_rows(n_rows)
    checked: Matrix
    if sp.issparse(rows):
        checked = _canonical(rows)
    else:
        dtype = np.float32 if rows.dtype == np.float32 else np.float64
        # C order and aligned (a .npy header of odd length leaves the data unaligned).
        checked = np.require(rows, dtype=dtype, requirements=["C", "A"])
    found = first_offending(checked, within_limit)
    if found is not None:
        value, row, col = found
        raise InvalidInput(f"{value_problem(value)} at row {row}, column {col}")
    return checked


def numeric_array(array: Any) -> np.ndarray:
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        kind = getattr(array, "dtype", type(array).__name__)
        raise InvalidInput(f"expected a numeric array (float, int or bool dtype); got {kind}")
    return array
