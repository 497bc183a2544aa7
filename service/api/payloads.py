"""Payload decoding: request bodies to validated row matrices, before anything is written.

Supported bodies for row chunks (``decode_rows``):

* ``application/json``: dense rows ``[[...], ...]`` or ``{"rows": [[...], ...]}``, or sparse CSR
  ``{"shape": [n, m], "indptr": [...], "indices": [...], "data": [...]}``;
* ``application/x-npy``: one 2-D numeric array (``numpy.save``), never unpickled;
* ``application/x-npz``: a ``scipy.sparse.save_npz`` matrix (CSR, CSC or COO).

Feature columns (``decode_columns``, for ``"columns"`` methods) come as ``application/json``
``{"columns": [[...n values...], ...], "names": [...optional...]}`` or ``application/x-npy``
(``n x c``, or 1-D for one column).

Multi-view rows (``decode_views``, for ``omvfs``) come as ``application/json``
``{"views": {"<view>": <rows or CSR object>, ...}}`` or ``application/x-npz`` written by
``numpy.savez`` with one 2-D array per view, named after the view.

Everything here is CPU work on possibly large bodies: callers run it off the event loop.
Every rejection says what was expected and what came.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import scipy.sparse as sp

from service.algorithms.base import Matrix
from service.errors import BadRequest, InvalidInput, PayloadTooLarge, UnsupportedMediaType

JSON = "application/json"
NPY = "application/x-npy"
NPZ = "application/x-npz"
ROW_MEDIA_TYPES = (JSON, NPY, NPZ)
COLUMN_MEDIA_TYPES = (JSON, NPY)
#: Longest feature name accepted (names end up in Redis hashes and in every ranking).
MAX_NAME_LENGTH = 256

#: A .npz is a zip: refuse archives that inflate far beyond the body limit (zip bombs).
MAX_INFLATION = 16


def media_type_of(content_type: str | None) -> str:
    """The bare media type of a Content-Type header (parameters such as charset dropped)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def require_media_type(content_type: str | None, accepted: tuple[str, ...]) -> str:
    media_type = media_type_of(content_type)
    if media_type not in accepted:
        got = f"'{media_type}'" if media_type else "no Content-Type"
        raise UnsupportedMediaType(f"expected Content-Type one of {', '.join(accepted)}; got {got}")
    return media_type


def decode_rows(body: bytes, media_type: str, n_features: int, max_bytes: int) -> Matrix:
    """Decode and fully validate a chunk of rows for a selector with ``n_features`` columns."""
    if not body:
        raise InvalidInput("empty body: expected a chunk with at least one row")
    if media_type == JSON:
        rows = _rows_from_json(parse_json(body))
    elif media_type == NPY:
        rows = _rows_from_npy(body)
    elif media_type == NPZ:
        rows = _rows_from_npz(body, max_bytes)
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    return validate_rows(rows, n_features)


def parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None


def _rows_from_json(document: Any) -> Matrix:
    if isinstance(document, list):
        return dense_from_json(document, "body")
    if isinstance(document, dict):
        if "labels" in document:
            raise InvalidInput(
                "labels apply to labelled methods (ocfs, ioc); this selector takes rows only"
            )
        if "rows" in document:
            return dense_from_json(document["rows"], "rows")
        if "indptr" in document:
            return csr_from_json(document)
        raise InvalidInput(
            'expected a JSON list of rows, {"rows": [...]} or a CSR object with '
            f"shape, indptr, indices and data; got an object with keys {sorted(document)}"
        )
    raise InvalidInput(f"expected a JSON list of rows or an object; got {type(document).__name__}")


def dense_from_json(rows: Any, where: str, item: str = "row") -> np.ndarray:
    """A dense 2-D float array from JSON lists (one per ``item``: row, or column as sent).

    Rejects ragged lists and non-numbers precisely.
    """
    if not isinstance(rows, list):
        raise InvalidInput(f"'{where}' must be a list of {item}s; got {type(rows).__name__}")
    if not rows:
        chunk = "an empty chunk" if item == "row" else "empty"
        raise InvalidInput(f"'{where}' is {chunk}: expected at least one {item}")
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise InvalidInput(f"{where}[{i}] must be a list of numbers; got {type(row).__name__}")
    width = len(rows[0])
    for i, row in enumerate(rows):
        if len(row) != width:
            raise InvalidInput(
                f"{where} is ragged: {item} 0 has {width} values but {item} {i} has {len(row)}"
            )
    array = np.array(rows)
    if array.dtype.kind not in "iuf":
        bad = _first_non_number(rows, item)
        raise InvalidInput(f"{where} must hold numbers only; {bad}")
    return np.asarray(array, dtype=np.float64).reshape(len(rows), width)


def _first_non_number(rows: list[list[Any]], item: str = "row") -> str:
    inner = "column" if item == "row" else "sample"
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"{item} {i}, {inner} {j} is {orjson.dumps(value).decode()[:40]}"
    return "values do not fit a 64-bit number"


def csr_from_json(document: dict[str, Any]) -> sp.csr_matrix:
    missing = [key for key in ("shape", "indptr", "indices", "data") if key not in document]
    if missing:
        raise InvalidInput(f"CSR object is missing {', '.join(missing)}")
    shape = document["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)
    ):
        raise InvalidInput(
            f"CSR 'shape' must be [rows, columns] of non-negative integers; got {shape!r}"
        )
    arrays = {}
    for key, kinds in (("indptr", "iu"), ("indices", "iu"), ("data", "iuf")):
        value = document[key]
        if not isinstance(value, list):
            raise InvalidInput(f"CSR '{key}' must be a list; got {type(value).__name__}")
        array = np.array(value) if value else np.zeros(0, dtype=np.int64)
        if array.ndim != 1 or array.dtype.kind not in kinds:
            what = "numbers" if key == "data" else "integers"
            raise InvalidInput(f"CSR '{key}' must be a flat list of {what}")
        arrays[key] = array
    return build_csr(arrays["data"], arrays["indices"], arrays["indptr"], (shape[0], shape[1]))


def build_csr(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]
) -> sp.csr_matrix:
    """A CSR matrix from its parts, after checking every structural invariant.

    scipy would accept some broken structures and fail (or read out of bounds) later, so the
    checks come first: lengths agree, indptr starts at 0 and never decreases, indices in range.
    """
    n_rows, n_cols = shape
    if len(indptr) != n_rows + 1:
        raise InvalidInput(
            f"CSR indptr must have rows + 1 = {n_rows + 1} entries; got {len(indptr)}"
        )
    if len(indices) != len(data):
        raise InvalidInput(
            f"CSR indices and data must have the same length; got {len(indices)} and {len(data)}"
        )
    if indptr[0] != 0:
        raise InvalidInput(f"CSR indptr must start at 0; got {indptr[0]}")
    steps = np.diff(indptr)
    if np.any(steps < 0):
        at = int(np.argmax(steps < 0))
        raise InvalidInput(
            f"CSR indptr must be non-decreasing; indptr[{at + 1}] = {indptr[at + 1]} "
            f"< indptr[{at}] = {indptr[at]}"
        )
    if indptr[-1] != len(indices):
        raise InvalidInput(
            f"CSR indptr[-1] must equal the number of stored values {len(indices)}; "
            f"got {indptr[-1]}"
        )
    if len(indices) and (indices.min() < 0 or indices.max() >= n_cols):
        bad = int(indices.min()) if indices.min() < 0 else int(indices.max())
        raise InvalidInput(f"CSR column index {bad} is out of range [0, {n_cols})")
    return sp.csr_matrix(
        (
            np.asarray(data, dtype=np.float64),
            np.asarray(indices, dtype=np.int64),
            np.asarray(indptr, dtype=np.int64),
        ),
        shape=(n_rows, n_cols),
    )


def _rows_from_npy(body: bytes) -> np.ndarray:
    try:
        array = np.load(io.BytesIO(body), allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InvalidInput(
                "the .npy holds Python objects and would need pickle to load; "
                "expected a numeric array (float, int or bool dtype)"
            ) from None
        raise BadRequest(f"body is not a valid .npy file: {exc}") from None
    except (OSError, EOFError) as exc:
        raise BadRequest(f"body is not a valid .npy file: {exc}") from None
    if not isinstance(array, np.ndarray):
        raise InvalidInput("expected a single array in .npy format, got an archive")
    if array.dtype.kind not in "biuf":
        raise InvalidInput(
            f"expected a numeric .npy array (float, int or bool dtype); got dtype {array.dtype}"
        )
    return array


def _check_inflation(body: bytes, max_bytes: int) -> None:
    """A .npz is a zip: refuse one that inflates far beyond the body limit (a zip bomb)."""
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            inflated = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile as exc:
        raise BadRequest(f"body is not a valid .npz archive: {exc}") from None
    if inflated > MAX_INFLATION * max(max_bytes, len(body)):
        raise PayloadTooLarge(
            f".npz inflates to {inflated} bytes, more than {MAX_INFLATION}x the body limit"
        )


def _rows_from_npz(body: bytes, max_bytes: int) -> sp.csr_matrix:
    _check_inflation(body, max_bytes)
    try:
        matrix = sp.load_npz(io.BytesIO(body))
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InvalidInput("the .npz holds Python objects that would need pickle") from None
        raise BadRequest(f"body is not a scipy.sparse .npz matrix: {exc}") from None
    except (OSError, KeyError, EOFError) as exc:
        raise BadRequest(f"body is not a scipy.sparse .npz matrix: {exc}") from None
    if matrix.dtype.kind not in "biuf":
        raise InvalidInput(f"expected a numeric sparse matrix; got dtype {matrix.dtype}")
    if matrix.format == "csr":
        # Check the structure as sent: a broken indptr must not reach scipy's conversions.
        return build_csr(matrix.data, matrix.indices, matrix.indptr, matrix.shape)
    if matrix.format in ("csc", "coo"):
        return sp.csr_matrix(matrix, dtype=np.float64)
    raise InvalidInput(f"expected a CSR, CSC or COO matrix in the .npz; got {matrix.format}")


def validate_rows(rows: Matrix, n_features: int) -> Matrix:
    """Shape, emptiness and finiteness: the checks every row payload passes, whatever its format."""
    if rows.ndim != 2:
        raise InvalidInput(
            f"expected a 2-D array of rows x {n_features} features; got {rows.ndim}-D"
        )
    n_rows, n_cols = rows.shape
    if n_cols != n_features:
        raise InvalidInput(f"expected {n_features} features per row; got {n_cols}")
    if n_rows == 0:
        raise InvalidInput("empty chunk: expected at least one row")
    csr = sp.csr_matrix(rows) if sp.issparse(rows) else None
    values = np.asarray(csr.data if csr is not None else rows)
    if values.dtype.kind in "biu":
        values = values.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        flat = int(np.argmin(finite.ravel()))
        if csr is not None:
            row = int(np.searchsorted(csr.indptr, flat, side="right")) - 1
            col = int(csr.indices[flat])
        else:
            row, col = divmod(flat, n_cols)
        raise InvalidInput(
            f"values must be finite; got {values.ravel()[flat]} at row {row}, column {col}"
        )
    if csr is not None:
        return sp.csr_matrix((values.astype(np.float64), csr.indices, csr.indptr), shape=csr.shape)
    # float32 stays float32 in the log (half the bytes); methods compute in float64.
    return np.ascontiguousarray(values, dtype=np.float64 if values.dtype != np.float32 else None)


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
        columns = _rows_from_npy(body)
        if columns.ndim == 1:
            columns = columns.reshape(-1, 1)
    else:  # pragma: no cover - require_media_type guards this
        raise UnsupportedMediaType(f"unsupported media type '{media_type}'")
    if columns.ndim != 2:
        raise InvalidInput(
            f"expected a 2-D array of n_samples={n_samples} x new features; got {columns.ndim}-D"
        )
    if columns.shape[0] != n_samples:
        raise InvalidInput(
            f"expected columns of n_samples={n_samples} values; got {columns.shape[0]}"
        )
    if columns.shape[1] == 0:
        raise InvalidInput("no columns: expected at least one feature column")
    values = np.asarray(columns, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.all():
        sample, column = divmod(int(np.argmin(finite.ravel())), values.shape[1])
        raise InvalidInput(
            f"values must be finite; got {values[sample, column]} in column {column} "
            f"at sample {sample}"
        )
    return np.ascontiguousarray(values), names


def validate_names(names: Any, count: int, field: str, item: str) -> list[str] | None:
    """Optional names of ``count`` features (one per ``item``): unique, non-empty strings."""
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidInput(f"{field} must be a list of strings")
    if len(names) != count:
        raise InvalidInput(f"expected {count} {field} (one per {item}); got {len(names)}")
    for name in names:
        if not name or len(name) > MAX_NAME_LENGTH:
            shown = name if len(name) <= 40 else name[:40] + "..."
            raise InvalidInput(
                f"{field} must have 1-{MAX_NAME_LENGTH} characters each; "
                f"got {shown!r} ({len(name)} characters)"
            )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"{field} must be unique; '{name}' appears more than once")
        seen.add(name)
    return names


def decode_views(
    body: bytes, media_type: str, views: list[tuple[str, int]], max_bytes: int
) -> Matrix:
    """Decode and validate a multi-view chunk; the views side by side, in ``views`` order.

    Every view must be present (and no other), have the same rows, its own number of
    features, finite and nonnegative values (NMF). CSR if any view came sparse.
    """
    if not body:
        raise InvalidInput("empty body: expected a chunk with one matrix per view")
    if media_type == JSON:
        document = parse_json(body)
        if not isinstance(document, dict) or not isinstance(document.get("views"), dict):
            raise InvalidInput('expected a JSON object {"views": {"<view>": <rows>, ...}}')
        parts: dict[str, Any] = document["views"]
        decode: Callable[[Any], Matrix] = _rows_from_json
    elif media_type == NPZ:
        parts = arrays_from_npz(body, max_bytes)
        decode = numeric_array
    else:
        raise UnsupportedMediaType(
            f"a multi-view chunk is application/json or application/x-npz; got '{media_type}'"
        )
    expected = [name for name, _ in views]
    missing = [name for name in expected if name not in parts]
    extra = sorted(set(parts) - set(expected))
    if missing or extra:
        raise InvalidInput(
            f"expected exactly the views {expected}; missing {missing}, unexpected {extra}"
        )
    matrices = []
    for name, dim in views:
        try:
            rows = validate_rows(decode(parts[name]), dim)
        except InvalidInput as exc:
            raise InvalidInput(f"view '{name}': {exc.detail}") from None
        _require_nonnegative(rows, name)
        matrices.append(rows)
    counts = {name: m.shape[0] for (name, _), m in zip(views, matrices, strict=True)}
    if len(set(counts.values())) > 1:
        raise InvalidInput(f"every view must have the same rows; got row counts {counts}")
    if any(sp.issparse(m) for m in matrices):
        return sp.hstack([sp.csr_matrix(m) for m in matrices], format="csr")
    return np.hstack([np.asarray(m, dtype=np.float64) for m in matrices])


def _require_nonnegative(rows: Matrix, view: str) -> None:
    csr = sp.csr_matrix(rows) if sp.issparse(rows) else None
    values = csr.data if csr is not None else np.asarray(rows)
    if values.size and values.min() < 0:
        flat = int(np.argmin(values.ravel()))
        if csr is not None:
            row = int(np.searchsorted(csr.indptr, flat, side="right")) - 1
            col = int(csr.indices[flat])
        else:
            row, col = divmod(flat, rows.shape[1])
        raise InvalidInput(
            f"view '{view}' must be nonnegative (NMF); got {values.ravel()[flat]} at row {row}, "
            f"column {col}"
        )


def arrays_from_npz(body: bytes, max_bytes: int) -> dict[str, Any]:
    """The arrays of a ``numpy.savez`` archive, never unpickled, after the zip-bomb check."""
    _check_inflation(body, max_bytes)
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InvalidInput("the .npz holds Python objects that would need pickle") from None
        raise BadRequest(f"body is not a numpy .npz archive: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise BadRequest(f"body is not a numpy .npz archive: {exc}") from None


def numeric_array(array: Any) -> np.ndarray:
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        kind = getattr(array, "dtype", type(array).__name__)
        raise InvalidInput(f"expected a numeric array (float, int or bool dtype); got {kind}")
    return array
