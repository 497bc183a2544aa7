"""Data files for ``sift push``: CSV, .npy, .npz and Parquet read in chunks, labels or a target
taken out, and errors that say where; the progress line."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from siftstream.files import FileFormatError, open_data
from siftstream.progress import Progress, duration


def stacked(blocks: list[np.ndarray | sp.csr_matrix]) -> np.ndarray:
    return np.vstack([b if isinstance(b, np.ndarray) else b.toarray() for b in blocks])


def test_csv_header_names_labels_and_chunks(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,label,b\n1,7,2.5\n3,spam,-4\n\n5,-2,6e1\n")
    data = open_data(path, labels="label")
    assert (data.n_rows, data.n_features, data.feature_names) == (3, 2, ["a", "b"])
    blocks = list(data.blocks(2))
    assert [b.rows.shape for b in blocks] == [(2, 2), (1, 2)]
    np.testing.assert_array_equal(stacked([b.rows for b in blocks]), [[1, 2.5], [3, -4], [5, 60]])
    # A label that reads as an integer is one, whatever chunk it falls in; others are strings.
    assert [x for b in blocks for x in b.values or []] == [7, "spam", -2]


def test_csv_without_labels_and_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("x,y\n1,2\n3,oops\n")
    data = open_data(path)
    assert data.feature_names == ["x", "y"]
    # The file's line and the column's position and name, counted from 1 as editors do.
    with pytest.raises(FileFormatError, match=r"line 3, column 2 'y': 'oops' is not a number"):
        list(data.blocks(10))
    path.write_text("x,y\n1,2\n\n3,4\n5,nan\n")
    with pytest.raises(FileFormatError, match=r"line 5, column 2 'y': nan is not a finite"):
        list(open_data(path).blocks(2))
    path.write_text("x,y\n1,2\n3\n")
    with pytest.raises(FileFormatError, match="line 3: expected 2 values"):
        list(open_data(path).blocks(10))
    with pytest.raises(FileFormatError, match="no column 'label'"):
        open_data(path, labels="label")
    path.write_text("")
    with pytest.raises(FileFormatError, match="header"):
        open_data(path)


def test_npy_is_read_in_blocks_and_has_no_labels(tmp_path: Path) -> None:
    path = tmp_path / "rows.npy"
    array = np.arange(30, dtype=np.int32).reshape(10, 3)
    np.save(path, array)
    data = open_data(path)
    blocks = [b.rows for b in data.blocks(4)]
    assert [b.shape[0] for b in blocks] == [4, 4, 2] and blocks[0].dtype == np.float64
    np.testing.assert_array_equal(stacked(blocks), array)
    with pytest.raises(FileFormatError, match="no labels"):
        open_data(path, labels="labels")
    np.save(path, np.arange(5))
    with pytest.raises(FileFormatError, match="2-D numeric"):
        open_data(path)
    np.save(path, np.array([{"a": 1}], dtype=object))
    with pytest.raises(FileFormatError, match=r"not a numeric \.npy"):
        open_data(path)


@pytest.mark.parametrize("layout", ["save_npz-csr", "save_npz-csc", "csr-parts", "rows"])
def test_npz_layouts_with_labels(tmp_path: Path, layout: str) -> None:
    matrix = sp.random(9, 5, density=0.4, format="csr", random_state=1)
    labels = np.array(["a", "b", "c"] * 3)
    path = tmp_path / "chunk.npz"
    if layout.startswith("save_npz"):
        sp.save_npz(path, matrix.asformat(layout.split("-")[1]))
    elif layout == "csr-parts":
        np.savez(
            path,
            data=matrix.data,
            indices=matrix.indices,
            indptr=matrix.indptr,
            shape=np.array(matrix.shape),
            labels=labels,
        )
    else:
        np.savez(path, rows=matrix.toarray(), labels=labels)
    has_labels = layout in ("csr-parts", "rows")
    data = open_data(path, labels="labels" if has_labels else None)
    assert (data.n_rows, data.n_features) == (9, 5)
    blocks = list(data.blocks(4))
    np.testing.assert_allclose(stacked([b.rows for b in blocks]), matrix.toarray())
    if has_labels:
        assert [x for b in blocks for x in b.values or []] == labels.tolist()


def test_npz_without_a_matrix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.npz"
    np.savez(path, something=np.ones(3))
    with pytest.raises(FileFormatError, match=r"expected a scipy\.sparse\.save_npz matrix"):
        open_data(path)


def test_parquet_batches_and_labels(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    table = pa.table({"a": [1.0, 2.0, 3.0], "b": [4, 5, 6], "label": ["x", "y", "x"]})
    pq.write_table(table, path, row_group_size=2)
    data = open_data(path, labels="label")
    assert (data.n_rows, data.feature_names) == (3, ["a", "b"])
    blocks = list(data.blocks(2))
    np.testing.assert_array_equal(stacked([b.rows for b in blocks]), [[1, 4], [2, 5], [3, 6]])
    assert [x for b in blocks for x in b.values or []] == ["x", "y", "x"]
    with pytest.raises(FileFormatError, match="not numeric"):
        list(open_data(path).blocks(2))  # the label column read as a feature


def test_a_target_column_or_array_in_every_format(tmp_path: Path) -> None:
    """A target is read as float64 numbers (integers too), one per row, whatever the chunks;
    the column is not a feature."""
    csv = tmp_path / "data.csv"
    csv.write_text("a,price,b\n1,7,2.5\n3,-0.25,-4\n\n5,1e3,6e1\n")
    npz = tmp_path / "data.npz"
    np.savez(npz, rows=np.array([[1, 2.5], [3, -4], [5, 60]]), y=np.array([7, -0.25, 1e3]))
    parquet = tmp_path / "data.parquet"
    table = pa.table({"a": [1.0, 3.0, 5.0], "price": [7, 0, 1000], "b": [2.5, -4.0, 60.0]})
    pq.write_table(table, parquet, row_group_size=2)
    for path, column, targets in (
        (csv, "price", [7.0, -0.25, 1e3]),
        (npz, "y", [7.0, -0.25, 1e3]),
        (parquet, "price", [7.0, 0.0, 1e3]),
    ):
        data = open_data(path, target=column)
        assert (data.n_rows, data.n_features) == (3, 2)
        blocks = list(data.blocks(2))
        np.testing.assert_array_equal(
            stacked([b.rows for b in blocks]), [[1, 2.5], [3, -4], [5, 60]]
        )
        values = [b.values for b in blocks]
        assert all(isinstance(v, np.ndarray) and v.dtype == np.float64 for v in values)
        np.testing.assert_array_equal(np.concatenate(values), targets)  # type: ignore[arg-type]
        whole = data.read_all().values
        assert isinstance(whole, np.ndarray) and whole.tolist() == targets
    assert open_data(csv, target="price").feature_names == ["a", "b"]


def test_a_target_that_is_not_a_finite_number_is_refused_where_it_is(tmp_path: Path) -> None:
    csv = tmp_path / "data.csv"
    csv.write_text("a,price\n1,2\n\n3,cheap\n")
    with pytest.raises(
        FileFormatError, match=r"line 4, target column 'price': 'cheap' is not a number"
    ):
        list(open_data(csv, target="price").blocks(10))
    csv.write_text("a,price\n1,2\n3,4\n5,inf\n")
    with pytest.raises(FileFormatError, match=r"line 4, target column 'price': inf is not a fin"):
        list(open_data(csv, target="price").blocks(2))
    with pytest.raises(FileFormatError, match="no column 'cost' to take targets from"):
        open_data(csv, target="cost")
    npz = tmp_path / "data.npz"
    np.savez(npz, rows=np.ones((2, 2)), y=np.array(["a", "b"]))
    with pytest.raises(FileFormatError, match="array 'y': targets must be numbers; target 0"):
        open_data(npz, target="y")
    np.savez(npz, rows=np.ones((2, 2)), y=np.ones(3))
    with pytest.raises(FileFormatError, match="3 targets for 2 rows"):
        open_data(npz, target="y")
    parquet = tmp_path / "data.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0], "price": [1.0, None]}), parquet)
    with pytest.raises(FileFormatError, match="column 'price': targets must be finite numbers"):
        list(open_data(parquet, target="price").blocks(2))
    np.save(tmp_path / "rows.npy", np.ones((2, 2)))
    with pytest.raises(FileFormatError, match=r"a \.npy holds one array and no targets"):
        open_data(tmp_path / "rows.npy", target="y")
    with pytest.raises(ValueError, match="a labels column or a target column, not both"):
        open_data(csv, labels="a", target="price")


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("1,2\n")
    with pytest.raises(FileFormatError, match="expected a file ending in"):
        open_data(path)


def test_progress_line_on_a_terminal_and_the_summary() -> None:
    now = [0.0]
    screen = io.StringIO()
    progress = Progress(screen, 1000, "rows", live=True, clock=lambda: now[0])
    progress.skip(200)  # acknowledged by an earlier run: done, but not part of the rate
    now[0] = 2.0
    progress.advance(300)
    assert progress.line() == (
        "[##############..............] 500/1,000 rows  150 rows/s  ETA 0:03"
    )
    assert screen.getvalue().startswith("\r[")
    progress.finish("done")
    assert screen.getvalue().endswith("\ndone\n")

    plain = io.StringIO()
    quiet = Progress(plain, None, "rows", live=False, clock=lambda: now[0])
    quiet.advance(10)
    quiet.finish("pushed 10 rows")
    assert plain.getvalue() == "pushed 10 rows\n"
    assert duration(3725) == "1:02:05" and duration(65) == "1:05"
