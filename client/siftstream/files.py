"""Data files for ``sift push`` and ``sift create --like``, read in chunks of rows.

* CSV: a header of feature names, then one row of numbers per line (``csv`` module; nothing is
  loaded whole);
* ``.npy``: one 2-D numeric array (memory-mapped: only the chunk being sent is in memory);
* ``.npz``: a ``scipy.sparse.save_npz`` matrix, or ``numpy.savez`` with ``rows`` (dense) or the
  CSR parts ``data``, ``indices``, ``indptr``, ``shape``, and optionally an array of labels (or
  of targets);
* Parquet: numeric columns (needs pyarrow: ``pip install pyarrow``), read by record
  batches.

``labels`` names the column (CSV, Parquet) or array (``.npz``) that holds the labels, ``target``
the one that holds a numeric target; that column is then not a feature. A CSV label that reads
as an integer (``-?[0-9]+``) is sent as one, any other as a string: the same rule for every
row, however the file is cut into chunks. A target is a finite number.

Files are opened with ``allow_pickle=False``: nothing is ever unpickled.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from siftstream._inputs import LABELS, TARGETS, Label, Matrix, Side, Values

_INTEGER = re.compile(r"-?[0-9]+")
_CSR_PARTS = ("data", "indices", "indptr", "shape")
SUFFIXES = (".csv", ".npy", ".npz", ".parquet")


class FileFormatError(ValueError):
    """A data file that cannot be read as the format its name says (the message says why)."""


@dataclass(frozen=True)
class Block:
    """Consecutive rows of a file and, if the file has them, their labels or targets (as the
    file's ``side`` reads them)."""

    rows: Matrix
    values: Values | None


class DataFile:
    """A data file: its shape, feature names and rows in blocks (``blocks``). ``column`` names
    the column (``.npz``: array) of what the rows carry beside them, ``side`` says what that
    is: labels (``LABELS``) or a target (``TARGETS``)."""

    def __init__(self, path: Path, column: str | None = None, side: Side = LABELS) -> None:
        self.path = path
        self.column = column
        self.side = side

    #: Rows in the file (CSV: counted by lines, so a quoted value with a line break miscounts).
    n_rows: int
    n_features: int
    feature_names: list[str] | None = None

    def blocks(self, chunk_rows: int) -> Iterator[Block]:
        raise NotImplementedError

    def column_label(self, column: int) -> str:
        """How a message names feature column ``column`` (0-based): 1-based, with its name."""
        names = self.feature_names
        named = f" {names[column]!r}" if names is not None and column < len(names) else ""
        return f"column {column + 1}{named}"

    def row_label(self, row: int) -> str:
        """How a message names data row ``row`` (0-based, counting only data rows)."""
        return f"row {row + 1}"

    def finite(self, block: Block, first_row: int) -> Block:
        """``block``, unless a value is NaN or infinite (which the service refuses): then a
        FileFormatError naming the file's row (CSV: line) and column, as editors count."""
        rows = block.rows
        values = rows.data if sp.issparse(rows) else rows
        if np.isfinite(values).all():
            return block
        if sp.issparse(rows):
            dense_bad = sp.csr_matrix(rows)
            flat = int(np.flatnonzero(~np.isfinite(dense_bad.data))[0])
            row = int(np.searchsorted(dense_bad.indptr, flat, side="right")) - 1
            column, value = int(dense_bad.indices[flat]), dense_bad.data[flat]
        else:
            row, column = (int(i) for i in np.argwhere(~np.isfinite(rows))[0])
            value = rows[row, column]
        raise FileFormatError(
            f"{self.path}, {self.row_label(first_row + row)}, {self.column_label(column)}: "
            f"{value} is not a finite number (the service takes no NaN or infinity)"
        )

    def read_all(self) -> Block:
        """Every row at once (for feature-column selectors, which take the file's columns)."""
        blocks = list(self.blocks(max(self.n_rows, 1)))
        if not blocks:
            raise FileFormatError(f"{self.path}: no rows")
        if len(blocks) == 1:
            return blocks[0]
        rows: Matrix = (
            sp.vstack([b.rows for b in blocks], format="csr")
            if sp.issparse(blocks[0].rows)
            else np.vstack([b.rows for b in blocks])
        )
        return Block(rows, _joined([b.values for b in blocks]))


def _joined(parts: list[Values | None]) -> Values | None:
    if parts[0] is None:
        return None
    if isinstance(parts[0], np.ndarray):
        return np.concatenate([np.asarray(part) for part in parts])
    return [x for part in parts for x in part or []]


def open_data(path: str | Path, labels: str | None = None, target: str | None = None) -> DataFile:
    """The reader for ``path``, chosen by its suffix; ``labels`` or ``target`` names the column
    (array) that holds the labels or the target (not both: rows carry one of them)."""
    if labels is not None and target is not None:
        raise ValueError(
            f"name a labels column or a target column, not both; got labels={labels!r} and "
            f"target={target!r}"
        )
    path = Path(path)
    if not path.is_file():
        raise FileFormatError(f"{path}: no such file")
    readers: dict[str, type[DataFile]] = {
        ".csv": CsvFile,
        ".npy": NpyFile,
        ".npz": NpzFile,
        ".parquet": ParquetFile,
    }
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise FileFormatError(
            f"{path}: expected a file ending in {', '.join(SUFFIXES)}; got '{path.suffix}'"
        )
    return reader(path, target, TARGETS) if target is not None else reader(path, labels, LABELS)


def _csv_label(text: str) -> Label:
    return int(text) if _INTEGER.fullmatch(text.strip()) else text


class CsvFile(DataFile):
    def __init__(self, path: Path, column: str | None = None, side: Side = LABELS) -> None:
        super().__init__(path, column, side)
        with open(path, newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), None)
            if not header:
                raise FileFormatError(f"{path}: empty; expected a header of feature names")
            lines = sum(1 for line in handle if line.strip())
        self.header = [name.strip() for name in header]
        self.side_position: int | None = None
        if column is not None:
            if column not in self.header:
                raise FileFormatError(
                    f"{path}: no column {column!r} to take {side.key} from; columns: {self.header}"
                )
            self.side_position = self.header.index(column)
        self.names = [n for i, n in enumerate(self.header) if i != self.side_position]
        self.feature_names = self.names
        self.n_features = len(self.names)
        self.n_rows = lines

    def blocks(self, chunk_rows: int) -> Iterator[Block]:
        with open(self.path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            next(reader)
            cells: list[list[str]] = []
            sides: list[str] = []
            # The file's line of every data row (blank lines are skipped; a quoted value may
            # span lines): what an editor shows.
            self._lines: list[int] = []
            rows_before = 0
            for record in reader:
                if not record or not any(cell.strip() for cell in record):
                    continue
                if len(record) != len(self.header):
                    raise FileFormatError(
                        f"{self.path}, line {reader.line_num}: expected {len(self.header)} "
                        f"values (as the header has); got {len(record)}"
                    )
                if self.side_position is not None:
                    sides.append(record.pop(self.side_position))
                cells.append(record)
                self._lines.append(reader.line_num)
                if len(cells) == chunk_rows:
                    yield self._block(cells, sides, rows_before)
                    rows_before += len(cells)
                    cells, sides, self._lines = [], [], []
            if cells:
                yield self._block(cells, sides, rows_before)

    def row_label(self, row: int) -> str:
        return f"line {self._line_of(row)}"

    def _line_of(self, row: int) -> int:
        """The file line of data row ``row`` (within the block being read)."""
        return self._lines[row - self._first_row]

    def _block(self, cells: list[list[str]], sides: list[str], rows_before: int) -> Block:
        self._first_row = rows_before
        try:
            rows = np.array(cells, dtype=np.float64)
        except ValueError:
            raise FileFormatError(self._bad_value(cells, rows_before)) from None
        values = None if self.side_position is None else self._side_values(sides, rows_before)
        return self.finite(Block(rows, values), rows_before)

    def _side_values(self, texts: list[str], rows_before: int) -> Values:
        """The labels column's cells as labels (integers where they read as one), or the
        target column's as finite numbers (else a FileFormatError naming the line)."""
        if self.side is LABELS:
            return [_csv_label(text) for text in texts]
        where = f"target column {self.column!r}"
        targets = np.empty(len(texts), dtype=np.float64)
        for offset, text in enumerate(texts):
            try:
                targets[offset] = float(text)
            except ValueError:
                raise FileFormatError(
                    f"{self.path}, {self.row_label(rows_before + offset)}, {where}: {text!r} "
                    "is not a number"
                ) from None
            if not np.isfinite(targets[offset]):
                raise FileFormatError(
                    f"{self.path}, {self.row_label(rows_before + offset)}, {where}: "
                    f"{text.strip()} is not a finite number (the service takes no NaN or "
                    "infinity)"
                )
        return targets

    def _bad_value(self, cells: list[list[str]], rows_before: int) -> str:
        for offset, record in enumerate(cells):
            for column, cell in enumerate(record):
                try:
                    float(cell)
                except ValueError:
                    return (
                        f"{self.path}, {self.row_label(rows_before + offset)}, "
                        f"{self.column_label(column)}: {cell!r} is not a number"
                    )
        return f"{self.path}: a value is not a number"  # pragma: no cover


class NpyFile(DataFile):
    def __init__(self, path: Path, column: str | None = None, side: Side = LABELS) -> None:
        super().__init__(path, column, side)
        if column is not None:
            raise FileFormatError(
                f"{path}: a .npy holds one array and no {side.key}; use a CSV or Parquet file "
                f"with a {side.one} column, or an .npz with rows and {side.key}"
            )
        try:
            self.array = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError as exc:
            raise FileFormatError(f"{path}: not a numeric .npy file: {exc}") from None
        if self.array.ndim != 2 or self.array.dtype.kind not in "biuf":
            raise FileFormatError(
                f"{path}: expected a 2-D numeric array (rows x features); got "
                f"{self.array.ndim}-D of {self.array.dtype}"
            )
        self.n_rows, self.n_features = (int(n) for n in self.array.shape)

    def blocks(self, chunk_rows: int) -> Iterator[Block]:
        for start in range(0, self.n_rows, chunk_rows):
            rows = np.array(self.array[start : start + chunk_rows], dtype=np.float64)
            yield self.finite(Block(rows, None), start)


class NpzFile(DataFile):
    def __init__(self, path: Path, column: str | None = None, side: Side = LABELS) -> None:
        super().__init__(path, column, side)
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {key: archive[key] for key in archive.files}
        except ValueError as exc:
            raise FileFormatError(f"{path}: not a numeric .npz file: {exc}") from None
        self.side_values: Values | None = None
        if column is not None:
            if column not in arrays:
                raise FileFormatError(
                    f"{path}: no array {column!r} to take {side.key} from; arrays: {sorted(arrays)}"
                )
            self.side_values = _read_side(path, f"array {column!r}", side, arrays.pop(column))
        self.matrix = _npz_matrix(path, arrays)
        self.n_rows, self.n_features = (int(n) for n in self.matrix.shape)
        if self.side_values is not None and len(self.side_values) != self.n_rows:
            raise FileFormatError(
                f"{path}: {len(self.side_values)} {side.key} for {self.n_rows} rows"
            )

    def blocks(self, chunk_rows: int) -> Iterator[Block]:
        for start in range(0, self.n_rows, chunk_rows):
            stop = start + chunk_rows
            values = None if self.side_values is None else self.side_values[start:stop]
            yield self.finite(Block(self.matrix[start:stop], values), start)


def _read_side(path: Path, where: str, side: Side, raw: Any) -> Values:
    """A file's labels or targets, as ``side`` reads them; a FileFormatError saying where."""
    try:
        return side.of(raw)
    except ValueError as exc:
        raise FileFormatError(f"{path}, {where}: {exc}") from None


def _npz_matrix(path: Path, arrays: dict[str, np.ndarray]) -> Matrix:
    """The matrix of an ``.npz``: ``save_npz`` (any of its formats), CSR parts, or ``rows``."""
    if "rows" in arrays:
        rows = arrays["rows"]
        if rows.ndim != 2 or rows.dtype.kind not in "biuf":
            raise FileFormatError(f"{path}: 'rows' must be a 2-D numeric array")
        return np.asarray(rows, dtype=np.float64)
    if "format" in arrays:  # scipy.sparse.save_npz
        try:
            return sp.csr_matrix(sp.load_npz(path), dtype=np.float64)
        except (ValueError, KeyError) as exc:
            raise FileFormatError(f"{path}: not a scipy.sparse.save_npz file: {exc}") from None
    if all(part in arrays for part in _CSR_PARTS):
        try:
            shape = tuple(int(n) for n in arrays["shape"])
            return sp.csr_matrix(
                (arrays["data"], arrays["indices"], arrays["indptr"]),
                shape=shape,
                dtype=np.float64,
            )
        except (ValueError, TypeError) as exc:
            raise FileFormatError(f"{path}: inconsistent CSR parts: {exc}") from None
    raise FileFormatError(
        f"{path}: expected a scipy.sparse.save_npz matrix, 'rows', or the CSR parts "
        f"{', '.join(_CSR_PARTS)}; got arrays {sorted(arrays)}"
    )


class ParquetFile(DataFile):
    def __init__(self, path: Path, column: str | None = None, side: Side = LABELS) -> None:
        super().__init__(path, column, side)
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise FileFormatError(
                f"{path}: reading Parquet needs pyarrow: pip install pyarrow"
            ) from None
        self.file: Any = pq.ParquetFile(path)
        names = [str(n) for n in self.file.schema_arrow.names]
        if column is not None and column not in names:
            raise FileFormatError(
                f"{path}: no column {column!r} to take {side.key} from; columns: {names}"
            )
        self.columns = [n for n in names if n != column]
        self.feature_names = self.columns
        self.n_features = len(self.columns)
        self.n_rows = int(self.file.metadata.num_rows)

    def blocks(self, chunk_rows: int) -> Iterator[Block]:
        rows_before = 0
        for batch in self.file.iter_batches(batch_size=chunk_rows):
            try:
                rows = np.column_stack(
                    [
                        batch.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
                        for name in self.columns
                    ]
                )
            except (ValueError, TypeError) as exc:
                raise FileFormatError(
                    f"{self.path}: a feature column is not numeric: {exc}"
                ) from None
            values = None
            if self.column is not None:
                raw = batch.column(self.column).to_numpy(zero_copy_only=False)
                values = _read_side(self.path, f"column {self.column!r}", self.side, raw)
            yield self.finite(Block(rows, values), rows_before)
            rows_before += int(rows.shape[0])
