"""Inputs of the client: numpy arrays, scipy sparse matrices and pandas DataFrames, as chunk
bodies.

* ``as_matrix`` makes any accepted input a float64 matrix (dense C-ordered, or CSR) and keeps a
  DataFrame's column names as feature names;
* ``split_side`` takes what rows carry beside them, one per row (``Side``: ``LABELS``, class
  labels, or ``TARGETS``, a numeric target), from ``y`` (an array, a list, a pandas Series) or
  from a column of a DataFrame named by ``y``;
* ``rows_per_chunk`` sizes chunks so that each body stays near a byte budget (the service
  refuses bodies over ``SIFT_MAX_BODY_BYTES``, 64 MiB by default);
* the ``*_body`` functions encode one chunk the way the service reads it fastest: dense rows as
  ``.npy``, sparse rows as ``scipy.sparse.save_npz`` (CSR), labelled rows (rows with a target)
  as the ``.npz`` of ``numpy.savez`` with ``rows`` (or the CSR parts) and ``labels``
  (``targets``), views as ``numpy.savez``
  (dense) or JSON (any view sparse, or named), feature columns as ``.npy`` (or JSON when
  named). Rows whose columns have names (a DataFrame's, a file's header) carry them
  (``feature_names``): the service matches them to the selector's, so a column never lands on
  another feature.

pandas is optional: it is recognised by duck typing and never imported here.
"""

from __future__ import annotations

import io
import json
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import numpy as np
import scipy.sparse as sp

Matrix: TypeAlias = np.ndarray | sp.csr_matrix
Label = int | str
#: What rows carry beside them, one per row: class labels, or targets (float64).
Values: TypeAlias = list[Label] | np.ndarray

JSON = "application/json"
NPY = "application/x-npy"
NPZ = "application/x-npz"

#: Default size of one chunk's body: well under the service's 64 MiB default limit, large enough
#: that per-request costs vanish.
DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024
#: The service refuses chunks of more rows than this, whatever their size.
MAX_CHUNK_ROWS = 1_000_000
#: JSON bodies are limited tighter by the service (8 MiB by default) and grow about 2.5 times
#: the values' binary size: named feature columns (the only JSON chunks the client sends for
#: numeric data) are sized to this budget.
JSON_CHUNK_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Body:
    """One encoded request body and its media type."""

    content: bytes
    media_type: str


def is_dataframe(data: Any) -> bool:
    """A pandas DataFrame (recognised without importing pandas)."""
    return hasattr(data, "columns") and hasattr(data, "iloc") and hasattr(data, "to_numpy")


def is_series(data: Any) -> bool:
    return hasattr(data, "to_numpy") and hasattr(data, "iloc") and not hasattr(data, "columns")


def column_names(data: Any) -> list[str] | None:
    """A DataFrame's column names as feature names (None for other inputs)."""
    if not is_dataframe(data):
        return None
    return [str(column) for column in data.columns]


def as_matrix(data: Any) -> Matrix:
    """A 2-D float64 matrix: C-ordered dense, or CSR for scipy sparse input.

    A 1-D input is refused: whether it is one row or one column only the caller knows.
    """
    if sp.issparse(data):
        matrix = sp.csr_matrix(data, dtype=np.float64)
        matrix.sort_indices()
        return matrix
    if is_dataframe(data):
        data = data.to_numpy(dtype=np.float64)
    array = np.ascontiguousarray(np.asarray(data, dtype=np.float64))
    if array.ndim != 2:
        raise ValueError(
            f"expected a 2-D array (rows x features); got {array.ndim}-D of shape {array.shape}"
            + (
                ": reshape(1, -1) for one row, reshape(-1, 1) for one column"
                if array.ndim == 1
                else ""
            )
        )
    return array


def width_of(data: Any) -> int:
    """The number of features (columns) of rows given in any accepted form, without converting
    them (a DataFrame, an array or a sparse matrix says its shape)."""
    shape = getattr(data, "shape", None)
    if shape is None:
        return int(as_matrix(data).shape[1])
    if len(shape) != 2:
        raise ValueError(f"expected a 2-D array (rows x features); got shape {tuple(shape)}")
    return int(shape[1])


def split_side(data: Any, y: Any, side: Side) -> tuple[Any, Values | None]:
    """``data`` without its ``side`` column, and its values (None when ``y`` is None): labels
    or targets, as ``side`` reads them.

    ``y`` is a sequence (list, numpy array, pandas Series) of one value per row, or, for a
    DataFrame, the name of the column that holds them (dropped from the features).
    """
    if y is None:
        return data, None
    if isinstance(y, str) and is_dataframe(data):
        if y not in data.columns:
            raise ValueError(
                f"no column {y!r} to take {side.key} from; columns: {list(data.columns)}"
            )
        return data.drop(columns=[y]), side.of(data[y])
    return data, side.of(y)


def _one_per_row(y: Any) -> np.ndarray:
    """``y`` as a numpy array, each value as it was given: a Series' or an array's own, and a
    list's items as they are (``np.asarray`` would make ``[1, "a"]`` two strings)."""
    if is_series(y):
        return np.asarray(y.to_numpy())
    if isinstance(y, np.ndarray):
        return y
    values = np.asarray(y)
    return values if values.dtype.kind in "biuf" else np.asarray(y, dtype=object)


def labels_of(y: Any) -> list[Label]:
    """Labels as the service takes them: integers (64-bit) or strings, one per row.

    Floats that are whole numbers (a pandas column of integers with a missing value becomes
    float) are integers; other floats, booleans and missing values are refused. A list that
    mixes integers and strings keeps them apart (1 and "1" are two classes).
    """
    values = _one_per_row(y)
    if values.ndim != 1:
        raise ValueError(f"expected one label per row (1-D); got shape {values.shape}")
    labels: list[Label] = []
    for position, value in enumerate(values.tolist()):
        if isinstance(value, bool) or value is None:
            raise ValueError(f"labels must be integers or strings; label {position} is {value!r}")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(
                    f"labels must be integers or strings; label {position} is {value!r}"
                )
            value = int(value)
        labels.append(value if isinstance(value, int) else str(value))
    return labels


def targets_of(y: Any) -> np.ndarray:
    """Targets as the service takes them: one finite number per row, as float64.

    Integers and floats are numbers; booleans, strings (class labels), missing values, NaN and
    infinities are refused.
    """
    values = _one_per_row(y)
    if values.ndim != 1:
        raise ValueError(f"expected one target per row (1-D); got shape {values.shape}")
    if values.dtype.kind not in "iuf":
        for position, value in enumerate(values.tolist()):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"targets must be numbers; target {position} is {value!r}")
    try:
        targets = values.astype(np.float64)
    except (OverflowError, TypeError, ValueError):
        raise ValueError("targets must be numbers within float64's range") from None
    offending = np.flatnonzero(~np.isfinite(targets))
    if offending.size:
        position = int(offending[0])
        raise ValueError(
            f"targets must be finite numbers; target {position} is {targets[position]}"
        )
    return np.ascontiguousarray(targets)


@dataclass(frozen=True)
class Side:
    """What a chunk of rows carries beside them, one value per row: ``LABELS`` (class labels:
    the chunk kind ``labelled rows``) or ``TARGETS`` (a numeric target: ``rows with a
    target``). ``key`` names them in a body (and is ``push_chunk``'s parameter), ``one`` names
    one of them, ``expects`` says what each is; ``of`` reads and checks them."""

    kind: str
    key: str
    one: str
    expects: str
    read: Callable[[Any], Values]

    def of(self, y: Any) -> Values:
        """``y``'s values, one per row, checked as the service checks them."""
        return self.read(y)

    def array(self, values: Values) -> np.ndarray | None:
        """The values as one numpy array for an ``.npz``; None when only JSON can carry them
        (labels that mix integers and strings)."""
        if self is TARGETS:
            return np.asarray(values, dtype=np.float64)
        return _label_array(cast(Sequence[Label], values))


LABELS = Side("labelled rows", "labels", "label", "one integer or string label per row", labels_of)
TARGETS = Side("rows with a target", "targets", "target", "one finite number per row", targets_of)
#: The side of each chunk kind that has one.
SIDES: dict[str, Side] = {side.kind: side for side in (LABELS, TARGETS)}


def rows_per_chunk(matrix: Matrix, target_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
    """Rows per chunk so that a chunk's body takes about ``target_bytes``."""
    n_rows = max(int(matrix.shape[0]), 1)
    if isinstance(matrix, sp.csr_matrix):
        # A value and its column index (8 + 4 bytes) plus a row pointer (4-8 bytes) per row.
        row_bytes = 12 * matrix.nnz / n_rows + 8
    else:
        row_bytes = 8 * max(int(matrix.shape[1]), 1)
    return int(max(1, min(MAX_CHUNK_ROWS, target_bytes // max(row_bytes, 1))))


def row_slices(n_rows: int, chunk_rows: int) -> Iterator[slice]:
    """Consecutive slices of at most ``chunk_rows`` rows covering ``n_rows``."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be at least 1; got {chunk_rows}")
    for start in range(0, n_rows, chunk_rows):
        yield slice(start, min(start + chunk_rows, n_rows))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _savez(**arrays: np.ndarray) -> bytes:
    # Every array here is numeric or of fixed-width strings: nothing is ever pickled.
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def _csr_parts(matrix: sp.csr_matrix) -> dict[str, np.ndarray]:
    return {
        "data": np.asarray(matrix.data, dtype=np.float64),
        "indices": np.asarray(matrix.indices, dtype=np.int64),
        "indptr": np.asarray(matrix.indptr, dtype=np.int64),
        "shape": np.array(matrix.shape, dtype=np.int64),
    }


def _csr_json(matrix: sp.csr_matrix) -> dict[str, Any]:
    return {
        "shape": [int(n) for n in matrix.shape],
        "indptr": matrix.indptr.tolist(),
        "indices": matrix.indices.tolist(),
        "data": matrix.data.tolist(),
    }


def _names_array(names: Sequence[str], width: int) -> np.ndarray:
    if len(names) != width:
        raise ValueError(f"expected {width} feature names (one per column); got {len(names)}")
    return np.array([str(name) for name in names], dtype=np.str_)


def rows_body(rows: Matrix, names: Sequence[str] | None = None) -> Body:
    """Unlabelled rows: ``.npy`` when dense, ``scipy.sparse.save_npz`` CSR when sparse; with
    ``names`` (the columns' feature names, which the service matches to the selector's), the
    ``.npz`` of ``numpy.savez`` with ``rows`` (or the CSR parts) and ``feature_names``.

    Sparse bodies are stored uncompressed: compressing costs more time than the bytes save on
    the loopback or a LAN, and the service inflates nothing then.
    """
    if names is not None:
        named = _names_array(names, int(rows.shape[1]))
        if sp.issparse(rows):
            parts = _csr_parts(sp.csr_matrix(rows))
            return Body(_savez(format=np.array("csr"), **parts, feature_names=named), NPZ)
        dense = np.ascontiguousarray(rows, dtype=np.float64)
        return Body(_savez(rows=dense, feature_names=named), NPZ)
    if sp.issparse(rows):
        buffer = io.BytesIO()
        sp.save_npz(buffer, sp.csr_matrix(rows), compressed=False)
        return Body(buffer.getvalue(), NPZ)
    return Body(_npy(np.ascontiguousarray(rows, dtype=np.float64)), NPY)


def _label_array(labels: Sequence[Label]) -> np.ndarray | None:
    """Labels as one numpy array of integers or of strings; None when they mix both (a numpy
    array would turn 1 into "1", which the service counts as another class)."""
    if all(isinstance(label, int) for label in labels):
        return np.array(labels, dtype=np.int64)
    if all(isinstance(label, str) for label in labels):
        return np.array(labels, dtype=np.str_)
    return None


def sided_body(
    rows: Matrix, side: Side, values: Values, names: Sequence[str] | None = None
) -> Body:
    """Rows with their labels or targets (``side``): the ``.npz`` the service reads for that
    chunk kind (``rows`` or the CSR parts, ``labels`` or ``targets`` and, with ``names``,
    ``feature_names``); JSON when labels mix integers and strings."""
    if len(values) != rows.shape[0]:
        raise ValueError(f"expected {rows.shape[0]} {side.key} (one per row); got {len(values)}")
    array = side.array(values)
    named = {} if names is None else {"feature_names": _names_array(names, int(rows.shape[1]))}
    if array is None:
        document: dict[str, Any] = (
            {**_csr_json(rows)} if sp.issparse(rows) else {"rows": np.asarray(rows).tolist()}
        )
        document[side.key] = list(values)
        if names is not None:
            document["feature_names"] = [str(name) for name in names]
        return Body(json.dumps(document).encode(), JSON)
    if sp.issparse(rows):
        parts = _csr_parts(sp.csr_matrix(rows))
        return Body(_savez(**parts, **{side.key: array}, **named), NPZ)
    dense = np.ascontiguousarray(rows, dtype=np.float64)
    return Body(_savez(rows=dense, **{side.key: array}, **named), NPZ)


def views_body(
    views: Mapping[str, Matrix], names: Mapping[str, Sequence[str]] | None = None
) -> Body:
    """The same rows of every view: ``numpy.savez`` with one array per view when all are dense
    and unnamed, else JSON with each view as dense rows or a CSR object (and, with ``names``,
    every view's feature names)."""
    if names is None and not any(sp.issparse(view) for view in views.values()):
        return Body(_savez(**{name: np.asarray(view) for name, view in views.items()}), NPZ)
    document: dict[str, Any] = {
        "views": {
            name: _csr_json(sp.csr_matrix(view)) if sp.issparse(view) else np.asarray(view).tolist()
            for name, view in views.items()
        }
    }
    if names is not None:
        document["feature_names"] = {view: [str(n) for n in names[view]] for view in views}
    return Body(json.dumps(document).encode(), JSON)


def view_names(data: Mapping[str, Any]) -> dict[str, list[str]] | None:
    """Every view's column names, when every view is a DataFrame (else None)."""
    names = {str(view): column_names(rows) for view, rows in data.items()}
    if any(found is None for found in names.values()):
        return None
    return {view: found for view, found in names.items() if found is not None}


def columns_body(columns: np.ndarray, names: Sequence[str] | None) -> Body:
    """Feature columns (n_samples x c): ``.npy``, or JSON when they carry names."""
    if names is None:
        return Body(_npy(np.ascontiguousarray(columns, dtype=np.float64)), NPY)
    if len(names) != columns.shape[1]:
        raise ValueError(f"expected {columns.shape[1]} names (one per column); got {len(names)}")
    document = {"columns": np.asarray(columns, dtype=np.float64).T.tolist(), "names": list(names)}
    return Body(json.dumps(document).encode(), JSON)


def columns_per_chunk(n_samples: int, named: bool) -> int:
    """Feature columns per chunk: near the binary budget, or the JSON one when named."""
    budget = JSON_CHUNK_BYTES if named else DEFAULT_CHUNK_BYTES
    return max(1, budget // (8 * max(n_samples, 1)))


def views_of(data: Mapping[str, Any]) -> dict[str, Matrix]:
    """Every view as a matrix; all views must have the same rows."""
    views = {str(name): as_matrix(view) for name, view in data.items()}
    rows = {name: int(view.shape[0]) for name, view in views.items()}
    if len(set(rows.values())) > 1:
        raise ValueError(f"every view needs the same rows; got rows per view {rows}")
    return views
